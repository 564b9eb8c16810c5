"""mocha with the TAP reporter (axios): node ids are mocha full titles (`describe ... it` joined by
spaces), as `-R tap` prints them (`ok 3 supports http with nodejs should ...`).

Selection rule (mocha `Mocha#grep`, checked on mocha 10): `-g/--grep STR` becomes a RegExp - from the
body of a `/.../flags` string, or from the string itself *unescaped* - and is searched in each
test's `fullTitle()`; `-f/--fgrep` is a plain substring. So:
  - `-g '^supports http with nodejs should x$'` (anchored, literal full titles, alternation allowed)
    is node level (case-sensitive unless the /.../i form is used);
  - other `-g`, any `--fgrep` are `pattern`; spec files alone are `file`; nothing is `suite`.
Refused: `-i/--invert` (runs everything *but* the match), `--dry-run` (reports tests as passed without
running them), `--retries` (a later pass hides a failure), `--watch`, `--list-*`.

Results: swebench's `parse_log_tap` (`ok|not ok N <full title>`); observed_command forces `-R tap`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _js, _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "-g": Opt(True, "select"),
    "--grep": Opt(True, "select"),
    "-f": Opt(True, "select"),
    "--fgrep": Opt(True, "select"),
    "--spec": Opt(True, "select"),
    "-R": Opt(True, "observe"),
    "--reporter": Opt(True, "observe"),
    **{
        k: OKV
        for k in (
            "-O",
            "--reporter-option",
            "--reporter-options",
            "-t",
            "--timeout",
            "-s",
            "--slow",
            "-r",
            "--require",
            "--extension",
            "--file",
            "-u",
            "--ui",
            "--config",
            "--package",
            "-j",
            "--jobs",
            "--ignore",
            "--exclude",
            "--node-option",
            "-n",
        )
    },
    **{
        k: OK
        for k in (
            "-b",
            "--bail",
            "--exit",
            "--no-exit",
            "--recursive",
            "--no-config",
            "--no-package",
            "-c",
            "--colors",
            "--color",
            "-C",
            "--no-colors",
            "--no-color",
            "--forbid-only",
            "--forbid-pending",
            "--full-trace",
            "--check-leaks",
            "-p",
            "--parallel",
            "--sort",
            "--inline-diffs",
            "--allow-uncaught",
            "-A",
            "--async-only",
            "--delay",
            "--diff",
            "--no-diff",
            "--enable-source-maps",
            "--no-timeouts",
        )
    },
    "-i": reject("inverts the grep: runs every test except the named ones"),
    "--invert": reject("inverts the grep: runs every test except the named ones"),
    "--dry-run": reject("reports tests as passed without running them"),
    "--retries": reject("reruns failing tests and reports a later pass as a pass", takes=True),
    "-w": reject("keeps watching and never exits"),
    "--watch": reject("keeps watching and never exits"),
    "--list-interfaces": reject("lists and runs nothing"),
    "--list-reporters": reject("lists and runs nothing"),
}


def grep_literals(value: str) -> list[str] | None:
    body = value
    if len(value) >= 2 and value.startswith("/"):
        end = value.rfind("/")
        if end > 0:
            body = value[1:end]
    return _ml.anchored_literals(body)


class MochaRunner(Runner):
    name = "mocha"
    language = "javascript"
    log_parser = "parse_log_tap"

    def serves(self, task: Task) -> bool:
        if task.log_parser != "parse_log_tap":
            return False
        return "mocha" in (_ml.official_command_text(task) or "") or task.repo == "axios/axios"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _js.tool_args(cmd, ("mocha", "_mocha")) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        _launcher, args = _js.tool_args(cmd, ("mocha", "_mocha")) or ("", [])
        w = _ml.walk_options(args, _OPTS, runner="mocha", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        files = w.positionals + _ml.values(w, "--spec")
        for fg in _ml.values(w, "-f", "--fgrep"):
            sel.selectors.append(
                Selector(fg, "pattern", note="--fgrep is a substring match on the full title")
            )
        greps = _ml.values(w, "-g", "--grep")
        if not greps:
            if not _ml.values(w, "-f", "--fgrep"):
                for f in files:
                    sel.selectors.append(Selector(f, "file", note="a spec file runs all of its tests"))
                if not files:
                    sel.selectors.append(
                        Selector(cmd.render(), "suite", note="no grep and no file: every test")
                    )
            return sel
        literals = grep_literals(greps[-1])
        if literals is None:
            sel.selectors.append(
                Selector(
                    greps[-1],
                    "pattern",
                    note="-g is a regex searched in the full title; anchor it ^(?:...)$ with escaped titles",
                )
            )
            return sel
        path = files[0] if len(files) == 1 else None
        for lit in literals:
            sel.selectors.append(Selector(lit, "node", Node(self.name, lit, path=path, text=lit)))
        return sel

    def parse_node(self, text: str) -> Node:
        return Node(self.name, text.strip(), text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        if declared.path and selected.path and declared.path.strip("./") != selected.path.strip("./"):
            return False
        return selected.name == declared.name

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        """mocha names a test by its full title: describe titles and the title, space-joined."""
        full = " ".join((*scope, name))
        return Node(self.name, full, path=path, text=full)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`npx mocha -R tap <spec files of the official command> -g '^(?:full title|...)$'`."""
        launcher, files, keep = "npx mocha", [], []
        for off in _ml.official_commands(task):
            tool = _js.tool_args(off, ("mocha", "_mocha"))
            if tool is None:
                continue
            launcher = tool[0]
            w = _ml.walk_options(tool[1], _OPTS, runner="mocha", stop_at_dd=False)
            files = w.positionals
            for name, value in w.options:
                if name in ("-r", "--require", "-t", "--timeout", "--exit", "--extension", "-u", "--ui"):
                    keep += [name] + ([value] if value is not None else [])
            break
        files = _ml.unique(list(files) + [n.path for n in nodes if n.path])
        parts = (
            launcher.split(" ")
            + ["-R", "tap"]
            + keep
            + files
            + ["-g", _ml.anchored_regex(_ml.unique(n.name for n in nodes))]
        )
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        out, argv, i = [], list(cmd.argv), 0
        while i < len(argv):
            if argv[i] in ("-R", "--reporter"):
                i += 2
                continue
            if not argv[i].startswith("--reporter="):
                out.append(argv[i])
            i += 1
        return cmd.with_argv(out + ["-R", "tap"])

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
