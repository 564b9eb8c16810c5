"""`OpenAIChatModel`: the `openai` client against any OpenAI-compatible endpoint.

That covers the paper's setting (vLLM and SGLang servers), hosted APIs and `transformers serve` (the
embedded CPU default). Transient failures (connection errors, timeouts, 408/409/429, 5xx) are retried by the
SDK itself (`max_retries`: exponential backoff with jitter, a server's Retry-After honoured); one that persists
surfaces as `ModelUnavailable` (operational) instead of a format error or a verdict. The API key is read from the
environment when the client is built and lives only inside the SDK client: it is never an attribute of
this object, never in `serialize()`, `repr()` or any response record.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from typing import Any

from execcritic.agents.models.base import (
    BASH_TOOL,
    TOOL_MODES,
    ChatModel,
    ContextWindowExceeded,
    ModelError,
    ModelResponse,
    ModelUnavailable,
    SamplingConfig,
    build_response,
    empty_usage,
    with_text_instructions,
)

_CONTEXT_MARKERS = ("context length", "context_length", "maximum context", "context window", "too many tokens",
                    "prompt is too long", "maximum model length", "max_model_len")


def redact_url(url: str) -> str:
    """Drop user:password@ from a URL before it is recorded anywhere."""
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urllib.parse.urlunsplit(parts)


class OpenAIChatModel(ChatModel):
    """Chat completions with the bash tool (tools mode) or the fenced-block fallback (text mode).

    `api_key_env=None` sends the placeholder key "EMPTY" (local vLLM/SGLang/transformers servers need
    none, and a real key should not be sent to them). `max_retries` counts retries after the first try.
    """

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = "OPENAI_API_KEY",
                 sampling: SamplingConfig | None = None, tool_mode: str = "tools", timeout: float = 600.0,
                 max_retries: int = 5, max_tokens_param: str = "max_tokens",
                 extra_body: dict[str, Any] | None = None, context_window: int | None = None):
        if tool_mode not in TOOL_MODES:
            raise ValueError(f"tool_mode must be one of {TOOL_MODES}, got {tool_mode!r}")
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_param must be 'max_tokens' or 'max_completion_tokens'")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.sampling = sampling or SamplingConfig()
        self.tool_mode = tool_mode
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.max_tokens_param = max_tokens_param
        self.extra_body = dict(extra_body or {})
        self.context_window = context_window
        self.reply_tokens = self.sampling.max_tokens
        self._client: Any = None
        self._turn = 0

    # --- manifest -------------------------------------------------------------------------------
    def serialize(self) -> dict[str, Any]:
        return {
            "class": "OpenAIChatModel",
            "base_url": redact_url(self.base_url),
            "model": self.model,
            "api_key_env": self.api_key_env,  # the variable's name, never its value
            "tool_mode": self.tool_mode,
            "sampling": self.sampling.to_dict(),
            "max_tokens_param": self.max_tokens_param,
            "extra_body": self.extra_body,
            "context_window": self.context_window,
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
        }

    def __repr__(self) -> str:
        return (f"OpenAIChatModel(base_url={redact_url(self.base_url)!r}, model={self.model!r}, "
                f"tool_mode={self.tool_mode!r}, api_key_env={self.api_key_env!r})")

    # --- request --------------------------------------------------------------------------------
    def _get_client(self):
        if self._client is None:
            try:
                import openai  # lazy: serve extra
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ModelError("the 'openai' package is not installed: pip install 'execcritic[serve]'") from exc
            key = (os.environ.get(self.api_key_env) if self.api_key_env else None) or "EMPTY"
            self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout,
                                         max_retries=self.max_retries)
        return self._client

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
                     ) -> dict[str, Any]:
        """The exact keyword arguments given to `chat.completions.create` (pure; used by tests)."""
        body: dict[str, Any] = {"model": self.model}
        if self.tool_mode == "text":
            body["messages"] = with_text_instructions(messages)
        else:
            body["messages"] = list(messages)
            body["tools"] = list(tools) if tools is not None else [BASH_TOOL]
        fields = self.sampling.request_fields()
        if "max_tokens" in fields:
            fields[self.max_tokens_param] = fields.pop("max_tokens")
        body.update(fields)
        extra = {**self.extra_body, **self.sampling.extra_fields()}
        if extra:
            body["extra_body"] = extra
        return body

    def query(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None) -> ModelResponse:
        import openai  # lazy: serve extra

        client = self._get_client()
        body = self.request_body(messages, tools)
        self._turn += 1
        started = time.monotonic()
        try:
            raw = client.chat.completions.with_raw_response.create(**body)
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
            raise ModelUnavailable(f"{self._where()}: gave up after {self.max_retries + 1} attempts in "
                                   f"{time.monotonic() - started:.1f} s: {type(exc).__name__}: "
                                   f"{_error_detail(exc)}") from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        latency = time.monotonic() - started
        return self._to_response(raw.parse(), latency, raw.retries_taken + 1)

    def _status_error(self, exc: Any) -> ModelError:
        """A non-retryable HTTP error, with what to fix."""
        detail = _error_detail(exc)
        if exc.status_code == 400 and any(m in detail.lower() for m in _CONTEXT_MARKERS):
            return ContextWindowExceeded(f"{self._where()}: the conversation exceeds the model's context window "
                                         f"({detail})")
        hints = {
            401: (f"check the API key in ${self.api_key_env}" if self.api_key_env
                  else "the endpoint wants an API key: set api_key_env"),
            403: "the key lacks access to this model",
            404: "check base_url (it usually ends in /v1) and the model name the server serves",
        }
        hint = hints.get(exc.status_code, "the endpoint rejected the request; fix the request settings")
        return ModelError(f"{self._where()}: HTTP {exc.status_code}: {detail} ({hint})")

    def _where(self) -> str:
        return f"model endpoint {redact_url(self.base_url)} (model {self.model!r})"

    def _to_response(self, completion: Any, latency: float, attempts: int) -> ModelResponse:
        choices = getattr(completion, "choices", None) or []
        if not choices or getattr(choices[0], "message", None) is None:
            raise ModelError(f"{self._where()}: the response has no choices/message: {str(completion)[:300]}")
        choice = choices[0]
        msg = choice.message
        usage = empty_usage()
        if getattr(completion, "usage", None) is not None:
            usage = {"prompt_tokens": completion.usage.prompt_tokens,
                     "completion_tokens": completion.usage.completion_tokens}
        tool_calls = None
        if msg.tool_calls:
            tool_calls = [{"id": tc.id, "type": getattr(tc, "type", "function"),
                           "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
                          for tc in msg.tool_calls if getattr(tc, "function", None) is not None]
        extra = getattr(msg, "model_extra", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        return build_response(msg.content, tool_calls, tool_mode=self.tool_mode, usage=usage,
                              latency_s=round(latency, 4), finish_reason=choice.finish_reason, attempts=attempts,
                              reasoning=reasoning, model=getattr(completion, "model", None) or self.model,
                              turn_tag=str(self._turn))


def _error_detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(body.get("detail"), str):
            return body["detail"][:500]
    return str(exc)[:500]
