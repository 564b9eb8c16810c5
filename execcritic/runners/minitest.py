"""Ruby unit tests run as `ruby -Itest test/x.rb -n NAME` - test-unit (fluentd, faker) and minitest
(jekyll, with shoulda-context names). Node ids as SWE-bench names them: `test_password`,
`test_rpc_server[ipv4]` (a data-driven case), `Do not retry when ...` (test-unit's `test "..."`
method `test: Do not retry when ...` with the `test: ` dropped by its parser), or
`TestFilters#test_: filters ... conditions` (minitest verbose, shoulda's trailing `. ` dropped).

Selection rule: `-n NAME` / `--name=NAME`:
  - test-unit: `/RE/` (whole argument) is a regex searched in the method name and the local name
    (`test_x[label]`); any other string must *equal* one of them;
  - minitest: a string containing `/.../` is a regex (searched), otherwise it must equal the method
    name or `Class#method`.
So a plain string without `/` is node level, and so is an anchored literal regex
`/\\A(?:test: )?(?:a|b)\\z/` (the optional `test: ` prefix covers test-unit's `test "..."` names,
which SWE-bench reports without it). Other regexes are `pattern`; `-t/--testcase` is `class`; the
test file alone is `file`. Refused: `ruby -e` (arbitrary code) and options that only list tests.

Results: swebench's `parse_log_ruby_unit` (test-unit verbose `name: .`) merged with
`parse_log_minitest` (minitest verbose `Class#name = 0.01 s = .`); observed_command adds `-v`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners.base import Runner
from execcritic.runners.rspec import ruby_tool_args
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_PREFIX = "(?:test: )?"
_SHOULDA = ". "


def _ruby_args(cmd: ParsedCommand) -> tuple[list[str], str, list[str]] | None:
    """(interpreter options, test file, test options) for `[bundle exec] ruby [-I..] file.rb args`."""
    tool = ruby_tool_args(cmd, ("ruby",))
    if tool is None:
        return None
    args = tool[1]
    i, interp = 0, []
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in ("-I", "-r") and i + 1 < len(args):
            interp += [a, args[i + 1]]
            i += 2
            continue
        interp.append(a)
        i += 1
    if i >= len(args) or not args[i].endswith(".rb"):
        return None
    return interp, args[i], args[i + 1 :]


def split_name(text: str) -> tuple[tuple[str, ...], str, str | None]:
    """`Cls#name` / `name[label]` / `name` -> (scope, name, label); shoulda's `. ` suffix dropped."""
    t = text.strip() if not text.endswith(_SHOULDA) else text[: -len(_SHOULDA)]
    scope: tuple[str, ...] = ()
    m = re.match(r"^([A-Z][\w:]*)#(.+)$", t)
    if m:
        scope, t = (m.group(1),), m.group(2)
    label = None
    m = re.match(r"^(test_\w+)\[(.+)\]$", t)
    if m:
        t, label = m.group(1), m.group(2)
    t = t.removeprefix("test: ")
    return scope, t, label


def parse_name_regex(value: str) -> list[str] | None:
    """Literal names of `/\\A(?:test: )?(?:a|b)\\z/`, or None."""
    if not (len(value) >= 2 and value.startswith("/") and value.endswith("/")):
        return None
    body = value[1:-1]
    for start in ("\\A", "^"):
        if body.startswith(start):
            body = body[len(start) :]
            break
    else:
        return None
    body = body.removeprefix(_PREFIX)
    return _ml.anchored_literals("^" + body if not body.endswith(("\\z", "\\Z")) else "^" + body[:-2] + "$")


