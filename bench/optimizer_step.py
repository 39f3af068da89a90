#!/usr/bin/python3
"""One optimizer step over a flat fp32 parameter, side by side in one run: hftrain's kernels (every
instruction set this CPU runs), torch's optim.AdamW (foreach=False and True, 1 and 2 threads: the best is
the comparison), and a plain streaming pass over the same bytes (read 4 arrays, write 3: 28 bytes per
parameter, the memory's limit for an fp32 AdamW step).

  bench/optimizer_step.py                          # 10M and 100M parameters, 2 threads
  bench/optimizer_step.py --sizes 100000000 --repeats 9

Needs the build's optimizer_step_bench (scripts/build.sh) and a python3 with torch for the torch side.
Times are medians of --repeats steps after two warm-up steps (torch: after the step that creates the state).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TORCH_STEP = r"""
import json, statistics, sys, time, torch
n, threads, foreach, repeats = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
torch.set_num_threads(threads)
p = torch.nn.Parameter(torch.full((n,), 0.5))
p.grad = torch.full((n,), 1e-3)
opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, foreach=foreach)
for _ in range(3):  # the first creates the state
    opt.step()
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    opt.step()
    times.append(time.perf_counter() - t0)
print(json.dumps({"median_ms": statistics.median(times) * 1e3, "best_ms": min(times) * 1e3}))
"""


def run_ours(binary, n, threads, repeats):
    out = subprocess.run([binary, "--n", str(n), "--threads", str(threads), "--repeats", str(repeats)],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_torch(python, n, threads, foreach, repeats):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([python, "-c", TORCH_STEP, str(n), str(threads), "1" if foreach else "0", str(repeats)],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--sizes", default="10000000,100000000")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    binary = os.path.join(args.build, "optimizer_step_bench")
    for n in [int(s) for s in args.sizes.split(",")]:
        ours = run_ours(binary, n, args.threads, args.repeats)
        torch_runs = []
        for threads in sorted({1, args.threads}):
            for foreach in (False, True):
                r = run_torch(args.python, n, threads, foreach, args.repeats)
                r.update(threads=threads, foreach=foreach)
                torch_runs.append(r)
        best_torch = min(torch_runs, key=lambda r: r["median_ms"])
        stream = next(r for r in ours if r["case"] == "stream")
        print(f"\n## {n:,} fp32 parameters, {args.threads} threads (medians of {args.repeats} steps)\n")
        print("| case | ISA | ms / step | ns / param | GB/s (bytes the step moves) | torch AdamW best / this | % of stream |")
        print("|---|---|---|---|---|---|---|")
        for r in ours:
            ratio = best_torch["median_ms"] / r["median_ms"]
            share = 100 * r["gb_per_s"] / stream["gb_per_s"]
            print(f"| {r['case']} ({r['bytes_per_param']:.0f} B/param) | {r['isa']} | {r['median_ms']:.1f} | "
                  f"{r['ns_per_param']:.3f} | {r['gb_per_s']:.1f} | {ratio:.2f}x | {share:.0f} % |")
        for r in torch_runs:
            ms = r["median_ms"]
            print(f"| torch.optim.AdamW foreach={r['foreach']} | {r['threads']} thread(s) | {ms:.1f} | "
                  f"{ms * 1e6 / n:.3f} | {28 * n / ms / 1e6:.1f} | {best_torch['median_ms'] / ms:.2f}x | "
                  f"{100 * 28 * n / ms / 1e6 / stream['gb_per_s']:.0f} % |")
        best_isa = ours[2]["isa"] if len(ours) > 2 else "-"
        fp32 = next(r for r in ours if r["case"] == "adamw fp32" and r["isa"] == best_isa)
        wb = next(r for r in ours if r["case"] == "adamw fp32 + bf16 write-back" and r["isa"] == best_isa)
        mixed = next(r for r in ours if r["case"] == "adamw bf16 grad + bf16 write-back" and r["isa"] == best_isa)
        print(f"\n{best_isa}: bf16 write-back costs {100 * (wb['median_ms'] / fp32['median_ms'] - 1):+.1f} % over the "
              f"fp32 step; bf16 gradient + bf16 write-back {100 * (mixed['median_ms'] / fp32['median_ms'] - 1):+.1f} %; "
              f"speed-up over torch's best AdamW {best_torch['median_ms'] / fp32['median_ms']:.2f}x; "
              f"{100 * fp32['gb_per_s'] / stream['gb_per_s']:.0f} % of the streaming pass")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
