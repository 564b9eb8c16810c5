"""MicroPython's `tests/run-tests.py`: node ids are test files relative to `tests/`,
`basics/fun_calldblstar.py`, as it prints `pass  basics/fun_calldblstar.py`.

Selection rule: positional arguments are test files - each file is one test (its output is
compared with CPython's or a `.exp` file), so a file is the node. `-i/--include` and `-e/--exclude`
are regexes (`re.search`) over file paths and `-d/--test-dirs` selects directories: `pattern` and
`directory`. Refused: `--write-exp` (rewrites expected outputs), `--list-tests`,
`--print-failures`/`--run-failures`/`--clean-failures` (state of an earlier run), and a remote
`-t/--target`/`--device`.

Results: swebench's `parse_log_micropython_test` (`pass|FAIL|skip  name`).
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
    "-i": Opt(True, "select"),
    "--include": Opt(True, "select"),
    "-e": OKV,
    "--exclude": OKV,
    "-d": Opt(True, "select"),
    "--test-dirs": Opt(True, "select"),
    **{k: OKV for k in ("--emit", "--heapsize", "-j", "--jobs", "-r", "--result-dir", "--mpy-cross-flags")},
    **{k: OK for k in ("--via-mpy", "--keep-path", "--auto-jobs")},
    "--target": reject("runs on another target", takes=True),
    "-t": reject("runs on a remote device", takes=True),
    "--device": reject("runs on a remote device", takes=True),
    "--write-exp": reject("rewrites the expected outputs"),
    "--list-tests": reject("lists and runs nothing"),
    "--print-failures": reject("only prints an earlier run's failures"),
    "--run-failures": reject("selects tests from an earlier run's failures"),
    "--clean-failures": reject("deletes an earlier run's failures and runs nothing"),
}


def _mp_args(cmd: ParsedCommand) -> list[str] | None:
    argv = list(cmd.argv)
    if argv and _ml.basename(argv[0]) == "run-tests.py":
        return argv[1:]
    if (
        len(argv) >= 2
        and _ml.basename(argv[0]).startswith("python")
        and _ml.basename(argv[1]) == "run-tests.py"
    ):
        return argv[2:]
    return None


class MicroPythonRunner(Runner):
    name = "micropython"
    language = "c"
    log_parser = "parse_log_micropython_test"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_micropython_test"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _mp_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        w = _ml.walk_options(_mp_args(cmd) or [], _OPTS, runner="run-tests.py", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        for v in _ml.values(w, "-i", "--include"):
            sel.selectors.append(Selector(v, "pattern", note="-i is a regex over test paths"))
        for v in _ml.values(w, "-d", "--test-dirs"):
            sel.selectors.append(Selector(v, "directory", note="-d runs every test of the directories"))
        for p in w.positionals:
            if p.endswith(".py"):
                sel.selectors.append(
                    Selector(p, "node", Node(self.name, p.removeprefix("./"), path=p, text=p))
                )
            else:
                sel.selectors.append(Selector(p, "directory", note="a directory runs all of its tests"))
        if not sel.selectors:
            sel.selectors.append(Selector(cmd.render(), "suite", note="no test named: the default test dirs"))
        return sel

    def parse_node(self, text: str) -> Node:
        t = text.strip().removeprefix("tests/")
        return Node(self.name, t, path=t, text=text.strip())

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        prefix, program = "cd tests &&", "./run-tests.py"
        env: list[str] = []
        for off in _ml.official_commands(task):
            if _mp_args(off) is None:
                continue
            prefix = f"cd {_ml.q(off.cd)} &&" if off.cd else ""
            env = [f"{k}={_ml.q(v)}" for k, v in off.env]
            program = " ".join(_ml.q(a) for a in off.argv[: len(off.argv) - len(_mp_args(off) or [])])
            break
        files = [_ml.q(f) for f in _ml.unique(n.name for n in nodes)]
        return " ".join(p for p in [prefix] + env + [program] + files if p)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
