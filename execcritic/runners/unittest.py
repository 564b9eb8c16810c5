"""The standard library's runner: `python -m unittest [-v] module.Class.test_x ...`.

Labels are dotted names (`pkg.tests.test_mod.SomeTests.test_x` is the node level; a module or class
label runs all of it) or file paths (`tests/test_mod.py`, a whole module). `discover` runs a suite.
Output is unittest's verbose lines, the same format Django prints, so SWE-bench's Django parser
reads it and the Django runner's line reading attributes every result to its real id (docstring
tests, both id forms of Python < / >= 3.11, subtests: a failing subtest fails its test). As with
Django, ERROR is an exception raised in the test body: behavioral.
No SWE-bench repository uses it as its native runner, so `serves` is always False; agents may still
write unittest commands for repositories whose tests are unittest-compatible.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Outcome, Selection, Selector
from execcritic.bundle.problems import TEST_COMMAND, Problem
from execcritic.runners._python import python_main
from execcritic.runners.base import Runner
from execcritic.runners.django import DjangoRunner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_VALUE = {"-k", "--durations"}
_FLAGS = {
    "-v",
    "--verbose",
    "-q",
    "--quiet",
    "-f",
    "--failfast",
    "-c",
    "--catch",
    "-b",
    "--buffer",
    "--locals",
}


class UnittestRunner(Runner):
    name = "unittest"
    language = "python"
    reporter = "unittest"
    log_parser = "parse_log_django"  # unittest's verbose lines; Django's parser reads them

    def _args(self, cmd: ParsedCommand) -> list[str] | None:
        argv = list(cmd.argv)
        main = python_main(argv)
        if main and main[0] == "module" and argv[main[1]] == "unittest":
            return argv[main[1] + 1 :]
        return None

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return self._args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        args = self._args(cmd)
        sel = Selection()
        if args is None:
            sel.problems.append(Problem("runner.unrecognized", TEST_COMMAND, "not `python -m unittest`"))
            return sel
        if args[:1] == ["discover"]:
            sel.selectors.append(Selector("discover", "suite", note="discovery runs every test it finds"))
            return sel
        labels: list[str] = []
        patterns: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a.startswith("-"):
                name, eq, value = a.partition("=")
                if name in _VALUE and not eq:
                    value = args[i + 1] if i + 1 < len(args) else ""
                    i += 2
                else:
                    i += 1
                if name == "-k":
                    patterns.append(value)
                elif name not in _FLAGS and name not in _VALUE:
                    sel.problems.append(
                        Problem(
                            "runner.unknown_option",
                            TEST_COMMAND,
                            f"unittest option {name!r} is not one this harness knows",
                        )
                    )
                continue
            labels.append(a)
            i += 1
        for label in labels:
            sel.selectors.append(self._classify(label))
        if not labels:
            sel.selectors.append(
                Selector("(no labels)", "suite", note="`python -m unittest` alone discovers every test")
            )
        if patterns and not all(s.level == "node" for s in sel.selectors):
            sel.selectors.extend(Selector(f"-k {p}", "pattern") for p in patterns)
        return sel

    def _classify(self, label: str) -> Selector:
        if "/" in label or label.endswith(".py"):
            return Selector(label, "file" if label.endswith(".py") else "directory")
        parts = label.split(".")
        if any(not re.match(r"^\w+$", p) for p in parts):
            return Selector(label, "unknown")
        if len(parts) >= 2 and parts[-1].startswith("test") and parts[-2][:1].isupper():
            path = ".".join(parts[:-2]) or None
            return Selector(label, "node", node=Node(self.name, parts[-1], path, (parts[-2],), None, label))
        if parts[-1][:1].isupper():
            return Selector(label, "class")
        return Selector(label, "file")

    def parse_node(self, text: str) -> Node:
        n = DjangoRunner().parse_node(text)
        return Node(self.name, n.name, n.path, n.scope, n.param, n.text)

    def binds(self, selected: Node, declared: Node) -> bool:
        return DjangoRunner.binds(self, selected, declared)  # type: ignore[arg-type]

    def build_command(self, nodes: Sequence[Node], *, task: "Task | None" = None) -> str:
        labels = []
        for node in nodes:
            if not node.scope:
                raise ValueError(f"unittest node {node} needs its class (module.Class.test_x)")
            lab = ".".join([p for p in (node.path,) if p] + [*node.scope, node.name])
            if lab not in labels:
                labels.append(lab)
        return " ".join(["python", "-m", "unittest", "-v", *(shlex.quote(x) for x in labels)])

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        args = self._args(cmd)
        if args is None or "-v" in args or "--verbose" in args:
            return cmd
        argv = list(cmd.argv)
        argv.insert(len(argv) - len(args), "-v")
        return cmd.with_argv(argv)

    def parse_results(self, log: str, parser: str | None = None) -> dict[str, str]:
        return DjangoRunner.parse_results(self, log, parser)  # type: ignore[arg-type]

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return DjangoRunner.result_for(self, node, results)  # type: ignore[arg-type]

    def outcome(self, status: str) -> Outcome:
        if status == "ERROR":
            return Outcome.FAILED
        return super().outcome(status)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        return DjangoRunner.load_errors(self, results, log)  # type: ignore[arg-type]
