#!/usr/bin/env python3
"""Writes the tokenizer.json files of tests/data/hf_tokenizers_unicode (run once; the files are committed):
small hand-written files in the GPT-2 (ByteLevel regex), Llama-3 (Split with its regex + ByteLevel), Qwen2 / Qwen2.5 /
Qwen3 (NFC, then Split with Qwen's regex, one digit a piece, + ByteLevel), Gemma (spaces replaced by U+2581, no
pre-tokenizer, BPE with byte fallback, as transformers' GemmaConverter writes it) and BERT (BertNormalizer +
BertPreTokenizer + WordPiece) layouts, made to show in their ids how each code point is classified: the
byte-level files merge "a" with every byte on either side, so a pre-tokenizer split next to a code point changes
the ids; the Gemma file merges across words (nothing splits them) and falls back to <0xNN> bytes for what its
vocabulary lacks; the BERT file knows the letters its corpus lowercases to.

The expected ids come from HF tokenizers itself: expected_ids.js. The strings (strings.json) are the corpus
of Unicode edge cases. Usage: make_unicode_fixtures.py OUT_DIR
"""
import json
import sys
from pathlib import Path

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")  # Qwen's tokenizer.json: one digit a piece


def byte_chars():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def byte_level_model():
    chars = byte_chars()
    vocab = {chars[b]: b for b in range(256)}
    merges = []
    a = chars[ord("a")]
    for b in range(256):  # "a" + byte, then byte + "a": a split beside a code point shows in the ids
        for pair in ((a, chars[b]), (chars[b], a)):
            tok = pair[0] + pair[1]
            if tok not in vocab:
                vocab[tok] = len(vocab)
                merges.append(" ".join(pair))
    return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": merges}


def gemma_model():
    """SentencePiece-style BPE as Gemma's tokenizer.json holds it: specials, the 256 byte pieces, characters, merges
    inside and across words ("\u2581" marks a space)."""
    vocab = {t: i for i, t in enumerate(["<pad>", "<eos>", "<bos>", "<unk>"])}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    chars = ["\u2581", "\t", "\n"] + [chr(c) for c in range(0x21, 0x7F)] + list("\u00e9\u00ef\u03a3\u0130")
    for c in chars:
        vocab.setdefault(c, len(vocab))
    merges = []
    for pair in (("\u2581", "w"), ("o", "r"), ("\u2581w", "or"), ("l", "l"), ("H", "e"), ("He", "ll"), ("Hell", "o"),
                 ("o", "\u2581"), ("a", "\u2581"), ("\u2581", "\u2581"), ("\u2581", "a"), ("c", "a"), ("ca", "f")):
        if pair[0] not in vocab:
            vocab[pair[0]] = len(vocab)
        tok = pair[0] + pair[1]
        vocab.setdefault(tok, len(vocab))
        merges.append(" ".join(pair))
    return {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab, "merges": merges}


def base(model, normalizer, pre_tokenizer, decoder):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": decoder, "model": model}


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    gpt2 = base(byte_level_model(), None, byte_level, byte_level)
    llama3 = base(byte_level_model(), None,
                  {"type": "Sequence", "pretokenizers": [
                      {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
                      dict(byte_level, use_regex=False)]},
                  byte_level)
    qwen2 = base(byte_level_model(), {"type": "NFC"},
                 {"type": "Sequence", "pretokenizers": [
                     {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
                     dict(byte_level, use_regex=False, trim_offsets=False)]},
                 dict(byte_level, trim_offsets=False))
    gemma = base(gemma_model(), {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, None,
                 {"type": "Sequence", "decoders": [
                     {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                     {"type": "ByteFallback"}, {"type": "Fuse"}]})
    words = ["[UNK]", "[CLS]", "[SEP]", "a", "b", "i", "##a", "##b", "##i", "ab", "aib", "##\u0307", "\u0101", "##\u0101",
             "\u03c3", "##\u03c3", "\u4e00", "\U0002b739", "\U00031350", "\u180e"]
    bert_model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {w: i for i, w in enumerate(words)}}
    bert = base(bert_model,
                {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
                 "lowercase": True},
                {"type": "BertPreTokenizer"}, {"type": "WordPiece", "prefix": "##", "cleanup": True})
    for name, tok in (("gpt2_bytelevel.json", gpt2), ("llama3_split.json", llama3), ("bert_wordpiece.json", bert),
                      ("qwen2_split.json", qwen2), ("gemma_bpe.json", gemma)):
        (out / name).write_text(json.dumps(tok, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
