"""Ant JUnit (lombok): node ids are JUnit descriptions `name(pkg.Class)`, e.g.
`javac-ValInLambda.java(lombok.transform.TestWithDelombok)`.

Selection rule: an ant command line names *targets*; which tests a `<junit>` target runs is fixed in
the build file, not on the command line. SWE-bench's lombok images add a `test.instance` target that
lists the row's test classes (`<test name="lombok.transform.TestWithDelombok"/>`), so
`ant test.instance` runs whole classes chosen by the environment. Lombok's transform tests are
produced by `DirectoryRunner`, which is not JUnit-Filterable: there is no command-line way to run one
file (its only focus switch is a source constant). So every ant command is `suite` level and
build_command can only return the environment's own target, which selection() reports as such -
the bundle rules reject it, correctly: a passing run would not be evidence about the declared node
alone.

Results: swebench's `parse_log_ant` (`[junit] [PASS|FAIL|ERR] name(Class)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners.base import Runner
from execcritic.runners.maven import class_matches, split_java_id

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task


class AntRunner(Runner):
    name = "ant"
    language = "java"
    log_parser = "parse_log_ant"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_ant"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return bool(cmd.argv) and _ml.basename(cmd.argv[0]) == "ant"

    def selection(self, cmd: ParsedCommand) -> Selection:
        targets = [a for a in cmd.argv[1:] if not a.startswith("-")] or ["<default>"]
        return Selection(
            selectors=[
                Selector(
                    t,
                    "suite",
                    note="an ant target runs the test classes listed in the "
                    "build file; ant has no command-line test selector",
                )
                for t in targets
            ]
        )

    def parse_node(self, text: str) -> Node:
        cls, meth = split_java_id(text)
        return Node(self.name, meth or text.strip(), path=cls if meth else None, text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        return selected.name == declared.name and class_matches(selected.path or "", declared.path or "")

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """No exact form exists (see the module docstring): the official target, which selection()
        classifies as suite level."""
        for off in _ml.official_commands(task):
            if self.recognizes(off):
                return " ".join(_ml.q(a) for a in off.argv)
        return "ant test"

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        key = f"{node.name}({node.path})" if node.path else node.name
        if key in results:
            return results[key]
        hits = [
            v
            for k, v in results.items()
            if k.split("(", 1)[0] == node.name
            and (not node.path or class_matches(k.partition("(")[2].rstrip(")"), node.path))
        ]
        return hits[0] if len(hits) == 1 else None
