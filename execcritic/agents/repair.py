"""Test to Improve: the Repair controller as an explicit state machine (paper §3.2, Eq. 10-11,
Appendix B.1, Listings 4-12; SPEC §2.4).

States and transitions (each branch has a test in tests/integration/test_repair_controller.py):

  ROUND0 ── fresh: up to round0_turns, ends at FINAL-SUBMIT, the turn limit or the context ─┐
        └── provided patch: apply (git apply, then patch --fuzz); if it cannot be applied →  │
            RECOVERY (Listing 12, same budget) until FINAL-SUBMIT                            │
  p0 = workspace candidate ◄──────────────────────────────────────────────────────────────────┘
  no qualified bundle ──► DONE(no_bundle): p0 is forwarded (Base-gate failure)
  INITIAL GATE on p0 ── valid PASS ──► DONE(round0_pass)
                     └── otherwise ──► REVISION round 1 (Listing 6 with the envelope)
  REVISION r (≤ revision_rounds, ≤ turns_per_round turns each):
     CHECK, candidate unchanged ──► Listing 11; no gate run, no check consumed, no turns returned
     CHECK, changed / forced after turns_per_round turns ──► gate:
          valid PASS ──► Listing 9, DONE(check_pass) with that candidate
          otherwise, r < max ──► Listing 8 with the envelope, round r+1 (inconclusive grants nothing)
          otherwise ──► Listing 10, DONE(budget_exhausted) with the LATEST candidate
     FINAL-SUBMIT ──► DONE(final_submit) with the current candidate (its gate outcome recorded apart)
     context budget spent ──► gate the current candidate (an unchanged one reuses its last result):
          valid PASS ──► DONE(check_pass); otherwise DONE(context_exhausted) with that (latest) candidate

Every candidate is the workspace's complete Base-relative source patch (workspace.export_candidate):
new files included, test and runner-config paths excluded and flagged.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from execcritic.agents.loop import CHECK_MARKER, SUBMIT_MARKER, Session, Submitted, Trajectory
from execcritic.agents.models.base import ChatModel, ContextWindowExceeded
from execcritic.agents.workspace import Candidate, commit_prepared_state, export_candidate
from execcritic.config import PAPER, RepairConfig, WorkspaceConfig
from execcritic.harness.apply import SOURCE, apply_patch
from execcritic.harness.execution import Execution
from execcritic.harness.feedback import gate_status
from execcritic.harness.services import CandidateVerifier
from execcritic.prompts import prompts
from execcritic.sandbox.base import Sandbox
from execcritic.tasks.view import TaskView


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""


@dataclass
class Check:
    round: int                       # 0 = the initial gate on p0
    trigger: str                     # initial | check | forced | final_submit
    candidate_sha: str
    status: str                      # pass | hard_fail | inconclusive
    failure_kind: str
    valid: bool
    reused: bool = False             # unchanged candidate: previous result reused, gate not rerun
    excluded_paths: list[str] = field(default_factory=list)
    turn: int = 0


@dataclass
class RepairResult:
    instance_id: str
    mode: str                        # fresh | provided
    final_patch: str
    final_reason: str                # no_bundle | round0_pass | check_pass | final_submit | budget_exhausted
    round0: dict[str, Any]
    checks: list[Check]
    revision_rounds: int             # revision rounds entered
    revision_turns: int              # model turns after Round 0 (the paper's "additional turns")
    total_turns: int
    unchanged_checks: int
    local_status: str                # gate status of the final patch: pass | hard_fail | inconclusive | none
    bundle_digest: str
    prompt_digest: str
    trajectory: Trajectory
    duration_s: float = 0.0

    @property
    def entered_repair(self) -> bool:
        return self.revision_rounds > 0

    def to_record(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "trajectory"}  # checks become plain dicts
        d["final_patch_sha"] = _sha(self.final_patch)
        d["entered_repair"] = self.entered_repair
        return d


class _Done(Exception):
    def __init__(self, reason: str, candidate: Candidate):
        self.reason = reason
        self.candidate = candidate


class RepairController:
    """`verifier` is the harness's handle on the frozen qualified bundle (None: no qualified bundle,
    a Base-gate failure); the controller never sees the bundle itself, only Executions and envelopes."""

    def __init__(self, task: TaskView, model: ChatModel, *, workspace: Sandbox, verifier: CandidateVerifier | None,
                 config: RepairConfig = PAPER.repair, workspace_config: WorkspaceConfig = PAPER.workspace):
        self.task, self.model, self.workspace, self.verifier = task, model, workspace, verifier
        self.config = config
        self.p = prompts("repair")
        self.trajectory = Trajectory(meta={"agent": "repair", "instance_id": task.instance_id,
                                           "prompt_digest": self.p.digest,
                                           "bundle_digest": verifier.bundle_digest if verifier else None,
                                           "model": model.serialize(),
                                           "config": config.__dict__})
        self.session = Session(model, workspace, trajectory=self.trajectory, config=workspace_config,
                               format_error=lambda e: prompts("test_agent").render("format_error_template", error=e),
                               context_tokens=config.context_tokens)
        self.checks: list[Check] = []
        self.prepared_paths: list[str] = []
        self.last_checked: tuple[str, Execution] | None = None   # (candidate patch, its execution)
        self.unchanged_checks = 0
        self.revision_rounds = 0

    # ---- helpers ------------------------------------------------------------------------------
    def _candidate(self) -> Candidate:
        return export_candidate(self.workspace)

    def _gate(self, cand: Candidate, round_: int, trigger: str) -> Execution:
        assert self.verifier is not None
        if self.last_checked and self.last_checked[0] == cand.patch:
            ex, reused = self.last_checked[1], True
        else:
            ex = self.verifier.check(cand.patch)
            reused = False
            self.last_checked = (cand.patch, ex)
        self.checks.append(Check(round_, trigger, _sha(cand.patch), gate_status(ex), ex.failure_kind.value,
                                 ex.valid, reused, cand.excluded_paths, self.session.turns))
        self.trajectory.event("gate", phase=self.session.phase, round=round_, trigger=trigger,
                              status=gate_status(ex), failure_kind=ex.failure_kind.value, reused=reused)
        return ex

    def _envelope(self, ex: Execution) -> str:
        assert self.verifier is not None
        return self.verifier.envelope(ex)

    # ---- Round 0 --------------------------------------------------------------------------------
    def _round0_fresh(self) -> dict[str, Any]:
        s = self.session
        s.phase = "round0"
        s.say("system", self.p.render("round0_system_template"), kind="prompt")
        s.say("user", self.p.render("round0_instance_template", task=self.task.problem_statement,
                                    step_limit=self.config.round0_turns), kind="prompt")
        exit_status = "turn_limit"
        while s.turns < self.config.round0_turns:
            try:
                s.step()
            except ContextWindowExceeded:
                exit_status = "context_exhausted"
                break
            except Submitted as sub:
                if sub.marker == SUBMIT_MARKER:
                    exit_status = "submitted"
                    break
                s.say("user", f"{CHECK_MARKER} is not available before a Round-0 patch exists; "
                              f"submit with {SUBMIT_MARKER}.")
        return {"exit_status": exit_status, "turns": s.turns}

    def _round0_provided(self, patch: str, seed_messages: list[dict] | None) -> dict[str, Any]:
        s = self.session
        s.phase = "round0"
        applied = apply_patch(self.workspace, patch, name="round0", ladder=SOURCE, timeout=self.session.command_timeout_s,
                              diag_chars=self.config.apply_diagnostics_chars)
        info: dict[str, Any] = {"provided_patch_sha": _sha(patch), "applied": applied.applied,
                                "apply_method": applied.method}
        if seed_messages:
            for m in seed_messages:
                s.messages.append(dict(m))
            info["seed_messages"] = len(seed_messages)
        if applied.applied:
            info["exit_status"] = "provided"
            return info
        # Listing 12: recover a valid source-only patch within the same bounded episode
        self.workspace.reset()
        s.phase = "recovery"
        if not seed_messages:
            s.say("system", self.p.render("fallback_system_template"), kind="prompt")
        diagnostics = applied.diagnostic[: self.config.apply_diagnostics_chars]
        s.say("user", self.p.render("apply_failure_recovery_template", task=self.task.problem_statement,
                                    feedback=diagnostics), kind="prompt")
        info["exit_status"] = "recovery_turn_limit"
        budget = self.config.turns_per_round
        start = s.turns
        while s.turns - start < budget:
            try:
                s.step()
            except ContextWindowExceeded:
                info["exit_status"] = "recovery_context_exhausted"
                break
            except Submitted as sub:
                if sub.marker == SUBMIT_MARKER:
                    info["exit_status"] = "recovered"
                    break
        info["recovery_turns"] = s.turns - start
        return info

    # ---- revision rounds ------------------------------------------------------------------------
    def _revise(self, initial: Execution) -> None:
        if self.config.revision_rounds == 0:       # Round 0 only (an ablation): the checked Round-0 patch is final
            raise _Done("budget_exhausted", self._candidate())
        s = self.session
        s.phase = "repair"
        if not any(m.get("role") == "system" for m in s.messages):
            s.say("system", self.p.render("fallback_system_template"), kind="prompt")
        s.say("user", self.p.render("repair_initial_template", task=self.task.problem_statement,
                                    feedback=self._envelope(initial)), kind="prompt")
        for r in range(1, self.config.revision_rounds + 1):
            self.revision_rounds = r
            start = s.turns
            trigger = "forced"
            out_of_context = False
            while s.turns - start < self.config.turns_per_round:
                try:
                    s.step()
                    continue
                except ContextWindowExceeded:
                    out_of_context = True  # the conversation cannot go on: check, then submit the latest
                    trigger = "context"
                    break
                except Submitted as sub:
                    cand = self._candidate()
                    if sub.marker == SUBMIT_MARKER:
                        if self.verifier is not None:
                            self._gate(cand, r, "final_submit")   # recorded apart; never a veto
                        raise _Done("final_submit", cand)
                    if self.last_checked and self.last_checked[0] == cand.patch:
                        self.unchanged_checks += 1
                        self.trajectory.event("unchanged_check", phase="repair", round=r)
                        s.say("user", self.p.raw("unchanged_candidate_followup"))
                        continue
                    trigger = "check"
                    break
            cand = self._candidate()
            ex = self._gate(cand, r, trigger)
            if ex.passed:
                s.say("user", self.p.raw("pass_terminal_notice"))
                raise _Done("check_pass", cand)
            if out_of_context:
                raise _Done("context_exhausted", cand)
            if r == self.config.revision_rounds:
                s.say("user", self.p.raw("exhausted_terminal_notice"))
                raise _Done("budget_exhausted", cand)
            s.say("user", self.p.format("repair_followup_template", feedback=self._envelope(ex)))

    # ---- the episode ----------------------------------------------------------------------------
    def run(self, provided_patch: str | None = None, seed_messages: list[dict] | None = None) -> RepairResult:
        started = time.monotonic()
        self.workspace.reset()
        self.prepared_paths = commit_prepared_state(self.workspace)
        mode = "provided" if provided_patch is not None else "fresh"
        round0 = (self._round0_provided(provided_patch, seed_messages) if provided_patch is not None
                  else self._round0_fresh())
        p0 = self._candidate()
        round0.update(patch=p0.patch, patch_sha=_sha(p0.patch), excluded_paths=p0.excluded_paths,
                      turns=self.session.turns)
        round0_turns = self.session.turns
        try:
            if self.verifier is None:
                raise _Done("no_bundle", p0)
            initial = self._gate(p0, 0, "initial")
            if initial.passed:
                if p0.empty:  # an empty-patch pass contradicts qualification: inconsistent evidence
                    self.trajectory.event("inconsistent", detail="empty Round-0 patch passed a qualified bundle")
                raise _Done("round0_pass", p0)
            self._revise(initial)
            raise AssertionError("revision loop must end in _Done")  # pragma: no cover
        except _Done as done:
            final, reason = done.candidate, done.reason
        local = "none"
        if self.last_checked is not None and self.last_checked[0] == final.patch:
            local = gate_status(self.last_checked[1])
        self.trajectory.meta.update(final_reason=reason, final_patch_sha=_sha(final.patch))
        return RepairResult(
            instance_id=self.task.instance_id, mode=mode, final_patch=final.patch, final_reason=reason,
            round0=round0, checks=self.checks, revision_rounds=self.revision_rounds,
            revision_turns=self.session.turns - round0_turns, total_turns=self.session.turns,
            unchanged_checks=self.unchanged_checks, local_status=local,
            bundle_digest=self.verifier.bundle_digest if self.verifier else "", prompt_digest=self.p.digest,
            trajectory=self.trajectory, duration_s=time.monotonic() - started)


def run_repair(task: TaskView, model: ChatModel, *, workspace: Sandbox, verifier: CandidateVerifier | None,
               config: RepairConfig = PAPER.repair, workspace_config: WorkspaceConfig = PAPER.workspace,
               provided_patch: str | None = None, seed_messages: list[dict] | None = None) -> RepairResult:
    return RepairController(task, model, workspace=workspace, verifier=verifier, config=config,
                            workspace_config=workspace_config).run(provided_patch, seed_messages)
