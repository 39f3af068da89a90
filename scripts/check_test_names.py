#!/usr/bin/env python3
"""Fails (exit 1) on a Catch2 test name that ctest cannot hand back to Catch: catch_discover_tests passes
each name as a test filter, and a ';' splits it into several ctest tests (each a filter that matches
nothing, so they fail without running the checks), a backslash is read as an escape and a leading '-' as
an option.

Usage: scripts/check_test_names.py [--quiet]   (run by every build of the tests through tests/CMakeLists.txt)
"""
import pathlib
import re
import sys

TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"
# TEST_CASE("name" ...), the name possibly split over adjacent string literals.
TEST_CASE = re.compile(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def problems_of(name):
    found = []
    if ";" in name:
        found.append("';' (ctest splits the name there)")
    if "\\" in name:
        found.append("a backslash")
    if name.startswith("-"):
        found.append("a leading '-'")
    return found


def main():
    quiet = "--quiet" in sys.argv[1:]
    bad = 0
    for path in sorted(TESTS.rglob("*.cpp")):
        text = path.read_text(encoding="utf-8")
        for match in TEST_CASE.finditer(text):
            name = "".join(LITERAL.findall(match.group(1)))
            for problem in problems_of(name):
                line = text.count("\n", 0, match.start()) + 1
                print(f"{path.relative_to(TESTS.parent)}:{line}: test name has {problem}: {name}")
                bad += 1
    if not quiet:
        print(f"check_test_names: {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
