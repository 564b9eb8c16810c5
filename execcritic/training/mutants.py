"""Gold mutants: near-miss source patches for the labeled candidate pools of Test-agent RL.

Why: Eq. 5's balanced accuracy needs candidate Repair patches of both classes (§4.1: "at most eight
deduplicated candidate Repair patches labeled by V*"; Table 7c: class balancing "Approximate"). The paper's
pools come from sampled Repair agents on SWE-ReBench, which we do not have offline. Small deterministic edits
of Gold (a hunk left out, a condition inverted, an integer off by one) are cheap candidates that are *usually*
incorrect. They are unlabeled here: a mutant can be equivalent to Gold, so its label must come from the
official evaluator like every other candidate's, never from its kind.

Each mutant is a complete unified diff against Base whose hunk headers are recomputed (line counts, and the
new-side starts of later hunks in the same file), so `git apply` accepts it wherever Gold applies. Mutants are
deduplicated by content; one identical to Gold is dropped.

Pure: text in, text out (no file system, no git).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field

from execcritic.errors import InputError

KINDS = ("drop_hunk", "invert_condition", "off_by_one")

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")

# code files whose comment syntax we know; other files (docs, data, config) get no line-level mutants
_HASH_COMMENT = {".py", ".pyi", ".pyx", ".rb", ".sh", ".pl", ".r"}
_SLASH_COMMENT = {".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".java", ".kt", ".scala", ".js", ".jsx",
                  ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rs", ".cs", ".swift", ".php", ".dart"}

_CONDITION_RE = re.compile(r"^\s*(?:\}\s*)?(?:if|elif|while|assert|unless|until|else\s+if|and|or|&&|\|\|)\b|"
                           r"^\s*(?:&&|\|\|)")
_TERNARY_RE = re.compile(r"\sif\s.+\selse\b")

# longest first; the first group are tokens that look like comparisons but are not (shifts, arrows, spaceship)
_TOKEN_RE = re.compile(
    r"(?P<skip><=>|<<=|>>=|<<|>>|->|=>|<-)"
    r"|(?P<op>===|!==|==|!=|<=|>=|(?<=\s)<(?=\s)|(?<=\s)>(?=\s)|&&|\|\|)"
    r"|(?P<word>\b(?:and|or|not|True|False|true|false)\b)"
    r"|(?P<bang>(?<![\w!)\]])!(?![=!]))"
)
_FLIP = {"==": "!=", "!=": "==", "===": "!==", "!==": "===", "<": ">=", ">=": "<", ">": "<=", "<=": ">",
         "&&": "||", "||": "&&", "and": "or", "or": "and", "True": "False", "False": "True", "true": "false",
         "false": "true"}
_INT_RE = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
_PY_NEGATE_RE = re.compile(r"^(\s*(?:if|elif|while)\s+)(.+?)(\s*:\s*)$")


@dataclass(frozen=True)
class Mutant:
    """One mutant of Gold: `kind` in KINDS, a one-line `description`, and the full `patch` text."""

    kind: str
    description: str
    patch: str
    path: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.patch.encode()).hexdigest()[:16]


@dataclass
class _Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    tail: str                                   # text after the closing "@@" (git's function context)
    body: list[str] = field(default_factory=list)  # verbatim, markers included ("\ No newline ...")
    bias: int = 0  # Gold's new_start - old_start - (new-minus-old line delta of the hunks before it)


@dataclass
class _File:
    header: list[str]
    hunks: list[_Hunk]
    path: str


def _parse(text: str) -> list[_File]:
    if not isinstance(text, str) or not text.strip():
        raise InputError("the Gold patch is empty", field="patch")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    files: list[_File] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        starts_plain = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        # a plain diff (no `diff --git` line) starts a new file at a `---`/`+++` pair outside a header
        new_plain = starts_plain and (not files or files[-1].hunks
                                      or any(h.startswith("--- ") for h in files[-1].header))
        if line.startswith("diff --git ") or new_plain:
            files.append(_File([line], [], ""))
            i += 1
            continue
        if not files:
            raise InputError(f"line {i + 1}: text before the first file header: {line[:60]!r}", field="patch")
        current = files[-1]
        m = _HUNK_RE.match(line)
        if not m:
            if current.hunks:
                raise InputError(f"line {i + 1}: unexpected text after a hunk: {line[:60]!r}", field="patch")
            current.header.append(line)
            if line.startswith("+++ ") or (line.startswith("--- ") and not current.path):
                p = line[4:].split("\t")[0].strip()
                if p != "/dev/null":
                    current.path = p[2:] if p[:2] in ("a/", "b/") else p
            i += 1
            continue
        hunk = _Hunk(int(m.group(1)), int(m.group(2) or 1), int(m.group(3)), int(m.group(4) or 1), m.group(5))
        i += 1
        old_left, new_left = hunk.old_len, hunk.new_len
        while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
            body = lines[i]
            tag = body[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            elif tag != "\\":
                break
            hunk.body.append(body)
            i += 1
        if old_left or new_left:
            raise InputError(f"{current.path}: hunk @@ -{hunk.old_start},{hunk.old_len} +{hunk.new_start},"
                             f"{hunk.new_len} @@ has the wrong number of lines", field="patch")
        current.hunks.append(hunk)
    if not any(f.hunks for f in files):
        raise InputError("the Gold patch has no text hunk", field="patch")
    for f in files:
        delta = 0
        for h in f.hunks:
            h.bias = h.new_start - h.old_start - delta
            delta += h.new_len - h.old_len
    return files


def _count(body: list[str]) -> tuple[int, int]:
    old = sum(1 for b in body if b[:1] in (" ", "", "-"))
    new = sum(1 for b in body if b[:1] in (" ", "", "+"))
    return old, new


def _range(start: int, length: int) -> str:
    return str(start) if length == 1 else f"{start},{length}"


def _render(files: list[_File]) -> str:
    """Serialize with recomputed headers: line counts from the bodies, and each hunk's new-side start moved
    by the line-count changes of the hunks kept before it in its file. A hunk keeps Gold's own offset
    convention (`bias`, e.g. 1 for a new file's `-0,0 +1,n`)."""
    out: list[str] = []
    for f in files:
        out.extend(f.header)
        delta = 0
        for h in f.hunks:
            old_len, new_len = _count(h.body)
            new_start = h.old_start + h.bias + delta
            out.append(f"@@ -{_range(h.old_start, old_len)} +{_range(new_start, new_len)} @@{h.tail}")
            out.extend(h.body)
            delta += new_len - old_len
    return "\n".join(out) + "\n"


def _copy(files: list[_File]) -> list[_File]:
    # hunk objects are shared and never edited in place; a line mutant replaces its hunk with a new one
    return [_File(list(f.header), list(f.hunks), f.path) for f in files]


def _comment_style(path: str) -> str | None:
    ext = posixpath.splitext(path)[1].lower()
    if ext in _HASH_COMMENT:
        return "#"
    if ext in _SLASH_COMMENT:
        return "//"
    return None


def _code_mask(text: str, style: str, in_triple: str | None) -> tuple[list[bool], str | None]:
    """Per character: True where it is code (not inside a string literal or comment). Tracks Python-style
    triple-quoted strings across lines (`in_triple` is the open delimiter)."""
    mask = [False] * len(text)
    i = 0
    quote: str | None = None
    if style == "//" and text.lstrip().startswith(("*", "/*")):
        return mask, in_triple
    while i < len(text):
        if in_triple:
            end = text.find(in_triple, i)
            if end < 0:
                return mask, in_triple
            i, in_triple = end + 3, None
            continue
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
            i += 1
            continue
        if style == "#" and text.startswith(('"""', "'''"), i):
            in_triple = text[i:i + 3]
            i += 3
            continue
        if (style == "#" and ch == "#") or (style == "//" and text.startswith("//", i)):
            return mask, in_triple
        if ch in "\"'`":
            quote = ch
            i += 1
            continue
        mask[i] = True
        i += 1
    return mask, in_triple


def _added_lines(f: _File):
    """(hunk index, body index, text, code mask) for each added line of a code file, tracking triple quotes
    over the hunk's new side. A hunk that starts inside a docstring is not recognised as such (the opening
    quotes are outside it): its prose may be mutated, which only yields an equivalent candidate - the
    official evaluator labels it. Doctest lines (`>>>`, `...`) are skipped."""
    style = _comment_style(f.path)
    if style is None:
        return
    for hi, h in enumerate(f.hunks):
        in_triple: str | None = None
        for bi, body in enumerate(h.body):
            if body[:1] not in ("+", " ", ""):
                continue
            text = body[1:]
            mask, after = _code_mask(text, style, in_triple)
            doctest = style == "#" and text.lstrip().startswith((">>>", "... "))
            if body.startswith("+") and any(mask) and not doctest:
                yield hi, bi, text, mask
            in_triple = after


def _is_code(mask: list[bool], start: int, end: int) -> bool:
    return all(mask[start:end])


def _invert(text: str, mask: list[bool], python: bool) -> tuple[str, str] | None:
    """The first flippable token of a condition line, or `not (...)` around a bare Python condition."""
    code = "".join(c if m else " " for c, m in zip(text, mask))
    if not (_CONDITION_RE.match(code) or _TERNARY_RE.search(code)):
        return None
    for m in _TOKEN_RE.finditer(code):
        if m.lastgroup == "skip" or not _is_code(mask, m.start(), m.end()):
            continue
        tok = m.group()
        if tok == "not":
            j = m.end()
            while j < len(text) and text[j] == " ":
                j += 1
            return text[: m.start()] + text[j:], "`not x` -> `x`"
        if tok == "!":
            return text[: m.start()] + text[m.end():], "`!x` -> `x`"
        return text[: m.start()] + _FLIP[tok] + text[m.end():], f"`{tok}` -> `{_FLIP[tok]}`"
    # a trailing comment stays where it is
    end = max((i + 1 for i, m in enumerate(mask) if m), default=0)
    while end < len(text) and text[end] in " \t":
        end += 1
    pm = _PY_NEGATE_RE.match(text[:end])
    if python and pm and pm.group(2).strip() and mask[pm.start(3) + pm.group(3).index(":")] \
            and _is_code(mask, len(pm.group(1)) - len(pm.group(1).lstrip()), len(pm.group(1).rstrip())):
        return f"{pm.group(1)}not ({pm.group(2)}){pm.group(3)}{text[end:]}", "`x` -> `not (x)`"
    return None


def gold_mutants(patch: str, *, max_per_kind: int | None = None) -> list[Mutant]:
    """Deterministic mutants of a Gold unified diff, in file/hunk/line order per kind (drop_hunk, then
    invert_condition, then off_by_one); `max_per_kind` keeps the first N of each kind.

    - drop_hunk: each single hunk left out, when the patch has more than one (a file left with no hunk loses
      its whole section);
    - invert_condition: on an added line of a condition (if/elif/while/assert/ternary, or a continuation
      line starting with a boolean operator) of a code file, the first of `==`/`!=`, `<`/`>=`, `>`/`<=`,
      `and`/`or`, `&&`/`||`, `True`/`False` is flipped or `not x`/`!x` becomes `x`; a Python condition
      with none of them becomes `not (x)`. Strings and comments are never edited; `<`/`>` count only with
      spaces on both sides (otherwise they are generics, shifts or arrows);
    - off_by_one: the first decimal integer literal of an added code line + 1 and - 1 (no - 1 of 0: `a-0`
      would become `a--1`, a syntax error in C-like languages). Hex/octal/float literals are left alone.
    """
    files = _parse(patch)
    gold_text = _render(files)
    candidates: list[Mutant] = []

    n_hunks = sum(len(f.hunks) for f in files)
    if n_hunks > 1:
        for fi, f in enumerate(files):
            for hi, h in enumerate(f.hunks):
                mutated = _copy(files)
                mutated[fi].hunks.pop(hi)
                if not mutated[fi].hunks:
                    mutated.pop(fi)
                desc = (f"drop hunk {hi + 1}/{len(f.hunks)} of {f.path} "
                        f"(@@ -{_range(h.old_start, h.old_len)} +{_range(h.new_start, h.new_len)} @@)")
                candidates.append(Mutant("drop_hunk", desc, _render(mutated), f.path))

    def line_edit(fi: int, hi: int, bi: int, new_text: str, kind: str, what: str) -> Mutant:
        mutated = _copy(files)
        old = files[fi].hunks[hi]
        body = list(old.body)
        body[bi] = "+" + new_text
        replacement = _Hunk(old.old_start, old.old_len, old.new_start, old.new_len, old.tail, body, old.bias)
        mutated[fi].hunks[hi] = replacement
        new_line = old.new_start + sum(1 for b in old.body[:bi] if b[:1] in (" ", "", "+"))
        return Mutant(kind, f"{what} in {files[fi].path} (added line {new_line})", _render(mutated),
                      files[fi].path)

    inversions: list[Mutant] = []
    off_by_one: list[Mutant] = []
    for fi, f in enumerate(files):
        python = _comment_style(f.path) == "#"
        for hi, bi, text, mask in _added_lines(f):
            inv = _invert(text, mask, python)
            if inv:
                inversions.append(line_edit(fi, hi, bi, inv[0], "invert_condition",
                                            f"invert condition {inv[1]}"))
            for m in _INT_RE.finditer(text):
                leading_zero = len(m.group()) > 1 and m.group().startswith("0")
                if leading_zero or not _is_code(mask, m.start(), m.end()):
                    continue
                value = int(m.group())
                for new in (value + 1, value - 1):
                    if new < 0:
                        continue
                    edited = text[: m.start()] + str(new) + text[m.end():]
                    off_by_one.append(line_edit(fi, hi, bi, edited, "off_by_one",
                                                f"off by one {value} -> {new}"))
                break  # the first integer literal of the line only
    candidates += inversions + off_by_one

    gold_raw = patch if patch.endswith("\n") else patch + "\n"
    seen = {hashlib.sha256(t.encode()).hexdigest() for t in (gold_text, gold_raw)}
    out: list[Mutant] = []
    per_kind: dict[str, int] = {}
    for m in candidates:
        key = hashlib.sha256(m.patch.encode()).hexdigest()
        if key in seen:
            continue
        if max_per_kind is not None and per_kind.get(m.kind, 0) >= max_per_kind:
            continue
        seen.add(key)
        per_kind[m.kind] = per_kind.get(m.kind, 0) + 1
        out.append(m)
    return out
