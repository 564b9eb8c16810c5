"""C++ test-patch rules (fmt, nlohmann/json): files under a test directory (`test/`, `tests/src/`) and
`*-test.cc`, `*_test.cpp`, `test_*.cpp`, `unit-*.cpp`.

Added tests: GoogleTest `TEST(Suite, Name)` / `TEST_F` / `TEST_P` as `Suite.Name` (gtest's own
naming) and doctest `TEST_CASE("name")`."""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import new_names, under_test_dir

LANGUAGE = "cpp"
EXTENSIONS = (".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h", ".ipp", ".inl")

_TEST_FILE = re.compile(r"^(.*[-_]test|test[-_].*|unit-.*|.*[-_]tests)\.(cc|cpp|cxx)$")
_GTEST = re.compile(r"^\s*(?:TYPED_)?TEST(?:_F|_P)?\s*\(\s*(?P<suite>\w+)\s*,\s*(?P<name>\w+)\s*\)")
_DOCTEST = re.compile(
    r"^\s*(?:DOCTEST_)?TEST_CASE(?:_TEMPLATE|_FIXTURE)?\s*\(\s*(?:\w+\s*,\s*)?\"(?P<name>(?:\\.|[^\"])*)\""
)


def is_test_path(path: str) -> bool:
    return bool(_TEST_FILE.match(posixpath.basename(path))) or under_test_dir(path)


def _names(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = _GTEST.match(line)
        if m:
            out.append(f"{m.group('suite')}.{m.group('name')}")
            continue
        m = _DOCTEST.match(line)
        if m:
            out.append(m.group("name"))
    return out


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    return new_names(_names, added_lines, removed_lines)
