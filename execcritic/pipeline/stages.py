"""The paper's evaluation protocol (Appendix A.3) as three resumable stages and their composition.

  generate-tests: one generation episode per (issue, Test source); sources are `oracle` (the official
                  F2P bundle, Base-gated like any other), `none` (no test: Round 0 only) or a model
                  spec (the Test agent). At most one qualified bundle per (issue, source).
  repair:         `repair.runs_per_source` Repair runs per (issue, source) that reuse that one bundle; a
                  Base-gate failure keeps and forwards Round 0.
  score:          a fresh official evaluation of every terminal patch, Round-0 fallbacks included.
Every instance stays in every denominator; the local gate outcome and the official outcome are
recorded separately. Records are append-only JSONL (records.py), units do the I/O (units.py), the
statistics are pure (stats.py). Each stage takes how its units run as `run_units`' keywords (`workers`,
`backend` = the executor, `show_progress`, `ray_address`, `prepare`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from execcritic.files import atomic_write_json
from execcritic.pipeline.config import PipelineConfig, source_label
from execcritic.pipeline.records import RecordStore, unit_key
from execcritic.pipeline.units import generation_unit, repair_unit, score_unit
from execcritic.pipeline.workers import RunSummary, Unit, run_units
from execcritic.results.fingerprint import section_digests
from execcritic.results.manifest import harness_digest
from execcritic.tasks.model import Task


def _count_generation(r: dict) -> dict[str, int]:
    return {"qualified": r.get("qualified", False)}


def _count_repair(r: dict) -> dict[str, int]:
    return {"passed": r.get("local_status") == "pass", "entered": r.get("entered_repair", False)}


def _count_score(r: dict) -> dict[str, int]:
    return {"resolved": r.get("resolved", False), "invalid": not r.get("valid", True)}


def generate_tests(tasks: Sequence[Task], cfg: PipelineConfig, **run: Any) -> RunSummary:
    store = RecordStore(cfg.paths["generation"])
    units = [Unit(unit_key(t.instance_id, source_label(s)), (t, s, cfg)) for t in tasks for s in cfg.test_sources]
    return run_units(units, generation_unit, store=store, label="generate-tests", count=_count_generation,
                     **run)


def _bundles(cfg: PipelineConfig) -> dict[tuple[str, str], dict | None]:
    out: dict[tuple[str, str], dict | None] = {}
    for r in RecordStore(cfg.paths["generation"]).iter():
        out[(r["instance_id"], r["source"])] = r.get("bundle") if r.get("qualified") else None
    return out


def repair(tasks: Sequence[Task], cfg: PipelineConfig, **run: Any) -> RunSummary:
    bundles = _bundles(cfg)
    store = RecordStore(cfg.paths["repair"])
    units = []
    for t in tasks:
        for s in cfg.test_sources:
            label = source_label(s)
            if (t.instance_id, label) not in bundles:
                continue  # generation not finished for this pair; a later resume picks it up
            for k in range(cfg.runs):
                units.append(Unit(unit_key(t.instance_id, label, f"run{k}"),
                                  (t, s, k, bundles[(t.instance_id, label)], cfg)))
    return run_units(units, repair_unit, store=store, label="repair", count=_count_repair, **run)


def score(tasks: Sequence[Task], cfg: PipelineConfig, **run: Any) -> RunSummary:
    by_id = {t.instance_id: t for t in tasks}
    store = RecordStore(cfg.paths["score"])
    units = [Unit(r["key"], (by_id[r["instance_id"]], r["key"], r["final_patch"], cfg))
             for r in RecordStore(cfg.paths["repair"]).iter() if r["instance_id"] in by_id]
    return run_units(units, score_unit, store=store, label="score", count=_count_score, **run)


def run_all(tasks: Sequence[Task], cfg: PipelineConfig, **run: Any) -> dict[str, RunSummary]:
    atomic_write_json(Path(cfg.out_dir) / "run_config.json", cfg.to_dict())
    return {"generate-tests": generate_tests(tasks, cfg, **run), "repair": repair(tasks, cfg, **run),
            "score": score(tasks, cfg, **run)}


def run_fingerprint(stage: str, sections: tuple[str, ...], protocol, *, dataset_sha: str, repair_model: str | None,
                    backend: str | None) -> dict:
    """What makes a stage's records (results.fingerprint): the rows, the protocol sections it reads, the harness
    code, the backend and the Repair model (Repair records are keyed by issue, source and run, not by model).
    Test sources are not in it: each one's records are keyed by it."""
    fp = {"dataset_sha256": dataset_sha, "harness_code": harness_digest(), "backend": backend or "task's own",
          **section_digests(protocol, sections, ignore=("repair.runs_per_source",))}
    if repair_model is not None:
        fp["repair_model"] = repair_model
    return fp


__all__ = ["generate_tests", "repair", "run_all", "run_fingerprint", "score"]
