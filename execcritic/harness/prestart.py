"""Runs started ahead of time: the next `execute` in a sandbox finds its interpreter already started.

About half of a short pytest run is starting Python and importing pytest, before any test code. None of it
depends on the patches, so after a pytest run `offer` resets the sandbox to Base and starts the same command
at once (`spawn(reset=True)`: Docker does both in one exec, in the background); the reporter connects, imports
the runner, records that it is ready and waits (reporter/__init__.py `arm`). The next `execute` with the same
command in the untouched sandbox (`generation` unchanged) skips its reset (the tree is Base), applies the
patches, judges the tree, and `go` hands the reporter the run's facts; from there on the run is the cold
one's: same command line, environment and hash seed (drawn at `offer`, recorded), same reporter checks, the
timeout counted from the go.

Why the code under test cannot use it: before the go only the interpreter's start, the harness's reporter
and the runner's import from the environment may run; a candidate's code first runs after the go, as in a cold
run. Code of the checkout run before the go (the runner is the product: pytest-dev/pytest; a dependency of
pytest is; or a module of the candidate's, reached by an early import while the patches were being applied)
may be the Base's, and ran before the reporter knew the candidate's files: the reporter then records `stale`
(modules of the checkout in sys.modules, and any code object of the checkout that executed) and exits before
the go's facts are used, and `execute` reruns cold and stops offering in that sandbox. Anything the early
interpreter wrote into the tree shows in the tree check after the patches.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from execcritic.errors import SandboxError
from execcritic.harness.reporter.channel import ReporterChannel, sandbox_facts
from execcritic.sandbox.base import Sandbox


@dataclass
class Prestarted:
    observed: str             # the observed command the run was started for (matched on take)
    runner: str
    hashseed: int
    command: str              # the instrumented text started (with its seed)
    channel: ReporterChannel
    spawned: object           # the backend's spawned run: .wait(timeout), .kill(), .alive()
    generation: int           # the sandbox's generation right after the start

    def end(self) -> None:
        self.spawned.kill()         # (closes the channel)


_held: "weakref.WeakKeyDictionary[Sandbox, Prestarted]" = weakref.WeakKeyDictionary()
_refused: "weakref.WeakKeyDictionary[Sandbox, str]" = weakref.WeakKeyDictionary()


def offer(sandbox: Sandbox, *, observed: str, runner: str, command: str, hashseed: int) -> bool:
    """Reset `sandbox` and start `command` (the instrumented text of `observed`, seeded `hashseed`) for the
    next run. False where the sandbox cannot, or no longer may."""
    discard(sandbox)
    if not sandbox.can_spawn or sandbox.channel_dir is None or sandbox in _refused:
        return False
    channel = ReporterChannel(sandbox.channel_dir, {**sandbox_facts(sandbox), "runner": runner}, prestart=True)
    try:
        spawned = sandbox.spawn(command, env=channel.env, reset=True, reporter=True)
    except BaseException:
        channel.close()
        raise
    spawned.on_kill.append(channel.close)       # whoever kills it (a reset, close())
    _held[sandbox] = Prestarted(observed, runner, hashseed, command, channel, spawned, sandbox.generation)
    return True


def claim(sandbox: Sandbox) -> Prestarted | None:
    """The run started ahead of time in `sandbox`, if nothing has happened to the sandbox since (its tree
    is then the Base `offer` reset it to), now the caller's to release or `end`; else None."""
    p = _held.pop(sandbox, None)
    if p is None:
        return None
    try:
        usable = sandbox.generation == p.generation and p.spawned.alive()
    except SandboxError:     # the reset it was started after failed: the caller resets (and reports) itself
        usable = False
    if not usable:
        p.end()
        return None
    return p


def matches(p: Prestarted, *, observed: str, runner: str, hashseed: int | None) -> bool:
    """Was `p` started for this command (and seed, when one is asked for)?"""
    return p.observed == observed and p.runner == runner and (hashseed is None or hashseed == p.hashseed)


def discard(sandbox: Sandbox) -> None:
    p = _held.pop(sandbox, None)
    if p is not None:
        p.end()


def refuse(sandbox: Sandbox, why: str) -> None:
    """Offer nothing more in `sandbox` (its runner imports code of the checkout)."""
    discard(sandbox)
    _refused[sandbox] = why


def wait_ready(sandbox: Sandbox, timeout: float = 30.0) -> bool:
    """Block until the held run's reporter says it is ready (benchmarks: the idle time between two checks)."""
    p = _held.get(sandbox)
    return p is not None and p.channel.ready(timeout)
