#!/usr/bin/env python3
# Reference test: an independent, plain PyTorch training loop (HF Trainer semantics, sharing no code
# with hftrain) must agree with `hftrain train` step by step -- per-step loss, grad_norm,
# learning_rate and epoch -- for a small `gpt` on `digit_reversal` data, starting from the same
# weights (written here as model.safetensors and loaded through model.from_pretrained).
#
# One parameterised test: every optimizer {adamw, adam, sgd, adafactor, lion} x every decaying HF
# schedule {linear, cosine, cosine_with_restarts, polynomial, inverse_sqrt}, each pair twice: with
# gradient accumulation 1 and 3, clipping on for one of the two and off for the other, alternating, so
# every optimizer x schedule pair meets both accumulations and both clipping settings and every
# accumulation meets every clipping setting; plus a few cases for the remaining schedules and optimizer options
# (Adagrad only there). The oracles: torch.optim.AdamW / Adam / SGD / Adagrad and torch's LambdaLR with lambdas written here from
# HF's formulas; Adafactor and Lion are written here from their papers and HF's documented
# conventions (see RefAdafactor, RefLion). DeepSpeed's WarmupLR / WarmupDecayLR are simulated as
# DeepSpeed steps them (RefDeepSpeedWarmup).
# This file is the driver (the reference loop, the hftrain runs and the comparison); the cases are in
# gpt_loop_cases.py, the data and model in gpt_loop_model.py, the optimizer oracles in
# reference_optimizers.py and the schedule oracles in reference_schedules.py.
# Needs only Python 3 and torch (no transformers, no safetensors package). Exit 0 = agreement.
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("gpt_reference: this Python (%s) cannot import torch; run the test with a Python that has torch "
             "(configure with -DHFTRAIN_REFERENCE_PYTHON=/path/to/python3)" % sys.executable)

from gpt_loop_cases import MAX_STEPS, MODEL, NUM_DIGITS, extra_cases, matrix_cases, memory_cases  # noqa: E402
from gpt_loop_model import GPT, digit_reversal_example, initialise, is_no_decay  # noqa: E402
from reference_optimizers import make_optimizer  # noqa: E402
from reference_schedules import make_schedule  # noqa: E402
from safetensors_io import read_safetensors as read_tensors_and_metadata  # noqa: E402 (after the torch check)
from safetensors_io import write_safetensors as write_typed_safetensors  # noqa: E402

LOSS_ABS_TOL = 5e-5   # hftrain logs the loss rounded to 4 decimals: half a unit in the last place ...
LOSS_REL_TOL = 1e-5   # ... plus the same relative slack the other quantities get
REL_TOL = 1e-5        # grad_norm and learning_rate (not rounded in the log)
MIN_STEPS = 50


# ---- safetensors (the reference scripts' own reader and writer) -------------------------------------
def write_safetensors(path, named):
    write_typed_safetensors(path, [(name, t.detach().to(torch.float32)) for name, t in named])


def read_safetensors(path):
    tensors, _ = read_tensors_and_metadata(path)
    for name, t in tensors.items():
        if t.dtype != torch.float32:
            raise RuntimeError("%s: tensor %s has dtype %s, expected F32" % (path, name, t.dtype))
    return tensors


# ---- the reference loop ---------------------------------------------------------------------------
def total_grad_norm(params):
    return torch.norm(torch.stack([torch.norm(p.grad.detach(), 2) for p in params if p.grad is not None]), 2)


def evaluate(model, examples, bs):
    # HF evaluation_loop: every batch's mean loss counted once per example, averaged over examples.
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(examples), bs):
            chunk = examples[i:i + bs]
            ids = torch.tensor([e[0] for e in chunk], dtype=torch.long)
            labels = torch.tensor([e[1] for e in chunk], dtype=torch.long)
            total += model(ids, labels).item() * len(chunk)
    model.train()
    return total / len(examples)


