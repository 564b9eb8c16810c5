"""The official evaluator V*: full FAIL_TO_PASS + PASS_TO_PASS, swebench's semantics, fail-closed.

Two paths, one result type:
- docker: swebench's own harness (`run_instance`) with the row's unchanged `eval_script` in the official
  `sweb.eval.*` image named by the row; its report.json/test_output.txt are then re-checked here.
- local: the same script body (reset the test files, apply the test patch, run the row's test command
  on the same test files - SWE-bench's "test directives") inside the task environment's sandbox,
  parsed with the row's `log_parser` and graded by swebench's `get_logs_eval`/`get_eval_report`.

What swebench lacks and we add: a run that did not produce a result for every targeted node (collection
or import error, missing node, timeout, OOM, sandbox failure, test patch not applying) is
`valid=False` - never "unresolved". A candidate patch that does not apply is invalid with the apply
diagnostic (swebench counts it as an "error", not as unresolved, too).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from execcritic.config import PAPER, HarnessConfig
from execcritic.errors import ExecCriticError, InputError, SandboxError, check_size
from execcritic.limits import MAX_PATCH_BYTES
from execcritic.bundle.command import parse_command
from execcritic.bundle.gates import source_patch_problems
from execcritic.harness.apply import SWEBENCH, SWEBENCH_APPLY_CMDS, apply_patch
from execcritic.harness.classify import agree, reporter_problem
from execcritic.harness.execute import base_reader
from execcritic.harness.execution import FailureKind
from execcritic.harness.instrument import (candidate_facts, declared_paths, instrumented_command, new_hashseed,
                                           run_reported, tree_problem)
from execcritic.harness.reporter.stream import ReporterReport
from execcritic.runners.base import Runner
from execcritic.runners.registry import runner_for_command, runner_for_task
from execcritic.sandbox.base import CommandResult, Limits, Sandbox
from execcritic.swebench_compat import grading
from execcritic.tasks.environment import TaskEnvironment, environment_for
from execcritic.tasks.model import Task

START = ">>>>> Start Test Output"
END = ">>>>> End Test Output"
EXIT_MARK = ">>>>> Test Exit Code"
TEST_PATCH_FAILED = ">>>>> Test Patch Apply Failed"
GIT_APPLY_CMDS = list(SWEBENCH_APPLY_CMDS)  # swebench's names, for the Docker path's report


@dataclass
class OfficialResult:
    instance_id: str
    resolved: bool
    valid: bool                      # False: did not run to a result for every F2P/P2P node
    patch_applied: bool
    f2p_pass: list[str] = field(default_factory=list)
    f2p_fail: list[str] = field(default_factory=list)
    p2p_pass: list[str] = field(default_factory=list)
    p2p_fail: list[str] = field(default_factory=list)
    error: str = ""                  # why valid is False (bounded); "" when valid
    missing: list[str] = field(default_factory=list)       # targeted nodes with no result
    # targeted nodes swebench's parser has no line for that the runner's own parse shows failing (a unittest
    # subTest failure prints only its FAIL block): swebench grades them as failures; they ran, so not missing
    failed_unparsed: list[str] = field(default_factory=list)
    # targeted nodes with no result in a run that another targeted node fails outright: swebench grades them as
    # failures and nothing they did could make the run resolved, so the verdict (unresolved) stands. Django prints
    # a test whose subTests fail with no status, and the next test's line joins it: its result is lost
    unreported: list[str] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)   # collection/import errors the runner saw
    backend: str = ""
    apply_command: str = ""          # which of GIT_APPLY_CMDS applied the candidate ("" for an empty patch)
    exit_code: int | None = None     # the test command's own exit status (as recorded by the script)
    timed_out: bool = False
    duration_s: float = 0.0
    report: dict[str, Any] = field(default_factory=dict)   # swebench's per-instance report
    status_map: dict[str, str] = field(default_factory=dict, repr=False)
    log_path: str = ""
    failure_kind: str = ""           # harness.execution.FailureKind value when the harness refused a result
    forbidden: bool = False          # the candidate is not an admissible source patch (Eq. 6: reward 0)
    reporter: dict[str, Any] | str = field(default_factory=dict)  # the harness-owned channel's summary
    hashseed: int | None = None      # PYTHONHASHSEED of the test run (reproduces a flaky run)
    plain: dict[str, Any] = field(default_factory=dict)   # the run without the reporter (its verdict, its order)

    def __post_init__(self) -> None:
        if self.resolved and not self.valid:
            raise ValueError("an invalid evaluation cannot be resolved")

    def to_dict(self, *, with_status_map: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not with_status_map:
            d.pop("status_map")
        return d


# ---- pure parts ----------------------------------------------------------------------------------

BEHAVIORAL_ERROR_PARSERS = {"parse_log_django", "parse_log_sympy"}  # ERROR = the test body raised


def _fails_outright(task: Task, res: OfficialResult) -> bool:
    """A targeted node with a result that fails it (FAILED; ERROR where the parser's ERROR is the test body
    raising): the run is unresolved whatever its targeted nodes without a result did."""
    failing = ("FAILED", "ERROR") if task.log_parser in BEHAVIORAL_ERROR_PARSERS else ("FAILED",)
    g = grading()
    for t in (*task.fail_to_pass, *task.pass_to_pass):
        if t in res.missing:
            continue
        key = g._resolve_case(t, res.status_map)
        if key is not None and res.status_map[key] in failing:
            return True
    return False


def _script_lines(eval_script: str) -> list[str]:
    lines = eval_script.splitlines()
    return [ln for ln in lines if ln.strip() not in ("#!/bin/bash", "set -uxo pipefail")]


def local_eval_script(task: Task, *, base_commit: str, upstream_base: str | None = None) -> str:
    """The row's eval_script for a local checkout: no conda, no re-install, no locale-gen.

    Kept verbatim: the `export` lines of the repo's eval_commands, and everything from the test-file
    reset (`git checkout <base> <test files>`) to the end (test patch, markers, the test command on
    the test directives, the final reset) - with the row's upstream commit replaced by this
    checkout's Base commit. Adds what swebench 5.x adds (the test exit code record) and a fail-closed
    stop when the test patch does not apply.
    """
    upstream = upstream_base or task.base_commit
    if not task.eval_script.strip():
        raise InputError("row has no eval_script (swebench 5.x schema needed)", file=task.dataset or None,
                         instance=task.instance_id, field="eval_script")
    lines = _script_lines(task.eval_script)
    reset_re = re.compile(rf"^git checkout {re.escape(upstream)}\b")
    start = _test_section_start(lines, reset_re)
    if start is None:
        raise InputError(f"eval_script has no `git checkout {upstream[:12]} <test files>` (or `rm -f <new test "
                         "files>`) line before its test patch; cannot find the test section",
                         file=task.dataset or None, instance=task.instance_id, field="eval_script")
    exports = [ln for ln in lines[:start] if ln.startswith("export ")]
    body = lines[start:]
    out: list[str] = []
    in_heredoc: str | None = None
    saw_end = False
    for ln in body:
        if in_heredoc is not None:
            out.append(ln)
            if ln == in_heredoc:
                in_heredoc = None
            continue
        m = re.match(r"^git apply -v - <<'(\w+)'$", ln)
        if m:
            in_heredoc = m.group(1)
            out.append(f"git apply -v - <<'{m.group(1)}' || "
                       f"{{ echo '{TEST_PATCH_FAILED}'; exit 97; }}")
            continue
        if reset_re.match(ln):
            ln = ln.replace(upstream, base_commit, 1)
        if END in ln:
            out.append("SWEBENCH_TEST_EXIT_CODE=$?")
            out.append(ln)
            out.append(f'echo "{EXIT_MARK}: $SWEBENCH_TEST_EXIT_CODE"')
            saw_end = True
            continue
        if ln.startswith(("source /opt/miniconda3", "conda activate")):
            continue
        out.append(ln)
    if not saw_end or not any(START in ln for ln in out):
        raise InputError("eval_script lacks the Start/End Test Output markers", file=task.dataset or None,
                         instance=task.instance_id, field="eval_script")
    return "\n".join(["set -uxo pipefail", "cd /testbed", *exports, *out]) + "\n"


def _test_section_start(lines: list[str], reset_re: re.Pattern) -> int | None:
    """Where the test section begins: the test-file resets right before the test patch's here-document - `git
    checkout <base> <files>` and, for test files the patch adds, `rm -f <files>` (SWE-bench Multilingual writes
    only the latter when every test file is new: valkey-io__valkey-790 and 20 other rows) - else the first
    `git checkout <base>` line anywhere; None when there is neither."""
    heredoc = next((i for i, ln in enumerate(lines) if ln.startswith("git apply -v - <<'")), None)
    if heredoc is not None:
        i = heredoc
        while i > 0 and (reset_re.match(lines[i - 1]) or lines[i - 1].startswith("rm -f ")):
            i -= 1
        if i < heredoc:
            return i
    return next((i for i, ln in enumerate(lines) if reset_re.match(ln)), None)


def env_eval_script(task: Task, env: TaskEnvironment) -> str:
    """`local_eval_script` for the checkout of a task environment (whose Base may stand in for the row's)."""
    upstream = env.upstream_base_commit
    if not upstream or upstream not in task.eval_script:
        upstream = task.base_commit
    return local_eval_script(task, base_commit=env.base_commit or task.base_commit, upstream_base=upstream)


def test_spec_for(task: Task, f2p: list[str] | None = None, p2p: list[str] | None = None):
    """swebench's TestSpec for grading (its eval_script_list is unused by grading)."""
    from swebench.types import TestSpec  # lazy: swebench's Docker harness

    return TestSpec(instance_id=task.instance_id, image=task.image, eval_script_list=[], repo=task.repo,
                    version=task.version, FAIL_TO_PASS=list(task.fail_to_pass if f2p is None else f2p),
                    PASS_TO_PASS=list(task.pass_to_pass if p2p is None else p2p),
                    log_parser=task.log_parser or _default_parser(task), eval_type=task.eval_type or "pass_and_fail")


def _default_parser(task: Task) -> str:
    return {"django/django": "parse_log_django", "sympy/sympy": "parse_log_sympy"}.get(task.repo, "parse_log_pytest")


def test_directives(task: Task) -> list[str]:
    """The files the test patch touches (swebench's test directives before the Django relabeling)."""
    return re.findall(r"^diff --git a/.* b/(.*)$", task.test_patch, flags=re.M)


def _mentions_directive(text: str, directives: list[str]) -> bool:
    for d in directives:
        stem = d[:-3] if d.endswith(".py") else d
        forms = {d, stem.replace("/", "."), stem.removeprefix("tests/").replace("/", ".")}
        if any(f and f in text for f in forms):
            return True
    return False


def _runner_load_errors(task: Task, status_map: dict[str, str], log: str) -> list[str]:
    """Load errors the repo's runner reports for the test files this evaluation runs.

    Errors naming other files are ignored: they come from tests that run nested test sessions
    (pytest's own suite prints `ERROR test_x.py` for its inner runs). A directive file that really
    failed to load leaves its targeted nodes without results, which is invalid on its own.
    """
    runner = runner_for_task(task)
    if runner is None:
        return []
    directives = test_directives(task)
    return [e for e in runner.load_errors(status_map, log) if _mentions_directive(e, directives)]


def grade_log(task: Task, log_text: str, *, patch: str | None, log_path: str | None = None,
              f2p: list[str] | None = None, p2p: list[str] | None = None, backend: str = "",
              timed_out: bool = False) -> OfficialResult:
    """Grade one test log with swebench's functions, then apply the fail-closed checks."""
    g = grading()
    f2p = list(task.fail_to_pass if f2p is None else f2p)
    p2p = list(task.pass_to_pass if p2p is None else p2p)
    spec = test_spec_for(task, f2p, p2p)
    cleanup = None
    if log_path is None:
        fh = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8")
        fh.write(log_text)
        fh.close()
        log_path = cleanup = fh.name
    try:
        status_map, found = g.get_logs_eval(spec, log_path)
        pred = {"instance_id": task.instance_id, "model_name_or_path": "execcritic", "model_patch": patch or ""}
        report = g.get_eval_report(spec, pred, log_path, include_tests_status=True)[task.instance_id]
    finally:
        if cleanup:
            Path(cleanup).unlink(missing_ok=True)
    exit_code = g.parse_test_exit_code(log_text)
    res = OfficialResult(instance_id=task.instance_id, resolved=False, valid=False, patch_applied=True,
                         backend=backend, exit_code=exit_code, timed_out=timed_out, report=report,
                         status_map=dict(status_map), log_path=log_path if not cleanup else "")
    tests = report.get("tests_status") or {}
    res.f2p_pass = list(tests.get("FAIL_TO_PASS", {}).get("success", []))
    res.f2p_fail = list(tests.get("FAIL_TO_PASS", {}).get("failure", []))
    res.p2p_pass = list(tests.get("PASS_TO_PASS", {}).get("success", []))
    res.p2p_fail = list(tests.get("PASS_TO_PASS", {}).get("failure", []))
    if timed_out:
        res.error = "the test run timed out (sandbox wall-clock limit)"
        return res
    if TEST_PATCH_FAILED in log_text:
        res.error = "the official test patch did not apply on top of the candidate: " + _tail_between(
            log_text, "git apply -v -", TEST_PATCH_FAILED)
        return res
    if not found:
        why = report.get("infra_failure_reason") or "no parseable per-test results"
        res.error = f"swebench found no valid test results ({why}); exit code {exit_code}"
        return res
    unparsed = [t for t in f2p + p2p if g._resolve_case(t, status_map) is None]
    runner = runner_for_task(task) if unparsed else None
    if runner is not None:
        ran = runner.parse_results(log_text)
        for t in unparsed:
            status = runner.result_for(runner.parse_node(t), ran)
            if status in ("FAILED", "ERROR"):
                res.failed_unparsed.append(t)
                res.status_map[t] = status
    res.missing = [t for t in unparsed if t not in res.failed_unparsed]
    res.load_errors = _runner_load_errors(task, status_map, log_text)
    if res.missing and not res.load_errors and _fails_outright(task, res):
        res.unreported, res.missing = res.missing, []
    if res.missing:
        shown = ", ".join(res.missing[:5]) + (f" (+{len(res.missing) - 5} more)" if len(res.missing) > 5 else "")
        res.error = f"{len(res.missing)} targeted test(s) produced no result: {shown}"
        if res.load_errors:
            res.error += "; " + "; ".join(res.load_errors[:3])
        return res
    if res.load_errors:
        res.error = "test collection/import errors: " + "; ".join(res.load_errors[:3])
        return res
    res.valid = True
    res.resolved = bool(report.get("resolved"))
    return res


def _tail_between(text: str, start: str, end: str, limit: int = 2000) -> str:
    i = text.rfind(start)
    j = text.find(end, i if i >= 0 else 0)
    chunk = text[i if i >= 0 else 0: j if j >= 0 else len(text)]
    return chunk[-limit:].strip()


def invalid(task: Task, error: str, *, backend: str = "", patch_applied: bool = False,
            **kw: Any) -> OfficialResult:
    return OfficialResult(instance_id=task.instance_id, resolved=False, valid=False, patch_applied=patch_applied,
                          error=error[-12_000:], backend=backend, **kw)


# ---- local path ----------------------------------------------------------------------------------

def evaluate_local(task: Task, patch: str, env: TaskEnvironment, *, harness: HarnessConfig = PAPER.harness,
                   log_dir: Path | None = None, sandbox=None, candidate: bool | None = None,
                   hashseed: int | None = None,
                   grade: Callable[..., OfficialResult] = grade_log) -> OfficialResult:
    """The row's eval script in the task's sandbox (local or Docker): the candidate through the source-patch
    gate (unless it is the task's own Gold; `candidate` forces either way), the tree judged after applying
    it, the test command under the harness-owned reporter, swebench's grading - and resolution only when the
    reporter's records agree with that grading."""
    t0 = time.monotonic()
    own = sandbox is None
    backend = getattr(sandbox, "backend", env.kind)
    if candidate is None:
        candidate = not no_candidate_code(task, patch)
    if candidate and patch.strip():
        problems = source_patch_problems(patch, language=task.language, repo=task.repo)
        if problems:
            return invalid(task, "the patch is not an admissible source patch: " + "; ".join(
                str(p) for p in problems[:3]), backend=backend, failure_kind=FailureKind.FORBIDDEN_SOURCE_EDIT.value,
                forbidden=True, duration_s=time.monotonic() - t0)
    seed = new_hashseed() if hashseed is None else hashseed
    try:
        if sandbox is None:
            try:
                sandbox = env.open_sandbox(limits=Limits.from_config(harness))
            except (SandboxError, OSError) as exc:
                return invalid(task, f"sandbox error: {exc}", backend=backend, duration_s=time.monotonic() - t0)
        plain_script = env_eval_script(task, env)
        script, runner = instrument_eval_script(task, plain_script, seed)
        if runner is None or not harness.official_plain_run:
            res = _run_once(task, patch, sandbox, script, runner, harness=harness, log_dir=log_dir, seed=seed,
                            grade=grade)
        else:
            # twice: instrumented and plain (no reporter, no trace of the harness); a candidate that behaves
            # differently when it can tell the reporter is there gets no resolution from either
            run = functools.partial(_run_once, task, patch, harness=harness, log_dir=log_dir, seed=seed, grade=grade)
            if harness.official_runs_together:
                res, other = _together(task, env, harness, lambda: run(sandbox, script, runner),
                                       lambda sb: run(sb, plain_script, None, plain=True))
                first = None
            elif first := bool(secrets.randbelow(2)):
                other = run(sandbox, plain_script, None, plain=True)
                res = run(sandbox, script, runner)
            else:
                res = run(sandbox, script, runner)
                other = run(sandbox, plain_script, None, plain=True)
            res.plain = {"valid": other.valid, "resolved": other.resolved, "failure_kind": other.failure_kind,
                         "error": other.error[-500:], "first": first, "hashseed": other.hashseed}
            if res.valid and (not other.valid or other.resolved != res.resolved):
                said = "resolved" if res.resolved else "unresolved"
                res.valid, res.resolved = False, False
                res.failure_kind = FailureKind.PLAIN_RUN_DISAGREES.value
                res.error = (f"the run without the harness's reporter disagrees: instrumented {said}, plain "
                             f"{'resolved' if other.resolved else 'unresolved' if other.valid else 'invalid'}"
                             + (f" ({other.error[-300:]})" if other.error else ""))
        res.duration_s = round(time.monotonic() - t0, 2)
        return res
    finally:
        if own and sandbox is not None:
            sandbox.close()


def _together(task: Task, env: TaskEnvironment, harness: HarnessConfig, reported: Callable[[], OfficialResult],
              plain: Callable[[Sandbox], OfficialResult]) -> tuple[OfficialResult, OfficialResult]:
    """The instrumented run here and the plain one at the same time in a sandbox of its own, opened from the task
    environment like the first (the two runs change the same test files: they cannot share a tree)."""
    def apart() -> OfficialResult:
        t0 = time.monotonic()
        try:
            with env.open_sandbox(limits=Limits.from_config(harness)) as sb:
                return plain(sb)
        except (SandboxError, OSError) as exc:
            return invalid(task, f"sandbox error: {exc}", backend=env.kind, duration_s=time.monotonic() - t0)

    with ThreadPoolExecutor(1, thread_name_prefix="official-plain") as pool:
        other = pool.submit(apart)
        res = reported()
        return res, other.result()


def _run_once(task: Task, patch: str, sandbox: Sandbox, script: str, runner: Runner | None, *,
              harness: HarnessConfig, log_dir: Path | None, seed: int, grade: Callable[..., OfficialResult],
              plain: bool = False) -> OfficialResult:
    """One run of the eval script on a fresh Base: the candidate applied and the tree judged, the script run
    (under the reporter when `runner` is given), swebench's grading, and - under the reporter - resolution only
    when its records agree with that grading."""
    t0 = time.monotonic()
    backend = sandbox.backend
    try:
        sandbox.reset()
        apply_cmd = ""
        if patch.strip():
            applied = apply_patch(sandbox, patch, name="candidate", ladder=SWEBENCH, timeout=harness.setup_timeout_s)
            if not applied.applied:
                return invalid(task, "patch does not apply to Base (all of swebench's apply commands failed):\n"
                               + applied.diagnostic, backend=backend, duration_s=time.monotonic() - t0)
            apply_cmd = applied.method or ""
            mismatch = tree_problem(sandbox.changed_paths(), declared_paths(patch),
                                    backups=apply_cmd.startswith("patch"))
            if mismatch:
                return invalid(task, mismatch, backend=backend, patch_applied=True,
                               failure_kind=FailureKind.TREE_MISMATCH.value, duration_s=time.monotonic() - t0)
        report = None
        if runner is not None:
            result, report = run_reported(sandbox, script, timeout=harness.official_timeout_s, cwd="/testbed",
                                          facts={"runner": runner.reporter,
                                                 **candidate_facts(patch, task.test_patch, base_reader(sandbox))},
                                          script_writes_tests=True)
        else:
            # the plain run draws the instrumented run's hash seed: hash-order-dependent tests (SymPy's bin/test
            # picks a random seed unless PYTHONHASHSEED is set) otherwise fail in one run only, and the two verdicts
            # disagree for the seed, not the reporter (sympy__sympy-13647's Gold: test_simplify's RecursionError)
            result = sandbox.run(script, timeout=harness.official_timeout_s, cwd="/testbed",
                                 env={"PYTHONHASHSEED": str(int(seed))} if plain else None)
    except (SandboxError, OSError) as exc:
        return invalid(task, f"sandbox error: {exc}", backend=backend, duration_s=time.monotonic() - t0)
    log_path = None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        suffix = "_plain" if plain else ""
        log_path = str(log_dir / f"test_output{suffix}.txt")
        Path(log_path).write_text(result.output)
        (log_dir / f"eval{suffix}.sh").write_text(script)
    res = grade(task, result.output, patch=patch, log_path=log_path, backend=backend, timed_out=result.timed_out)
    res.apply_command = apply_cmd
    res.hashseed = seed if runner is not None or plain else None
    res.reporter = report.summary() if report is not None else "none"
    if report is not None and runner is not None:
        # the script's own exit status is not the test command's: compare the one the script recorded
        tested = dataclasses.replace(result, exit_code=res.exit_code if res.exit_code is not None else -1)
        refused = cross_check(task, runner, tested, report,
                              unbacked=outside_tree(sandbox, runner, [*task.fail_to_pass, *task.pass_to_pass]))
        if refused is not None and no_candidate_code(task, patch):     # (whatever the gate was told)
            refused = trusted_run_refusal(*refused)
        if refused is not None:
            res.valid, res.resolved = False, False
            res.failure_kind, why = refused
            res.error = (res.error + "; " if res.error else "") + why
    if (result.oom_killed or result.pids_limited) and res.valid:
        res.valid, res.resolved = False, False
    if result.oom_killed:
        res.error = (res.error + "; " if res.error else "") + "the sandbox's memory limit killed the run"
    if result.pids_limited:
        res.error = (res.error + "; " if res.error else "") + "the sandbox's process limit refused a fork"
    if result.truncated and res.valid and res.missing:
        res.error += " (output was truncated)"
    res.duration_s = round(time.monotonic() - t0, 2)
    return res


def instrument_eval_script(task: Task, script: str, hashseed: int) -> tuple[str, Runner | None]:
    """The eval script with its test command (the line after the Start marker) run under the reporter, when
    the task's runner has one. A test line the harness cannot instrument for such a runner is an error
    (fail closed), not a silent run without the reporter."""
    native = runner_for_task(task)
    if native is None or not native.reporter:
        return script, None
    lines = script.split("\n")
    for i, line in enumerate(lines[:-1]):
        if START in line:
            cmd = parse_command(lines[i + 1].strip())
            runner = runner_for_command(cmd) if cmd.ok else None
            if runner is None or not runner.reporter:
                raise InputError(f"the eval script's test command {lines[i + 1].strip()[:200]!r} is not one the "
                                 "harness can run under its reporter", file=task.dataset or None,
                                 instance=task.instance_id, field="eval_script")
            lines[i + 1] = instrumented_command(runner, cmd, hashseed)
            return "\n".join(lines), runner
    raise InputError("the eval script has no test command after its Start marker", file=task.dataset or None,
                     instance=task.instance_id, field="eval_script")


def outside_tree(sandbox: Sandbox, runner: Runner, names: list[str]) -> set[str]:
    """The FAIL_TO_PASS/PASS_TO_PASS names whose test file is not in the checkout: results a test's own inner
    session printed (pytester writes its files to a temporary directory; SWE-bench lists some, e.g.
    pytest-dev__pytest-7521's `test_capsysbinary.py::test_hello`). No record of the run can back them; the log
    alone grades them, as in swebench."""
    out: set[str] = set()
    exists: dict[str, bool] = {}
    for name in names:
        path = runner.parse_node(name).path
        if not path:
            continue
        if path not in exists:
            try:
                sandbox.read_file(f"{sandbox.workdir.rstrip('/')}/{path}")
                exists[path] = True
            except (FileNotFoundError, IsADirectoryError):
                exists[path] = False
        if not exists[path]:
            out.add(name)
    return out


def no_candidate_code(task: Task, patch: str) -> bool:
    """Base (no patch) or the task's own Gold: nothing in the run is a candidate's."""
    return not patch.strip() or patch.strip() == task.patch.strip()


def trusted_run_refusal(kind: str, why: str) -> tuple[str, str]:
    """A refusal of a run with no candidate code (Gold, Base): nothing in it could forge, so a log or exit status
    that contradicts the record is the environment's or the harness's fault (pytest-7205's Base, whose
    environment lacked a module its Base needs, was once dropped as a forgery) - `results_disagree`."""
    if kind != FailureKind.RESULTS_FORGED.value:
        return kind, why
    return FailureKind.RESULTS_DISAGREE.value, ("no candidate code ran, so this is not a forgery but an environment "
                                                "or harness problem: " + why)


def cross_check(task: Task, runner: Runner, result: CommandResult, report: ReporterReport,
                unbacked: set[str] = frozenset()) -> tuple[str, str] | None:
    """(failure kind, why) when the harness-owned records cannot back swebench's grading: the stream is
    missing, incomplete or forged, the run tampered with its runner, or a FAIL_TO_PASS/PASS_TO_PASS test's
    recorded outcome disagrees with what the log says (`unbacked`: names no record can have)."""
    problem = reporter_problem(report, result)
    if problem is not None:
        return problem[0].value, problem[1]
    recorded = report.status_map()
    logged = runner.parse_results(result.output)
    disagree = []
    for name in list(task.fail_to_pass) + list(task.pass_to_pass):
        if name in unbacked:
            continue
        node = runner.parse_node(name)
        rec, log = runner.result_for(node, recorded), runner.result_for(node, logged)
        if not agree(runner, rec, log):
            disagree.append(f"{name}: the log says {log or 'nothing'}, the harness-owned record says "
                            f"{rec or 'it did not run'}")
    if disagree:
        return (FailureKind.RESULTS_FORGED.value, "the runner's output contradicts the harness-owned record: "
                + "; ".join(disagree[:3]))
    return None


# ---- docker path ---------------------------------------------------------------------------------

def evaluate_docker(task: Task, patch: str, env: TaskEnvironment, *, harness: HarnessConfig = PAPER.harness,
                    run_id: str | None = None, client=None) -> OfficialResult:
    """swebench's own harness, unchanged: `run_instance` with the row's eval_script in the row's image."""
    t0 = time.monotonic()
    try:
        import docker  # lazy: docker SDK
        from swebench.harness import run_evaluation as rev  # lazy: swebench's Docker harness (needs docker)
        from swebench.harness.constants import LOG_REPORT, LOG_TEST_OUTPUT, RUN_EVALUATION_LOG_DIR  # lazy: swebench's Docker harness
        from swebench.harness.utils import make_test_spec  # lazy: swebench's Docker harness
    except ImportError as exc:
        return invalid(task, f"the Docker path needs swebench's harness and the docker SDK: {exc}",
                       backend="docker")
    row = task.to_row()
    if env.image:
        row["image"] = env.image
    spec = make_test_spec(row)
    run_id = run_id or f"execcritic-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    pred = {"instance_id": task.instance_id, "model_name_or_path": "execcritic", "model_patch": patch}
    try:
        client = client or docker.from_env()
        client.ping()
    except Exception as exc:
        return invalid(task, f"no Docker engine reachable: {exc}", backend="docker")
    try:
        # an empty patch is swebench's own no-patch mode (an empty file would fail every apply command)
        rev.run_instance(spec, pred, client, run_id, timeout=int(harness.official_timeout_s),
                         skip_patch=not patch.strip())
    except Exception as exc:  # run_instance handles its own errors; anything escaping is infrastructure
        return invalid(task, f"swebench run_instance raised {type(exc).__name__}: {exc}", backend="docker")
    log_dir = Path(RUN_EVALUATION_LOG_DIR) / run_id / "execcritic" / task.instance_id
    out_path = log_dir / LOG_TEST_OUTPUT
    report_path = log_dir / LOG_REPORT
    instance_log = log_dir / "run_instance.log"
    if not report_path.exists():  # swebench writes no report on apply failure, timeout or error
        text = instance_log.read_text(errors="replace") if instance_log.exists() else ""
        applied = "Patch Apply Failed" not in text and ">>>>> Patch Apply Failed" not in text
        why = ("patch does not apply to Base:\n" + text[-8000:]) if not applied else \
            ("swebench produced no report (timeout or harness error):\n" + text[-4000:])
        return invalid(task, why, backend="docker", patch_applied=applied, log_path=str(log_dir),
                       duration_s=time.monotonic() - t0)
    log_text = out_path.read_text(errors="replace") if out_path.exists() else ""
    timed_out = "Timeout error" in log_text[-500:]
    res = grade_log(task, log_text, patch=patch, log_path=str(out_path), backend="docker", timed_out=timed_out)
    official = json.loads(report_path.read_text()).get(task.instance_id, {})
    if res.valid and bool(official.get("resolved")) != res.resolved:  # same functions: must agree
        res.valid, res.resolved = False, False
        res.error = f"swebench's report.json (resolved={official.get('resolved')}) disagrees with re-grading"
    res.report = official or res.report
    res.duration_s = round(time.monotonic() - t0, 2)
    return res


# ---- entry point ---------------------------------------------------------------------------------

def evaluate_official(task: Task, patch: str | None, env: TaskEnvironment | None = None, *,
                      harness: HarnessConfig = PAPER.harness, log_dir: Path | None = None,
                      sandbox=None, candidate: bool | None = None) -> OfficialResult:
    """Score `patch` (a Base-relative diff; "" or None = no change) with all F2P + P2P of `task`, in the task's
    own sandbox (a verified-sdist environment, or the row's official image through the Docker backend), with
    the same source-patch gate, tree judging, limits and harness-owned reporter as every bundle execution.
    `evaluate_docker` keeps swebench's own harness unchanged, for comparison."""
    env = env or environment_for(task)
    patch = patch or ""
    try:
        return evaluate_local(task, patch, env, harness=harness, log_dir=log_dir, sandbox=sandbox,
                              candidate=candidate)
    except ExecCriticError as exc:
        return invalid(task, str(exc), backend=env.kind)


def resolve_patch_arg(task: Task, patch: str) -> str:
    """CLI helper: 'gold' -> the reference patch, 'empty' -> '', else a file path."""
    if patch == "gold":
        return task.patch
    if patch == "empty":
        return ""
    return read_patch_file(patch)


def read_patch_file(patch: str) -> str:
    """A patch file given on the command line: present, not over MAX_PATCH_BYTES, UTF-8 text."""
    p = Path(patch)
    if not p.is_file():
        raise InputError("patch file not found (use a path, 'gold' or 'empty')", file=patch, field="--patch")
    check_size("the patch file", p.stat().st_size, MAX_PATCH_BYTES, file=patch, field="--patch")
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("the patch file is not UTF-8 text (a binary file?); give a unified diff", file=patch,
                         field="--patch") from None


__all__ = ["OfficialResult", "evaluate_official", "evaluate_local", "evaluate_docker", "grade_log",
           "local_eval_script", "env_eval_script", "GIT_APPLY_CMDS", "read_patch_file", "resolve_patch_arg"]
