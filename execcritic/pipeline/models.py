"""Model specs: one string names how to get a ChatModel, so configs and records stay plain data.

  openai:<base_url>#<model>[?key_env=VAR&max_tokens=N]
                                   OpenAI-compatible endpoint, bash tool via function calling
  openai-text:<base_url>#<model>   same endpoint, one fenced ```bash block per turn (no tool calls)
  local                            the embedded CPU default (SmolLM2-135M-Instruct behind
                                   `transformers serve`), started once by the driver and rewritten
                                   to an `openai-text:` spec before work is dispatched
  hf:<checkpoint dir>              any local HF checkpoint (e.g. a trained `runs/train/<id>/final`),
                                   served the same way as `local` (`transformers serve`, text mode)
  scripted:<module or file.py>:<factory>
                                   a deterministic scripted stand-in, factory(task, role, run_index) -
                                   e.g. scripted:tests/scripted_policies.py:wrong_then_gold. The
                                   factory gets the full task (it lives with the tests, not the agents)

API keys come from the environment (OPENAI_API_KEY by default, or `?key_env=NAME` appended to the
spec); they are never part of a spec or a record.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from execcritic import cancel
from execcritic.agents.models.base import ChatModel, SamplingConfig
from execcritic.errors import InputError
from execcritic.tasks.model import Task


def _split(spec: str) -> tuple[str, str, dict[str, str]]:
    body, _, query = spec.partition("?")
    options = dict(part.partition("=")[::2] for part in query.split("&") if part) if query else {}
    unknown = set(options) - {"key_env", "max_tokens", "context_window"}
    if unknown:
        raise InputError(f"model spec {spec!r}: unknown option(s) {sorted(unknown)}; known: key_env, max_tokens, "
                         "context_window", field="model")
    for name in ("max_tokens", "context_window"):
        if name in options and not (options[name].isdigit() and int(options[name]) > 0):
            raise InputError(f"model spec {spec!r}: {name} must be a positive integer, got {options[name]!r}",
                             field="model")
    base, sep, model = body.partition("#")
    if not sep or not model:
        raise InputError(f"model spec {spec!r} needs '#<model name>' after the base URL", field="model")
    return base, model, options


def validate_spec(spec: str, *, field: str = "model") -> str:
    """Check a model spec without contacting anything (a scripted factory is imported to check it
    exists); returns the spec. Raises an InputError naming `field` and what is wrong."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"model spec must be a non-empty string, got {spec!r}", field=field)
    if spec == "local":
        return spec
    if spec.startswith("hf:"):
        checkpoint_dir(spec, field=field)
        return spec
    if spec.startswith("scripted:"):
        parts = spec.split(":", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise InputError(f"model spec {spec!r}: expected scripted:<module or file.py>:<factory>", field=field)
        try:
            fn = getattr(_load_module(parts[1]), parts[2])
        except (ImportError, AttributeError, OSError) as exc:
            raise InputError(f"model spec {spec!r}: cannot load the scripted policy ({exc})", field=field) from None
        if not callable(fn):
            raise InputError(f"model spec {spec!r}: {parts[2]} is not a factory", field=field)
        return spec
    for prefix in ("openai-text:", "openai:"):
        if spec.startswith(prefix):
            try:
                base, _, _ = _split(spec[len(prefix):])
            except InputError as exc:
                raise InputError(exc.message, file=exc.file, field=field) from None
            if not base.startswith(("http://", "https://")):
                raise InputError(f"model spec {spec!r}: the base URL must start with http:// or https://",
                                 field=field)
            return spec
    raise InputError(f"unknown model spec {spec!r}; use openai:<url>#<model>, openai-text:<url>#<model>, "
                     "local, hf:<checkpoint dir>, or scripted:<module>:<factory>", field=field)


def split_endpoint(spec: str) -> tuple[str, str, str | None] | None:
    """(base URL, model name, API-key variable) of an `openai:`/`openai-text:` spec; None for other kinds."""
    for prefix in ("openai-text:", "openai:"):
        if spec.startswith(prefix):
            base, model, options = _split(spec[len(prefix):])
            return base.rstrip("/"), model, options.get("key_env") or None
    return None


def checkpoint_dir(spec: str, *, field: str = "model") -> Path:
    """The directory of an `hf:<dir>` spec (a trained checkpoint: `execcritic train` prints it as
    `final_checkpoint`); an InputError naming the directory when it holds no HF checkpoint."""
    model_dir = Path(spec[3:])
    if not spec[3:].strip() or not (model_dir / "config.json").is_file():
        raise InputError(f"model spec {spec!r}: not a HF checkpoint directory (no config.json)",
                         file=str(model_dir), field=field)
    return model_dir


def make_model(spec: str, *, task: Task, role: str, run_index: int = 0, sampling: SamplingConfig | None = None
               ) -> ChatModel:
    if spec.startswith("scripted:"):
        try:
            _, module, factory = spec.split(":", 2)
            fn = getattr(_load_module(module), factory)
        except (ValueError, ImportError, AttributeError, OSError) as exc:
            raise InputError(f"cannot load scripted policy {spec!r}: {exc}", field="model") from exc
        return fn(task, role, run_index)
    for prefix, mode in (("openai-text:", "text"), ("openai:", "tools")):
        if spec.startswith(prefix):
            from execcritic.agents.models.openai_model import OpenAIChatModel  # lazy: openai (serve extra)

            base, model, options = _split(spec[len(prefix):])
            if "max_tokens" in options:
                sampling = dataclasses.replace(sampling or SamplingConfig(), max_tokens=int(options["max_tokens"]))
            window = int(options["context_window"]) if options.get("context_window") else None
            return OpenAIChatModel(base, model, tool_mode=mode, sampling=sampling,
                                   api_key_env=options.get("key_env") or None, context_window=window)
    if spec == "local" or spec.startswith("hf:"):
        raise InputError(f"the {spec!r} model must be started by the driver (use `served_specs`)", field="model")
    raise InputError(f"unknown model spec {spec!r}; use openai:<url>#<model>, openai-text:<url>#<model>, "
                     "local, or scripted:<module>:<factory>", field="model")


def _load_module(name: str):
    """A module by dotted name, or by file path (`tests/scripted_policies.py`, relative to the cwd)."""
    if name.endswith(".py") or "/" in name:
        path = Path(name).resolve()
        spec = importlib.util.spec_from_file_location(f"execcritic_scripted_{path.stem}", path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ImportError(f"no Python file at {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


LOCAL_MAX_TOKENS = 128


def is_served_locally(spec: str | None) -> bool:
    """`local` and `hf:<dir>` are served by the suite itself (a `transformers serve` process per spec)."""
    return spec == "local" or (spec or "").startswith("hf:")


@contextmanager
def served_specs(*specs: str | None) -> Iterator[list[str | None]]:
    """Start one `transformers serve` process per locally served spec ('local': the embedded SmolLM2;
    'hf:<dir>': that checkpoint); yield the specs rewritten to their `openai-text:` endpoints."""
    wanted = list(dict.fromkeys(s for s in specs if s and is_served_locally(s)))
    if not wanted:
        yield list(specs)
        return
    from execcritic.agents.models.local_server import LocalModelServer  # lazy: torch (cpu-model extra)

    with ExitStack() as stack:
        served: dict[str, str] = {}
        for spec in wanted:
            model_dir = checkpoint_dir(spec) if spec.startswith("hf:") else None
            server = cancel.track(stack.enter_context(LocalModelServer(model_dir)), "stop")   # (ended at Ctrl-C)
            url = f"http://{server.host}:{server.port}/v1"
            # small CPU models have small windows: cap replies (a recorded deviation from the 8,192 budget)
            # and stop a conversation at the model's window (`transformers serve` does not refuse; it degrades)
            served[spec] = (f"openai-text:{url}#{server.model_name}?max_tokens={LOCAL_MAX_TOKENS}"
                            f"&context_window={server.context_window()}")
        yield [served.get(s, s) if s else s for s in specs]
