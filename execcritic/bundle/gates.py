"""The two patch gates: a Test bundle's `test.patch` (tests only) and a Repair candidate's source patch
(no test or runner edits).

SPEC §2.1: a test patch adds/changes tests only; it must not change product source, delete files,
touch `.git`, use absolute or `..` paths, or be binary. SPEC §2.4: a source patch must not touch
test files, `conftest.py`, runner configuration (pytest.ini, tox.ini, `[tool:pytest]`/`[pytest]`
in setup.cfg, `[tool.pytest...]` in pyproject.toml), start-up hooks (sitecustomize.py,
usercustomize.py, *.pth) or the repository's own runner (bin/test, sympy's runtests.py, Django's
tests/runtests.py). Pure functions over the patch text (and, for shared config files, the Base text).
"""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle import languages
from execcritic.bundle.diff import BaseReader, FileDiff, ParsedPatch, parse_patch, path_problem
from execcritic.bundle.problems import SOURCE_PATCH, TEST_PATCH, Problem
from execcritic.bundle.screen import screen_file

DEFAULT_MAX_BYTES = 200_000


# ---- path rules ----------------------------------------------------------------------------------


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


def _preamble(text: str) -> str | None:
    """Non-blank text before the first file header: not part of a `git diff`, and a place to hide a second
    diff in another format that a fuzzy applier would apply unseen."""
    for line in text.splitlines():
        if line.startswith(("diff --git ", "--- ", "Index: ")):
            return None
        if line.strip():
            return line
    return None


def source_patch_problems(
    text: str,
    *,
    read_base: BaseReader | None = None,
    language: str | None = None,
    max_bytes: int | None = None,
    repo: str | None = None,
) -> list[Problem]:
    """Every reason a Repair candidate may not be applied as a *source* patch (SPEC §2.4), including the
    candidate screens of `bundle.screen` (the repository's own test framework, packaging metadata, bytecode,
    modules that shadow the runner, code that depends on being tested)."""
    problems: list[Problem] = []
    if text and max_bytes and (big := _size_problem(text, max_bytes, SOURCE_PATCH)):
        return [big]
    parsed = parse_patch(text)
    problems += _structure_problems(text, parsed, SOURCE_PATCH)
    pre = _preamble(text or "")
    if pre is not None and parsed.files:
        problems.append(Problem("patch.preamble", SOURCE_PATCH,
                                f"text before the first file header ({pre.strip()[:80]!r}); submit a plain "
                                "`git diff` with nothing before its first `diff --git` line"))
    for fd in parsed.files:
        if not fd.binary and not any(path_problem(p) for p in fd.paths):
            problems += [Problem(code, SOURCE_PATCH, msg) for code, msg in screen_file(fd, repo)]
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
