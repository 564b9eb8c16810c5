"""The agents' only routes into the harness: services that hold the full task (and the frozen bundle)
so that the agents never do.

Why services and not functions taking a `Task`: the Gold boundary is a type. An agent episode receives
a `TaskView` (no Gold, no official tests) and one of these objects; validation, the Base gate and the
CHECK of a Repair candidate need the real task (its runner, its Base, its language rules) and happen
here, on the harness side. The Repair agent never sees the qualified bundle either (paper §3.2: the
bundle is frozen and hidden; the agent sees the feedback envelope only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from execcritic.bundle.model import TestBundle
from execcritic.config import HarnessConfig
from execcritic.harness.execute import execute
from execcritic.harness.execution import Execution, gate_record
from execcritic.harness.feedback import render_envelope
from execcritic.harness.gate import base_gate
from execcritic.harness.validate import validate_bundle
from execcritic.sandbox.base import Sandbox
from execcritic.tasks.model import Task


@dataclass
class Submission:
    """The harness's answer to one Test-agent submission."""

    qualified: bool
    stage: str                                  # "validation" | "base_gate"
    reasons: list[str] = field(default_factory=list)
    diagnostics: str = ""                       # bounded, for the agent
    gate: dict[str, Any] | None = None          # the gate record (harness.execution.gate_record)


class BaseGate:
    """Validate a submitted bundle, then run it on a fresh Base in the verifier sandbox (SPEC §2.3)."""

    def __init__(self, task: Task, sandbox: Sandbox, *, harness: HarnessConfig, diagnostics_chars: int):
        self._task, self._sandbox = task, sandbox
        self._harness, self._diagnostics_chars = harness, diagnostics_chars

    def submit(self, bundle: TestBundle) -> Submission:
        problems = validate_bundle(bundle, self._task, config=self._harness)
        if problems:
            reasons = [str(p) for p in problems]
            return Submission(False, "validation", reasons, "\n".join(reasons)[: self._diagnostics_chars])
        gate = base_gate(self._task, bundle, sandbox=self._sandbox, config=self._harness,
                         diagnostics_chars=self._diagnostics_chars)
        ex = gate.execution
        reasons = [] if gate.qualified else [
            f"base_gate: {ex.failure_kind.value}: {ex.diagnostic.splitlines()[0][:500] if ex.diagnostic else ''}"]
        return Submission(gate.qualified, "base_gate", reasons, gate.diagnostics, gate_record(ex))


class CandidateVerifier:
    """Run the frozen bundle on a Repair candidate (reset to Base, apply the candidate through the
    source-patch gate, apply the bundle, run) and render the bounded feedback envelope (Listing 7)."""

    def __init__(self, task: Task, bundle: TestBundle, sandbox: Sandbox, *, harness: HarnessConfig,
                 feedback_chars: int):
        self._task, self._bundle, self._sandbox = task, bundle, sandbox
        self._harness, self._feedback_chars = harness, feedback_chars

    @property
    def bundle_digest(self) -> str:
        return self._bundle.digest()

    def check(self, patch: str) -> Execution:
        return execute(self._task, self._bundle, patch or None, sandbox=self._sandbox, config=self._harness)

    def envelope(self, ex: Execution) -> str:
        return render_envelope(ex, self._bundle, cap=self._feedback_chars, language=self._task.language)
