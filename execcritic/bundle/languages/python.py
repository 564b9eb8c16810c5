"""Python test-patch rules: which files are tests, and which tests a diff adds.

Why a module of its own: pytest, unittest/Django and SymPy all name tests `test*` functions or
methods, but the file conventions differ (pytest `test_*.py`/`*_test.py`, Django `tests.py` and
`tests/<app>/...`, pylint `unittest_*.py`, pytest's own `testing/`), and a test written *inside a
string* (pytester's `makepyfile("def test_1(): ...")`) is not a test of the repository.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

LANGUAGE = "python"
EXTENSIONS = (".py", ".pyi", ".pyx", ".pxd")

# Files that change how tests are collected or run. They live in test trees but are runner
# configuration, so a *test* patch may carry them (fixtures) while a *source* patch may not.
CONFTEST = "conftest.py"

_TEST_FILE = re.compile(r"^(test_.*|.*_test|tests?|unittest_.*|.*_tests)\.pyi?$")
_DEF = re.compile(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?def[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*\(")
_CLASS = re.compile(r"^(?P<indent>[ \t]*)class[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*[(:]")
_TRIPLE = re.compile(r"('''|\"\"\")")


def is_test_module_name(basename: str) -> bool:
    """A file name that test runners collect as a test module (`test_x.py`, `x_test.py`, `tests.py`,
    pylint's `unittest_x.py`)."""
    return bool(_TEST_FILE.match(basename))


# Directory names that hold a project's own tests wherever they are.
_TEST_DIRS = {"tests", "unittests", "unit_tests", "__tests__", "testdata", "test_data", "testing_data"}
# `test`/`testing` are test trees at the repository root (pytest's `testing/`, `test/`) but product
# packages inside one (`django/test/`, `sympy/testing/`, `sphinx/testing/`, `numpy/testing/` are
# importable testing frameworks shipped to users).
_ROOT_ONLY = {"test", "testing"}


def is_test_path(path: str) -> bool:
    """Test code: a collected test module (`test_*.py`, `*_test.py`, `tests.py`, pylint's
    `unittest_*.py`) or `conftest.py` anywhere, or any Python file in a test tree - a `tests/`
    directory at any depth, or `test/`/`testing/` at the repository root. A project's shipped
    testing package (`django/test/`, `sympy/testing/`) is product source."""
    base = posixpath.basename(path)
    if is_test_module_name(base) or base == CONFTEST:
        return True
    dirs = path.split("/")[:-1]
    if dirs and dirs[0].lower() in _ROOT_ONLY:
        return True
    return any(d.lower() in _TEST_DIRS or d.lower().endswith(("_tests", "-tests")) for d in dirs)


def _indent_width(indent: str) -> int:
    return len(indent.expandtabs(8))


class _StringTracker:
    """Tracks whether a line starts inside a triple-quoted string (pytester source, docstrings).

    A diff hunk may begin inside a string. `start_inside` guesses it from the hunk: an odd number of
    triple quotes whose first one *closes* something (a line that is only the quotes, perhaps with
    a closing parenthesis, and follows neither a `def`/`class` line nor an open parenthesis).
    """

    def __init__(self, lines: list[str] | None = None) -> None:
        self.open: str | None = _start_inside(lines) if lines else None

    def feed(self, line: str) -> bool:
        """Returns True if `line` begins inside a triple-quoted string; updates the state."""
        inside = self.open is not None
        for m in _TRIPLE.finditer(_strip_comment(line) if self.open is None else line):
            quote = m.group(1)
            if self.open is None:
                self.open = quote
            elif self.open == quote:
                self.open = None
        return inside


def _start_inside(lines: list[str]) -> str | None:
    tokens = [(i, m.group(1)) for i, ln in enumerate(lines) for m in _TRIPLE.finditer(ln)]
    if len(tokens) % 2 == 0:
        return None
    i, quote = tokens[0]
    stripped = lines[i].strip()
    if not re.match(r"^[rRbBuUfF]?(\"\"\"|\'\'\')\s*[),.]?", stripped) or re.match(
        r"^[rRbBuUfF]?(\"\"\"|\'\'\')\s*\S", stripped.rstrip(")]},. ")
    ):
        return None  # `x = """...`, `"""Docstring`: an opening quote
    prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
    if prev.endswith(("(", "[", "{", ",", "=")) or re.match(r"^(async\s+)?(def|class)\s", prev):
        return None  # a docstring or a string argument opening
    return quote


def _strip_comment(line: str) -> str:
    # good enough: a '#' outside single-line quotes ends the code part
    out, quote = [], None
    for ch in line:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out)


