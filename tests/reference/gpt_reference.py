#!/usr/bin/env python3
# Reference test: an independent, plain PyTorch training loop (HF Trainer semantics, sharing no code
# with hftrain) must agree with `hftrain train` step by step -- per-step loss,
# grad_norm, learning_rate and epoch -- for a small `gpt` on `digit_reversal` data, starting from the
# same weights (written here as model.safetensors and loaded through model.from_pretrained).
# Needs only Python 3 and torch (no transformers, no safetensors package). Exit 0 = agreement.
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("gpt_reference: this Python (%s) cannot import torch; run the test with a Python that has torch "
             "(configure with -DHFTRAIN_REFERENCE_PYTHON=/path/to/python3)" % sys.executable)

MASK64 = 0xFFFFFFFFFFFFFFFF
LOSS_ABS_TOL = 5e-5   # hftrain logs the loss rounded to 4 decimals: half a unit in the last place ...
LOSS_REL_TOL = 1e-5   # ... plus the same relative slack the other quantities get
REL_TOL = 1e-5        # grad_norm and learning_rate (not rounded in the log)

# ---- the cases ------------------------------------------------------------------------------------
# Shared model and data shape; each case picks the loop settings it exercises.
MODEL = {"n_layer": 2, "n_head": 4, "n_embd": 32}
NUM_DIGITS = 4
CASES = [
    {
        # GA=1, clipping on; 200 examples / 16 = 13 batches, the last one of 8. Pre-clip norms here run
        # from about 0.8 to 2.2, so max_grad_norm 1.25 clips some steps and leaves others alone.
        "name": "ga1_clip",
        "data": {"train_size": 200, "seed": 7},
        "training": {"per_device_train_batch_size": 16, "gradient_accumulation_steps": 1, "max_steps": 55,
                     "learning_rate": 3e-3, "weight_decay": 0.1, "adam_beta1": 0.9, "adam_beta2": 0.999,
                     "adam_epsilon": 1e-8, "max_grad_norm": 1.25, "warmup_steps": 5, "seed": 123},
        "init_seed": 1,
        "expect_clipping": True,
    },
    {
        # GA=3 over 100 examples / 8 = 13 batches (the last of 4): windows of 3,3,3,3 then a short window
        # of 1 in every epoch, 5 updates per epoch, so 60 steps span 12 epochs. No clipping; warmup and
        # weight decay on; a separate data_seed and non-default betas/eps to check they are honoured.
        "name": "ga3_short_window",
        "data": {"train_size": 100, "seed": 11},
        "training": {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 3, "max_steps": 60,
                     "learning_rate": 2e-3, "weight_decay": 0.05, "adam_beta1": 0.85, "adam_beta2": 0.98,
                     "adam_epsilon": 1e-6, "max_grad_norm": 0.0, "warmup_steps": 10, "seed": 5,
                     "data_seed": 99},
        "init_seed": 2,
        "expect_clipping": False,
    },
]


# ---- data: digit_reversal -------------------------------------------------------------------------
class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


SPLIT_SALT = {"train": 1, "eval": 2, "test": 3}


def example_stream(seed, split, index):
    g = SplitMix64(((seed * 0x100000001B3) & MASK64) ^ (SPLIT_SALT[split] << 56))
    g.state ^= (index * 0xD1B54A32D192ED03) & MASK64
    g.next()
    return g


def digit_reversal_example(seed, index, num_digits):
    g = example_stream(seed, "train", index)
    digits = [g.next() % 10 for _ in range(num_digits)]
    ids = digits + [10] + digits[::-1]  # tokens 0-9 are digits, 10 is '='
    labels = [-100] * (num_digits + 1) + ids[num_digits + 1:]
    return ids, labels


