"""Learn to Test: one Test-agent episode (paper §3.1, Listings 1-3, SPEC §2.3).

The agent works in a Gold-free workspace (sanitized history, Base only) and sees a `TaskView` (the
issue, no Gold, no official tests). Each COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT is one submission
attempt: the three bundle files are read from the workspace's /tmp and handed to the harness's
`BaseGate`, which validates them and runs them on a fresh Base in a *separate* verifier sandbox. The
first bundle that fails cleanly on a fresh Base is retained; a rejected attempt returns bounded
diagnostics and the agent may revise. At most `max_submissions` attempts within `max_turns` turns.

tests/unit/test_gold_boundary.py checks that this package never reaches Gold or the official tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from execcritic.agents.loop import SUBMIT_MARKER, Session, Submitted, Trajectory
from execcritic.agents.models.base import ChatModel, ContextWindowExceeded
from execcritic.agents.workspace import commit_prepared_state, sanitize_history, verify_history
from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER, TestAgentConfig, WorkspaceConfig
from execcritic.harness.services import BaseGate
from execcritic.prompts import prompts
from execcritic.sandbox.base import Sandbox
from execcritic.tasks.view import TaskView

BUNDLE_PATHS = {"test_patch": "/tmp/test.patch", "test_command": "/tmp/test_command",
                "contract": "/tmp/test_contract.json"}


@dataclass
class Attempt:
    turn: int
    qualified: bool
    stage: str                        # "files" | "validation" | "base_gate"
    reasons: list[str] = field(default_factory=list)
    gate: dict[str, Any] | None = None
    bundle_digest: str = ""


@dataclass
class TestAgentResult:
    __test__ = False

    instance_id: str
    qualified: bool
    exit_status: str                  # qualified | submissions_exhausted | turns_exhausted | time_exhausted | context_exhausted | workspace_error
    bundle: TestBundle | None
    attempts: list[Attempt]
    turns: int
    history: dict[str, Any]           # sanitization report (before) and re-verification (after)
    prompt_digest: str
    trajectory: Trajectory
    duration_s: float = 0.0

    def to_record(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id, "qualified": self.qualified, "exit_status": self.exit_status,
            "bundle": self.bundle.to_dict() if self.bundle else None,
            "attempts_used": len(self.attempts),
            "attempts": [a.__dict__ for a in self.attempts],
            "rejection_reasons": [r for a in self.attempts if not a.qualified for r in a.reasons],
            "turns": self.turns, "history": self.history, "prompt_digest": self.prompt_digest,
            "duration_s": round(self.duration_s, 3),
        }


def _read(sandbox: Sandbox, path: str) -> str | None:
    try:
        return sandbox.read_file(path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _reject_message(attempt: Attempt, remaining: int, diagnostics: str) -> str:
    head = ("TEST-PATCH SUBMISSION QUALIFIED" if attempt.qualified else
            f"TEST-PATCH SUBMISSION REJECTED at {attempt.stage} ({remaining} submission(s) left)")
    return f"{head}\n{diagnostics}\nRevise the workspace and submit again." if not attempt.qualified else head


def run_test_agent(task: TaskView, model: ChatModel, *, workspace: Sandbox, gate: BaseGate,
                   config: TestAgentConfig = PAPER.test_agent,
                   workspace_config: WorkspaceConfig = PAPER.workspace) -> TestAgentResult:
    started = time.monotonic()
    p = prompts("test_agent")
    trajectory = Trajectory(meta={"agent": "test", "instance_id": task.instance_id, "prompt_digest": p.digest,
                                  "model": model.serialize(),
                                  "config": config.__dict__})
    attempts: list[Attempt] = []
    history: dict[str, Any] = {}

    def result(status: str, bundle: TestBundle | None = None, turns: int = 0) -> TestAgentResult:
        trajectory.meta["exit_status"] = status
        return TestAgentResult(task.instance_id, bundle is not None, status, bundle, attempts, turns, history,
                               p.digest, trajectory, time.monotonic() - started)

    workspace.reset()
    before = sanitize_history(workspace)
    history["before"] = before.to_dict()
    if not before.sanitized:
        return result("workspace_error")
    history["prepared_paths_committed"] = len(commit_prepared_state(workspace))
    session = Session(model, workspace, trajectory=trajectory, config=workspace_config,
                      format_error=lambda e: p.render("format_error_template", error=e),
                      context_tokens=config.context_tokens)
    session.phase = "test"
    session.say("system", p.render("system_template"), kind="prompt")
    session.say("user", p.render("instance_template", task=task.problem_statement, step_limit=config.max_turns),
                kind="prompt")
    status = "turns_exhausted"
    retained: TestBundle | None = None
    while session.turns < config.max_turns:
        if time.monotonic() - started > config.episode_timeout_s:
            status = "time_exhausted"
            break
        try:
            session.step()
            continue
        except ContextWindowExceeded:
            status = "context_exhausted"
            break
        except Submitted as sub:
            if sub.marker != SUBMIT_MARKER:
                session.say("user", f"{sub.marker} is not a Test-agent action; submit with {SUBMIT_MARKER}.")
                continue
        attempt = Attempt(turn=session.turns, qualified=False, stage="files")
        attempts.append(attempt)
        texts = {k: _read(workspace, v) for k, v in BUNDLE_PATHS.items()}
        missing = [BUNDLE_PATHS[k] for k, v in texts.items() if not v or not v.strip()]
        if missing:
            attempt.reasons = [f"missing or empty: {m}" for m in missing]
            diagnostics = "\n".join(attempt.reasons)
        else:
            bundle = TestBundle(texts["test_patch"] or "", texts["test_command"] or "", texts["contract"] or "")
            attempt.bundle_digest = bundle.digest()
            answer = gate.submit(bundle)
            attempt.stage, attempt.reasons, attempt.gate = answer.stage, answer.reasons, answer.gate
            attempt.qualified = answer.qualified
            diagnostics = answer.diagnostics
            if answer.qualified:
                retained = bundle
        trajectory.event("submission", phase="test", attempt=len(attempts), qualified=attempt.qualified,
                         stage=attempt.stage, reasons=attempt.reasons)
        remaining = config.max_submissions - len(attempts)
        session.say("user", _reject_message(attempt, remaining, diagnostics))
        if retained is not None:
            status = "qualified"
            break
        if remaining <= 0:
            status = "submissions_exhausted"
            break
    history["after"] = verify_history(workspace, allow_new_objects=True).to_dict()
    return result(status, retained, session.turns)
