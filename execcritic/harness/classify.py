"""The one fail-closed classifier, shared by the Base gate, the Gold audit, the Repair CHECK and the official
evaluator's per-node cross-check.

Pure function of (runner, declared nodes, the sandbox's CommandResult, the harness-owned reporter's
report). Validity and the verdict come from structure only: the sandbox's own timeout/OOM/process-limit
flags; the reporter's authenticated record stream (it must have started, ended normally, be unforged and
report no tampering); the per-node outcomes *from those records*, which must agree with what the runner's
log says and with the exit status. A node that did not run is not a failure; a bound node missing from the
results makes the run invalid; an exit status that contradicts the per-node results is invalid, not a
verdict. Expected-failure nodes (xfail) ran but are neutral: they carry no verdict. Text is only consulted
to *name* an already established operational problem (e.g. which module failed to import), never to decide
validity.

Runners without a reporter (the multilingual ones) are classified from their log alone, as before; the
Execution says so (`reporter: none`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from execcritic.bundle.nodes import Node, Outcome
from execcritic.harness.execution import FailureKind, NodeResult, Verdict
from execcritic.harness.reporter.stream import ReporterReport
from execcritic.runners.base import Runner
from execcritic.sandbox.base import CommandResult

_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_IMPORT_ERROR = re.compile(r"\bImportError\b")
# load-error descriptions runners use for "this selector matched nothing" (see Runner.load_errors)
_NOT_FOUND_PREFIXES = ("not found:", "no collectors for")


@dataclass
class Classification:
    failure_kind: FailureKind
    verdict: Verdict | None
    diagnostic: str
    nodes: list[NodeResult] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    results_count: int = 0

    @property
    def valid(self) -> bool:
        return self.failure_kind.valid


def _load_error_kind(load_errors: Sequence[str]) -> FailureKind:
    """Name an established collection problem by the runner's own per-collector error entries."""
    text = "\n".join(load_errors)
    if all(e.startswith(_NOT_FOUND_PREFIXES) for e in load_errors):
        return FailureKind.NODE_NOT_COLLECTED   # the runner refused a selector that matched nothing
    if _MISSING_MODULE.search(text):
        return FailureKind.MISSING_DEPENDENCY
    if _IMPORT_ERROR.search(text):
        return FailureKind.IMPORT_ERROR
    return FailureKind.COLLECTION_ERROR


def _names(nodes: Sequence[NodeResult]) -> str:
    shown = [n.node for n in nodes[:5]]
    more = f" (+{len(nodes) - 5} more)" if len(nodes) > 5 else ""
    return ", ".join(shown) + more


def agree(runner: Runner, recorded: str | None, logged: str | None) -> bool:
    """Does the runner's log tell the same story as the harness-owned record for one node?

    Equal outcomes agree. The log cannot show some things the record can: a skipped pytest test (its `-rA`
    line names no node), a non-strict pytest XPASS (no parser reads it). A record can lack what the log shows
    only for an error outside the test's own code (Django's `_pre_setup`)."""
    if recorded == logged:
        return True
    if recorded is None:
        return logged == "ERROR"
    if logged is None:
        return recorded in ("SKIPPED", "XPASS")
    return runner.outcome(recorded) == runner.outcome(logged)


def reporter_problem(report: ReporterReport, result: CommandResult) -> tuple[FailureKind, str] | None:
    """Whether the harness-owned channel can be trusted for this run; (kind, diagnostic) when not."""
    if report.problem and report.problem[0] == "forged":
        return FailureKind.RESULTS_FORGED, f"the harness-owned results are forged: {report.problem[1]}"
    if report.tampers:
        first = report.tampers[0]
        more = f" (+{len(report.tampers) - 1} more)" if len(report.tampers) > 1 else ""
        return FailureKind.RUNNER_TAMPERED, (f"the run tampered with the runner, the test code or builtins: "
                                             f"{first['what']}: {first['detail']}{more}")
    if report.problem and report.problem[0] == "missing":
        return FailureKind.RESULTS_MISSING, report.problem[1]
    if report.problem:
        return FailureKind.RESULTS_INCOMPLETE, f"no verdict: {report.problem[1]}"
    if report.exitstatus is not None and result.exit_code != report.exitstatus:
        return FailureKind.RESULTS_FORGED, (f"the process exited {result.exit_code} but the runner's session "
                                            f"ended with status {report.exitstatus}: the exit status was forced")
    return None


