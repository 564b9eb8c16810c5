"""CTest: node ids are CTest test names (`add_test(NAME ...)`), e.g. `format-test`.

Selection rule (ctest `-R/--tests-regex`): a regex *searched* in each CTest test name; `-E` excludes
(narrows), `-L` selects by label, `-I` by index. So `-R '^format-test$'` (anchored literal names,
alternation allowed) is node level *for CTest names*; any other `-R`, `-L` or `-I` is `pattern`; no
selector is `suite`. A CTest test usually wraps a whole GoogleTest/doctest binary, so it cannot bind
a `Suite.Test` node - for those run the binary with --gtest_filter (googletest runner).
Refused: `-N/--show-only` (runs nothing), `--rerun-failed` (state of an earlier run), `--repeat
until-pass:N` (a later pass hides a failure).

Results: the `Test #N: name ....   Passed|***Failed` summary lines, plus GoogleTest lines when `-V`
shows the binaries' output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "-R": Opt(True, "select"),
    "--tests-regex": Opt(True, "select"),
    "-L": Opt(True, "select"),
    "--label-regex": Opt(True, "select"),
    "-I": Opt(True, "select"),
    "--tests-information": Opt(True, "select"),
    **{
        k: OKV
        for k in (
            "--test-dir",
            "-E",
            "--exclude-regex",
            "-LE",
            "--label-exclude",
            "-j",
            "--parallel",
            "--timeout",
            "-C",
            "--build-config",
            "--output-log",
            "-O",
            "--schedule-random-seed",
            "--resource-spec-file",
            "--test-load",
            "--max-width",
        )
    },
    **{
        k: OK
        for k in (
            "-V",
            "--verbose",
            "-VV",
            "--extra-verbose",
            "--output-on-failure",
            "--stop-on-failure",
            "--schedule-random",
            "-Q",
            "--quiet",
            "--progress",
            "--no-tests=error",
            "--debug",
            "--force-new-ctest-process",
        )
    },
    "-N": reject("lists tests without running them"),
    "--show-only": reject("lists tests without running them"),
    "--rerun-failed": reject("selects tests from an earlier run's failures"),
    "--repeat": reject("can rerun a failing test until it passes", takes=True),
    "--repeat-until-fail": OKV,
    "--no-tests=ignore": reject("reports success when no test ran"),
}
_SUMMARY = re.compile(
    r"Test\s+#\d+:\s+(?P<name>\S+)\s+\.*\s*(?:\*+)?\s*(?P<st>Passed|Failed|Not Run|Timeout|"
    r"Exception|Skipped|\w+)"
)


class CTestRunner(Runner):
    name = "ctest"
    language = "cpp"
    log_parser = "parse_log_googletest"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return bool(cmd.argv) and _ml.basename(cmd.argv[0]) == "ctest"

    def selection(self, cmd: ParsedCommand) -> Selection:
        w = _ml.walk_options(list(cmd.argv[1:]), _OPTS, runner="ctest", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        for v in _ml.values(w, "-L", "--label-regex", "-I", "--tests-information"):
            sel.selectors.append(Selector(v, "pattern", note="labels and index ranges select many tests"))
        regexes = _ml.values(w, "-R", "--tests-regex")
        for r in regexes:
            lits = _ml.anchored_literals(r)
            if lits is None:
                sel.selectors.append(
                    Selector(
                        r, "pattern", note="-R is a regex searched in the CTest test names; anchor it ^...$"
                    )
                )
                continue
            for lit in lits:
                sel.selectors.append(Selector(lit, "node", Node(self.name, lit, text=lit)))
        if not sel.selectors:
            sel.selectors.append(Selector(cmd.render(), "suite", note="no -R: every CTest test"))
        return sel

    def parse_node(self, text: str) -> Node:
        return Node(self.name, text.strip(), text=text.strip())

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        names = _ml.unique(n.name for n in nodes)
        return f"ctest --test-dir build -V -R {_ml.q(_ml.anchored_regex(names))}"

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        argv = list(cmd.argv)
        if not any(a in ("-V", "--verbose", "-VV", "--extra-verbose") for a in argv):
            argv.append("-V")
        return cmd.with_argv(argv)

    def parse_results(self, log: str) -> dict[str, str]:
        results = dict(parser_for("parse_log_googletest")(log))
        for line in log.splitlines():
            m = _SUMMARY.search(line)
            if m:
                st = m.group("st")
                results[m.group("name")] = {
                    "Passed": "PASSED",
                    "Failed": "FAILED",
                    "Skipped": "SKIPPED",
                    "Not Run": "SKIPPED",
                }.get(st, "ERROR")
        return results

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
