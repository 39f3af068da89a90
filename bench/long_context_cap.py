#!/usr/bin/env python3
# Long-context training under an enforced memory cap per worker (issue 62): each worker of a run is started in a
# cgroup (v1 memory controller) of its own whose memory.limit_in_bytes is --cap-mib, so a worker that needs more is
# stopped by the kernel's OOM killer rather than merely measured; a run trains or it does not. The workers are
# started as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), each one
# `hftrain train spec.yaml` under bench/long_context_memory.py's model and data, so the run is the same one that
# bench measures. The cap counts what the cgroup charges: the worker's anonymous memory and the file pages it maps
# or reads (LibTorch's libraries among them).
#
#   bench/long_context_cap.py --hftrain build/hftrain --cap-mib 640 --runs sp1:2048,sp1:4096,sp4+tiled:16384
#
# Needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory (exits with a message otherwise).
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from long_context_memory import SETTINGS, SPEC, write_rows

CGROUPS = "/sys/fs/cgroup/memory"


def make_group(name, cap_mib):
    path = os.path.join(CGROUPS, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
        f.write(str(int(cap_mib * 1024 * 1024)))
    return path


def group_value(path, key):
    with open(os.path.join(path, key)) as f:
        return int(f.read().strip())


def run_capped(hftrain, work, setting, cap_mib, port):
    """Starts the setting's workers, each in its own capped group; (trained, each worker's peak MiB, exit codes)."""
    sp, tiled, offload = SETTINGS[setting]
    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
    args = ["train", "spec.yaml", "--set", "training.tiled_mlp=%s" % str(tiled).lower(),
            "--set", "training.gradient_checkpointing_offload=%s" % str(offload).lower(),
            "--set", "distributed.sequence_parallel_size=%d" % sp, "--set", "distributed.ddp_timeout=120"]
    groups, workers = [], []
    for rank in range(sp):
        group = make_group("hftrain_cap_%d_%d" % (os.getpid(), rank), cap_mib)
        groups.append(group)
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(sp), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(sp),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        # the shell joins the group, then becomes the worker: nothing runs outside the cap
        script = 'echo $$ > "%s/cgroup.procs" && exec "$0" "$@"' % group
        workers.append(subprocess.Popen(["sh", "-c", script, hftrain] + args, cwd=work, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True))
    codes = []
    for w in workers:
        w.communicate()
        codes.append(w.returncode)
    peaks = [group_value(g, "memory.max_usage_in_bytes") / 2 ** 20 for g in groups]
    for g in groups:
        os.rmdir(g)
    return all(c == 0 for c in codes), peaks, codes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--cap-mib", type=float, default=640)
    ap.add_argument("--runs", default="sp1:2048,sp1:4096,sp1+tiled:4096,sp1+tiled:8192,sp4+tiled:16384")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--inner", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.isdir(CGROUPS):
        sys.exit("bench/long_context_cap.py needs root and the cgroup v1 memory controller at " + CGROUPS)
    hftrain = os.path.abspath(args.hftrain)
    runs = [(r.split(":")[0], int(r.split(":")[1])) for r in args.runs.split(",")]
    longest = max(n for _, n in runs)
    work = tempfile.mkdtemp(prefix="hftrain_long_context_cap_")
    print("| setting | sequence | trained under %.0f MiB per worker | each worker's peak charge (MiB) | exit codes |"
          % args.cap_mib)
    print("|---|---|---|---|---|")
    try:
        for i, (setting, length) in enumerate(runs):
            write_rows(os.path.join(work, "train.jsonl"), 4 * args.steps, length)
            with open(os.path.join(work, "spec.yaml"), "w") as f:
                f.write(SPEC % {"hidden": args.hidden, "inner": args.inner, "layers": args.layers, "length": length,
                                "positions": longest, "steps": args.steps})
            trained, peaks, codes = run_capped(hftrain, work, setting, args.cap_mib, 29500 + i)
            print("| %s | %d | %s | %s | %s |" % (setting, length, "yes" if trained else "**no**",
                                                  ", ".join("%.0f" % p for p in peaks), ", ".join(map(str, codes))))
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
