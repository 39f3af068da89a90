#!/usr/bin/python3
"""Side-by-side benchmark of hftrain's engine variants: the same workload in fp32 and in bf16 (mixed
precision), and at ZeRO stage 2 and 3 (parameter partitioning, with and without prefetch), back to back
in one run, repeated, the order alternating between repeats. Ratios are against each workload's first
variant.

  bench/precision_bench.py --text data.txt                          # both workloads, 2 repeats
  bench/precision_bench.py --text data.txt --workloads nanogpt --repeats 3
  bench/precision_bench.py --text data.txt --workloads zero3 --repeats 3

Workloads:
  nanogpt-nobf16isa  the same with DNNL_MAX_CPU_ISA=AVX512_CORE: oneDNN as on an AVX-512 CPU without
           AVX512-BF16 (it then emulates bf16 dot products), to show what bf16 costs on such a CPU.
  nanogpt  nanoGPT's shakespeare-char recipe (configs/shakespeare_char.yaml, 2000 steps): tokens/s and
           the final validation loss of fp32 vs bf16 (the bf16 run must stay within 2 %).
  gpt2     GPT-2-shaped (bench/specs/gpt2_shaped.yaml, 12 x 768, seq 256): fp32 ZeRO-0 in one process
           against bf16 ZeRO-1 on 2 workers (per-device batch 2 each, the same global batch of 4): the
           peak RSS of the largest process, the engine's per-rank bytes, and tokens/s; and bf16 vs fp32
           in one process for speed alone.
  zero3    the GPT-2-shaped workload on 2 workers (per-device batch 2): ZeRO stage 2 against stage 3 with
           the default prefetch and with prefetch off (zero.stage3_prefetch_bucket_size 0); the weight
           matrices are partitioned, the LayerNorm weights stay whole (default persistence threshold).
For each run: train seconds from train_results.json (model building and evaluation excluded), peak
RSS = the kernel's ru_maxrss of the process tree (the largest single process: one worker for
multi-worker runs).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, cwd, env=None):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, **(env or {})))
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), out, time.perf_counter() - start, usage.ru_maxrss / 1024.0


# variant -> extra arguments
VARIANTS = {
    "nanogpt": {
        "fp32": [],
        "bf16": ["--set", "precision.bf16=true"],
    },
    # bf16 as on an AVX-512 CPU without the AVX512-BF16 instructions: oneDNN emulates bf16 dot products.
    "nanogpt-nobf16isa": {
        "fp32": [],
        "bf16": ["--set", "precision.bf16=true"],
    },
    "gpt2": {
        "fp32": [],
        "bf16": ["--set", "precision.bf16=true"],
        "bf16-zero1-2w": ["--set", "precision.bf16=true", "--set", "zero.stage=1", "--nproc-per-node", "2",
                          "--set", "training.per_device_train_batch_size=2"],
    },
    "zero3": {
        "stage2": ["--set", "zero.stage=2"],
        "stage3": ["--set", "zero.stage=3"],
        "stage3-noprefetch": ["--set", "zero.stage=3", "--set", "zero.stage3_prefetch_bucket_size=0"],
    },
}
COMMON = {"zero3": ["--nproc-per-node", "2", "--set", "training.per_device_train_batch_size=2"]}
ENV = {"nanogpt-nobf16isa": {"DNNL_MAX_CPU_ISA": "AVX512_CORE"}}
SPECS = {"nanogpt": (os.path.join(ROOT, "configs", "shakespeare_char.yaml"), 12 * 64),
         "nanogpt-nobf16isa": (os.path.join(ROOT, "configs", "shakespeare_char.yaml"), 12 * 64),
         "gpt2": (os.path.join(HERE, "specs", "gpt2_shaped.yaml"), 4 * 256),
         "zero3": (os.path.join(HERE, "specs", "gpt2_shaped.yaml"), 4 * 256)}


def run_variant(args, workload, variant, workdir):
    spec, tokens_per_step = SPECS[workload]
    out_dir = os.path.join(workdir, "%s-%s" % (workload, variant))
    cmd = [args.hftrain, "train", spec, "--set", "training.output_dir=" + out_dir, "--set", "data.path=" + args.text,
           "--set", "training.disable_tqdm=true", "--set", "training.report_to=none", "--set",
           "training.save_strategy=no", "--set", "training.eval_strategy=no", "--set", "training.do_eval=false"]
    cmd += COMMON.get(workload, []) + VARIANTS[workload][variant]
    if args.steps:
        cmd += ["--set", "training.max_steps=%d" % args.steps]
    code, out, wall, rss = run(cmd, workdir, ENV.get(workload))
    if code != 0:
        sys.exit("hftrain %s %s failed (exit %d):\n%s" % (workload, variant, code, out[-3000:]))
    res = json.load(open(os.path.join(out_dir, "train_results.json")))
    steps = json.load(open(os.path.join(out_dir, "trainer_state.json")))["global_step"]
    r = {"rate": steps * tokens_per_step / res["train_runtime"], "rss_mib": rss}
    for line in out.splitlines():
        if line.startswith("engine memory: "):
            r["engine_memory"] = json.loads(line[len("engine memory: "):])
    if workload.startswith("nanogpt") and args.eval:
        code, out, _, _ = run([args.hftrain, "eval", out_dir], workdir)
        if code != 0:
            sys.exit("hftrain eval failed (exit %d):\n%s" % (code, out[-3000:]))
        r["eval_loss"] = json.load(open(os.path.join(out_dir, "eval_results.json")))["eval_loss"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", required=True, help="text file (e.g. tinyshakespeare)")
    ap.add_argument("--workloads", default="nanogpt,gpt2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, help="override the number of steps (quick checks)")
    ap.add_argument("--hftrain", default=os.path.join(ROOT, "build", "hftrain"))
    ap.add_argument("--no-eval", dest="eval", action="store_false")
    args = ap.parse_args()
    args.text = os.path.abspath(args.text)
    with tempfile.TemporaryDirectory(prefix="hftrain-precision-") as workdir:
        for w in args.workloads.split(","):
            variants = list(VARIANTS[w])
            runs = {v: [] for v in variants}
            for i in range(args.repeats):
                order = variants if i % 2 == 0 else list(reversed(variants))
                for v in order:
                    r = run_variant(args, w, v, workdir)
                    runs[v].append(r)
                    extra = " eval_loss %.4f" % r["eval_loss"] if "eval_loss" in r else ""
                    print("%-8s #%d %-14s %9.1f tok/s  peak RSS %7.0f MiB%s" % (w, i + 1, v, r["rate"], r["rss_mib"], extra),
                          flush=True)
                    if "engine_memory" in r:
                        print("         engine memory: " + json.dumps(r["engine_memory"]), flush=True)
            base = runs[variants[0]]
            print("\n%s: medians over %d repeats; ratios are medians of per-repeat ratios against %s" % (
                w, args.repeats, variants[0]))
            for v in variants:
                rs = runs[v]
                speed = statistics.median(r["rate"] / b["rate"] for r, b in zip(rs, base))
                mem = statistics.median(r["rss_mib"] / b["rss_mib"] for r, b in zip(rs, base))
                line = "  %-14s %9.1f tok/s (x%.2f)  peak RSS %7.0f MiB (x%.2f)" % (
                    v, statistics.median(r["rate"] for r in rs), speed, statistics.median(r["rss_mib"] for r in rs), mem)
                if "eval_loss" in rs[0]:
                    el = statistics.median(r["eval_loss"] for r in rs)
                    line += "  eval_loss %.4f (%+.2f %% vs %s)" % (
                        el, 100 * (el / statistics.median(b["eval_loss"] for b in base) - 1), variants[0])
                print(line, flush=True)


if __name__ == "__main__":
    main()
