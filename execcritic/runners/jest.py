"""jest (babel, docusaurus, immutable-js): node ids are test titles as `jest --verbose` prints them
(SWE-bench's `parse_log_jest` keeps the *leaf* title) or `describe > ... > title` chains (its
`parse_log_jest_json`, immutable-js 2005).

Selection rule (jest-circus, checked on jest 29): `-t/--testNamePattern` is a regex compiled with
the `i` flag and tested (search) against the test's full name = enclosing describe titles and the
title joined by single spaces. Positional arguments are regexes over test *file* paths. So:
  - `-t '^outer group adds numbers$'` or `-t '^(?:A x|B y)$'` (anchored, literal full names) is node
    level. Two caveats, both documented rather than hidden: the match ignores letter case (a title
    differing only in case also runs - seen on a real run), and a space in a title cannot be told from
    the describe/title boundary. Extra tests that run are not declared and never read.
  - any other `-t` is `pattern`; file positionals without `-t` are `file`; nothing at all is `suite`.
Refused: `-u/--updateSnapshot` (rewrites the expectations so the run passes), `--watch*` (never
exits), `--listTests`/`--showConfig` (run nothing), `--passWithNoTests`, and selection by VCS or
cache state (`-o`, `--changedSince`, `--lastCommit`, `--findRelatedTests`, `-f/--onlyFailures`).

Binding: a declared `A > B > title` binds the selected full name `A B title`; a leaf-only `title`
(SWE-bench's naming) binds a selected full name ending in ` title`. build_command needs the chain:
it is recovered from the row's test patch when the patch shows it (see `_ml.recover_chains`);
otherwise the leaf title cannot be selected exactly and build_command refuses.

Results: parse_results reads the verbose tree itself (PASS/FAIL file header, describe lines by
indentation, `✓ ✕ ○` test lines) and keys each test both by leaf title (SWE-bench's jest naming) and
by `describe > title` chain (its jest-json naming). `○ skipped` is not run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.languages._describe import JS_GROUP, JS_LEAF, js_unquote
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.errors import InputError
from execcritic.runners import _js, _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_STATE = "selects tests from version-control or cache state, not by name; name the tests with -t"
_OPTS: dict[str, Opt] = {
    "-t": Opt(True, "select"),
    "--testNamePattern": Opt(True, "select"),
    "--testPathPattern": Opt(True, "select"),
    "--testPathPatterns": Opt(True, "select"),
    **{
        k: OKV
        for k in (
            "--testPathIgnorePatterns",
            "-c",
            "--config",
            "--rootDir",
            "--roots",
            "--selectProjects",
            "--testTimeout",
            "-w",
            "--maxWorkers",
            "--reporters",
            "--coverageReporters",
            "--outputFile",
            "--seed",
            "--testEnvironment",
            "--env",
            "--maxConcurrency",
            "--coverageDirectory",
            "--collectCoverageFrom",
            "--workerIdleMemoryLimit",
            "--cacheDirectory",
            "--testLocationInResults",
        )
    },
    **{
        k: OK
        for k in (
            "--verbose",
            "--silent",
            "--ci",
            "--no-ci",
            "-i",
            "--runInBand",
            "--coverage",
            "--no-coverage",
            "--colors",
            "--no-colors",
            "--color",
            "--no-color",
            "--detectOpenHandles",
            "--forceExit",
            "-b",
            "--bail",
            "--no-cache",
            "--cache",
            "--clearMocks",
            "--resetMocks",
            "--restoreMocks",
            "--logHeapUsage",
            "--json",
            "--noStackTrace",
            "--useStderr",
            "-e",
            "--expand",
            "--errorOnDeprecated",
            "--injectGlobals",
            "--no-watchman",
            "--watchman",
            "--debug",
            "--detectLeaks",
            "--randomize",
            "--verbose=true",
            "--no-verbose",
        )
    },
    "-u": reject("rewrites snapshots so that snapshot assertions pass; remove it"),
    "--updateSnapshot": reject("rewrites snapshots so that snapshot assertions pass; remove it"),
    "--watch": reject("keeps running and never exits"),
    "--watchAll": reject("keeps running and never exits"),
    "--listTests": reject("lists test files without running them"),
    "--showConfig": reject("prints the configuration without running tests"),
    "--clearCache": reject("deletes the cache and runs nothing"),
    "--passWithNoTests": reject("reports success when no test ran"),
    "-o": reject(_STATE),
    "--onlyChanged": reject(_STATE),
    "--changedSince": reject(_STATE, takes=True),
    "--lastCommit": reject(_STATE),
    "--findRelatedTests": reject(_STATE),
    "-f": reject(_STATE),
    "--onlyFailures": reject(_STATE),
    "--shard": reject("runs a shard chosen by position, not by name", takes=True),
    "--testRegex": reject("changes which files count as tests", takes=True),
    "--testMatch": reject("changes which files count as tests", takes=True),
}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FILE_HEADER = re.compile(r"^\s*(PASS|FAIL|RUNS)\s+(\S.*?)(?:\s+\(\d.*\))?\s*$")
_TEST_LINE = re.compile(r"^(?P<ind>\s*)(?P<sym>[✓✕○√×])\s(?P<rest>.+?)(?:\s\((?:\d+(?:\.\d+)?\s*m?s)\))?\s*$")
_SUMMARY = re.compile(r"^\s*(Tests?|Test Suites|Snapshots|Time|Ran all)\b")


def parse_jest_verbose(log: str) -> dict[str, str]:
    """Statuses from `jest --verbose` output, keyed by leaf title and by `describe > title` chain."""
    results: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    in_file = False
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        if not line.strip():
            continue
        if _FILE_HEADER.match(line) and not line.startswith(" " * 4):
            stack, in_file = [], True
            continue
        if (
            not in_file
            or _SUMMARY.match(line)
            or line.lstrip().startswith(("●", "at ", ">", "|", "Expected", "Received"))
        ):
            if _SUMMARY.match(line):
                in_file = False
            continue
        ind = len(line) - len(line.lstrip())
        m = _TEST_LINE.match(line)
        while stack and stack[-1][0] >= ind:
            stack.pop()
        if m:
            sym, title = m.group("sym"), m.group("rest").strip()
            if sym == "○":
                status = "SKIPPED"
                title = re.sub(r"^(skipped|todo)\s+", "", title)
            else:
                status = "PASSED" if sym in "✓√" else "FAILED"
            chain = " > ".join([d for _, d in stack] + [title])
            for key in (title, chain):
                if results.get(key) != "FAILED":
                    results[key] = status
            continue
        if ind >= 2 and len(line.strip()) < 300:
            stack.append((ind, line.strip()))
    return results


FULL_NAME = "<full name>"  # param of a node taken from -t: its name is the full space-joined name


def split_chain(text: str) -> tuple[tuple[str, ...], str]:
    parts = [p for p in text.strip().split(" > ")]
    return tuple(parts[:-1]), parts[-1]


def binds_full_name(selected: str, scope: Sequence[str], name: str, *, case_insensitive: bool) -> bool:
    def norm(s: str) -> str:
        return s.lower() if case_insensitive else s

    if scope:
        return norm(" ".join((*scope, name))) == norm(selected)
    return norm(selected) == norm(name) or norm(selected).endswith(" " + norm(name))


class JestRunner(Runner):
    name = "jest"
    language = "javascript"
    log_parser = "parse_log_jest"

    def serves(self, task: Task) -> bool:
        return task.log_parser in ("parse_log_jest", "parse_log_jest_json", "parse_log_immutable_js")

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _js.tool_args(cmd, ("jest",)) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        _launcher, args = _js.tool_args(cmd, ("jest",)) or ("", [])
        w = _ml.walk_options(args, _OPTS, runner="jest", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        sel.problems += _ml.env_problems(cmd, "jest", forbidden={"JEST_WORKER_ID"})
        paths = w.positionals + _ml.values(w, "--testPathPattern", "--testPathPatterns")
        names = _ml.values(w, "-t", "--testNamePattern")
        if len(names) > 1:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "jest: -t given more than once; only the last applies - give one anchored alternation",
                )
            )
        if not names:
            for p in paths:
                sel.selectors.append(
                    Selector(p, "file", note="a path pattern runs every test of the matching files")
                )
            if not paths:
                sel.selectors.append(Selector(cmd.render(), "suite", note="no -t and no path: every test"))
            return sel
        pattern = names[-1]
        literals = _ml.anchored_literals(pattern)
        if literals is None:
            sel.selectors.append(
                Selector(
                    pattern,
                    "pattern",
                    note="-t is a case-insensitive regex searched in "
                    "the full test name; anchor it ^(?:...)$ and "
                    "list escaped full names",
                )
            )
            return sel
        path = paths[0] if len(paths) == 1 else None
        for lit in literals:
            sel.selectors.append(
                Selector(lit, "node", Node(self.name, lit, path=path, param=FULL_NAME, text=lit))
            )
        return sel

    def parse_node(self, text: str) -> Node:
        scope, name = split_chain(text)
        return Node(self.name, name, scope=scope, text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        if declared.path and selected.path and not _js_path_match(selected.path, declared.path):
            return False
        if selected.param != FULL_NAME:  # a node named like SWE-bench's ids (an added test)
            return selected.name == declared.name and (
                not selected.scope or not declared.scope or tuple(selected.scope) == tuple(declared.scope)
            )
        return binds_full_name(selected.name, declared.scope, declared.name, case_insensitive=True)

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        """A test the patch adds, named like SWE-bench's jest ids (leaf title); build_command recovers
        its describe chain from the patch."""
        return Node(self.name, name, path=path, text=name)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`<launcher> jest <file> -t '^(?:full name|...)$' --verbose`. Leaf-only nodes get their
        describe chain from the row's test patch (refused when the patch does not show it)."""
        launcher = "npx jest"
        for off in _ml.official_commands(task):
            tool = _js.tool_args(off, ("jest",))
            if tool:
                launcher = tool[0]
            elif off.argv and _ml.basename(off.argv[0]) in ("yarn", "npm", "pnpm"):
                launcher = f"{off.argv[0]} jest"
            break
        full_names, files = [], []
        for n in nodes:
            if n.param == FULL_NAME:
                full_names.append(n.name)
                continue
            if n.scope:
                full_names.append(" ".join((*n.scope, n.name)))
                if n.path:
                    files.append(n.path)
                continue
            hits = _ml.recover_chains(
                task, n.name, leaf=JS_LEAF, group=JS_GROUP, path_ok=_js.is_test_file, unquote=js_unquote
            )
            distinct = {(h.path, h.chain) for h in hits}
            if not distinct:
                raise InputError(
                    f"jest: cannot select {n.name!r} exactly - SWE-bench names it by its leaf title "
                    "and the test patch does not show its describe chain (jest -t matches the full "
                    "name)",
                    instance=task.instance_id if task else None,
                    field="FAIL_TO_PASS",
                )
            for path, chain in sorted(distinct):  # the same title in several places: SWE-bench's id
                full_names.append(" ".join((*chain, n.name)))  # covers them all, so select them all
                files.append(path)
        parts = (
            launcher.split(" ")
            + _ml.unique(files)
            + ["-t", _ml.anchored_regex(_ml.unique(full_names)), "--verbose"]
        )
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        argv = list(cmd.argv)
        if not any(a == "--verbose" or a.startswith("--verbose=") for a in argv):
            argv.append("--verbose")
        return cmd.with_argv(argv)

    def parse_results(self, log: str) -> dict[str, str]:
        return parse_jest_verbose(log)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        key = " > ".join((*node.scope, node.name))
        return results.get(key)


def _js_path_match(selected: str, declared: str) -> bool:
    s, d = selected.strip("/").removeprefix("./"), declared.strip("/").removeprefix("./")
    return s == d or s.endswith("/" + d) or d.endswith("/" + s) or s in d