def reference_run(case, init_state):
    tr = case["training"]
    n = case["data"]["train_size"]
    bs, ga, max_steps = tr["per_device_train_batch_size"], tr["gradient_accumulation_steps"], tr["max_steps"]
    data_seed = tr.get("data_seed", -1)
    shuffle_seed = data_seed if data_seed >= 0 else tr["seed"]
    examples = [digit_reversal_example(case["data"]["seed"], i, NUM_DIGITS) for i in range(n)]
    eval_examples = [digit_reversal_example(case["data"]["seed"], i, NUM_DIGITS, "eval")
                     for i in range(case["data"].get("eval_size", 0))]
    plateau = case["scheduler"] == "reduce_lr_on_plateau"
    # HF TrainingArguments.get_warmup_steps: warmup_steps if > 0, else ceil(max_steps * warmup_ratio)
    warmup = tr.get("warmup_steps", 0) or math.ceil(max_steps * tr.get("warmup_ratio", 0.0))

    model = GPT(11, 2 * NUM_DIGITS + 1, **MODEL)
    model.load_state_dict(init_state)
    model.train()
    named = list(model.named_parameters())
    params = [p for _, p in named]
    groups = [
        {"params": [p for nm, p in named if not is_no_decay(nm)], "weight_decay": tr["weight_decay"],
         "names": [nm for nm, p in named if not is_no_decay(nm)]},
        {"params": [p for nm, p in named if is_no_decay(nm)], "weight_decay": 0.0,
         "names": [nm for nm, p in named if is_no_decay(nm)]},
    ]
    opt = make_optimizer(case, groups)
    sched = make_schedule(case, opt, warmup, max_steps)

    len_dl = (n + bs - 1) // bs  # drop_last false
    log, step, epoch = [], 0, 0
    while step < max_steps:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(shuffle_seed + epoch)).tolist()
        batches = [order[i:i + bs] for i in range(0, n, bs)]
        micro = 0
        while micro < len_dl and step < max_steps:
            window = min(ga, len_dl - micro)  # the epoch's last window may be short
            step_loss = 0.0
            # HF >= 4.46: each micro-batch's summed token loss over the label tokens of the whole window.
            tensors = [(torch.tensor([examples[i][0] for i in idx], dtype=torch.long),
                        torch.tensor([examples[i][1] for i in idx], dtype=torch.long))
                       for idx in batches[micro:micro + window]]
            window_tokens = sum(int(labels[:, 1:].ne(-100).sum()) for _, labels in tensors)
            for ids, labels in tensors:
                loss = model(ids, labels) * (int(labels[:, 1:].ne(-100).sum()) / window_tokens)
                loss.backward()
                step_loss += loss.item()
            micro += window
            if tr["max_grad_norm"] > 0:
                norm = torch.nn.utils.clip_grad_norm_(params, tr["max_grad_norm"]).item()
            else:
                norm = total_grad_norm(params).item()
            opt.step()
            if not plateau:
                sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            # HF _get_learning_rate: the optimizer's lr for ReduceLROnPlateau, else get_last_lr()
            lr = opt.param_groups[0]["lr"] if plateau else sched.get_last_lr()[0]
            log.append({"step": step, "loss": step_loss, "grad_norm": norm,
                        "learning_rate": lr, "epoch": epoch + micro / len_dl})
            if tr.get("eval_strategy", "no") == "steps" and step % tr["eval_steps"] == 0:
                eval_loss = evaluate(model, eval_examples, tr["per_device_eval_batch_size"])
                log[-1]["eval_loss"] = eval_loss
                if plateau:  # HF _evaluate steps the plateau schedule on metric_for_best_model (eval_loss)
                    sched.step(eval_loss)
        epoch += 1
    return log, {nm: p.detach().clone() for nm, p in named}


# ---- hftrain side ---------------------------------------------------------------------------------
def yaml_value(v):
    return json.dumps(v)  # JSON scalars are valid YAML scalars


