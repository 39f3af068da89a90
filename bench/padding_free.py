#!/usr/bin/env python3
# Padded against padding-free training (training.padding_free) on variable-length jsonl rows whose lengths
# are drawn like an instruction dataset's (log-normal, median ~90 tokens, capped at the context): the same
# samples, the same steps, one run after the other, alternating, so that the ratios are measured side by
# side. Prints samples/s (the real tokens per sample are the same, so it is the tokens/s ratio), peak RSS
# and the train loss of both (equal within rounding: the packed batch scores the same label tokens).
# Goal of issue #34: >= 1.5x tokens/s. The encoder-decoder models (t5, bart) train on source / target pairs:
# sources drawn as above, targets log-normal with median ~30 tokens.
#
#   bench/padding_free.py --hftrain build/hftrain [--model gpt2|llama|t5|bart] [--steps 30] [--repeats 2]
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
    "t5": "{type: t5, d_model: 256, d_kv: 32, d_ff: 1024, num_layers: 2, num_heads: 8, dropout_rate: 0}",
    "bart": "{type: bart, d_model: 256, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
            "decoder_attention_heads: 4, encoder_ffn_dim: 1024, decoder_ffn_dim: 1024, max_position_embeddings: 512, "
            "dropout: 0}",
}
SEQ2SEQ = {"t5", "bart"}
SEQ2SEQ_DATA = ("data: {type: jsonl, train_file: train.jsonl, task: seq2seq, source_column: src, target_column: tgt, "
                "tokenizer: bytes, max_source_length: 512, max_target_length: 128}")

SPEC = """model: %(model)s
data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 512}
training: {output_dir: out, per_device_train_batch_size: 8, max_steps: %(steps)d, save_strategy: "no",
           eval_strategy: "no", learning_rate: 0.001, logging_steps: 10, seed: 3}
"""


def write_rows(path, n, seed, seq2seq):
    r = random.Random(seed)
    words = ["the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord", "and", "her", "sword"]

    def text(median, cap):
        chars = min(cap, max(8, int(math.exp(r.gauss(math.log(median), 0.8)))))
        out = ""
        while len(out) < chars:
            out += r.choice(words) + " "
        return out[:chars]

    lengths = []
    with open(path, "w") as f:
        for _ in range(n):
            row = {"src": text(90, 500), "tgt": text(30, 120)} if seq2seq else {"text": text(90, 500)}
            lengths.append(len(row["src" if seq2seq else "text"]))
            f.write(json.dumps(row) + "\n")
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
        seq2seq = args.model in SEQ2SEQ
        lengths = write_rows(os.path.join(work, "train.jsonl"), 8 * args.steps, 1, seq2seq)
        spec = SPEC % {"model": MODELS[args.model], "steps": args.steps}
        if seq2seq:
            spec = "\n".join(SEQ2SEQ_DATA if line.startswith("data:") else line for line in spec.split("\n"))
        with open(os.path.join(work, "spec.yaml"), "w") as f:
            f.write(spec)
        found = train_side_by_side(hftrain, work, "training.padding_free", args.repeats)
        rss = {k: v[0] for k, v in found.items()}
        speed = {k: v[1] for k, v in found.items()}
        loss = {k: v[2] for k, v in found.items()}
        sorted_lengths = sorted(lengths)
        print(("rows: %d, " + ("source " if seq2seq else "") + "characters (bytes tokenizer: tokens) median %d, p90 %d, max %d; model %s, batch 8, %d steps")
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