def _is_test_name(name: str) -> bool:
    return name.startswith("test")


_SELF = re.compile(r"^\s*(?:async\s+)?def\s+\w+\s*\(\s*(self|cls)\b")


@dataclass
class DefInfo:
    """A test definition found in a run of lines (a hunk's post-image or a whole file)."""

    name: str
    index: int  # line index in the lines scanned
    indent: int
    scope: tuple[str, ...]  # enclosing classes seen in the lines
    certain: bool  # the enclosing context is fully visible
    is_method: bool  # first parameter is self/cls
    siblings: tuple[str, ...] = ()  # defs at the same indentation in the same block (scope hints)
    section: str = ""  # the hunk header text (another hint)


def scan_defs(lines: list[str], section: str = "") -> list[tuple[tuple[str, ...], str, int]]:
    """(enclosing classes, name, line index) of test definitions; see `scan_test_defs`."""
    return [(d.scope, d.name, d.index) for d in scan_test_defs(lines, section)]


def scan_test_defs(lines: list[str], section: str = "") -> list[DefInfo]:
    """Test definitions (`def test*`) in a run of source lines, skipping functions nested in
    functions and anything inside triple-quoted strings (pytester sources, docstrings).

    A hunk shows only part of a file: a def indented under nothing visible is kept only if it is a
    method (`self`/`cls`), with `certain=False`; its class must come from hints - `siblings` (other
    methods of the same block, whose class a dataset may name) or `section` (git's hunk header,
    which is the nearest unindented line by default but the nearest `def`/`class` at any depth with
    Python's diff driver, so it is only a hint).
    """
    found: list[DefInfo] = []
    stack: list[tuple[int, str, str]] = []  # (indent, kind, name) seen in `lines`
    code: list[tuple[int, int]] = []  # (line index, indent) of code lines
    strings = _StringTracker(lines)
    for i, line in enumerate(lines):
        if strings.feed(line):
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "@")):
            continue
        indent = _indent_width(line[: len(line) - len(line.lstrip())])
        code.append((i, indent))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        mc = _CLASS.match(line)
        md = _DEF.match(line)
        if mc:
            stack.append((indent, "class", mc.group("name")))
        elif md:
            name = md.group("name")
            kinds = [k for _ind, k, _n in stack]
            is_method = bool(_SELF.match(line))
            if _is_test_name(name) and "def" not in kinds:
                scope = tuple(n for _ind, _k, n in stack)
                outermost = stack[0][0] if stack else indent
                certain = outermost == 0
                if certain or is_method:
                    found.append(DefInfo(name, i, indent, scope, certain, is_method, section=section))
            stack.append((indent, "def", name))
    # siblings: defs at the same indentation with no shallower code line between them
    all_defs = [(i, ind, _DEF.match(lines[i]).group("name")) for i, ind in code if _DEF.match(lines[i])]
    for d in found:
        if d.certain:
            continue
        sib = []
        for j, ind, name in all_defs:
            if ind != d.indent or j == d.index:
                continue
            lo, hi = min(j, d.index), max(j, d.index)
            if all(k_ind >= d.indent for k, k_ind in code if lo < k < hi):
                sib.append(name)
        m = _DEF.match(section or "")
        if m and _SELF.match(section) and not any(k_ind < d.indent for k, k_ind in code if k < d.index):
            sib.append(m.group("name"))
        d.siblings = tuple(sib)
    return found


