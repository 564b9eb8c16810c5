"""Gradle `test --tests` (Java; lucene, rxjava): node ids `pkg.Class > method` as the build's test
logging prints them (SWE-bench patches `testLogging` to print every PASSED/FAILED event).

Selection rule (Gradle's ClassTestSelectionMatcher, read from its source): a `--tests` pattern
without `*` matches a test when `className + "." + methodName` equals the pattern, or when the class
name equals the pattern (the whole class). A pattern that starts with an upper-case letter is
compared with the *simple* class name, otherwise with the fully qualified one. `Foo` also matches
nested `Foo$Inner`. Hence:
  - `--tests pkg.Class.method` / `--tests Class.method` (last segment lower-case) is node level;
  - `--tests pkg.Class` (last segment upper-case) is `class` level;
  - any `*` is `pattern`; no `--tests` is `suite`.
A method whose name starts with an upper-case letter cannot be told from a nested class and is
classified as a class (fail closed). Refused: `-x/--exclude-task` (can skip compilation and run stale
classes), `-m/--dry-run`, init/build/settings scripts (`-I`, `-b`, `-c`), and tasks other than
`test`/`:project:test`/`clean`/`cleanTest`.

Results: swebench's `parse_log_gradle_custom` (`pkg.Class > method PASSED|FAILED`). `-q` is dropped by
observed_command because it hides those lifecycle-level lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner
from execcritic.runners.maven import class_matches, java_class_of, result_for_java, split_java_id

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

PROGRAMS = {"gradle", "gradlew", "gradlew.bat"}
_OPTS: dict[str, Opt] = {
    "--tests": Opt(True, "select"),
    **{
        k: OK
        for k in (
            "--offline",
            "--continue",
            "-i",
            "--info",
            "-d",
            "--debug",
            "-s",
            "--stacktrace",
            "-S",
            "--full-stacktrace",
            "--no-daemon",
            "--daemon",
            "--build-cache",
            "--no-build-cache",
            "--parallel",
            "--no-parallel",
            "-q",
            "--quiet",
            "-w",
            "--warn",
            "--rerun-tasks",
            "--rerun",
            "--refresh-dependencies",
            "--fail-fast",
            "--configure-on-demand",
            "--no-configuration-cache",
            "--configuration-cache",
            "--no-watch-fs",
            "--watch-fs",
            "--no-scan",
        )
    },
    **{
        k: OKV
        for k in (
            "--max-workers",
            "--console",
            "--warning-mode",
            "-D",
            "--system-prop",
            "-P",
            "--project-prop",
            "-p",
            "--project-dir",
            "--priority",
            "-g",
            "--gradle-user-home",
        )
    },
    "-x": reject(
        "excludes a task (it can skip compiling the tests and run stale classes); remove it", takes=True
    ),
    "--exclude-task": reject(
        "excludes a task (it can skip compiling the tests and run stale classes); remove it", takes=True
    ),
    "-m": reject("is a dry run: nothing is executed"),
    "--dry-run": reject("is a dry run: nothing is executed"),
    "-I": reject("runs an init script that can reconfigure the build", takes=True),
    "--init-script": reject("runs an init script that can reconfigure the build", takes=True),
    "-b": reject("uses another build file", takes=True),
    "--build-file": reject("uses another build file", takes=True),
    "-c": reject("uses another settings file", takes=True),
    "--settings-file": reject("uses another settings file", takes=True),
    "--scan": reject("publishes a build scan over the network"),
    "--continuous": reject("keeps running and never exits"),
    "-t": reject("keeps running and never exits"),
}
_TASKS_OK = re.compile(r"^(:?[\w.-]+:)*(test|clean|cleanTest)$")


def _gradle_args(cmd: ParsedCommand) -> list[str] | None:
    if cmd.argv and _ml.basename(cmd.argv[0]) in PROGRAMS:
        return list(cmd.argv[1:])
    return None


def classify_pattern(pattern: str) -> tuple[str, str | None, str | None]:
    """(level, class, method) of one `--tests` pattern."""
    if "*" in pattern or not pattern:
        return "pattern", None, None
    head = pattern.split("[", 1)[0]
    cls, dot, last = head.rpartition(".")
    if dot and last[:1].islower():
        return "node", cls, pattern[len(cls) + 1 :]
    return "class", pattern, None


class GradleRunner(Runner):
    name = "gradle"
    language = "java"
    log_parser = "parse_log_gradle_custom"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_gradle_custom"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _gradle_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        args = []
        for a in _gradle_args(cmd) or []:
            # -Dk=v / -Pk=v are attached forms
            if re.match(r"^-[DP]\S", a):
                args += [a[:2], a[2:]]
            else:
                args.append(a)
        w = _ml.walk_options(args, _OPTS, runner="gradle", short_attached=False, stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        sel.problems += _ml.env_problems(
            cmd, "gradle", forbidden={"GRADLE_OPTS", "JAVA_OPTS", "GRADLE_USER_HOME"}
        )
        for t in w.positionals:
            if not _TASKS_OK.match(t):
                sel.problems.append(
                    _ml.problem(
                        "runner.goal",
                        f"gradle: task `{t}` is not a test task; run `test` "
                        "(optionally `:project:test`, after `clean`)",
                    )
                )
        if not any(t.rsplit(":", 1)[-1] == "test" for t in w.positionals):
            sel.problems.append(
                _ml.problem("runner.goal", "gradle: no `test` task; the command runs no tests")
            )
        patterns = _ml.values(w, "--tests")
        if not patterns:
            sel.selectors.append(
                Selector(cmd.render(), "suite", note="no --tests: every test of the project(s)")
            )
        for p in patterns:
            level, cls, meth = classify_pattern(p)
            if level == "node":
                sel.selectors.append(Selector(p, "node", Node(self.name, meth or "", path=cls, text=p)))
            else:
                sel.selectors.append(
                    Selector(
                        p,
                        level,
                        note="a pattern with `*` matches many tests"
                        if level == "pattern"
                        else "a class name runs every method of the class",
                    )
                )
        return sel

    def parse_node(self, text: str) -> Node:
        t = text.strip()
        if " > " in t or "#" in t:
            cls, meth = split_java_id(t)
            return Node(self.name, meth or cls or t, path=cls, text=t)
        level, cls, meth = classify_pattern(t)
        if level == "node":
            return Node(self.name, meth or "", path=cls, text=t)
        return Node(self.name, t, path=t, text=t)

    def binds(self, selected: Node, declared: Node) -> bool:
        return selected.name == declared.name and class_matches(selected.path or "", declared.path or "")

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        cls = java_class_of(path)
        return Node(self.name, name, path=cls, text=f"{cls} > {name}")

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`./gradlew test --tests Class.method ...` keeping the official command's -D/-P properties
        (lucene's randomized-testing seed and locale)."""
        program, tasks, props = "./gradlew", ["test"], []
        for off in _ml.official_commands(task):
            if _gradle_args(off) is None:
                continue
            program = off.argv[0]
            args = list(off.argv[1:])
            tasks = [a for a in args if _TASKS_OK.match(a)] or ["test"]
            props = [a for a in args if re.match(r"^-[DP]\S", a) and not a.startswith("-Dtests.method")]
            break
        parts = [program] + tasks
        for n in nodes:
            parts += ["--tests", f"{n.path}.{n.name}" if n.path else n.name]
        parts += props
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        return cmd.with_argv([a for a in cmd.argv if a not in ("-q", "--quiet")])

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return result_for_java(node, results, sep=" > ")
