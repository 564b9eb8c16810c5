"""GoogleTest binaries (fmt): node ids `Suite.Test` (`Prefix/Suite.Test/0` for typed/param tests), as
gtest prints `[       OK ] format_test.format_nan (0 ms)`.

Selection rule (gtest `--gtest_filter=POSITIVE[-NEGATIVE]`): `:`-separated patterns where `*` and
`?` are wildcards; a pattern without them must equal the full test name. So a filter whose positive
patterns are all wildcard-free is node level; the negative part only narrows. No filter (or only a
negative part) is `suite` - every test of the binary. `ctest -R` selects whole test *binaries* and
is handled by the ctest runner. The `GTEST_*` environment variables (GTEST_FILTER...) are refused:
they select tests without showing it on the command line.
Refused: `--gtest_list_tests` (runs nothing), `--gtest_stream_result_to`, and unknown arguments
(the binary's own flags are not known here).

build_command runs the binary directly: SWE-bench's fmt rows run `ctest --test-dir build -R NAME`,
and fmt's CMakeLists puts executables in `${CMAKE_BINARY_DIR}/bin` (CMAKE_RUNTIME_OUTPUT_DIRECTORY),
so the binary is `./build/bin/NAME`.

Results: swebench's `parse_log_googletest`; observed_command drops `--gtest_brief` (which hides the
`[ OK ]` lines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OK_FLAGS = (
    "--gtest_also_run_disabled_tests",
    "--gtest_repeat",
    "--gtest_shuffle",
    "--gtest_random_seed",
    "--gtest_color",
    "--gtest_print_time",
    "--gtest_output",
    "--gtest_break_on_failure",
    "--gtest_throw_on_failure",
    "--gtest_catch_exceptions",
    "--gtest_fail_fast",
    "--gtest_death_test_style",
    "--gtest_print_utf8",
    "--gtest_brief",
    "--gtest_recreate_environments_when_repeating",
    "--gtest_death_test_use_fork",
)
_BAD_FLAGS = {
    "--gtest_list_tests": "lists tests without running them",
    "--gtest_stream_result_to": "sends results to a socket",
}


def is_gtest_command(cmd: ParsedCommand) -> bool:
    return bool(cmd.argv) and any(a.startswith("--gtest_") for a in cmd.argv[1:])


class GoogleTestRunner(Runner):
    name = "googletest"
    language = "cpp"
    log_parser = "parse_log_googletest"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_googletest"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return is_gtest_command(cmd)

    def selection(self, cmd: ParsedCommand) -> Selection:
        sel = Selection()
        sel.problems += _ml.env_problems(cmd, "googletest", forbidden_prefixes=("GTEST_",))
        filters = []
        for a in cmd.argv[1:]:
            name, _eq, value = a.partition("=")
            if name == "--gtest_filter":
                filters.append(value)
            elif name in _BAD_FLAGS:
                sel.problems.append(_ml.problem("runner.option", f"googletest: `{name}` {_BAD_FLAGS[name]}"))
            elif name not in _OK_FLAGS:
                sel.problems.append(
                    _ml.problem(
                        "runner.unknown_option",
                        f"googletest: unknown argument {a!r}; give only --gtest_* flags",
                    )
                )
        if len(filters) > 1:
            sel.problems.append(
                _ml.problem("runner.arguments", "googletest: --gtest_filter given more than once")
            )
        positive = filters[-1].split("-", 1)[0] if filters else ""
        pats = [p for p in positive.split(":") if p]
        if not pats:
            sel.selectors.append(
                Selector(cmd.render(), "suite", note="no positive --gtest_filter: every test of the binary")
            )
            return sel
        for p in pats:
            if "*" in p or "?" in p:
                sel.selectors.append(Selector(p, "pattern", note="`*`/`?` are wildcards"))
            else:
                sel.selectors.append(Selector(p, "node", Node(self.name, p, path=cmd.argv[0], text=p)))
        return sel

    def parse_node(self, text: str) -> Node:
        return Node(self.name, text.strip(), text=text.strip())

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        return Node(self.name, name, text=name)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        binary = None
        for off in _ml.official_commands(task):
            if is_gtest_command(off) or (off.argv and not off.argv[0].endswith("ctest")):
                binary = off.argv[0]
            elif off.argv and _ml.basename(off.argv[0]) == "ctest":
                args = list(off.argv[1:])
                build = args[args.index("--test-dir") + 1] if "--test-dir" in args else "build"
                name = args[args.index("-R") + 1] if "-R" in args else None
                if name and re.match(r"^[\w.+-]+$", name):
                    binary = f"./{build}/bin/{name}"
            break
        binary = binary or next((n.path for n in nodes if n.path), "./test")
        names = ":".join(_ml.unique(n.name for n in nodes))
        return f"{_ml.q(binary)} {_ml.q('--gtest_filter=' + names)}"

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        return cmd.with_argv([a for a in cmd.argv if not a.startswith("--gtest_brief")])

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return results.get(node.name)
