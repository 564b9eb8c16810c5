"""doctest binaries (nlohmann/json): node ids `Test case > Subcase`, as SWE-bench's parser reads
doctest's XML reporter (`-r=xml`).

Selection rule (doctest command line): `-tc=`/`--test-case=` and `-sc=`/`--subcase=` take
comma-separated name filters with `*`/`?` wildcards, matched *case-insensitively* unless
`-cs`/`--case-sensitive` is given. Without `-sc` a test case runs all its subcases. So `-tc=NAME`
(and `-sc=NAME`) without wildcards or commas is node level: the nodes are test case x subcase
(`-tc` alone selects whole test cases, which bind their subcases). The case-insensitivity caveat is
removed by `-cs`, which build_command adds. `-tce`/`-sce` exclusions only narrow; `-ts=` (test suite)
is `class`, `-sf=` (source file) `file`. Refused: `-ltc`/`-lts`/`-c` (list or count, run nothing),
`-ns`/`--no-skip`? (kept), `-e`/`--exit` is kept.

Results: swebench's `parse_log_doctest` (XML). observed_command forces `-r=xml` and `-s` (report
successful assertions so passing subcases appear).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_FLAG_NAMES = {
    "tc": "test-case",
    "sc": "subcase",
    "ts": "test-suite",
    "sf": "source-file",
    "tce": "test-case-exclude",
    "sce": "subcase-exclude",
    "tse": "test-suite-exclude",
    "sfe": "source-file-exclude",
    "r": "reporters",
    "o": "out",
    "ob": "order-by",
    "rs": "rand-seed",
    "f": "first",
    "l": "last",
    "aa": "abort-after",
    "scfl": "subcase-filter-levels",
    "s": "success",
    "cs": "case-sensitive",
    "e": "exit",
    "d": "duration",
    "m": "minimal",
    "q": "quiet",
    "nt": "no-throw",
    "ne": "no-exitcode",
    "nr": "no-run",
    "ni": "no-intro",
    "nv": "no-version",
    "nc": "no-colors",
    "fc": "force-colors",
    "nb": "no-breaks",
    "ns": "no-skip",
    "gfl": "gnu-file-line",
    "npf": "no-path-filenames",
    "nln": "no-line-numbers",
    "ndo": "no-debug-output",
    "ltc": "list-test-cases",
    "lts": "list-test-suites",
    "lr": "list-reporters",
    "c": "count",
    "v": "version",
    "h": "help",
}
_LONG = {v: k for k, v in _FLAG_NAMES.items()}
_BAD = {
    "ltc": "lists and runs nothing",
    "lts": "lists and runs nothing",
    "lr": "lists and runs nothing",
    "c": "counts and runs nothing",
    "v": "runs nothing",
    "h": "runs nothing",
    "nr": "runs nothing",
    "ne": "makes the exit code 0 whatever the result",
    "nt": "skips assertions that throw",
    "o": "writes the report to a file instead of the output the harness reads",
    "f": "selects tests by position",
    "l": "selects tests by position",
    "aa": "stops after N failures",
}


def _flag(arg: str) -> tuple[str, str | None] | None:
    """`-tc=x` / `--test-case=x` / `--dt-tc=x` -> ('tc', 'x'); None if not a doctest option."""
    if not arg.startswith("-"):
        return None
    body = arg.lstrip("-")
    body = body.removeprefix("dt-")
    name, eq, value = body.partition("=")
    if name in _FLAG_NAMES:
        return name, value if eq else None
    if name in _LONG:
        return _LONG[name], value if eq else None
    return None


def is_doctest_command(cmd: ParsedCommand) -> bool:
    if not cmd.argv or len(cmd.argv) < 2:
        return False
    flags = [_flag(a) for a in cmd.argv[1:]]
    return all(f is not None for f in flags) and any(
        f[0] in ("tc", "sc", "r", "ts", "sf") for f in flags if f
    )


def _filters(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


class DoctestRunner(Runner):
    name = "doctest"
    language = "cpp"
    log_parser = "parse_log_doctest"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_doctest"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return is_doctest_command(cmd)

    def selection(self, cmd: ParsedCommand) -> Selection:
        sel = Selection()
        tcs, scs = [], []
        for a in cmd.argv[1:]:
            f = _flag(a)
            if f is None:
                sel.problems.append(_ml.problem("runner.unknown_option", f"doctest: unknown argument {a!r}"))
                continue
            name, value = f
            if name in _BAD:
                sel.problems.append(_ml.problem("runner.option", f"doctest: `{a}` {_BAD[name]}"))
            elif name == "tc":
                tcs += _filters(value)
            elif name == "sc":
                scs += _filters(value)
            elif name == "ts":
                sel.selectors.append(Selector(a, "class", note="a test suite runs all of its test cases"))
            elif name == "sf":
                sel.selectors.append(Selector(a, "file", note="a source file runs all of its test cases"))
        if not tcs:
            if scs:
                sel.selectors.append(
                    Selector(
                        ",".join(scs),
                        "pattern",
                        note="-sc without -tc runs those subcases of every test case",
                    )
                )
            elif not sel.selectors:
                sel.selectors.append(Selector(cmd.render(), "suite", note="no -tc: every test case"))
            return sel
        if any(c in t for t in tcs + scs for c in "*?"):
            sel.selectors.append(Selector(",".join(tcs + scs), "pattern", note="`*`/`?` are wildcards"))
            return sel
        for tc, sc in product(tcs, scs or [None]):
            text = f"{tc} > {sc}" if sc else tc
            sel.selectors.append(
                Selector(text, "node", Node(self.name, tc, param=sc, path=cmd.argv[0], text=text))
            )
        return sel

    def parse_node(self, text: str) -> Node:
        tc, sep, sc = text.strip().partition(" > ")
        return Node(self.name, tc, param=sc if sep else None, text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        if selected.name.lower() != declared.name.lower():
            return False
        return selected.param is None or (declared.param or "").lower() == selected.param.lower()

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        return Node(self.name, name, text=name)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        binary = "./test"
        for off in _ml.official_commands(task):
            if off.argv:
                binary = off.argv[0]
            break
        tcs = _ml.unique(n.name for n in nodes)
        scs = _ml.unique(n.param for n in nodes if n.param)
        parts = (
            [binary, "-tc=" + ",".join(tcs)]
            + (["-sc=" + ",".join(scs)] if scs else [])
            + ["-cs", "-s", "-r=xml"]
        )
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        argv = [a for a in cmd.argv if (_flag(a) or ("",))[0] != "r"]
        if not any((_flag(a) or ("",))[0] == "s" for a in argv[1:]):
            argv.append("-s")
        return cmd.with_argv(argv + ["-r=xml"])

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        if node.param is not None:
            return results.get(f"{node.name} > {node.param}")
        hits = [v for k, v in results.items() if k.startswith(node.name + " > ")]
        if not hits:
            return None
        return "FAILED" if "FAILED" in hits else "PASSED"
