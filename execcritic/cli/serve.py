"""`execcritic serve ...`: model servers for the agents.

`vllm` and `sglang` build the paper's launch line for Qwen3.5-35B-A3B and exec it (GPU machines), or print
it with `--print`; extra flags after `--` are passed through. `local` runs the embedded CPU default
(SmolLM2-135M behind `transformers serve`) in the foreground until Ctrl-C.
"""

from __future__ import annotations

import signal
import threading

import typer

from execcritic.agents.models import vllm as launch
from execcritic.cli.common import JSON_OPTION, emit_json, fail

app = typer.Typer(no_args_is_help=True, help="Model servers: vLLM / SGLang launch lines, the embedded CPU model.")

_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
PRINT_OPTION = typer.Option(False, "--print", metavar="", help="Print the command instead of running it.")


def _emit_or_exec(argv: list[str], resolve, *, print_only: bool, as_json: bool, config: dict) -> None:
    if print_only:
        if as_json:
            emit_json({"argv": argv, "command": launch.shell_line(argv), "config": config})
        else:
            typer.echo(launch.shell_line(argv))
        return
    argv = resolve(argv)
    typer.secho(f"exec: {launch.shell_line(argv)}", err=True)
    launch.exec_server(argv)


@app.command("vllm", context_settings=_EXTRA)
def vllm_cmd(ctx: typer.Context,
             model: str = typer.Option(..., "--model", help="Checkpoint path (or hub id) of the model to serve."),
             served_model_name: str = typer.Option(launch.PAPER_SERVED_NAME, help="Name clients request."),
             tp: int = typer.Option(2, "--tp", help="Tensor-parallel size."),
             dp: int = typer.Option(1, "--dp", help="Data-parallel size."),
             ep: bool = typer.Option(True, "--ep/--no-ep", metavar="", help="Expert parallelism (size TP x DP)."),
             max_model_len: int = typer.Option(65_536, help="Context length."),
             tool_call_parser: str = typer.Option("qwen3_coder", help="Tool-call parser ('' to disable)."),
             reasoning_parser: str = typer.Option("qwen3", help="Reasoning parser ('' to disable)."),
             language_model_only: bool = typer.Option(True, "--language-model-only/--with-vision", metavar=""),
             prefix_caching: bool = typer.Option(True, "--prefix-caching/--no-prefix-caching", metavar=""),
             gpu_memory_utilization: float = typer.Option(None, help="vLLM --gpu-memory-utilization."),
             host: str = typer.Option("127.0.0.1"),
             port: int = typer.Option(8000),
             print_only: bool = PRINT_OPTION,
             as_json: bool = JSON_OPTION) -> None:
    """vLLM OpenAI-compatible server for the paper's evaluation setting."""
    try:
        cfg = launch.VLLMServeConfig(
            model=model, served_model_name=served_model_name or None, tensor_parallel_size=tp,
            data_parallel_size=dp, enable_expert_parallel=ep, max_model_len=max_model_len,
            tool_call_parser=tool_call_parser or None, reasoning_parser=reasoning_parser or None,
            language_model_only=language_model_only, enable_prefix_caching=prefix_caching,
            gpu_memory_utilization=gpu_memory_utilization, host=host, port=port, extra_args=tuple(ctx.args))
        argv = launch.vllm_command(cfg)
    except ValueError as exc:
        fail(exc, as_json)
    _emit_or_exec(argv, launch.resolve_vllm, print_only=print_only, as_json=as_json, config=cfg.to_dict())


