"""One small Sandbox interface for every backend (local bubblewrap, Docker).

Conventions every backend keeps, so that commands are identical across backends:
- the repository is at `/testbed` inside the sandbox (`WORKDIR`), prepared Base state;
- `/tmp` is private to the sandbox and persists across `run` calls until `reset()`;
- `run` executes one `bash -c` script in `cwd` (default /testbed) after the environment's activation
  prelude, with stdout and stderr merged, under a wall-clock limit enforced by the sandbox itself;
  `timed_out` and `oom_killed` are flags the sandbox sets from its own accounting - never inferred
  from output text;
- `reset()` restores the prepared Base state exactly: the tree as the environment build left it,
  generated files included (a plain `git clean -fdx` would delete build outputs; `git clean -fd`
  leaves ignored caches behind), and an empty /tmp.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

from execcritic.config import PAPER, HarnessConfig

WORKDIR = "/testbed"
# Read-only harness files every sandbox carries, and the directory through which the harness's results
# reporter talks to the harness (execcritic/harness/reporter/). Paths inside the sandbox.
HARNESS_FILES = Path(__file__).resolve().parents[1] / "harness" / "reporter" / "inside"
HARNESS_MOUNT = "/.execcritic/reporter"
CHANNEL_MOUNT = "/.execcritic/chan"
MAX_OUTPUT_BYTES = PAPER.harness.output_limit_bytes  # a run's captured output is capped (head + tail kept)


@dataclass(frozen=True)
class Limits:
    """What every run in a sandbox may use. The sandbox enforces each limit itself and reports hitting
    one as a flag on the CommandResult (never inferred from output). None = not limited."""

    memory_mb: int | None = None
    pids: int | None = None
    output_bytes: int = MAX_OUTPUT_BYTES

    @classmethod
    def from_config(cls, cfg: HarnessConfig) -> "Limits":
        return cls(cfg.memory_limit_mb, cfg.pids_limit, cfg.output_limit_bytes)


@dataclass(frozen=True)
class CommandResult:
    exit_code: int            # process exit status; 128+N style or -N when killed by signal N
    output: str               # stdout and stderr merged, decoded with errors="replace"
    timed_out: bool           # the sandbox's wall-clock limit fired and it killed the command
    oom_killed: bool          # the sandbox's memory limit killed a process of the command
    duration_s: float
    truncated: bool = False   # output exceeded the output limit; the middle was dropped
    isolated: bool = True     # False only when run by an explicitly requested plain-subprocess mode
    pids_limited: bool = False  # the process limit refused a fork during the command

    def to_dict(self) -> dict:
        return asdict(self)


class Sandbox(ABC):
    backend: str = "abstract"
    isolated: bool = True     # False only for an explicitly requested plain-subprocess mode
    workdir: str = WORKDIR
    channel_dir: Path | None = None   # host dir seen read-only at CHANNEL_MOUNT (the reporter's sockets)
    # where `can_spawn`: bumped by everything that may change the sandbox (runs, writes, resets, spawns), so
    # that a caller that left it in a known state (harness/prestart.py) can tell nothing happened since
    generation: int = 0
    can_spawn: bool = False           # `spawn` is implemented

    def spawn(self, command: str, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
              reset: bool = False, reporter: bool = False, background: bool = False):
        """Start `command` now, collect it later (`.wait(timeout)` -> CommandResult, `.kill()`, `.alive()`,
        `.foreground()`); `reset=True`: `reset()` first (a backend may do both at once). `background`: at the
        lowest CPU priority until `.foreground()` (it starts while another run goes: it takes only idle CPU),
        where the backend can restore the priority. Only where `can_spawn`."""
        raise NotImplementedError(f"the {self.backend} sandbox cannot start a run ahead of time")

    def twin(self) -> "Sandbox | None":
        """A second sandbox of this configuration over the same prepared Base, made once and closed with this one,
        where one is cheap; None where it is not. harness/prestart.py starts the next check's interpreter there
        while this one's check runs, so that checks made one after another find it started."""
        return None

    @abstractmethod
    def run(self, command: str, *, timeout: float, env: Mapping[str, str] | None = None,
            cwd: str | None = None, stdin: bytes | None = None, reporter: bool = False) -> CommandResult:
        """Run `bash -c command`. Raises SandboxError only when the sandbox itself fails. `reporter`: the
        harness's reporter and its channel directory (`HARNESS_MOUNT`, `CHANNEL_MOUNT`) are visible to this
        run; every other run has no trace of them."""

    @abstractmethod
    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, *, mtime: int | None = None) -> None:
        """Write a file at an absolute sandbox path (under /testbed or /tmp); `mtime` (seconds) pins its
        modification time (default: now)."""

    def write_files(self, files: list[tuple[str, bytes, int, int | None]]) -> None:
        """Write several files at once: (absolute path, data, mode, mtime or None). A backend where each write
        is a round trip (Docker) writes them in one."""
        for path, data, mode, mtime in files:
            self.write_file(path, data, mode, mtime=mtime)

    @abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file at an absolute sandbox path; FileNotFoundError if absent."""

    @abstractmethod
    def changed_paths(self) -> list[str]:
        """Repository-relative paths under the workdir that differ from the prepared Base since the last
        reset (added, changed or deleted files and links). What the gates judge after a patch is applied:
        the tree, not the diff text."""

    @abstractmethod
    def reset(self) -> None:
        """Restore the prepared Base state (tree and /tmp)."""

    @abstractmethod
    def close(self) -> None:
        """Release everything the sandbox holds. Idempotent."""

    def describe(self) -> dict:
        """Facts for manifests: backend, isolation, limits, image/checkout identity."""
        return {"backend": self.backend, "isolated": self.isolated, "workdir": self.workdir}

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
