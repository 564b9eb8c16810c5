"""The exploring Test-agent teacher: a scripted stand-in (not a model, named as such) whose every move is computed
from what the agent is shown - the issue in the first user message and the outputs of its own commands - never
from the row's gold patch or official tests.

Why (issue 44): the Oracle-test teacher recites the official test patch, so SFT on it taught a policy to reproduce
one row's test, and nothing carried to another repository. This teacher explores as an agent must, so what it
demonstrates can be learned from the observation alone:

1. find where the names the issue uses are defined (`git grep` of `def`/`class` lines) and which runner the
   repository uses (`bin/test`, `tests/runtests.py`, else pytest);
2. find the tests that already exercise those names (`git grep -c` over test files), the most frequent first,
   preferring one beside the defining module;
3. read the head of that test file (its imports and style; Django: how its tests are run);
4. append one regression test that runs the issue's own example code (fenced or `>>>` code that compiles), write
   the command selecting it, the contract and the patch, and run it;
5. submit.

Its success is whatever that heuristic earns - a clean Base failure when the issue's example raises on Base - and
is measured, not assumed (`experiments/training/transfer.py`). The factory receives the task only because every
scripted factory does; it reads `task.instance_id` for its name and nothing else (`test_explorer_reads_no_gold`
runs it on a task whose gold fields are poisoned).
"""

from __future__ import annotations

import ast
import builtins
import codeop
import keyword
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from typing import Any

from execcritic.agents.loop import SUBMIT_MARKER
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.tasks.model import Task
from execcritic.training.teachers import heredocs, short_contract

EXPLORING_TEST_TEACHER = "scripted:execcritic.training.explorer:exploring_test_teacher"
TEST_NAME = "test_issue_regression"
PATCH = "cd /testbed && git add -AN && git diff --no-color > /tmp/test.patch"
MAX_NAMES = 8
MAX_SNIPPET_LINES = 20   # one turn stays within the study's per-turn token cap
_COMMON = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {
    "self", "cls", "args", "kwargs", "print", "assert", "import", "from", "return", "lambda", "True", "False", "None",
    "test", "tests", "main", "value", "values", "data", "result", "name", "type", "object", "objects", "python",
    "error", "Error", "Exception", "Traceback", "line", "file", "File", "module", "most", "recent", "call", "last",
    "expected", "actual"}
_RUNNERS = ("bin/test", "tests/runtests.py")
TEST_FILES = "'test_*.py' '*/test_*.py' '*_test.py' '*/tests.py' '*/tests/*.py'"   # git pathspecs of test files


# ---- what the agent sees ---------------------------------------------------------------------------------

def issue_text(messages: Sequence[dict[str, Any]]) -> str:
    """The issue as the first user message shows it (between the prompt's <original_issue> tags)."""
    first = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    m = re.search(r"<original_issue>\n?(.*?)\n?</original_issue>", first, re.DOTALL)
    return m.group(1) if m else first


