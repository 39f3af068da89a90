#!/usr/bin/env python3
"""Lists the longest functions of C++ sources: a function's lines run from its signature's first line to its closing
brace. Used for docs/design.md's measurements (python3 scripts/function_lengths.py lib app --top 10).

A brace opened at namespace or class scope whose preceding text is not a namespace, class, struct, union or enum
header, nor an initializer (`= {`), is taken as a function body. Strings, characters and comments are skipped."""
import argparse
import pathlib
import re

CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;(){}]*$")


def strip_code(text):
    """Blanks comments and string / character literals, keeping newlines, so braces inside them do not count."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    code = strip_code(path.read_text(errors="replace"))
    stack = []  # per open brace: "container", "function" or "other"
    header_start = 0  # where the text before the next brace at container scope begins
    found = []
    for i, c in enumerate(code):
        in_container = all(kind == "container" for kind in stack)
        if c in ";}" and in_container:
            header_start = i + 1
        if c == "{":
            if in_container:
                header = code[header_start:i]
                if CONTAINER.search(header.strip()) or re.search(r"=\s*$", header):
                    stack.append("container" if CONTAINER.search(header.strip()) else "other")
                    header_start = i + 1
                else:
                    stack.append(("function", header_start))
                    continue
            else:
                stack.append("other")
        elif c == "}" and stack:
            kind = stack.pop()
            if isinstance(kind, tuple):
                text = code[kind[1]:i]
                lead = len(text) - len(text.lstrip())
                first_line = code.count("\n", 0, kind[1] + lead) + 1
                last_line = code.count("\n", 0, i) + 1
                name = re.findall(r"([~\w:]+)\s*\(", code[kind[1]:i].split("{")[0])
                found.append((last_line - first_line + 1, str(path), first_line, name[0] if name else "?"))
                header_start = i + 1
            if kind == "container" or isinstance(kind, tuple):
                header_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("roots", nargs="+")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    found = []
    for root in args.roots:
        for path in sorted(pathlib.Path(root).rglob("*")):
            if path.suffix in (".cpp", ".h", ".cu"):
                found += functions(path)
    for lines, path, line, name in sorted(found, reverse=True)[: args.top]:
        print(f"{lines:5d}  {path}:{line}  {name}")


if __name__ == "__main__":
    main()
