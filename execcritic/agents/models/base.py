"""The chat-model interface both agents talk to, and the pure parsing of model turns into bash actions.

One tool exists: `bash` with a `command` string (paper: "You have one standard bash tool"). A model either
calls it through OpenAI function calling (`tool_mode="tools"`) or, for endpoints/templates without tool
calls, writes exactly one fenced ```bash block per turn (`tool_mode="text"`). Whatever the mode, a turn
with no valid action raises `FormatError`; the agent loop answers it with Listing 3 and the turn counts.

Operational failures of the model endpoint (unreachable, retries exhausted, context too long) raise
`ModelError` subclasses: they are never a behavioral outcome and the loop must not score them as one.
Nothing here does I/O; backends live in sibling modules.
"""

from __future__ import annotations

import copy
import json
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, Literal

from execcritic.config import PAPER, ProtocolConfig
from execcritic.errors import ExecCriticError

ToolMode = Literal["tools", "text"]
TOOL_MODES: tuple[str, ...] = ("tools", "text")

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command in the task's shell and return its exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to execute."},
            },
            "required": ["command"],
        },
    },
}

# Listing 3 (Appendix B.3.1), verbatim: the paper's answer to a turn without a valid bash tool call.
LISTING3_TEMPLATE = (
    "Tool call error: <error> {error} </error> Every response must contain at least one standard bash tool "
    "call. Do not emit custom tools."
)

# Text-action fallback. The paper's agents always have function calling; this addition is ours, for
# endpoints or chat templates without tools (e.g. SmolLM2). It is appended to the system message sent
# (never to the caller's history) and recorded by `serialize()` as `tool_mode="text"`.
TEXT_ACTION_INSTRUCTIONS = (
    "This endpoint has no function calling. To run a shell command, reply with exactly one fenced code block "
    "tagged bash, for example:\n"
    "```bash\n"
    "ls -la\n"
    "```\n"
    "Each response must contain exactly one ```bash block (no more, no less); it is executed and its output "
    "is returned in the next message. Wherever the instructions mention a bash tool call, write such a "
    "block instead."
)

