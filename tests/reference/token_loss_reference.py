#!/usr/bin/env python3
# Reference test for the token-exact loss of an optimizer step (HF >= 4.46: num_items_in_batch and
# average_tokens_across_devices). A gpt2 HF directory with random weights and a jsonl file of eight rows
# of different lengths (padded per batch, so the label tokens per micro-batch differ) are made here. The
# reference is the one-process full-batch step written here in float64: the mean of the causal-LM loss
# over every label token of the eight rows (HF's LabelSmoother formula with label smoothing), its
# gradient, clip_grad_norm_ and torch.optim.AdamW. hftrain trains the same directory with the global
# batch of eight split as per-device batch x accumulation x workers = 8x1x1, 4x2x1, 2x2x2, 1x4x2 and
# 2x1x4, under ZeRO stages 0, 2 and 3, bf16 and label smoothing. Checked:
#   - the first step's loss (train_loss of a 1-step run) and gradient norm equal the reference to 1e-6
#     (bf16: loss 1e-2 and gradient norm 3e-2; the old per-micro-batch mean is more than 2e-2 off, printed);
#   - after 10 steps every split's model equals the reference's AdamW trajectory to 5e-5 (fp32; all weights
#     but the attention key bias, whose gradient is zero up to rounding: see comparable()).
# Needs only Python 3 and torch. Exit 0 = agreement.
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("token_loss_reference: this Python (%s) cannot import torch" % sys.executable)

from hf_family_cases import gpt2_weights  # noqa: E402
from hf_family_forwards import gpt2_forward  # noqa: E402
from hf_reference_harness import write_model_dir  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

SPLITS = [(8, 1, 1), (4, 2, 1), (2, 2, 2), (1, 4, 2), (2, 1, 4)]  # per-device batch, accumulation, workers
LR, STEPS, CLIP, EPS_LS = 3e-3, 10, 1.0, 0.1
ROW_LENGTHS = [3, 19, 5, 24, 9, 2, 14, 11]  # bytes per row; one global batch = the whole file


def gpt2_model(gen):
    V, C, P = 256, 32, 32  # the bytes tokenizer's ids
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": P,
           "n_ctx": P, "n_embd": C, "n_layer": 2, "n_head": 4, "n_inner": None, "activation_function": "gelu_new",
           "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5,
           "initializer_range": 0.02, "bos_token_id": 0, "eos_token_id": 0}
    W = gpt2_weights(gen, V, C, P, cfg["n_layer"])
    return cfg, W


def rows():
    r = random.Random(7)
    return ["".join(r.choice("abcdefghij klmnop") for _ in range(n)) for n in ROW_LENGTHS]


def full_batch(texts):
    """The eight rows as one right-padded batch: byte ids, attention mask, labels (-100 on padding)."""
    T = max(len(t) for t in texts)
    ids = torch.zeros(len(texts), T, dtype=torch.long)
    mask = torch.zeros(len(texts), T, dtype=torch.long)
    labels = torch.full((len(texts), T), -100, dtype=torch.long)
    for i, t in enumerate(texts):
        b = torch.tensor(list(t.encode()), dtype=torch.long)
        ids[i, :len(b)], mask[i, :len(b)], labels[i, :len(b)] = b, 1, b
    return ids, mask, labels


def token_loss(logits, labels, smoothing):
    """The mean over every scored label token (labels[:, 1:] against logits[:, :-1]); with smoothing, HF's
    LabelSmoother: (1 - eps) * NLL + eps * (sum over classes of -log p) / classes, both over those tokens."""
    lp = -torch.log_softmax(logits[:, :-1], -1)
    y = labels[:, 1:]
    keep = y.ne(-100)
    nll = lp.gather(-1, y.clamp_min(0).unsqueeze(-1)).squeeze(-1)[keep].sum()
    n = keep.sum().double()
    if smoothing == 0:
        return nll / n
    smooth = lp.sum(-1)[keep].sum()
    return (1 - smoothing) * nll / n + smoothing * smooth / (n * lp.shape[-1])


def per_micro_batch_mean_loss(cfg, W, texts, smoothing, batch):
    """What the loop did before HF 4.46 with `batch` rows per micro-batch: the mean of each micro-batch's own
    token mean (printed, and required to differ, to show the test can tell the two rules apart)."""
    losses = []
    for k in range(0, len(texts), batch):
        ids, mask, labels = full_batch(texts[k:k + batch])
        losses.append(token_loss(gpt2_forward(cfg, W, ids, mask), labels, smoothing))
    return sum(l.item() for l in losses) / len(losses)


def reference_run(cfg, W0, texts, smoothing, steps):
    """Full-batch training in float64: losses and gradient norms per step, final weights."""
    names = sorted(W0)
    params = {k: W0[k].double().clone().requires_grad_(True) for k in names}
    opt = torch.optim.AdamW([params[k] for k in names], lr=LR, weight_decay=0.0, eps=1e-8)
    ids, mask, labels = full_batch(texts)
    losses, norms = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = token_loss(gpt2_forward(cfg, params, ids, mask), labels, smoothing)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_([params[k] for k in names], CLIP).item())
        losses.append(loss.item())
        opt.step()
    return losses, norms, {k: v.detach() for k, v in params.items()}


