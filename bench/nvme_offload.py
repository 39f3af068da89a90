#!/usr/bin/env python3
"""NVMe offload against the disk it uses, side by side in one run.

1. fio measures the swap directory's sequential direct-I/O bandwidth (libaio, 1 MiB blocks, queue depth 8,
   a file the size of the optimizer state), write then read.
2. The same hftrain run (a GPT-2-small-shaped model, ZeRO stage 1 on one worker, AdamW) trains with the
   optimizer state in memory and then with zero.offload_optimizer device nvme on that directory, in pairs,
   alternating the order.
It prints the offloaded steps' I/O throughput against fio's, the share of step time spent waiting for I/O,
and the offloaded step's extra time against the bound state_bytes x 2 / fio bandwidth (+20 %).

    bench/nvme_offload.py SWAP_DIR [--steps 6] [--repeats 2] [--hftrain build/hftrain]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

SPEC = """model: {type: gpt, n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50304, dropout: 0.0, bias: false}
data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 0, test_size: 0}
training: {output_dir: out, overwrite_output_dir: true, per_device_train_batch_size: 2, max_steps: %d,
           save_strategy: "no", logging_steps: 1, report_to: none, do_eval: false}
zero: {stage: 1, sub_group_size: 8000000}
"""


def fio(directory, rw, size_mb):
    out = subprocess.run(
        ["fio", "--name=bw", "--directory=" + directory, "--rw=" + rw, "--bs=1M", "--size=%dM" % size_mb,
         "--direct=1", "--ioengine=libaio", "--iodepth=8", "--output-format=json"],
        check=True, capture_output=True, text=True).stdout
    job = json.loads(out)["jobs"][0]
    return job["write" if rw == "write" else "read"]["bw_bytes"] / 1e6  # MB/s


def train(hftrain, work, steps, offload_dir):
    with open(os.path.join(work, "spec.yaml"), "w") as f:
        f.write(SPEC % steps)
    cmd = [hftrain, "train", "spec.yaml"]
    if offload_dir:
        cmd += ["--set", "zero.offload_optimizer.device=nvme", "--set", "zero.offload_optimizer.nvme_path=" + offload_dir]
    log = subprocess.run(cmd, cwd=work, check=True, capture_output=True, text=True).stderr
    with open(os.path.join(work, "out", "train_results.json")) as f:
        runtime = json.load(f)["train_runtime"]
    report = json.loads(log.split("engine memory: ", 1)[1].splitlines()[0])["ranks"][0]
    summary = re.search(r"offload: (\d+) optimizer steps moved ([0-9.]+) MB .* in ([0-9.]+) s of steps .*; ([0-9.]+) s", log)
    return runtime, report, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("swap_dir")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hftrain", default=os.path.join(os.path.dirname(__file__), "..", "build", "hftrain"))
    a = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not installed (scripts/install-deps.sh installs it)")
    work = tempfile.mkdtemp(prefix="hftrain_offload_bench_")
    pairs = []
    for r in range(a.repeats):
        order = [False, True] if r % 2 == 0 else [True, False]
        got = {}
        for off in order:
            got[off] = train(a.hftrain, work, a.steps, a.swap_dir if off else None)
        pairs.append(got)
    state = pairs[0][True][1]["optimizer_state_offloaded_bytes"]
    size_mb = max(64, state // 1000000)
    write_bw = fio(a.swap_dir, "write", size_mb)
    read_bw = fio(a.swap_dir, "read", size_mb)
    for f in os.listdir(a.swap_dir):
        if f.startswith("bw."):
            os.remove(os.path.join(a.swap_dir, f))
    fio_bw = 2 / (1 / write_bw + 1 / read_bw)  # equal bytes read and written

    plain = statistics.median(p[False][0] for p in pairs)
    offl = statistics.median(p[True][0] for p in pairs)
    summaries = [p[True][2] for p in pairs]
    steps = int(summaries[0].group(1))
    moved = statistics.median(float(s.group(2)) for s in summaries)
    step_s = statistics.median(float(s.group(3)) for s in summaries)
    wait_s = statistics.median(float(s.group(4)) for s in summaries)
    bound = plain + steps * (2 * state / 1e6) / fio_bw * 1.2
    print("optimizer state offloaded: %.1f MB per rank; fio: write %.0f MB/s, read %.0f MB/s (combined %.0f MB/s)"
          % (state / 1e6, write_bw, read_bw, fio_bw))
    io_at_fio = moved / fio_bw
    print("offloaded optimizer steps: %.0f MB moved in %.2f s of steps = %.0f MB/s = %.0f%% of fio; blocked on I/O "
          "%.2f s of the %.2f s that I/O takes at fio's bandwidth: %.0f%% of it hidden behind the update"
          % (moved, step_s, moved / step_s, 100 * moved / step_s / fio_bw, wait_s, io_at_fio,
             max(0.0, 100 * (1 - wait_s / io_at_fio))))
    print("train_runtime (median of %d pairs): in memory %.2f s, offloaded %.2f s (x%.2f); bound in memory + "
          "state x 2 / fio x 1.2 per step = %.2f s: %s"
          % (a.repeats, plain, offl, offl / plain, bound, "met" if offl <= bound else "NOT met"))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
