"""`run_units`: a unit that raises is recorded with its error and listed; a model endpoint that stays down
(ModelUnavailable) stops the run instead of failing every remaining unit the same way."""

from __future__ import annotations

import json
import threading

from execcritic.agents.models.base import ModelUnavailable
from execcritic.pipeline.records import RecordStore
from execcritic.pipeline.workers import Unit, run_units


def test_errored_units_are_listed_and_the_others_recorded(tmp_path):
    store = RecordStore(tmp_path / "r.jsonl")

    def fn(n):
        if n == 2:
            raise ValueError("bad row 2\nsecond line")
        return {"n": n}

    s = run_units([Unit(f"u{n}", n) for n in range(4)], fn, store=store, show_progress=False, label="stage")
    assert (s.done, s.errors, s.not_started, s.stopped) == (3, 1, 0, "")
    assert s.failures == [{"key": "u2", "stage": "stage", "error": "ValueError: bad row 2",
                           "record": str(tmp_path / "r.errors.jsonl")}]
    assert json.loads((tmp_path / "r.errors.jsonl").read_text())["key"] == "u2"
    assert sorted(r["key"] for r in store.iter()) == ["u0", "u1", "u3"]


def test_a_persistent_model_outage_stops_the_run(tmp_path):
    calls: list[int] = []
    lock = threading.Lock()

    def fn(n):
        with lock:
            calls.append(n)
        if n >= 1:
            raise ModelUnavailable("model endpoint http://x/v1: gave up after 6 attempts")
        return {"n": n}

    units = [Unit(f"u{n}", n) for n in range(20)]
    s = run_units(units, fn, store=RecordStore(tmp_path / "r.jsonl"), show_progress=False, workers=1)
    assert s.stopped.startswith("stopped after u1: ModelUnavailable")
    assert s.done == 1 and s.errors == 1 and s.not_started == 18 and calls == [0, 1]
    again = run_units(units, lambda n: {"n": n}, store=RecordStore(tmp_path / "r.jsonl"), show_progress=False)
    assert (again.skipped, again.done) == (1, 19)          # the same command continues with the rest


def test_prepare_runs_before_each_unit_and_its_failure_is_the_units(tmp_path):
    """`prepare` (on Ray: the unit's environment on its node) runs before the unit where it runs; a unit whose
    preparation raises is an errored unit, left for a rerun, never a record."""
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()

    def prepare(n):
        with lock:
            seen.append(("prepare", n))
        if n == 1:
            raise OSError("no source serves commit abc")

    def fn(n):
        with lock:
            seen.append(("run", n))
        return {"n": n}

    store = RecordStore(tmp_path / "r.jsonl")
    s = run_units([Unit(f"u{n}", n) for n in range(3)], fn, store=store, show_progress=False, prepare=prepare)
    assert (s.done, s.errors) == (2, 1) and "no source serves commit abc" in s.failures[0]["error"]
    assert sorted(r["key"] for r in store.iter()) == ["u0", "u2"]
    for n in (0, 2):
        assert seen.index(("prepare", n)) < seen.index(("run", n))
    assert ("run", 1) not in seen
