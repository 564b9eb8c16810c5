"""cargo test (Rust): node ids are libtest's full test paths, `module::tests::name`.

Selection rule (libtest, `rustc --test` harness): every filter - the TESTNAME before `--` and each
positional after it - is a *substring* match on the full test path unless `--exact` is given, in
which case it must equal the path. So:
  - `cargo test -- a::b::t1 a::b::t2 --exact` and `cargo test a::b::t1 -- --exact` are node level;
  - `cargo test t1` and `cargo test -- a::b` are `pattern` (they also run `a::b::t10`, `x::t1_y`);
  - no filter at all is `suite` (every test of the selected targets).
Target flags (`-p`, `--lib`, `--test NAME`, `--features`) only choose which test binaries are built;
they never widen an exact filter, so they are allowed. Options that build without running
(`--no-run`), only list (`-- --list`), run benchmarks, or use unstable switches are rejected.
`RUSTFLAGS` is refused by the command parser (it can carry linker/codegen options); the safe part
of it (`--cfg NAME`, lint levels) is expressed as `--config 'build.rustflags=[...]'`, which this
runner accepts only with such flags - the tokio rows need `--cfg tokio_unstable`.
Environment variables that configure cargo or rustc (`CARGO_*`, `RUSTC_WRAPPER`, ...) are refused:
`CARGO_TARGET_<triple>_RUNNER=true` would "run" every test binary as `true`.

Results: swebench's `parse_log_cargo` (`test a::b ... ok|FAILED`); `ignored` tests are absent, i.e.
not run. A compile error leaves every node absent, which the harness reports as operational.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_CARGO_OPTS: dict[str, Opt] = {
    **{
        k: OKV
        for k in (
            "-p",
            "--package",
            "--exclude",
            "--test",
            "--bin",
            "--example",
            "--bench",
            "-F",
            "--features",
            "--target",
            "--target-dir",
            "--manifest-path",
            "--profile",
            "-j",
            "--jobs",
            "--color",
            "--message-format",
            "--lockfile-path",
        )
    },
    **{
        k: OK
        for k in (
            "--lib",
            "--bins",
            "--tests",
            "--examples",
            "--benches",
            "--all-targets",
            "--doc",
            "--workspace",
            "--all",
            "--all-features",
            "--no-default-features",
            "--release",
            "-r",
            "--no-fail-fast",
            "--frozen",
            "--locked",
            "--offline",
            "-v",
            "--verbose",
            "-vv",
            "-q",
            "--quiet",
            "--ignore-rust-version",
            "--timings",
            "--future-incompat-report",
            "--keep-going",
        )
    },
    "--config": Opt(True, "select"),  # checked by _config_problem
    "--no-run": reject("compiles the tests without running them; remove it"),
    "-Z": reject(
        "enables unstable cargo behaviour that can change how tests are built and run; remove it", takes=True
    ),
    "-h": reject("prints help and runs nothing"),
    "--help": reject("prints help and runs nothing"),
}
_HARNESS_OPTS: dict[str, Opt] = {
    "--exact": Opt(False, "select"),
    "--skip": OKV,  # only narrows
    **{
        k: OK
        for k in (
            "--nocapture",
            "--no-capture",
            "--show-output",
            "--include-ignored",
            "--ignored",
            "--report-time",
            "--ensure-time",
            "--shuffle",
            "--force-run-in-process",
            "--exclude-should-panic",
            "-q",
            "--quiet",
            "--test",
        )
    },
    **{k: OKV for k in ("--test-threads", "--shuffle-seed", "--color", "--format")},
    "--list": reject("lists the tests without running them; remove it"),
    "--bench": reject("runs benchmarks instead of tests; remove it"),
    "--logfile": reject(
        "writes results to a file instead of the output the harness reads; remove it", takes=True
    ),
    "-Z": reject("enables unstable libtest options; remove it", takes=True),
    "-h": reject("prints help and runs nothing"),
    "--help": reject("prints help and runs nothing"),
}
_SAFE_RUSTFLAG = re.compile(
    r"^(-[AWD][a-z0-9_:-]+|--cap-lints(=\w+)?|--cfg|-A|-W|warnings|"
    r"[A-Za-z_][A-Za-z0-9_]*(=\"[^\"]*\")?)$"
)
_FORBIDDEN_ENV = {
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "RUSTDOCFLAGS",
    "CARGO",
    "RUST_TEST_NOCAPTURE",
}


def _cargo_args(cmd: ParsedCommand) -> list[str] | None:
    argv = list(cmd.argv)
    if not argv or _ml.basename(argv[0]) != "cargo":
        return None
    i = 1
    if i < len(argv) and argv[i].startswith("+"):
        i += 1  # toolchain override, `cargo +nightly test`
    if i < len(argv) and argv[i] in ("test", "t"):
        return argv[i + 1 :]
    return None


def split_path(text: str) -> tuple[tuple[str, ...], str]:
    """`a::b::name` -> (('a', 'b'), 'name'); doc-test ids (`src/lib.rs - f (line 3)`) stay whole."""
    text = text.strip()
    if " - " in text or " (line " in text:
        return (), text
    parts = text.split("::")
    return tuple(parts[:-1]), parts[-1]


def _rustflags_ok(flags: list[str]) -> bool:
    return all(_SAFE_RUSTFLAG.match(f) for f in flags)


def _config_problem(value: str | None) -> list:
    """`--config` may only set build.rustflags to cfg/lint flags (anything else can replace the test
    runner, linker or compiler)."""
    m = re.match(r"^\s*build\.rustflags\s*=\s*(\[.*\])\s*$", value or "", re.DOTALL)
    flags = None
    if m:
        try:
            flags = json.loads(m.group(1))
        except ValueError:
            flags = None
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags) or not _rustflags_ok(flags):
        return [
            _ml.problem(
                "runner.option",
                "cargo: `--config` may only set build.rustflags to `--cfg NAME` "
                'and lint-level flags, e.g. --config \'build.rustflags=["--cfg", '
                '"tokio_unstable"]\'; other keys can replace the test runner or '
                "compiler",
            )
        ]
    return []


class CargoRunner(Runner):
    name = "cargo"
    language = "rust"
    log_parser = "parse_log_cargo"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_cargo"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _cargo_args(cmd) is not None

    def _walk(self, cmd: ParsedCommand):
        args = _cargo_args(cmd) or []
        before = _ml.walk_options(args, _CARGO_OPTS, runner="cargo")
        after = _ml.walk_options(before.after_dd, _HARNESS_OPTS, runner="cargo (libtest)", stop_at_dd=False)
        return before, after

    def selection(self, cmd: ParsedCommand) -> Selection:
        before, after = self._walk(cmd)
        sel = Selection(problems=before.problems + after.problems)
        sel.problems += _ml.env_problems(
            cmd, "cargo", forbidden_prefixes=("CARGO_",), forbidden=_FORBIDDEN_ENV
        )
        for value in _ml.values(before, "--config"):
            sel.problems += _config_problem(value)
        if len(before.positionals) > 1:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "cargo test takes at most one TESTNAME before `--`; put the test names after `--`",
                )
            )
        filters = before.positionals + after.positionals
        exact = _ml.has(after, "--exact")
        if not filters:
            sel.selectors.append(
                Selector(
                    cmd.render(), "suite", note="no test filter: runs every test of the selected targets"
                )
            )
            return sel
        for f in filters:
            if exact:
                scope, name = split_path(f)
                sel.selectors.append(Selector(f, "node", Node(self.name, name, scope=scope, text=f)))
            else:
                sel.selectors.append(
                    Selector(
                        f,
                        "pattern",
                        note="without `-- --exact` a cargo test filter is a substring match on the test path",
                    )
                )
        return sel

    def parse_node(self, text: str) -> Node:
        scope, name = split_path(text)
        return Node(self.name, name, scope=scope, text=text.strip())

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        return Node(self.name, name, path=path, text=name)

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`cargo test <target flags of the official command> -- <full paths> --exact`."""
        keep: list[str] = []
        rustflags: list[str] = []
        for off in _ml.official_commands(task):
            args = _cargo_args(off)
            if args is None:
                continue
            w = _ml.walk_options(args, _CARGO_OPTS, runner="cargo")
            for name, value in w.options:
                if name in (
                    "-p",
                    "--package",
                    "--test",
                    "--bin",
                    "--example",
                    "-F",
                    "--features",
                    "--target",
                    "--manifest-path",
                    "--exclude",
                    "--profile",
                ):
                    keep += [name, value or ""]
                elif name in (
                    "--lib",
                    "--bins",
                    "--tests",
                    "--workspace",
                    "--all",
                    "--all-features",
                    "--no-default-features",
                    "--release",
                    "--no-fail-fast",
                    "--examples",
                ):
                    keep.append(name)
            for k, v in off.env:
                if k == "RUSTFLAGS":
                    rustflags = shlex.split(v)
            break
        parts = ["cargo", "test"] + keep
        if rustflags and _rustflags_ok(rustflags):
            parts += ["--config", "build.rustflags=" + json.dumps(rustflags)]
        names = _ml.unique(self._full_path(n, task) for n in nodes)
        parts += ["--"] + names + ["--exact"]
        return " ".join(_ml.q(p) for p in parts)

    def _full_path(self, node: Node, task: Task | None) -> str:
        """A node's full libtest path. A bare function name (a test the patch adds) gets its module
        path from the dataset's own ids: the id that ends in it, else the common module of the
        dataset ids of its sibling functions in the same file; a function at the top level of an
        integration-test file (`tests/x.rs`) has none."""
        if node.scope or task is None:
            return "::".join((*node.scope, node.name))
        ids = list(task.fail_to_pass) + list(task.pass_to_pass)
        exact = _ml.unique(i for i in ids if i.split("::")[-1] == node.name)
        if len(exact) == 1:
            return exact[0]
        prefixes: set[str] = set()
        for path, _added, post in _ml.test_patch_files(task):
            if node.path and path != node.path:
                continue
            for line in post:
                m = re.match(r"^\s*(?:pub\s+)?(?:async\s+)?fn\s+(\w+)", line)
                if not m or m.group(1) == node.name:
                    continue
                for i in ids:
                    if i.split("::")[-1] == m.group(1):
                        prefixes.add(i.rsplit("::", 1)[0] if "::" in i else "")
        if len(prefixes) == 1:
            prefix = prefixes.pop()
            return f"{prefix}::{node.name}" if prefix else node.name
        if node.path and re.match(r"^(?:[^/]+/)?tests/[^/]+\.rs$", node.path):
            return node.name
        raise ValueError(
            f"cargo: cannot tell the module path of {node.name!r} ({node.path}); libtest's --exact "
            "needs the full path (e.g. `mod::tests::name`)"
        )

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """Drop quiet/terse output switches (libtest then prints one `test x ... ok` line per test) and
        add `--no-fail-fast`: without it cargo stops at the first failing test binary and the nodes of
        the later binaries never run (seen on a real run: a failing lib test hid an integration test)."""
        argv = list(cmd.argv)
        if "--no-fail-fast" not in argv:
            argv.insert(argv.index("--") if "--" in argv else len(argv), "--no-fail-fast")
        out, i, after = [], 0, False
        while i < len(argv):
            a = argv[i]
            if a == "--":
                after = True
            if a in ("-q", "--quiet"):
                i += 1
                continue
            if after and a == "--format":
                i += 2
                continue
            if after and a.startswith("--format="):
                i += 1
                continue
            out.append(a)
            i += 1
        return cmd.with_argv(out)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        full = "::".join((*node.scope, node.name))
        if node.scope or full in results:
            return results.get(full)
        hits = {k: v for k, v in results.items() if k.rsplit("::", 1)[-1] == node.name}
        if len(hits) == 1:
            return next(iter(hits.values()))
        return None  # absent, or ambiguous: declare the full path

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        out = []
        for line in log.splitlines():
            s = line.strip()
            if re.match(r"^error(\[E\d+\])?: ", s) or s.startswith("error: could not compile"):
                out.append(s[:200])
        return out[:20]
