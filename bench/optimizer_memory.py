#!/usr/bin/python3
"""Memory of the optimizers side by side (bench/RESULTS.md, "Memory-efficient optimizers").

1. Optimizer-state bytes for the GPT-2-small shape (12 x 768, vocabulary 50257, 1024 positions) with every
   optimizer, from build/optimizer_memory_bench (the bytes of the state a checkpoint stores, after one step).
2. Peak RSS of `hftrain train bench/specs/gpt2_shaped.yaml` for a few steps with each optimizer (the kernel's
   ru_maxrss of the process), and for the layer-wise optimizers the gradient bytes alive at once during
   backward that hftrain logs, against all gradients together.

  bench/optimizer_memory.py                       # both parts, every optimizer, 3 steps
  bench/optimizer_memory.py --optimizers adamw,galore_adamw,galore_adamw_layerwise --steps 2
  bench/optimizer_memory.py --skip-state --batch 1 --block 32     # weights, gradients and state dominate
GaLore runs target [attn, mlp] (every attention and MLP Linear) with HF's defaults (rank 128, gap 200).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ALL = ["adamw", "adamw_8bit", "adafactor", "galore_adamw", "galore_adamw_8bit", "galore_adafactor",
       "galore_adamw_layerwise", "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise", "lomo", "adalomo"]


def text_file(path, size=400_000, seed=1):
    rng = random.Random(seed)
    words = ["the", "of", "and", "to", "in", "optimizer", "memory", "gradient", "state", "step", "low", "rank"]
    with open(path, "w") as f:
        n = 0
        while n < size:
            line = " ".join(rng.choice(words) for _ in range(12)) + ".\n"
            f.write(line)
            n += len(line)


def run_train(hftrain, workdir, optimizer, steps, batch, block):
    sets = ["training.max_steps=%d" % steps, "optimizer.type=" + optimizer, "training.output_dir=" + workdir + "/out",
            "training.do_eval=false", "training.per_device_train_batch_size=%d" % batch, "data.block_size=%d" % block]
    if optimizer.startswith("galore_"):
        sets.append("training.optim_target_modules=[attn,mlp]")
    if optimizer.endswith("_layerwise"):
        sets.append("training.max_grad_norm=0")
    cmd = [hftrain, "train", os.path.join(HERE, "specs", "gpt2_shaped.yaml")]
    for s in sets:
        cmd += ["--set", s]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit("hftrain (%s) failed:\n%s" % (optimizer, out[-3000:]))
    m = re.search(r"layer-wise step: at most (\d+) gradient bytes alive at once during backward "
                  r"\(all gradients together: (\d+) bytes\)", out)
    return {"optimizer": optimizer, "peak_rss_mib": usage.ru_maxrss / 1024.0, "wall_s": wall,
            "grad_peak_bytes": int(m.group(1)) if m else None, "grad_all_bytes": int(m.group(2)) if m else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hftrain", default=os.path.join(ROOT, "build", "hftrain"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "optimizer_memory_bench"))
    ap.add_argument("--optimizers", default=",".join(ALL))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4, help="per_device_train_batch_size of the peak-RSS runs")
    ap.add_argument("--block", type=int, default=256, help="sequence length of the peak-RSS runs")
    ap.add_argument("--skip-state", action="store_true", help="only the peak-RSS runs")
    ap.add_argument("--skip-rss", action="store_true", help="only the state bytes")
    args = ap.parse_args()
    optimizers = args.optimizers.split(",")

    if not args.skip_state:
        kinds = [o for o in optimizers if not o.endswith("_layerwise")]  # same state as the plain form
        out = subprocess.run([args.bench] + kinds, stdout=subprocess.PIPE, check=True, text=True).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        base = next((r["state_bytes"] for r in rows if r["optimizer"] == "adamw"), None)
        print("| optimizer | state bytes | bytes / parameter | vs adamw |")
        print("|---|---|---|---|")
        for r in rows:
            ratio = "%.3f" % (r["state_bytes"] / base) if base else "-"
            print("| %s | %s | %.3f | %s |" % (r["optimizer"], format(r["state_bytes"], ","), r["bytes_per_parameter"], ratio))
        print(flush=True)

    if not args.skip_rss:
        with tempfile.TemporaryDirectory() as tmp:
            text_file(os.path.join(tmp, "input.txt"))
            results = [run_train(os.path.abspath(args.hftrain), tmp, o, args.steps, args.batch, args.block)
                       for o in optimizers]
        print("| optimizer | peak RSS (MiB) | gradient bytes alive at once / all gradients |")
        print("|---|---|---|")
        for r in results:
            g = "-" if r["grad_peak_bytes"] is None else "%s / %s" % (format(r["grad_peak_bytes"], ","), format(r["grad_all_bytes"], ","))
            print("| %s | %.0f | %s |" % (r["optimizer"], r["peak_rss_mib"], g), flush=True)


if __name__ == "__main__":
    main()