class RubyUnitRunner(Runner):
    name = "ruby_unit"
    language = "ruby"
    log_parser = "parse_log_ruby_unit"

    def serves(self, task: Task) -> bool:
        if task.log_parser == "parse_log_ruby_unit":
            return True
        return (
            task.log_parser == "parse_log_jekyll" and " ruby " in f" {_ml.official_command_text(task) or ''} "
        )

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _ruby_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        interp, path, args = _ruby_args(cmd) or ([], "", [])
        sel = Selection()
        if "-e" in interp or any(a.startswith("-e") for a in interp):
            sel.problems.append(
                _ml.problem("runner.option", "ruby -e runs arbitrary code; run the test file")
            )
        names, cases, i = [], [], 0
        while i < len(args):
            a = args[i]
            if a in ("-n", "--name") and i + 1 < len(args):
                names.append(args[i + 1])
                i += 2
                continue
            if a.startswith("--name="):
                names.append(a.split("=", 1)[1])
            elif a.startswith("-n") and len(a) > 2:
                names.append(a[2:])
            elif a in ("-t", "--testcase") and i + 1 < len(args):
                cases.append(args[i + 1])
                i += 1
            elif a.startswith("--testcase="):
                cases.append(a.split("=", 1)[1])
            elif a in ("--list", "-l", "--help", "-h"):
                sel.problems.append(_ml.problem("runner.option", f"ruby tests: `{a}` runs no test"))
            elif a in (
                "-v",
                "--verbose",
                "--verbose=verbose",
                "-s",
                "--seed",
                "-p",
                "--pride",
                "--no-plugins",
                "--ignore-name",
                "-e",
                "--exclude",
            ) or a.startswith(("--seed=", "--verbose=", "--ignore-name=", "--exclude=")):
                if a in ("-s", "--seed", "--ignore-name", "-e", "--exclude") and i + 1 < len(args):
                    i += 1
            else:
                sel.problems.append(
                    _ml.problem("runner.unknown_option", f"ruby tests: unknown argument {a!r}")
                )
            i += 1
        for c in cases:
            sel.selectors.append(Selector(c, "class", note="-t/--testcase runs every test of the class"))
        if len(names) > 1:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "ruby tests: give one -n (several filters do not "
                    "add up); use /\\A(?:a|b)\\z/ for several tests",
                )
            )
        if not names:
            if not cases:
                sel.selectors.append(Selector(path, "file", note="no -n: every test of the file"))
            return sel
        value = names[-1]
        if value.startswith("/") and value.endswith("/") and len(value) > 1:
            lits = parse_name_regex(value)
        elif "/" in value:
            lits = None  # minitest reads a string with /.../ inside as a regex
        else:
            lits = [value]
        if lits is None:
            sel.selectors.append(
                Selector(
                    value,
                    "pattern",
                    note="-n /RE/ is a regex search; anchor it \\A...\\z or give the exact name",
                )
            )
            return sel
        for lit in lits:
            scope, name, label = split_name(lit)
            sel.selectors.append(
                Selector(lit, "node", Node(self.name, name, path=path, scope=scope, param=label, text=lit))
            )
        return sel

    def parse_node(self, text: str) -> Node:
        scope, name, label = split_name(text)
        return Node(self.name, name, scope=scope, param=label, text=text.strip())

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        return Node(self.name, name, path=path, text=name)

    def binds(self, selected: Node, declared: Node) -> bool:
        """`-n test_x` runs every data row `test_x[label]` of a data-driven test (method-name match)."""
        if selected.name != declared.name:
            return False
        if declared.scope and selected.scope and tuple(declared.scope) != tuple(selected.scope):
            return False
        return selected.param is None or selected.param == declared.param

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        launcher, interp, path, env = "bundle exec ruby", ["-Itest"], "", []
        for off in _ml.official_commands(task):
            parsed = _ruby_args(off)
            if parsed is None:
                continue
            tool = ruby_tool_args(off, ("ruby",))
            launcher = tool[0] if tool else launcher
            interp, path, _ = parsed
            env = [f"{k}={v}" for k, v in off.env]
            break
        if not path:
            path = next((n.path for n in nodes if n.path), "")
        names = []
        for n in nodes:
            base = f"{n.scope[0]}#" if n.scope else ""
            label = f"[{n.param}]" if n.param else ""
            names.append((base, n.name, label))
        if len(names) == 1 and names[0][0]:
            # minitest `Class#method` string; shoulda names end in ". "
            base, name, label = names[0]
            value = f"{base}{name}{label}" + (_SHOULDA if name.startswith("test_: ") else "")
        elif len(names) == 1 and names[0][1].startswith("test_") and "/" not in names[0][1]:
            value = names[0][1] + names[0][2]
        else:
            lits = [f"{b}{n}{lab}" for b, n, lab in names]
            value = "/\\A" + _PREFIX + _ml.anchored_regex(_ml.unique(lits), start="", end="") + "\\z/"
        parts = env + launcher.split(" ") + interp + [path, "-v", "-n", value]
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        argv = list(cmd.argv)
        if "-v" not in argv and "--verbose" not in argv:
            argv.append("-v")
        return cmd.with_argv(argv)

    def parse_results(self, log: str) -> dict[str, str]:
        results = dict(parser_for("parse_log_minitest")(log))
        results.update(parser_for("parse_log_ruby_unit")(log))
        return results

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        label = f"[{node.param}]" if node.param else ""
        keys = [f"{node.name}{label}", f"test: {node.name}{label}"]
        if node.scope:
            keys = [f"{node.scope[0]}#{k}" for k in keys] + keys
        for k in keys:
            if k in results:
                return results[k]
        return None
