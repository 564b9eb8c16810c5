"""Shared helpers of the Multilingual runners (cargo, go, maven, jest, rspec, ...): option walking,
"is this regex an anchored list of literal names" checks, and reading the official row.

Why one helper module: every runner with a regex selector (`go test -run`, `jest -t`, `mocha -g`,
`phpunit --filter`, `vitest -t`, `qunit --filter`, `-n /re/` in Ruby) has the same exactness rule -
a regex is node-level only when it is anchored at both ends and its body is an alternation of
escaped literal names, so that it cannot match any name that is not spelled out. Keeping that rule
in one place keeps the runners consistent. Pure functions, no I/O.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand, parse_command
from execcritic.bundle.diff import parse_patch
from execcritic.bundle.languages._describe import walk_up
from execcritic.bundle.problems import TEST_COMMAND, Problem

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task


def problem(code: str, message: str) -> Problem:
    return Problem(code, TEST_COMMAND, message)


def basename(program: str) -> str:
    return program.rsplit("/", 1)[-1]


def q(arg: str) -> str:
    """Shell-quote one argument for a built command (single quotes only when needed)."""
    return shlex.quote(arg)


# ---- option walking ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Opt:
    """How a runner treats one command-line option.

    `takes`: whether it takes a value; `policy`: "ok" (harmless), "select" (a selector the runner
    interprets itself), "observe" (reporter/verbosity; may be rewritten by observed_command), or
    "reject" with `why` saying what it does wrong.
    """

    takes: bool = False
    policy: str = "ok"
    why: str = ""


OK, OKV = Opt(False, "ok"), Opt(True, "ok")
SEL, SELV = Opt(False, "select"), Opt(True, "select")


def reject(why: str, takes: bool = False) -> Opt:
    return Opt(takes, "reject", why)


@dataclass
class Walked:
    positionals: list[str]
    options: list[tuple[str, str | None]]  # (canonical name as written, value)
    after_dd: list[str]  # arguments after a bare `--`
    problems: list[Problem]


def walk_options(
    args: Sequence[str],
    spec: dict[str, Opt],
    *,
    runner: str,
    short_attached: bool = True,
    long_single_dash: bool = False,
    stop_at_dd: bool = True,
) -> Walked:
    """Split `args` into positionals and options by `spec`.

    Unknown options are reported (fail closed): an unknown option may take a value, which would
    make us misread the next argument as a selector. `-xVALUE` is accepted for short options that
    take a value when `short_attached`. Go-style `-flag=value` single-dash long options when
    `long_single_dash`.
    """
    positionals: list[str] = []
    options: list[tuple[str, str | None]] = []
    problems: list[Problem] = []
    after: list[str] = []
    i = 0
    args = list(args)
    while i < len(args):
        a = args[i]
        if a == "--" and stop_at_dd:
            after = args[i + 1 :]
            break
        if not a.startswith("-") or a == "-":
            positionals.append(a)
            i += 1
            continue
        name, eq, value = a.partition("=")
        opt = spec.get(name)
        if opt is None and long_single_dash and name.startswith("--"):
            opt = spec.get(name[1:])
            name = name[1:] if opt is not None else name
        if opt is None and not eq and not a.startswith("--") and len(a) > 2 and short_attached:
            short = spec.get(a[:2])
            if short is not None and short.takes:
                options.append((a[:2], a[2:]))
                problems += _policy_problem(a[:2], short, runner)
                i += 1
                continue
        if opt is None:
            problems.append(
                problem(
                    "runner.unknown_option",
                    f"{runner}: unknown option {name!r}; it may change which tests run or how "
                    "results are reported - remove it or use a documented option",
                )
            )
            options.append((name, value if eq else None))
            i += 1
            continue
        if opt.takes and not eq:
            if i + 1 >= len(args):
                problems.append(problem("runner.option_value", f"{runner}: option {name} needs a value"))
                options.append((name, None))
                i += 1
                continue
            value = args[i + 1]
            i += 2
        else:
            i += 1
        options.append((name, value if (opt.takes or eq) else None))
        problems += _policy_problem(name, opt, runner)
    return Walked(positionals, options, after, problems)


def _policy_problem(name: str, opt: Opt, runner: str) -> list[Problem]:
    if opt.policy == "reject":
        return [problem("runner.option", f"{runner}: `{name}` {opt.why}")]
    return []


def values(walked: Walked, *names: str) -> list[str]:
    return [v for n, v in walked.options if n in names and v is not None]


def has(walked: Walked, *names: str) -> bool:
    return any(n in names for n, _ in walked.options)


# ---- environment ----------------------------------------------------------------------------------


def env_problems(
    cmd: ParsedCommand, runner: str, *, forbidden_prefixes: Iterable[str] = (), forbidden: Iterable[str] = ()
) -> list[Problem]:
    """Assignments that configure the runner itself (a test runner override, a cargo target runner,
    npm config) change what runs or how success is reported; the bundle may not set them."""
    out = []
    prefixes = tuple(forbidden_prefixes)
    names = set(forbidden)
    for name, _value in cmd.env:
        if name in names or (prefixes and name.startswith(prefixes)):
            out.append(
                problem(
                    "runner.env",
                    f"{runner}: setting {name} configures the test runner (it can "
                    "change what runs or how results are reported); remove it",
                )
            )
    return out


# ---- anchored literal regexes -----------------------------------------------------------------------

_META = set(".^$*+?()[]{}|\\")


def regex_escape(text: str, extra: str = "") -> str:
    """Escape every regex metacharacter (and `extra`, e.g. '/' inside a /.../ literal)."""
    out = []
    for ch in text:
        if ch in _META or ch in extra:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _literal(body: str, delim: str = "") -> str | None:
    """The text a regex body matches if it is a pure literal (escaped metachars allowed), else None."""
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            if i + 1 >= len(body):
                return None
            nxt = body[i + 1]
            if nxt.isalnum() or nxt == "_":
                return None  # \d, \w, \b, \A, \z, \n ... are not literal characters
            out.append(nxt)
            i += 2
            continue
        if ch in _META or (delim and ch == delim):
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _split_alternation(body: str) -> list[str] | None:
    """Split `a|b|c` at top-level bars; None if there are groups or classes (not a plain list)."""
    parts, cur, i = [], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch == "|":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def anchored_literals(
    regex: str, *, start: Sequence[str] = ("^",), end: Sequence[str] = ("$",), delim: str = ""
) -> list[str] | None:
    """If `regex` is `^NAME$`, `^(A|B)$` or `^(?:A|B)$` with literal names, the names; else None.

    Why both anchors: every runner here uses *search* semantics (`regexp.MatchString`, JS
    `RegExp.test`, `preg_match`, Ruby `=~`), so an unanchored or half-anchored regex matches any name
    that merely contains (or starts with) the text.
    """
    for s in start:
        if regex.startswith(s):
            inner = regex[len(s) :]
            break
    else:
        return None
    for e in end:
        if inner.endswith(e) and not inner.endswith("\\" + e):
            inner = inner[: len(inner) - len(e)]
            break
    else:
        return None
    if not inner:
        return None
    if inner.startswith("(") and inner.endswith(")") and _balanced_group(inner):
        inner = inner[3:-1] if inner.startswith("(?:") else inner[1:-1]
        if inner.startswith("?"):
            return None
    parts = _split_alternation(inner)
    if parts is None:
        return None
    names = []
    for p in parts:
        lit = _literal(p, delim)
        if lit is None or lit == "":
            return None
        names.append(lit)
    return names


def _balanced_group(text: str) -> bool:
    """True if text is one group `( ... )` whose closing paren is the last character."""
    depth, i = 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return False
        i += 1
    return depth == 0


def anchored_regex(names: Sequence[str], *, start: str = "^", end: str = "$", extra: str = "") -> str:
    """`^(?:A|B)$` for literal names (the inverse of anchored_literals)."""
    escaped = [regex_escape(n, extra) for n in names]
    if len(escaped) == 1:
        return f"{start}{escaped[0]}{end}"
    return f"{start}(?:{'|'.join(escaped)}){end}"


# ---- the official row ----------------------------------------------------------------------------

_START = ": '>>>>> Start Test Output'"
_END = ": '>>>>> End Test Output'"


def official_command_text(task: Task | None) -> str | None:
    """SWE-bench's own test command for the row (between the Start/End markers of eval_script),
    with the `( ... ) | cat` wrapper removed. Used only to learn *where* tests run (package,
    module, build directory) - never copied as a selector."""
    if task is None or not task.eval_script:
        return None
    script = task.eval_script
    a = script.find(_START)
    b = script.find(_END, a + 1)
    if a < 0 or b < 0:
        return None
    body = script[a + len(_START) : b].strip()
    m = re.match(r"^\((.*)\)\s*\|\s*cat\s*$", body, re.DOTALL)
    if m:
        body = m.group(1).strip()
    return body


def _split_unquoted(text: str, sep: str) -> list[str]:
    """Split at `sep` outside single and double quotes."""
    parts, cur, quote, i = [], [], None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < len(text):
                cur.append(text[i : i + 2])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif text.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


_WRAPPERS = {"timeout": 1, "nice": 0, "stdbuf": 0, "xvfb-run": 0}


def official_commands(task: Task | None) -> list[ParsedCommand]:
    """The official command split into parsed single invocations: at `&&` (maven runs one command
    per test), keeping a leading `cd DIR &&` with the command it prefixes; a `| jq ...` tail and a
    `timeout 10s` wrapper are dropped."""
    text = official_command_text(task)
    if not text:
        return []
    out, cd = [], None
    for part in _split_unquoted(text, "&&"):
        part = _split_unquoted(part, "|")[0].strip()
        if not part:
            continue
        if re.match(r"^cd\s+\S+$", part):
            cd = part
            continue
        tokens = part.split()
        while tokens and tokens[0] in _WRAPPERS:
            skip = 1 + _WRAPPERS[tokens[0]]
            part = part.split(None, skip)[skip] if len(tokens) > skip else ""
            tokens = part.split()
        out.append(parse_command(f"{cd} && {part}" if cd else part))
        cd = None
    return out


def test_patch_files(task: Task | None) -> list[tuple[str, list[str], list[str]]]:
    """(path, added lines, context+added lines) for every file of the row's test_patch."""
    if task is None or not task.test_patch:
        return []

    out = []
    for fd in parse_patch(task.test_patch).files:
        if not fd.new_path:
            continue
        post = [ln[1:] for h in fd.hunks for ln in h.lines if not ln.startswith("-")]
        out.append((fd.new_path, fd.added_lines, post))
    return out


