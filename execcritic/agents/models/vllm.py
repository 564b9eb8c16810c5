"""Launch lines for the paper's GPU inference servers: vLLM (evaluation) and SGLang (RL rollouts).

Both serve an OpenAI-compatible `/v1/chat/completions` that `OpenAIChatModel` talks to. Building the
argv is pure and tested here; running it needs the GPU-only wheels (vLLM 0.33.0, SGLang 0.5.23 were the
versions read for these flags), which are never installed on the CPU machines. Flags for
Qwen3.5-35B-A3B follow the vLLM recipe and the training-stack notes: TP 2 with expert parallelism, 65,536
context, Qwen3-coder tool parser, Qwen3 reasoning parser, language model only (no vision tower), prefix
caching. Confirm parser names with `vllm serve --help` for the version you install.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from execcritic.errors import EnvironmentMissing

PAPER_SERVED_NAME = "qwen3.5-35b-a3b"
VLLM_INSTALL = "pip install vllm==0.33.0  # on a CUDA machine; GPU-only wheel"
SGLANG_INSTALL = "pip install 'sglang==0.5.23'  # on a CUDA machine; GPU-only wheel"


def _positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


@dataclass(frozen=True)
class VLLMServeConfig:
    """`vllm serve` for the paper's model. Defaults are the paper's evaluation setting."""

    model: str
    served_model_name: str | None = PAPER_SERVED_NAME
    tensor_parallel_size: int = 2
    data_parallel_size: int = 1
    enable_expert_parallel: bool = True
    max_model_len: int = 65_536
    tool_call_parser: str | None = "qwen3_coder"
    reasoning_parser: str | None = "qwen3"
    language_model_only: bool = True
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return asdict(self)


def vllm_command(cfg: VLLMServeConfig) -> list[str]:
    """The `vllm serve ...` argv."""
    if not cfg.model:
        raise ValueError("vllm: --model (a local checkpoint path or hub id) is required")
    _positive("tensor_parallel_size", cfg.tensor_parallel_size)
    _positive("data_parallel_size", cfg.data_parallel_size)
    argv = ["vllm", "serve", cfg.model]
    if cfg.served_model_name:
        argv += ["--served-model-name", cfg.served_model_name]
    argv += ["--tensor-parallel-size", str(cfg.tensor_parallel_size)]
    if cfg.data_parallel_size > 1:
        argv += ["--data-parallel-size", str(cfg.data_parallel_size)]
    if cfg.enable_expert_parallel:
        argv += ["--enable-expert-parallel"]
    argv += ["--max-model-len", str(cfg.max_model_len)]
    if cfg.tool_call_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", cfg.tool_call_parser]
    if cfg.reasoning_parser:
        argv += ["--reasoning-parser", cfg.reasoning_parser]
    if cfg.language_model_only:
        argv += ["--language-model-only"]
    if cfg.enable_prefix_caching:
        argv += ["--enable-prefix-caching"]
    if cfg.gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", str(cfg.gpu_memory_utilization)]
    argv += ["--host", cfg.host, "--port", str(cfg.port)]
    argv += list(cfg.extra_args)
    return argv


@dataclass(frozen=True)
class SGLangServeConfig:
    """`python -m sglang.launch_server` for the paper's model (its RL rollout engine)."""

    model: str
    served_model_name: str | None = PAPER_SERVED_NAME
    tp_size: int = 2
    dp_size: int = 1
    ep_size: int = 1
    enable_dp_attention: bool = False
    context_length: int = 65_536
    tool_call_parser: str | None = "qwen3_coder"
    reasoning_parser: str | None = "qwen3"
    mem_fraction_static: float | None = 0.7  # Tables 7c/8c: static memory fraction 0.7
    host: str = "127.0.0.1"
    port: int = 30000
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def test_agent_rollout(cls, model: str, **kw) -> SGLangServeConfig:
        """Table 7c: one GPU per engine."""
        return cls(model=model, **{"tp_size": 1, **kw})

    @classmethod
    def repair_rollout(cls, model: str, **kw) -> SGLangServeConfig:
        """Table 8c: two GPUs per engine, DP-attention with DP 2 and EP 2 (the notes: avoids the Qwen3.5
        GDN weight-sync mis-sharding seen with plain engine TP > 1)."""
        return cls(model=model, **{"tp_size": 2, "dp_size": 2, "ep_size": 2, "enable_dp_attention": True, **kw})

    def to_dict(self) -> dict:
        return asdict(self)


def sglang_command(cfg: SGLangServeConfig, python: str = "python") -> list[str]:
    """The `python -m sglang.launch_server ...` argv."""
    if not cfg.model:
        raise ValueError("sglang: --model (a local checkpoint path or hub id) is required")
    for name in ("tp_size", "dp_size", "ep_size"):
        _positive(name, getattr(cfg, name))
    if cfg.enable_dp_attention and cfg.dp_size < 2:
        raise ValueError("sglang: --enable-dp-attention needs --dp >= 2")
    argv = [python, "-m", "sglang.launch_server", "--model-path", cfg.model]
    if cfg.served_model_name:
        argv += ["--served-model-name", cfg.served_model_name]
    argv += ["--tp-size", str(cfg.tp_size)]
    if cfg.dp_size > 1:
        argv += ["--dp-size", str(cfg.dp_size)]
    if cfg.ep_size > 1:
        argv += ["--ep-size", str(cfg.ep_size)]
    if cfg.enable_dp_attention:
        argv += ["--enable-dp-attention"]
    argv += ["--context-length", str(cfg.context_length)]
    if cfg.tool_call_parser:
        argv += ["--tool-call-parser", cfg.tool_call_parser]
    if cfg.reasoning_parser:
        argv += ["--reasoning-parser", cfg.reasoning_parser]
    if cfg.mem_fraction_static is not None:
        argv += ["--mem-fraction-static", str(cfg.mem_fraction_static)]
    argv += ["--host", cfg.host, "--port", str(cfg.port)]
    argv += list(cfg.extra_args)
    return argv


def shell_line(argv: list[str]) -> str:
    return shlex.join(argv)


def resolve_vllm(argv: list[str]) -> list[str]:
    """argv with `vllm` resolved to an installed executable; EnvironmentMissing (with the install line)
    when there is none."""
    exe = shutil.which("vllm") or (str(Path(sys.executable).parent / "vllm")
                                   if (Path(sys.executable).parent / "vllm").exists() else None)
    if exe is None:
        raise EnvironmentMissing("vllm is not installed here (it needs a CUDA GPU). Install it on the GPU "
                                 f"machine with `{VLLM_INSTALL}`, or use --print to get the command.")
    return [exe] + argv[1:]


def resolve_sglang(argv: list[str]) -> list[str]:
    if importlib.util.find_spec("sglang") is None:
        raise EnvironmentMissing("sglang is not installed here (it needs a CUDA GPU). Install it on the GPU "
                                 f"machine with `{SGLANG_INSTALL}`, or use --print to get the command.")
    return [sys.executable] + argv[1:]


def exec_server(argv: list[str]) -> None:  # pragma: no cover - replaces the process
    """Replace this process with the server (signals and exit status go straight to it)."""
    os.execvp(argv[0], argv)
