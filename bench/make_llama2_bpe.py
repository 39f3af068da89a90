#!/usr/bin/env python3
"""A Llama-2 legacy layout tokenizer.json (byte_fallback BPE; Prepend + Replace normalizer, no pre-tokenizer)
with MERGES merges learned by plain BPE counting on TEXT_FILE, for bench/tokenizer_bench.*.
Usage: make_llama2_bpe.py TEXT_FILE MERGES OUT_JSON"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference", "hf_tokenizers"))
from make_fixtures import llama2_json, train_bpe, write  # noqa: E402

if len(sys.argv) != 4:
    sys.exit(__doc__)
with open(sys.argv[1], encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
vocab, merges = train_bpe(lines, int(sys.argv[2]), ["<unk>", "<s>", "</s>"])
write(sys.argv[3], llama2_json(vocab, merges))
print("%s: %d tokens, %d merges" % (sys.argv[3], len(vocab), len(merges)))
