"""The Repair agent's feedback envelope (paper Listing 7), bounded with the header always intact.

Field order follows Listing 7. Values come from the Execution record; each command/name field is cut to
its own bound first, the header is rendered, and only the remaining budget goes to the raw output tail
(the tail keeps its *end*, where runners print failures and summaries). The hidden test patch itself
never enters the envelope; its file name and runner command do, as in the paper.
"""

from __future__ import annotations

import json

from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER
from execcritic.harness.execution import Execution, FailureKind, Verdict

COMMAND_CHARS = 1000
ACTIVATED_COMMAND_CHARS = 500
MAX_NAMES = 10
NAME_CHARS = 120
_TAIL_OPEN = "<raw_test_output_tail>\n"
_TAIL_CLOSE = "\n</raw_test_output_tail>"
# operational kinds the harness blocks on before the test body runs (the paper's "blocked_by_harness")
_BLOCKED = {FailureKind.BUNDLE_INVALID, FailureKind.TEST_PATCH_APPLY_FAILED, FailureKind.COLLECTION_ERROR,
            FailureKind.IMPORT_ERROR, FailureKind.MISSING_DEPENDENCY, FailureKind.NODE_NOT_COLLECTED,
            FailureKind.NO_RESULTS, FailureKind.RUNNER_ERROR, FailureKind.FORBIDDEN_SOURCE_EDIT,
            FailureKind.PATCH_APPLY_FAILED}
_INFRA = {FailureKind.SANDBOX_ERROR, FailureKind.TIMEOUT, FailureKind.OUT_OF_MEMORY}


def gate_status(ex: Execution) -> str:
    if not ex.valid:
        return "inconclusive"
    return "pass" if ex.verdict is Verdict.PASS else "hard_fail"


def _test_filename(bundle: TestBundle) -> str:
    for line in bundle.test_patch.splitlines():
        if line.startswith("+++ b/"):
            return line[6:].strip()
    return ""


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def render_envelope(ex: Execution, bundle: TestBundle, *, cap: int = PAPER.repair.feedback_chars,
                    language: str = "python") -> str:
    failed = [_cut(n.node, NAME_CHARS) for n in ex.nodes if n.outcome == "failed"][:MAX_NAMES]
    counts = {"passed": sum(n.outcome == "passed" for n in ex.nodes),
              "failed": sum(n.outcome == "failed" for n in ex.nodes),
              "errors": sum(n.outcome == "errored" for n in ex.nodes),
              "not_run": sum(n.outcome in ("not_run", "absent") for n in ex.nodes)}
    filename = _cut(_test_filename(bundle), NAME_CHARS)
    contract = {"index": 0, "runner_command": _cut(bundle.command_line, COMMAND_CHARS), "test_filename": filename}
    per_test = {
        "blocked_by_harness": ex.failure_kind in _BLOCKED,
        "command": _cut(ex.command, ACTIVATED_COMMAND_CHARS),
        "command_sanitized": ex.command.strip() != bundle.command_line,
        "counts": counts,
        "failed_test_names": failed,
        "failure_kind": ex.failure_kind.value,
        "filename": filename,
        "gate_status": gate_status(ex),
        "inconclusive_infra": ex.failure_kind in _INFRA,
        "index": 0,
        "rc": ex.exit_code,
        "removed_command_flags": [],
        "timeout_detected": ex.timed_out,
    }
    header = "\n".join([
        "test_execution_contract:",
        f"  language: {language}",
        "  working_directory: /testbed",
        "  test_source_visibility: hidden_verifier_only",
        "  per_test:",
        "    " + json.dumps(contract, sort_keys=True),
        "generated_test_gate:",
        f"  gate_status: {gate_status(ex)}",
        f"  gate_reason: {ex.failure_kind.value}",
        f"  passed: {ex.passed}",
        f"  n_tests: {len(ex.nodes)}",
        f"  failed_test_names: {json.dumps(failed)}",
        "  per_test:",
        "    " + json.dumps(per_test, sort_keys=True),
        "",
    ]) + "\n"
    raw = ex.output_tail or ex.diagnostic
    budget = cap - len(header) - len(_TAIL_OPEN) - len(_TAIL_CLOSE)
    if budget <= 0:  # header alone is at the cap: keep it whole, drop the tail
        return header.rstrip("\n")
    if len(raw) > budget:
        raw = raw[len(raw) - budget:]
    return header + _TAIL_OPEN + raw + _TAIL_CLOSE
