"""execute(task, bundle, source_patch, sandbox) -> Execution: one fail-closed run of a Test bundle.

Reset to the prepared Base -> apply the source patch (candidate or Gold; a candidate first passes the
source-patch gate), if any -> apply the bundle's test.patch -> judge the tree (the paths that changed must be
the declared ones) -> run the bound command under the harness-owned reporter (Python runners) -> classify
from the reporter's records, checked against the runner's log and exit status. Every operational problem on
the way (invalid bundle, forbidden source edit, patch that does not apply, tree mismatch, sandbox failure,
timeout, forged or tampered results...) ends in an invalid Execution with a bounded diagnostic; nothing
raises past this function except programming errors.

After a pytest run the sandbox is left reset to Base, with the same command started ahead of time for the
next call (harness/prestart.py, `harness.prestart_next_run`): a caller that wants to read the tree a run
left behind turns that off. Where the sandbox has a twin (an overlay working copy), the next call's
interpreter starts there, in the background, as this run begins, and the check runs in whichever of the two
holds its interpreter (`Execution.extra["box"]`); either way the caller's sandbox is left at Base.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from execcritic.bundle.command import parse_command
from execcritic.bundle.gates import source_patch_problems
from execcritic.bundle.model import TestBundle
from execcritic.bundle.nodes import Node
from execcritic.config import PAPER, HarnessConfig
from execcritic.errors import SandboxError
from execcritic.harness import prestart, rewrite_cache
from execcritic.harness.apply import SOURCE, TEST, apply_patch, sha256
from execcritic.harness.classify import classify
from execcritic.harness.execution import Execution, FailureKind
from execcritic.harness.instrument import (
    candidate_facts,
    declared_paths,
    instrumented_command,
    new_hashseed,
    run_reported,
    tree_problem,
)
from execcritic.harness.validate import validate_bundle
from execcritic.runners.base import Runner
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
            config: HarnessConfig = PAPER.harness, check_source_patch: bool = True,
            hashseed: int | None = None) -> Execution:
    """Run `bundle` on Base (+ `source_patch`) in `sandbox`. `check_source_patch=False` is for the Gold
    audit and official patches, which are not Repair candidates and may legitimately touch anything.
    `hashseed` (PYTHONHASHSEED of a Python test run) is drawn at random and recorded when not given."""
    started = time.monotonic()
    phases: dict[str, float] = {}
    source_patch = source_patch if source_patch and source_patch.strip() else None
    base = dict(instance_id=task.instance_id, isolated=sandbox.isolated, backend=sandbox.backend,
                test_patch_sha256=sha256(bundle.test_patch), source_patch_sha256=sha256(source_patch))

    # a run started ahead of time in this untouched sandbox or its twin (harness/prestart.py): the tree is Base
    # already; `box` is where this check runs
    ahead = prestart.claim(sandbox) if config.prestart_next_run else None
    box = ahead.box if ahead is not None else sandbox

    def invalid(kind: FailureKind, diagnostic: str, **kw) -> Execution:
        if ahead is not None:
            ahead.end()          # claimed, not released: nothing of this execution ran in it
        return Execution(valid=False, verdict=None, failure_kind=kind, diagnostic=diagnostic, phases=phases,
                         duration_s=time.monotonic() - started, **base, **kw)

    if ahead is None:
        try:
            t = time.monotonic()
            box.reset()
            phases["reset"] = time.monotonic() - t
        except SandboxError as exc:
            return invalid(FailureKind.SANDBOX_ERROR, f"the sandbox failed: {exc}")
    else:
        phases["reset"] = 0.0
    # validated against the Base just restored: some bindings need the Base test modules (class scopes)
    problems = validate_bundle(bundle, task, config=config, read_base=base_reader(box))
    if problems:
        return invalid(FailureKind.BUNDLE_INVALID, f"the bundle is invalid ({len(problems)} problem(s)); first: "
                                                   f"{problems[0]}", problems=problems)
    cmd = parse_command(bundle.test_command, max_chars=config.max_command_chars)
    runner = runner_for_command(cmd)
    assert runner is not None  # validate_bundle rejects unrecognized commands
    contract = bundle.contract
    assert contract is not None
    declared = [runner.parse_node(n) for n in contract.test_nodes]
    observed_cmd = runner.observed_command(cmd)
    observed = observed_cmd.render()
    flaky = flaky_bound(task, runner, declared)
    if flaky:
        return invalid(FailureKind.FLAKY_NODE, f"bound node(s) {', '.join(flaky[:5])} are known to be flaky on "
                                               "this task (their verdict changes across repeated runs: see the "
                                               "task recipe's `flaky_nodes`); no verdict", runner=runner.name,
                       command=observed)
    if ahead is not None and not prestart.matches(ahead, observed=observed, runner=runner.name, hashseed=hashseed):
        ahead.end()
        ahead = None
    seed = (ahead.hashseed if ahead else new_hashseed()) if hashseed is None else hashseed
    run_text = instrumented_command(runner, observed_cmd, seed) if runner.reporter else observed

    offering: Offering | None = None      # the next check's interpreter, being started (twin)
    offered = False
    try:
        if source_patch and check_source_patch:
            problems = source_patch_problems(source_patch, read_base=base_reader(box), language=task.language,
                                             repo=task.repo)
            if problems:
                return invalid(FailureKind.FORBIDDEN_SOURCE_EDIT, "the source patch is not an admissible Repair "
                                                                  f"candidate: {problems[0]}", problems=problems,
                               runner=runner.name, command=observed)
        t = time.monotonic()
        extra: dict[str, Any] = {}
        if source_patch:
            applied = apply_patch(box, source_patch, name="source", ladder=SOURCE, timeout=config.setup_timeout_s)
            if not applied.applied:
                phases["apply"] = time.monotonic() - t
                return invalid(FailureKind.PATCH_APPLY_FAILED,
                               "the source patch does not apply to Base:\n" + applied.diagnostic,
                               runner=runner.name, command=observed)
            extra["source_apply_method"] = applied.method or ""
        applied = apply_patch(box, bundle.test_patch, name="test", ladder=TEST, timeout=config.setup_timeout_s)
        if not applied.applied:
            phases["apply"] = time.monotonic() - t
            return invalid(FailureKind.TEST_PATCH_APPLY_FAILED,
                           "the test patch does not apply" + (" on top of the source patch" if source_patch else
                                                              " to Base") + ":\n" + applied.diagnostic,
                           runner=runner.name, command=observed)
        changed = declared_paths(source_patch) | declared_paths(bundle.test_patch)
        tree = box.changed_paths()
        mismatch = tree_problem(tree, changed)
        phases["apply"] = time.monotonic() - t
        if mismatch and ahead is not None and all("__pycache__" in p.split("/") for p in set(tree) - changed):
            # the interpreter started ahead imported modules of the checkout (pytest-dev: the runner is the
            # product) and wrote their bytecode while the patches were applied: that tree is the harness's doing,
            # and the run would be stale anyway - start again, cold, on a Base restored without it
            ahead.end()
            rerun = execute(task, bundle, source_patch, sandbox=sandbox, config=config,
                            check_source_patch=check_source_patch, hashseed=hashseed)
            rerun.extra["prestart_stale"] = sorted(set(tree) - changed)
            rerun.duration_s = time.monotonic() - started
            return rerun
        if mismatch:
            return invalid(FailureKind.TREE_MISMATCH, mismatch, runner=runner.name, command=observed)
        steps = (task.extra or {}).get("build_steps")
        if steps:
            # a compiled task (multilingual-git): its checkout holds the Base's build; the row's own build steps
            # rebuild what the patches touched before any test runs
            t = time.monotonic()
            made = box.run("set -e\n" + "\n".join(steps) + "\n", timeout=config.test_timeout_s)
            phases["build"] = time.monotonic() - t
            if made.exit_code != 0 or made.timed_out or made.oom_killed:
                kind = (FailureKind.TIMEOUT if made.timed_out else FailureKind.OUT_OF_MEMORY if made.oom_killed
                        else FailureKind.BUILD_FAILED)
                return invalid(kind, f"the task's build steps failed after the patches were applied (exit "
                                     f"{made.exit_code}); no test ran. Build log tail:\n{made.output[-3000:]}",
                               runner=runner.name, command=observed)
        t = time.monotonic()
        report = None
        pinned = None
        if runner.reporter:
            facts = {"runner": runner.reporter, **candidate_facts(source_patch, bundle.test_patch, base_reader(box))}
            if ahead is not None and not ahead.spawned.alive():
                ahead.end()          # ended meanwhile (an apply ladder's reset): this run starts cold
                ahead = None
            if runner.reporter == "pytest" and config.reuse_rewritten_tests and \
                    rewrite_cache.serves(changed, facts["test_files"]):
                pinned = rewrite_cache.prepare(box, base["test_patch_sha256"], facts["test_files"], changed)
                extra["rewrite_cache"] = {"served": pinned.served}
            if runner.reporter == "pytest":  # the next check's interpreter starts in the twin as this run goes
                offering = Offering(sandbox, box, config, runner, observed_cmd, phases)
            result, report = run_reported(box, run_text, timeout=config.test_timeout_s, facts=facts,
                                          known=pinned.contents if pinned else None, prestarted=ahead,
                                          then=offering.start if offering is not None else None)
            offered = offering is not None and offering.result()
            extra.update(hashseed=seed, reporter=report.summary(), prestarted=ahead is not None,
                         **({"box": "twin"} if box is not sandbox else {}))
            if report.stale:         # the early interpreter had imported code of the checkout: run again, cold
                prestart.refuse(sandbox, "imported before the go: " + ", ".join(report.stale[:5]))
                rerun = execute(task, bundle, source_patch, sandbox=sandbox, config=config,
                                check_source_patch=check_source_patch, hashseed=hashseed)
                rerun.extra["prestart_stale"] = report.stale
                rerun.duration_s = time.monotonic() - started      # the stale attempt's time included
                return rerun
        else:
            result = box.run(run_text, timeout=config.test_timeout_s)
            extra["reporter"] = "none"
        phases["run"] = time.monotonic() - t
    except SandboxError as exc:
        if offering is not None:
            offering.result()
        return invalid(FailureKind.SANDBOX_ERROR, f"the sandbox failed: {exc}", runner=runner.name,
                       command=observed)
    t = time.monotonic()
    c = classify(runner, declared, result, report)
    phases["parse"] = time.monotonic() - t
    if pinned is not None and source_patch is None and c.valid:
        try:                 # a clean run of Base + the bundle alone compiled the test modules: keep them
            extra["rewrite_cache"]["captured"] = rewrite_cache.capture(box, pinned)
        except SandboxError:
            pass             # no cache is only slower; the verdict above stands
    if runner.reporter == "pytest" and not offered:      # no twin: after this run, in `sandbox`
        offer_next(sandbox, box, config, runner, observed_cmd, phases, before_run=False)
    elif offered and box is sandbox:      # the next one waits in the twin: the caller's sandbox is left at Base too
        t = time.monotonic()
        try:
            sandbox.reset()
        except SandboxError:
            pass             # the next call resets it (and reports a sandbox that cannot)
        phases["prestart"] = phases.get("prestart", 0.0) + time.monotonic() - t
    return Execution(valid=c.valid, verdict=c.verdict, failure_kind=c.failure_kind, diagnostic=c.diagnostic,
                     nodes=c.nodes, exit_code=result.exit_code, timed_out=result.timed_out,
                     oom_killed=result.oom_killed, runner=runner.name, command=run_text,
                     duration_s=time.monotonic() - started, phases=phases,
                     output_tail=_tail(result.output, config.output_tail_chars), load_errors=c.load_errors,
                     extra={**extra, "results_count": c.results_count}, **base)


def offer_next(sandbox: Sandbox, box: Sandbox, config: HarnessConfig, runner: Runner, observed_cmd,
               phases: dict[str, float], *, before_run: bool) -> bool:
    """Start the next check's interpreter (harness/prestart.py). `before_run`: in the box this check does not run
    in (`sandbox` or its twin), in the background, so that it starts while this run goes; there is none without a
    twin. Else: in `sandbox`, after this run. Whether it started (a failure only makes the next run cold)."""
    if not config.prestart_next_run or not sandbox.can_spawn:
        return False
    t = time.monotonic()
    try:
        free = (sandbox if box is not sandbox else sandbox.twin()) if before_run else sandbox
        if free is None:
            return False
        seed = new_hashseed()
        return prestart.offer(sandbox, observed=observed_cmd.render(), runner=runner.name, hashseed=seed,
                              command=instrumented_command(runner, observed_cmd, seed), box=free,
                              background=before_run)
    except SandboxError:
        return False
    finally:
        phases["prestart"] = phases.get("prestart", 0.0) + time.monotonic() - t


class Offering:
    """`offer_next(before_run=True)` off the check's path, started once the run goes (`start`: the go first, then
    this work takes the GIL) and joined (`result`) before the check returns. It runs on one thread that lives as
    long as the process: bubblewrap's --die-with-parent kills a sandbox when the *thread* that started it ends."""

    _worker: tuple[int, ThreadPoolExecutor] | None = None     # (the process that made it: a fork has no thread)

    def __init__(self, *args):
        self._args, self._future = args, None

    def start(self) -> None:
        if Offering._worker is None or Offering._worker[0] != os.getpid():
            Offering._worker = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="execcritic-prestart"))
        self._future = Offering._worker[1].submit(offer_next, *self._args, before_run=True)

    def result(self) -> bool:
        return self._future is not None and self._future.result()      # (False: the run failed before it went)


def flaky_bound(task: Task, runner: Runner, declared: list[Node]) -> list[str]:
    """Declared nodes the task's recipe records as flaky (measured by repeated qualification)."""
    known = [runner.parse_node(n) for n in (task.extra or {}).get("flaky_nodes", ())]
    return [str(d) for d in declared if any(runner.binds(k, d) or runner.binds(d, k) for k in known)]
