"""Learn to Test: the Base gate (online), the Gold audit and candidate discrimination (offline only).

SPEC §2.3, paper Eq. 3 and Eq. 12. A Test-agent episode reaches only the Base gate, through
`harness.services.BaseGate`; the Gold audit and discrimination read Gold / labeled patches and are
called by the offline audit and training code, never by the agents package
(tests/unit/test_gold_boundary.py checks that).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Sequence

from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER, HarnessConfig
from execcritic.harness.execute import execute
from execcritic.harness.execution import Execution, Verdict, gate_record
from execcritic.sandbox.base import Sandbox
from execcritic.tasks.model import Task


def render_diagnostics(ex: Execution, limit: int = PAPER.test_agent.diagnostics_chars) -> str:
    """Bounded diagnostics fit to show the Test agent: a fixed header (never cut), then the output tail."""
    lines = [
        "base_gate:",
        f"  valid: {ex.valid}",
        f"  verdict: {ex.verdict.value if ex.verdict else 'none'}",
        f"  failure_kind: {ex.failure_kind.value}",
        f"  diagnostic: {ex.diagnostic.splitlines()[0][:600] if ex.diagnostic else ''}",
    ]
    for p in ex.problems[:20]:
        lines.append(f"  problem: {p}")
    for n in ex.nodes[:20]:
        lines.append(f"  node: {n.node} -> {n.status or 'absent'} ({n.outcome})")
    if ex.command:
        lines.append(f"  command: {ex.command[:500]}")
    header = "\n".join(lines) + "\n"
    body = ex.output_tail or "\n".join(ex.diagnostic.splitlines()[1:])
    budget = max(0, limit - len(header) - 40)
    if len(body) > budget:
        body = body[len(body) - budget:]
    return header + "<output_tail>\n" + body + "\n</output_tail>"


@dataclass
class GateResult:
    qualified: bool             # valid run that FAILs on a bound node, on a fresh Base
    execution: Execution
    diagnostics: str            # bounded, for the Test agent

    @property
    def record(self) -> dict:
        return gate_record(self.execution)

    def to_dict(self) -> dict:
        return {"qualified": self.qualified, "execution": self.execution.to_dict(),
                "diagnostics": self.diagnostics}


def base_gate(task: Task, bundle: TestBundle, *, sandbox: Sandbox, config: HarnessConfig = PAPER.harness,
              diagnostics_chars: int = PAPER.test_agent.diagnostics_chars) -> GateResult:
    ex = execute(task, bundle, None, sandbox=sandbox, config=config)
    return GateResult(ex.valid and ex.verdict is Verdict.FAIL, ex, render_diagnostics(ex, diagnostics_chars))


@dataclass
class AuditResult:
    """Q = B*G. Operationally invalid Base or Gold runs count as 0 (Eq. 12)."""

    B: int
    G: int
    base: Execution
    gold: Execution

    @property
    def Q(self) -> int:
        return self.B * self.G

    def to_dict(self) -> dict:
        return {"B": self.B, "G": self.G, "Q": self.Q, "base": self.base.to_dict(), "gold": self.gold.to_dict()}


def gold_audit(task: Task, bundle: TestBundle, *, sandbox: Sandbox, config: HarnessConfig = PAPER.harness,
               hashseed: int | None = None) -> AuditResult:
    """Run the unchanged bundle on an independently reset Base and on Gold. Offline only. `hashseed`: both
    runs with this PYTHONHASHSEED (replaying a recorded run); else each draws its own and records it."""
    base = execute(task, bundle, None, sandbox=sandbox, config=config, hashseed=hashseed)
    gold = execute(task, bundle, task.patch, sandbox=sandbox, config=config, check_source_patch=False,
                   hashseed=hashseed)
    return AuditResult(int(base.valid and base.verdict is Verdict.FAIL),
                       int(gold.valid and gold.verdict is Verdict.PASS), base, gold)


@dataclass(frozen=True)
class LabeledPatch:
    patch: str
    resolved: bool              # the official evaluator's label
    source: str = ""            # where it came from (model, run id)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.patch.strip().encode()).hexdigest()


def select_candidates(candidates: Sequence[LabeledPatch], limit: int = PAPER.test_reward.max_candidates
                      ) -> list[LabeledPatch]:
    """Deduplicate by content, then take up to `limit`, alternating positive/negative in digest order so
    both classes are represented when available. Deterministic."""
    unique: dict[str, LabeledPatch] = {}
    for c in candidates:
        if c.patch.strip():
            unique.setdefault(c.digest, c)
    pos = sorted((c for c in unique.values() if c.resolved), key=lambda c: c.digest)
    neg = sorted((c for c in unique.values() if not c.resolved), key=lambda c: c.digest)
    picked: list[LabeledPatch] = []
    while (pos or neg) and len(picked) < limit:
        if pos:
            picked.append(pos.pop(0))
        if neg and len(picked) < limit:
            picked.append(neg.pop(0))
    return picked


@dataclass
class Discrimination:
    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0
    operational_errors: int = 0          # masks training rewards; never counted as a rejection
    runs: list[dict] = field(default_factory=list)

    @property
    def tpr(self) -> float:
        return self.tp / (self.tp + self.fn) if (self.tp + self.fn) else 0.0   # absent class recall = 0

    @property
    def tnr(self) -> float:
        return self.tn / (self.tn + self.fp) if (self.tn + self.fp) else 0.0

    @property
    def balanced_accuracy(self) -> float:
        return (self.tpr + self.tnr) / 2

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(tpr=self.tpr, tnr=self.tnr, balanced_accuracy=self.balanced_accuracy)
        return d


def discriminate(task: Task, bundle: TestBundle, candidates: Sequence[LabeledPatch], *, sandbox: Sandbox,
                 config: HarnessConfig = PAPER.harness,
                 limit: int = PAPER.test_reward.max_candidates) -> Discrimination:
    """Run the bundle on <= `limit` deduplicated labeled candidates; the bundle 'accepts' a candidate
    iff the run is a valid PASS. TPR/TNR over valid executions only."""
    out = Discrimination()
    for cand in select_candidates(candidates, limit):
        ex = execute(task, bundle, cand.patch, sandbox=sandbox, config=config, check_source_patch=False)
        out.runs.append({"digest": cand.digest[:16], "resolved": cand.resolved, "valid": ex.valid,
                         "verdict": ex.verdict.value if ex.verdict else None,
                         "failure_kind": ex.failure_kind.value})
        if not ex.valid:
            out.operational_errors += 1
            continue
        accepted = ex.verdict is Verdict.PASS
        if cand.resolved:
            out.tp += accepted
            out.fn += not accepted
        else:
            out.tn += not accepted
            out.fp += accepted
    return out
