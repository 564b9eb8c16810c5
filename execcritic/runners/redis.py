"""Redis / Valkey Tcl test suite (`./runtest`): node ids are test names, `[ok]: NAME (2 ms)`.

Selection rule (tests/test_helper.tcl): `--single unit/x` runs one test file (repeatable);
`--only NAME` runs only tests whose name equals NAME - or, when NAME starts with `/`, matches the
Tcl regex after it (redis >= 7 `search_pattern_list`); older releases compared with `lsearch`, i.e. a
*glob*. So `--only NAME` is node level when NAME does not start with `/` and has no glob
metacharacter (`* ? [ \\`); a `/regex` is node level only as an anchored literal `/^NAME$`.
`--single` without `--only` is `file`; neither is `suite`. `--skiptest`/`--tags` only narrow.
Refused: `--host/--port` (an external server decides the outcome), `--loop` (never exits),
`--list-tests`, `--force-failure`.

Results: swebench's `parse_log_redis` (`[ok|err|skip|ignore]: name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "--single": Opt(True, "select"),
    "--only": Opt(True, "select"),
    **{
        k: OKV
        for k in (
            "--skiptest",
            "--skipunit",
            "--skipfile",
            "--tags",
            "--clients",
            "--timeout",
            "--config",
            "--baseport",
            "--portcount",
            "--loops",
            "--tls-module",
            "--io-threads",
        )
    },
    **{
        k: OK
        for k in (
            "--durable",
            "--verbose",
            "--quiet",
            "--accurate",
            "--dont-clean",
            "--dont-pre-clean",
            "--no-latency",
            "--stop",
            "--dump-logs",
            "--singledb",
            "--cluster-mode",
            "--tls",
            "--ignore-encoding",
            "--ignore-digest",
            "--large-memory",
            "--log-req-res",
            "--fastfail",
            "--valgrind",
            "--stack-logging",
            "--wait-server",
            "--skip-till",
            "--debug-defrag",
            "--force-resp3",
            "--single-db",
        )
    },
    "--host": reject("tests an external server", takes=True),
    "--port": reject("tests an external server", takes=True),
    "--loop": reject("repeats forever"),
    "--list-tests": reject("lists and runs nothing"),
    "--force-failure": reject("forces failures"),
    "--help": reject("runs nothing"),
}
_GLOB = set("*?[\\")


def _runtest_args(cmd: ParsedCommand) -> list[str] | None:
    argv = list(cmd.argv)
    if argv and _ml.basename(argv[0]) in ("runtest", "runtest-cluster", "runtest-moduleapi"):
        return argv[1:]
    if len(argv) >= 2 and _ml.basename(argv[0]).startswith("tclsh") and argv[1].endswith("test_helper.tcl"):
        return argv[2:]
    return None


def only_literal(value: str) -> str | None:
    if value.startswith("/"):
        lits = _ml.anchored_literals(value[1:])
        return lits[0] if lits and len(lits) == 1 else None
    if any(c in _GLOB for c in value):
        return None
    return value


class RedisRunner(Runner):
    name = "redis"
    language = "c"
    log_parser = "parse_log_redis"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_redis"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _runtest_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        w = _ml.walk_options(_runtest_args(cmd) or [], _OPTS, runner="redis runtest", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        for p in w.positionals:
            sel.problems.append(
                _ml.problem("runner.unknown_option", f"redis runtest: unexpected argument {p!r}")
            )
        singles = _ml.values(w, "--single")
        onlys = _ml.values(w, "--only")
        if not onlys:
            for s in singles:
                sel.selectors.append(Selector(s, "file", note="--single without --only runs the whole file"))
            if not singles:
                sel.selectors.append(
                    Selector(cmd.render(), "suite", note="no --single/--only: every test file")
                )
            return sel
        path = singles[0] if len(singles) == 1 else None
        for o in onlys:
            lit = only_literal(o)
            if lit is None:
                sel.selectors.append(
                    Selector(
                        o,
                        "pattern",
                        note="--only /regex (or a glob character in older releases) matches many tests",
                    )
                )
            else:
                sel.selectors.append(Selector(o, "node", Node(self.name, lit, path=path, text=lit)))
        return sel

    def parse_node(self, text: str) -> Node:
        return Node(self.name, text.strip(), text=text.strip())

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        return Node(self.name, name, path=path, text=name)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        program, env, keep, singles = "./runtest", [], ["--durable"], []
        for off in _ml.official_commands(task):
            args = _runtest_args(off)
            if args is None:
                continue
            program = off.argv[0]
            env = [f"{k}={v}" for k, v in off.env]
            w = _ml.walk_options(args, _OPTS, runner="redis runtest", stop_at_dd=False)
            singles = _ml.values(w, "--single")
            keep = [
                n for n, _ in w.options if n in ("--durable", "--accurate", "--singledb", "--cluster-mode")
            ]
            break
        if not singles:
            singles = _ml.unique(n.path for n in nodes if n.path)
        parts = env + [program] + keep
        for s in singles:
            parts += ["--single", s]
        for n in nodes:
            name = n.name
            if name.startswith("/") or any(c in _GLOB for c in name):
                name = "/" + _ml.anchored_regex([name])
            parts += ["--only", name]
        return " ".join(_ml.q(p) for p in parts)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