def classify(runner: Runner, declared: Sequence[Node], result: CommandResult,
             report: ReporterReport | None = None) -> Classification:
    if result.timed_out:
        return Classification(FailureKind.TIMEOUT, None,
                              f"the run exceeded its wall-clock limit after {result.duration_s:.0f} s and was "
                              "killed by the sandbox; no verdict")
    if result.oom_killed:
        return Classification(FailureKind.OUT_OF_MEMORY, None,
                              "the run exceeded the sandbox memory limit and was killed; no verdict")
    if result.pids_limited:
        return Classification(FailureKind.PROCESS_LIMIT, None,
                              "the run hit the sandbox's process limit (a fork was refused); no verdict")
    try:
        logged = runner.parse_results(result.output)
    except Exception as exc:  # a parser crash is a harness-side problem, never a verdict
        return Classification(FailureKind.NO_RESULTS, None,
                              f"the {runner.name} output could not be parsed ({type(exc).__name__}: {exc})")
    load_errors = runner.load_errors(logged, result.output)
    if report is not None:
        problem = reporter_problem(report, result)
        if problem:
            return Classification(problem[0], None, problem[1], load_errors=load_errors)
        recorded = report.status_map()
        load_errors += [f"collection error in {e['node']}: {e['exc']}" for e in report.collect_errors
                        if f"collection error in {e['node']}" not in "\n".join(load_errors)]
    nodes: list[NodeResult] = []
    disagree: list[str] = []
    for node in declared:
        log_status = runner.result_for(node, logged)
        if report is None:
            status = log_status
        else:
            status = runner.result_for(node, recorded)
            if not agree(runner, status, log_status):
                disagree.append(f"{node}: the log says {log_status or 'nothing'}, the harness-owned record says "
                                f"{status or 'it did not run'}")
            if status is None and log_status == "ERROR":
                status = log_status            # an error outside the test's own code (no record by design)
        outcome = runner.outcome(status).value if status is not None else "absent"
        nodes.append(NodeResult(node=str(node), status=status, outcome=outcome,
                                log_status=log_status if report is not None else None))
    results_count = len(recorded) if report is not None else len(logged)

    def invalid(kind: FailureKind, message: str) -> Classification:
        return Classification(kind, None, message, nodes, load_errors, results_count)

    if disagree:
        return invalid(FailureKind.RESULTS_FORGED, "the runner's output contradicts the harness-owned record "
                                                    "(rewritten or filtered results): " + "; ".join(disagree[:3]))
    absent = [n for n in nodes if n.status is None]
    errored = [n for n in nodes if n.outcome == Outcome.ERRORED.value]
    if load_errors and (absent or errored):
        kind = _load_error_kind(load_errors)
        return invalid(kind, f"a test module failed to load ({kind.value}): {load_errors[0][:300]}; "
                             f"bound node(s) {_names(absent + errored)} did not run")
    if absent:
        if not results_count:
            return invalid(FailureKind.NO_RESULTS, f"{runner.name} reported no per-test results "
                                                   f"(exit status {result.exit_code}); bound node(s) "
                                                   f"{_names(absent)} did not run")
        return invalid(FailureKind.NODE_NOT_COLLECTED,
                       f"bound node(s) {_names(absent)} are absent from the {results_count} result(s) "
                       f"{runner.name} reported: the selector did not collect them")
    if errored:
        return invalid(FailureKind.NODE_ERROR, f"bound node(s) {_names(errored)} errored outside the test "
                                               "body (setup/teardown/fixture); no verdict")
    not_run = [n for n in nodes if n.outcome == Outcome.NOT_RUN.value]
    if not_run:
        return invalid(FailureKind.NODE_NOT_RUN, f"bound node(s) {_names(not_run)} were skipped or not run")
    neutral = [n for n in nodes if Outcome(n.outcome).neutral]
    if neutral and len(neutral) == len(nodes):
        return invalid(FailureKind.EXPECTED_FAILURE_ONLY,
                       f"every bound node is an expected failure ({_names(neutral)}: "
                       f"{', '.join(sorted({n.status or '' for n in neutral}))}): they ran, but the runner "
                       "inverts their outcome, so they carry no verdict")
    failed = [n for n in nodes if n.outcome == Outcome.FAILED.value]
    if failed:
        if result.exit_code == 0:
            return invalid(FailureKind.INCONSISTENT_EXIT,
                           f"bound node(s) {_names(failed)} failed but the runner exited 0; refusing a verdict")
        return Classification(FailureKind.BEHAVIORAL_FAILURE, Verdict.FAIL,
                              f"valid run: bound node(s) {_names(failed)} failed behaviorally", nodes,
                              load_errors, results_count)
    if result.exit_code != 0:
        return invalid(FailureKind.INCONSISTENT_EXIT,
                       f"every bound node passed but the runner exited {result.exit_code}; refusing a verdict")
    counted = len(nodes) - len(neutral)
    note = f" ({len(neutral)} expected-failure node(s) ran and are neutral)" if neutral else ""
    return Classification(FailureKind.PASSED, Verdict.PASS, f"valid run: all {counted} bound node(s) passed{note}",
                          nodes, load_errors, results_count)