def spec(root, batch, accumulation, workers, steps, stage, bf16, smoothing):
    return ("model: {from_pretrained: %s/model}\n"
            "data: {type: jsonl, train_file: %s/train.jsonl, tokenizer: bytes}\n"
            "training:\n  output_dir: out\n  per_device_train_batch_size: %d\n  gradient_accumulation_steps: %d\n"
            "  max_steps: %d\n  learning_rate: %g\n  lr_scheduler_type: constant\n  weight_decay: 0.0\n"
            "  max_grad_norm: %g\n  logging_steps: 1\n  save_strategy: \"no\"\n  bf16: %s\n"
            "  label_smoothing_factor: %g\n  dataloader_num_workers: 0\n"
            "distributed: {nproc_per_node: %d}\nzero: {stage: %d}\n"
            % (root, root, batch, accumulation, steps, LR, CLIP, "true" if bf16 else "false", smoothing, workers,
               stage))


def run_hftrain(hftrain, root, name, **kw):
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "spec.yaml"), "w") as f:
        f.write(spec(root, **kw))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([hftrain, "train", "spec.yaml"], cwd=d, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    if r.returncode != 0:
        print(r.stdout[-4000:])
        raise SystemExit("%s: hftrain exited %d" % (name, r.returncode))
    with open(os.path.join(d, "out", "trainer_state.json")) as f:
        state = json.load(f)
    with open(os.path.join(d, "out", "train_results.json")) as f:
        results = json.load(f)
    norms = [e["grad_norm"] for e in state["log_history"] if "grad_norm" in e]
    return d, results["train_loss"], norms


def comparable(bias_diff, C):
    """c_attn.bias without its key third: adding a constant vector to every key adds q.b to all scores of a
    query alike, which softmax ignores, so that bias's gradient is 0 up to rounding -- and AdamW turns
    rounding noise into steps of about the learning rate whose sign is chance, in the reference and in
    hftrain alike. The query and value thirds are compared."""
    return torch.cat([bias_diff[:C], bias_diff[2 * C:]])


def rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    args.hftrain = os.path.abspath(args.hftrain)
    root = os.path.abspath(args.workdir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    gen = torch.Generator().manual_seed(32)
    cfg, W = gpt2_model(gen)
    write_model_dir(os.path.join(root, "model"), cfg, W)
    texts = rows()
    with open(os.path.join(root, "train.jsonl"), "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")

    failures = []
    for smoothing in (0.0, EPS_LS):
        losses, norms, _ = reference_run(cfg, W, texts, smoothing, 1)
        old = per_micro_batch_mean_loss(cfg, W, texts, smoothing, 1)
        print("reference first step (label smoothing %g): loss %.8f, grad norm %.8f; the old mean of one-row "
              "micro-batches' means (split 1x4x2) would give %.8f" % (smoothing, losses[0], norms[0], old))
        if rel(old, losses[0]) < 2e-2:
            failures.append("the rows do not tell the two loss rules apart (%.6f vs %.6f)" % (old, losses[0]))
        variants = [("fp32 stage 0", 0, False), ("fp32 stage 2", 2, False), ("fp32 stage 3", 3, False),
                    ("bf16 stage 0", 0, True)] if smoothing == 0 else [("fp32 stage 0", 0, False)]
        for label, stage, bf16 in variants:
            tol = 1e-2 if bf16 else 1e-6  # bf16 forward: the loss to 1e-2, the gradient norm to 3e-2
            norm_tol = 3e-2 if bf16 else 1e-6
            for b, a, w in SPLITS:
                name = "first_%s_z%d_%s_%dx%dx%d" % ("ls" if smoothing else "ce", stage, "bf16" if bf16 else "fp32",
                                                     b, a, w)
                _, loss, got_norms = run_hftrain(args.hftrain, root, name, batch=b, accumulation=a, workers=w,
                                                 steps=1, stage=stage, bf16=bf16, smoothing=smoothing)
                ok = rel(loss, losses[0]) <= tol and rel(got_norms[0], norms[0]) <= norm_tol
                print("%-44s loss %.8f grad norm %.8f %s" % (name, loss, got_norms[0], "ok" if ok else "DIFFERS"))
                if not ok:
                    failures.append("%s (%s, smoothing %g): loss %.8f vs %.8f, grad norm %.8f vs %.8f"
                                    % (name, label, smoothing, loss, losses[0], got_norms[0], norms[0]))

    _, ref_norms, ref_weights = reference_run(cfg, W, texts, 0.0, STEPS)
    for stage in (0, 3):
        for b, a, w in SPLITS:
            name = "ten_z%d_%dx%dx%d" % (stage, b, a, w)
            d, _, got_norms = run_hftrain(args.hftrain, root, name, batch=b, accumulation=a, workers=w, steps=STEPS,
                                          stage=stage, bf16=False, smoothing=0.0)
            got, _ = read_safetensors(os.path.join(d, "out", "model.safetensors"))
            worst, where = 0.0, ""
            for k, ref in ref_weights.items():
                key = k[len("transformer."):] if k.startswith("transformer.") and k[len("transformer."):] in got else k
                diff = (got[key].double() - ref).abs()
                if k.endswith("attn.c_attn.bias"):  # the key bias: see comparable()
                    diff = comparable(diff, cfg["n_embd"])
                err = diff.max().item()
                if err > worst:
                    worst, where = err, key
            norm_err = max(rel(g, r) for g, r in zip(got_norms, ref_norms))
            ok = worst <= 5e-5 and len(got_norms) == STEPS and norm_err <= 1e-5
            print("%-44s max weight diff %.3g (%s), grad norms rel %.3g %s" % (name, worst, where, norm_err,
                                                                           "ok" if ok else "DIFFERS"))
            if not ok:
                failures.append("%s: after %d steps weights differ by %.3g at %s, grad norms by %.3g"
                                % (name, STEPS, worst, where, norm_err))
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("token_loss_reference: every split agrees with the full-batch reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
