#!/usr/bin/python3
"""Two hftrain binaries side by side (e.g. before and after a refactoring): the same spec, the runs alternating
in rotating order; ms per optimizer step of every run, medians, and the median ratio new / old of tokens/s.

  bench/binary_pair.py --old OLD/hftrain --new NEW/hftrain --text tinyshakespeare.txt --workload nanogpt \
      --steps 400 --repeats 3 [--bf16] [--set KEY=VALUE ...]
  (workloads: nanogpt, gpt2, llama; --set passes run-spec overrides to both, e.g. zero.stage=2)
"""
import argparse

from run_bench import add_side_by_side_args, medians_side_by_side, run_hftrain


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_side_by_side_args(ap, "nanogpt", 400, 3)
    ap.add_argument("--old", required=True, help="the binary before")
    ap.add_argument("--new", required=True, help="the binary after")
    ap.add_argument("--set", action="append", default=[], help="a run-spec override for both binaries")
    args = ap.parse_args()
    args.eval = False
    extra = ["--set", "precision.bf16=true"] if args.bf16 else []
    for s in args.set:
        extra += ["--set", s]

    def runner(binary):
        def run(workdir):
            args.hftrain = binary
            return run_hftrain(args, args.workload, workdir, None, extra)
        return run

    variants = [("old", runner(args.old)), ("new", runner(args.new))]
    med = medians_side_by_side(variants, args.repeats, "hftrain_pair_")
    print("%s, %s%s, %d steps, %d repeats" % (args.workload, "bf16" if args.bf16 else "fp32",
                                             "".join(", " + s for s in args.set), args.steps, args.repeats))
    for name, _ in variants:
        print("  %-4s median %8.2f ms/step" % (name, med[name]))
    print("  tokens/s new / old: %.3f" % (med["old"] / med["new"]))


if __name__ == "__main__":
    main()