def enclosing_classes(lines: list[str], line_no: int, indent: int) -> tuple[str, ...] | None:
    """The classes that enclose a definition at `indent` inserted just before 1-based `line_no` of a
    file, or None if that place is inside a function or not inside any class (for indent > 0)."""
    stack: list[tuple[int, str, str]] = []
    strings = _StringTracker()
    for line in lines[: max(line_no - 1, 0)]:
        if strings.feed(line):
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "@")):
            continue
        ind = _indent_width(line[: len(line) - len(line.lstrip())])
        while stack and stack[-1][0] >= ind:
            stack.pop()
        mc, md = _CLASS.match(line), _DEF.match(line)
        if mc:
            stack.append((ind, "class", mc.group("name")))
        elif md:
            stack.append((ind, "def", md.group("name")))
    outer = [s for s in stack if s[0] < indent]
    if any(kind != "class" for _i, kind, _n in outer):
        return None
    if indent > 0 and not outer:
        return None
    return tuple(n for _i, _k, n in outer)


enclosing_scope = enclosing_classes      # the name every language module with scopes gives it (oracle/resolve.py)


def _def_names(lines: list[str]) -> set[str]:
    names = set()
    for line in lines:
        m = _DEF.match(line)
        if m:
            names.add(m.group("name"))
    return names


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    """Bare names of test functions/methods whose `def` line the diff adds to a test module.

    Only collected test modules count (helpers, conftest and sphinx roots define no tests).
    A `def` that is also removed (moved, re-indented, signature changed) is not new.
    """
    if not is_test_module_name(posixpath.basename(path)):
        return []
    removed = _def_names(removed_lines)
    out: list[str] = []
    for _scope, name, _i in scan_defs(added_lines):
        if name not in removed and name not in out:
            out.append(name)
    return out


def added_test_nodes(path: str, hunks: list[tuple[str, list[str]]]) -> list[DefInfo]:
    """Like `added_tests` but with what is known of the enclosing classes, from whole hunks.

    `hunks` is [(section header text, hunk lines with their ' '/'+'/'-' markers)]. The post-image
    (context + added lines) is scanned so that a method added under a visible class gets that class;
    otherwise the DefInfo carries hints (`certain=False`). Returns added defs in patch order.
    """
    if not is_test_module_name(posixpath.basename(path)):
        return []
    removed: set[str] = set()
    for _section, lines in hunks:
        removed |= _def_names([ln[1:] for ln in lines if ln.startswith("-")])
    out: list[DefInfo] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for section, lines in hunks:
        post = [ln for ln in lines if ln[:1] in (" ", "+", "")]
        text = [ln[1:] if ln else "" for ln in post]
        for d in scan_test_defs(text, section):
            if post[d.index].startswith("+") and d.name not in removed and (d.scope, d.name) not in seen:
                seen.add((d.scope, d.name))
                out.append(d)
    return out


def docstring_tests(path: str, hunks: list[tuple[str, list[str]]]) -> dict[str, list[DefInfo]]:
    """{first docstring line: [DefInfo]} for test methods visible in the post-image of the hunks.

    unittest's verbose output (Django's runner) names a test with a docstring by that docstring's
    first line (`shortDescription()`), and SWE-bench's Django parser keeps that line as the test id.
    """
    out: dict[str, list[DefInfo]] = {}
    for section, lines in hunks:
        text = [ln[1:] if ln else "" for ln in lines if ln[:1] in (" ", "+", "")]
        for d in scan_test_defs(text, section):
            doc = docstring_first_line(text, d.index)
            if doc:
                out.setdefault(doc, []).append(d)
    return out


def docstring_first_line(lines: list[str], def_index: int) -> str | None:
    j = def_index
    # skip to the end of the signature (the line ending with ':')
    while j < len(lines) and not _strip_comment(lines[j]).rstrip().endswith(":"):
        j += 1
    j += 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    if j >= len(lines):
        return None
    s = lines[j].strip()
    m = re.match(r"^[rRuU]?('''|\"\"\"|'|\")", s)
    if not m:
        return None
    quote = m.group(1)
    body = s[m.end() :]
    if quote in body:
        body = body[: body.index(quote)]
        return body.strip() or None
    if body.strip():
        return body.strip()
    if j + 1 < len(lines):
        nxt = lines[j + 1].strip()
        if quote in nxt:
            nxt = nxt[: nxt.index(quote)]
        return nxt.strip() or None
    return None
