"""karma (preact): node ids `describe > ... > it` as the mocha reporter prints them (SWE-bench's
`parse_log_karma` rebuilds the chain from indentation).

Selection rule: `karma start` takes no test-name selector. karma-mocha applies a mocha grep only
from *client arguments*, and karma 6 collects client arguments (`-- --grep=...`) only for
`karma run`, which talks to an already running server - two processes, not one command line
(karma 6.4 `lib/cli.js`: `if (options.cmd === 'run') options.clientArgs = parseClientArgs(...)`;
karma-mocha 2.0 `createMochaStartFn` reads `config.args`). preact's karma.conf.js reads the
`--grep` option itself as a *file glob* (`files: [{pattern: config.grep || ...}]`). So a karma
command selects files (`--grep=<glob>`, `file` level) or the whole suite; it is never node level and
the bundle rules reject it. build_command returns the official file-level command for the record.

Results: swebench's `parse_log_karma`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _js, _ml
from execcritic.runners.base import Runner
from execcritic.runners.jest import split_chain

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task


class KarmaRunner(Runner):
    name = "karma"
    language = "javascript"
    log_parser = "parse_log_karma"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_karma"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _js.tool_args(cmd, ("karma",)) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        _launcher, args = _js.tool_args(cmd, ("karma",)) or ("", [])
        sel = Selection()
        globs = [a.split("=", 1)[1] for a in args if a.startswith("--grep=")]
        globs += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--grep"]
        if "--" in args:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "karma: client arguments after `--` are only passed by `karma run`, not `karma start`",
                )
            )
        for g in globs:
            sel.selectors.append(
                Selector(
                    g,
                    "file",
                    note="preact's karma.conf.js uses --grep as a file glob; karma "
                    "start has no test-name selector",
                )
            )
        if not globs:
            sel.selectors.append(
                Selector(
                    cmd.render(),
                    "suite",
                    note="karma start runs every configured test file; it has no test-name selector",
                )
            )
        return sel

    def parse_node(self, text: str) -> Node:
        scope, name = split_chain(text)
        return Node(self.name, name, scope=scope, text=text.strip())

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """No node-level form exists (module docstring): the official file-level command."""
        for off in _ml.official_commands(task):
            if self.recognizes(off):
                return off.render()
        return "npx karma start karma.conf.js --single-run"

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(" > ".join((*node.scope, node.name)))
