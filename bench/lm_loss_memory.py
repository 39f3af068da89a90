#!/usr/bin/env python3
# Peak RSS and speed of training with the chunked language-model loss (training.chunked_lm_loss, the
# default) against full logits (chunked_lm_loss: false), for a llama shape at vocabularies of 32k and 128k,
# where the [tokens x vocabulary] logits are the step's largest tensors. The two settings run one after the
# other, alternating, so that the ratios are measured side by side; the train losses of both are printed
# (they agree within fp32 rounding). Goal of issue #34: peak RSS -40 %.
#
#   bench/lm_loss_memory.py --hftrain build/hftrain [--vocab 32000,128000] [--steps 4] [--repeats 2]
import argparse
import json
import os
import random
import shutil
import tempfile

from eval_memory import train_side_by_side

SPEC = """model: {type: llama, hidden_size: 256, intermediate_size: 688, num_hidden_layers: 2, num_attention_heads: 4,
        vocab_size: %(vocab)d, max_position_embeddings: 256}
data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 256}
training: {output_dir: out, per_device_train_batch_size: 8, max_steps: %(steps)d, save_strategy: "no",
           eval_strategy: "no", learning_rate: 0.001, logging_steps: 1, seed: 3}
"""


def write_rows(path, n, seed):
    r = random.Random(seed)
    words = ["the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord", "and", "her", "sword"]
    with open(path, "w") as f:
        for _ in range(n):
            f.write(json.dumps({"text": " ".join(r.choice(words) for _ in range(80))}) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--vocab", default="32000,128000")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    work = tempfile.mkdtemp(prefix="hftrain_lm_loss_memory_")
    try:
        write_rows(os.path.join(work, "train.jsonl"), 256, 1)
        print("| vocab | loss | peak RSS MiB (per repeat) | train samples/s (best) | train_loss |")
        print("|---|---|---|---|---|")
        summary = []
        for vocab in [int(v) for v in args.vocab.split(",")]:
            with open(os.path.join(work, "spec.yaml"), "w") as f:
                f.write(SPEC % {"vocab": vocab, "steps": args.steps})
            found = train_side_by_side(hftrain, work, "training.chunked_lm_loss", args.repeats)
            peaks = {k: v[0] for k, v in found.items()}
            speed = {k: v[1] for k, v in found.items()}
            loss = {k: v[2] for k, v in found.items()}
            for chunked in (False, True):
                print("| %d | %s | %s | %.2f | %.6f |" % (vocab, "chunked" if chunked else "full logits",
                                                          ", ".join("%.0f" % p for p in peaks[chunked]),
                                                          max(speed[chunked]), loss[chunked]))
            summary.append("vocab %d: peak RSS chunked / full %.3f, samples/s chunked / full %.3f, train_loss "
                           "difference %.2e" % (vocab, min(peaks[True]) / min(peaks[False]),
                                                max(speed[True]) / max(speed[False]), abs(loss[True] - loss[False])))
        print()
        print("\n".join(summary))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
