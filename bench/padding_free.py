#!/usr/bin/env python3
# Padded against padding-free training (training.padding_free) on variable-length jsonl rows whose lengths
# are drawn like an instruction dataset's (log-normal, median ~90 tokens, capped at the context): the same
# samples, the same steps, one run after the other, alternating, so that the ratios are measured side by
# side. Prints samples/s (the real tokens per sample are the same, so it is the tokens/s ratio), peak RSS
# and the train loss of both (equal within rounding: the packed batch scores the same label tokens).
# Goal of issue #34: >= 1.5x tokens/s.
#
#   bench/padding_free.py --hftrain build/hftrain [--model gpt2|llama] [--steps 30] [--repeats 2]
import argparse
import json
import math
import os
import random
import shutil
import tempfile

from eval_memory import train_side_by_side

MODELS = {
    "gpt2": "{type: gpt2, n_layer: 4, n_head: 4, n_embd: 256, n_positions: 512, resid_pdrop: 0, embd_pdrop: 0, "
            "attn_pdrop: 0}",
    "llama": "{type: llama, hidden_size: 256, intermediate_size: 688, num_hidden_layers: 4, num_attention_heads: 4, "
             "max_position_embeddings: 512}",
}

SPEC = """model: %(model)s
data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 512}
training: {output_dir: out, per_device_train_batch_size: 8, max_steps: %(steps)d, save_strategy: "no",
           eval_strategy: "no", learning_rate: 0.001, logging_steps: 10, seed: 3}
"""


def write_rows(path, n, seed):
    r = random.Random(seed)
    words = ["the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord", "and", "her", "sword"]
    lengths = []
    with open(path, "w") as f:
        for _ in range(n):
            chars = min(500, max(8, int(math.exp(r.gauss(math.log(90), 0.8)))))
            text = ""
            while len(text) < chars:
                text += r.choice(words) + " "
            text = text[:chars]
            lengths.append(len(text))
            f.write(json.dumps({"text": text}) + "\n")
    return lengths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--model", default="gpt2", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    work = tempfile.mkdtemp(prefix="hftrain_padding_free_")
    try:
        lengths = write_rows(os.path.join(work, "train.jsonl"), 8 * args.steps, 1)
        with open(os.path.join(work, "spec.yaml"), "w") as f:
            f.write(SPEC % {"model": MODELS[args.model], "steps": args.steps})
        found = train_side_by_side(hftrain, work, "training.padding_free", args.repeats)
        rss = {k: v[0] for k, v in found.items()}
        speed = {k: v[1] for k, v in found.items()}
        loss = {k: v[2] for k, v in found.items()}
        sorted_lengths = sorted(lengths)
        print("rows: %d, characters (bytes tokenizer: tokens) median %d, p90 %d, max %d; model %s, batch 8, %d steps"
              % (len(lengths), sorted_lengths[len(lengths) // 2], sorted_lengths[int(len(lengths) * 0.9)],
                 sorted_lengths[-1], args.model, args.steps))
        print("| batches | samples/s (per repeat) | peak RSS MiB (per repeat) | train_loss |")
        print("|---|---|---|---|")
        for packed in (False, True):
            print("| %s | %s | %s | %.6f |" % ("padding-free" if packed else "padded",
                                              ", ".join("%.2f" % s for s in speed[packed]),
                                              ", ".join("%.0f" % p for p in rss[packed]), loss[packed]))
        print("\nsamples/s padding-free / padded (best of %d): %.2f; peak RSS padding-free / padded: %.3f; "
              "train_loss difference %.2e" % (args.repeats, max(speed[True]) / max(speed[False]),
                                              min(rss[True]) / min(rss[False]), abs(loss[True] - loss[False])))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
