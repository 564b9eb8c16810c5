"""Unified-diff parsing: what `git apply` would act on, as data.

Why our own parser and not `unidiff`: every problem must name the file and say what to fix, and we
need to see what `git apply` would act on (mode lines, renames, binary markers, quoted paths) -
including text that is not a diff at all. Pure functions: no file system, no git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from execcritic.bundle.problems import TEST_PATCH, Problem

DEV_NULL = "/dev/null"

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_DIFF_GIT = re.compile(r"^diff --git (.+)$")

BaseReader = Callable[[str], "str | None"]
"""Reads a file of the Base checkout by repository-relative path; None if it does not exist."""


# ---- data model ----------------------------------------------------------------------------------


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str  # git's function-context text after the second @@
    lines: list[str] = field(default_factory=list)  # with their ' ', '+', '-' markers

    @property
    def added(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln.startswith("+")]

    @property
    def removed(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln.startswith("-")]

    def changed_old_lines(self) -> list[int]:
        """1-based Base line numbers this hunk removes, plus the line an insertion follows."""
        out: list[int] = []
        n = self.old_start
        for ln in self.lines:
            if ln.startswith("-"):
                out.append(n)
                n += 1
            elif ln.startswith("+"):
                out.append(max(n - 1, 0))
            else:
                n += 1
        return out


@dataclass
class FileDiff:
    old_path: str | None  # None when the old side is /dev/null (new file)
    new_path: str | None  # None when the new side is /dev/null (deleted file)
    header: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)
    new_file: bool = False
    deleted: bool = False
    rename_from: str | None = None
    rename_to: str | None = None
    copy_from: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    new_file_mode: str | None = None
    binary: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> list[str]:
        out = []
        for p in (self.old_path, self.new_path, self.rename_from, self.rename_to, self.copy_from):
            if p and p not in out:
                out.append(p)
        return out

    @property
    def added_lines(self) -> list[str]:
        return [a for h in self.hunks for a in h.added]

    @property
    def removed_lines(self) -> list[str]:
        return [r for h in self.hunks for r in h.removed]

    def hunk_texts(self) -> list[tuple[str, list[str]]]:
        return [(h.section, h.lines) for h in self.hunks]


@dataclass
class ParsedPatch:
    files: list[FileDiff] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # structural problems (artifact set by caller)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]


# ---- parsing -------------------------------------------------------------------------------------

_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def _unquote(path: str) -> str:
    """git's C-style quoted path ("a/f\\303\\244.py") -> text."""
    if not (len(path) >= 2 and path[0] == '"' and path[-1] == '"'):
        return path
    body, out, i = path[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out.extend(_ESCAPES.get(nxt, nxt).encode())
            i += 2
            continue
        out.extend(ch.encode())
        i += 1
    return out.decode("utf-8", errors="replace")


def _strip_prefix(path: str, prefix: str) -> str:
    path = _unquote(path.split("\t")[0].rstrip())
    if path == DEV_NULL:
        return path
    return path[len(prefix) :] if path.startswith(prefix) else path


def _split_diff_git(rest: str) -> tuple[str | None, str | None]:
    """`diff --git a/x b/x` -> ('x', 'x'). Handles quoted paths and paths with spaces when both
    sides are equal."""
    rest = rest.strip()
    if rest.startswith('"'):
        m = re.match(r'^("(?:[^"\\]|\\.)*")\s+(.+)$', rest)
        if m:
            return _strip_prefix(m.group(1), "a/"), _strip_prefix(m.group(2), "b/")
    # a/<p> b/<p>: the two halves are equal for modifications; split at the middle " b/"
    candidates = [m.start() for m in re.finditer(r" b/", rest)] + [
        m.start() for m in re.finditer(r' "b/', rest)
    ]
    for pos in candidates:
        left, right = rest[:pos], rest[pos + 1 :]
        a, b = _strip_prefix(left, "a/"), _strip_prefix(right, "b/")
        if a == b:
            return a, b
    if candidates:
        pos = candidates[-1]
        return _strip_prefix(rest[:pos], "a/"), _strip_prefix(rest[pos + 1 :], "b/")
    return None, None


def parse_patch(text: str) -> ParsedPatch:
    """Parse a (git) unified diff. Structural problems are collected with artifact TEST_PATCH; the
    gates re-label them for source patches."""
    out = ParsedPatch()
    if text is None or not text.strip():
        return out
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    current: FileDiff | None = None
    preamble_garbage = 0

    def bad(code: str, message: str) -> None:
        out.problems.append(Problem(code, TEST_PATCH, message))

    while i < len(lines):
        line = lines[i].rstrip("\r")
        m = _DIFF_GIT.match(line)
        if m:
            a, b = _split_diff_git(m.group(1))
            current = FileDiff(old_path=a, new_path=b, header=[line])
            out.files.append(current)
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = _strip_prefix(line[4:], "a/")
            new = _strip_prefix(lines[i + 1].rstrip("\r")[4:], "b/")
            if current is None or current.hunks or any(h.startswith("--- ") for h in current.header):
                # a plain unified diff (no `diff --git` line) starts a new file section
                current = FileDiff(
                    old_path=None if old == DEV_NULL else old, new_path=None if new == DEV_NULL else new
                )
                out.files.append(current)
            else:
                current.old_path = None if old == DEV_NULL else old
                current.new_path = None if new == DEV_NULL else new
            if old == DEV_NULL:
                current.new_file = True
            if new == DEV_NULL:
                current.deleted = True
            current.header += [line, lines[i + 1]]
            i += 2
            continue
        hm = _HUNK.match(line)
        if hm:
            if current is None:
                bad("patch.malformed", f"line {i + 1}: a hunk (`@@`) before any file header")
                i += 1
                continue
            hunk = Hunk(
                int(hm.group(1)),
                int(hm.group(2) if hm.group(2) is not None else 1),
                int(hm.group(3)),
                int(hm.group(4) if hm.group(4) is not None else 1),
                hm.group(5).strip(),
            )
            i += 1
            old_left, new_left = hunk.old_len, hunk.new_len
            while i < len(lines) and (old_left > 0 or new_left > 0):
                body = lines[i]
                tag = body[:1]
                if tag == " " or body == "":
                    old_left -= 1
                    new_left -= 1
                    hunk.lines.append(body if body else " ")
                elif tag == "-":
                    old_left -= 1
                    hunk.lines.append(body)
                elif tag == "+":
                    new_left -= 1
                    hunk.lines.append(body)
                elif tag == "\\":
                    pass  # "\ No newline at end of file"
                else:
                    break
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            if old_left != 0 or new_left != 0:
                bad(
                    "patch.malformed",
                    f"{current.path}: hunk @@ -{hunk.old_start},{hunk.old_len} "
                    f"+{hunk.new_start},{hunk.new_len} @@ has the wrong number of lines "
                    "(regenerate the patch with `git diff`, do not edit it by hand)",
                )
            current.hunks.append(hunk)
            continue
        if current is not None and not current.hunks:
            _header_line(current, line)
        elif line.strip():
            if current is None:
                preamble_garbage += 1
            else:
                bad(
                    "patch.malformed",
                    f"line {i + 1}: unexpected text {line[:60]!r} after a hunk of {current.path}",
                )
        i += 1
    return out


def _header_line(fd: FileDiff, line: str) -> None:
    fd.header.append(line)
    for prefix, attr in (("old mode ", "old_mode"), ("new mode ", "new_mode")):
        if line.startswith(prefix):
            setattr(fd, attr, line[len(prefix) :].strip())
    if line.startswith("new file mode "):
        fd.new_file = True
        fd.new_file_mode = line[len("new file mode ") :].strip()
        fd.old_path = None
    elif line.startswith("deleted file mode "):
        fd.deleted = True
    elif line.startswith("rename from "):
        fd.rename_from = _unquote(line[len("rename from ") :].strip())
    elif line.startswith("rename to "):
        fd.rename_to = _unquote(line[len("rename to ") :].strip())
    elif line.startswith("copy from "):
        fd.copy_from = _unquote(line[len("copy from ") :].strip())
    elif line.startswith("Binary files ") or line.startswith("GIT binary patch"):
        fd.binary = True


def path_problem(path: str) -> tuple[str, str] | None:
    """(code, message) if a patch path is unsafe whatever the patch is for."""
    if not path:
        return "patch.malformed", "a file header has an empty path"
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path) or path.startswith("~"):
        return (
            "patch.absolute_path",
            f"{path}: absolute paths are not allowed; use a path relative to the repository root",
        )
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "patch.path_traversal", f"{path}: `..` leaves the repository; use a path inside it"
    if any(p == ".git" for p in parts) or parts[0].lower() == ".git":
        return "patch.git_dir", f"{path}: the patch may not write inside `.git`"
    if "\0" in path or any(ord(c) < 32 for c in path):
        return "patch.malformed", f"{path!r}: control characters in a path"
    return None


def def_base_line(fd: FileDiff, name: str, occurrence: int = 0) -> int | None:
    """The 1-based Base line before which the patch adds the line that defines `name` (the
    `occurrence`-th added line naming it as a whole word), or None."""
    word = re.compile(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])")
    seen = 0
    for h in fd.hunks:
        old = h.old_start if h.old_len else h.old_start + 1
        for ln in h.lines:
            if ln.startswith("+"):
                if word.search(ln):
                    if seen == occurrence:
                        return old
                    seen += 1
            else:
                old += 1
    return None


def post_image_fragments(patch: str | ParsedPatch, path: str) -> list[tuple[str, list[str]]]:
    """(hunk section, hunk lines) of one file, for language helpers that read context."""
    parsed = patch if isinstance(patch, ParsedPatch) else parse_patch(patch)
    return [h for fd in parsed.files if fd.new_path == path for h in fd.hunk_texts()]
