#!/usr/bin/env python3
"""Writes the small tokenizer.json files of tests/data/hf_tokenizers (run once; the files are committed).

- t5_unigram.json / albert_unigram.json: a Unigram model trained offline with sentencepiece (python3-sentencepiece)
  on a fixed corpus, converted to tokenizer.json in the T5 and ALBERT layouts as transformers'
  convert_slow_tokenizer does (Precompiled charsmap normalizer, Metaspace pre-tokenizer); a small custom
  normalization rule table keeps the charsmap small while exercising multi-character rules.
- t5_unigram_byte_fallback.json: the same with byte_fallback and <0xXX> pieces.
- llama2_legacy_bpe.json: a byte_fallback BPE in the Llama-2 legacy layout (Prepend + Replace normalizer, no
  pre-tokenizer), merges learned here by plain BPE counting.
The expected ids come from HF tokenizers itself: expected_ids.js. Usage: make_fixtures.py OUT_DIR
"""
import base64
import collections
import json
import os
import sys
import tempfile

import sentencepiece as spm

WORDS = ("the quick brown fox jumps over the lazy dog while tokenizers split words into pieces and "
         "training a model needs data loaders optimizers schedules checkpoints and evaluation "
         "hello world naïve café résumé Zürich straße fine office affine 東京 大阪 中文 日本語 한국어 "
         "emoji 🙂 🚀 numbers 123 4567 3.14 e-mail foo@bar.com").split()


def corpus_lines():
    lines = []
    for i in range(400):
        w = [WORDS[(i * 7 + k * 13) % len(WORDS)] for k in range(6 + i % 9)]
        lines.append(" ".join(w))
    return lines


# Custom sentencepiece normalization rules (source code points -> target code points, hex): NFKC-like folds,
# a two-character rule, and a deletion.
RULES = [("FB01", "66 69"), ("FF21", "41"), ("FF41", "61"), ("2122", "54 4D"), ("65 301", "E9"), ("200B", ""),
         ("3000", "20"), ("A0", "20"), ("2160", "49"), ("1E9E", "73 73"), ("41 30A", "C5")]


def proto_fields(buf):
    """Minimal protobuf wire decoder: yields (field number, wire type, value)."""
    i = 0
    while i < len(buf):
        key = 0
        shift = 0
        while True:
            b = buf[i]; i += 1
            key |= (b & 0x7F) << shift; shift += 7
            if b < 0x80: break
        field, wt = key >> 3, key & 7
        if wt == 0:
            v = 0; shift = 0
            while True:
                b = buf[i]; i += 1
                v |= (b & 0x7F) << shift; shift += 7
                if b < 0x80: break
            yield field, wt, v
        elif wt == 1:
            yield field, wt, buf[i:i + 8]; i += 8
        elif wt == 2:
            n = 0; shift = 0
            while True:
                b = buf[i]; i += 1
                n |= (b & 0x7F) << shift; shift += 7
                if b < 0x80: break
            yield field, wt, buf[i:i + n]; i += n
        elif wt == 5:
            yield field, wt, buf[i:i + 4]; i += 4
        else:
            raise ValueError("unsupported wire type %d" % wt)


def charsmap_of(model_bytes):
    for f, wt, v in proto_fields(model_bytes):
        if f == 3 and wt == 2:  # normalizer_spec
            for g, wt2, w in proto_fields(v):
                if g == 2 and wt2 == 2:
                    return bytes(w)
    return b""


def train_unigram(tmp, byte_fallback):
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus_lines()) + "\n")
    rules = os.path.join(tmp, "rules.tsv")
    with open(rules, "w") as f:
        for src, dst in RULES:
            f.write("%s\t%s\n" % (src, dst))
    prefix = os.path.join(tmp, "uni_bf" if byte_fallback else "uni")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="unigram", vocab_size=400 if byte_fallback else 180,
        character_coverage=0.98, normalization_rule_tsv=rules, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        byte_fallback=byte_fallback, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = [[sp.id_to_piece(i), float(sp.get_score(i))] for i in range(sp.get_piece_size())]
    with open(prefix + ".model", "rb") as f:
        charsmap = charsmap_of(f.read())
    return vocab, charsmap


def added(vocab, special_names):
    return [{"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
             "special": True} for i, (p, _) in enumerate(vocab) if p in special_names]


def unigram_json(vocab, charsmap, layout, byte_fallback):
    precompiled = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}
    spaces = {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}
    if layout == "t5":
        normalizer = {"type": "Sequence", "normalizers": [precompiled, spaces]}
        post = {"type": "TemplateProcessing",
                "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}}
    else:  # ALBERT: quotes, NFKD + StripAccents (keep_accents false), Lowercase, charsmap, spaces
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
            {"type": "Replace", "pattern": {"String": "''"}, "content": "\""},
            {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}, precompiled, spaces]}
        post = None
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": added(vocab, {"<pad>", "</s>", "<unk>"}),
            "normalizer": normalizer,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
            "post_processor": post,
            "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
            "model": {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": byte_fallback}}


def train_bpe(lines, merges_wanted, specials):
    """Plain BPE counting over '▁'-prefixed words; returns (vocab dict, merges list)."""
    words = collections.Counter()
    for line in lines:
        for w in ("\u2581" + line.replace(" ", " \u2581")).split(" "):
            words[tuple(w)] += 1
    vocab = {s: i for i, s in enumerate(specials)}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for w in sorted(words):
        for c in w:
            vocab.setdefault(c, len(vocab))
    merges = []
    while len(merges) < merges_wanted:
        pairs = collections.Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), n = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if n < 2:
            break
        merges.append([a, b])
        vocab.setdefault(a + b, len(vocab))
        new_words = collections.Counter()
        for w, c in words.items():
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b); i += 2
                else:
                    out.append(w[i]); i += 1
            new_words[tuple(out)] += c
        words = new_words
    return vocab, merges


def llama2_json(vocab, merges):
    specials = ["<unk>", "<s>", "</s>"]
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for s in specials],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
            "pre_tokenizer": None,
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}


def write(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        vocab, charsmap = train_unigram(tmp, False)
        write(os.path.join(out, "t5_unigram.json"), unigram_json(vocab, charsmap, "t5", False))
        write(os.path.join(out, "albert_unigram.json"), unigram_json(vocab, charsmap, "albert", False))
        vocab, charsmap = train_unigram(tmp, True)
        write(os.path.join(out, "t5_unigram_byte_fallback.json"), unigram_json(vocab, charsmap, "t5", True))
    vocab, merges = train_bpe(corpus_lines(), 200, ["<unk>", "<s>", "</s>"])
    write(os.path.join(out, "llama2_legacy_bpe.json"), llama2_json(vocab, merges))


if __name__ == "__main__":
    main()
