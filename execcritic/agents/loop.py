"""A bash-tool conversation between one model and one sandbox: the loop both agents share.

Small on purpose (mini-swe-agent's shape): the model proposes bash actions, the sandbox runs them,
observations go back truncated, and control flow leaves the loop by a few explicit exceptions:
`Submitted` when an action's output starts with a protocol marker and exited 0, and
`ContextWindowExceeded` when the conversation no longer fits the context budget (the endpoint refused
it, or the server-reported token counts say the next request would not fit). Format errors (no valid action) are answered with the paper's Listing 3 and cost a
turn. Everything that happened is appended to a `Trajectory` that can be saved and loaded.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from execcritic.agents.models.base import ChatModel, ContextWindowExceeded, FormatError
from execcritic.cancel import raise_if_cancelled
from execcritic.config import PAPER, WorkspaceConfig
from execcritic.errors import SandboxError
from execcritic.files import atomic_write
from execcritic.sandbox.base import Sandbox

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
CHECK_MARKER = "COMPLETE_TASK_AND_CHECK_CANDIDATE_PATCH"
MARKERS = (SUBMIT_MARKER, CHECK_MARKER)
TRAJECTORY_FORMAT = "execcritic-trajectory-1"


class Submitted(Exception):
    """An action printed a protocol marker as its first output line and exited 0."""

    def __init__(self, marker: str, payload: str):
        super().__init__(marker)
        self.marker = marker
        self.payload = payload


def truncate_observation(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return (text[:half] + f"\n<elided_chars>{len(text) - 2 * half} characters elided</elided_chars>\n"
            + text[-half:])


def detect_marker(output: str, exit_code: int) -> tuple[str, str] | None:
    """(marker, payload) if the first non-blank output line is exactly a marker and the command exited 0."""
    if exit_code != 0:
        return None
    lines = output.lstrip().splitlines()
    if lines and lines[0].strip() in MARKERS:
        return lines[0].strip(), "\n".join(lines[1:])
    return None


@dataclass
class Trajectory:
    """Messages plus one record per event (model turn, action, controller message), loadable as JSON."""

    meta: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"kind": kind, "t": time.time(), **data})

    def to_dict(self) -> dict[str, Any]:
        return {"format": TRAJECTORY_FORMAT, "meta": self.meta, "messages": self.messages, "events": self.events}

    def save(self, path: str | Path) -> Path:
        return atomic_write(path, json.dumps(self.to_dict(), indent=1, default=str))

    @classmethod
    def load(cls, path: str | Path) -> "Trajectory":
        data = json.loads(Path(path).read_text())
        if data.get("format") != TRAJECTORY_FORMAT:
            raise ValueError(f"{path}: not an {TRAJECTORY_FORMAT} file")
        return cls(meta=data["meta"], messages=data["messages"], events=data["events"])

    def model_turns(self, phase: str | None = None) -> int:
        return sum(1 for e in self.events if e["kind"] == "model" and (phase is None or e.get("phase") == phase))


class Session:
    """One model talking to one sandbox. `turns` counts model calls (format errors included).

    `context_tokens` is the role's context budget (paper: 48k Test, 64k Repair); the model's own window
    wins when smaller. Endpoints that enforce their window refuse an oversized request themselves; for
    the others (`transformers serve` only warns) the session predicts the next request's size from the
    last server-reported token count plus the characters added since (~3 characters per token, on the
    safe side) and the reply budget, and stops before sending what cannot fit."""

    def __init__(self, model: ChatModel, sandbox: Sandbox, *, trajectory: Trajectory, format_error: Callable[[str], str],
                 config: WorkspaceConfig = PAPER.workspace, context_tokens: int | None = None):
        windows = [w for w in (context_tokens, getattr(model, "context_window", None)) if w]
        self.context_tokens = min(windows) if windows else None
        self._tokens_seen: tuple[int, int] | None = None  # (prompt + completion tokens, message chars) at last reply
        self.model = model
        self.sandbox = sandbox
        self.trajectory = trajectory
        self.format_error = format_error
        self.command_timeout_s = config.command_timeout_s
        self.observation_chars = config.observation_chars
        self.turns = 0
        self.phase = ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.trajectory.messages

    def say(self, role: str, content: str, *, kind: str = "controller") -> None:
        self.messages.append({"role": role, "content": content})
        self.trajectory.event(kind, phase=self.phase, role=role, chars=len(content))

    def _chars(self) -> int:
        return sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or "")) for m in self.messages)

    def _check_context(self) -> None:
        if self.context_tokens is None or self._tokens_seen is None:
            return
        used, chars = self._tokens_seen
        predicted = used + (self._chars() - chars) // 3 + (getattr(self.model, "reply_tokens", None) or 0)
        if predicted > self.context_tokens:
            self.trajectory.event("context_exhausted", phase=self.phase, turn=self.turns, predicted_tokens=predicted,
                                  context_tokens=self.context_tokens)
            raise ContextWindowExceeded(f"the next request would need about {predicted} tokens; the context budget "
                                        f"is {self.context_tokens}")

    def _note_usage(self, usage: dict | None) -> None:
        if usage and usage.get("prompt_tokens") is not None:
            self._tokens_seen = (int(usage["prompt_tokens"]) + int(usage.get("completion_tokens") or 0), self._chars())

    def step(self) -> None:
        """One model turn: query, then run its actions in order. Raises Submitted at a marker and
        ContextWindowExceeded (no turn spent) when the conversation no longer fits."""
        self._check_context()
        try:
            raise_if_cancelled("an agent episode")      # (Ctrl-C: execcritic/cancel.py)
            response = self.model.query(self.messages)
        except ContextWindowExceeded as exc:
            self.trajectory.event("context_exhausted", phase=self.phase, turn=self.turns, refused=str(exc)[:500])
            raise
        except FormatError as exc:
            self.turns += 1
            if exc.message:
                self.messages.append(exc.message)
            self._note_usage(getattr(exc, "usage", None))
            self.trajectory.event("model", phase=self.phase, turn=self.turns, format_error=str(exc),
                                  usage=getattr(exc, "usage", None), latency_s=getattr(exc, "latency_s", None))
            self.say("user", self.format_error(str(exc)), kind="format_error")
            return
        self.turns += 1
        self.messages.append(response.message)
        self._note_usage(response.usage)
        self.trajectory.event("model", phase=self.phase, turn=self.turns, usage=response.usage,
                              latency_s=response.latency_s, n_actions=len(response.actions))
        for i, action in enumerate(response.actions):
            found = self._run_action(action)
            if found:
                for rest in response.actions[i + 1:]:  # every tool call needs an answer to stay well-formed
                    self._observe(rest, "<returncode>-1</returncode>\n<output>\nnot executed: an earlier command "
                                        "in this turn submitted\n</output>")
                raise Submitted(*found)

    def _observe(self, action, observation: str) -> None:
        if getattr(action, "tool_call_id", None):
            self.messages.append({"role": "tool", "tool_call_id": action.tool_call_id, "content": observation})
        else:
            self.messages.append({"role": "user", "content": observation})

    def _run_action(self, action) -> tuple[str, str] | None:
        started = time.monotonic()
        try:
            res = self.sandbox.run(action.command, timeout=self.command_timeout_s)
            output, code, timed_out = res.output, res.exit_code, res.timed_out
        except SandboxError as exc:
            output, code, timed_out = f"sandbox error: {exc}", -1, False
        note = f"\n[command timed out after {self.command_timeout_s:.0f} s and was killed]" if timed_out else ""
        observation = (f"<returncode>{code}</returncode>\n<output>\n"
                       f"{truncate_observation(output, self.observation_chars)}{note}\n</output>")
        self._observe(action, observation)
        self.trajectory.event("action", phase=self.phase, turn=self.turns, command=action.command, exit_code=code,
                              timed_out=timed_out, duration_s=round(time.monotonic() - started, 3),
                              output_chars=len(output))
        return detect_marker(output, code)
