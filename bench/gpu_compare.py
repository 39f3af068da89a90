#!/usr/bin/env python3
"""hftrain on a GPU against bench/python_loop.py on the same GPU, side by side (docs/gpu.md).

For each repeat it runs, in alternating order, `hftrain train` of the workload's spec (a CUDA build trains
on cuda:0 by itself) and the PyTorch loop with --device cuda; with --bf16 both in bfloat16 (hftrain's
precision.bf16; the loop's torch.autocast("cuda", torch.bfloat16)). Prints ms per optimizer step of every
run, the medians and the ratio of tokens/s. Both time the optimisation steps only; each step of the loop
ends with loss.item() and hftrain's runtime is read after the GPU has finished (util/device_clock.h).

  bench/gpu_compare.py --hftrain build-cuda/hftrain --text input.txt --workload gpt2 --steps 50 --repeats 2 [--bf16]
"""
import argparse
import os
import statistics
import sys
import tempfile

from run_bench import ms_per_step, run_hftrain, run_python


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--workload", default="gpt2", choices=["nanogpt", "gpt2"])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--device", default="cuda", help="the loop's device (cpu: a smoke test of this script)")
    args = ap.parse_args()
    args.hftrain = os.path.abspath(args.hftrain)  # the runs start in a scratch folder
    args.eval = False
    args.python_threads = 0
    hf_extra = ["--set", "precision.bf16=true"] if args.bf16 else []
    py_extra = ["--device", args.device] + (["--bf16"] if args.bf16 else [])
    variants = [
        ("hftrain", lambda w: run_hftrain(args, args.workload, w, None, hf_extra)),
        ("pytorch loop", lambda w: run_python(args, args.workload, w, py_extra)),
    ]
    times = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory(prefix="hftrain_gpu_") as work:
        for rep in range(args.repeats):
            for name, fn in (variants if rep % 2 == 0 else variants[::-1]):
                ms = ms_per_step(fn(work))
                times[name].append(ms)
                print("repeat %d  %-13s %8.2f ms/step" % (rep + 1, name, ms), flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    print("%s, %s, %d steps, %d repeats, loop on %s" % (args.workload, "bf16" if args.bf16 else "fp32", args.steps,
                                                        args.repeats, args.device))
    for name, _ in variants:
        print("  %-13s median %8.2f ms/step" % (name, med[name]))
    print("  tokens/s hftrain / pytorch loop: %.3f" % (med["pytorch loop"] / med["hftrain"]))


if __name__ == "__main__":
    main()
