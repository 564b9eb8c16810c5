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

Checks made one after another (a Base gate then Gold, a pool of candidates) come back before an interpreter
started after the previous run is ready. Where the sandbox has a cheap `twin` (an overlay working copy: another
upper layer over the same Base, with its own /tmp, HOME, channel and cgroups), the next run is started there as
the current one begins, in the background (the lowest CPU priority, so that it takes only CPU the current run
leaves idle; back to normal at its go), and the two alternate. Nothing the current run does reaches the other's
files or processes.
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
    generation: int           # `box`'s generation right after the start
    box: Sandbox              # where it was started: the sandbox it was offered for, or that one's twin

    def end(self) -> None:
        self.spawned.kill()         # (closes the channel)


_held: "weakref.WeakKeyDictionary[Sandbox, Prestarted]" = weakref.WeakKeyDictionary()
_refused: "weakref.WeakKeyDictionary[Sandbox, str]" = weakref.WeakKeyDictionary()


def offer(sandbox: Sandbox, *, observed: str, runner: str, command: str, hashseed: int,
          box: Sandbox | None = None, background: bool = False) -> bool:
    """Reset `box` (default `sandbox`; else its twin) and start `command` (the instrumented text of `observed`,
    seeded `hashseed`) there for the next run in `sandbox`; `background` while another run goes (the sandbox's
    `spawn`). False where it cannot, or no longer may."""
    discard(sandbox)
    box = sandbox if box is None else box
    if not box.can_spawn or box.channel_dir is None or sandbox in _refused:
        return False
    channel = ReporterChannel(box.channel_dir, {**sandbox_facts(box), "runner": runner}, prestart=True)
    try:
        spawned = box.spawn(command, env=channel.env, reset=True, reporter=True, background=background)
    except BaseException:
        channel.close()
        raise
    spawned.on_kill.append(channel.close)       # whoever kills it (a reset, close())
    _held[sandbox] = Prestarted(observed, runner, hashseed, command, channel, spawned, box.generation, box)
    return True


def claim(sandbox: Sandbox) -> Prestarted | None:
    """The run started ahead of time for `sandbox` (in it or its twin: `.box`), if nothing has happened to that
    box since (its tree is then the Base `offer` reset it to), now the caller's to release or `end`; else None."""
    p = _held.pop(sandbox, None)
    if p is None:
        return None
    try:
        usable = p.box.generation == p.generation and p.spawned.alive()
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


def waiting_in(sandbox: Sandbox) -> Sandbox | None:
    """The box (`sandbox` or its twin) where the run held for `sandbox` waits, if one is held."""
    p = _held.get(sandbox)
    return p.box if p is not None else None


def wait_ready(sandbox: Sandbox, timeout: float = 30.0) -> bool:
    """Block until the held run's reporter says it is ready (benchmarks: the idle time between two checks)."""
    p = _held.get(sandbox)
    return p is not None and p.channel.ready(timeout)
