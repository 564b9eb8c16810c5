"""The Execution record: r(b, R) in {0,1} and, only when r = 1, a verdict z in {PASS, FAIL} (Appendix B.1).

`failure_kind` says why. Exactly two kinds are valid executions (`passed` -> PASS,
`behavioral_failure` -> FAIL); every other kind is operational and carries no verdict.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from execcritic.bundle.problems import Problem


class Verdict(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"


class FailureKind(str, enum.Enum):
    """Why an execution ended as it did. Documented in docs/failure_kinds.md."""

    # valid executions
    PASSED = "passed"                          # every bound node passed
    BEHAVIORAL_FAILURE = "behavioral_failure"  # the run completed and a bound node failed behaviorally
    # operational: artifacts
    BUNDLE_INVALID = "bundle_invalid"          # the bundle failed validation (see `problems`)
    FORBIDDEN_SOURCE_EDIT = "forbidden_source_edit"  # the source patch touches tests / runner config
    PATCH_APPLY_FAILED = "patch_apply_failed"  # the source (candidate/Gold) patch does not apply to Base
    TEST_PATCH_APPLY_FAILED = "test_patch_apply_failed"
    # operational: the run
    NODE_NOT_COLLECTED = "node_not_collected"  # a bound node is absent from the runner's results
    NODE_NOT_RUN = "node_not_run"              # a bound node was skipped / deselected
    NODE_ERROR = "node_error"                  # a bound node errored outside its body (fixture/setup)
    COLLECTION_ERROR = "collection_error"      # a test module failed to load
    IMPORT_ERROR = "import_error"              # ...because an import failed (missing module/name)
    MISSING_DEPENDENCY = "missing_dependency"  # ...because a third-party module is not installed
    INCONSISTENT_EXIT = "inconsistent_exit"    # exit status contradicts per-node results
    NO_RESULTS = "no_results"                  # the runner produced no per-node results at all
    RUNNER_ERROR = "runner_error"              # usage error / internal error of the runner
    EXPECTED_FAILURE_ONLY = "expected_failure_only"  # every bound node is an expected failure: no verdict
    TIMEOUT = "timeout"                        # the sandbox's wall-clock limit fired
    OUT_OF_MEMORY = "out_of_memory"            # the sandbox's memory limit killed the run
    PROCESS_LIMIT = "process_limit"            # the sandbox's process limit refused a fork
    SANDBOX_ERROR = "sandbox_error"            # the sandbox itself failed (daemon gone, bwrap error)
    # operational: trust in the results (the harness-owned reporter, harness/reporter/)
    RESULTS_MISSING = "results_missing"        # the harness's reporter never reported from the run
    RESULTS_INCOMPLETE = "results_incomplete"  # the run ended without the reporter's end record (os._exit...)
    RESULTS_FORGED = "results_forged"          # the record stream, the runner's log or the exit status disagree
    RUNNER_TAMPERED = "runner_tampered"        # the run changed the runner, the test code or builtins
    TREE_MISMATCH = "tree_mismatch"            # applying the patches changed paths they do not declare
    BUILD_FAILED = "build_failed"              # the task's build steps failed after the patches: no test ran
    FLAKY_NODE = "flaky_node"                  # a bound node's verdict changes across repeated runs
    PLAIN_RUN_DISAGREES = "plain_run_disagrees"  # official: the run without the reporter resolves differently
    RESULTS_DISAGREE = "results_disagree"      # log, exit status and record disagree in a run of trusted code only

    @property
    def valid(self) -> bool:
        return self in (FailureKind.PASSED, FailureKind.BEHAVIORAL_FAILURE)


@dataclass(frozen=True)
class NodeResult:
    node: str              # the declared node, as written in the contract
    status: str | None     # the runner's raw status (PASSED/FAILED/ERROR/SKIPPED/XFAIL/XPASS) or None if absent
    outcome: str           # bundle.nodes.Outcome value, or "absent"
    log_status: str | None = None   # what the runner's log says, when the status comes from the reporter


@dataclass
class Execution:
    instance_id: str
    valid: bool
    verdict: Verdict | None
    failure_kind: FailureKind
    diagnostic: str                         # one bounded human sentence (fit to show an agent)
    nodes: list[NodeResult] = field(default_factory=list)
    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    isolated: bool = True
    backend: str = ""
    runner: str = ""
    command: str = ""                       # the command as run (after observation flags)
    duration_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)   # reset / apply / run / parse seconds
    output_tail: str = ""
    problems: list[Problem] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    test_patch_sha256: str = ""
    source_patch_sha256: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the invariant of Appendix B.1, enforced at construction
        if self.valid != self.failure_kind.valid:
            raise ValueError(f"valid={self.valid} contradicts failure_kind={self.failure_kind.value}")
        if self.valid and self.verdict is None:
            raise ValueError("a valid execution must carry a verdict")
        if not self.valid and self.verdict is not None:
            raise ValueError("an operationally invalid execution cannot carry a verdict")
        if self.verdict is Verdict.PASS and self.failure_kind is not FailureKind.PASSED:
            raise ValueError("PASS verdict requires failure_kind=passed")
        if self.verdict is Verdict.FAIL and self.failure_kind is not FailureKind.BEHAVIORAL_FAILURE:
            raise ValueError("FAIL verdict requires failure_kind=behavioral_failure")

    @property
    def passed(self) -> bool:
        return self.valid and self.verdict is Verdict.PASS

    @property
    def failed(self) -> bool:
        return self.valid and self.verdict is Verdict.FAIL

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value if self.verdict else None
        d["failure_kind"] = self.failure_kind.value
        d["problems"] = [p.to_dict() for p in self.problems]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Execution":
        d = dict(d)
        d["verdict"] = Verdict(d["verdict"]) if d.get("verdict") else None
        d["failure_kind"] = FailureKind(d["failure_kind"])
        d["nodes"] = [NodeResult(**n) for n in d.get("nodes", [])]
        d["problems"] = [Problem(**p) for p in d.get("problems", [])]
        return cls(**d)


def gate_record(ex: Execution, diagnostic_chars: int = 1000) -> dict[str, Any]:
    """The short record of a gate run that generation records and attempts carry (one shape everywhere)."""
    return {"valid": ex.valid, "verdict": ex.verdict.value if ex.verdict else None,
            "failure_kind": ex.failure_kind.value, "diagnostic": ex.diagnostic[:diagnostic_chars]}
