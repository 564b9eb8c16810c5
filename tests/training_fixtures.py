"""Fixtures for the training tests: the tiny Qwen3.5-MoE (built once per session, offline), a tiny git repo
for real bubblewrap sandboxes, and constrained decoding that makes the random model emit chosen tool calls.

Why constrained decoding: a random-init model never writes a valid tool call, so without it no test would
reach the sandbox. `ForcedTurns` only chooses which token is *sampled* on the turns it covers; the model still
runs, its logits still give the recorded logprobs, and later turns sample freely.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny model, built from seed 0 into a session tmp dir (no download, HF_HUB_OFFLINE=1)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch

    from execcritic.training.tiny_model import ensure_tiny_model

    # One intra-op thread: on 2 shared cores a 64-wide model is several times slower with two competing threads.
    torch.set_num_threads(1)
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def tiny_model(tiny_model_dir):
    """Fresh (model, tokenizer) per test: training tests change the weights in place."""
    from execcritic.training.tiny_model import load_tiny_model

    return load_tiny_model(tiny_model_dir)


@pytest.fixture
def tiny_repo(tmp_path) -> Path:
    """A one-commit git repository (a real clone-like checkout, not a worktree)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "README").write_text("tiny repo for training tests\n")
    env = {**os.environ, **GIT_ENV}
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "init"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True, capture_output=True)
    return repo


def bash_call_text(command: str) -> str:
    """A bash call exactly as the Qwen3.5 template renders it for a message with empty content."""
    return f"<tool_call>\n<function=bash>\n<parameter=command>\n{command}\n</parameter>\n</function>\n</tool_call>"


class ForcedTurns:
    """Logits processor: on the k-th turn that starts, force `turns[k]` (a token-id list, the stop token is
    appended), then sample freely once the list is used up. `None` in `turns` leaves that turn free."""

    def __init__(self, turns: list[list[int] | None], stop_id: int):
        self.turns = list(turns)
        self.stop_id = stop_id
        self.current: list[int] | None = None
        self.started = 0

    def __call__(self, generated: list[int], logits):
        import torch

        if not generated:
            self.current = self.turns[self.started] if self.started < len(self.turns) else None
            if self.current is not None:
                self.current = [*self.current, self.stop_id]
            self.started += 1
        if self.current is None or len(generated) >= len(self.current):
            return logits
        forced = torch.full_like(logits, float("-inf"))
        forced[self.current[len(generated)]] = 0.0
        return forced

    def forced_rest(self, generated: list[int]) -> list[int] | None:
        """The tokens still forced on this turn after `generated` (all determined: `HFPolicy` scores them in one
        forward pass); None on a free turn. Reads state only: `__call__` starts turns."""
        if self.current is None or len(generated) >= len(self.current):
            return None
        return self.current[len(generated):]

    def __repr__(self) -> str:
        return f"ForcedTurns({len(self.turns)} turns)"


def kill_when(argv: Sequence[str], ready: Callable[[], bool], *, cwd: Path, env: dict, log: Path,
              within: float = 400) -> None:
    """Run `argv` in its own process group until `ready()` (e.g. a training checkpoint landed), then SIGKILL that
    group: a training killed part-way, for the resume tests. Fails with the log's tail if the process ends or
    `within` seconds pass first."""
    with log.open("w") as out:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.monotonic() + within
        try:
            while not ready():
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, f"not ready within {within:.0f} s"
                time.sleep(0.5)
            time.sleep(1.0)                               # let the checkpoint's files land
        finally:
            os.killpg(proc.pid, signal.SIGKILL)           # the process group this helper started
            proc.wait()
