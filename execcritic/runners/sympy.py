"""SymPy's own runner: `bin/test [options] [paths] -k name...`.

What bin/test actually does (sympy/testing/runtests.py, and bin/test of 1.0-1.12, read from the
sources): a path argument selects every test file whose path *contains* it (`p in f`) or whose
basename matches it as a glob - so `sympy/core/tests/test_arit.py` is one file, `test_arit.py` or
`sympy/core` are many. `-k` takes every following argument up to the next option (`nargs='*'`; the
optparse era used a callback that does the same) and keeps a test function iff one keyword is a
*substring* of its name (case-insensitive since 1.6). There is no exact-match option (`-E` is
`--enhance-asserts`).

So `bin/test path.py -k test_x` is node level when `test_x` is a whole test name, but it also runs
every test in those files whose name contains `test_x` (`test_x_other`). The validator reports such
an over-match whenever it can see the other name (in the patch, or in the Base file when it has a
reader); the official bundles declare the over-matched names too, so that selected == declared.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Iterable, Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Outcome, Selection, Selector
from execcritic.bundle.problems import TEST_COMMAND, Problem
from execcritic.runners._python import is_python, python_main
from execcritic.runners.base import Runner
from execcritic.runners.pytest import norm_path, official_test_line
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_NAME = re.compile(r"^test\w*$")
_VALUE = {"--tb", "--seed", "-t", "--types", "--timeout", "--split", "--rerun"}
_FLAGS = {
    "-v",
    "--verbose",
    "--no-colors",
    "--force-colors",
    "--random",
    "-C",
    "--no-cache",
    "--slow",
    "--no-subprocess",
    "-E",
    "--enhance-asserts",
    "--fail-on-timeout",
}
_REJECT = {
    "--pdb": "an interactive debugger waits for input; remove it",
    "--split": "`--split` runs only a share of the selected tests; select the nodes instead",
    "-h": "prints help and runs nothing",
    "--help": "prints help and runs nothing",
}
DEFAULT_PREFIX = ["PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning", "bin/test", "-C", "--verbose"]


def keyword_matches(keyword: str, name: str) -> bool:
    """SymPy's -k test: a substring match (case-insensitive in current releases; we assume the wider
    one so that an over-match is never missed)."""
    return keyword.lower() in name.lower()


class SympyRunner(Runner):
    name = "sympy"
    language = "python"
    log_parser = "parse_log_sympy"
    reporter = "sympy"

    def serves(self, task: "Task") -> bool:
        return task.repo == "sympy/sympy" or task.log_parser == "parse_log_sympy"

    def _args(self, cmd: ParsedCommand) -> list[str] | None:
        argv = list(cmd.argv)
        if not argv:
            return None
        i = 0
        if is_python(argv[0]):
            main = python_main(argv)
            if main is None or main[0] != "script":
                return None
            i = main[1]
        prog = argv[i].removeprefix("/testbed/").removeprefix("./")
        cwd = cmd.cwd_in_repo()
        where = f"{cwd}/{prog}".strip("/") if cwd and not argv[i].startswith("/") else prog
        if where == "bin/test":
            return argv[i + 1 :]
        return None

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return self._args(cmd) is not None

    def _split(self, args: list[str]) -> tuple[list[str], list[str], list[Problem], bool]:
        paths: list[str] = []
        keywords: list[str] = []
        problems: list[Problem] = []
        saw_k = False
        i = 0
        while i < len(args):
            a = args[i]
            if a == "-k":
                saw_k = True
                i += 1
                while i < len(args) and not (args[i].startswith("-") and len(args[i]) > 1):
                    keywords.append(args[i])
                    i += 1
                continue
            if a.startswith("-k") and len(a) > 2 and not a.startswith("--"):
                saw_k = True
                keywords.append(a[2:])
                i += 1
                continue
            if a.startswith("-"):
                name, eq, _value = a.partition("=")
                if name in _REJECT:
                    problems.append(
                        Problem("runner.forbidden_option", TEST_COMMAND, f"bin/test {name}: {_REJECT[name]}")
                    )
                if name in _VALUE and not eq:
                    i += 2
                    continue
                if name not in _VALUE and name not in _FLAGS and name not in _REJECT:
                    problems.append(
                        Problem(
                            "runner.unknown_option",
                            TEST_COMMAND,
                            f"bin/test option {name!r} is not one this harness knows (bin/test "
                            "passes unknown options on as test paths); remove it",
                        )
                    )
                i += 1
                continue
            paths.append(a)
            i += 1
        return paths, keywords, problems, saw_k

    def selection(self, cmd: ParsedCommand) -> Selection:
        args = self._args(cmd)
        sel = Selection()
        if args is None:
            sel.problems.append(Problem("runner.unrecognized", TEST_COMMAND, "not SymPy's bin/test"))
            return sel
        paths, keywords, problems, saw_k = self._split(args)
        sel.problems.extend(problems)
        cwd = cmd.cwd_in_repo()
        files = []
        for p in paths:
            level, note = self._path_level(p)
            if level == "file" and keywords:
                files.append(norm_path(p, cwd))
                continue
            sel.selectors.append(Selector(p, level, note=note))
        if saw_k and not keywords:
            sel.problems.append(
                Problem("runner.bad_option", TEST_COMMAND, "`-k` needs at least one test name")
            )
        if keywords and not paths:
            sel.selectors.append(
                Selector(
                    "(no paths)",
                    "suite",
                    note="-k without a test file searches every test file; name the file(s)",
                )
            )
        for kw in keywords:
            if _NAME.match(kw):
                path = files[0] if len(files) == 1 else None
                sel.selectors.append(
                    Selector(
                        kw,
                        "node",
                        node=Node(self.name, kw, path, (), None, kw),
                        note="substring match: also runs tests whose names contain it",
                    )
                )
            else:
                sel.selectors.append(
                    Selector(
                        kw,
                        "pattern",
                        note="-k keeps every test whose name contains this text; give whole test_* names",
                    )
                )
        if not paths and not keywords:
            sel.selectors.append(
                Selector("(no arguments)", "suite", note="bin/test alone runs the whole suite")
            )
        return sel

    @staticmethod
    def _path_level(p: str) -> tuple[str, str]:
        if re.search(r"[*?\[]", p):
            return "pattern", "a glob selects every matching file"
        if "::" in p or ":" in p:
            return "unknown", "bin/test does not understand `path::name`; write `path -k name`"
        if p.endswith(".py"):
            if "/" not in p.strip("/"):
                return "pattern", "a bare file name matches that name in every directory; give the path"
            return "file", "selects every test in the file (add -k with the test names)"
        return "directory", "selects every test file under it"

    # ---- nodes -----------------------------------------------------------------------------------
    def parse_node(self, text: str) -> Node:
        """`test_x`, `path.py::test_x` or `path.py:test_x` (the form bin/test prints in failure
        headers)."""
        s = text.strip()
        m = re.match(r"^(?P<path>.+\.py)::?(?P<name>\w+)$", s)
        if m:
            return Node(self.name, m.group("name"), norm_path(m.group("path")), (), None, s)
        return Node(self.name, s, None, (), None, s)

    def binds(self, selected: Node, declared: Node) -> bool:
        if selected.name != declared.name:
            return False
        if declared.path and selected.path:
            a, b = selected.path.strip("/"), declared.path.strip("/")
            return a == b or a.endswith("/" + b) or b.endswith("/" + a)
        return True

    def selected_files(self, cmd: ParsedCommand) -> list[str]:
        """The file paths a node-level command restricts its keywords to."""
        args = self._args(cmd) or []
        paths, _kw, _p, _k = self._split(args)
        return [norm_path(p, cmd.cwd_in_repo()) for p in paths if self._path_level(p)[0] == "file"]

    def overmatches(self, cmd: ParsedCommand, known: dict[str, Iterable[str]]) -> dict[str, list[str]]:
        """{keyword: [other test names it also selects]} given the test names known per file
        (`known`: path -> names). Only names in the command's files count."""
        args = self._args(cmd) or []
        _paths, keywords, _p, _k = self._split(args)
        files = self.selected_files(cmd)
        out: dict[str, list[str]] = {}
        for kw in keywords:
            if not _NAME.match(kw):
                continue
            extra = sorted(
                {
                    n
                    for f, names in known.items()
                    if any(_same(f, g) for g in files)
                    for n in names
                    if n != kw and keyword_matches(kw, n)
                }
            )
            if extra:
                out[kw] = extra
        return out

    # ---- commands --------------------------------------------------------------------------------
    def command_prefix(self, task: "Task | None") -> list[str]:
        line = official_test_line(task) if task else None
        if line:
            tokens = shlex.split(line)
            prefix: list[str] = []
            seen_program = False
            for tok in tokens:
                if seen_program and not tok.startswith("-"):
                    break
                prefix.append(tok)
                seen_program = seen_program or tok.endswith("bin/test")
            if any(p.endswith("bin/test") for p in prefix):
                return prefix
        return list(DEFAULT_PREFIX)

    def build_command(self, nodes: Sequence[Node], *, task: "Task | None" = None) -> str:
        files: list[str] = []
        names: list[str] = []
        for node in nodes:
            if not node.path:
                raise ValueError(f"SymPy node {node} has no test file; bin/test needs `path -k name`")
            if node.path not in files:
                files.append(node.path)
            if node.name not in names:
                names.append(node.name)
        prefix = self.command_prefix(task)
        return " ".join(
            [
                *(_quote_assignment(t) for t in prefix),
                *(shlex.quote(f) for f in files),
                "-k",
                *(shlex.quote(n) for n in names),
            ]
        )

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """`--verbose` makes bin/test print one `test_x ok|F|E` line per test (what the parser reads)."""
        args = self._args(cmd)
        if args is None or "--verbose" in args or "-v" in args:
            return cmd
        argv = list(cmd.argv)
        start = len(argv) - len(args)
        argv.insert(start, "--verbose")
        return cmd.with_argv(argv)

    def in_process_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """`--no-subprocess`: `bin/test` otherwise re-runs itself in a child interpreter only to pick a random
        hash seed; the harness picks (and records) the seed itself and keeps the tests in this process."""
        args = self._args(cmd)
        if args is None or "--no-subprocess" in args:
            return cmd
        argv = list(cmd.argv)
        argv.insert(len(argv) - len(args), "--no-subprocess")
        return cmd.with_argv(argv)

    # ---- results ---------------------------------------------------------------------------------
    def parse_results(self, log: str, parser: str | None = None) -> dict[str, str]:
        """swebench's SymPy parser, plus what it does not read: the last test of each file (bin/test prints
        the file's `[OK]`/`[FAIL]` on that test's line, `test_x ok     [OK]`, which the parser's
        `endswith(" ok")` misses), and the expected-failure markers `f` (an @XFAIL test failed, as its
        author expected) and `X` (it passed unexpectedly). Without them a declared @XFAIL node looks
        absent although it ran."""

        results = dict(parser_for(parser or self.log_parser)(log))
        status = {"ok": "PASSED", "F": "FAILED", "E": "ERROR", "f": "XFAIL", "X": "XPASS"}
        for line in log.split("\n"):
            m = re.match(r"^\s*(test\w*) (ok|F|E|f|X)(?:\s+\[(?:OK|FAIL)\])?\s*$", line)
            if m:
                results.setdefault(m.group(1), status[m.group(2)])
        return results

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        if node.name in results:
            return results[node.name]
        for key, status in results.items():
            if key.endswith(":" + node.name) and (not node.path or key.startswith(node.path[:-3])):
                return status
        return None

    def outcome(self, status: str) -> Outcome:
        if status == "ERROR":
            return Outcome.FAILED  # bin/test `E`: an exception raised inside the test function
        return super().outcome(status)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        out = []
        for line in log.splitlines():
            m = re.match(r"^(\S+\.py)\[\?\]\s+Failed to import", line.strip())
            if m:
                out.append(f"failed to import {m.group(1)}")
        return out


def _same(a: str, b: str) -> bool:
    a, b = a.strip("/"), b.strip("/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _quote_assignment(token: str) -> str:
    if "=" in token and re.match(r"^[A-Za-z_]\w*=", token):
        name, _, value = token.partition("=")
        return f"{name}={shlex.quote(value)}"
    return shlex.quote(token)
