"""Ctrl-C and SIGTERM stop a run within seconds, from outside the code that runs its units.

A run's units are threads (pipeline/workers.py) that spend their time in sandboxed commands and model calls. On an
interrupt `cancel_all` ends both: every process this one started since the run began (`begin`) - a sandboxed
command and its whole tree, a command started ahead of time - is killed, and again every 0.2 s while the
interrupt stands, so a unit that starts another command meanwhile loses it at once; and the agents' next model
call raises `Cancelled` (agents/loop.py). A unit that was cancelled leaves no record: the same command redoes it.
Processes that existed when the run began (a model server the command started first, a test's fixtures) are not
the run's: their owners stop them. Nothing here touches the harness's own code paths: what a killed command
returned is never recorded (pipeline/workers.py drops every unit still in flight at the interrupt).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

CANCELLED = threading.Event()
_spared: set[int] = set()              # descendants that existed when the run began
_reaper: list[threading.Thread] = []
_closers: dict[int, tuple[weakref.ref, str]] = {}     # id -> (what to end at an interrupt, its method)
T = TypeVar("T")


class Cancelled(Exception):
    """The run was interrupted: this unit of work stops here, unrecorded."""


def raise_if_cancelled(what: str = "this unit of work") -> None:
    if CANCELLED.is_set():
        raise Cancelled(f"interrupted: {what} was cancelled")


def begin() -> None:
    """A run starts: no interrupt stands, and the processes below this one now are not the run's to end."""
    CANCELLED.clear()
    for key, (ref, _) in list(_closers.items()):
        if ref() is None:
            del _closers[key]
    _spared.clear()
    _spared.update(descendants())


def cancel_all() -> None:
    """End the run's work now (module docstring). Idempotent."""
    CANCELLED.set()
    if not any(t.is_alive() for t in _reaper):
        _reaper[:] = [threading.Thread(target=_reap, name="execcritic-cancel", daemon=True)]
        _reaper[0].start()


def track(thing: T, method: str = "close") -> T:
    """End `thing` with `thing.<method>()` at an interrupt: a sandbox whose commands are not processes of this one
    (Docker: they run in the daemon), a model server the run started before its units (their calls in flight
    then fail at once, instead of waiting for a generation). Held weakly: what is gone needs no ending."""
    _closers[id(thing)] = (weakref.ref(thing), method)
    return thing


@contextlib.contextmanager
def cancellable() -> Iterator[None]:
    """A run of work outside `pipeline.workers` (threads of its own): `begin` now, `cancel_all` at a Ctrl-C."""
    begin()
    try:
        yield
    except KeyboardInterrupt:
        cancel_all()
        raise


def _reap() -> None:
    for ref, method in list(_closers.values()):
        thing = ref()
        if thing is not None:
            with contextlib.suppress(Exception):      # (best effort: the owner's own close follows)
                getattr(thing, method)()
    while CANCELLED.is_set():
        kill_run_processes()
        time.sleep(0.2)


def kill_run_processes() -> int:
    """SIGKILL every process started since `begin`; how many there were."""
    victims = descendants() - _spared
    for pid in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(victims)


def descendants(root: int | None = None) -> set[int]:
    """Every process below `root` (this one by default), read from /proc/<pid>/task/<tid>/children (Linux; an
    empty set where /proc cannot say)."""
    out: set[int] = set()
    todo = [root or os.getpid()]
    while todo:
        pid = todo.pop()
        for task in _listdir(Path(f"/proc/{pid}/task")):
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in out:
                    out.add(child)
                    todo.append(child)
    return out


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
