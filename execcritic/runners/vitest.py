"""vitest (vuejs/core): node ids `file > describe > ... > title`, as `--reporter=verbose` prints them.

Selection rule (@vitest/runner `interpretTaskModes`, same code in 1.0-3.2, checked on vitest 1.6.1):
`-t/--testNamePattern` is a *case-sensitive* regex searched in `getTaskFullName(test)` = the
enclosing suite names and the title joined by spaces; vitest 1.x also prefixes a space for the
unnamed file-level suite (seen on a real run: `^outer group adds numbers$` matched nothing,
`^ ?outer group adds numbers$` matched exactly one test). Positional arguments are substring
filters on test file paths. So:
  - `-t '^ ?(?:A x|B y)$'` (or `^...$`) with literal full names is node level (a space inside a title
    still cannot be told from the suite/title boundary);
  - any other `-t` is `pattern`; file filters alone are `file`; nothing is `suite`.
`vitest` without `run` watches (never exits) unless CI is set, so `run` (or `--run`) is required.
Refused: `-u/--update` (rewrites snapshots), `--watch`, `--passWithNoTests`, `--changed`/`--related`
(selection by VCS state), `--shard`, `--allowOnly=false`-style config overrides are harmless and kept.

Results: swebench's `parse_log_vitest` (`✓|×|↓ file > describe > title [time]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.languages._describe import JS_GROUP, JS_LEAF, js_unquote
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.errors import InputError
from execcritic.runners import _js, _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner
from execcritic.runners.jest import FULL_NAME, binds_full_name

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "-t": Opt(True, "select"),
    "--testNamePattern": Opt(True, "select"),
    "--reporter": Opt(True, "observe"),
    **{
        k: OKV
        for k in (
            "-c",
            "--config",
            "-r",
            "--root",
            "--dir",
            "--project",
            "--environment",
            "--pool",
            "--testTimeout",
            "--hookTimeout",
            "--maxConcurrency",
            "--maxWorkers",
            "--minWorkers",
            "--sequence.seed",
            "--outputFile",
            "--mode",
            "--bail",
            "--poolOptions.threads.singleThread",
            "--logHeapUsage",
            "--color",
            "--workspace",
        )
    },
    **{
        k: OK
        for k in (
            "--run",
            "--no-watch",
            "--globals",
            "--dom",
            "--isolate",
            "--no-isolate",
            "--coverage",
            "--no-coverage",
            "--no-color",
            "--allowOnly",
            "--typecheck",
            "--sequence.shuffle",
            "--no-file-parallelism",
            "--fileParallelism",
            "--clearScreen",
            "--no-clearScreen",
            "--silent",
        )
    },
    "-u": reject("rewrites snapshots so that snapshot assertions pass"),
    "--update": reject("rewrites snapshots so that snapshot assertions pass"),
    "-w": reject("keeps watching and never exits"),
    "--watch": reject("keeps watching and never exits"),
    "--passWithNoTests": reject("reports success when no test ran"),
    "--changed": reject("selects tests by version-control state, not by name"),
    "--related": reject("selects tests by the source files they import, not by name", takes=True),
    "--shard": reject("runs a shard chosen by position, not by name", takes=True),
    "--retry": reject("reruns failing tests and reports a later pass as a pass", takes=True),
    "--standalone": reject("starts without running tests"),
    "--ui": reject("starts the UI and never exits"),
}
_SUBCOMMANDS = {"run", "related", "watch", "dev", "bench", "typecheck", "list"}
_START = ("^ ?", "^")


def _vitest_args(cmd: ParsedCommand) -> list[str] | None:
    tool = _js.tool_args(cmd, ("vitest",))
    return tool[1] if tool else None


def split_vitest_id(text: str) -> tuple[str | None, tuple[str, ...], str]:
    parts = text.strip().split(" > ")
    path = None
    if len(parts) > 1 and _js.looks_like_file(parts[0]):
        path = parts.pop(0)
    return path, tuple(parts[:-1]), parts[-1]


class VitestRunner(Runner):
    name = "vitest"
    language = "javascript"
    log_parser = "parse_log_vitest"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_vitest"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _vitest_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        args = list(_vitest_args(cmd) or [])
        sub = args[0] if args and args[0] in _SUBCOMMANDS else None
        if sub:
            args = args[1:]
        w = _ml.walk_options(args, _OPTS, runner="vitest", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        if sub in ("related", "watch", "dev", "bench", "typecheck", "list"):
            sel.problems.append(
                _ml.problem(
                    "runner.option", f"vitest: `{sub}` does not run the named tests once; use `vitest run`"
                )
            )
        elif sub is None and not _ml.has(w, "--run"):
            sel.problems.append(
                _ml.problem(
                    "runner.option",
                    "vitest: without `run` (or --run) vitest watches and never exits; use `vitest run`",
                )
            )
        files = w.positionals
        names = _ml.values(w, "-t", "--testNamePattern")
        if not names:
            for f in files:
                sel.selectors.append(
                    Selector(f, "file", note="a file filter runs every test of the matching files")
                )
            if not files:
                sel.selectors.append(Selector(cmd.render(), "suite", note="no -t and no file: every test"))
            return sel
        literals = _ml.anchored_literals(names[-1], start=_START)
        if literals is None:
            sel.selectors.append(
                Selector(
                    names[-1],
                    "pattern",
                    note="-t is a regex searched in the full test name; "
                    "anchor it ^ ?(?:...)$ with escaped full names",
                )
            )
            return sel
        path = files[0] if len(files) == 1 else None
        for lit in literals:
            sel.selectors.append(
                Selector(lit, "node", Node(self.name, lit, path=path, param=FULL_NAME, text=lit))
            )
        return sel

    def parse_node(self, text: str) -> Node:
        path, scope, name = split_vitest_id(text)
        return Node(self.name, name, path=path, scope=scope, text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        if declared.path and selected.path and not (selected.path in declared.path):
            return False  # the positional is a substring filter on the file path
        if selected.param != FULL_NAME:
            return selected.name == declared.name and (
                not selected.scope or not declared.scope or tuple(selected.scope) == tuple(declared.scope)
            )
        return binds_full_name(selected.name, declared.scope, declared.name, case_insensitive=False)

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        """A test the patch adds (`file > title`); build_command recovers its describe chain."""
        return Node(self.name, name, path=path, text=f"{path} > {name}")

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        files = _ml.unique(n.path for n in nodes if n.path)
        names = []
        for n in nodes:
            if n.param == FULL_NAME:
                names.append(n.name)
                continue
            if n.scope:
                names.append(" ".join((*n.scope, n.name)))
                continue
            hits = _ml.recover_chains(
                task,
                n.name,
                leaf=JS_LEAF,
                group=JS_GROUP,
                path_ok=lambda p, f=n.path: p == f if f else _js.is_test_file(p),
                unquote=js_unquote,
            )
            if not hits:
                raise InputError(
                    f"vitest: cannot select {n.name!r} exactly - its describe chain is not in the "
                    "test patch (-t matches the full name)",
                    instance=task.instance_id if task else None,
                    field="FAIL_TO_PASS",
                )
            names += [" ".join((*h.chain, n.name)) for h in hits]
        names = _ml.unique(names)
        parts = (
            ["npx", "vitest", "run"]
            + files
            + ["-t", _ml.anchored_regex(names, start="^ ?"), "--reporter=verbose"]
        )
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """Force the verbose reporter (one line per test); other reporters are dropped."""
        out, argv, i = [], list(cmd.argv), 0
        while i < len(argv):
            if argv[i] == "--reporter":
                i += 2
                continue
            if not argv[i].startswith("--reporter="):
                out.append(argv[i])
            i += 1
        out.append("--reporter=verbose")
        return cmd.with_argv(out)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        if node.path:
            return results.get(" > ".join((node.path, *node.scope, node.name)))
        tail = " > ".join((*node.scope, node.name))
        hits = [v for k, v in results.items() if k == tail or k.endswith(" > " + tail)]
        return hits[0] if len(hits) == 1 else None
