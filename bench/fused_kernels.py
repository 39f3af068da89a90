#!/usr/bin/python3
"""hftrain's fused CPU kernels against its LibTorch-op path and the tuned PyTorch loop, side by side.

For each repeat it runs, in rotating order: hftrain (fused kernels, the default), hftrain with
HFTRAIN_KERNELS=torch (the same binary on LibTorch's ops), and bench/python_loop.py with 2 threads; with
--bf16 all three in bfloat16 (hftrain's precision.bf16; the loop's torch.autocast("cpu", torch.bfloat16)).
It prints ms per optimizer step of every run, the medians, and the median ratios of tokens/s.

  bench/fused_kernels.py --text tinyshakespeare.txt --workload nanogpt --steps 400 --repeats 3 [--bf16]
  (workloads: nanogpt, gpt2, llama; bench/run_bench.py WORKLOADS)
"""
import argparse
import os

from run_bench import add_side_by_side_args, medians_side_by_side, run_hftrain, run_python


def main():
    ap = argparse.ArgumentParser()
    add_side_by_side_args(ap, "nanogpt", 400, 3)
    ap.add_argument("--hftrain", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                      "build", "hftrain"))
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    args.eval = False
    args.python_threads = 2
    hf_extra = ["--set", "precision.bf16=true"] if args.bf16 else []
    py_extra = ["--bf16"] if args.bf16 else []
    torch_env = dict(os.environ, HFTRAIN_KERNELS="torch")
    variants = [
        ("hftrain fused", lambda w: run_hftrain(args, args.workload, w, None, hf_extra)),
        ("hftrain torch ops", lambda w: run_hftrain(args, args.workload, w, torch_env, hf_extra)),
        ("pytorch loop", lambda w: run_python(args, args.workload, w, py_extra)),
    ]
    med = medians_side_by_side(variants, args.repeats, "hftrain_fused_")
    print("%s, %s, %d steps, %d repeats" % (args.workload, "bf16" if args.bf16 else "fp32", args.steps, args.repeats))
    for name, _ in variants:
        print("  %-18s median %7.1f ms/step" % (name, med[name]))
    print("  tokens/s fused / torch ops: %.3f" % (med["hftrain torch ops"] / med["hftrain fused"]))
    print("  tokens/s fused / pytorch loop: %.3f" % (med["pytorch loop"] / med["hftrain fused"]))
    print("  tokens/s torch ops / pytorch loop: %.3f" % (med["pytorch loop"] / med["hftrain torch ops"]))


if __name__ == "__main__":
    main()
