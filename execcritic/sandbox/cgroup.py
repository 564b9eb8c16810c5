"""One set of cgroups per sandbox: the memory limit (OOM kills counted by the cgroup itself) and the
process limit (a fork bomb hits `pids.max`, never the machine), on cgroup v1 or v2.

Why cgroups and not rlimits: RLIMIT_NPROC counts every process of the user on the machine, and RLIMIT_AS
kills on address space, not memory; a cgroup limits exactly the sandbox's process tree and keeps its own
counters, so "the limit fired" is a fact the sandbox reads, never a guess from the output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


class Cgroups:
    """The cgroups one sandbox's runs are placed in (`procs_files`), with the limits applied."""

    def __init__(self, memory: tuple[int, Path] | None, pids: tuple[int, Path] | None):
        self.memory = memory          # (cgroup version, path) or None
        self.pids = pids

    @classmethod
    def create(cls, name: str, *, memory_mb: int | None, pids: int | None) -> "Cgroups":
        mem = _create("memory", name, lambda v, p: _set_memory(v, p, memory_mb)) if memory_mb else None
        pid = _create("pids", name, lambda v, p: _set_pids(v, p, pids)) if pids else None
        return cls(mem, pid)

    @property
    def paths(self) -> list[Path]:
        out: list[Path] = []
        for entry in (self.memory, self.pids):
            if entry and entry[1] not in out:
                out.append(entry[1])
        return out

    @property
    def procs_files(self) -> list[Path]:
        return [p / "cgroup.procs" for p in self.paths]

    @property
    def label(self) -> str:
        parts = []
        if self.memory:
            parts.append(f"memory:cgroup-v{self.memory[0]}")
        if self.pids:
            parts.append(f"pids:cgroup-v{self.pids[0]}")
        return ",".join(parts) or "none"

    def oom_kills(self) -> int:
        """The memory cgroup's own OOM-kill counter (v1 memory.oom_control / v2 memory.events)."""
        if not self.memory:
            return 0
        version, path = self.memory
        return _counter(path / ("memory.oom_control" if version == 1 else "memory.events"), "oom_kill")

    def pids_refused(self) -> int:
        """How many forks the pids cgroup refused (v1 pids.events / v2 pids.events `max`)."""
        if not self.pids:
            return 0
        return _counter(self.pids[1] / "pids.events", "max")

    def members(self) -> list[int]:
        out: set[int] = set()
        for f in self.procs_files:
            try:
                out.update(int(x) for x in f.read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def kill_all(self, wait: float = 5.0) -> bool:
        """SIGKILL every process in the cgroups until they are empty. False if some survived."""
        deadline = time.monotonic() + wait
        while True:
            pids = self.members()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for path in self.paths:
                killer = path / "cgroup.kill"
                if killer.exists():
                    with contextlib.suppress(OSError):
                        killer.write_text("1")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill_all(wait=2.0)
        for path in self.paths:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _set_memory(version: int, path: Path, memory_mb: int | None) -> None:
    limit = int(memory_mb or 0) * 1024 * 1024
    if version == 1:
        (path / "memory.limit_in_bytes").write_text(str(limit))
        memsw = path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(limit))
        if not (path / "memory.oom_control").exists():
            raise OSError("no memory.oom_control")
    else:
        (path / "memory.max").write_text(str(limit))
        swap = path / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")
        if not (path / "memory.events").exists():
            raise OSError("no memory.events")


def _set_pids(version: int, path: Path, pids: int | None) -> None:
    (path / "pids.max").write_text(str(int(pids or 0)))


def _create(controller: str, name: str, configure) -> tuple[int, Path] | None:
    """A fresh cgroup under our own one for `controller`, configured; None when none is usable."""
    for version, parent in _parents(controller):
        path = parent / name
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError:
            continue
        try:
            configure(version, path)
            return version, path
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
    return None


def _parents(controller: str) -> list[tuple[int, Path]]:
    """Candidate parent dirs for our cgroups: our own v1 `controller` cgroup, then our v2 cgroup."""
    out: list[tuple[int, Path]] = []
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    v1_mount = v2_mount = None
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        if rfields[0] == "cgroup" and controller in rfields[2].split(","):
            v1_mount = v1_mount or fields[4]
        elif rfields[0] == "cgroup2":
            v2_mount = v2_mount or fields[4]
    for line in own:
        hid, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        if v1_mount and controller in ctrls.split(","):
            out.append((1, Path(v1_mount) / path.lstrip("/")))
    for line in own:
        hid, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        if v2_mount and hid == "0" and ctrls == "":
            base = Path(v2_mount) / path.lstrip("/")
            try:
                if controller in (base / "cgroup.subtree_control").read_text().split():
                    out.append((2, base))
            except OSError:
                pass
    return out
