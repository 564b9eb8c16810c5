"""Django's own test runner: `./tests/runtests.py [options] label...`.

A label is dotted: `app` or `app.tests` (module), `app.tests.SomeTests` (class) or
`app.tests.SomeTests.test_x` (method, the only node-level label). A label with `/` is a directory
or file path. Django's results are unittest's verbose lines, `test_x (app.tests.SomeTests) ... ok`
(`test_x (app.tests.SomeTests.test_x)` on Python >= 3.11); a test with a docstring prints the
docstring's first line in place of its id, which is what SWE-bench's parser keys it by, so this
runner's parser also records the id printed on the line before. Two tests can share a docstring's
first line (SWE-bench's map then keeps one status for both), so every result is attributed to its real
id from the lines themselves: the id line before a docstring line, the `FAIL:`/`ERROR:` section
headers, and, when a test ran subtests, the subtest lines (`test_x (app.tests.C.test_x) (ext='.gz')
... FAIL` on Python >= 3.11; only the `FAIL: test_x (app.tests.C) (ext='.gz')` header before). A
failing subtest is a behavioral failure of its test.

Outcomes: unittest reports an exception raised in the test body as ERROR. That is a behavioral
failure of the exercised code (Django #16901's RecursionError), so ERROR maps to FAILED here; failed
imports and class/module fixtures (`_FailedTest`, `setUpClass (...)`) are load errors.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Outcome, Selection, Selector
from execcritic.bundle.problems import TEST_COMMAND, Problem
from execcritic.runners._python import is_python, python_main
from execcritic.runners.base import Runner
from execcritic.runners.pytest import official_test_line
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_ID = re.compile(r"^(?P<name>\w+) \((?P<where>[\w.]+)\)$")
# a subtest's description: its test's id, then `[msg]` and/or `(params)` (`(<subtest>)` when neither)
_SUBTEST = re.compile(r"^(?P<id>\w+ \([\w.]+\)) (?P<sub>\[.*\](?: \(.*\))?|\(.*\))$")
_HEADER = re.compile(r"^(?P<kind>FAIL|ERROR|UNEXPECTED SUCCESS): (?P<id>.+)$")
_HEADER_STATUS = {"FAIL": "FAILED", "ERROR": "ERROR", "UNEXPECTED SUCCESS": "FAILED"}
_RANK = {"PASSED": 0, "XFAIL": 0, "SKIPPED": 1, "FAILED": 2, "ERROR": 2}
_VALUE_OPTIONS = {
    "--settings",
    "--parallel",
    "--verbosity",
    "-v",
    "--tag",
    "--exclude-tag",
    "-k",
    "--start-at",
    "--start-after",
    "--selenium",
    "--selenium-hub",
    "--external-host",
    "--shuffle",
    "--durations",
    "--bisect",
    "--pair",
}
_OPTIONAL_VALUE = {"--parallel", "--shuffle"}
_NARROW = {"-k", "--tag", "--exclude-tag", "--start-at", "--start-after"}
_FLAGS_OK = {
    "--noinput",
    "--no-input",
    "--failfast",
    "--keepdb",
    "--reverse",
    "--debug-sql",
    "-d",
    "--timing",
    "-b",
    "--buffer",
    "--no-faulthandler",
    "--headless",
    "--force-color",
    "--no-color",
    "--debug-mode",
}
_REJECT = {
    "--bisect": "`--bisect` searches for an interacting test across the whole suite; select the nodes",
    "--pair": "`--pair` runs a label against the whole suite; select the nodes",
    "--pdb": "an interactive debugger waits for input; remove it",
    "-h": "prints help and runs nothing",
    "--help": "prints help and runs nothing",
    "--version": "prints the version and runs nothing",
}
_SETTINGS = re.compile(r"^[A-Za-z_][\w.]*$")


def _is_class(part: str) -> bool:
    return part[:1].isupper()


def module_label(path: str) -> str:
    """`tests/queries/tests.py` -> `queries.tests`; `tests/forms_tests/tests/__init__.py` ->
    `forms_tests.tests`."""
    p = path.strip("/").removeprefix("./")
    if p.startswith("tests/"):
        p = p[len("tests/") :]
    if p.endswith(".py"):
        p = p[:-3]
    if p.endswith("/__init__"):
        p = p[: -len("/__init__")]
    return p.replace("/", ".")


class DjangoRunner(Runner):
    name = "django"
    language = "python"
    log_parser = "parse_log_django"
    reporter = "django"

    def serves(self, task: "Task") -> bool:
        return task.repo == "django/django" or task.log_parser == "parse_log_django"

    def _runtests_args(self, cmd: ParsedCommand) -> list[str] | None:
        argv = list(cmd.argv)
        if not argv:
            return None
        i = 0
        if is_python(argv[0]):
            main = python_main(argv)
            if main is None or main[0] != "script":
                return None
            i = main[1]
        prog = argv[i]
        if (
            prog.removeprefix("./") in ("tests/runtests.py", "runtests.py")
            or prog == "/testbed/tests/runtests.py"
        ):
            where = self._script_path(prog, cmd)
            if where == "tests/runtests.py":
                return argv[i + 1 :]
        return None

    @staticmethod
    def _script_path(prog: str, cmd: ParsedCommand) -> str:
        p = prog.removeprefix("/testbed/").removeprefix("./")
        cwd = cmd.cwd_in_repo()
        return f"{cwd}/{p}".strip("/") if cwd else p

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return self._runtests_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        args = self._runtests_args(cmd)
        sel = Selection()
        if args is None:
            sel.problems.append(
                Problem("runner.unrecognized", TEST_COMMAND, "not Django's tests/runtests.py")
            )
            return sel
        labels: list[str] = []
        narrowing: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if not a.startswith("-"):
                labels.append(a)
                i += 1
                continue
            name, eq, value = a.partition("=")
            if name in _REJECT:
                sel.problems.append(
                    Problem("runner.forbidden_option", TEST_COMMAND, f"runtests.py {name}: {_REJECT[name]}")
                )
            if name in _VALUE_OPTIONS and not eq:
                nxt = args[i + 1] if i + 1 < len(args) else None
                if name in _OPTIONAL_VALUE and (nxt is None or not re.match(r"^(\d+|auto)$", nxt)):
                    value = ""
                    i += 1
                else:
                    value = nxt or ""
                    i += 2
            else:
                i += 1
            if name == "--settings" and value and not _SETTINGS.match(value):
                sel.problems.append(
                    Problem(
                        "runner.bad_option",
                        TEST_COMMAND,
                        f"--settings {value!r} must be a dotted settings module",
                    )
                )
            if name in _NARROW:
                narrowing.append(f"{name} {value}".strip())
            elif name not in _VALUE_OPTIONS and name not in _FLAGS_OK and name not in _REJECT:
                sel.problems.append(
                    Problem(
                        "runner.unknown_option",
                        TEST_COMMAND,
                        f"runtests.py option {name!r} is not one this harness knows; remove it",
                    )
                )
        for label in labels:
            sel.selectors.append(self._classify(label))
        if not labels:
            sel.selectors.append(
                Selector("(no labels)", "suite", note="runtests.py without labels runs the whole suite")
            )
        if narrowing and not all(s.level == "node" for s in sel.selectors):
            for n in narrowing:
                if n.startswith("-k"):
                    sel.selectors.append(
                        Selector(
                            n,
                            "pattern",
                            note="a -k pattern next to a module or class label selects every match",
                        )
                    )
        return sel

    def _classify(self, label: str) -> Selector:
        if "/" in label or label.endswith(".py"):
            return Selector(
                label,
                "directory" if not label.endswith(".py") else "file",
                note="a path label runs every test under it",
            )
        parts = label.split(".")
        if any(not re.match(r"^\w+$", p) for p in parts):
            return Selector(label, "unknown", note="not a dotted label")
        if len(parts) >= 3 and parts[-1].startswith("test") and _is_class(parts[-2]):
            node = Node(self.name, parts[-1], ".".join(parts[:-2]), (parts[-2],), None, label)
            return Selector(label, "node", node=node)
        if _is_class(parts[-1]):
            return Selector(label, "class")
        return Selector(
            label,
            "file" if len(parts) > 1 else "directory",
            note="a module label runs every test in it"
            if len(parts) > 1
            else "an app label runs every test in the app",
        )

    # ---- nodes -----------------------------------------------------------------------------------
    def parse_node(self, text: str) -> Node:
        """`test_x (app.tests.C)`, `test_x (app.tests.C.test_x)`, `app.tests.C.test_x`, `C.test_x`,
        `test_x`. Anything else (a docstring-style SWE-bench name) becomes a name-only node that no
        label can bind; `execcritic.harness.oracle` resolves those from the source."""
        s = text.strip()
        m = _ID.match(s)
        if m:
            name, where = m.group("name"), m.group("where").split(".")
            if where[-1] == name and len(where) >= 2:
                where = where[:-1]
            if len(where) >= 2 and _is_class(where[-1]):
                return Node(self.name, name, ".".join(where[:-1]), (where[-1],), None, s)
            return Node(self.name, name, ".".join(where), (), None, s)
        if re.match(r"^[\w.]+$", s):
            parts = s.split(".")
            name = parts[-1]
            rest = parts[:-1]
            scope: tuple[str, ...] = ()
            if rest and _is_class(rest[-1]):
                scope = (rest.pop(),)
            return Node(self.name, name, ".".join(rest) or None, scope, None, s)
        if "::" in s:  # pytest-style written for a Django test: tests/app/tests.py::C::test_x
            path, _, tail = s.partition("::")
            parts = tail.split("::")
            return Node(self.name, parts[-1], module_label(path), tuple(parts[:-1]), None, s)
        return Node(self.name, s, None, (), None, s)

    def binds(self, selected: Node, declared: Node) -> bool:
        if selected.name != declared.name:
            return False
        if declared.scope and tuple(declared.scope) != tuple(selected.scope):
            return False
        if declared.path and selected.path:
            a, b = selected.path, declared.path
            if not (a == b or a.endswith("." + b) or b.endswith("." + a)):
                return False
        return True

    def label(self, node: Node) -> str:
        if not node.path or not node.scope:
            raise ValueError(f"Django node {node} needs its module and class (app.tests.Class.test_x)")
        return ".".join([node.path, *node.scope, node.name])

    def node_for_file(self, path: str, scope: tuple[str, ...], name: str) -> Node:
        return Node(
            self.name,
            name,
            module_label(path),
            tuple(scope),
            None,
            ".".join([module_label(path), *scope, name]),
        )

    # ---- commands --------------------------------------------------------------------------------
    def command_prefix(self, task: "Task | None") -> list[str]:
        line = official_test_line(task) if task else None
        if line:
            tokens = shlex.split(line)
            prefix = []
            for i, tok in enumerate(tokens):
                if (
                    i > 0
                    and not tok.startswith("-")
                    and not (prefix and prefix[-1] in _VALUE_OPTIONS and "=" not in prefix[-1])
                ):
                    break
                prefix.append(tok)
            if prefix and self.recognizes(ParsedCommand(line, argv=tuple(prefix))):
                return prefix
        return ["./tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1"]

    def build_command(self, nodes: Sequence[Node], *, task: "Task | None" = None) -> str:
        labels: list[str] = []
        for node in nodes:
            lab = self.label(node)
            if lab not in labels:
                labels.append(lab)
        return " ".join([*(shlex.quote(t) for t in self.command_prefix(task)), *labels])

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """Force `--verbosity 2` (one result line per test); selection is unchanged."""
        args = self._runtests_args(cmd)
        if args is None:
            return cmd
        argv = list(cmd.argv)
        start = len(argv) - len(args)
        out = argv[:start]
        i = start
        while i < len(argv):
            a = argv[i]
            if a in ("--verbosity", "-v") and i + 1 < len(argv):
                i += 2
                continue
            if a.startswith("--verbosity=") or re.match(r"^-v\d$", a):
                i += 1
                continue
            out.append(a)
            i += 1
        out[start:start] = ["--verbosity", "2"]
        return cmd.with_argv(out)

    def in_process_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """`--parallel 1`: Django's parallel runner forks workers, and the reporter instruments one process
        (SWE-bench's own Django command passes `--parallel 1` too)."""
        args = self._runtests_args(cmd)
        if args is None:
            return cmd
        argv = list(cmd.argv)
        start = len(argv) - len(args)
        out, i = argv[:start], start
        while i < len(argv):
            a = argv[i]
            if a == "--parallel":
                i += 2 if i + 1 < len(argv) and re.match(r"^(\d+|auto)$", argv[i + 1]) else 1
                continue
            if a.startswith("--parallel="):
                i += 1
                continue
            out.append(a)
            i += 1
        out[start:start] = ["--parallel", "1"]
        return cmd.with_argv(out)

    # ---- results ---------------------------------------------------------------------------------
    def parse_results(self, log: str, parser: str | None = None) -> dict[str, str]:
        """swebench's Django parser, plus every result under the real id of its test (and of its
        subtests), read from the lines (`verbose_results`). Where the two disagree on a real id, the
        line-level reading wins: swebench's map keys a docstring test by its docstring line, so two
        tests sharing that line share one status there."""

        results = dict(parser_for(parser or self.log_parser)(log))
        results.update(verbose_results(log))
        return results

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        """Only full ids count (`test_x (app.tests.C)` / `(...C.test_x)`): the parser also records the
        bare name of every `ERROR: test_x (...)` header, and `_FailedTest` entries are load errors.
        A node's own status, unless one of its subtests failed or errored: then the node FAILED
        (ERROR if every failing subtest errored). Several entries binding the node: the worst."""
        own: str | None = None
        failing: list[str] = []
        for key, status in results.items():
            if "_FailedTest" in key:
                continue
            m = _SUBTEST.match(key)
            tid = m.group("id") if m else key
            if not _ID.match(tid):
                continue
            if not (tid == node.text or self.binds(self.parse_node(tid), node)):
                continue
            if m:
                if status in ("FAILED", "ERROR"):
                    failing.append(status)
            else:
                own = _worse(own, status)
        if failing and (own is None or _RANK.get(own, 2) < 2):
            return "FAILED" if "FAILED" in failing else "ERROR"
        return own

    def outcome(self, status: str) -> Outcome:
        if status == "ERROR":
            return Outcome.FAILED  # an exception raised in the test body is behavioral
        return super().outcome(status)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        out = []
        for key, status in results.items():
            if "_FailedTest" in key or re.match(
                r"^(setUpClass|setUpModule|tearDownClass|tearDownModule) \(", key
            ):
                out.append(f"{key}: {status}")
        for line in log.splitlines():
            m = re.match(r"^\s*ImportError: Failed to import test module: (\S+)", line)
            if m:
                out.append(f"failed to import test module {m.group(1)}")
            m = re.match(r"^\s*(ModuleNotFoundError|ImportError|AttributeError): (.*)$", line)
            if m and ("_FailedTest" in log or "Failed to import" in log):
                out.append(f"{m.group(1)}: {m.group(2)[:200]}")
        seen: set[str] = set()
        return [o for o in out if not (o in seen or seen.add(o))]  # type: ignore[func-returns-value]


def _status_word(text: str) -> str | None:
    """unittest's verbose status (`ok`, `FAIL`, `ERROR`, `skipped 'why'`, `expected failure`,
    `unexpected success`) as a swebench status, or None for any other text."""
    t = text.strip()
    if t == "ok":
        return "PASSED"
    if t == "FAIL":
        return "FAILED"
    if t == "ERROR":
        return "ERROR"
    if t == "skipped" or t.startswith(("skipped '", 'skipped "')):
        return "SKIPPED"
    if t == "expected failure":
        return "XFAIL"
    if t == "unexpected success":
        return "FAILED"
    return None


def _is_test_id(text: str) -> bool:
    return bool(_ID.match(text) or _SUBTEST.match(text))


def _worse(a: str | None, b: str) -> str:
    if a is None:
        return b
    return b if _RANK.get(b, 2) > _RANK.get(a, 2) else a


def verbose_results(log: str) -> dict[str, str]:
    """{real test id: status} from unittest's verbosity-2 lines, as Django's runner and
    `python -m unittest -v` print them:

    - `test_x (app.tests.C) ... ok`; with a docstring the id is printed alone and the docstring's first
      line carries the status on the next line (`test_x (app.tests.C)` / `Doc line. ... FAIL`);
    - a status may come on a later line when the test prints (`test_x (...) ... <output>` ... `ok`);
    - Python < 3.11 prints nothing for a test whose subtests failed, so the next test's id follows on
      the same line (`Doc. ... test_y (app.tests.C) ... ok`); its failures are only in the headers;
    - Python >= 3.11 prints each failing subtest (`  test_x (app.tests.C.test_x) (ext='.gz')` then
      `Doc. ... FAIL`);
    - `FAIL: <id>` / `ERROR: <id>` section headers name the real id of every failure (subtests
      included).
    Subtest results are keyed by the subtest's description; `result_for` folds them into their test.
    """
    out: dict[str, str] = {}

    def put(tid: str | None, status: str | None) -> None:
        if tid and status:
            out[tid] = _worse(out.get(tid), status)

    awaiting: str | None = None  # an id printed alone: the docstring line after it is its description
    pending: str | None = None  # a described test whose status is not printed yet
    for raw in log.split("\n"):
        line = raw.strip()
        header = _HEADER.match(line)
        if header:
            tid = header.group("id").strip()
            if _is_test_id(tid):
                put(tid, _HEADER_STATUS[header.group("kind")])
            awaiting = pending = None
            continue
        if line.endswith(" ...") or line == "...":
            line += " "
        if " ... " not in line:
            if _is_test_id(line):
                awaiting = line
                continue
            status = _status_word(line)
            if status and pending:
                put(pending, status)
                pending = None
            awaiting = None
            continue
        *descs, tail = line.split(" ... ")
        ids: list[str | None] = []
        for k, desc in enumerate(descs):
            if k == 0 and awaiting:
                ids.append(awaiting)  # `desc` is the docstring line of the id printed before
            else:
                ids.append(desc if _is_test_id(desc) else None)
        awaiting = None
        status = _status_word(tail)
        if status:
            put(ids[-1], status)
            pending = None
        elif _is_test_id(tail.strip()):
            awaiting, pending = tail.strip(), None  # the next test started; its docstring follows
        else:
            pending = ids[-1]  # no status yet (output, subtests, or a later `ok` line)
    return out