_FENCE_RE = re.compile(r"```[ \t]*bash[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


class ModelError(ExecCriticError):
    """The model endpoint failed operationally. Never a behavioral outcome of the episode."""


class ModelUnavailable(ModelError):
    """Connection errors, 429 or 5xx persisted through every retry."""


class ContextWindowExceeded(ModelError):
    """The endpoint refused the request because the conversation no longer fits the context window."""


class ScriptExhausted(ModelError):
    """A scripted stand-in was queried more times than it has steps."""


@dataclass(frozen=True)
class SamplingConfig:
    """Per-request sampling. `None` means "backend default" (the paper's Repair top-p is exactly that)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    top_k: int | None = None  # not an OpenAI field: sent in the body for vLLM/SGLang only when set

    def request_fields(self) -> dict[str, Any]:
        """The OpenAI-standard fields to send (unset ones omitted, so the backend default applies)."""
        out = {k: v for k, v in (("temperature", self.temperature), ("top_p", self.top_p),
                                 ("max_tokens", self.max_tokens), ("seed", self.seed)) if v is not None}
        return out

    def extra_fields(self) -> dict[str, Any]:
        return {"top_k": self.top_k} if self.top_k is not None else {}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def test_agent(cls, protocol: ProtocolConfig = PAPER, **overrides: Any) -> SamplingConfig:
        """Test-agent generation (Table 9a): 8,192 max output tokens; temperature: backend default."""
        return cls(**{"max_tokens": protocol.test_agent.max_output_tokens, **overrides})

    @classmethod
    def repair_eval(cls, protocol: ProtocolConfig = PAPER, **overrides: Any) -> SamplingConfig:
        """Repair evaluation (Table 9b): temperature 0.6, top-p backend default."""
        return cls(**{"temperature": protocol.repair.temperature, **overrides})

    @classmethod
    def rl_rollout(cls, protocol: ProtocolConfig = PAPER, **overrides: Any) -> SamplingConfig:
        """RL rollouts (Tables 7c, 8c): temperature 1.0, top-p 1.0, top-k -1 (disabled)."""
        g = protocol.grpo
        return cls(**{"temperature": g.rollout_temperature, "top_p": g.rollout_top_p, "top_k": g.rollout_top_k,
                      **overrides})


@dataclass(frozen=True)
class Action:
    """One bash command to run. `tool_call_id` is set for tool calls (the observation must answer it)."""

    command: str
    tool_call_id: str | None = None


@dataclass
class ModelResponse:
    """One model turn. `message` is the assistant message to append to the history, verbatim in shape
    (content plus tool_calls); `usage` is `{"prompt_tokens", "completion_tokens"}` as the server reported
    them (None where it did not); `latency_s` is the wall time of the whole query, retries included."""

    message: dict[str, Any]
    actions: list[Action]
    usage: dict[str, int | None]
    latency_s: float
    raw_finish_reason: str | None = None
    attempts: int = 1
    reasoning: str | None = None
    model: str | None = None

    def to_record(self) -> dict[str, Any]:
        """JSON-ready record for trajectories (never contains credentials: none are known here)."""
        return {
            "message": self.message,
            "actions": [asdict(a) for a in self.actions],
            "usage": self.usage,
            "latency_s": self.latency_s,
            "finish_reason": self.raw_finish_reason,
            "attempts": self.attempts,
            "reasoning": self.reasoning,
            "model": self.model,
        }


class FormatError(ExecCriticError):
    """The turn has no valid action. `str(exc)` is the error to put into Listing 3.

    `message` is the assistant message that is safe to append to the history before the format-error
    reply: invalid tool calls are folded into its text (an assistant message with `tool_calls` must be
    answered by tool messages, which a format-error reply is not). `raw_message` is the message as the
    model produced it, for trajectories. `usage`/`latency_s` are still recorded: the turn was paid for.
    """

    def __init__(self, error: str, response: ModelResponse | None = None):
        super().__init__(error)
        self.error = error
        self.response = response
        self.raw_message = response.message if response else None
        self.message = _history_safe(response.message) if response else None
        self.usage = response.usage if response else None
        self.latency_s = response.latency_s if response else None
        self.finish_reason = response.raw_finish_reason if response else None


def format_error_text(error: str) -> str:
    """Listing 3 with `error` filled in."""
    return LISTING3_TEMPLATE.format(error=error)


def empty_usage() -> dict[str, int | None]:
    return {"prompt_tokens": None, "completion_tokens": None}


def _history_safe(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return {"role": "assistant", "content": message.get("content") or ""}
    described = []
    for call in calls:
        fn = call.get("function") or {}
        described.append(f"<invalid_tool_call name={json.dumps(fn.get('name'))}>{fn.get('arguments')}"
                         "</invalid_tool_call>")
    text = (message.get("content") or "").rstrip()
    return {"role": "assistant", "content": (text + "\n" if text else "") + "\n".join(described)}


def strip_reasoning(text: str) -> str:
    """Drop `<think>...</think>` spans: a fenced block inside reasoning is not an action."""
    return _THINK_RE.sub("", text)


def parse_text_actions(content: str | None) -> list[Action]:
    """Exactly one fenced ```bash block -> one Action. Zero or several -> FormatError (without response)."""
    blocks = _FENCE_RE.findall(strip_reasoning(content or ""))
    if not blocks:
        raise FormatError("No ```bash block found in the response. Reply with exactly one fenced ```bash "
                          "block containing the command to run.")
    if len(blocks) > 1:
        raise FormatError(f"Found {len(blocks)} ```bash blocks in the response; exactly one is allowed per "
                          "response.")
    command = blocks[0].strip("\n")
    if not command.strip():
        raise FormatError("The ```bash block is empty. Put the command to run inside it.")
    return [Action(command=command, tool_call_id=None)]


def parse_tool_call_actions(tool_calls: list[dict[str, Any]] | None) -> list[Action]:
    """Every tool call must be `bash` with a JSON object holding a non-empty string `command`."""
    if not tool_calls:
        raise FormatError("No tool calls found in the response. Every response must call the bash tool.")
    actions: list[Action] = []
    for i, call in enumerate(tool_calls):
        fn = call.get("function") or {}
        name = fn.get("name")
        if name != "bash":
            raise FormatError(f"Unknown tool {name!r} in tool call {i}: only the 'bash' tool exists.")
        raw = fn.get("arguments")
        if isinstance(raw, dict):
            args = raw
        else:
            try:
                args = json.loads(raw or "")
            except (TypeError, ValueError) as exc:
                raise FormatError(f"The arguments of bash tool call {i} are not valid JSON ({exc}): "
                                  f"{str(raw)[:200]!r}") from None
        if not isinstance(args, dict):
            raise FormatError(f"The arguments of bash tool call {i} must be a JSON object with a 'command' "
                              "string.")
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise FormatError(f"Bash tool call {i} has no non-empty 'command' string argument.")
        extra = sorted(set(args) - {"command"})
        if extra:
            raise FormatError(f"Bash tool call {i} has unknown arguments {extra}: only 'command' exists.")
        actions.append(Action(command=command, tool_call_id=call.get("id")))
    return actions