# ---- model: GPT-2 shaped, pre-LN, tied LM head -----------------------------------------------------
class Attention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = Attention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab_size, n_embd)
        self.transformer.wpe = nn.Embedding(block_size, n_embd)
        self.transformer.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.transformer.ln_f = nn.LayerNorm(n_embd, eps=1e-5)

    def forward(self, input_ids, labels):
        T = input_ids.size(1)
        x = self.transformer.wte(input_ids) + self.transformer.wpe(torch.arange(T, dtype=torch.long))
        for block in self.transformer.h:
            x = block(x)
        logits = F.linear(self.transformer.ln_f(x), self.transformer.wte.weight)  # tied head
        # causal LM: position t predicts token t+1
        shift_logits = logits[:, :-1, :].reshape(-1, logits.size(-1))
        return F.cross_entropy(shift_logits, labels[:, 1:].reshape(-1), ignore_index=-100)


def initialise(model, seed):
    # Any deterministic init works (hftrain loads it); this one is GPT-2-like but with perturbed
    # LayerNorm parameters and biases, so that every parameter kind carries a non-trivial value.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))


def is_no_decay(name):
    return name.endswith("bias") or ".ln_" in name or name.startswith("transformer.ln_")


# ---- safetensors by hand --------------------------------------------------------------------------
def write_safetensors(path, named):
    header, blobs, offset = {}, [], 0
    for name, t in named:
        t = t.detach().contiguous().to(torch.float32)
        blob = struct.pack("<%df" % t.numel(), *t.flatten().tolist())
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode("utf-8"))
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] != "F32":
            raise RuntimeError("%s: tensor %s has dtype %s, expected F32" % (path, name, e["dtype"]))
        b, en = e["data_offsets"]
        count = (en - b) // 4
        vals = struct.unpack("<%df" % count, data[base + b:base + en])
        out[name] = torch.tensor(vals, dtype=torch.float32).reshape(e["shape"])
    return out


# ---- the reference loop ---------------------------------------------------------------------------
def linear_schedule(warmup, total):
    def factor(s):
        if s < warmup:
            return s / max(1, warmup)
        return max(0.0, (total - s) / max(1, total - warmup))
    return factor


def total_grad_norm(params):
    return torch.norm(torch.stack([torch.norm(p.grad.detach(), 2) for p in params if p.grad is not None]), 2)


