"""`ScriptedModel`: a deterministic scripted stand-in for a model, for unit tests of agent control flow.

It is not a model and says so in its manifest. Each step is one turn:
- a list of command strings -> that many `bash` tool calls (an empty list -> a turn with no tool call,
  i.e. a format error); in text mode, that many fenced ```bash blocks;
- a string -> raw assistant text, parsed by the text-action rules (one fenced ```bash block);
- a dict -> a raw assistant message (`content`, `tool_calls`), parsed like a real server reply, to script
  custom tools or broken JSON;
- a callable(messages) -> any of the above, or a ModelResponse, for tests that react to feedback.
Responses go through the same `build_response` as real backends, so format errors behave identically.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

from execcritic.agents.models.base import (
    TOOL_MODES,
    ChatModel,
    ModelResponse,
    ScriptExhausted,
    build_response,
    with_text_instructions,
)

Step = Sequence[str] | str | dict | Callable[[list], Any] | ModelResponse


def _words(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "").split()) for m in messages)


class ScriptedModel(ChatModel):
    """Replays `steps` in order; `calls` keeps a deep copy of the messages each turn received.

    In text mode a list step is written as fenced ```bash blocks (so two commands are a format error, as
    for a real text-mode model) and `calls` records the text instructions that a real backend adds. Usage is a whitespace word count, labelled
    as such in the manifest (there is no tokenizer behind a script).
    """

    def __init__(self, steps: Sequence[Step], *, tool_mode: str = "tools", name: str = "scripted"):
        if tool_mode not in TOOL_MODES:
            raise ValueError(f"tool_mode must be one of {TOOL_MODES}, got {tool_mode!r}")
        self.steps = list(steps)
        self.tool_mode = tool_mode
        self.name = name
        self.calls: list[list[dict[str, Any]]] = []

    @property
    def remaining(self) -> int:
        return len(self.steps) - len(self.calls)

    def serialize(self) -> dict[str, Any]:
        return {"class": "ScriptedModel", "name": self.name, "tool_mode": self.tool_mode,
                "steps": len(self.steps), "note": "deterministic scripted stand-in, not a model; usage is a "
                                                  "word count"}

    def query(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None) -> ModelResponse:
        turn = len(self.calls)
        sent = with_text_instructions(messages) if self.tool_mode == "text" else messages
        self.calls.append(copy.deepcopy(sent))
        if turn >= len(self.steps):
            raise ScriptExhausted(f"ScriptedModel {self.name!r}: queried for turn {turn + 1} but the script has "
                                  f"only {len(self.steps)} steps; add steps or end the episode earlier")
        step = self.steps[turn]
        if callable(step) and not isinstance(step, ModelResponse):
            step = step(copy.deepcopy(messages))
        if isinstance(step, ModelResponse):
            return step
        usage = {"prompt_tokens": _words(sent), "completion_tokens": 0}
        tag = f"s{turn}"
        if isinstance(step, str):
            content, tool_calls = step, None
        elif isinstance(step, dict):
            content, tool_calls = step.get("content"), step.get("tool_calls")
        elif isinstance(step, (list, tuple)):
            if not all(isinstance(c, str) for c in step):
                raise TypeError(f"ScriptedModel step {turn}: a list step must hold command strings, got {step!r}")
            if self.tool_mode == "text":  # the same intent, written the way a text-mode model would
                content, tool_calls = "\n\n".join(f"```bash\n{c}\n```" for c in step), None
            else:
                content = ""
                tool_calls = [{"id": f"scripted-{turn}-{i}", "type": "function",
                               "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
                              for i, c in enumerate(step)]
        else:
            raise TypeError(f"ScriptedModel step {turn}: unsupported step type {type(step).__name__}")
        usage["completion_tokens"] = len(str(content or "").split()) + sum(
            len(str((tc.get("function") or {}).get("arguments") or "").split()) for tc in tool_calls or [])
        return build_response(content, tool_calls, tool_mode=self.tool_mode, usage=usage, latency_s=0.0,
                              finish_reason="tool_calls" if tool_calls else "stop", model=self.name, turn_tag=tag)