def norm_rel(path: str, cwd: str = "") -> str:
    """Repository-relative form of a path argument given in `cwd` (strips /testbed and ./)."""
    p = path
    if p.startswith("/testbed/"):
        p, cwd = p[len("/testbed/") :], ""
    p = posixpath.normpath(posixpath.join(cwd, p)) if cwd else posixpath.normpath(p)
    return "" if p == "." else p


def unique(seq: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in seq if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


# ---- describe-chain recovery from a test patch ------------------------------------------------------


@dataclass(frozen=True)
class ChainHit:
    path: str
    chain: tuple[str, ...]  # enclosing group descriptions, outermost first
    line: int  # 1-based line of the test in the post-patch file


def recover_chains(
    task: Task | None,
    title: str,
    *,
    leaf: re.Pattern[str],
    group: re.Pattern[str],
    path_ok,
    unquote,
    unit: int = 2,
) -> list[ChainHit]:
    """Find where the row's test patch defines the test `title` and the describe/context chain that
    encloses it, reading only what the patch shows.

    Why: SWE-bench names jest and rspec tests by their leaf title only, while the runners' name
    filters (`jest -t`, `rspec -E`) match the *full* name (enclosing group titles + title). The chain
    is taken from the hunk: walking up from the test, the first line with less indentation must be
    the enclosing group's opener (consistently indented code); when the walk reaches the top of the
    hunk one level below column 0, git's hunk header (the last column-0 line before the hunk) is the
    outermost opener. Anything else - a deeper level outside the hunk, a non-literal title, an
    enclosing construct that is not a group - gives no hit. A wrong chain cannot produce a verdict:
    the test would not run and the harness reports the node as not collected.
    `leaf`/`group` must have a named group `q` (quote) and `s` (string body), or `c` (a constant
    used as the description).
    """
    if task is None or not task.test_patch:
        return []

    hits: list[ChainHit] = []
    for fd in parse_patch(task.test_patch).files:
        if not fd.new_path or not path_ok(fd.new_path):
            continue
        for h in fd.hunks:
            post = [ln[1:] for ln in h.lines if not ln.startswith("-")]
            for k, line in enumerate(post):
                m = leaf.match(line.strip())
                if not m or unquote(m) != title:
                    continue
                chain = walk_up(post, k, h.section, group, unquote, unit)
                if chain is not None:
                    hits.append(ChainHit(fd.new_path, tuple(chain), h.new_start + k))
    return hits
