"""Resolving a dataset's test names to exact runner nodes (Django docstring names, mixins, class
scopes the dataset's names leave out), from the test patch and, when given, the Base test modules.
An unresolvable name is an OracleError, never a guessed label."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from execcritic.bundle.added import AddedTest, base_scope
from execcritic.bundle.diff import BaseReader, ParsedPatch, def_base_line, parse_patch
from execcritic.bundle.languages import python as py
from execcritic.bundle.nodes import Node
from execcritic.errors import InputError
from execcritic.runners.base import Runner
from execcritic.runners.django import module_label
from execcritic.runners.pytest import official_test_line

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task


class OracleError(InputError):
    """The official bundle of this task cannot be built exactly (says which node and why)."""

    def __init__(self, message: str, *, instance: str | None = None, code: str = "oracle.unresolved_node"):
        self.code = code
        super().__init__(message, instance=instance, field="FAIL_TO_PASS")


def official_test_files(task: "Task") -> list[str]:
    """The files SWE-bench's eval script runs: the `diff --git` paths of the test patch."""
    parsed = parse_patch(task.test_patch)
    return [fd.new_path for fd in parsed.files if fd.new_path]



class Resolver:
    """Turns dataset test names and patch-added tests into runner nodes complete enough to build
    an exact command. Class scopes the hunk does not show are looked up, in order, in the dataset's
    own test ids (FAIL_TO_PASS + PASS_TO_PASS name most tests with their class), through sibling
    methods of the same block, the hunk header, and the Base file when a reader is given."""

    def __init__(
        self, task: "Task", runner: Runner, parsed: ParsedPatch, read_base: BaseReader | None
    ):
        self.task, self.runner, self.parsed, self.read_base = task, runner, parsed, read_base
        self._docstrings: dict[str, list[tuple[str, py.DefInfo]]] | None = None
        self._classes: dict[str, dict[str, set[tuple[str, ...]]]] = {}
        self.inferred: list[str] = []
        self._indent: int | None = None
        self._class_tables: dict[str, dict[str, _ClassInfo]] | None = None

    # -- class lookup from the dataset's ids
    def _file_key(self, path: str) -> str:
        if self.runner.name == "django":

            return module_label(path)
        return path

    def dataset_scopes(self, path: str) -> dict[str, set[tuple[str, ...]]]:
        """{test name: {class scopes}} of the dataset's ids that live in `path`."""
        key = self._file_key(path)
        if key in self._classes:
            return self._classes[key]
        out: dict[str, set[tuple[str, ...]]] = {}
        for text in (*self.task.fail_to_pass, *self.task.pass_to_pass):
            node = self.runner.parse_node(text)
            if not node.name or not node.path:
                continue
            same = (
                node.path == key
                if self.runner.name == "django"
                else (node.path == key or node.path.endswith("/" + key) or key.endswith("/" + node.path))
            )
            if same:
                out.setdefault(node.name, set()).add(tuple(node.scope))
        self._classes[key] = out
        return out

    def scope_of(
        self,
        path: str,
        name: str,
        scope: tuple[str, ...],
        certain: bool,
        hints: Iterable[str],
        section: str,
        base_line: int | None = None,
        indent: int | None = None,
        occurrence: int = 0,
    ) -> tuple[str, ...]:
        """The enclosing classes of a test the hunk shows without them. Authoritative sources first:
        the dataset's own id for the test, then the Base source; then heuristics, recorded in
        `inferred` - sibling methods' classes in the dataset ids (a sibling name may also exist in
        another class the dataset does not list), then the hunk header."""
        if certain:
            return tuple(scope)
        hints = list(hints)
        known = self.dataset_scopes(path)
        if len(known.get(name, ())) == 1:
            return next(iter(known[name]))
        self._indent = indent
        base_scope = self._base_scope(path, name, hints, base_line, occurrence)
        if base_scope is not None:
            return base_scope
        sib = {sc for h in hints for sc in known.get(h, ()) if sc}
        if len(sib) == 1:
            inner = next(iter(sib))
            self.inferred.append(f"{path}::{name} (class from sibling tests in the dataset ids)")
            return inner + tuple(scope) if scope else inner
        m = re.match(r"^class\s+(\w+)", section or "")
        classes = {sc[-1] for scs in known.values() for sc in scs if sc}
        if m and (m.group(1) in classes or (not classes and "Test" in m.group(1))):
            self.inferred.append(f"{path}::{name} (class from the hunk header)")
            return (m.group(1), *scope)
        raise OracleError(
            f"{path}: cannot tell which class the added test {name!r} belongs to (the hunk does "
            "not show it and the dataset names no sibling test)",
            instance=self.task.instance_id,
            code="oracle.unresolved_scope",
        )

    def _base_scope(
        self, path: str, name: str, hints: list[str], base_line: int | None = None, occurrence: int = 0
    ) -> tuple[str, ...] | None:
        """From the Base file: the class enclosing the insertion point (the hunk's line number says
        where - only for a real Base, whose lines the patch refers to), else the test's own class
        (the `occurrence`-th definition of that name, in file order, when a release stand-in already
        contains the added tests), else the one class all its siblings share."""
        if self.read_base is None:
            return None
        enclosing = base_scope(AddedTest(path, name, base_line=base_line, indent=self._indent), self.read_base,
                               self.task.language)       # Python classes, JS describe blocks
        if enclosing is not None:
            return enclosing
        text = self.read_base(path)
        if not text:
            return None
        lines = text.splitlines()
        defs = [d for d in py.scan_test_defs(lines) if d.certain]
        own_list = [d.scope for d in defs if d.name == name]
        own = set(own_list)
        if len(own) == 1:
            return own.pop()
        if own:
            return own_list[occurrence] if occurrence < len(own_list) else None
        sib = {d.scope for d in defs if d.name in hints}
        if len(sib) == 1 and all(len({d.scope for d in defs if d.name == h}) <= 1 for h in hints):
            return sib.pop()
        return None

    # -- added tests
    def added_node(self, added: AddedTest) -> Node:
        if self.runner.name == "sympy":
            return Node(self.runner.name, added.name, added.path, (), None, added.name)
        scope = self.scope_of(
            added.path,
            added.name,
            added.scope,
            added.scope_certain,
            added.hints,
            added.section,
            added.base_line,
            added.indent,
            added.occurrence,
        )
        to_node = getattr(self.runner, "node_for_file", None)
        if to_node is not None:
            node = to_node(added.path, scope, added.name)
            text = f"{added.name} ({node.path}.{'.'.join(node.scope)})" if node.scope else node.text
            return Node(node.runner, node.name, node.path, node.scope, node.param, text)
        return Node(
            self.runner.name, added.name, added.path, scope, None, "::".join((added.path, *scope, added.name))
        )

    # -- FAIL_TO_PASS names
    def resolve(self, text: str) -> list[tuple[Node, str]]:
        node = self.runner.parse_node(text)
        if self.runner.name == "django" and not node.scope:
            return self._django_docstring(text)
        if self.runner.name == "sympy" and not node.path:
            paths = self._sympy_files(node.name)
            if len(paths) == 1:
                return [(Node(node.runner, node.name, paths[0], (), None, text), text)]
            return [
                (Node(node.runner, node.name, p, (), None, f"{p}::{node.name}"), f"{p}::{node.name}")
                for p in paths
            ]
        return [(node, text)]

    def _django_docstring(self, text: str) -> list[tuple[Node, str]]:
        """All tests whose docstring's first line is `text`. Two tests with the same first line print
        the same name, so SWE-bench's name denotes both: both are declared and selected."""
        hits = self._docstring_index().get(text.strip(), [])
        where = "the test patch" + (" and the Base test modules" if self.read_base else "")
        if not hits:
            raise OracleError(
                f"FAIL_TO_PASS name {text!r} is a docstring (SWE-bench keys Django tests with "
                f"a docstring by its first line) and no test in {where} has it; the exact "
                "label needs the Base source",
                instance=self.task.instance_id,
            )
        labels = []
        for path, d in hits:
            scope = self.scope_of(
                path,
                d.name,
                d.scope,
                d.certain,
                d.siblings,
                d.section,
                getattr(d, "base_line", None),
                d.indent,
            )
            for cpath, cscope in self._concrete(path, scope, d.name):
                if (cpath, cscope, d.name) not in labels:
                    labels.append((cpath, cscope, d.name))
        out = []
        for path, scope, name in labels:
            node = self.runner.node_for_file(path, scope, name)  # type: ignore[attr-defined]
            resolved = f"{name} ({node.path}.{'.'.join(scope)})"
            out.append((Node(node.runner, name, node.path, node.scope, None, resolved), resolved))
        return out

    # -- tests defined on mixins
    def _concrete(self, path: str, scope: tuple[str, ...], name: str) -> list[tuple[str, tuple[str, ...]]]:
        """[(module file, class scope)] that run the test `name` defined in `scope` of `path`: the scope
        itself, unless its class is provably a mixin (no bases, or only `object` and other mixins
        whose class lines are visible); then every TestCase class of the official modules whose MRO
        finds `name` on that mixin (subclasses that override it run their own test). Needs the real
        Base: a release outline keeps no bases, so without one the scope is kept as it is."""
        if len(scope) != 1 or self.read_base is None or not getattr(self.read_base, "exact_lines", True):
            return [(path, scope)]
        tables = self._class_table()
        target = (path, scope[0])
        if scope[0] not in tables.get(path, {}) or not self._is_mixin(tables, *target):
            return [(path, scope)]
        found = [
            (mod, (cls,))
            for mod, classes in tables.items()
            for cls in classes
            if (mod, cls) != target
            and not self._is_mixin(tables, mod, cls)
            and self._definer(tables, mod, cls, name) == target
        ]
        if not found:
            raise OracleError(
                f"{path}: {scope[0]}.{name} is defined on a mixin (not a TestCase) and no TestCase "
                "class of the modules the official command runs inherits it; a label naming the "
                "mixin does not load",
                instance=self.task.instance_id,
            )
        return found

    def _class_table(self) -> dict[str, dict[str, _ClassInfo]]:
        """{module file: {top-level class: bases, test methods}} of the official modules: the Base
        file, updated by the class and def lines the test patch's post-image shows."""
        if self._class_tables is not None:
            return self._class_tables
        tables: dict[str, dict[str, _ClassInfo]] = {}
        for path in self._django_candidate_modules():
            text = self.read_base(path) if self.read_base else None
            classes = _top_level_classes(text.splitlines()) if text else {}
            for fd in self.parsed.files:
                if fd.new_path == path:
                    for _section, lines in fd.hunk_texts():
                        post = [ln[1:] if ln else "" for ln in lines if ln[:1] in (" ", "+", "")]
                        for cls, info in _top_level_classes(post).items():
                            old = classes.get(cls)
                            classes[cls] = _ClassInfo(
                                info.bases, info.tests | (old.tests if old else frozenset())
                            )
            if classes:
                tables[path] = classes
        self._class_tables = tables
        return tables

    @staticmethod
    def _lookup(tables: dict[str, dict[str, _ClassInfo]], mod: str, base: str) -> tuple[str, str] | None:
        if base in tables.get(mod, {}):
            return (mod, base)
        owners = [m for m, classes in tables.items() if base in classes]
        return (owners[0], base) if len(owners) == 1 else None

    def _is_mixin(self, tables, mod: str, cls: str, seen: frozenset = frozenset()) -> bool:
        """Provably not a TestCase: every base is `object` or a visible mixin. An unknown base
        (`TestCase`, `CollectionTestCase` from another module) may be a TestCase."""
        if (mod, cls) in seen:
            return False
        for base in tables[mod][cls].bases:
            if base == "object":
                continue
            where = self._lookup(tables, mod, base)
            if where is None or not self._is_mixin(tables, *where, seen=seen | {(mod, cls)}):
                return False
        return True

    def _definer(self, tables, mod: str, cls: str, name: str, seen: frozenset = frozenset()):
        """The visible class whose `name` an instance of `cls` runs (depth-first, left to right,
        which is the MRO for the single-mixin hierarchies test modules use), or None."""
        if (mod, cls) in seen:
            return None
        info = tables[mod][cls]
        if name in info.tests:
            return (mod, cls)
        for base in info.bases:
            where = self._lookup(tables, mod, base)
            if where is not None:
                hit = self._definer(tables, *where, name, seen=seen | {(mod, cls)})
                if hit is not None:
                    return hit
        return None

    def _docstring_index(self) -> dict[str, list[tuple[str, py.DefInfo]]]:
        if self._docstrings is not None:
            return self._docstrings
        index: dict[str, list[tuple[str, py.DefInfo]]] = {}
        for fd in self.parsed.files:
            if fd.new_path and fd.new_path.endswith(".py"):
                for doc, defs in py.docstring_tests(fd.new_path, fd.hunk_texts()).items():
                    for d in defs:
                        d.base_line = def_base_line(fd, d.name)  # type: ignore[attr-defined]
                        index.setdefault(doc, []).append((fd.new_path, d))
        if self.read_base is not None:
            for path in self._django_candidate_modules():
                text = self.read_base(path)
                if not text:
                    continue
                lines = [" " + ln for ln in text.splitlines()]
                for doc, defs in py.docstring_tests(path, [("", lines)]).items():
                    for d in defs:
                        if not any(p == path and h.name == d.name for p, h in index.get(doc, [])):
                            index.setdefault(doc, []).append((path, d))
        self._docstrings = index
        return index

    def _django_candidate_modules(self) -> list[str]:
        """Base files of the modules the official command runs (its labels), then the patch files."""

        out: list[str] = []
        line = official_test_line(self.task) or ""
        for tok in shlex.split(line)[1:] if line else []:
            if tok.startswith("-") or "/" in tok or not re.match(r"^[\w.]+$", tok) or tok.isdigit():
                continue
            base = "tests/" + tok.replace(".", "/")
            out += [base + ".py", base + "/__init__.py"]
        out += [p for p in official_test_files(self.task) if p.endswith(".py")]
        for text in (*self.task.fail_to_pass, *self.task.pass_to_pass):  # modules the dataset names
            node = self.runner.parse_node(text)
            if node.path and node.scope:
                out.append("tests/" + node.path.replace(".", "/") + ".py")
        seen: set[str] = set()
        return [p for p in out if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]

    def _sympy_files(self, name: str) -> list[str]:
        """The test files of the official command that define `name`: SymPy's FAIL_TO_PASS ids are bare
        names and bin/test keys results by bare name, so a name defined in several of those files is
        that many nodes - all of them are declared."""
        files = [p for p in official_test_files(self.task) if p.endswith(".py")]
        pattern = re.compile(r"^\s*def\s+" + re.escape(name) + r"\s*\(")
        hits: list[str] = []
        for fd in self.parsed.files:
            if fd.new_path not in files:
                continue
            for section, lines in fd.hunk_texts():
                if pattern.match(section) or any(
                    pattern.match(ln[1:]) for ln in lines if ln[:1] in (" ", "+")
                ):
                    hits.append(fd.new_path)
                    break
        if self.read_base is not None:
            for f in files:
                text = self.read_base(f) or ""
                if f not in hits and any(pattern.match(ln) for ln in text.splitlines()):
                    hits.append(f)
        if hits:
            return hits
        test_files = [f for f in files if posixpath.basename(f).startswith("test_")]
        if len(test_files) == 1:
            return test_files
        raise OracleError(
            f"cannot tell which test file defines FAIL_TO_PASS {name!r} (candidates "
            f"{test_files}); the exact command needs the Base source",
            instance=self.task.instance_id,
        )


