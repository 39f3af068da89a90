#!/usr/bin/python3
"""hftrain's fused CPU kernels against its LibTorch-op path and the tuned PyTorch loop, side by side.

For each repeat it runs, in rotating order: hftrain (fused kernels, the default), hftrain with
HFTRAIN_KERNELS=torch (the same binary on LibTorch's ops), and bench/python_loop.py with 2 threads; with
--bf16 all three in bfloat16 (hftrain's precision.bf16; the loop's torch.autocast("cpu", torch.bfloat16)).
It prints ms per optimizer step of every run, the medians, and the median ratios of tokens/s.

  bench/fused_kernels.py --text tinyshakespeare.txt --workload nanogpt --steps 400 --repeats 3 [--bf16]
"""
import argparse
import os
import statistics
import tempfile

from run_bench import ms_per_step, run_hftrain, run_python


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--workload", default="nanogpt", choices=["nanogpt", "gpt2"])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
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
    times = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory(prefix="hftrain_fused_") as work:
        for rep in range(args.repeats):
            order = variants[rep % 3:] + variants[:rep % 3]
            for name, fn in order:
                ms = ms_per_step(fn(work))
                times[name].append(ms)
                print("repeat %d  %-18s %7.1f ms/step" % (rep + 1, name, ms), flush=True)
    print("%s, %s, %d steps, %d repeats" % (args.workload, "bf16" if args.bf16 else "fp32", args.steps, args.repeats))
    med = {name: statistics.median(v) for name, v in times.items()}
    for name, _ in variants:
        print("  %-18s median %7.1f ms/step" % (name, med[name]))
    print("  tokens/s fused / torch ops: %.3f" % (med["hftrain torch ops"] / med["hftrain fused"]))
    print("  tokens/s fused / pytorch loop: %.3f" % (med["pytorch loop"] / med["hftrain fused"]))
    print("  tokens/s torch ops / pytorch loop: %.3f" % (med["pytorch loop"] / med["hftrain torch ops"]))


if __name__ == "__main__":
    main()
