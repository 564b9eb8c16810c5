"""Ruby test-patch rules.

Test files: anything under `spec/` or `test/` (or another test directory), `*_spec.rb`,
`*_test.rb`, `test_*.rb`, and cucumber's `features/` tree (`*.feature`, step definitions, support).

Added tests: RSpec `it/specify/example 'description'` (with the enclosing `describe`/`context`
chain when the hunk shows it), test-unit/minitest `def test_x` and test-unit `test "description"`.
"""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import new_names, under_test_dir
from execcritic.bundle.languages._describe import RB_GROUP, RB_LEAF, rb_unquote, walk_up
from execcritic.bundle.languages.python import DefInfo

LANGUAGE = "ruby"
EXTENSIONS = (".rb",)

_TEST_FILE = re.compile(r"^(.*_spec|.*_test|test_.*)\.rb$")
_DEF = re.compile(r"^\s*def\s+(?P<name>test_\w+[?!]?)")
_TEST_DESC = re.compile(r"^\s*test\s*\(?\s*(?P<q>['\"])(?P<s>(?:\\.|(?!(?P=q)).)*)(?P=q)\s*\)?\s*(?:do|\{)")


def _features(path: str) -> bool:
    parts = path.split("/")
    return "features" in parts[:-1] and (path.endswith((".feature", ".rb")) or "support" in parts)


def is_test_path(path: str) -> bool:
    return bool(_TEST_FILE.match(posixpath.basename(path))) or under_test_dir(path) or _features(path)


def test_support_path(path: str) -> bool:
    return _features(path)


def _names(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = _DEF.match(line)
        if m:
            out.append(m.group("name"))
            continue
        m = RB_LEAF.match(line.strip()) or _TEST_DESC.match(line)
        if m:
            t = rb_unquote(m)
            if t is not None:
                out.append(t)
    return out


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    if not is_test_path(path) or not path.endswith(".rb"):
        return []
    return new_names(_names, added_lines, removed_lines)


def added_test_nodes(path: str, hunks: list[tuple[str, list[str]]]) -> list[DefInfo]:
    """Added tests; RSpec examples carry their describe/context chain when the hunk shows it. A
    group described by a constant keeps a leading NUL marker in the scope (RSpec joins `Foo` and
    `#bar` without a space)."""
    if not is_test_path(path) or not path.endswith(".rb"):
        return []
    removed: set[str] = set()
    for _s, lines in hunks:
        removed |= set(_names([ln[1:] for ln in lines if ln.startswith("-")]))
    out: list[DefInfo] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for section, lines in hunks:
        post = [ln for ln in lines if ln[:1] in (" ", "+", "")]
        text = [ln[1:] if ln else "" for ln in post]
        for k, line in enumerate(text):
            if not post[k].startswith("+"):
                continue
            chain = None
            m = _DEF.match(line)
            if m:
                name = m.group("name")
                certain = True
            else:
                m = RB_LEAF.match(line.strip())
                if m:
                    name = rb_unquote(m)
                    chain = walk_up(text, k, section, RB_GROUP, rb_unquote, 2)
                    certain = chain is not None
                else:
                    m = _TEST_DESC.match(line)
                    name = rb_unquote(m) if m else None
                    certain = True
            if not name or name in removed:
                continue
            scope = tuple(chain or ())
            if (scope, name) in seen:
                continue
            seen.add((scope, name))
            out.append(
                DefInfo(name, k, len(line) - len(line.lstrip()), scope, certain, False, section=section)
            )
    return out