def reference_run(case, init_state):
    tr = case["training"]
    n = case["data"]["train_size"]
    bs, ga, max_steps = tr["per_device_train_batch_size"], tr["gradient_accumulation_steps"], tr["max_steps"]
    data_seed = tr.get("data_seed", -1)
    shuffle_seed = data_seed if data_seed >= 0 else tr["seed"]
    examples = [digit_reversal_example(case["data"]["seed"], i, NUM_DIGITS) for i in range(n)]

    model = GPT(11, 2 * NUM_DIGITS + 1, **MODEL)
    model.load_state_dict(init_state)
    model.train()
    named = list(model.named_parameters())
    params = [p for _, p in named]
    groups = [
        {"params": [p for nm, p in named if not is_no_decay(nm)], "weight_decay": tr["weight_decay"]},
        {"params": [p for nm, p in named if is_no_decay(nm)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=tr["learning_rate"], betas=(tr["adam_beta1"], tr["adam_beta2"]),
                            eps=tr["adam_epsilon"], foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_schedule(tr["warmup_steps"], max_steps))

    len_dl = (n + bs - 1) // bs  # drop_last false
    log, step, epoch = [], 0, 0
    while step < max_steps:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(shuffle_seed + epoch)).tolist()
        batches = [order[i:i + bs] for i in range(0, n, bs)]
        micro = 0
        while micro < len_dl and step < max_steps:
            window = min(ga, len_dl - micro)  # the epoch's last window may be short
            step_loss = 0.0
            for idx in batches[micro:micro + window]:
                ids = torch.tensor([examples[i][0] for i in idx], dtype=torch.long)
                labels = torch.tensor([examples[i][1] for i in idx], dtype=torch.long)
                loss = model(ids, labels) / window
                loss.backward()
                step_loss += loss.item()
            micro += window
            if tr["max_grad_norm"] > 0:
                norm = torch.nn.utils.clip_grad_norm_(params, tr["max_grad_norm"]).item()
            else:
                norm = total_grad_norm(params).item()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            log.append({"step": step, "loss": step_loss, "grad_norm": norm,
                        "learning_rate": sched.get_last_lr()[0], "epoch": epoch + micro / len_dl})
        epoch += 1
    return log, {nm: p.detach().clone() for nm, p in named}


# ---- hftrain side ---------------------------------------------------------------------------------
def yaml_value(v):
    return json.dumps(v)  # JSON scalars are valid YAML scalars


def write_spec(path, case, init_dir, out_dir):
    tr = dict(case["training"])
    tr.update({"output_dir": out_dir, "overwrite_output_dir": True, "logging_steps": 1,
               "eval_strategy": "no", "save_strategy": "no"})
    data = {"type": "digit_reversal", "num_digits": NUM_DIGITS, "eval_size": 0, "test_size": 0}
    data.update(case["data"])
    model = {"type": "gpt", **MODEL, "dropout": 0.0, "from_pretrained": init_dir}
    lines = []
    for section, values in (("model", model), ("data", data), ("training", tr)):
        lines.append(section + ":")
        lines += ["  %s: %s" % (k, yaml_value(v)) for k, v in values.items()]
    lines += ["scheduler:", "  type: linear", "optimizer:", "  type: adamw"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def start_hftrain(hftrain, case_dir):
    log = open(os.path.join(case_dir, "hftrain.log"), "w")
    proc = subprocess.Popen([hftrain, "train", "spec.yaml"], cwd=case_dir, stdout=log, stderr=subprocess.STDOUT)
    return proc, log


def finish_hftrain(proc, log, case_dir, out_dir):
    rc = proc.wait(timeout=500)
    log.close()
    if rc != 0:
        with open(os.path.join(case_dir, "hftrain.log")) as f:
            tail = f.read()[-4000:]
        raise SystemExit("FAIL: hftrain exited with status %d; its output ends with:\n%s" % (rc, tail))
    with open(os.path.join(out_dir, "trainer_state.json")) as f:
        state = json.load(f)
    return [e for e in state["log_history"] if "loss" in e], read_safetensors(os.path.join(out_dir, "model.safetensors"))


# ---- comparison -----------------------------------------------------------------------------------
def round4(x):
    # hftrain's (and HF's) logged loss: round half away from zero to 4 decimals
    return math.copysign(math.floor(abs(x) * 1e4 + 0.5), x) / 1e4


def rel_err(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(case, ref_log, hf_log, ref_weights, hf_weights):
    problems = []
    name, tr = case["name"], case["training"]
    if len(hf_log) != len(ref_log) or [e["step"] for e in hf_log] != [e["step"] for e in ref_log]:
        problems.append("hftrain logged steps %s, the reference %s" %
                        ([e["step"] for e in hf_log], [e["step"] for e in ref_log]))
        return problems, {}
    stats = {"loss_abs": 0.0, "loss_vs_rounded": 0.0, "grad_norm_rel": 0.0, "lr_rel": 0.0, "epoch_abs": 0.0}
    for r, h in zip(ref_log, hf_log):
        s = r["step"]
        d_loss = abs(h["loss"] - r["loss"])
        d_gn = rel_err(h["grad_norm"], r["grad_norm"])
        d_lr = abs(h["learning_rate"] - r["learning_rate"]) / max(abs(r["learning_rate"]), 1e-12) \
            if r["learning_rate"] != 0 else abs(h["learning_rate"])
        d_ep = abs(h["epoch"] - r["epoch"])
        stats["loss_abs"] = max(stats["loss_abs"], d_loss)
        stats["loss_vs_rounded"] = max(stats["loss_vs_rounded"], abs(h["loss"] - round4(r["loss"])))
        stats["grad_norm_rel"] = max(stats["grad_norm_rel"], d_gn)
        stats["lr_rel"] = max(stats["lr_rel"], d_lr)
        stats["epoch_abs"] = max(stats["epoch_abs"], d_ep)
        if d_loss > LOSS_ABS_TOL + LOSS_REL_TOL * abs(r["loss"]):
            problems.append("step %d: loss hftrain %.6f vs reference %.8f" % (s, h["loss"], r["loss"]))
        if d_gn > REL_TOL:
            problems.append("step %d: grad_norm hftrain %.9g vs reference %.9g (rel %.2e)" %
                            (s, h["grad_norm"], r["grad_norm"], d_gn))
        if d_lr > REL_TOL:
            problems.append("step %d: learning_rate hftrain %.9g vs reference %.9g" %
                            (s, h["learning_rate"], r["learning_rate"]))
        if d_ep > 1e-9:
            problems.append("step %d: epoch hftrain %.9g vs reference %.9g" % (s, h["epoch"], r["epoch"]))
    # Final weights are reported, not judged: they match bit for bit unless a 1-ulp difference
    # creeps in (see README: the clip coefficient), which Adam then amplifies over the steps.
    w_abs = 0.0
    if set(hf_weights) != set(ref_weights):
        problems.append("final model.safetensors tensors differ: %s" % sorted(set(hf_weights) ^ set(ref_weights)))
    else:
        for k, v in ref_weights.items():
            w_abs = max(w_abs, (hf_weights[k] - v).abs().max().item())
    stats["weights_abs"] = w_abs
    clipped = sum(1 for r in ref_log if tr["max_grad_norm"] > 0 and r["grad_norm"] > tr["max_grad_norm"])
    stats["clipped_steps"] = clipped
    if case["expect_clipping"] and not 0 < clipped < len(ref_log):
        problems.append("case should clip on some steps but not all; clipped %d of %d" % (clipped, len(ref_log)))
    if len(ref_log) < 50:
        problems.append("only %d steps compared; the test needs at least 50" % len(ref_log))
    return problems, stats


def main():
    ap = argparse.ArgumentParser(description="Check hftrain's training loop against a plain PyTorch loop.")
    ap.add_argument("--hftrain", required=True, help="the hftrain binary")
    ap.add_argument("--workdir", required=True, help="scratch directory (recreated)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    hftrain = os.path.abspath(args.hftrain)
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    t0 = time.time()
    failures = 0
    for case in CASES:
        case_dir = os.path.join(work, case["name"])
        init_dir, out_dir = os.path.join(case_dir, "init"), os.path.join(case_dir, "out")
        os.makedirs(init_dir)
        model = GPT(11, 2 * NUM_DIGITS + 1, **MODEL)
        initialise(model, case["init_seed"])
        init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        write_safetensors(os.path.join(init_dir, "model.safetensors"), list(model.named_parameters()))
        write_spec(os.path.join(case_dir, "spec.yaml"), case, init_dir, out_dir)

        proc, log = start_hftrain(hftrain, case_dir)  # runs while the reference computes
        ref_log, ref_weights = reference_run(case, init_state)
        hf_log, hf_weights = finish_hftrain(proc, log, case_dir, out_dir)

        problems, stats = compare(case, ref_log, hf_log, ref_weights, hf_weights)
        if stats:
            print("%-18s steps %d  loss max abs err %.2e (%.1e after rounding the reference as hftrain does)  grad_norm max rel err %.2e  lr max rel err %.2e  "
                  "epoch max abs err %.1e  clipped steps %d  [final weights max abs diff %.2e, reported only]" %
                  (case["name"], len(ref_log), stats["loss_abs"], stats["loss_vs_rounded"], stats["grad_norm_rel"], stats["lr_rel"],
                   stats["epoch_abs"], stats["clipped_steps"], stats["weights_abs"]))
        for p in problems[:20]:
            print("  MISMATCH %s: %s" % (case["name"], p))
        if len(problems) > 20:
            print("  ... and %d more" % (len(problems) - 20))
        failures += bool(problems)
    print("done in %.1f s" % (time.time() - t0))
    if failures:
        sys.exit("FAIL: %d case(s) disagree with the PyTorch reference" % failures)
    print("PASS: hftrain agrees with the PyTorch reference loop")


if __name__ == "__main__":
    main()
