"""C test-patch rules (redis/valkey, jq, micropython's C side): files under a test directory
(`tests/`, `test/`, redis' `tests/unit/*.tcl`, jq's `tests/shtest`), `test_*.c` / `*_test.c`.

Added tests: Tcl `test {name} {` / `test "name" {` blocks of the redis suite (names with Tcl
substitutions, `$x` or `[cmd]`, are computed at run time and are not reported)."""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import new_names, under_test_dir

LANGUAGE = "c"
EXTENSIONS = (".c", ".h", ".tcl")

_TEST_FILE = re.compile(r"^(test_.*|.*_test|.*_tests)\.c$")
_TCL_TEST = re.compile(r"^\s*test\s+(?:\{(?P<b>[^{}]+)\}|\"(?P<q>[^\"]+)\")\s+\{")


def is_test_path(path: str) -> bool:
    return bool(_TEST_FILE.match(posixpath.basename(path))) or under_test_dir(path)


def _tcl_names(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = _TCL_TEST.match(line)
        if m:
            name = m.group("b") or m.group("q")
            if "$" not in name and "[" not in name:
                out.append(name)
    return out


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    if not path.endswith(".tcl"):
        return []
    return new_names(_tcl_names, added_lines, removed_lines)
