#!/usr/bin/env python3
# A routed mixture of experts against the dense model with the same active parameters, side by side in one run:
# `hftrain train` of a mixtral (E experts of inner size I, top-k routing, grouped expert compute) and of a mistral
# whose dense gated MLP has inner size k * I (the same attention, so each token meets the same number of weights
# but the router's), alternating the two, and the train_tokens_per_second each reports (HF's figure: tokens over
# the whole train runtime). Issue 58's goal: the MoE step <= 1.3x the dense step, i.e. tokens/s dense / MoE <= 1.3.
#
#   bench/moe_step.py --hftrain build/hftrain [--repeats 3] [--hidden 512] [--layers 4] [--experts 8] [--top-k 2]
#
# The machine's load average is printed before and after (other processes' work slows both sides alike only if
# it is steady; the runs alternate so that a change of load falls on both).
import argparse
import json
import os
import shutil
import statistics
import tempfile

from eval_memory import run  # runs a command; its peak RSS (MiB) from wait4 and its output

COMMON = """data: {type: digit_reversal, num_digits: 60, train_size: 256, eval_size: 0}
training: {output_dir: out, max_steps: %(steps)d, per_device_train_batch_size: %(batch)d, learning_rate: 0.0001,
           save_strategy: "no", logging_steps: 1, do_eval: false, seed: 7}
"""
SHAPE = ("hidden_size: %(hidden)d, num_hidden_layers: %(layers)d, num_attention_heads: %(heads)d, "
         "num_key_value_heads: %(kv)d, vocab_size: 256, max_position_embeddings: 256, sliding_window: null")
MOE = "model: {type: mixtral, " + SHAPE + ", intermediate_size: %(inner)d, num_local_experts: %(experts)d, " \
      "num_experts_per_tok: %(top_k)d}\n"
DENSE = "model: {type: mistral, " + SHAPE + ", intermediate_size: %(dense_inner)d}\n"


def parameters(out):
    """The run-start block's parameter count line, as printed."""
    lines = [l.strip() for l in out.splitlines() if "parameters" in l and ("total" in l or "trainable" in l)]
    return lines[0] if lines else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--inner", type=int, default=704, help="each expert's inner size; the dense MLP's is top-k times it")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    values = {"hidden": args.hidden, "layers": args.layers, "heads": max(1, args.hidden // 64),
              "kv": max(1, args.hidden // 128), "inner": args.inner, "experts": args.experts, "top_k": args.top_k,
              "dense_inner": args.top_k * args.inner, "steps": args.steps, "batch": args.batch}
    work = tempfile.mkdtemp(prefix="hftrain_moe_step_")
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    try:
        for name, model in (("moe", MOE), ("dense", DENSE)):
            with open(os.path.join(work, name + ".yaml"), "w") as f:
                f.write(model % values + COMMON % values)
        speed, counts = {"moe": [], "dense": []}, {}
        for rep in range(args.repeats):
            for name in (("moe", "dense") if rep % 2 == 0 else ("dense", "moe")):
                shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
                _, out = run([hftrain, "train", name + ".yaml"], work)
                with open(os.path.join(work, "out", "train_results.json")) as f:
                    speed[name].append(json.load(f)["train_tokens_per_second"])
                counts[name] = parameters(out)
        print("load average after: %.2f %.2f %.2f" % os.getloadavg())
        print("hidden %(hidden)d, %(layers)d layers, %(heads)d heads (%(kv)d kv), MoE %(experts)d experts x inner %(inner)d "
              "top-%(top_k)d, dense inner %(dense_inner)d; batch %(batch)d x 121 tokens, fp32, %(steps)d steps" % values)
        print("| model | tokens/s per run | median | parameters |")
        print("|---|---|---|---|")
        for name in ("moe", "dense"):
            print("| %s | %s | %.1f | %s |" % (name, ", ".join("%.1f" % s for s in speed[name]),
                                             statistics.median(speed[name]), counts[name]))
        pairs = [d / m for d, m in zip(speed["dense"], speed["moe"])]
        print("step time MoE / dense = tokens/s dense / MoE: median %.3f (per pair %s; goal <= 1.3)" %
              (statistics.median(pairs), ", ".join("%.3f" % p for p in pairs)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
