"""Describe-chain source forms (jest/vitest/mocha `describe`/`it`, RSpec `describe`/`context`/`it`) and
walking a hunk upward to recover a test's enclosing groups.

Vocabulary of how tests are written, shared by the test-patch rules (which tests a patch adds) and the
runners (which scope a dataset's test name lives in): it sits below both.
"""

from __future__ import annotations

import re


def indent(line: str) -> int:
    ws = line[: len(line) - len(line.lstrip(" \t"))]
    return len(ws.replace("\t", "  "))


def walk_up(post: list[str], k: int, section: str, group, unquote, unit: int) -> list[str] | None:
    need = indent(post[k])
    chain: list[str] = []
    for j in range(k - 1, -1, -1):
        line = post[j]
        if not line.strip():
            continue
        ind = indent(line)
        if ind >= need:
            continue
        m = group.match(line.strip())
        if not m:
            return None
        desc = unquote(m)
        if desc is None:
            return None
        chain.insert(0, desc)
        need = ind
        if need == 0:
            return chain
    if need == 0:
        return chain
    if need != unit or not section:
        return None
    m = group.match(section.strip())
    if not m or indent(section) != 0:
        return None
    desc = unquote(m)
    if desc is None:
        return None
    chain.insert(0, desc)
    return chain


# jest / vitest / mocha source forms: it('title', ...), test("title", ...), describe(`name`, ...)
_Q = r"(?P<q>['\"`])(?P<s>(?:\\.|(?!(?P=q)).)*)(?P=q)"
JS_LEAF = re.compile(r"^(?:it|test|specify)(?:\.only|\.concurrent|\.skip|\.todo)?\s*\(\s*" + _Q + r"\s*,")
JS_GROUP = re.compile(r"^describe(?:\.only|\.skip|\.concurrent)?\s*\(\s*" + _Q + r"\s*,")


def js_unquote(m: re.Match[str]) -> str | None:
    s = m.group("s")
    if m.group("q") == "`" and "${" in s:
        return None
    return re.sub(r"\\(.)", r"\1", s)


# ruby spec source forms for describe-chain recovery
_RQ = r"(?:(?P<q>['\"])(?P<s>(?:\\.|(?!(?P=q)).)*)(?P=q)|(?P<c>[A-Z][\w]*(?:::[A-Z]\w*)*))"
RB_GROUP = re.compile(
    r"^(?:RSpec\.)?(?:describe|context|feature|example_group)\s*\(?\s*"
    + _RQ
    + r"\s*(?:,[^#]*?)?\)?\s*(?:do|\{)\s*(?:\|[^|]*\|)?\s*$"
)
RB_LEAF = re.compile(
    r"^(?:it|specify|example|scenario)\s*\(?\s*(?P<q>['\"])(?P<s>(?:\\.|(?!(?P=q)).)*)(?P=q)"
    r"\s*(?:,[^#]*?)?\)?\s*(?:do|\{)"
)
RB_MODULE = "\0"  # marks a group described by a constant (a Module)


def rb_unquote(m: re.Match[str]) -> str | None:
    if m.groupdict().get("c"):
        return RB_MODULE + m.group("c")
    s = m.group("s")
    if m.group("q") == '"' and "#{" in s:
        return None
    return re.sub(r"\\(.)", r"\1", s)
