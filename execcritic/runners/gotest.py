"""go test: node ids are test names as `go test -v` prints them, `TestX` or `TestX/sub/case`.

Selection rule (cmd/go + testing, `-run regexp`): the pattern is split at every `/` that is outside
brackets and parentheses into one regexp per level; a test name is split at `/` into elements and
element i must *contain a match* of regexp i (unanchored search). Levels beyond the pattern are not
filtered, so `-run '^TestX$'` runs TestX with all its subtests. Hence:
  - node level: every level is anchored `^...$` and is a literal name or a literal alternation,
    e.g. `-run '^TestX$'`, `-run '^(TestA|TestB)$'`, `-run '^TestX$/^case_1$'`. The selected nodes
    are the cross product of the levels (exact names; a combination that does not exist runs
    nothing). `^TestX$` selects the whole function, so it binds TestX and any `TestX/...` subtest;
    `^TestX$/^a$` binds TestX/a and (because TestX itself runs) TestX.
  - `pattern`: any level unanchored or with regex operators (`-run TestX` also runs TestX2,
    `-run '^Test.*Import'`).
  - no `-run`: `file` level - every test of each package.
  - packages: `./dir` or an import path is one package; a `...` wildcard is `directory` level.
Rejected: `-exec`/`-toolexec` (run the test binary through another program), `-c`, `-n`,
`-list` (run nothing), `-json` (another output format), `-overlay` (replaces source files), `-args`
and raw `-test.*` flags (bypass the parsed flags), `-bench`/`-fuzz` (run more than tests), and a
`GOFLAGS` environment variable (refused by the command parser).

Results: swebench's `parse_log_gotest` (`--- PASS|FAIL|SKIP: name (0.00s)`); observed_command adds
`-v` so passing tests are printed. A build failure prints no `---` line: every node is absent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import product
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_NO_RUN = "builds or prints the test binary without running the tests; remove it"
_OPTS: dict[str, Opt] = {
    "-run": Opt(True, "select"),
    "-skip": OKV,
    **{
        k: OKV
        for k in (
            "-count",
            "-cpu",
            "-parallel",
            "-timeout",
            "-tags",
            "-p",
            "-o",
            "-coverprofile",
            "-covermode",
            "-coverpkg",
            "-cpuprofile",
            "-memprofile",
            "-blockprofile",
            "-mutexprofile",
            "-outputdir",
            "-trace",
            "-ldflags",
            "-gcflags",
            "-asmflags",
            "-mod",
            "-modfile",
            "-pkgdir",
            "-vet",
            "-shuffle",
            "-C",
            "-benchtime",
            "-memprofilerate",
            "-blockprofilerate",
            "-mutexprofilefraction",
            "-installsuffix",
            "-buildmode",
            "-compiler",
            "-gccgoflags",
            "-buildvcs",
            "-fuzztime",
            "-fuzzminimizetime",
        )
    },
    **{
        k: OK
        for k in (
            "-v",
            "-race",
            "-msan",
            "-asan",
            "-cover",
            "-short",
            "-failfast",
            "-a",
            "-x",
            "-benchmem",
            "-trimpath",
            "-work",
            "-linkshared",
            "-fullpath",
        )
    },
    "-exec": reject(
        "runs the test binary through another program, which decides the exit status; remove it", takes=True
    ),
    "-toolexec": reject("runs the build tools through another program; remove it", takes=True),
    "-overlay": reject("replaces source files at build time; remove it", takes=True),
    "-c": reject(_NO_RUN),
    "-n": reject(_NO_RUN),
    "-i": reject(_NO_RUN),
    "-list": reject("lists tests without running them; remove it", takes=True),
    "-json": reject("switches to JSON output; the harness reads `go test -v` text - remove it"),
    "-bench": reject("also runs benchmarks; select tests only", takes=True),
    "-fuzz": reject("runs the fuzzer; select tests only", takes=True),
    "-args": reject("passes the rest of the line to the test binary unparsed; remove it"),
}


def _go_args(cmd: ParsedCommand) -> list[str] | None:
    argv = list(cmd.argv)
    if len(argv) >= 2 and _ml.basename(argv[0]) == "go" and argv[1] == "test":
        return argv[2:]
    return None


def split_levels(pattern: str) -> list[str]:
    """Split a -run pattern at `/` outside [...] and (...), as testing.splitRegexp does."""
    out, cur, cs, cp, i = [], [], 0, 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            cur.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[":
            cs += 1
        elif ch == "]" and cs > 0:
            cs -= 1
        elif ch == "(" and cs == 0:
            cp += 1
        elif ch == ")" and cs == 0:
            cp -= 1
        elif ch == "/" and cs == 0 and cp == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def _norm_pkg(pkg: str, cwd: str = "") -> str:
    if pkg.startswith(("./", "../", "/")) or pkg == ".":
        return _ml.norm_rel(pkg, cwd)
    return pkg  # import path


class GoTestRunner(Runner):
    name = "gotest"
    language = "go"
    log_parser = "parse_log_gotest"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_gotest"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _go_args(cmd) is not None

    def _walk(self, cmd: ParsedCommand) -> _ml.Walked:
        args = []
        raw = list(_go_args(cmd) or [])
        if "-args" in raw:  # the rest goes to the test binary unparsed (refused)
            raw = raw[: raw.index("-args") + 1]
        for a in raw:
            # go's flag package accepts --flag as -flag
            args.append(a[1:] if a.startswith("--") and len(a) > 2 else a)
        return _ml.walk_options(args, _OPTS, runner="go test", short_attached=False, stop_at_dd=False)

    def selection(self, cmd: ParsedCommand) -> Selection:
        w = self._walk(cmd)
        sel = Selection(problems=list(w.problems))
        for a in w.positionals:
            if a.startswith("-test."):
                sel.problems.append(
                    _ml.problem(
                        "runner.option",
                        f"go test: raw test-binary flag {a} bypasses the parsed flags; use -run",
                    )
                )
        pkgs = [p for p in w.positionals if not p.startswith("-test.")] or ["."]
        cwd = cmd.cwd_in_repo()
        plain_pkgs = []
        for p in pkgs:
            if "..." in p:
                sel.selectors.append(Selector(p, "directory", note="`...` matches every package below it"))
            else:
                plain_pkgs.append(_norm_pkg(p, cwd))
        runs = _ml.values(w, "-run")
        if len(runs) > 1:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "go test: -run given more than once; only the last one applies - give one -run",
                )
            )
        if not runs:
            for p in plain_pkgs:
                sel.selectors.append(Selector(p or ".", "file", note="no -run: every test of the package"))
            return sel
        pattern = runs[-1]
        levels = []
        for lv in split_levels(pattern):
            names = _ml.anchored_literals(lv)
            if names is None:
                sel.selectors.append(
                    Selector(
                        pattern,
                        "pattern",
                        note="each `/`-separated level of -run must be anchored ^...$ and list literal names",
                    )
                )
                return sel
            levels.append(names)
        for pkg in plain_pkgs:
            for combo in product(*levels):
                name = combo[0]
                sub = "/".join(combo[1:]) or None
                text = "/".join(combo)
                sel.selectors.append(
                    Selector(text, "node", Node(self.name, name, path=pkg or ".", param=sub, text=text))
                )
        return sel

    def parse_node(self, text: str) -> Node:
        text = text.strip()
        name, _, sub = text.partition("/")
        return Node(self.name, name, param=sub or None, text=text)

    def binds(self, selected: Node, declared: Node) -> bool:
        """A whole function (`^TestX$`) binds its subtests too: go runs every subtest of it."""
        if selected.name != declared.name:
            return False
        if declared.path and selected.path and not _same_pkg(selected.path, declared.path):
            return False
        if declared.param is None or selected.param is None:
            return True
        return selected.param == declared.param

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        pkg = path.rsplit("/", 1)[0] if "/" in path else "."
        return Node(self.name, name, path=pkg, text=name)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`go test -v <packages> -run '<anchored names>'`; the package of each test is the directory
        of the `_test.go` file that defines it in the row's test patch, else the official command's."""
        tops = _ml.unique(n.name for n in nodes)
        pkgs = _ml.unique(_norm_pkg(n.path) or "." for n in nodes if n.path) or self._packages_for(tops, task)
        full = {n.name for n in nodes if n.param is None}
        subs = [n for n in nodes if n.param is not None and n.name not in full]
        if not subs:
            pattern = _ml.anchored_regex(tops)
        else:
            depth = max(len(n.param.split("/")) for n in subs)  # type: ignore[union-attr]
            levels: list[list[str]] = [tops] + [[] for _ in range(depth)]
            for n in subs:
                for i, part in enumerate(n.param.split("/"), start=1):  # type: ignore[union-attr]
                    if part not in levels[i]:
                        levels[i].append(part)
            pattern = "/".join(_ml.anchored_regex(lv) for lv in levels)
        parts = ["go", "test", "-v"] + [_pkg_arg(p) for p in pkgs] + ["-run", pattern]
        return " ".join(_ml.q(p) for p in parts)

    def _packages_for(self, tops: list[str], task: Task | None) -> list[str]:
        found: list[str] = []
        missing = list(tops)
        for path, added, post in _ml.test_patch_files(task):
            if not path.endswith("_test.go"):
                continue
            d = path.rsplit("/", 1)[0] if "/" in path else "."
            for t in list(missing):
                if any(re.match(rf"^func\s+{re.escape(t)}\s*\(", ln) for ln in post):
                    found.append(d)
                    missing.remove(t)
        if missing:
            official: list[str] = []
            for off in _ml.official_commands(task):
                args = _go_args(off)
                if args is not None:
                    official += _ml.walk_options(
                        args, _OPTS, runner="go test", short_attached=False, stop_at_dd=False
                    ).positionals
            test_dirs = _ml.unique(
                (p.rsplit("/", 1)[0] if "/" in p else ".")
                for p, _a, _post in _ml.test_patch_files(task)
                if p.endswith("_test.go")
            )
            for pkg in official:
                if "..." not in pkg:
                    found.append(pkg)
                    continue
                # a `...` pattern: the packages under it whose test files the patch changes
                root = _ml.norm_rel(pkg.replace("...", "").rstrip("/") or ".")
                under = [d for d in test_dirs if root in ("", ".") or d == root or d.startswith(root + "/")]
                found += under or [pkg]  # none: keep `...`, selection() reports it
        return _ml.unique(p if "..." in p else (_norm_pkg(p) or ".") for p in found) or ["."]

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        argv = list(cmd.argv)
        if "-v" not in argv and "--v" not in argv and "-v=true" not in argv:
            argv.insert(2, "-v")
        return cmd.with_argv(argv)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        key = node.name + ("/" + node.param if node.param else "")
        return results.get(key)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        return [
            ln.strip()[:200]
            for ln in log.splitlines()
            if re.match(
                r"^(FAIL\s+\S+\s+\[(build|setup) failed\]|# \S+|.*: cannot find package|"
                r"panic: test timed out)",
                ln.strip(),
            )
        ][:20]


def _pkg_arg(pkg: str) -> str:
    """A package as a `go test` argument: repository directories as `./dir`, `.` for the root."""
    if pkg in ("", ".") or pkg.startswith(("./", "../", "/")):
        return pkg or "."
    if "." in pkg.split("/")[0]:
        return pkg  # import path (github.com/...)
    return "./" + pkg


def _same_pkg(a: str, b: str) -> bool:
    a, b = a.strip("/").removeprefix("./"), b.strip("/").removeprefix("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)
