"""Unified-diff parsing and the two patch gates: a Test bundle's `test.patch` (tests only) and a
Repair candidate's source patch (no test or runner edits).

Why our own parser and not `unidiff`: every problem must name the file and say what to fix, and we
need to see what `git apply` would act on (mode lines, renames, binary markers, quoted paths) -
including text that is not a diff at all. Pure functions: no file system, no git.

SPEC §2.1: a test patch adds/changes tests only; it must not change product source, delete files,
touch `.git`, use absolute or `..` paths, or be binary. SPEC §2.4: a source patch must not touch
test files, `conftest.py`, runner configuration (pytest.ini, tox.ini, `[tool:pytest]`/`[pytest]`
in setup.cfg, `[tool.pytest...]` in pyproject.toml), start-up hooks (sitecustomize.py,
usercustomize.py, *.pth) or the repository's own runner (bin/test, sympy's runtests.py, Django's
tests/runtests.py).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable

from execcritic.bundle import languages
from execcritic.bundle.problems import SOURCE_PATCH, TEST_PATCH, Problem

DEV_NULL = "/dev/null"
DEFAULT_MAX_BYTES = 200_000

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


# ---- path rules ----------------------------------------------------------------------------------


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


def is_test_path(path: str, language: str | None = None) -> bool:
    """May a Test bundle's patch add or change this file? (tests, fixtures, test data)."""
    if path_problem(path):
        return False
    return languages.is_test_path(path.removeprefix("./"), language)


# Files that are runner configuration or start-up hooks wherever they are.
_FORBIDDEN_BASENAMES = {
    "conftest.py": "pytest loads conftest.py files as plugins; a source patch may not add or change one",
    "sitecustomize.py": "sitecustomize.py runs at interpreter start-up",
    "usercustomize.py": "usercustomize.py runs at interpreter start-up",
    "pytest.ini": "pytest.ini is test-runner configuration",
    "tox.ini": "tox.ini is test-runner configuration (tox runs the tests; it also holds [pytest])",
    ".pytest.ini": "pytest configuration",
    "noxfile.py": "nox runs the tests",
}
# The repository's own test runner programs.
_FORBIDDEN_PATHS = {
    "bin/test": "bin/test is SymPy's test runner",
    "sympy/testing/runtests.py": "sympy/testing/runtests.py is SymPy's test runner",
    "sympy/utilities/runtests.py": "sympy/utilities/runtests.py is SymPy's test runner (older releases)",
    "tests/runtests.py": "tests/runtests.py is Django's test runner",
    "tests/test_sqlite.py": "tests/test_sqlite.py holds the settings Django's tests run with",
}
# Sections of shared config files that configure the test runner.
_SECTION_RULES = {
    "setup.cfg": (re.compile(r"^\s*\[(tool:pytest|pytest|tool:pytest\..*)\]\s*$"), "[tool:pytest]"),
    "pyproject.toml": (re.compile(r"^\s*\[+\s*tool\.pytest(\..*)?\s*\]+\s*$"), "[tool.pytest...]"),
}
_ANY_SECTION = re.compile(r"^\s*\[+[^\]]+\]+\s*$")


