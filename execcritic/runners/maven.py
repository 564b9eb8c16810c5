"""Maven surefire (Java): node ids `pkg.Class#method` (SWE-bench's maven naming).

Selection rule (surefire `-Dtest`, since 2.19): a comma-separated list; each item is
`Class`, `pkg.Class`, `Class#method` or `Class#m1+m2`. Without wildcards a class item matches the
class with exactly that simple (or fully qualified) name and a method item the method with exactly
that name - checked against a real surefire 3.2.5 run (`CalcTest#testAdd` does not run
`testAddition`). So:
  - `-Dtest=pkg.Class#m1+m2,Other#m3` is node level;
  - `-Dtest=pkg.Class` is `class` level (rejected by the bundle rules even when the dataset's own
    FAIL_TO_PASS names a class, as javaparser's `NodeTest` does);
  - `*`, `?`, `%regex[...]` or a path pattern is `pattern`; `!exclusions` are refused;
  - no `-Dtest` is `suite`.
Options that skip tests (`-DskipTests`, `-Dmaven.test.skip`), rerun failing tests until they pass
(`-Dsurefire.rerunFailingTestsCount`), select tests from files (`-Dsurefire.includesFile`) or send
the log elsewhere (`-l`) are refused, and so are build phases past `test`.

Results: swebench's `parse_log_maven` cannot be used - it pairs each `-Dtest=` line of a `set -x`
trace with the next BUILD SUCCESS/FAILURE, i.e. one invocation per test, which a one-line bundle
cannot do, and BUILD SUCCESS also follows a run that matched no test at all (verified: surefire 3.2.5
reports `Tests run: 0 ... BUILD SUCCESS` for a misspelled method). observed_command adds
`-Dsurefire.reportFormat=plain`, which makes surefire print one line per test method
(`[INFO] pkg.Class.method -- Time elapsed: 0.01 s [<<< FAILURE!|<<< ERROR!]`; surefire 2.x prints
`method(pkg.Class)  Time elapsed: ...`), and parse_results reads those lines. An `<<< ERROR!` on a
method is an exception thrown through the test body (behavioral, like unittest's ERROR); an error on
the class itself (`pkg.Class -- ... <<< ERROR!`, e.g. a failing @BeforeAll) is a load error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Outcome, Selection, Selector
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

PROGRAMS = {"mvn", "mvnw", "mvnd", "mvn.cmd", "mvnw.cmd"}
_PHASES_OK = {
    "clean",
    "validate",
    "initialize",
    "generate-sources",
    "process-sources",
    "generate-resources",
    "process-resources",
    "compile",
    "process-classes",
    "generate-test-sources",
    "process-test-sources",
    "generate-test-resources",
    "process-test-resources",
    "test-compile",
    "process-test-classes",
    "test",
    "surefire:test",
}
_OPTS: dict[str, Opt] = {
    **{
        k: OK
        for k in (
            "-B",
            "--batch-mode",
            "-o",
            "--offline",
            "-e",
            "--errors",
            "-X",
            "--debug",
            "-q",
            "--quiet",
            "-U",
            "--update-snapshots",
            "-nsu",
            "--no-snapshot-updates",
            "-ntp",
            "--no-transfer-progress",
            "-fae",
            "--fail-at-end",
            "-ff",
            "--fail-fast",
            "-fn",
            "--fail-never",
            "-am",
            "--also-make",
            "-amd",
            "--also-make-dependents",
            "-V",
            "--show-version",
            "-N",
            "--non-recursive",
            "-C",
            "--strict-checksums",
            "-c",
            "--lax-checksums",
        )
    },
    **{
        k: OKV
        for k in (
            "-T",
            "--threads",
            "-pl",
            "--projects",
            "-rf",
            "--resume-from",
            "-f",
            "--file",
            "-s",
            "--settings",
            "-gs",
            "--global-settings",
            "-P",
            "--activate-profiles",
            "-b",
            "--builder",
            "--color",
        )
    },
    "-D": Opt(True, "select"),
    "--define": Opt(True, "select"),
    "-l": reject("writes the build log to a file instead of the output the harness reads", takes=True),
    "--log-file": reject(
        "writes the build log to a file instead of the output the harness reads", takes=True
    ),
    "-h": reject("prints help and runs nothing"),
    "--help": reject("prints help and runs nothing"),
    "-v": reject("prints the version and runs nothing"),
    "--version": reject("prints the version and runs nothing"),
}
_BAD_PROPS = {
    "skipTests": "skips every test",
    "maven.test.skip": "skips compiling and running the tests",
    "maven.test.skip.exec": "skips running the tests",
    "skip": "skips the plugin",
    "surefire.skip": "skips the tests",
    "surefire.rerunFailingTestsCount": "reruns failing tests and reports a later pass as a pass",
    "rerunFailingTestsCount": "reruns failing tests and reports a later pass as a pass",
    "surefire.includesFile": "selects tests from a file; list them in -Dtest",
    "surefire.excludesFile": "deselects tests from a file; list the tests to run in -Dtest",
    "it.test": "selects integration tests by pattern",
    "surefire.reportsDirectory": "moves the reports",
    "surefire.printSummary": "can hide the per-test lines the harness reads",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LINE3 = re.compile(
    r"^(?:\[(?:INFO|ERROR|WARNING|WARN)\]\s+)?(?P<id>\S.*?) -- Time elapsed: [^<]*?"
    r"(?:<<< (?P<st>FAILURE|ERROR)!)?\s*$"
)
_LINE2 = re.compile(
    r"^(?:\[(?:INFO|ERROR|WARNING|WARN)\]\s+)?(?P<m>[^\s(]+(?:\[[^\]]*\])?)\((?P<c>[\w.$]+)\)\s+"
    r"Time elapsed: [^<]*?(?:<<< (?P<st>FAILURE|ERROR)!)?\s*$"
)
_RUNNING = re.compile(r"^(?:\[\w+\]\s+)?Running (?P<c>[\w.$]+)\s*$")
_SKIPPED = re.compile(r"^(?:\[\w+\]\s+)?(?P<id>[\w.$#\[\]()]+) skipped\s*$")


def _mvn_args(cmd: ParsedCommand) -> list[str] | None:
    if cmd.argv and _ml.basename(cmd.argv[0]) in PROGRAMS:
        return list(cmd.argv[1:])
    return None


def _split_defines(args: list[str]) -> list[str]:
    """`-Dkey=value` -> `-D key=value` (the attached form is the usual one)."""
    out: list[str] = []
    for a in args:
        if a.startswith("-D") and len(a) > 2:
            out += ["-D", a[2:]]
        else:
            out.append(a)
    return out


def _props(walked: _ml.Walked) -> list[tuple[str, str]]:
    out = []
    for name, value in walked.options:
        if name in ("-D", "--define") and value is not None:
            k, _, v = value.partition("=")
            out.append((k, v))
    return out


def class_matches(selected: str, declared: str) -> bool:
    """`Foo` matches `pkg.Foo` (a simple name matches in any package); nested `Outer$Inner` exact."""
    if not selected or not declared:
        return True
    return selected == declared or selected.endswith("." + declared) or declared.endswith("." + selected)


def split_java_id(text: str) -> tuple[str | None, str]:
    """`pkg.Class#method` -> ('pkg.Class', 'method'); `pkg.Class` -> ('pkg.Class', '')."""
    text = text.strip()
    if "#" in text:
        cls, _, meth = text.partition("#")
        return cls.strip(), meth.strip()
    if " > " in text:
        cls, _, meth = text.rpartition(" > ")
        return cls.strip(), meth.strip()
    m = re.match(r"^(?P<m>[^()\s]+)\((?P<c>[\w.$]+)\)$", text)  # JUnit4 Description: method(Class)
    if m:
        return m.group("c"), m.group("m")
    return text, ""


def java_class_of(path: str) -> str:
    """`gson/src/test/java/com/google/gson/FooTest.java` -> `com.google.gson.FooTest` (the source root
    is the directory after `src/test/java`, `src/test`, `test/*/src` or `src`)."""
    p = path.removesuffix(".java")
    for marker in ("/src/test/java/", "/src/test/", "/java/", "/src/"):
        if marker in "/" + p:
            return ("/" + p).split(marker, 1)[1].replace("/", ".")
    return p.rsplit("/", 1)[-1]


def parse_surefire(log: str) -> dict[str, str]:
    """Per-method statuses from surefire's plain report format, keyed `pkg.Class#method`; class-level
    errors keyed by the class alone."""
    results: dict[str, str] = {}
    classes: set[str] = set()
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).strip()
        m = _RUNNING.match(line)
        if m:
            classes.add(m.group("c"))
            continue
        m2 = _LINE2.match(line)
        if m2 and not line.split("]", 1)[-1].strip().startswith("Tests run"):
            st = m2.group("st")
            results[f"{m2.group('c')}#{m2.group('m')}"] = {"FAILURE": "FAILED", "ERROR": "ERROR"}.get(
                st, "PASSED"
            )
            continue
        m3 = _LINE3.match(line)
        if m3 and not m3.group("id").startswith("Tests run"):
            ident, st = m3.group("id").strip(), m3.group("st")
            status = {"FAILURE": "FAILED", "ERROR": "ERROR"}.get(st, "PASSED")
            if ident in classes:
                results[ident] = "ERROR" if st else "PASSED"
                continue
            head = ident.split("(", 1)[0].split("[", 1)[0]
            dot = head.rfind(".")
            if dot <= 0:
                continue
            results[f"{ident[:dot]}#{ident[dot + 1 :]}"] = status
            continue
        m4 = _SKIPPED.match(line)
        if m4:
            ident = m4.group("id")
            results.setdefault(ident, "SKIPPED")
    return results


def result_for_java(node: Node, results: dict[str, str], sep: str = "#") -> str | None:
    """Status of a method node; parametrized runs (`m[1]`, `m(int)[2]`) are combined, any failure wins."""
    hits = []
    for key, status in results.items():
        cls, _, meth = key.partition(sep)
        if not meth:
            continue
        base = meth.split("(", 1)[0].split("[", 1)[0].strip()
        if base != node.name and meth != node.name:
            continue
        if node.path and not class_matches(cls.strip(), node.path):
            continue
        hits.append(status)
    if not hits:
        return None
    for status in ("FAILED", "ERROR"):
        if status in hits:
            return status
    if all(h == "SKIPPED" for h in hits):
        return "SKIPPED"
    return "PASSED" if "PASSED" in hits else hits[0]


class MavenRunner(Runner):
    name = "maven"
    language = "java"
    log_parser = "parse_log_maven"  # not used for results: see parse_results

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_maven"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _mvn_args(cmd) is not None

    def _walk(self, cmd: ParsedCommand) -> _ml.Walked:
        return _ml.walk_options(_split_defines(_mvn_args(cmd) or []), _OPTS, runner="maven", stop_at_dd=False)

    def selection(self, cmd: ParsedCommand) -> Selection:
        w = self._walk(cmd)
        sel = Selection(problems=list(w.problems))
        sel.problems += _ml.env_problems(cmd, "maven", forbidden={"MAVEN_ARGS", "MAVEN_CONFIG"})
        phases = w.positionals
        for ph in phases:
            if ph not in _PHASES_OK:
                sel.problems.append(
                    _ml.problem(
                        "runner.goal",
                        f"maven: `{ph}` runs build steps beyond the tests; "
                        "use `test` (optionally after `clean`)",
                    )
                )
        if not any(ph in ("test", "surefire:test") for ph in phases):
            sel.problems.append(
                _ml.problem("runner.goal", "maven: no `test` phase; the command runs no tests")
            )
        tests = []
        for key, value in _props(w):
            if key in _BAD_PROPS:
                sel.problems.append(
                    _ml.problem("runner.option", f"maven: -D{key} {_BAD_PROPS[key]}; remove it")
                )
            elif key == "test":
                tests.append(value)
        if len(tests) > 1:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "maven: -Dtest given more than once; only one applies - give one comma-separated list",
                )
            )
        if not tests:
            sel.selectors.append(
                Selector(cmd.render(), "suite", note="no -Dtest: every test of the module(s)")
            )
            return sel
        for item in tests[-1].split(","):
            item = item.strip()
            if not item:
                continue
            if item.startswith("!"):
                sel.problems.append(
                    _ml.problem(
                        "runner.arguments", f"maven: exclusion {item!r} in -Dtest; list only the tests to run"
                    )
                )
                continue
            if "%regex[" in item or "%ant[" in item or any(c in item for c in "*?/\\"):
                sel.selectors.append(
                    Selector(item, "pattern", note="wildcards, %regex[] and paths select every matching test")
                )
                continue
            cls, _, methods = item.partition("#")
            if not methods:
                sel.selectors.append(
                    Selector(item, "class", note="a class without #method runs the whole class")
                )
                continue
            for meth in methods.split("+"):
                meth = meth.strip()
                if meth:
                    sel.selectors.append(
                        Selector(
                            f"{cls}#{meth}", "node", Node(self.name, meth, path=cls, text=f"{cls}#{meth}")
                        )
                    )
        return sel

    def parse_node(self, text: str) -> Node:
        cls, meth = split_java_id(text)
        if not meth:
            return Node(self.name, cls or text.strip(), path=cls, text=text.strip())
        return Node(self.name, meth, path=cls, text=text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        return selected.name == declared.name and class_matches(selected.path or "", declared.path or "")

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        cls = java_class_of(path)
        return Node(self.name, name, path=cls, text=f"{cls}#{name}")

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`<mvn of the official command> test -B [-pl module] -Dtest=Class#m1+m2,Other#m3`."""
        program, keep = "mvn", ["-B"]
        for off in _ml.official_commands(task):
            args = _mvn_args(off)
            if args is None:
                continue
            program = off.argv[0]
            w = _ml.walk_options(_split_defines(args), _OPTS, runner="maven", stop_at_dd=False)
            keep = []
            for name, value in w.options:
                if name in (
                    "-pl",
                    "--projects",
                    "-T",
                    "--threads",
                    "-f",
                    "--file",
                    "-P",
                    "--activate-profiles",
                ):
                    keep += [name, value or ""]
                elif name in (
                    "-B",
                    "--batch-mode",
                    "-am",
                    "--also-make",
                    "-o",
                    "--offline",
                    "-ntp",
                    "--no-transfer-progress",
                ):
                    keep.append(name)
            break
        by_class: dict[str, list[str]] = {}
        for n in nodes:
            cls = n.path or ""
            by_class.setdefault(cls, [])
            if n.name and n.name != cls and n.name not in by_class[cls]:
                by_class[cls].append(n.name)
        items = [f"{cls}#{'+'.join(ms)}" if ms else cls for cls, ms in by_class.items()]
        parts = [program, "test"] + keep + ["-Dtest=" + ",".join(items)]
        return " ".join(_ml.q(p) for p in parts)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """Ask surefire for one console line per test method; drop `-q`, which hides them."""
        argv = [
            a for a in cmd.argv if a not in ("-q", "--quiet") and not a.startswith("-Dsurefire.reportFormat=")
        ]
        argv.append("-Dsurefire.reportFormat=plain")
        return cmd.with_argv(argv)

    def parse_results(self, log: str) -> dict[str, str]:
        return parse_surefire(log)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        return result_for_java(node, results)

    def outcome(self, status: str) -> Outcome:
        """An ERROR on a test method is an exception thrown through the test body (behavioral)."""
        if status == "ERROR":
            return Outcome.FAILED
        return super().outcome(status)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        out = [
            f"{k}: error outside any test method (class setup)"
            for k, v in results.items()
            if "#" not in k and v == "ERROR"
        ]
        for raw in log.splitlines():
            line = _ANSI.sub("", raw).strip()
            if "COMPILATION ERROR" in line or re.match(r"^\[ERROR\] /\S+\.java:\[\d+,\d+\]", line):
                out.append(line[:200])
        return out[:20]
