"""Candidate screens beyond the test-file rules: what a Repair candidate (a *source* patch) may not do because
it reaches for the test run rather than the behaviour under test.

Why a static screen at all, next to the harness-owned reporter: some shortcuts cannot be caught inside the
tested process - a "fix" that behaves correctly only while a test runner is loaded or a test frame is on the
stack looks, at run time, exactly like a fix. Their source gives them away. Added Python code is read as syntax
(screen_ast.py), not text: names as the code resolves them, strings as it builds them (`"_get" + "frame"`),
the attribute `getattr` names, the module `__import__` names. Every rule was measured against every Gold patch
of SWE-bench Verified, Lite and Multilingual (tests/unit/test_screen.py; results/screen/): none fires on one, so
the screen costs no legitimate fix there. It is a screen, not a proof: a name computed from data the code reads
at run time is beyond it; the sandbox and the runtime guard are the other half.
"""

from __future__ import annotations

import re

from execcritic.bundle import screen_ast
from execcritic.bundle.diff import FileDiff

# The product's own test framework, per repository: a source patch changing it changes how the tests judge,
# not what they test (no Verified Gold patch touches these).
REPO_TEST_FRAMEWORK = {
    "django/django": ("django/test/",),
    "sympy/sympy": ("sympy/testing/", "sympy/utilities/runtests.py", "sympy/utilities/pytest.py"),
    # pytest's own tests judge an inner run through pytester's RunResult
    "pytest-dev/pytest": ("src/_pytest/pytester.py", "src/_pytest/pytester_assertions.py"),
}
# Module names that, at the repository root, would stand in for the runner or for what the harness's
# reporter imports while the interpreter starts.
SHADOWED = {"pytest", "_pytest", "py", "pluggy", "unittest", "nose", "site", "sitecustomize", "usercustomize",
            "tox", "runpy", "coverage", "execcritic_reporter", "builtins", "hmac", "hashlib", "json", "socket",
            "threading", "atexit", "types", "functools", "inspect", "importlib", "contextlib", "sysconfig",
            "os", "sys", "io", "abc", "codecs", "encodings", "warnings", "traceback", "linecache", "tokenize"}

# What each rule of the added-code reading (screen_ast.py) means, and the repositories exempt from it (those whose
# product *is* that machinery: pytest's own source imports pytest).
RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "current_test": ("reads which test is running", ()),
    "runner_loaded": ("asks whether a test runner is loaded", ("pytest-dev/pytest",)),
    "runner_import": ("imports a test runner into product code", ("pytest-dev/pytest",)),
    "framework_import": ("imports the repository's test framework into product code", ()),
    "stack_inspection": ("inspects the call stack or a frame (what is calling it)", ()),
    "exit_hook": ("acts at interpreter exit", ()),
    "trace_hook": ("installs a trace, profile or audit hook", ()),
    "gc_walk": ("walks the garbage collector", ()),
    "builtins": ("changes or reads builtins", ()),
    "code_objects": ("rewrites code objects or reads memory (ctypes, marshal, /proc)", ()),
    "class_rewrite": ("rewrites a class or function in place (__bases__, __class__, __code__, __defaults__ ...)", ()),
    "dynamic_code": ("runs code it builds at run time (eval, exec, compile)", ()),
    "computed_access": ("reaches the interpreter's machinery by a name it computes (getattr on sys/gc/inspect/"
                        "builtins..., __import__/import_module of one)", ()),
    "obfuscated_name": ("spells a name of the interpreter's machinery by building the string", ()),
    "harness_aware": ("looks for the harness (names it)", ()),
    "exception_claim": ("makes a class claim classes it does not derive from (ABC register/__subclasshook__, an "
                        "exception class that is an ABC, isinstance/issubclass hooks set)", ()),
}


