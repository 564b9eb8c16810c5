"""cucumber (jekyll features): node ids `features/x.feature:30  Scenario: Name`, as SWE-bench's
`parse_log_cucumber` keeps them.

Selection rule: `features/x.feature:LINE` runs the scenario (or outline example row) defined at that
line; the F2P id carries exactly that line, so a `file:LINE` argument equal to a declared node's
location is node level. A bare feature file is `file`, a directory `directory`; `-n/--name` is a
substring of scenario names (`pattern`); `--tags` only narrows. Refused: `--dry-run`, `-o/--out`,
`--retry` (a later pass hides a failure), `--i18n`.

Results: swebench's `parse_log_cucumber`.
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
from execcritic.runners.rspec import ruby_tool_args
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "-n": Opt(True, "select"),
    "--name": Opt(True, "select"),
    "-f": Opt(True, "observe"),
    "--format": Opt(True, "observe"),
    **{k: OKV for k in ("-r", "--require", "-t", "--tags", "-p", "--profile", "--order", "-l", "--lines")},
    **{
        k: OK
        for k in (
            "--publish-quiet",
            "--no-color",
            "--color",
            "--strict",
            "--no-strict",
            "-x",
            "--fail-fast",
            "-b",
            "--backtrace",
            "-v",
            "--verbose",
            "-q",
            "--quiet",
            "-S",
            "--strict-undefined",
            "--expand",
            "--no-source",
            "--no-snippets",
            "--wip",
            "--no-multiline",
            "--publish-quiet",
        )
    },
    "-d": reject("is a dry run: steps are not executed"),
    "--dry-run": reject("is a dry run: steps are not executed"),
    "-o": reject("writes the results to a file", takes=True),
    "--out": reject("writes the results to a file", takes=True),
    "--retry": reject("reruns failing scenarios and reports a later pass", takes=True),
    "--i18n": reject("lists keywords and runs nothing", takes=True),
}
_LOC = re.compile(r"^(?P<path>\S+\.feature)(?P<lines>(?::\d+)+)$")
_F2P = re.compile(r"^(?P<path>\S+\.feature):(?P<line>\d+)\s+(?P<name>.*)$")


class CucumberRunner(Runner):
    name = "cucumber"
    language = "ruby"
    log_parser = "parse_log_cucumber"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_jekyll" and "cucumber" in (_ml.official_command_text(task) or "")

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return ruby_tool_args(cmd, ("cucumber",)) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        _launcher, args = ruby_tool_args(cmd, ("cucumber",)) or ("", [])
        w = _ml.walk_options(args, _OPTS, runner="cucumber", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        for n in _ml.values(w, "-n", "--name"):
            sel.selectors.append(Selector(n, "pattern", note="--name is a substring of scenario names"))
        for p in w.positionals:
            m = _LOC.match(p)
            if m:
                for line in m.group("lines").strip(":").split(":"):
                    loc = f"{m.group('path')}:{line}"
                    sel.selectors.append(
                        Selector(
                            loc, "node", Node(self.name, loc, path=m.group("path"), param=line, text=loc)
                        )
                    )
            else:
                sel.selectors.append(
                    Selector(
                        p,
                        "file" if p.endswith(".feature") else "directory",
                        note="a feature file runs all of its scenarios",
                    )
                )
        if not sel.selectors:
            sel.selectors.append(Selector(cmd.render(), "suite", note="no feature given: every feature"))
        return sel

    def parse_node(self, text: str) -> Node:
        t = text.strip()
        m = _F2P.match(t) or re.match(r"^(?P<path>\S+\.feature):(?P<line>\d+)(?P<name>)$", t)
        if m:
            return Node(self.name, t, path=m.group("path"), param=m.group("line"), text=t)
        return Node(self.name, t, text=t)

    def binds(self, selected: Node, declared: Node) -> bool:
        return (
            bool(declared.param)
            and selected.param == declared.param
            and (selected.path or "").removeprefix("./") == (declared.path or "").removeprefix("./")
        )

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        launcher, env = "bundle exec cucumber", []
        for off in _ml.official_commands(task):
            tool = ruby_tool_args(off, ("cucumber",))
            if tool is not None:
                launcher, env = tool[0], [f"{k}={v}" for k, v in off.env]
                break
        locs = _ml.unique(f"{n.path}:{n.param}" for n in nodes if n.path and n.param)
        parts = env + launcher.split(" ") + ["--publish-quiet", "--format", "progress", "--no-color"] + locs
        return " ".join(_ml.q(p) for p in parts)

    def parse_results(self, log: str) -> dict[str, str]:
        return parser_for("parse_log_cucumber")(log)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        if node.text in results:
            return results[node.text]
        prefix = f"{node.path}:{node.param} "
        hits = [v for k, v in results.items() if k.startswith(prefix)]
        return hits[0] if len(hits) == 1 else None
