"""Run units of work in parallel (threads on one machine, or Ray across many) with live progress.

The driver owns the RecordStore: workers return records, the driver appends them, so a record exists
iff its unit finished. A unit that raises is logged to `<store>.errors.jsonl` and left undone, so a
resume retries it; an operational problem *inside* a unit (timeouts, invalid executions) is part of its
record, not an exception. A model endpoint that stays unavailable (`ModelUnavailable`, after the client's own
retries) stops the run: the units not yet started are left for a rerun instead of each failing the same way.

Ctrl-C (or SIGTERM, which the CLI turns into the same KeyboardInterrupt) stops a run within seconds: the units
not started are dropped, those in flight are cancelled (`execcritic.cancel`: the processes the run started are
killed, and keep being killed; the agents' next model call raises) and given `INTERRUPT_GRACE_S` to unwind (their
`finally`s close the sandboxes), then the interrupt goes on. No unit in flight at the interrupt is recorded, nor
listed as an error: what it returned may come from a killed command. The same command redoes them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from execcritic import cancel
from execcritic.agents.models.base import ModelUnavailable
from execcritic.pipeline.records import RecordStore

# after an interrupt, how long the units in flight get to end (their commands and the run's model servers are
# killed at once; this covers their cleanup, or a model client's retries): the process ends within 10 s of the signal
INTERRUPT_GRACE_S = 5.0
UNIT_THREAD_PREFIX = "execcritic-unit"


def unit_threads_alive() -> list[threading.Thread]:
    """Worker threads of `run_units` still running a unit (after an interrupt: blocked outside any sandbox)."""
    return [t for t in threading.enumerate() if t.name.startswith(UNIT_THREAD_PREFIX) and t.is_alive()]


@dataclass(frozen=True)
class Unit:
    key: str
    payload: Any                    # whatever the unit function needs (picklable for Ray)


@dataclass
class RunSummary:
    total: int = 0
    skipped: int = 0                # already in the store (resume)
    done: int = 0
    errors: int = 0
    counts: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    stage: str = ""
    failures: list = field(default_factory=list)  # {"key", "stage", "error" (first line), "record" (errors file)}
    not_started: int = 0            # left for a rerun after the run stopped (`stopped` says why)
    stopped: str = ""
    nodes: Counter = field(default_factory=Counter)   # Ray: units finished per node ("<hostname> <node id>")

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "skipped": self.skipped, "done": self.done, "errors": self.errors,
                "counts": dict(self.counts), "wall_s": round(self.wall_s, 2), "failures": self.failures,
                "not_started": self.not_started, "stopped": self.stopped,
                **({"nodes": dict(self.nodes)} if self.nodes else {})}

    @property
    def complete(self) -> bool:
        return self.done + self.skipped == self.total


def _describe(label: str, counts: Counter, errors: int) -> str:
    shown = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    return f"{label} [{shown}{' ' if shown else ''}errors={errors}]"


def run_units(units: Sequence[Unit], fn: Callable[[Any], dict[str, Any]], *, store: RecordStore, workers: int = 1,
              backend: str = "threads", label: str = "units", count: Callable[[dict], dict[str, int]] | None = None,
              show_progress: bool = True, ray_address: str | None = None,
              prepare: Callable[[Any], None] | None = None) -> RunSummary:
    """Run the units not yet in `store` and append their records. `prepare(payload)` runs before each unit where
    the unit runs (on a Ray node: what the unit needs on that node, e.g. its task's environment in the node's
    own cache - `preflight.NodeEnvironments`); an exception there is the unit's."""
    summary = RunSummary(total=len(units), stage=label)
    cancel.begin()              # a new run: an interrupt earlier in this process (a notebook, a test) is over
    todo = [u for u in units if u.key not in store]
    summary.skipped = len(units) - len(todo)
    errors_path = store.path.with_suffix(".errors.jsonl")
    started = time.monotonic()
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        disable=not show_progress, transient=False, console=Console(stderr=True))

    def finish(unit: Unit, record: dict | None, exc: BaseException | None, bar) -> None:
        if exc is not None:
            summary.errors += 1
            error = f"{type(exc).__name__}: {exc}"
            with errors_path.open("a") as fh:
                fh.write(json.dumps({"key": unit.key, "error": error,
                                     "traceback": "".join(traceback.format_exception(exc))[-4000:],
                                     "t": time.time()}) + "\n")
            summary.failures.append({"key": unit.key, "stage": label, "error": error.strip().splitlines()[0][:300],
                                     "record": str(errors_path)})
            if isinstance(exc, ModelUnavailable) and not summary.stopped:
                summary.stopped = f"stopped after {unit.key}: {error.splitlines()[0][:300]}"
        else:
            assert record is not None
            record = {**record, "key": unit.key}
            store.append(record)
            summary.done += 1
            if count:
                summary.counts.update({k: int(v) for k, v in count(record).items()})
        progress.update(bar, advance=1, description=_describe(label, summary.counts, summary.errors))

    with progress:
        bar = progress.add_task(_describe(label, summary.counts, 0), total=len(todo))
        if backend == "threads":
            _run_threads(todo, functools.partial(_prepared, fn, prepare), workers, finish, bar, summary)
        elif backend == "ray":
            _run_ray(todo, fn, prepare, workers, finish, bar, ray_address, summary)
        else:
            raise ValueError(f"unknown executor {backend!r}; use 'threads' or 'ray'")
    summary.wall_s = time.monotonic() - started
    return summary


