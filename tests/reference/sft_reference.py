#!/usr/bin/env python3
"""Token ids and label masks of SFT rows as TRL's SFTTrainer makes them, written from TRL's description
(sft_trainer.py's tokenize / add_eos, data_utils.py's pack_dataset) with python3-jinja2 in transformers'
chat-template environment (jinja_reference.py) and a byte tokenizer (token i = byte i of the UTF-8 text, no
special tokens added): the reference for hftrain's data side of chat fine-tuning (tests/unit/test_sft_data.cpp,
label [reference]). Assistant-only masks of a template without generation markers come from rendering
prefixes, refused where a prefix's text is not the start of the whole conversation's (docs/data.md).

Usage: sft_reference.py CASES.json  -> {"CASE NAME": {"rows": [{"input_ids": [...], "labels": [...],
                                        "segment_lengths": [...]}, ...]} or {"error": ...}, ...}

A case: {"name", "template" (a path, or null), "format" (language_modeling, prompt_completion, conversational,
conversational_prompt_completion), "rows" (the dataset's rows), "eos_token", "completion_only_loss",
"assistant_only_loss", "max_length" (0 = none), "packing" (null, "bfd" or "wrapped"), "text_field" (language
modeling's column, default "text")}.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jinja_reference import GenerationTracker, make_environment  # noqa: E402

ENV = make_environment()


def encode(text):
    return list(text.encode("utf-8"))


def render(source, messages, add_generation_prompt, eos_token, tools=None):
    """apply_chat_template(tokenize=False) and the byte spans of the generation blocks."""
    tracker = next(e for e in ENV.extensions.values() if isinstance(e, GenerationTracker))
    blocks, spans = [], []
    tracker.yielded, tracker.spans = blocks, spans
    try:
        for block in ENV.from_string(source).generate(messages=messages, tools=tools, documents=None,
                                                      add_generation_prompt=add_generation_prompt,
                                                      eos_token=eos_token):
            blocks.append(block)
    finally:
        tracker.yielded = tracker.spans = None
    text = "".join(blocks)
    byte = lambda i: len(text[:i].encode("utf-8"))  # noqa: E731
    return text, [(byte(b), byte(e)) for b, e in spans]


def has_generation_markers(source):
    """transformers' test of a template for {% generation %} blocks."""
    return re.search(r"\{%-?\s*generation\s*-?%\}", source) is not None


def prefix_spans(source, messages, eos_token, text):
    """A template without generation markers: assistant message i is the text that rendering messages[:i+1]
    adds to messages[:i] rendered with the generation prompt, each render being the start of `text` (the
    whole conversation); otherwise the row is refused."""
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        head, _ = render(source, messages[:i], True, eos_token)
        upto, _ = render(source, messages[:i + 1], False, eos_token)
        if not (text.startswith(head) and text.startswith(upto) and len(head) <= len(upto)):
            raise ValueError("the prefix property does not hold at message %d" % i)
        spans.append((len(head.encode("utf-8")), len(upto.encode("utf-8"))))
    return spans


def assistant_spans(case, source, messages, text, spans):
    if case["assistant_only_loss"] and not has_generation_markers(source):
        return prefix_spans(source, messages, case["eos_token"], text)
    return spans


def assistant_mask(n, spans):
    """return_assistant_tokens_mask for byte tokens: from the token of a span's first byte to its last."""
    mask = [0] * n
    for b, e in spans:
        if e <= b or b >= n:
            continue
        for t in range(b, min(e, n)):
            mask[t] = 1
    return mask


def tokenize(case, row, source):
    eos = case["eos_token"]
    fmt = case["format"]
    completion_mask = None
    assistant = None
    if fmt == "language_modeling":
        text = row[case.get("text_field", "text")]
        text = text if text.endswith(eos) else text + eos
        ids = encode(text)
    elif fmt == "prompt_completion":
        completion = row["completion"] if row["completion"].endswith(eos) else row["completion"] + eos
        prompt_ids = encode(row["prompt"])
        ids = encode(row["prompt"] + completion)
        completion_mask = [0] * len(prompt_ids) + [1] * (len(ids) - len(prompt_ids))
    elif fmt == "conversational":
        text, spans = render(source, row["messages"], False, eos)
        spans = assistant_spans(case, source, row["messages"], text, spans)
        ids = encode(text)
        assistant = assistant_mask(len(ids), spans)
    else:
        prompt_text, _ = render(source, row["prompt"], True, eos)
        text, spans = render(source, row["prompt"] + row["completion"], False, eos)
        spans = assistant_spans(case, source, row["prompt"] + row["completion"], text, spans)
        prompt_ids = encode(prompt_text)
        ids = encode(text)
        completion_mask = [0] * len(prompt_ids) + [1] * (len(ids) - len(prompt_ids))
        assistant = assistant_mask(len(ids), spans)
    # DataCollatorForLanguageModeling: labels = input_ids, -100 where a mask in use is 0.
    labels = list(ids)
    for i in range(len(ids)):
        if completion_mask is not None and case["completion_only_loss"] and not completion_mask[i]:
            labels[i] = -100
        if assistant is not None and case["assistant_only_loss"] and not assistant[i]:
            labels[i] = -100
    if case["assistant_only_loss"] and all(l == -100 for l in labels):
        raise ValueError("an example has no assistant tokens")
    return ids, labels


def pack_bfd(examples, length):
    """Best-fit decreasing: truncate, longest first into the fullest row it fits (ties: the earliest row)."""
    examples = [(ids[:length], labels[:length]) for ids, labels in examples if ids]
    order = sorted(range(len(examples)), key=lambda i: -len(examples[i][0]))  # stable
    rows = []
    for i in order:
        ids, labels = examples[i]
        fits = [r for r in range(len(rows)) if length - len(rows[r]["input_ids"]) >= len(ids)]
        if fits:
            best = min(fits, key=lambda r: (length - len(rows[r]["input_ids"]), r))
        else:
            rows.append({"input_ids": [], "labels": [], "segment_lengths": []})
            best = len(rows) - 1
        rows[best]["input_ids"] += ids
        rows[best]["labels"] += labels
        rows[best]["segment_lengths"].append(len(ids))
    return rows


def pack_wrapped(examples, length):
    ids = [t for e in examples for t in e[0]]
    labels = [t for e in examples for t in e[1]]
    return [{"input_ids": ids[a:a + length], "labels": labels[a:a + length], "segment_lengths": []}
            for a in range(0, len(ids), length)]


def run_case(case, root):
    source = None
    if case.get("template"):
        with open(os.path.join(root, case["template"]), encoding="utf-8", newline="") as f:
            source = f.read()
    examples = [tokenize(case, row, source) for row in case["rows"]]
    if case["packing"] == "bfd":
        return pack_bfd(examples, case["max_length"])
    if case["packing"] == "wrapped":
        return pack_wrapped(examples, case["max_length"])
    m = case["max_length"]
    return [{"input_ids": ids[:m] if m else ids, "labels": labels[:m] if m else labels, "segment_lengths": []}
            for ids, labels in examples]


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    root = spec.get("root", os.path.dirname(os.path.abspath(argv[1])))
    out = {}
    for case in spec["cases"]:
        try:
            out[case["name"]] = {"rows": run_case(case, root)}
        except Exception as e:  # noqa: BLE001 - a refusal is a result to compare
            out[case["name"]] = {"error": str(e)}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
