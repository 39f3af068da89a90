#!/usr/bin/env python3
"""Chat SFT with bfd packing against padded batches (issue 59): one epoch of the same conversations (lengths
varied like an instruction set, bytes tokenizer, assistant-only loss) through `hftrain train`, padded batches
of `--batch` conversations against `packing: true` (bfd rows of `--max-length` tokens, batch 1 row), the two
alternating `--repeats` times. Tokens/s = the conversations' tokens / train_runtime (the same tokens in both).

Usage: bench/sft_packing.py --hftrain build/hftrain [--rows 160] [--batch 8] [--max-length 1024] [--repeats 2]
"""
import argparse
import json
import os
import random
import subprocess
import tempfile

TEMPLATE = ("{% for m in messages %}{% if m.role == 'assistant' %}<|a|>{% generation %}{{ m.content }}<|e|>"
            "{% endgeneration %}{% else %}<|u|>{{ m.content }}<|e|>{% endif %}{% endfor %}")
WORDS = ["the", "model", "answers", "with", "a", "short", "sum", "of", "numbers", "and", "then", "stops"]


def conversations(n, seed=7):
    rng = random.Random(seed)
    rows, tokens = [], 0
    for _ in range(n):
        msgs = []
        for _ in range(rng.randint(1, 3)):
            q = " ".join(rng.choice(WORDS) for _ in range(max(2, int(rng.lognormvariate(2.0, 0.8)))))
            a = " ".join(rng.choice(WORDS) for _ in range(max(2, int(rng.lognormvariate(2.6, 0.8)))))
            msgs += [{"role": "user", "content": q[:400]}, {"role": "assistant", "content": a[:500]}]
        text = "".join(("<|a|>" if m["role"] == "assistant" else "<|u|>") + m["content"] + "<|e|>" for m in msgs)
        tokens += min(len(text.encode()), 1024)
        rows.append(json.dumps({"messages": msgs}))
    return rows, tokens


def run(binary, work, name, packed, args):
    out = os.path.join(work, name)
    cmd = [binary, "train", "spec.yaml", "--set", "training.output_dir=" + out]
    if packed:
        cmd += ["--set", "data.packing=true", "--set", "training.per_device_train_batch_size=1"]
    subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "train_results.json")) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hftrain", required=True)
    p.add_argument("--rows", type=int, default=160)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    binary = os.path.abspath(a.hftrain)
    with tempfile.TemporaryDirectory() as work:
        rows, tokens = conversations(a.rows)
        with open(os.path.join(work, "chat.jsonl"), "w") as f:
            f.write("\n".join(rows) + "\n")
        with open(os.path.join(work, "chat.jinja"), "w") as f:
            f.write(TEMPLATE)
        with open(os.path.join(work, "spec.yaml"), "w") as f:
            f.write("model: {type: llama, hidden_size: 256, intermediate_size: 512, num_hidden_layers: 4, "
                    "num_attention_heads: 4, max_position_embeddings: 1024}\n"
                    f"data: {{type: jsonl, train_file: chat.jsonl, tokenizer: bytes, chat_template: chat.jinja, "
                    f"assistant_only_loss: true, max_length: {a.max_length}, cache_dir: cache}}\n"
                    f"training: {{output_dir: out, num_train_epochs: 1, per_device_train_batch_size: {a.batch}, "
                    "learning_rate: 0.001, logging_steps: 10, save_strategy: \"no\", do_eval: false, seed: 1, "
                    "dataloader_drop_last: false}\n")
        print(f"{a.rows} conversations, {tokens} tokens; padded batch {a.batch} vs bfd rows of {a.max_length}")
        for r in range(a.repeats):
            for name, packed in (("padded", False), ("bfd", True)):
                res = run(binary, work, f"{name}{r}", packed, a)
                print(f"{name:7s} repeat {r}: {tokens / res['train_runtime']:9.1f} tokens/s  "
                      f"runtime {res['train_runtime']:.2f} s  train_loss {res['train_loss']:.6f}")


if __name__ == "__main__":
    main()