@app.command("sglang", context_settings=_EXTRA)
def sglang_cmd(ctx: typer.Context,
               model: str = typer.Option(..., "--model", help="Checkpoint path (or hub id) of the model to serve."),
               preset: str = typer.Option("eval", help="eval (TP 2) | test-rollout (Table 7c: 1 GPU/engine) | "
                                                       "repair-rollout (Table 8c: TP 2, DP-attention DP 2, EP 2)."),
               served_model_name: str = typer.Option(launch.PAPER_SERVED_NAME, help="Name clients request."),
               tp: int = typer.Option(None, "--tp", help="Tensor-parallel size (overrides the preset)."),
               dp: int = typer.Option(None, "--dp", help="Data-parallel size (overrides the preset)."),
               ep: int = typer.Option(None, "--ep", help="Expert-parallel size (overrides the preset)."),
               dp_attention: bool = typer.Option(None, "--dp-attention/--no-dp-attention", metavar=""),
               context_length: int = typer.Option(65_536),
               tool_call_parser: str = typer.Option("qwen3_coder"),
               reasoning_parser: str = typer.Option("qwen3"),
               mem_fraction_static: float = typer.Option(0.7),
               host: str = typer.Option("127.0.0.1"),
               port: int = typer.Option(30000),
               print_only: bool = PRINT_OPTION,
               as_json: bool = JSON_OPTION) -> None:
    """SGLang server (the paper's RL rollout engine)."""
    presets = {"eval": launch.SGLangServeConfig, "test-rollout": launch.SGLangServeConfig.test_agent_rollout,
               "repair-rollout": launch.SGLangServeConfig.repair_rollout}
    if preset not in presets:
        fail(ValueError(f"--preset must be one of {sorted(presets)}, got {preset!r}"), as_json)
    overrides = {k: v for k, v in (("tp_size", tp), ("dp_size", dp), ("ep_size", ep),
                                   ("enable_dp_attention", dp_attention)) if v is not None}
    try:
        cfg = presets[preset](
            model=model, served_model_name=served_model_name or None, context_length=context_length,
            tool_call_parser=tool_call_parser or None, reasoning_parser=reasoning_parser or None,
            mem_fraction_static=mem_fraction_static, host=host, port=port, extra_args=tuple(ctx.args), **overrides)
        argv = launch.sglang_command(cfg)
    except ValueError as exc:
        fail(exc, as_json)
    _emit_or_exec(argv, launch.resolve_sglang, print_only=print_only, as_json=as_json, config=cfg.to_dict())


@app.command("local")
def local_cmd(port: int = typer.Option(None, help="Loopback port (default: a free one)."),
              model_dir: str = typer.Option(None, "--model-dir", help="A local HF checkpoint directory to serve "
                                            "instead of the embedded SmolLM2 (e.g. runs/train/<id>/final)."),
              torch_threads: int = typer.Option(1, "--torch-threads", min=1, max=1024,
                                                help="Torch CPU threads for the server."),
              log: str = typer.Option(None, help="Server log file (default: a temp file)."),
              startup_timeout: float = typer.Option(600.0, help="Seconds to wait for readiness."),
              print_only: bool = PRINT_OPTION,
              as_json: bool = JSON_OPTION) -> None:
    """Embedded CPU model (SmolLM2-135M-Instruct via `transformers serve`) or any local HF checkpoint
    (`--model-dir`; pipeline spec `hf:<dir>`), until Ctrl-C."""
    from execcritic.agents.models.local_server import LocalModelServer  # lazy: torch (cpu-model extra)

    server = LocalModelServer(model_dir, port=port, threads=torch_threads, log_path=log,
                              startup_timeout_s=startup_timeout)
    if print_only:
        argv = server.command()
        if as_json:
            emit_json({"argv": argv, "command": launch.shell_line(argv), "model_dir": str(server.model_dir)})
        else:
            typer.echo(launch.shell_line(argv))
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with server:
        info = {"base_url": server.base_url, "model": server.model_name, "log": str(server.log_path),
                "start_s": server.start_s, "tool_mode": "text"}
        if as_json:
            emit_json(info)
        else:
            typer.echo(f"serving {info['model']}\n  base_url {info['base_url']}  (OpenAI-compatible; use "
                       f"tool_mode='text')\n  ready in {info['start_s']} s, log {info['log']}\nCtrl-C to stop.")
        while not stop.wait(1.0):
            if server.proc is None or server.proc.poll() is not None:
                raise typer.Exit(1)
