#!/usr/bin/env python3
"""Renders chat templates with Debian's python3-jinja2 in the environment transformers renders them in,
the reference for hftrain's interpreter (lib/jinja; tests/unit/test_jinja.cpp, label [reference]).

The environment, written here from transformers' description of it: ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks on, the loopcontrols extension and a {% generation %} tag that records where
in the output each generation block's text lies (as transformers' AssistantTracker does: the block starts
at the length of the output already yielded); `tojson` is json.dumps with ensure_ascii=False; globals
raise_exception(message) (a TemplateError with the message) and strftime_now(format).

Usage:
  jinja_reference.py TEMPLATE CONTEXT.json    one render: {"text": ..., "spans": [[begin, end], ...]}
                                              (byte offsets into the UTF-8 text) or {"error": ..., "type": ...}
  jinja_reference.py --cases CASES.json       every template x context pair of CASES.json (paths relative
                                              to its folder): {"TEMPLATE|CONTEXT": result, ...}
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTracker(Extension):
    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        self.yielded = None
        self.spans = None

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_record"), [], [], body).set_lineno(lineno)

    def _record(self, caller):
        text = caller()
        if self.yielded is not None:
            start = len("".join(self.yielded))
            self.spans.append((start, start + len(text)))
        return text


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(format):
    return datetime.datetime.now().strftime(format)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, template_path, context_path):
    with open(template_path, encoding="utf-8", newline="") as f:
        source = f.read()
    with open(context_path, encoding="utf-8") as f:
        context = json.load(f)
    tracker = next(e for e in env.extensions.values() if isinstance(e, GenerationTracker))
    blocks, spans = [], []
    tracker.yielded, tracker.spans = blocks, spans
    try:
        for block in env.from_string(source).generate(**context):
            blocks.append(block)
    except Exception as e:  # noqa: BLE001 - every failure is a result to compare
        return {"error": str(e), "type": type(e).__name__}
    finally:
        tracker.yielded = tracker.spans = None
    text = "".join(blocks)
    byte = lambda i: len(text[:i].encode("utf-8"))  # noqa: E731
    return {"text": text, "spans": [[byte(b), byte(e)] for b, e in spans]}


def main(argv):
    env = make_environment()
    if len(argv) == 3 and argv[1] == "--cases":
        root = os.path.dirname(os.path.abspath(argv[2]))
        with open(argv[2], encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        out = {}
        for case in cases:
            for context in case["contexts"]:
                out[case["template"] + "|" + context] = render(
                    env, os.path.join(root, case["template"]), os.path.join(root, context))
        json.dump(out, sys.stdout, ensure_ascii=False)
        return 0
    if len(argv) == 3:
        json.dump(render(env, argv[1], argv[2]), sys.stdout, ensure_ascii=False)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