def write_spec(path, case, init_dir, out_dir):
    tr = {"logging_steps": 1, "eval_strategy": "no", "save_strategy": "no"}
    tr.update(case["training"])
    tr.update({"output_dir": out_dir, "overwrite_output_dir": True})
    data = {"type": "digit_reversal", "num_digits": NUM_DIGITS, "eval_size": 0, "test_size": 0}
    data.update(case["data"])
    model = {"type": "gpt", **MODEL, "dropout": 0.0, "from_pretrained": init_dir}
    sections = (("model", model), ("data", data), ("training", tr),
                ("optimizer", dict(type=case["optimizer"], **case["optimizer_options"])),
                ("scheduler", dict(type=case["scheduler"], **case["scheduler_options"])),
                ("distributed", {"intra_op_threads": 1}))  # tiny model: one thread is fastest
    lines = []
    for section, values in sections:
        lines.append(section + ":")
        lines += ["  %s: %s" % (k, yaml_value(v)) for k, v in values.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# Environment of the hftrain runs. The memory suite runs the model on LibTorch's ops (HFTRAIN_KERNELS=torch),
# as its PyTorch loop does: its 8-bit moments round each step's state into 256 levels, so the float-rounding
# differences of hftrain's fused attention (checked on their own by tests/unit/test_fused_attention.cpp and,
# in the core suite, against this loop) can flip a quantisation level and grow from there; that suite checks
# the optimizers.
HFTRAIN_ENV = dict(os.environ)


def start_hftrain(hftrain, case_dir):
    log = open(os.path.join(case_dir, "hftrain.log"), "w")
    proc = subprocess.Popen([hftrain, "train", "spec.yaml"], cwd=case_dir, stdout=log, stderr=subprocess.STDOUT,
                            env=HFTRAIN_ENV)
    return proc, log


def finish_hftrain(proc, log, case_dir, out_dir):
    rc = proc.wait(timeout=500)
    log.close()
    if rc != 0:
        with open(os.path.join(case_dir, "hftrain.log")) as f:
            tail = f.read()[-4000:]
        return None, None, "hftrain exited with status %d; its output ends with:\n%s" % (rc, tail)
    with open(os.path.join(out_dir, "trainer_state.json")) as f:
        state = json.load(f)
    weights = read_safetensors(os.path.join(out_dir, "model.safetensors"))
    train_log = [e for e in state["log_history"] if "loss" in e]
    evals = {e["step"]: e["eval_loss"] for e in state["log_history"] if "eval_loss" in e}
    for e in train_log:
        if e["step"] in evals:
            e["eval_loss"] = evals.pop(e["step"])
    if evals:
        return None, None, "hftrain evaluated at steps without a training log entry: %s" % sorted(evals)
    return train_log, weights, None


# ---- comparison -----------------------------------------------------------------------------------
def round4(x):
    # hftrain's (and HF's) logged loss: round half away from zero to 4 decimals
    return math.copysign(math.floor(abs(x) * 1e4 + 0.5), x) / 1e4


def rel_err(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(case, ref_log, hf_log, ref_weights, hf_weights):
    problems = []
    tr = case["training"]
    if len(hf_log) != len(ref_log) or [e["step"] for e in hf_log] != [e["step"] for e in ref_log]:
        problems.append("hftrain logged steps %s, the reference %s" %
                        ([e["step"] for e in hf_log], [e["step"] for e in ref_log]))
        return problems, {}
    stats = {"loss_abs": 0.0, "grad_norm_rel": 0.0, "lr_rel": 0.0, "epoch_abs": 0.0}
    for r, h in zip(ref_log, hf_log):
        s = r["step"]
        d_loss = abs(h["loss"] - r["loss"])
        d_gn = rel_err(h["grad_norm"], r["grad_norm"])
        d_lr = rel_err(h["learning_rate"], r["learning_rate"]) if r["learning_rate"] != 0 else abs(h["learning_rate"])
        d_ep = abs(h["epoch"] - r["epoch"])
        stats["loss_abs"] = max(stats["loss_abs"], d_loss)
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
        if ("eval_loss" in r) != ("eval_loss" in h):
            problems.append("step %d: evaluated by %s only" % (s, "the reference" if "eval_loss" in r else "hftrain"))
        elif "eval_loss" in r and rel_err(h["eval_loss"], r["eval_loss"]) > REL_TOL:
            problems.append("step %d: eval_loss hftrain %.9g vs reference %.9g" % (s, h["eval_loss"], r["eval_loss"]))
    # Final weights are reported, not judged (float rounding differences in the optimizers' last
    # ulp are allowed; the logged quantities carry the verdict).
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
    # The schedule must actually vary, or the learning_rate comparison proves little.
    distinct = len({round(r["learning_rate"], 15) for r in ref_log})
    if case["scheduler"] != "constant" and distinct < (3 if case["scheduler"] == "reduce_lr_on_plateau" else 5):
        problems.append("the learning rate takes only %d distinct values" % distinct)
    if len(ref_log) < MIN_STEPS:
        problems.append("only %d steps compared; the test needs at least %d" % (len(ref_log), MIN_STEPS))
    return problems, stats


# 8-bit AdamW against fp32 AdamW (torch.optim.AdamW) on the same 50 steps: the per-step training loss may
# differ by at most this much (measured: 7.7e-4 with blocks of 256, 9.6e-4 with 2048, losses ~2.1).
EIGHT_BIT_LOSS_TOL = 3e-3


def eight_bit_vs_fp32(cases):
    problems = []
    for case in cases:
        if case["optimizer"] != "adamw_8bit":
            continue
        model = GPT(11, 2 * NUM_DIGITS + 1, **MODEL)
        initialise(model, case["init_seed"])
        init = {k: v.detach().clone() for k, v in model.state_dict().items()}
        log8, _ = reference_run(case, init)
        fp32 = dict(case, optimizer="adamw", optimizer_options={})
        log32, _ = reference_run(fp32, init)
        worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(log8, log32))
        print("%-72s vs fp32 AdamW: max per-step loss difference %.2e (tolerance %.0e)" %
              (case["name"], worst, EIGHT_BIT_LOSS_TOL), flush=True)
        if worst > EIGHT_BIT_LOSS_TOL:
            problems.append(case["name"])
    return problems


def main():
    ap = argparse.ArgumentParser(description="Check hftrain's training loop against a plain PyTorch loop.")
    ap.add_argument("--hftrain", required=True, help="the hftrain binary")
    ap.add_argument("--workdir", required=True, help="scratch directory (recreated)")
    ap.add_argument("--only", default="", help="regular expression: run only the cases whose name matches")
    ap.add_argument("--jobs", type=int, default=2, help="hftrain processes run at once beside the reference")
    ap.add_argument("--suite", choices=("core", "memory"), default="core",
                    help="core: the optimizer x schedule matrix and extras; memory: 8-bit AdamW and GaLore")
    args = ap.parse_args()
    torch.set_num_threads(1)
    hftrain = os.path.abspath(args.hftrain)
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    suite = matrix_cases() + extra_cases() if args.suite == "core" else memory_cases()
    if args.suite == "memory":
        HFTRAIN_ENV["HFTRAIN_KERNELS"] = "torch"
    cases = [c for c in suite if re.search(args.only, c["name"])]
    if not cases:
        sys.exit("no case matches --only %r" % args.only)
    t0 = time.time()

    # Write every case's spec and initial weights, then keep up to --jobs hftrain runs going while
    # this process computes the references one by one.
    dirs = []
    for k, case in enumerate(cases):
        case_dir = os.path.join(work, "%03d" % k)
        init_dir, out_dir = os.path.join(case_dir, "init"), os.path.join(case_dir, "out")
        os.makedirs(init_dir)
        model = GPT(11, 2 * NUM_DIGITS + 1, **MODEL)
        initialise(model, case["init_seed"])
        write_safetensors(os.path.join(init_dir, "model.safetensors"), list(model.named_parameters()))
        write_spec(os.path.join(case_dir, "spec.yaml"), case, init_dir, out_dir)
        dirs.append((case_dir, out_dir, {k2: v.detach().clone() for k2, v in model.state_dict().items()}))
    running, next_start = {}, 0

    def top_up():
        nonlocal next_start
        while next_start < len(cases) and len(running) < max(1, args.jobs):
            running[next_start] = start_hftrain(hftrain, dirs[next_start][0])
            next_start += 1

    failures, worst = [], {"loss_abs": 0.0, "grad_norm_rel": 0.0, "lr_rel": 0.0, "weights_abs": 0.0}
    for k, case in enumerate(cases):
        top_up()
        case_dir, out_dir, init_state = dirs[k]
        ref_log, ref_weights = reference_run(case, init_state)
        if k not in running:
            running[k] = start_hftrain(hftrain, case_dir)
        proc, log = running.pop(k)
        hf_log, hf_weights, error = finish_hftrain(proc, log, case_dir, out_dir)
        top_up()
        if error:
            problems, stats = [error], {}
        else:
            problems, stats = compare(case, ref_log, hf_log, ref_weights, hf_weights)
        if stats:
            for key in worst:
                worst[key] = max(worst[key], stats[key])
            print("%-72s loss %.1e  grad_norm %.1e  lr %.1e  clipped %2d  [weights %.1e]" %
                  (case["name"], stats["loss_abs"], stats["grad_norm_rel"], stats["lr_rel"],
                   stats["clipped_steps"], stats["weights_abs"]), flush=True)
        for p in problems[:10]:
            print("  MISMATCH %s (%s): %s" % (case["name"], case_dir, p), flush=True)
        if len(problems) > 10:
            print("  ... and %d more" % (len(problems) - 10))
        if problems:
            failures.append(case["name"])
    if args.suite == "memory":
        failures += ["%s (8-bit vs fp32 AdamW)" % n for n in eight_bit_vs_fp32(cases)]
    print("%d cases x %d steps in %.1f s; worst: loss abs %.2e, grad_norm rel %.2e, learning_rate rel %.2e "
          "[final weights max abs diff %.2e, reported only]" %
          (len(cases), MAX_STEPS, time.time() - t0, worst["loss_abs"], worst["grad_norm_rel"], worst["lr_rel"],
           worst["weights_abs"]))
    if failures:
        sys.exit("FAIL: %d case(s) disagree with the PyTorch reference: %s" % (len(failures), ", ".join(failures)))
    print("PASS: hftrain agrees with the PyTorch reference loop")


if __name__ == "__main__":
    main()