def tool_outputs(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The output of each command so far, in order (a tool message's <output> body, tags removed)."""
    out = []
    for m in messages:
        if m.get("role") == "tool":
            text = str(m.get("content") or "")
            body = re.search(r"<output>\n?(.*?)(?:</output>|\Z)", text, re.DOTALL)
            out.append(body.group(1) if body else text)
    return out


_PROMPT = re.compile(r"^\s*(>>>|\.\.\.|In \[\d+\]:|\.\.\.:)( |$)")


def _compiling(lines: Sequence[str]) -> str:
    """The lines of an example that make up complete Python statements (prompts stripped, interleaved outputs and
    tracebacks dropped): a line is kept when it completes or continues the statements kept so far."""
    kept: list[str] = []
    pending: list[str] = []
    for raw in lines:
        line = _PROMPT.sub("", raw).rstrip()
        if not line.strip():
            continue
        trial = "\n".join(kept + pending + [line])
        try:
            ast.parse(trial)
            kept, pending = kept + pending + [line], []
            continue
        except SyntaxError:
            pass
        try:
            if codeop.compile_command(trial + "\n", symbol="exec") is None:   # an open block: wait for its body
                pending.append(line)
        except (SyntaxError, ValueError, OverflowError):
            pass
    return textwrap.dedent("\n".join(kept)) if kept else ""


def code_blocks(issue: str) -> list[str]:
    """The issue's example code that compiles: fenced blocks, then `>>>`/`In [n]:` sessions (outputs dropped)."""
    issue = issue.replace("\r\n", "\n")
    raw = [textwrap.dedent(b) for b in re.findall(r"```[a-zA-Z0-9_+-]*[ \t]*\n(.*?)```", issue, re.DOTALL)]
    session = [line for line in re.sub(r"```.*?```", "", issue, flags=re.DOTALL).splitlines() if _PROMPT.match(line)]
    if session:
        raw.append("\n".join(session))
    out = []
    for b in raw:
        b = _compiling([line for line in b.splitlines()
                        if not line.lstrip().startswith(("$ ", "pip ", "Out[", "Traceback", "File "))])
        if b.strip() and re.search(r"[A-Za-z_]\w*\s*[(.=\[]", b):
            out.append(b)
    return out


def issue_names(issue: str) -> list[str]:
    """Names the issue calls or refers to in code (calls `f(`, attributes `.f`, backticked names), most frequent
    first: where to look for the code and the tests that exercise it."""
    code = "\n".join(code_blocks(issue)) + "\n" + " ".join(re.findall(r"`([^`\n]+)`", issue))
    code += " " + " ".join(f"{n}(" for n in re.findall(r"`([A-Za-z_][A-Za-z0-9_]{2,})(?:\(\))?`", issue))
    found = re.findall(r"(?:\.|\b)([A-Za-z_][A-Za-z0-9_]{2,})\s*\(", code)
    found += re.findall(r"\.([A-Za-z_][A-Za-z0-9_]{2,})\b", code)
    found += re.findall(r"\bimport\s+([A-Za-z_][A-Za-z0-9_]{2,})", code)
    counts = Counter(n for n in found if n not in _COMMON and not n.startswith("__"))
    return [n for n, _ in counts.most_common(MAX_NAMES)]


def runner_of(listing: str) -> str:
    """`bin/test` (SymPy), `tests/runtests.py` (Django) or `pytest`, from `ls` output naming the files that exist."""
    for r in _RUNNERS:
        if re.search(rf"(^|\s){re.escape(r)}(\s|$)", listing):
            return r
    return "pytest"


def paths_in(output: str) -> list[str]:
    """Python file paths at the start of output lines (`git grep -l`/`-c` output), in order."""
    return [m.group(1) for m in re.finditer(r"^([\w./-]+\.py)(?::(\d+))?\s*$", output, re.MULTILINE)]


# ---- the moves -------------------------------------------------------------------------------------------

def _alternation(names: Sequence[str]) -> str:
    return "|".join(names) if names else "__no_name__"


def explore(messages: list[dict[str, Any]]) -> list[str]:
    names = issue_names(issue_text(messages))
    alt = _alternation(names)
    return [(f"cd /testbed && ls && ls {' '.join(_RUNNERS)} 2>/dev/null; "
             f"git grep -l -E '^\\s*(def|class) ({alt})\\b' -- '*.py' | grep -v -E '(^|/)(tests?|testing)/|test_' "
             f"| head -10")]


def find_tests(messages: list[dict[str, Any]]) -> list[str]:
    names = issue_names(issue_text(messages))
    return [(f"cd /testbed && git grep -c -w -E '{_alternation(names)}' -- {TEST_FILES} "
             f"| sort -t: -k2 -nr | head -12")]


def _pick_test_file(messages: list[dict[str, Any]]) -> str:
    """The test file to extend: the one that mentions the issue's names most, preferring one beside a module the
    first search found; none found: the defining module's `tests/test_<stem>.py` (new)."""
    outputs = tool_outputs(messages)
    sources = paths_in(outputs[0]) if outputs else []
    tests = paths_in(outputs[1]) if len(outputs) > 1 else []
    homes = {s.rsplit("/", 1)[0] for s in sources if "/" in s}
    for t in tests:
        if t.rsplit("/tests/", 1)[0] in homes or t.rsplit("/", 2)[0] in homes:
            return t
    if tests:
        return tests[0]
    if sources:
        d, stem = sources[0].rsplit("/", 1) if "/" in sources[0] else ("", sources[0])
        return f"{d + '/' if d else ''}tests/test_{stem}"
    return "tests/test_issue.py"


def read_test(messages: list[dict[str, Any]]) -> list[str]:
    path = _pick_test_file(messages)
    how = "; sed -n 1,12p tests/README.rst" if _runner(messages) == "tests/runtests.py" else ""
    return [(f"cd /testbed && echo {path} && (sed -n 1,25p {path}; grep -n -E '^(class|def) ' {path} | tail -4) "
             f"2>&1 | head -40{how}")]


def _runner(messages: list[dict[str, Any]]) -> str:
    """The runner the first command's `ls` showed."""
    outputs = tool_outputs(messages)
    return runner_of(outputs[0] if outputs else "")


def _django_label(path: str, cls: str) -> str:
    module = path.removeprefix("tests/").removesuffix(".py").replace("/", ".")
    return f"{module}.{cls}.{TEST_NAME}"


def regression_test_source(code: str, runner: str) -> str:
    """One regression test running the issue's example (its top-level imports go above the test: a star import
    is only legal there)."""
    lines = code.splitlines()
    imports = [line for line in lines if re.match(r"(import|from)\s", line)]
    rest = "\n".join(line for line in lines if line not in imports).strip("\n")
    head = "".join(f"{line}\n" for line in imports)
    body = textwrap.indent(rest or "pass", " " * (8 if runner == "tests/runtests.py" else 4))
    if runner == "tests/runtests.py":
        return (f"\n\nfrom django.test import SimpleTestCase as _IssueTestCase\n{head}\n\n"
                f"class IssueRegressionTests(_IssueTestCase):\n    def {TEST_NAME}(self):\n{body}\n")
    return f"\n\n{head}\n\ndef {TEST_NAME}():\n{body}\n"


def command_for(path: str, runner: str) -> str:
    if runner == "bin/test":
        return f"bin/test -C --verbose {path} -k {TEST_NAME}"
    if runner == "tests/runtests.py":
        return (f"./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
                f"{_django_label(path, 'IssueRegressionTests')}")
    return f"pytest -rA {path}::{TEST_NAME}"


def write(messages: list[dict[str, Any]]) -> list[str]:
    issue = issue_text(messages)
    path = _pick_test_file(messages)
    runner = _runner(messages)
    blocks = code_blocks(issue)
    code = "\n".join((max(blocks, key=len) if blocks else "").splitlines()[:MAX_SNIPPET_LINES])
    try:
        ast.parse(code)
    except SyntaxError:          # cut inside a statement: the first complete statements only
        code = _compiling(code.splitlines())
    command = command_for(path, runner)
    django = runner == "tests/runtests.py"
    node = f"{TEST_NAME} ({_django_label(path, 'IssueRegressionTests')})" if django else TEST_NAME
    appended = heredocs([("/tmp/regression_test.py", regression_test_source(code, runner)),
                         ("/tmp/test_command", command), ("/tmp/test_contract.json", short_contract([node]))],
                        then=f"mkdir -p {path.rsplit('/', 1)[0] if '/' in path else '.'} && cd /testbed && "
                             f"cat /tmp/regression_test.py >> {path} && {PATCH} && "
                             f"(eval \"$(cat /tmp/test_command)\") 2>&1 | tail -15")
    return [appended]


def submit(messages: list[dict[str, Any]]) -> list[str]:
    return [f"echo {SUBMIT_MARKER} && cat /tmp/test.patch"]


MOVES = (explore, find_tests, read_test, write, submit)


def exploring_test_teacher(task: Task, role: str = "test", run_index: int = 0) -> ScriptedModel:
    """The exploring Test-agent teacher for one episode (five turns; each computed from the messages alone)."""
    return ScriptedModel(list(MOVES), name=f"{EXPLORING_TEST_TEACHER}:{task.instance_id}")


__all__ = ["EXPLORING_TEST_TEACHER", "MOVES", "code_blocks", "exploring_test_teacher", "issue_names", "issue_text",
           "paths_in", "runner_of", "tool_outputs"]