@dataclass(frozen=True)
class _ClassInfo:
    bases: tuple[str, ...]  # last dotted component of each positional base
    tests: frozenset[str]  # test methods defined in the class body


def _top_level_classes(lines: list[str]) -> dict[str, _ClassInfo]:
    """Unindented classes of a Python source (or post-image fragment): bases and test methods."""
    out: dict[str, _ClassInfo] = {}
    strings = py._StringTracker()
    for i, line in enumerate(lines):
        if strings.feed(line):
            continue
        m = re.match(r"^class\s+(\w+)\s*([(:])", line)
        if not m:
            continue
        bases: list[str] = []
        if m.group(2) == "(":
            text, depth, j = line[m.end() :], 1, i
            buf = ""
            while True:
                for ch in text.split("#", 1)[0]:
                    depth += ch in "([{"
                    depth -= ch in ")]}"
                    if depth == 0:
                        break
                    buf += ch
                if depth == 0 or j + 1 >= len(lines) or j - i > 20:
                    break
                j += 1
                text = lines[j]
            level, part = 0, ""
            for ch in buf + ",":
                if ch == "," and level == 0:
                    part = part.strip()
                    if part and "=" not in part and not part.startswith("*"):
                        bases.append(re.sub(r"[\[(].*$", "", part).split(".")[-1].strip())
                    part = ""
                    continue
                level += ch in "([{"
                level -= ch in ")]}"
                part += ch
        out[m.group(1)] = _ClassInfo(tuple(bases), frozenset())
    for d in py.scan_test_defs(lines):
        if d.certain and len(d.scope) == 1 and d.scope[0] in out:
            info = out[d.scope[0]]
            out[d.scope[0]] = _ClassInfo(info.bases, info.tests | {d.name})
    return out
