#!/usr/bin/env python3
# Peak RSS of `hftrain eval` against the size of the evaluation set: a causal LM with a 32k vocabulary
# (the logits of one batch are its largest tensors) evaluated on 1k and on 20k jsonl rows, one after the
# other, alternating, so that the ratio is measured side by side. Evaluation streams its metrics batch by
# batch, so the peak should not grow with the rows (HF batch_eval_metrics; goal: within 10 %).
#
#   bench/eval_memory.py --hftrain build/hftrain [--rows 1000,20000] [--repeats 2]
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

SPEC = """model: {type: gpt, n_layer: 2, n_head: 4, n_embd: 128, vocab_size: %(vocab)d, block_size: 128}
data: {type: jsonl, train_file: train.jsonl, validation_file: eval.jsonl, tokenizer: bytes, max_length: 128}
metrics: [accuracy, perplexity]
training: {output_dir: out, per_device_train_batch_size: 8, per_device_eval_batch_size: 16, max_steps: 1,
           save_strategy: "no", eval_strategy: "no", learning_rate: 0.001}
"""


def write_rows(path, n, seed):
    r = random.Random(seed)
    words = ["the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord", "and", "her", "sword"]
    with open(path, "w") as f:
        for _ in range(n):
            f.write(json.dumps({"text": " ".join(r.choice(words) for _ in range(r.randint(4, 30)))}) + "\n")


def run(cmd, cwd, env=None):
    """Runs cmd (in `env`, default ours); returns (peak RSS in MiB of that process, output)."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), out[-3000:]))
    return usage.ru_maxrss / 1024.0, out


def train_side_by_side(hftrain, work, setting, repeats):
    """Trains spec.yaml in `work` once with `setting`=true and once with false per repeat, alternating which
    goes first, each into a fresh out/. Returns {True/False: (peak RSS MiB list, samples/s list, train_loss)}."""
    found = {True: ([], [], None), False: ([], [], None)}
    for rep in range(repeats):
        for value in ([True, False] if rep % 2 == 0 else [False, True]):
            shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
            rss, _ = run([hftrain, "train", "spec.yaml", "--set", "%s=%s" % (setting, "true" if value else "false")], work)
            with open(os.path.join(work, "out", "train_results.json")) as f:
                results = json.load(f)
            peaks, speeds, _ = found[value]
            peaks.append(rss)
            speeds.append(results["train_samples_per_second"])
            found[value] = (peaks, speeds, results["train_loss"])
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--rows", default="1000,20000")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    sizes = [int(x) for x in args.rows.split(",")]
    work = tempfile.mkdtemp(prefix="hftrain_eval_memory_")
    try:
        write_rows(os.path.join(work, "train.jsonl"), 64, 1)
        write_rows(os.path.join(work, "eval.jsonl"), max(sizes), 2)
        with open(os.path.join(work, "spec.yaml"), "w") as f:
            f.write(SPEC % {"vocab": args.vocab})
        run([hftrain, "train", "spec.yaml"], work)  # a trained model in out/ for eval to load
        peaks = {n: [] for n in sizes}
        results = {}
        for rep in range(args.repeats):
            for n in (sizes if rep % 2 == 0 else list(reversed(sizes))):
                rss, _ = run([hftrain, "eval", "spec.yaml", "--set", "data.max_eval_samples=%d" % n], work)
                peaks[n].append(rss)
                with open(os.path.join(work, "out", "eval_results.json")) as f:
                    results[n] = json.load(f)
        print("| eval rows | peak RSS (MiB, per repeat) | eval_loss | eval_accuracy |")
        print("|---|---|---|---|")
        for n in sizes:
            print("| %d | %s | %.4f | %.4f |" % (n, ", ".join("%.0f" % p for p in peaks[n]), results[n]["eval_loss"],
                                                results[n]["eval_accuracy"]))
        lo, hi = min(sizes), max(sizes)
        ratio = min(peaks[hi]) / min(peaks[lo])
        print("\npeak RSS %d rows / %d rows (best of %d): %.3f (goal <= 1.10)" % (hi, lo, args.repeats, ratio))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
