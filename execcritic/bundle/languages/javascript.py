"""JavaScript/TypeScript test-patch rules.

Test files: `*.test.js`, `*.spec.ts`, `*.tests.js` (three.js), anything under `__tests__/`,
`__mocks__/`, `__fixtures__/` or another test directory (`test/`, `tests/`, `fixtures/`,
`__snapshots__/`), and directories named with the word "test"/"tests" (docusaurus'
`website/_dogfooding/_pages tests/`, whose pages exist to exercise the site).

Added tests are `it(...)`/`test(...)` calls with a literal title. `added_test_nodes` also recovers the
enclosing `describe(...)` titles when the hunk shows them (see `execcritic.runners._ml.recover_chains`
for the rule), because jest and vitest match test names by the full describe chain.
"""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import under_test_dir
from execcritic.bundle.languages._describe import JS_GROUP, JS_LEAF, js_unquote, walk_up
from execcritic.bundle.languages.python import DefInfo

LANGUAGE = "javascript"
EXTENSIONS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts")

_TEST_FILE = re.compile(r"\.(test|spec|tests|e2e)\.[cm]?[jt]sx?$")
_TEST_DIRS = {"__tests__", "__mocks__", "__fixtures__", "__snapshots__"}


def _worded_test_dir(path: str) -> bool:
    return any(
        {"test", "tests"} & set(re.split(r"[^a-z0-9]+", part.lower())) for part in path.split("/")[:-1]
    )


def is_test_path(path: str) -> bool:
    if _TEST_FILE.search(posixpath.basename(path)):
        return True
    if _TEST_DIRS & set(path.split("/")[:-1]):
        return True
    return under_test_dir(path) or _worded_test_dir(path)


def test_support_path(path: str) -> bool:
    """Non-code files (mdx pages, json fixtures) in directories named for tests."""
    return _worded_test_dir(path) or bool(_TEST_DIRS & set(path.split("/")[:-1]))


def _titles(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = JS_LEAF.match(line.strip())
        if m:
            t = js_unquote(m)
            if t is not None:
                out.append(t)
    return out


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    if not is_test_path(path):
        return []
    removed = set(_titles(removed_lines))
    out: list[str] = []
    for t in _titles(added_lines):
        if t not in removed and t not in out:
            out.append(t)
    return out


def enclosing_scope(lines: list[str], line_no: int, indent: int) -> tuple[str, ...] | None:
    """The describe chain enclosing a test at `indent` inserted just before 1-based `line_no` of a Base file (what
    a hunk that does not show its describe blocks leaves open), read upward by indentation as in a hunk; None if a
    less-indented line above it is not a describe."""
    probe = [*lines[: max(line_no - 1, 0)], " " * indent + "it('', () => {});"]
    chain = walk_up(probe, len(probe) - 1, "", JS_GROUP, js_unquote, 2)
    return tuple(chain) if chain is not None else None


def added_test_nodes(path: str, hunks: list[tuple[str, list[str]]]) -> list[DefInfo]:
    """Added tests with their describe chain when the hunk shows it (`certain`)."""
    if not is_test_path(path):
        return []
    removed: set[str] = set()
    for _s, lines in hunks:
        removed |= set(_titles([ln[1:] for ln in lines if ln.startswith("-")]))
    out: list[DefInfo] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for section, lines in hunks:
        post = [ln for ln in lines if ln[:1] in (" ", "+", "")]
        text = [ln[1:] if ln else "" for ln in post]
        for k, line in enumerate(text):
            if not post[k].startswith("+"):
                continue
            m = JS_LEAF.match(line.strip())
            title = js_unquote(m) if m else None
            if title is None or title in removed:
                continue
            chain = walk_up(text, k, section, JS_GROUP, js_unquote, 2)
            scope = tuple(chain) if chain is not None else ()
            if (scope, title) in seen:
                continue
            seen.add((scope, title))
            indent = len(line) - len(line.lstrip())
            out.append(DefInfo(title, k, indent, scope, chain is not None, False, section=section))
    return out
