"""automake test harness via `make check` (jq): node ids are test scripts, `tests/shtest`,
`tests/jqtest`, as the harness prints `PASS: tests/shtest`.

Selection rule (automake parallel test harness): `make check TESTS='a b'` runs exactly the named
test scripts - a script is the smallest unit the harness knows, so it is the node. `make check`
without TESTS runs every script (`suite`). TESTS must be a *make argument*: as an environment
variable it loses to the Makefile's own TESTS. Other variable assignments are refused - on the
command line they override the Makefile (`LOG_COMPILER=true` would make every script "pass"), except
an empty `SUBDIRS=` (no recursion into subdirectories, whose own tests are not the named ones) - as
are environment assignments (make imports the environment), targets other than check/test, and
`-n`/`-q`/`-t`/`-i` (which skip running or ignore failures).

Results: swebench's `parse_log_jq` (`PASS|FAIL: name`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_HARMLESS_VARS = {"V", "VERBOSE", "AM_COLOR_TESTS"}
_BAD_FLAGS = {
    "-n": "only prints the commands",
    "--dry-run": "only prints the commands",
    "-q": "runs nothing",
    "--question": "runs nothing",
    "-t": "touches targets instead of running them",
    "--touch": "touches targets instead of running them",
    "-i": "ignores failures",
    "--ignore-errors": "ignores failures",
    "-e": "lets the environment override the Makefile",
    "--environment-overrides": "lets the environment override the Makefile",
    "-f": "uses another makefile",
    "--file": "uses another makefile",
    "--makefile": "uses another makefile",
}


class AutomakeRunner(Runner):
    name = "automake"
    language = "c"
    log_parser = "parse_log_jq"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_jq"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return (
            bool(cmd.argv)
            and _ml.basename(cmd.argv[0]) in ("make", "gmake")
            and any(a in ("check", "test") for a in cmd.argv[1:])
        )

    def selection(self, cmd: ParsedCommand) -> Selection:
        sel = Selection()
        for name, _v in cmd.env:
            if name not in ("TERM", "LANG", "LC_ALL"):
                sel.problems.append(
                    _ml.problem(
                        "runner.env",
                        f"make: environment variable {name} is imported by "
                        "make and can override the test harness; remove it",
                    )
                )
        tests: list[str] | None = None
        argv = list(cmd.argv[1:])
        i = 0
        while i < len(argv):
            a = argv[i]
            m = _ASSIGN.match(a)
            if m:
                if m.group(1) == "TESTS":
                    tests = shlex.split(m.group(2))
                elif m.group(1) == "SUBDIRS" and not m.group(2).strip():
                    pass                # no recursion into subdirectories: only narrows (see build_command)
                elif m.group(1) not in _HARMLESS_VARS:
                    sel.problems.append(
                        _ml.problem(
                            "runner.option",
                            f"make: `{m.group(1)}=` overrides a Makefile "
                            "variable of the test harness; only TESTS= is "
                            "allowed",
                        )
                    )
            elif a in _BAD_FLAGS or a.split("=")[0] in _BAD_FLAGS:
                sel.problems.append(
                    _ml.problem("runner.option", f"make: `{a}` {_BAD_FLAGS[a.split('=')[0]]}")
                )
                if a in ("-f", "--file", "--makefile"):
                    i += 1
            elif a in ("-j", "-C", "-l") and i + 1 < len(argv):
                i += 1
            elif a.startswith(("-j", "-C", "-l", "--jobs", "--directory")) or a in (
                "-k",
                "--keep-going",
                "-s",
                "--silent",
                "-w",
            ):
                pass
            elif a.startswith("-"):
                sel.problems.append(_ml.problem("runner.unknown_option", f"make: unknown option {a!r}"))
            elif a not in ("check", "test"):
                sel.problems.append(_ml.problem("runner.goal", f"make: target `{a}` is not the test target"))
            i += 1
        if tests is None:
            sel.selectors.append(Selector(cmd.render(), "suite", note="no TESTS=: every test script"))
            return sel
        if not tests:
            sel.selectors.append(Selector("TESTS=", "suite", note="an empty TESTS= list"))
        for t in tests:
            sel.selectors.append(Selector(t, "node", Node(self.name, t, path=t, text=t)))
        return sel

    def parse_node(self, text: str) -> Node:
        return Node(self.name, text.strip(), path=text.strip(), text=text.strip())

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        tests = " ".join(_ml.unique(n.name for n in nodes))
        # `SUBDIRS=`: a command-line TESTS reaches every sub-make (MAKEFLAGS), and a subdirectory's `make check`
        # then fails on test names it has no rule for (jq's modules/oniguruma: exit 2, no test run - measured)
        return f"make check TESTS={_ml.q(tests)} SUBDIRS="

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
