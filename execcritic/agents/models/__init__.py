"""Model backends for the agents: the chat-model interface, the OpenAI-compatible client (vLLM, SGLang,
hosted APIs, `transformers serve`), the embedded CPU default, a scripted stand-in, and GPU launch lines.

Importing this package imports neither `openai` nor `torch`; backends load them when used.
"""

from execcritic.agents.models.base import (
    BASH_TOOL,
    LISTING3_TEMPLATE,
    TEXT_ACTION_INSTRUCTIONS,
    Action,
    ChatModel,
    ContextWindowExceeded,
    FormatError,
    ModelError,
    ModelResponse,
    ModelUnavailable,
    SamplingConfig,
    ScriptExhausted,
    format_error_text,
    parse_text_actions,
    parse_tool_call_actions,
)
from execcritic.agents.models.scripted import ScriptedModel


def __getattr__(name: str):
    # Lazy: keeps `import execcritic.agents.models` free of openai/httpx.
    if name == "OpenAIChatModel":
        from execcritic.agents.models.openai_model import OpenAIChatModel  # lazy: imports openai (serve extra)

        return OpenAIChatModel
    if name == "LocalModelServer":
        from execcritic.agents.models.local_server import LocalModelServer  # lazy: imports torch (cpu-model extra)

        return LocalModelServer
    raise AttributeError(name)


__all__ = [
    "BASH_TOOL", "LISTING3_TEMPLATE", "TEXT_ACTION_INSTRUCTIONS", "Action", "ChatModel", "ContextWindowExceeded",
    "FormatError", "LocalModelServer", "ModelError", "ModelResponse", "ModelUnavailable", "OpenAIChatModel",
    "SamplingConfig", "ScriptExhausted", "ScriptedModel", "format_error_text", "parse_text_actions",
    "parse_tool_call_actions",
]
