#!/usr/bin/env python3
# Long-context training memory (issue 62): peak RSS per worker against the sequence length for a llama-shaped
# model with gradient checkpointing, with Ulysses sequence parallelism over 1 / 2 / 4 workers
# (distributed.sequence_parallel_size), the tiled MLP (training.tiled_mlp) off / on and activation-checkpoint
# offload (training.gradient_checkpointing_offload) off / on; tokens/s of each; and from a straight line through
# each setting's peaks, the longest sequence that trains under a fixed per-worker budget. One row of one
# sequence per step (per_device_train_batch_size 1), every row exactly --lengths tokens (bytes tokenizer).
#
# The peak of a run is the largest maximum resident set of its processes (the launcher and its workers), as
# the kernel reports it to the parent on exit (/usr/bin/time -v's "Maximum resident set size"). The settings of
# one length run one after the other, so the ratios are measured side by side. On a CPU the checkpointed inputs
# already live in host memory, so offload copies them within it: it cannot lower the peak here, and the table
# shows what it costs. Several workers on a machine with fewer cores than workers share those cores, so the
# tokens/s of SP 2 / 4 here is no scaling claim.
#
#   bench/long_context_memory.py --hftrain build/hftrain [--lengths 2048,4096,8192] [--budget-mib 512]
#                                [--steps 2] [--repeats 2] [--settings sp1,sp1+tiled,...]
#
# Each setting runs --repeats times per length (the order of the settings reversed on every other repeat); the
# table gives the lowest peak and the best tokens/s of the repeats.
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SPEC = """model: {type: llama, hidden_size: %(hidden)d, intermediate_size: %(inner)d, num_hidden_layers: %(layers)d,
        num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 384, max_position_embeddings: %(positions)d}
data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: %(length)d}
training: {output_dir: out, per_device_train_batch_size: 1, max_steps: %(steps)d, save_strategy: "no",
           eval_strategy: "no", learning_rate: 0.001, logging_steps: 1, seed: 3, gradient_checkpointing: true,
           skip_memory_metrics: true}
distributed: {ddp_timeout: 600}
"""

# name -> (sequence_parallel_size, tiled_mlp, offload)
SETTINGS = {
    "sp1": (1, False, False), "sp1+tiled": (1, True, False), "sp1+offload": (1, False, True),
    "sp1+tiled+offload": (1, True, True), "sp2": (2, False, False), "sp2+tiled": (2, True, False),
    "sp4": (4, False, False), "sp4+tiled": (4, True, False), "sp4+tiled+offload": (4, True, True),
}


def write_rows(path, n, length):
    words = ["the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord", "and", "her", "sword"]
    with open(path, "w") as f:
        for i in range(n):
            text, w = [], i
            while sum(len(t) + 1 for t in text) < length + 16:  # longer than max_length: truncated to it
                text.append(words[(w * 7 + i) % len(words)])
                w += 1
            f.write(json.dumps({"text": " ".join(text)}) + "\n")


def run(cmd, cwd):
    """Runs cmd; returns the peak RSS in MiB of the largest process of its tree and the output."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), out[-3000:]))
    return usage.ru_maxrss / 1024.0, out


def train(hftrain, work, setting, length, steps):
    sp, tiled, offload = SETTINGS[setting]
    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
    cmd = [hftrain, "train", "spec.yaml", "--set", "training.tiled_mlp=%s" % str(tiled).lower(),
           "--set", "training.gradient_checkpointing_offload=%s" % str(offload).lower()]
    if sp > 1:
        cmd += ["--nproc-per-node", str(sp), "--set", "distributed.sequence_parallel_size=%d" % sp]
    rss, _ = run(cmd, work)
    with open(os.path.join(work, "out", "train_results.json")) as f:
        results = json.load(f)
    return rss, steps * length / results["train_runtime"], results["train_loss"]


def fit(points):
    """Least-squares line peak = a + b * length over [(length, peak)]."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    b = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--lengths", default="2048,4096,8192")
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--budget-mib", type=float, default=512)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--inner", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    lengths = [int(x) for x in args.lengths.split(",")]
    settings = args.settings.split(",")
    work = tempfile.mkdtemp(prefix="hftrain_long_context_")
    found = {}  # (setting, length) -> (peak MiB, tokens/s, train_loss)
    try:
        for length in lengths:
            write_rows(os.path.join(work, "train.jsonl"), 4 * args.steps, length)
            with open(os.path.join(work, "spec.yaml"), "w") as f:
                f.write(SPEC % {"hidden": args.hidden, "inner": args.inner, "layers": args.layers, "length": length,
                                "positions": max(lengths), "steps": args.steps})
            for rep in range(args.repeats):  # the settings in turn, the order reversed on every other repeat
                for s in (settings if rep % 2 == 0 else list(reversed(settings))):
                    got = train(hftrain, work, s, length, args.steps)
                    print("%s at %d tokens: peak %.0f MiB, %.0f tokens/s, train_loss %.6f" % ((s, length) + got),
                          file=sys.stderr)
                    old = found.get((s, length))  # the lowest peak and the best tokens/s of the repeats
                    found[(s, length)] = got if old is None else (min(old[0], got[0]), max(old[1], got[1]), got[2])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| setting | " + " | ".join("peak MiB at %d" % n for n in lengths) + " | MiB per 1k tokens | "
          + " | ".join("tokens/s at %d" % n for n in lengths) + " | longest under %.0f MiB |" % args.budget_mib)
    print("|---" * (2 * len(lengths) + 3) + "|")
    longest = {}
    for s in settings:
        a, b = fit([(n, found[(s, n)][0]) for n in lengths])
        measured = [n for n in lengths if found[(s, n)][0] <= args.budget_mib]
        line = (args.budget_mib - a) / b if b > 0 else float("nan")  # no line through a single length
        longest[s] = line
        where = "%d measured" % max(measured) if measured else "none measured"
        print("| %s | %s | %.1f | %s | %s; line %.0f |" % (
            s, " | ".join("%.0f" % found[(s, n)][0] for n in lengths), 1000 * b,
            " | ".join("%.0f" % found[(s, n)][1] for n in lengths), where, line))
    print()
    base = settings[0]
    for s in settings[1:]:
        print("%s against %s: peak at %d tokens %.3f, tokens/s at %d %.3f, longest (line) %.2fx, train_loss difference "
              "%.2e" % (s, base, lengths[-1], found[(s, lengths[-1])][0] / found[(base, lengths[-1])][0], lengths[-1],
                        found[(s, lengths[-1])][1] / found[(base, lengths[-1])][1], longest[s] / longest[base],
                        abs(found[(s, lengths[-1])][2] - found[(base, lengths[-1])][2])))


if __name__ == "__main__":
    main()
