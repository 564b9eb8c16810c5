"""Parse a bundle's one-line `test_command` into (cd, env assignments, argv) - or say why it is not one.

Shell chaining, substitution and redirection are not selectors and are rejected outright (SPEC §2.1):
`;`, `&&`, `||`, `|`, `&`, `$(`, backticks, `>`/`<`, subshells, `$VAR` expansion. Two forms the paper
itself uses are accepted: one leading `cd <dir inside the repository> &&`, and leading environment
assignments such as `PYTHONWARNINGS='ignore::UserWarning'`. Nothing here can make a failing run exit 0.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from execcritic.bundle.problems import TEST_COMMAND, Problem
from execcritic.config import PAPER

REPO_ROOT = "/testbed"  # where every backend mounts the repository

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_OPERATOR_CHARS = set(";&|<>()")
# Environment variables that change what runs or how success is reported, so cannot be set by a bundle.
FORBIDDEN_ENV = {
    "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "SHELLOPTS", "PROMPT_COMMAND",
    "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
    "NODE_OPTIONS", "RUSTFLAGS", "MAVEN_OPTS", "JAVA_TOOL_OPTIONS", "GOFLAGS", "RUBYOPT",
    # can put test-patch modules in front of the runner's own (a fake `pytest` that reports PASSED)
    "PYTHONPATH", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONEXECUTABLE",
}
# Programs that are not test runners but can wrap or short-circuit one.
WRAPPER_PROGRAMS = {"bash", "sh", "zsh", "dash", "eval", "exec", "env", "xargs", "true", "false", ":", "exit",
                    "nohup", "timeout", "sudo", "su", "source", ".", "command", "builtin", "time"}


@dataclass(frozen=True)
class ParsedCommand:
    raw: str
    cd: str | None = None                             # directory from a leading `cd DIR &&`
    env: tuple[tuple[str, str], ...] = ()             # leading NAME=value assignments, in order
    argv: tuple[str, ...] = ()                        # the runner invocation
    problems: tuple[Problem, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.argv)

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""

    def cwd_in_repo(self, root: str = REPO_ROOT) -> str:
        """The working directory as a path relative to the repository root ('' for the root)."""
        if not self.cd:
            return ""
        d = self.cd
        if d.startswith(root):
            d = d[len(root):]
        return d.strip("/").removeprefix("./")

    def render(self) -> str:
        """The canonical shell text for (cd, env, argv); what the executor actually runs."""
        parts = []
        if self.cd:
            parts.append(f"cd {shlex.quote(self.cd)} &&")
        parts.extend(f"{k}={shlex.quote(v)}" for k, v in self.env)
        parts.extend(shlex.quote(a) for a in self.argv)
        return " ".join(parts)

    def with_argv(self, argv: list[str] | tuple[str, ...]) -> "ParsedCommand":
        return ParsedCommand(self.raw, self.cd, self.env, tuple(argv), self.problems)


def _problem(code: str, message: str) -> Problem:
    return Problem(code, TEST_COMMAND, message)


def _scan_unquoted(text: str) -> list[Problem]:
    """Find operators, substitutions and expansions outside single quotes (a tiny POSIX quote scanner)."""
    problems: list[Problem] = []
    quote = None
    i = 0
    seen: set[str] = set()

    def add(code: str, message: str) -> None:
        if code not in seen:
            seen.add(code)
            problems.append(_problem(code, message))

    while i < len(text):
        ch = text[i]
        if quote == "'":
            if ch == "'":
                quote = None
        elif ch == "\\" and quote != "'":
            i += 2
            continue
        elif ch == "`":
            add("command.substitution", "backtick command substitution is not a test selector; remove it")
        elif ch == "$":
            nxt = text[i + 1:i + 2]
            if nxt == "(":
                add("command.substitution", "`$(...)` command substitution is not a test selector; remove it")
            else:
                add("command.expansion",
                    "shell expansion (`$...`) is not allowed; write the literal value (quote it with '...')")
        elif quote == '"':
            if ch == '"':
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in _OPERATOR_CHARS:
            two = text[i:i + 2]
            if two in ("&&", "||"):
                add("command.chaining", f"`{two}` chains commands; the command must be exactly one test "
                                        "runner invocation (only a leading `cd <dir> &&` is allowed)")
                i += 2
                continue
            if ch == ";":
                add("command.chaining", "`;` chains commands; write exactly one test runner invocation")
            elif ch == "|":
                add("command.pipe", "a pipe `|` hides the runner's exit status; remove it")
            elif ch == "&":
                add("command.background", "`&` runs a command in the background; remove it")
            elif ch in "<>":
                add("command.redirection", f"redirection `{ch}` is not allowed; the harness captures output")
            else:
                add("command.subshell", "subshells `( ... )` are not allowed; write one runner invocation")
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            add("command.comment", "a `#` comment is not allowed in the test command")
        i += 1
    if quote:
        problems.append(_problem("command.unbalanced_quotes", f"unterminated {quote} quote"))
    return problems


def _check_cd(directory: str) -> list[Problem]:
    if not directory:
        return [_problem("command.cd", "`cd` needs a directory inside the repository")]
    parts = directory.split("/")
    if ".." in parts:
        return [_problem("command.cd", f"`cd {directory}` leaves the repository (`..`)")]
    if directory.startswith("/") and not (directory == REPO_ROOT or directory.startswith(REPO_ROOT + "/")):
        return [_problem("command.cd", f"`cd {directory}` is outside the repository; use a path under "
                                       f"{REPO_ROOT} or a relative path")]
    if directory.startswith("~"):
        return [_problem("command.cd", f"`cd {directory}` is outside the repository")]
    return []


def parse_command(text: str, max_chars: int = PAPER.harness.max_command_chars) -> ParsedCommand:
    """Parse the contents of /tmp/test_command. Problems are collected, never raised."""
    if text is None:
        return ParsedCommand("", problems=(_problem("command.missing", "test_command is missing"),))
    raw = text
    body = text.rstrip("\n").rstrip("\r")
    if not body.strip():
        return ParsedCommand(raw, problems=(_problem("command.empty", "test_command is empty; write exactly "
                                                     "one command line that selects the declared nodes"),))
    if "\n" in body or "\r" in body:
        return ParsedCommand(raw, problems=(_problem("command.multiline", "test_command must be exactly one "
                                                     "line; it has several"),))
    if len(body) > max_chars:
        return ParsedCommand(raw, problems=(_problem("command.too_long", f"test_command is {len(body)} "
                                                     f"characters (limit {max_chars})"),))
    body = body.strip()
    cd: str | None = None
    m = re.match(r"^cd\s+(\S+)\s*&&\s*(.*)$", body, re.S)
    if m:
        cd_target, rest = m.group(1), m.group(2)
        try:
            cd_tokens = shlex.split(cd_target)
        except ValueError:
            cd_tokens = [cd_target]
        cd = cd_tokens[0] if len(cd_tokens) == 1 else cd_target
        cd_problems = _check_cd(cd)
        if cd_problems:
            return ParsedCommand(raw, cd=cd, problems=tuple(cd_problems))
        body = rest
    problems = _scan_unquoted(body)
    if problems:
        return ParsedCommand(raw, cd=cd, problems=tuple(problems))
    try:
        tokens = shlex.split(body, posix=True)
    except ValueError as exc:
        return ParsedCommand(raw, cd=cd, problems=(_problem("command.unparseable", f"cannot parse: {exc}"),))
    env: list[tuple[str, str]] = []
    while tokens and _ASSIGNMENT.match(tokens[0]):
        name, value = _ASSIGNMENT.match(tokens[0]).groups()  # type: ignore[union-attr]
        if name in FORBIDDEN_ENV:
            problems.append(_problem("command.forbidden_env", f"setting {name} can change what runs or how "
                                     "success is reported; remove it"))
        env.append((name, value))
        tokens.pop(0)
    if not tokens:
        problems.append(_problem("command.no_program", "the command only sets variables; add the runner"))
    elif tokens[0] in WRAPPER_PROGRAMS or tokens[0].split("/")[-1] in WRAPPER_PROGRAMS:
        problems.append(_problem("command.wrapper", f"`{tokens[0]}` is not a test runner; invoke the "
                                                    "repository's runner directly"))
    elif tokens[0] == "cd":
        problems.append(_problem("command.cd", "`cd` must be followed by `&&` and the runner"))
    return ParsedCommand(raw, cd=cd, env=tuple(env), argv=tuple(tokens), problems=tuple(problems))
