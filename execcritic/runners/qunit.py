"""QUnit CLI with its TAP output (three.js): node ids `Module > Sub > test`, as `ok N Core > Object3D >
toJSON` lines print them.

Selection rule (QUnit 2 `Test#valid`, checked on qunit 2): `-f/--filter` is matched against
`module.name + ": " + testName`, where a nested module's name is its path joined by " > ". A filter
of the form `/regex/` or `/regex/i` (optionally `!`-negated) is a regex search; any other string is a
case-insensitive *substring*. `-m/--module` selects whole modules. So:
  - `-f '/^(?:Core > Object3D: toJSON|Maths > Sphere: isSphere)$/'` is node level (case-sensitive);
  - other filters are `pattern`, `--module` is `class`, test files alone are `file`.
Refused: negated filters (`!...` runs everything else) and `--watch`.

Results: swebench's `parse_log_tap`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _js, _ml
from execcritic.runners._ml import OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "-f": Opt(True, "select"),
    "--filter": Opt(True, "select"),
    "-m": Opt(True, "select"),
    "--module": Opt(True, "select"),
    "-r": Opt(True, "observe"),
    "--reporter": Opt(True, "observe"),
    **{k: OKV for k in ("--require", "--seed")},
    "-w": reject("keeps watching and never exits"),
    "--watch": reject("keeps watching and never exits"),
}


def filter_literals(value: str) -> list[str] | None:
    if value.startswith("!") or not value.startswith("/"):
        return None
    end = value.rfind("/")
    if end <= 0 or value[end + 1 :] not in ("",):
        return None  # `/.../i` is case-insensitive: not exact
    return _ml.anchored_literals(value[1:end], delim="/")


def qunit_full_name(node_id: str) -> str:
    """`Core > Object3D > toJSON` -> `Core > Object3D: toJSON` (what --filter sees)."""
    mod, sep, test = node_id.strip().rpartition(" > ")
    return f"{mod}: {test}" if sep else test


class QUnitRunner(Runner):
    name = "qunit"
    language = "javascript"
    log_parser = "parse_log_tap"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_tap" and "qunit" in (_ml.official_command_text(task) or "")

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _js.tool_args(cmd, ("qunit",)) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        _launcher, args = _js.tool_args(cmd, ("qunit",)) or ("", [])
        w = _ml.walk_options(args, _OPTS, runner="qunit", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        for m in _ml.values(w, "-m", "--module"):
            sel.selectors.append(Selector(m, "class", note="--module runs every test of the module"))
        filters = _ml.values(w, "-f", "--filter")
        for f in filters:
            if f.startswith("!"):
                sel.problems.append(
                    _ml.problem(
                        "runner.arguments",
                        "qunit: a negated filter runs every other test; name the tests to run",
                    )
                )
        if not filters:
            if not _ml.values(w, "-m", "--module"):
                for f in w.positionals:
                    sel.selectors.append(Selector(f, "file", note="a test file runs all of its tests"))
                if not w.positionals:
                    sel.selectors.append(Selector(cmd.render(), "suite", note="no filter and no file"))
            return sel
        literals = filter_literals(filters[-1])
        if literals is None:
            sel.selectors.append(
                Selector(
                    filters[-1],
                    "pattern",
                    note="a plain --filter is a case-insensitive substring; use /^(?:Module: test|...)$/",
                )
            )
            return sel
        for lit in literals:
            sel.selectors.append(Selector(lit, "node", Node(self.name, lit, text=lit)))
        return sel

    def parse_node(self, text: str) -> Node:
        return Node(self.name, text.strip(), text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        return selected.name in (declared.name, qunit_full_name(declared.name))

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        launcher, files = "npx qunit", []
        for off in _ml.official_commands(task):
            tool = _js.tool_args(off, ("qunit",))
            if tool is None:
                continue
            launcher = tool[0]
            files = _ml.walk_options(tool[1], _OPTS, runner="qunit", stop_at_dd=False).positionals
            break
        names = _ml.unique(qunit_full_name(n.name) for n in nodes)
        parts = launcher.split(" ") + files + ["-f", "/" + _ml.anchored_regex(names, extra="/") + "/"]
        return " ".join(_ml.q(p) for p in parts)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