def forbidden_for_source(
    path: str,
    *,
    base_text: str | None = None,
    changed_lines: list[int] | None = None,
    added_lines: list[str] | None = None,
    language: str | None = None,
) -> str | None:
    """Why a Repair *source* patch may not touch `path`, or None if it may.

    For setup.cfg / pyproject.toml only the test-runner sections are forbidden: pass the Base text
    and the Base line numbers the patch changes (`Hunk.changed_old_lines`) and the added lines;
    without the Base text a change to such a file is judged forbidden (fail closed) unless every
    changed line is visibly outside a runner section in the hunk itself.
    """
    clean = path.removeprefix("./")
    problem = path_problem(clean)
    if problem:
        return problem[1]
    base = posixpath.basename(clean)
    if base in _FORBIDDEN_BASENAMES:
        return f"{clean}: {_FORBIDDEN_BASENAMES[base]}"
    if base.endswith(".pth"):
        return f"{clean}: *.pth files run code at interpreter start-up"
    if clean in _FORBIDDEN_PATHS:
        return f"{clean}: {_FORBIDDEN_PATHS[clean]}"
    mod = languages.module_for_path(clean, language)
    extra = getattr(mod, "forbidden_for_source", None) if mod else None
    if extra:
        reason = extra(clean)
        if reason:
            return f"{clean}: {reason}"
    if languages.is_test_path(clean, language):
        return f"{clean}: is a test file; a source patch may not change tests (the test bundle owns them)"
    if base in _SECTION_RULES and clean == base:  # only the repository-root config file is read by pytest
        rule, label = _SECTION_RULES[base]
        if added_lines and any(rule.match(a) for a in added_lines):
            return f"{clean}: adds a {label} section (test-runner configuration)"
        if changed_lines is not None and base_text is not None:
            sections = _sections_by_line(base_text)
            for n in changed_lines:
                name = sections[min(max(n, 1), len(sections)) - 1] if sections else ""
                if name and rule.match(name):
                    return f"{clean}: changes the {label} section (test-runner configuration)"
            return None
        if changed_lines is not None and base_text is None:
            return (
                f"{clean}: cannot tell whether the change touches the {label} section without the Base "
                "file; the change is refused (fail closed)"
            )
    return None


def _sections_by_line(text: str) -> list[str]:
    """For each line of an ini/toml file, the header of the section it belongs to ('' before any)."""
    out, current = [], ""
    for line in text.splitlines():
        if _ANY_SECTION.match(line):
            current = line.strip()
        out.append(current)
    return out


def _hunk_sections(fd: FileDiff) -> tuple[bool, bool]:
    """(touches a runner section, undecidable) judged from the hunks alone (headers in the hunk)."""
    base = posixpath.basename(fd.path)
    rule, _label = _SECTION_RULES[base]
    undecidable = False
    for h in fd.hunks:
        current = None
        for ln in h.lines:
            body = ln[1:]
            if _ANY_SECTION.match(body):
                current = body.strip()
                if ln.startswith(("+", "-")) and rule.match(body):
                    return True, False
                continue
            if ln.startswith(("+", "-")):
                if current is None:
                    undecidable = True
                elif rule.match(current):
                    return True, False
    return False, undecidable


# Module names whose shadowing would replace the test runner or the interpreter's start-up: a test
# patch that adds `tests/pytest.py` makes `cd tests && python -m pytest` run *it*.
_SHADOWED_MODULES = {
    "pytest",
    "_pytest",
    "py",
    "pluggy",
    "unittest",
    "nose",
    "site",
    "sitecustomize",
    "usercustomize",
    "tox",
    "runpy",
    "coverage",
}


def _startup_or_shadow(path: str) -> tuple[str, str] | None:
    """A test patch file that runs at interpreter start-up or shadows the runner's own modules."""
    base = posixpath.basename(path)
    if base.endswith(".pth") or base in ("sitecustomize.py", "usercustomize.py"):
        return (
            "patch.startup_hook",
            f"{path}: runs code at interpreter start-up, before any test; not a test file",
        )
    parts = path.split("/")
    stem = base[:-3] if base.endswith(".py") else None
    # a package directory shadows only where it is importable by its bare name: at the repository
    # root or directly in a test root that a runner may run from
    mods = ([stem] if stem else []) + [
        p for i, p in enumerate(parts[:-1]) if i == 0 or parts[i - 1] in ("tests", "testing", "test")
    ]
    for m in mods:
        if m in _SHADOWED_MODULES:
            return (
                "patch.shadows_runner",
                f"{path}: a module named {m!r} can shadow the test runner's own modules; rename it",
            )
    return None


# ---- the gates -----------------------------------------------------------------------------------


def _size_problem(text: str, max_bytes: int, artifact: str) -> Problem | None:
    size = len(text.encode("utf-8", errors="replace"))
    if size > max_bytes:
        return Problem(
            "patch.too_large",
            artifact,
            f"the patch is {size:,} bytes (limit {max_bytes:,}); "
            "keep it to the tests that exercise the issue",
        )
    return None


