#!/usr/bin/python3
"""Side-by-side benchmark: hftrain against a plain PyTorch loop (bench/python_loop.py) on the same
workload, back to back in one run, repeated; the order of the two alternates between repeats.

For every run it records tokens/s (or examples/s), ms per optimizer step (train time / steps, model
building and evaluation excluded on both sides), peak RSS (the kernel's ru_maxrss of the process) and,
for hftrain, the fraction of the training time spent waiting for the next batch. It prints each pair,
then per workload the medians and the median of the per-pair ratios hftrain / Python.

  bench/run_bench.py --text data.txt                      # all three workloads, 3 repeats
  bench/run_bench.py --text data.txt --workloads nanogpt --repeats 5
  bench/run_bench.py --workloads mlp --steps 500          # quick check

Workloads: nanogpt (nanoGPT's shakespeare-char CPU recipe, 2000 steps, with the final validation
loss of both sides), gpt2 (GPT-2-shaped, compute-bound, 6 steps), llama (a LLaMA of 8 x 512, 10 steps; not in
the default list), mlp (overhead-bound, 3000 steps).
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

# workload -> (hftrain spec, tokens per step for the rate, python_loop.py arguments)
WORKLOADS = {
    "nanogpt": (os.path.join(ROOT, "configs", "shakespeare_char.yaml"), 12 * 64),
    "gpt2": (os.path.join(HERE, "specs", "gpt2_shaped.yaml"), 4 * 256),
    "llama": (os.path.join(HERE, "specs", "llama_shaped.yaml"), 4 * 256),
    "mlp": (os.path.join(HERE, "specs", "mlp.yaml"), 32),
}
TEXT_WORKLOADS = ("nanogpt", "gpt2", "llama")  # the workloads that read --text


def run(cmd, cwd, env=None):
    """Runs cmd; returns (exit code, stdout+stderr, wall seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out, time.perf_counter() - start, usage.ru_maxrss / 1024.0


def run_hftrain(args, workload, workdir, env=None, extra=()):
    """`env`: the environment of the run (default ours); `extra`: more command-line arguments."""
    spec, tokens_per_step = WORKLOADS[workload]
    out_dir = os.path.join(workdir, "hftrain-" + workload)
    cmd = [args.hftrain, "train", spec, "--set", "training.output_dir=" + out_dir,
           "--set", "training.disable_tqdm=true", "--set", "training.report_to=none",
           "--set", "training.save_strategy=no", "--set", "training.eval_strategy=no",
           "--set", "training.do_eval=false"]
    if workload in TEXT_WORKLOADS:
        cmd += ["--set", "data.path=" + os.path.abspath(args.text)]
    if args.steps:
        cmd += ["--set", "training.max_steps=%d" % args.steps]
    cmd += list(extra)
    code, out, wall, rss = run(cmd, workdir, env)
    if code != 0:
        sys.exit("hftrain failed (exit %d):\n%s" % (code, out[-3000:]))
    results = json.load(open(os.path.join(out_dir, "train_results.json")))
    steps = json.load(open(os.path.join(out_dir, "trainer_state.json")))["global_step"]
    r = {"steps": steps, "train_seconds": results["train_runtime"], "rss_mib": rss, "wall": wall,
         "data_wait": results.get("train_data_wait_fraction")}
    if workload == "nanogpt" and args.eval:
        # Validation loss of the final weights, computed by `hftrain eval` (not timed).
        code, out, _, _ = run([args.hftrain, "eval", out_dir], workdir)
        if code != 0:
            sys.exit("hftrain eval failed (exit %d):\n%s" % (code, out[-3000:]))
        r["eval_loss"] = json.load(open(os.path.join(out_dir, "eval_results.json")))["eval_loss"]
    r["tokens_per_step"] = tokens_per_step
    return r


def run_python(args, workload, workdir, extra=()):
    cmd = [args.python, os.path.join(HERE, "python_loop.py"), workload] + list(extra)
    if workload in TEXT_WORKLOADS:
        cmd += ["--text", os.path.abspath(args.text)]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    if not args.eval or workload != "nanogpt":
        cmd += ["--no-eval"]
    if args.python_threads:
        cmd += ["--threads", str(args.python_threads)]
    code, out, wall, rss = run(cmd, workdir)
    if code != 0:
        sys.exit("python loop failed (exit %d):\n%s" % (code, out[-3000:]))
    r = json.loads(out.strip().splitlines()[-1])
    r.update({"rss_mib": rss, "wall": wall})
    return r


def rate(r):
    return r["steps"] * r["tokens_per_step"] / r["train_seconds"]


def ms_per_step(r):
    return 1e3 * r["train_seconds"] / r["steps"]


def add_side_by_side_args(ap, workload, steps, repeats):
    """The arguments the side-by-side scripts share (fused_kernels.py, gpu_compare.py)."""
    ap.add_argument("--text", required=True)
    ap.add_argument("--workload", default=workload, choices=list(TEXT_WORKLOADS))
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--bf16", action="store_true")


def medians_side_by_side(variants, repeats, prefix):
    """Runs every (name, run(workdir)) of `variants` once per repeat, the order rotated each repeat so that
    none always runs first; prints each run's ms per step; returns the median per name."""
    times = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        for rep in range(repeats):
            k = rep % len(variants)
            for name, fn in variants[k:] + variants[:k]:
                ms = ms_per_step(fn(work))
                times[name].append(ms)
                print("repeat %d  %-18s %8.2f ms/step" % (rep + 1, name, ms), flush=True)
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", help="text file for nanogpt and gpt2 (e.g. tinyshakespeare)")
    ap.add_argument("--workloads", default="nanogpt,gpt2,mlp")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, help="override the number of steps (quick checks)")
    ap.add_argument("--hftrain", default=os.path.join(ROOT, "build", "hftrain"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--python-threads", type=int, default=0, help="torch.set_num_threads for the Python side")
    ap.add_argument("--no-eval", dest="eval", action="store_false", help="skip the nanogpt validation loss")
    args = ap.parse_args()
    workloads = args.workloads.split(",")
    if any(w in TEXT_WORKLOADS for w in workloads) and not args.text:
        ap.error("--text FILE is needed for nanogpt and gpt2")

    summary = {}
    with tempfile.TemporaryDirectory(prefix="hftrain-bench-") as workdir:
        for w in workloads:
            pairs = []
            for i in range(args.repeats):
                order = ["hftrain", "python"] if i % 2 == 0 else ["python", "hftrain"]
                got = {}
                for side in order:
                    got[side] = run_hftrain(args, w, workdir) if side == "hftrain" else run_python(args, w, workdir)
                h, p = got["hftrain"], got["python"]
                pairs.append((h, p))
                unit = "tok/s" if w != "mlp" else "ex/s"
                print("%-8s #%d  hftrain %9.0f %s %8.2f ms/step %7.0f MiB wait %s | python %9.0f %s %8.2f ms/step "
                      "%7.0f MiB | speed x%.2f  rss x%.2f%s" % (
                          w, i + 1, rate(h), unit, ms_per_step(h), h["rss_mib"],
                          "%.2f%%" % (100 * h["data_wait"]) if h.get("data_wait") is not None else "n/a",
                          rate(p), unit, ms_per_step(p), p["rss_mib"], rate(h) / rate(p), h["rss_mib"] / p["rss_mib"],
                          "  eval_loss %.4f vs %.4f" % (h["eval_loss"], p["eval_loss"]) if "eval_loss" in h else ""),
                      flush=True)
            summary[w] = {
                "hftrain_rate": statistics.median(rate(h) for h, _ in pairs),
                "python_rate": statistics.median(rate(p) for _, p in pairs),
                "hftrain_ms_per_step": statistics.median(ms_per_step(h) for h, _ in pairs),
                "python_ms_per_step": statistics.median(ms_per_step(p) for _, p in pairs),
                "speed_ratio": statistics.median(rate(h) / rate(p) for h, p in pairs),
                "hftrain_rss_mib": statistics.median(h["rss_mib"] for h, _ in pairs),
                "python_rss_mib": statistics.median(p["rss_mib"] for _, p in pairs),
                "rss_ratio": statistics.median(h["rss_mib"] / p["rss_mib"] for h, p in pairs),
                "data_wait_max": max(h.get("data_wait") or 0 for h, _ in pairs),
            }
            if "eval_loss" in pairs[0][0]:
                summary[w]["eval_loss_hftrain"] = statistics.median(h["eval_loss"] for h, _ in pairs)
                summary[w]["eval_loss_python"] = statistics.median(p["eval_loss"] for _, p in pairs)
    print("\nmedians over %d repeats (ratios: median of the per-pair ratios, hftrain / python)" % args.repeats)
    for w, s in summary.items():
        line = ("%-8s hftrain %9.0f vs python %9.0f per s (x%.2f) | ms/step %.2f vs %.2f | peak RSS %.0f vs %.0f MiB "
                "(x%.2f) | data wait <= %.2f%%" % (w, s["hftrain_rate"], s["python_rate"], s["speed_ratio"],
                                                   s["hftrain_ms_per_step"], s["python_ms_per_step"], s["hftrain_rss_mib"],
                                                   s["python_rss_mib"], s["rss_ratio"], 100 * s["data_wait_max"]))
        if "eval_loss_hftrain" in s:
            line += " | eval_loss %.4f vs %.4f" % (s["eval_loss_hftrain"], s["eval_loss_python"])
        print(line)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