def _prepared(fn: Callable[[Any], dict[str, Any]], prepare: Callable[[Any], None] | None, payload: Any) -> dict:
    if prepare is not None:
        prepare(payload)
    return fn(payload)


def _on_node(fn: Callable[[Any], dict[str, Any]], prepare: Callable[[Any], None] | None,
             payload: Any) -> tuple[str, dict]:
    """A unit as a Ray task: (the node that ran it, its record)."""
    import socket  # lazy: runs on the Ray node

    import ray  # lazy: ray extra

    return f"{socket.gethostname()} {ray.get_runtime_context().get_node_id()[:12]}", _prepared(fn, prepare, payload)


def _run_threads(todo: Sequence[Unit], fn, workers: int, finish, bar, summary: RunSummary) -> None:
    """At most `workers` units in flight in a thread pool; on KeyboardInterrupt, cancel and re-raise (module
    docstring). The pool is never waited for beyond the grace: a thread blocked outside any sandbox (an HTTP
    call to a model) must not hold the interrupt (the CLI's `main` does not wait for it at exit either)."""
    queue = list(todo)
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=UNIT_THREAD_PREFIX)
    pending: dict = {}

    def settle(fut) -> None:
        unit = pending[fut]
        exc = fut.exception()
        finish(unit, None if exc else fut.result(), exc, bar)
        del pending[fut]                # (after `finish`: an interrupt inside it leaves the unit to the handler)

    interrupted = False
    try:
        while queue or pending:       # at most `workers` in flight: a stop leaves the rest unstarted
            if summary.stopped:
                summary.not_started += len(queue)
                queue = []
            while queue and len(pending) < max(1, workers):
                unit = queue.pop(0)
                pending[pool.submit(fn, unit.payload)] = unit
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                settle(fut)
    except KeyboardInterrupt:
        interrupted = True
        cancel.cancel_all()
        for fut in pending:
            fut.cancel()                # not started yet: never will
        wait(pending, timeout=INTERRUPT_GRACE_S)     # (nothing recorded: module docstring)
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)


def _run_ray(todo: Sequence[Unit], fn, prepare, workers: int, finish, bar, address: str | None,
             summary: RunSummary) -> None:
    """Scale-out path: one Ray task per unit, at most `workers` in flight; results come back to the driver."""
    import ray  # lazy: ray extra

    if not ray.is_initialized():
        ray.init(address=address or None, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(_on_node)
    queue = list(todo)
    inflight: dict[Any, Unit] = {}
    try:
        while queue or inflight:
            if summary.stopped:
                summary.not_started += len(queue)
                queue = []
            while queue and len(inflight) < max(1, workers):
                unit = queue.pop(0)
                inflight[remote.remote(fn, prepare, unit.payload)] = unit
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                unit = inflight.pop(ref)
                try:
                    node, record = ray.get(ref)
                except Exception as exc:  # the unit raised on the worker
                    finish(unit, None, exc, bar)
                else:
                    summary.nodes[node] += 1
                    finish(unit, record, None, bar)
    except KeyboardInterrupt:
        cancel.cancel_all()
        for ref in inflight:          # force: kill the worker processes (their sandboxes die with them)
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
