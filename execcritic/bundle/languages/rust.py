"""Rust test-patch rules.

Which files are tests: integration tests (`tests/**.rs`), test-only modules kept in their own files
inside `src` (`src/**/tests/*.rs`, `tests.rs`, `test_helpers.rs`, ...), and data under test
directories (snapshots, fixtures, `.stderr` expectations).

Inline unit tests (`#[cfg(test)] mod tests { ... }` inside a product file such as `src/lib.rs`) are
*not* a test file, and an edit there is a source edit. Evidence from SWE-bench Multilingual (43 cargo
rows): its own split puts every test module file into `test_patch` (axum's `src/routing/tests/*.rs`
and `src/test_helpers.rs`), while the inline `#[test]` functions of `src/syntax_mapping/
ignored_suffixes.rs` (sharkdp__bat-1892) went into the *gold* `patch`: the benchmark itself treats
a hunk in a product file as product code, even when it is inside a test module. Judging "the hunk
is entirely inside `mod tests`" from a diff is also unreliable (the `mod tests {` line is usually
outside the hunk, and `#[cfg(test)]` code can change product behaviour under test). A bundle that
needs a unit-level test adds it as a test module file or an integration test.
"""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import under_test_dir

LANGUAGE = "rust"
EXTENSIONS = (".rs",)

_TEST_FILE = re.compile(r"^(tests?|tests?_.*|.*_tests?|test_helpers?|test_utils?|testing)\.rs$")
_TEST_ATTR = re.compile(
    r"^\s*#\[\s*(?:[\w:]+::)?(test|rstest|test_case|test_log::test|quickcheck|"
    r"wasm_bindgen_test|serial_test::serial)\b"
)
_FN = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(?P<name>\w+)")


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    if "tests" in parts[:-1] or "test" in parts[:-1]:
        return True
    if _TEST_FILE.match(posixpath.basename(path)):
        return True
    return under_test_dir(path)


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    """Functions the diff adds under a test attribute (`#[test]`, `#[tokio::test]`, `#[rstest]`,
    `#[test_case(..)]` ...). Attributes may stack and span lines; a function also removed is moved,
    not new."""
    removed = {m.group("name") for m in map(_FN.match, removed_lines) if m}
    out: list[str] = []
    pending, depth = False, 0
    for line in added_lines:
        s = line.strip()
        if depth > 0:
            depth += s.count("[") - s.count("]")
            continue
        if s.startswith("#["):
            if _TEST_ATTR.match(s):
                pending = True
            depth = s.count("[") - s.count("]")
            continue
        if not s or s.startswith("//"):
            continue
        m = _FN.match(line)
        if m and pending and m.group("name") not in removed and m.group("name") not in out:
            out.append(m.group("name"))
        pending = False
    return out
