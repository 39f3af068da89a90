#!/usr/bin/env python3
"""Prints the include graph between the folders of lib/ and fails (exit 1) on an include that goes up
the layer order of lib/layers.txt, on a folder that is not listed there, or on a missing header.

Usage: scripts/check_layers.py [--quiet]   (run by every build through lib/CMakeLists.txt)
"""
import pathlib
import re
import sys

LIB = pathlib.Path(__file__).resolve().parent.parent / "lib"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/([^"]+)"', re.M)


def read_layers():
    layers = []
    for line in (LIB / "layers.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            layers.append(line)
    return layers


def main():
    quiet = "--quiet" in sys.argv[1:]
    layers = read_layers()
    rank = {name: i for i, name in enumerate(layers)}
    problems = []
    folders = sorted(p.name for p in LIB.iterdir() if p.is_dir())
    for folder in folders:
        if folder not in rank:
            problems.append(f"lib/{folder}/ is not a layer of lib/layers.txt")
    edges = {}
    for path in sorted(LIB.rglob("*")):
        if path.suffix not in (".h", ".cpp", ".cu", ".cuh") or not path.is_file():
            continue
        source = path.relative_to(LIB).parts[0]
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target, rest = m.group(1), m.group(2)
            where = f"lib/{path.relative_to(LIB)}:{lineno}"
            if not (LIB / target / rest).is_file():
                problems.append(f'{where}: #include "{target}/{rest}" names no file of lib/')
                continue
            if target == source:
                continue
            edges.setdefault((source, target), []).append(where)
            if source in rank and target in rank and rank[target] > rank[source]:
                problems.append(f'{where}: {source}/ includes "{target}/{rest}", a higher layer '
                                f"({target} is layer {rank[target] + 1}, {source} is layer {rank[source] + 1})")
    if not quiet:
        print("include graph between lib/ folders (layer order of lib/layers.txt, lowest first):")
        for source in layers:
            targets = sorted({t for (s, t) in edges if s == source}, key=lambda t: rank.get(t, -1))
            shown = ", ".join(f"{t} ({len(edges[(source, t)])})" for t in targets) or "-"
            print(f"  {rank[source] + 1:2d} {source:12s} -> {shown}")
    if problems:
        print(f"check_layers: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    if not quiet:
        print(f"check_layers: {len(layers)} layers, {sum(len(v) for v in edges.values())} cross-folder includes, all downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
