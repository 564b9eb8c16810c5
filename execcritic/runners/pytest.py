"""pytest: node ids `path::Class::test_x[param]`, run as `pytest`, `python -m pytest` or through
`tox ... -- <pytest args>` (SWE-bench's sphinx command).

Selection decisions (each deliberate, see `_OPTIONS`):
- a positional `path::...::test*` is a node; `path::...::Test*` a class; `path.py` a file; anything
  else a directory; no positional at all is the whole suite.
- a function id without a parameter (`path::test_f`) is node level: it selects that test, all its
  parametrizations included, and binds declared nodes `test_f[...]`.
- `-k`/`-m`/`--deselect`/`--ignore` only *narrow* a selection. Combined with exact node ids they
  are harmless (a narrowed-away node is missing at run time, which is operational, not a verdict);
  next to a file or directory they are reported as a pattern selector.
- options that run nothing (`--co`, `--fixtures`, `--setup-only`...), depend on cache state (`--lf`,
  `--sw`), load code or configuration (`-p plugin`, `-c`, `--pyargs`, most `-o` keys), or delete
  files (`--basetemp`) are rejected with a problem.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import TYPE_CHECKING, Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.bundle.problems import TEST_COMMAND, Problem
from execcritic.runners._python import python_main
from execcritic.runners.base import Runner
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

PYTEST_REPOS = {
    "astropy/astropy",
    "pallets/flask",
    "psf/requests",
    "pydata/xarray",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "marshmallow-code/marshmallow",
    "pvlib/pvlib-python",
    "pydicom/pydicom",
    "pylint-dev/astroid",
    "pyvista/pyvista",
    "sqlfluff/sqlfluff",
}
PYTEST_PARSERS = {
    "parse_log_pytest",
    "parse_log_pytest_options",
    "parse_log_pytest_v2",
    "parse_log_matplotlib",
    "parse_log_seaborn",
    "parse_log_astropy",
    "parse_log_flask",
    "parse_log_requests",
    "parse_log_xarray",
    "parse_log_pylint",
    "parse_log_scikit",
    "parse_log_sphinx",
    "parse_log_astroid",
    "parse_log_marshmallow",
    "parse_log_pvlib",
    "parse_log_pyvista",
    "parse_log_sqlfluff",
    "parse_log_pydicom",
}

# option -> (takes a value, policy). policy: "ok", "narrow" (filters the selection), or a rejection
# (problem code suffix, message).
_FLAG, _VALUE = False, True
_REJECT_NO_RUN = ("runs_nothing", "runs no test (collection/fixture listing only); remove it")
_REJECT_STATE = (
    "state_dependent",
    "selects tests from pytest's cache of earlier runs; select the nodes explicitly instead",
)
_REJECT_CONFIG = (
    "config_override",
    "loads other configuration or plugins, which can change what runs or how results are reported; remove it",
)
_OPTIONS: dict[str, tuple[bool, object]] = {
    # narrowing filters
    "-k": (_VALUE, "narrow"),
    "-m": (_VALUE, "narrow"),
    "--deselect": (_VALUE, "narrow"),
    "--ignore": (_VALUE, "narrow"),
    "--ignore-glob": (_VALUE, "narrow"),
    # running nothing
    "--co": (_FLAG, _REJECT_NO_RUN),
    "--collect-only": (_FLAG, _REJECT_NO_RUN),
    "--collectonly": (_FLAG, _REJECT_NO_RUN),
    "--fixtures": (_FLAG, _REJECT_NO_RUN),
    "--funcargs": (_FLAG, _REJECT_NO_RUN),
    "--fixtures-per-test": (_FLAG, _REJECT_NO_RUN),
    "--markers": (_FLAG, _REJECT_NO_RUN),
    "--setup-only": (_FLAG, _REJECT_NO_RUN),
    "--setup-plan": (_FLAG, _REJECT_NO_RUN),
    "--version": (_FLAG, _REJECT_NO_RUN),
    "-V": (_FLAG, _REJECT_NO_RUN),
    "-h": (_FLAG, _REJECT_NO_RUN),
    "--help": (_FLAG, _REJECT_NO_RUN),
    # cache state
    "--lf": (_FLAG, _REJECT_STATE),
    "--last-failed": (_FLAG, _REJECT_STATE),
    "--sw": (_FLAG, _REJECT_STATE),
    "--stepwise": (_FLAG, _REJECT_STATE),
    "--sw-skip": (_FLAG, _REJECT_STATE),
    "--stepwise-skip": (_FLAG, _REJECT_STATE),
    "--lfnf": (_VALUE, _REJECT_STATE),
    "--last-failed-no-failures": (_VALUE, _REJECT_STATE),
    # configuration / code loading
    "-c": (_VALUE, _REJECT_CONFIG),
    "--config-file": (_VALUE, _REJECT_CONFIG),
    "--inifile": (_VALUE, _REJECT_CONFIG),
    "--rootdir": (_VALUE, _REJECT_CONFIG),
    "--confcutdir": (_VALUE, _REJECT_CONFIG),
    "--pyargs": (
        _FLAG,
        (
            "pyargs",
            "`--pyargs` resolves arguments as installed packages, not repository paths; pass node ids",
        ),
    ),
    "--basetemp": (_VALUE, ("basetemp", "`--basetemp` makes pytest delete that directory; remove it")),
    "--pdb": (_FLAG, ("interactive", "an interactive debugger waits for input; remove it")),
    "--trace": (_FLAG, ("interactive", "an interactive debugger waits for input; remove it")),
    "--pdbcls": (_VALUE, ("interactive", "an interactive debugger waits for input; remove it")),
    # harmless, value-taking
    "-p": (_VALUE, "plugin"),
    "-o": (_VALUE, "ini"),
    "--override-ini": (_VALUE, "ini"),
    "-W": (_VALUE, "ok"),
    "--pythonwarnings": (_VALUE, "ok"),
    "--tb": (_VALUE, "ok"),
    "-r": (_VALUE, "ok"),
    "--durations": (_VALUE, "ok"),
    "--durations-min": (_VALUE, "ok"),
    "--maxfail": (_VALUE, "ok"),
    "-n": (_VALUE, "ok"),
    "--numprocesses": (_VALUE, "ok"),
    "--dist": (_VALUE, "ok"),
    "--timeout": (_VALUE, "ok"),
    "--color": (_VALUE, "ok"),
    "--capture": (_VALUE, "ok"),
    "--import-mode": (_VALUE, "ok"),
    "--assert": (_VALUE, "ok"),
    "--log-level": (_VALUE, "ok"),
    "--log-cli-level": (_VALUE, "ok"),
    "--junitxml": (_VALUE, "ok"),
    "--junit-xml": (_VALUE, "ok"),
    "--cov": (_VALUE, "ok"),
    "--cov-report": (_VALUE, "ok"),
    "--doctest-glob": (_VALUE, "ok"),
    "--remote-data": (_VALUE, "ok"),
    "--mpl-baseline-path": (_VALUE, "ok"),
    "--randomly-seed": (_VALUE, "ok"),
    "--show-capture": (_VALUE, "ok"),
    "--code-highlight": (_VALUE, "ok"),
    "--verbosity": (_VALUE, "ok"),
    "--debug": (_FLAG, "ok"),
}
# `-o key=value` keys that only change presentation.
_SAFE_INI_KEYS = {
    "console_output_style",
    "log_cli",
    "log_cli_level",
    "log_level",
    "cache_dir",
    "junit_family",
    "verbosity_assertions",
    "truncation_limit_lines",
    "truncation_limit_chars",
}
_SHORT_FLAGS = set("vqsxlrVhaAfEpPwW")  # letters that may be bundled (`-vvs`, `-xvs`, `-rA`)
_TOX = {"tox", "tox4"}

_LEVEL_MESSAGES = {
    "file": "selects a whole file",
    "class": "selects a whole class",
    "directory": "selects a whole directory",
    "suite": "selects the whole test suite",
    "pattern": "selects every test matching a pattern",
}


def _basename(program: str) -> str:
    return program.rsplit("/", 1)[-1]


def split_node_id(text: str) -> tuple[str | None, tuple[str, ...], str, str | None]:
    """`path::A::B::name[param]` -> (path, (A, B), name, param). path is None when the first part is
    not a file (bare `name`, `Class::name`). A truncated param (`name[a b` cut at a space by the
    SWE-bench parser) keeps what is there, without the closing bracket."""
    text = text.strip()
    param = None
    lb = text.find("[")
    if lb > 0:
        head, param = text[:lb], text[lb + 1 :]
        if param.endswith("]"):
            param = param[:-1]
    else:
        head = text
    parts = [p for p in head.split("::")]
    path = None
    if len(parts) > 1 and ("/" in parts[0] or parts[0].endswith(".py")):
        path = parts.pop(0)
    elif len(parts) == 1 and ("/" in parts[0] or parts[0].endswith(".py")):
        return parts[0], (), "", None
    if not parts:
        return path, (), "", param
    return path, tuple(parts[:-1]), parts[-1], param


def norm_path(path: str, cwd: str = "") -> str:
    """Repository-relative form of a path given on a command line run in `cwd`."""
    p = path
    if p.startswith("/testbed/"):
        p = p[len("/testbed/") :]
        cwd = ""
    elif p == "/testbed":
        return ""
    p = posixpath.normpath(posixpath.join(cwd, p)) if cwd else posixpath.normpath(p)
    return "" if p == "." else p


def is_param_truncated(node: Node) -> bool:
    return node.param is not None and not node.text.rstrip().endswith("]")


class PytestRunner(Runner):
    name = "pytest"
    language = "python"
    reporter = "pytest"
    log_parser = "parse_log_pytest_v2"  # keeps ids with spaces and strips ANSI; see parse_results

    def serves(self, task: "Task") -> bool:
        return task.repo in PYTEST_REPOS or task.log_parser in PYTEST_PARSERS

    # ---- recognizing -----------------------------------------------------------------------------
    def _pytest_args(self, cmd: ParsedCommand) -> list[str] | None:
        """The arguments pytest itself receives, or None if this is not a pytest command."""
        argv = list(cmd.argv)
        if not argv:
            return None
        prog = _basename(argv[0])
        if prog in ("pytest", "py.test"):
            return argv[1:]
        main = python_main(argv)
        if main is not None:
            if main[0] == "module" and argv[main[1]] in ("pytest", "py.test"):
                return argv[main[1] + 1 :]
            return None
        if prog in _TOX:
            if "--" in argv:
                return argv[argv.index("--") + 1 :]
            return None
        return None

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return self._pytest_args(cmd) is not None

    def launched_command(self, cmd: ParsedCommand, set_env: dict[str, str],
                         pass_env: Sequence[str]) -> ParsedCommand | None:
        """tox (SWE-bench's sphinx command: `tox --current-env -epy39 -v --`) starts pytest with the environment
        its config makes, not its own: the variables go in as overrides of the base `[testenv]` section (tox 4's
        `-x section.key+=value` appends). An env section of its own that sets `set_env` would hide them; the
        reporter is then missing from the run, an operational failure, never a verdict."""
        argv = list(cmd.argv)
        if not argv or _basename(argv[0]) not in _TOX or "--" not in argv:
            return None
        i = argv.index("--")
        extra = [a for k, v in set_env.items() for a in ("-x", f"testenv.set_env+={k}={v}")]
        extra += [a for name in pass_env for a in ("-x", f"testenv.pass_env+={name}")]
        return cmd.with_argv(argv[:i] + extra + argv[i:])

    # ---- selection -------------------------------------------------------------------------------
    def _walk(self, args: list[str]) -> tuple[list[str], list[tuple[str, str | None]], list[Problem]]:
        """Split pytest args into positionals and (option, value) pairs, with option problems."""
        positionals: list[str] = []
        options: list[tuple[str, str | None]] = []
        problems: list[Problem] = []
        i = 0
        only_positionals = False
        while i < len(args):
            a = args[i]
            if only_positionals or not a.startswith("-") or a == "-":
                positionals.append(a)
                i += 1
                continue
            if a == "--":
                only_positionals = True
                i += 1
                continue
            if a.startswith("--"):
                name, eq, value = a.partition("=")
                spec = _OPTIONS.get(name)
                if spec is None:
                    # unknown long option: `--x=v` is unambiguous; `--x` is taken as a flag, so a
                    # following path is classified as a selector (errs toward rejection).
                    options.append((name, value if eq else None))
                    i += 1
                    continue
                takes, _policy = spec
                if takes and not eq:
                    value = args[i + 1] if i + 1 < len(args) else None
                    i += 2
                else:
                    i += 1
                options.append((name, value if (takes or eq) else None))
                continue
            # short options: -k EXPR, -kEXPR, -rA, -vvs, -x, -n 4, -p no:cacheprovider
            letter = a[1:2]
            key = "-" + letter
            if key in ("-k", "-m", "-p", "-c", "-o", "-W", "-n", "-r"):
                if len(a) > 2:
                    options.append((key, a[2:]))
                    i += 1
                else:
                    options.append((key, args[i + 1] if i + 1 < len(args) else None))
                    i += 2
                continue
            if all(ch in _SHORT_FLAGS or ch.isalpha() for ch in a[1:]):
                for ch in a[1:]:
                    options.append(("-" + ch, None))
                i += 1
                continue
            options.append((a, None))
            i += 1
        for name, value in options:
            spec = _OPTIONS.get(name)
            if not spec:
                continue
            _takes, policy = spec
            if isinstance(policy, tuple):
                code, message = policy
                problems.append(Problem(f"runner.{code}", TEST_COMMAND, f"pytest `{name}` {message}"))
            elif policy == "plugin":
                if not value or not value.startswith("no:"):
                    problems.append(
                        Problem(
                            "runner.config_override",
                            TEST_COMMAND,
                            f"pytest `-p {value}` loads a plugin, which can change what runs or "
                            "how results are reported; only `-p no:<plugin>` is allowed",
                        )
                    )
            elif policy == "ini":
                key = (value or "").partition("=")[0].strip()
                if key not in _SAFE_INI_KEYS:
                    problems.append(
                        Problem(
                            "runner.config_override",
                            TEST_COMMAND,
                            f"pytest `{name} {value}` overrides ini option {key!r}, which can "
                            f"change collection or reporting; allowed keys: "
                            f"{', '.join(sorted(_SAFE_INI_KEYS))}",
                        )
                    )
            if _takes and value is None:
                problems.append(Problem("runner.bad_option", TEST_COMMAND, f"pytest `{name}` needs a value"))
        return positionals, options, problems

    def selection(self, cmd: ParsedCommand) -> Selection:
        args = self._pytest_args(cmd)
        sel = Selection()
        if args is None:
            sel.problems.append(Problem("runner.unrecognized", TEST_COMMAND, "not a pytest command"))
            return sel
        if _basename(cmd.argv[0]) in _TOX and not any(
            a.startswith("-e") for a in cmd.argv[1 : cmd.argv.index("--")]
        ):
            sel.problems.append(
                Problem(
                    "runner.bad_option",
                    TEST_COMMAND,
                    "tox must name its environment (`-e <env>`) so the same test environment runs every time",
                )
            )
        positionals, options, problems = self._walk(args)
        sel.problems.extend(problems)
        cwd = cmd.cwd_in_repo()
        for text in positionals:
            sel.selectors.append(self._classify(text, cwd))
        if not positionals:
            sel.selectors.append(
                Selector(
                    "(no test arguments)", "suite", note="pytest runs every test it finds under its testpaths"
                )
            )
        all_nodes = bool(sel.selectors) and all(s.level == "node" for s in sel.selectors)
        for name, value in options:
            if name in ("-k", "-m") and not all_nodes:
                sel.selectors.append(
                    Selector(
                        f"{name} {value}",
                        "pattern",
                        note="a keyword/marker expression next to a file or directory "
                        "selects every matching test",
                    )
                )
        return sel

    def _classify(self, text: str, cwd: str) -> Selector:
        if text.startswith("/") and not text.startswith("/testbed"):
            return Selector(text, "unknown", note="an absolute path outside the repository")
        path, scope, name, param = split_node_id(text)
        if "::" not in text:
            p = norm_path(text, cwd)
            if re.search(r"[*?]", text):
                return Selector(text, "pattern", note="a glob")
            if p.endswith(".py"):
                return Selector(text, "file")
            return Selector(text, "directory" if p else "suite")
        if path is None:
            return Selector(text, "unknown", note="a node id must start with the test file path")
        if not name:
            return Selector(text, "file")
        repo_path = norm_path(path, cwd)
        if name.startswith("test"):
            node = Node(self.name, name, repo_path, scope, param, text)
            return Selector(text, "node", node=node)
        return Selector(text, "class", note=f"{name!r} is not a test function (test*); it names a class")

    # ---- nodes -----------------------------------------------------------------------------------
    def parse_node(self, text: str) -> Node:
        path, scope, name, param = split_node_id(text)
        if not name and path:
            return Node(self.name, "", path, (), None, text.strip())
        if path is None and len(scope) == 0 and "." in name and not name.startswith("test"):
            # `Class.test_x` written with a dot
            *cls, leaf = name.split(".")
            return Node(self.name, leaf, None, tuple(cls), param, text.strip())
        return Node(self.name, name, norm_path(path) if path else None, scope, param, text.strip())

    def binds(self, selected: Node, declared: Node) -> bool:
        """A function-level id binds any declared parametrization of it; a truncated declared
        parameter (SWE-bench cut it at a space) binds the selected parameters it is a prefix of;
        declared classes must match exactly (a module-level `test_x` is not `TestA::test_x`)."""
        if selected.name != declared.name:
            return False
        if declared.path and selected.path and not _same_file(selected.path, declared.path):
            return False
        if declared.scope and tuple(declared.scope) != tuple(selected.scope[-len(declared.scope) :]):
            return False
        if declared.param is not None and selected.param is not None:
            if selected.param == declared.param:
                return True
            return is_param_truncated(declared) and selected.param.startswith(declared.param)
        if declared.param is None and selected.param is not None:
            return False  # the declared function has more parameters than the one selected
        return True

    def node_id(self, node: Node) -> str:
        parts = [node.path or "", *node.scope, node.name]
        nid = "::".join(p for p in parts if p)
        if node.param is not None and not is_param_truncated(node):
            nid += f"[{node.param}]"
        return nid

    # ---- commands --------------------------------------------------------------------------------
    def command_prefix(self, task: "Task | None") -> list[str]:
        """The runner program and options of the task's official test command (its `eval_script`),
        without the test files it names; `pytest -rA` when there is none."""
        line = official_test_line(task) if task else None
        if line:
            tokens = shlex.split(line)
            prefix: list[str] = []
            for i, tok in enumerate(tokens):
                if (
                    not tok.startswith("-")
                    and i > 0
                    and ("/" in tok or tok.endswith(".py"))
                    and not (prefix and prefix[-1] in ("-o", "-p", "-W", "-k", "-m", "-c", "--tb"))
                ):
                    break
                prefix.append(tok)
            if prefix and self.recognizes(ParsedCommand(line, argv=tuple(prefix + ["x.py::test"]))):
                return prefix
        return ["pytest", "-rA"]

    def build_command(self, nodes: Sequence[Node], *, task: "Task | None" = None) -> str:
        ids: list[str] = []
        for node in nodes:
            if not node.path:
                raise ValueError(f"pytest node {node} has no file path; a pytest command needs `path::name`")
            nid = self.node_id(node)
            if nid not in ids:
                ids.append(nid)
        # a function-level id already selects every parametrization: drop its parametrized ids
        funcs = {i for i in ids if "[" not in i}
        ids = [i for i in ids if "[" not in i or i[: i.index("[")] not in funcs]
        prefix = self.command_prefix(task)
        return " ".join([*(_quote(t) for t in prefix), *(_quote(i) for i in ids)])

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """Add `-rA` (the summary lines every SWE-bench pytest parser reads) right where pytest's own
        arguments begin. `-r` is a store option: the later `-rA` only widens the report."""
        args = self._pytest_args(cmd)
        if args is None:
            return cmd
        argv = list(cmd.argv)
        start = len(argv) - len(args)
        if any(a == "-rA" or (a.startswith("-r") and "A" in a[2:]) for a in args):
            return cmd
        argv.insert(start, "-rA")
        return cmd.with_argv(argv)

    # ---- results ---------------------------------------------------------------------------------
    def parse_results(self, log: str, parser: str | None = None) -> dict[str, str]:
        """Per-node statuses. `parser` is the task's swebench log parser (its `log_parser`); by default
        pytest_v2, which keeps parameter ids that contain spaces whole."""

        return parser_for(parser or self.log_parser)(log)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        """Exact id first; then SWE-bench's truncated form (cut at the first space); then, for a
        function-level or partial node, every matching key, aggregated (any ERROR -> ERROR, any
        FAILED -> FAILED, any PASSED -> PASSED; then XFAIL, XPASS; else SKIPPED): expected-failure
        parametrizations are neutral next to ones that ran normally.

        A skipped test is absent: `-rA` summarizes skips as `SKIPPED [1] path:line: reason`, without
        the node id, so a skipped declared node reads as not run (no verdict), which is what it is."""
        candidates = [node.text, self.node_id(node)] if node.path else []
        for c in candidates:
            if c and results.get(c) in _STATUSES:
                return results[c]
            if c and " " in c and results.get(c.split(" ")[0]) in _STATUSES:
                return results[c.split(" ")[0]]
        for key, status in results.items():
            # pytest_v2 keeps the " - <reason>" of ERROR and XFAIL lines in the id
            if " - " in key and status in _STATUSES and _without_reason(key) in candidates:
                return status
        matches = []
        for key, status in results.items():
            if "::" not in key or status not in _STATUSES or " " in key.split("::", 1)[0]:
                continue
            key = _without_reason(key)
            kpath, kscope, kname, kparam = split_node_id(key)
            knode = Node(self.name, kname, kpath, kscope, kparam, key)
            if self.binds(knode, node) or (
                node.param is None
                and kname == node.name
                and (not node.path or not kpath or _same_file(kpath, node.path))
                and (not node.scope or tuple(node.scope) == kscope[-len(node.scope) :])
            ):
                matches.append(status)
        if not matches:
            return None
        for status in ("ERROR", "FAILED", "PASSED", "XFAIL", "XPASS"):
            if status in matches:
                return status
        return matches[0]

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        """Collection errors: `ERROR path.py` entries without a node part, `ERROR collecting`
        headers, `ImportError while importing test module`, and pytest's `not found` usage errors."""
        out: list[str] = []
        # the exception pytest reports for each failed collector (`E   ModuleNotFoundError: ...`)
        reasons: dict[str, str] = {}
        current: str | None = None
        for line in log.splitlines():
            m = re.match(r"^_+ ERROR collecting (.+?) _+$", line.strip())
            if m:
                current = m.group(1)
                continue
            if current and re.match(r"^(_{3,}|={3,}) ", line):
                current = None
            elif current:
                e = re.match(r"^E\s+(\w+(?:Error|Exception)\b.*)$", line)
                if e:
                    reasons[current] = e.group(1).strip()[:200]
        for key, status in results.items():
            if status == "ERROR" and "::" not in key:
                why = next((r for f, r in reasons.items() if f.endswith(key) or key.endswith(f)), "")
                out.append(f"collection error in {key}" + (f": {why}" if why else ""))
        for line in log.splitlines():
            s = line.strip()
            m = re.match(r"^_+ ERROR collecting (.+?) _+$", s)
            if m:
                why = reasons.get(m.group(1), "")
                out.append(f"collection error in {m.group(1)}" + (f": {why}" if why else ""))
                continue
            m = re.match(r"^ERROR: found no collectors for (.+)$", s)
            if m:
                out.append(f"no collectors for {m.group(1)}")
                continue
            m = re.match(r"^ERROR: (?:file or directory )?not found: (.+)$", s)
            if m:
                out.append(f"not found: {m.group(1)}")
                continue
            m = re.match(r"^ImportError while (?:importing test module|loading conftest) '(.+)'", s)
            if m:
                out.append(f"import error in {m.group(1)}")
                continue
            m = re.match(r"^ERROR (\S+\.py) - (.+)$", s)
            if m:
                out.append(f"collection error in {m.group(1)}: {m.group(2)[:200]}")
        seen: set[str] = set()
        return [o for o in out if not (o in seen or seen.add(o))]  # type: ignore[func-returns-value]


_STATUSES = {"PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"}


def _without_reason(key: str) -> str:
    """A summary-line id without the " - <reason>" pytest appends (an " - " inside a parameter id's brackets
    is part of the id)."""
    at = key.find(" - ")
    while at != -1:
        if key.count("[", 0, at) <= key.count("]", 0, at):
            return key[:at]
        at = key.find(" - ", at + 3)
    return key


def _same_file(a: str, b: str) -> bool:
    a, b = a.strip("/").removeprefix("./"), b.strip("/").removeprefix("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _quote(token: str) -> str:
    return token if re.match(r"^[A-Za-z0-9_./:=,+@%-]+$", token) else shlex.quote(token)


def official_test_line(task: "Task") -> str | None:
    """The test command SWE-bench runs for this task: the line after `>>>>> Start Test Output`."""
    script = getattr(task, "eval_script", "") or ""
    m = re.search(r">>>>> Start Test Output'?\s*\n(.*?)\n", script)
    if not m:
        return None
    line = m.group(1).strip()
    return line or None