def _structure_problems(text: str, parsed: ParsedPatch, artifact: str) -> list[Problem]:
    if text is None or not text.strip():
        what = "test.patch" if artifact == TEST_PATCH else "the source patch"
        return [Problem("patch.empty", artifact, f"{what} is empty; it must add or change at least one file")]
    if not parsed.files:
        return [
            Problem(
                "patch.not_a_diff",
                artifact,
                "not a unified diff (no `diff --git` / `---`/`+++` file headers); create it with `git diff`",
            )
        ]
    return [Problem(p.code, artifact, p.message) for p in parsed.problems]


def test_patch_problems(
    text: str, *, language: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[Problem]:
    """Every safety problem of a Test bundle's patch (SPEC §2.1). Empty list = acceptable."""
    problems: list[Problem] = []
    if text and (big := _size_problem(text, max_bytes, TEST_PATCH)):
        return [big]  # do not parse megabytes of diff to report more
    parsed = parse_patch(text)
    problems += _structure_problems(text, parsed, TEST_PATCH)
    if not parsed.files:
        return problems

    def bad(code: str, message: str) -> None:
        problems.append(Problem(code, TEST_PATCH, message))

    seen: dict[str, int] = {}
    for fd in parsed.files:
        unsafe = [path_problem(p) for p in fd.paths]
        unsafe = [u for u in unsafe if u]
        for code, message in unsafe:
            bad(code, message)
        if unsafe:
            continue
        path = fd.path
        seen[path] = seen.get(path, 0) + 1
        if seen[path] == 2:
            bad(
                "patch.duplicate_path",
                f"{path}: appears in more than one file section; use one section per file",
            )
        if fd.deleted:
            bad(
                "patch.deletion",
                f"{fd.old_path or path}: the patch deletes this file; a test patch may only add "
                "or change files",
            )
            continue
        if fd.rename_from or fd.rename_to:
            bad(
                "patch.rename",
                f"{fd.rename_from} -> {fd.rename_to}: a rename deletes {fd.rename_from}; add the "
                "new file instead and leave the old one in place",
            )
            continue
        if fd.binary:
            bad("patch.binary", f"{path}: binary changes are not allowed; test data must be text")
            continue
        mode = fd.new_file_mode or fd.new_mode
        if mode in ("120000",):
            bad("patch.symlink", f"{path}: the patch creates a symbolic link; add a regular file")
            continue
        if mode in ("160000",):
            bad("patch.submodule", f"{path}: the patch adds a submodule (gitlink); not allowed")
            continue
        if fd.old_mode or fd.new_mode:
            bad(
                "patch.mode_change",
                f"{path}: the patch changes file mode {fd.old_mode} -> {fd.new_mode}; drop the mode change",
            )
        if fd.copy_from and not is_test_path(fd.copy_from, language):
            # copying product source into the test tree is allowed (it reads, never writes, source)
            pass
        hook = _startup_or_shadow(path)
        if hook:
            bad(hook[0], hook[1])
            continue
        if not is_test_path(path, language):
            bad(
                "patch.source_edit",
                f"{path}: is not a test file; a test patch may only add or change tests, "
                "fixtures and test data (move test helpers under the test directory)",
            )
        if not fd.hunks and not fd.new_file and not fd.copy_from and not fd.binary and not fd.old_mode:
            bad("patch.no_change", f"{path}: a file section without any change")
    return problems


test_patch_problems.__test__ = False  # type: ignore[attr-defined]  # a gate, not a pytest test


def source_patch_problems(
    text: str,
    *,
    read_base: BaseReader | None = None,
    language: str | None = None,
    max_bytes: int | None = None,
) -> list[Problem]:
    """Every reason a Repair candidate may not be applied as a *source* patch (SPEC §2.4)."""
    problems: list[Problem] = []
    if text and max_bytes and (big := _size_problem(text, max_bytes, SOURCE_PATCH)):
        return [big]
    parsed = parse_patch(text)
    problems += _structure_problems(text, parsed, SOURCE_PATCH)
    for fd in parsed.files:
        for p in fd.paths:
            unsafe = path_problem(p)
            if unsafe:
                problems.append(Problem(unsafe[0], SOURCE_PATCH, unsafe[1]))
                continue
            if fd.binary:
                continue
            kwargs = {}
            base = posixpath.basename(p)
            if base in _SECTION_RULES and p == base:
                changed = [n for h in fd.hunks for n in h.changed_old_lines()]
                base_text = read_base(p) if read_base else None
                if base_text is None and not fd.new_file:
                    touches, undecidable = _hunk_sections(fd)
                    if touches:
                        problems.append(
                            Problem(
                                "patch.forbidden_path", SOURCE_PATCH, f"{p}: changes the test-runner section"
                            )
                        )
                        continue
                    if not undecidable:
                        continue
                kwargs = {
                    "base_text": base_text if base_text is not None else ("" if fd.new_file else None),
                    "changed_lines": changed,
                    "added_lines": fd.added_lines,
                }
            reason = forbidden_for_source(p, language=language, **kwargs)
            if reason:
                code = "patch.test_edit" if "is a test file" in reason else "patch.forbidden_path"
                problems.append(Problem(code, SOURCE_PATCH, reason))
        if fd.binary:
            problems.append(
                Problem(
                    "patch.binary",
                    SOURCE_PATCH,
                    f"{fd.path}: binary changes cannot be applied as a text patch",
                )
            )
        mode = fd.new_file_mode or fd.new_mode
        if mode in ("120000", "160000"):
            problems.append(
                Problem(
                    "patch.symlink",
                    SOURCE_PATCH,
                    f"{fd.path}: symbolic links and submodules are not allowed in a source patch",
                )
            )
    return problems


# ---- added tests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddedTest:
    path: str
    name: str
    scope: tuple[str, ...] = ()  # enclosing classes / describe blocks seen in the patch
    scope_certain: bool = True  # False: the enclosing class is not visible in the hunk
    hints: tuple[str, ...] = ()  # sibling test names in the same block (to look the class up)
    section: str = ""  # the hunk header text (another hint)
    base_line: int | None = None  # the Base line the definition is inserted before
    indent: int | None = None  # its indentation (columns)
    occurrence: int = 0  # how many earlier added tests of this file have the same name

    @property
    def qualified(self) -> str:
        return "::".join((self.path, *self.scope, self.name))


def added_tests(patch: str | ParsedPatch, language: str | None = None) -> list[AddedTest]:
    """Tests whose definitions the patch adds, in patch order (via the language modules)."""
    parsed = patch if isinstance(patch, ParsedPatch) else parse_patch(patch)
    out: list[AddedTest] = []
    for fd in parsed.files:
        if fd.deleted or not fd.new_path or path_problem(fd.new_path):
            continue
        mod = languages.module_for_path(fd.new_path, language)
        if mod is None:
            continue
        scoped = getattr(mod, "added_test_nodes", None)
        if scoped is not None:
            for d in scoped(fd.new_path, fd.hunk_texts()):
                out.append(
                    AddedTest(
                        fd.new_path,
                        d.name,
                        tuple(d.scope),
                        d.certain,
                        tuple(d.siblings),
                        d.section,
                        def_base_line(
                            fd, d.name, sum(1 for t in out if t.path == fd.new_path and t.name == d.name)
                        ),
                        getattr(d, "indent", None),
                        sum(1 for t in out if t.path == fd.new_path and t.name == d.name),
                    )
                )
            continue
        for name in mod.added_tests(fd.new_path, fd.added_lines, fd.removed_lines):
            out.append(AddedTest(fd.new_path, name))
    seen: set[tuple] = set()
    unique = []
    for t in out:
        key = (t.path, t.name, t.scope, None if t.scope_certain else t.base_line)
        if key not in seen:
            seen.add(key)
            unique.append(t)
    return unique


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


__all__ = [
    "AddedTest",
    "BaseReader",
    "FileDiff",
    "Hunk",
    "ParsedPatch",
    "added_tests",
    "forbidden_for_source",
    "is_test_path",
    "parse_patch",
    "path_problem",
    "post_image_fragments",
    "source_patch_problems",
    "test_patch_problems",
]
