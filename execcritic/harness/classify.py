"""The one fail-closed classifier, shared by the Base gate, the Gold audit and the Repair CHECK.

Pure function of (runner, declared nodes, the sandbox's CommandResult). Validity and the verdict come
from structure only: the sandbox's own timeout/OOM flags, the runner's per-node results, and the exit
status. A node that did not run is not a failure; a bound node missing from the results makes the run
invalid; an exit status that contradicts the per-node results (a failing node with exit 0, or all
passing with a non-zero exit) is invalid, not a verdict. Text is only consulted to *name* an already
established operational problem (e.g. which module failed to import), never to decide validity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from execcritic.bundle.nodes import Node, Outcome
from execcritic.harness.execution import FailureKind, NodeResult, Verdict
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


def classify(runner: Runner, declared: Sequence[Node], result: CommandResult) -> Classification:
    if result.timed_out:
        return Classification(FailureKind.TIMEOUT, None,
                              f"the run exceeded its wall-clock limit after {result.duration_s:.0f} s and was "
                              "killed by the sandbox; no verdict")
    if result.oom_killed:
        return Classification(FailureKind.OUT_OF_MEMORY, None,
                              "the run exceeded the sandbox memory limit and was killed; no verdict")
    try:
        results = runner.parse_results(result.output)
    except Exception as exc:  # a parser crash is a harness-side problem, never a verdict
        return Classification(FailureKind.NO_RESULTS, None,
                              f"the {runner.name} output could not be parsed ({type(exc).__name__}: {exc})")
    load_errors = runner.load_errors(results, result.output)
    nodes: list[NodeResult] = []
    for node in declared:
        status = runner.result_for(node, results)
        outcome = runner.outcome(status).value if status is not None else "absent"
        nodes.append(NodeResult(node=str(node), status=status, outcome=outcome))

    def invalid(kind: FailureKind, message: str) -> Classification:
        return Classification(kind, None, message, nodes, load_errors, len(results))

    absent = [n for n in nodes if n.status is None]
    errored = [n for n in nodes if n.outcome == Outcome.ERRORED.value]
    if load_errors and (absent or errored):
        kind = _load_error_kind(load_errors)
        return invalid(kind, f"a test module failed to load ({kind.value}): {load_errors[0][:300]}; "
                             f"bound node(s) {_names(absent + errored)} did not run")
    if absent:
        if not results:
            return invalid(FailureKind.NO_RESULTS, f"{runner.name} reported no per-test results "
                                                   f"(exit status {result.exit_code}); bound node(s) "
                                                   f"{_names(absent)} did not run")
        return invalid(FailureKind.NODE_NOT_COLLECTED,
                       f"bound node(s) {_names(absent)} are absent from the {len(results)} result(s) "
                       f"{runner.name} reported: the selector did not collect them")
    if errored:
        return invalid(FailureKind.NODE_ERROR, f"bound node(s) {_names(errored)} errored outside the test "
                                               "body (setup/teardown/fixture); no verdict")
    not_run = [n for n in nodes if n.outcome == Outcome.NOT_RUN.value]
    if not_run:
        return invalid(FailureKind.NODE_NOT_RUN, f"bound node(s) {_names(not_run)} were skipped or not run")
    failed = [n for n in nodes if n.outcome == Outcome.FAILED.value]
    if failed:
        if result.exit_code == 0:
            return invalid(FailureKind.INCONSISTENT_EXIT,
                           f"bound node(s) {_names(failed)} failed but the runner exited 0; refusing a verdict")
        return Classification(FailureKind.BEHAVIORAL_FAILURE, Verdict.FAIL,
                              f"valid run: bound node(s) {_names(failed)} failed behaviorally", nodes,
                              load_errors, len(results))
    if result.exit_code != 0:
        return invalid(FailureKind.INCONSISTENT_EXIT,
                       f"every bound node passed but the runner exited {result.exit_code}; refusing a verdict")
    return Classification(FailureKind.PASSED, Verdict.PASS, f"valid run: all {len(nodes)} bound node(s) passed",
                          nodes, load_errors, len(results))
