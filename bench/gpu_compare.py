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
import sys

from run_bench import add_side_by_side_args, medians_side_by_side, run_hftrain, run_python


def main():
    ap = argparse.ArgumentParser()
    add_side_by_side_args(ap, "gpt2", 50, 2)
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
    med = medians_side_by_side(variants, args.repeats, "hftrain_gpu_")
    print("%s, %s, %d steps, %d repeats, loop on %s" % (args.workload, "bf16" if args.bf16 else "fp32", args.steps,
                                                        args.repeats, args.device))
    for name, _ in variants:
        print("  %-13s median %8.2f ms/step" % (name, med[name]))
    print("  tokens/s hftrain / pytorch loop: %.3f" % (med["pytorch loop"] / med["hftrain"]))


if __name__ == "__main__":
    main()