def normalize_tool_calls(tool_calls: list[dict[str, Any]] | None, turn_tag: str) -> list[dict[str, Any]]:
    """OpenAI-shaped tool calls with an id each (some servers omit ids; observations need them)."""
    out = []
    for i, call in enumerate(tool_calls or []):
        call = copy.deepcopy(call)
        fn = call.get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, dict):
            args = json.dumps(args)
        out.append({"id": call.get("id") or f"call_{turn_tag}_{i}", "type": call.get("type") or "function",
                    "function": {"name": fn.get("name"), "arguments": args if args is not None else ""}})
    return out


def build_response(content: str | None, tool_calls: list[dict[str, Any]] | None, *, tool_mode: str,
                   usage: dict[str, int | None], latency_s: float, finish_reason: str | None,
                   attempts: int = 1, reasoning: str | None = None, model: str | None = None,
                   turn_tag: str = "0") -> ModelResponse:
    """Assemble a ModelResponse and parse its actions; raise FormatError carrying it when none is valid."""
    message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    calls = normalize_tool_calls(tool_calls, turn_tag)
    if calls:
        message["tool_calls"] = calls
    response = ModelResponse(message=message, actions=[], usage=usage, latency_s=latency_s,
                             raw_finish_reason=finish_reason, attempts=attempts, reasoning=reasoning, model=model)
    try:
        if tool_mode == "tools":
            response.actions = parse_tool_call_actions(calls)
        elif tool_mode == "text":
            if calls:  # a text-mode turn must not carry tool calls: nothing would answer their ids
                raise FormatError("Tool calls are not available on this endpoint; reply with exactly one "
                                  "fenced ```bash block instead.")
            response.actions = parse_text_actions(content)
        else:
            raise ValueError(f"tool_mode must be one of {TOOL_MODES}, got {tool_mode!r}")
    except FormatError as exc:
        error = exc.error
        if finish_reason == "length":
            error += " (The response was cut off at the output-token limit.)"
        raise FormatError(error, response) from None
    return response


def with_text_instructions(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `messages` whose system message ends with the text-action instructions."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        base = out[0].get("content") or ""
        out[0]["content"] = f"{base}\n\n{TEXT_ACTION_INSTRUCTIONS}" if base else TEXT_ACTION_INSTRUCTIONS
    else:
        out.insert(0, {"role": "system", "content": TEXT_ACTION_INSTRUCTIONS})
    return out


class ChatModel(ABC):
    """What an agent loop needs from a model: one `query` per turn, and a manifest entry.

    Subclasses set `tool_mode`. `observation_messages` and `format_error_messages` shape the replies so
    that the loop does not need to know the mode.
    """

    tool_mode: str = "tools"
    context_window: int | None = None   # the model's own window in tokens, where known (the loop stops there)
    reply_tokens: int | None = None     # the most tokens one reply may take, where known

    @abstractmethod
    def query(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None) -> ModelResponse:
        """One turn. `tools=None` means the bash tool. Raises FormatError or ModelError."""

    @abstractmethod
    def serialize(self) -> dict[str, Any]:
        """Manifest entry: everything that identifies the model and its settings; never a credential."""

    def observation_messages(self, actions: list[Action], outputs: list[str]) -> list[dict[str, Any]]:
        """Tool messages answering each tool call (tools mode) or one user message (text mode)."""
        if len(actions) != len(outputs):
            raise ValueError(f"{len(actions)} actions but {len(outputs)} outputs")
        if all(a.tool_call_id for a in actions) and actions:
            return [{"role": "tool", "tool_call_id": a.tool_call_id, "content": o} for a, o in zip(actions, outputs)]
        return [{"role": "user", "content": "\n\n".join(outputs)}]

    def format_error_messages(self, exc: FormatError) -> list[dict[str, Any]]:
        """Messages to append after a format error: `exc.message` then Listing 3 as a user message."""
        out = [exc.message] if exc.message else []
        out.append({"role": "user", "content": format_error_text(exc.error)})
        return out