def added_code(fd: FileDiff) -> list[tuple[str, object]]:
    """(logical line, its syntax tree or None) for every logical line of the post-image holding an added line. A
    hunk may begin inside a docstring: of the readings that start outside a string or inside one, the one that
    parses most of its added lines is taken."""
    out = []
    for hunk in fd.hunks:
        side = [(ln[1:], ln.startswith("+")) for ln in hunk.lines if ln[:1] in (" ", "+")]
        best = None
        for start in (None, '"""', "\'\'\'"):
            lines = [(t, screen_ast.parse_logical(t)) for t, added in screen_ast.logical_lines(side, start) if added]
            score = sum(tree is not None for _t, tree in lines) - sum(tree is None for _t, tree in lines)
            if best is None or score > best[0]:
                best = (score, lines)
        out += best[1]
    return out


def new_side_code(fd: FileDiff) -> list[object]:
    """The syntax trees of every logical line of the hunks' new side that parses (context lines too: an alias
    bound in an unchanged line is used by an added one)."""
    trees = []
    for hunk in fd.hunks:
        side = [(ln[1:], True) for ln in hunk.lines if ln[:1] in (" ", "+")]
        trees += [t for t in (screen_ast.parse_logical(text) for text, _ in screen_ast.logical_lines(side))
                  if t is not None]
    return trees


def screen_file(fd: FileDiff, repo: str | None) -> list[tuple[str, str]]:
    """(problem code, message) for one file section of a candidate."""
    path = fd.path
    out: list[tuple[str, str]] = []
    for prefix in REPO_TEST_FRAMEWORK.get(repo or "", ()):
        if path == prefix or path.startswith(prefix.rstrip("/") + "/") or path == prefix.rstrip("/"):
            out.append(("patch.test_framework", f"{path}: is {repo}'s own test framework; a source patch may not "
                                                "change how the tests judge"))
    parts = path.split("/")
    if any(p.endswith((".egg-info", ".dist-info")) for p in parts[:-1]):
        out.append(("patch.packaging_metadata", f"{path}: installed-package metadata (entry points register "
                                                "plugins the test runner loads)"))
    if "__pycache__" in parts or path.endswith((".pyc", ".pyo")):
        out.append(("patch.bytecode", f"{path}: compiled bytecode is not source; it can stand in for a module"))
    top = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else (parts[0] if len(parts) > 1 else None)
    if top in SHADOWED and path.endswith(".py"):
        out.append(("patch.shadows_runner", f"{path}: a module named {top!r} at the repository root stands in for "
                                            "the test runner or for what the harness's reporter imports"))
    if path.endswith(".py"):
        added = fd.added_lines
        fired: dict[str, str] = {}
        names = screen_ast.aliases(new_side_code(fd))
        for text, tree in added_code(fd):
            for rule in (screen_ast.findings(tree, names) if tree is not None else screen_ast.fallback(text)):
                if rule not in fired and repo not in RULES[rule][1]:
                    fired[rule] = text
        claim = fired.pop("exception_claim", None)
        if claim is not None:
            out.append(("patch.claims_everything", f"{path}: {RULES['exception_claim'][0]} ({claim.strip()[:120]!r}):"
                                                   " `except`/`pytest.raises` of it would accept an unrelated error"))
        for rule, text in fired.items():
            out.append((f"patch.test_aware.{rule}",
                        f"{path}: {RULES[rule][0]} ({text.strip()[:120]!r}); a fix must not depend on being tested"))
        claim = _claims_everything(added)
        if claim:
            out.append(("patch.claims_everything", f"{path}: {claim} answers True whatever it is asked, so every "
                                                   "isinstance/issubclass (and `pytest.raises`) check passes"))
    return out


_TYPE_CHECK = re.compile(r"^(\s*)def\s+(__instancecheck__|__subclasscheck__)\s*\(")


def _claims_everything(added: list[str]) -> str | None:
    """An added `__instancecheck__`/`__subclasscheck__` whose body returns a constant true value."""
    for i, line in enumerate(added):
        m = _TYPE_CHECK.match(line)
        if not m:
            continue
        indent = len(m.group(1))
        for body in added[i + 1:]:
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break
            if body.strip() in ("return True", "return 1", "return not False"):
                return m.group(2)
    return None
