"""execute(task, bundle, source_patch, sandbox) -> Execution: one fail-closed run of a Test bundle.

Reset to the prepared Base -> apply the source patch (candidate or Gold), if any -> apply the bundle's
test.patch -> run the bound command with the runner's reporter flags -> classify. Every operational
problem on the way (invalid bundle, forbidden source edit, patch that does not apply, sandbox failure,
timeout...) ends in an invalid Execution with a bounded diagnostic; nothing raises past this function
except programming errors.
"""

from __future__ import annotations

import time
from typing import Callable

from execcritic.bundle.command import parse_command
from execcritic.bundle.gates import source_patch_problems
from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER, HarnessConfig
from execcritic.errors import SandboxError
from execcritic.harness.apply import SOURCE, TEST, apply_patch, sha256
from execcritic.harness.classify import classify
from execcritic.harness.execution import Execution, FailureKind
from execcritic.harness.validate import validate_bundle
from execcritic.runners.registry import runner_for_command
from execcritic.sandbox.base import Sandbox
from execcritic.tasks.model import Task


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "...[truncated]...\n" + text[-limit:]


def base_reader(sandbox: Sandbox) -> Callable[[str], str | None]:
    """Read a repository file as it is in the sandbox (call right after a reset: the Base)."""
    def read(path: str) -> str | None:
        try:
            return sandbox.read_file(f"{sandbox.workdir}/{path}").decode("utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return None
    return read


def execute(task: Task, bundle: TestBundle, source_patch: str | None = None, *, sandbox: Sandbox,
            config: HarnessConfig = PAPER.harness, check_source_patch: bool = True) -> Execution:
    """Run `bundle` on Base (+ `source_patch`) in `sandbox`. `check_source_patch=False` is for the Gold
    audit and official patches, which are not Repair candidates and may legitimately touch anything."""
    started = time.monotonic()
    phases: dict[str, float] = {}
    source_patch = source_patch if source_patch and source_patch.strip() else None
    base = dict(instance_id=task.instance_id, isolated=sandbox.isolated, backend=sandbox.backend,
                test_patch_sha256=sha256(bundle.test_patch), source_patch_sha256=sha256(source_patch))

    def invalid(kind: FailureKind, diagnostic: str, **kw) -> Execution:
        return Execution(valid=False, verdict=None, failure_kind=kind, diagnostic=diagnostic, phases=phases,
                         duration_s=time.monotonic() - started, **base, **kw)

    try:
        t = time.monotonic()
        sandbox.reset()
        phases["reset"] = time.monotonic() - t
    except SandboxError as exc:
        return invalid(FailureKind.SANDBOX_ERROR, f"the sandbox failed: {exc}")
    # validated against the Base just restored: some bindings need the Base test modules (class scopes)
    problems = validate_bundle(bundle, task, config=config, read_base=base_reader(sandbox))
    if problems:
        return invalid(FailureKind.BUNDLE_INVALID, f"the bundle is invalid ({len(problems)} problem(s)); first: "
                                                   f"{problems[0]}", problems=problems)
    cmd = parse_command(bundle.test_command, max_chars=config.max_command_chars)
    runner = runner_for_command(cmd)
    assert runner is not None  # validate_bundle rejects unrecognized commands
    contract = bundle.contract
    assert contract is not None
    declared = [runner.parse_node(n) for n in contract.test_nodes]
    observed = runner.observed_command(cmd).render()

    try:
        if source_patch and check_source_patch:
            problems = source_patch_problems(source_patch, read_base=base_reader(sandbox), language=task.language)
            if problems:
                return invalid(FailureKind.FORBIDDEN_SOURCE_EDIT, "the source patch is not an admissible Repair "
                                                                  f"candidate: {problems[0]}", problems=problems,
                               runner=runner.name, command=observed)
        t = time.monotonic()
        extra: dict[str, str] = {}
        if source_patch:
            applied = apply_patch(sandbox, source_patch, name="source", ladder=SOURCE, timeout=config.setup_timeout_s)
            if not applied.applied:
                phases["apply"] = time.monotonic() - t
                return invalid(FailureKind.PATCH_APPLY_FAILED,
                               "the source patch does not apply to Base:\n" + applied.diagnostic,
                               runner=runner.name, command=observed)
            extra["source_apply_method"] = applied.method or ""
        applied = apply_patch(sandbox, bundle.test_patch, name="test", ladder=TEST, timeout=config.setup_timeout_s)
        phases["apply"] = time.monotonic() - t
        if not applied.applied:
            return invalid(FailureKind.TEST_PATCH_APPLY_FAILED,
                           "the test patch does not apply" + (" on top of the source patch" if source_patch else
                                                              " to Base") + ":\n" + applied.diagnostic,
                           runner=runner.name, command=observed)
        t = time.monotonic()
        result = sandbox.run(observed, timeout=config.test_timeout_s)
        phases["run"] = time.monotonic() - t
    except SandboxError as exc:
        return invalid(FailureKind.SANDBOX_ERROR, f"the sandbox failed: {exc}", runner=runner.name,
                       command=observed)
    t = time.monotonic()
    c = classify(runner, declared, result)
    phases["parse"] = time.monotonic() - t
    return Execution(valid=c.valid, verdict=c.verdict, failure_kind=c.failure_kind, diagnostic=c.diagnostic,
                     nodes=c.nodes, exit_code=result.exit_code, timed_out=result.timed_out,
                     oom_killed=result.oom_killed, runner=runner.name, command=observed,
                     duration_s=time.monotonic() - started, phases=phases,
                     output_tail=_tail(result.output, config.output_tail_chars), load_errors=c.load_errors,
                     extra={**extra, "results_count": c.results_count}, **base)
