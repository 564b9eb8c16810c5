"""The offline Test audit over a task set: Base gate + Gold audit per bundle, Base-to-Gold success.

Q = B*G per instance (Eq. 12); invalid Base or Gold runs count as 0; every instance stays in the
denominator (an instance without a bundle counts as Q = 0 and says why). Bundles come from the
official tests (`oracle`) or from a generation record file (`bundles:<generation.jsonl>`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER, ProtocolConfig
from execcritic.errors import InputError
from execcritic.harness.execute import base_reader
from execcritic.harness.gate import gold_audit
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.pipeline.envs import task_environment
from execcritic.pipeline.records import RecordStore, unit_key
from execcritic.pipeline.stats import pct
from execcritic.pipeline.workers import RunSummary, Unit, run_units
from execcritic.sandbox.base import Limits
from execcritic.tasks.model import Task


@dataclass(frozen=True)
class AuditConfig:
    out: str                          # JSONL records path
    test_source: str = "oracle"       # "oracle" | "bundles:<generation.jsonl>"
    backend: str | None = None
    protocol: ProtocolConfig = PAPER
    repeat: int = 1                   # runs of Base and of Gold per bundle; nodes whose outcome varies are flaky
    hashseed: int | None = None       # PYTHONHASHSEED for every run (replays a recorded one); None: drawn per run


def _bundle_for(task: Task, cfg: AuditConfig, read_base=None):
    if cfg.test_source == "oracle":
        return oracle_bundle(task, read_base=read_base)
    if cfg.test_source.startswith("bundles:"):
        path = cfg.test_source.split(":", 1)[1]
        for r in RecordStore(path).iter():
            if r["instance_id"] == task.instance_id and r.get("qualified") and r.get("bundle"):
                b = r["bundle"]
                return TestBundle(b["test_patch"], b["test_command"], b["test_contract"])
        return None
    raise ValueError(f"unknown test source {cfg.test_source!r}; use 'oracle' or 'bundles:<generation.jsonl>'")


def audit_unit(payload: tuple[Task, AuditConfig]) -> dict[str, Any]:
    task, cfg = payload
    rec: dict[str, Any] = {"instance_id": task.instance_id, "repo": task.repo, "test_source": cfg.test_source}
    env = task_environment(task, cfg.backend)
    with env.open_sandbox(limits=Limits.from_config(cfg.protocol.harness)) as sandbox:
        try:
            bundle = _bundle_for(task, cfg, read_base=base_reader(sandbox))
        except InputError as exc:
            return {**rec, "B": 0, "G": 0, "Q": 0, "miss": "no_bundle", "error": str(exc)[:1000]}
        if bundle is None:
            return {**rec, "B": 0, "G": 0, "Q": 0, "miss": "no_bundle",
                    "error": "no qualified bundle for this instance"}
        runs = [gold_audit(task, bundle, sandbox=sandbox, config=cfg.protocol.harness, hashseed=cfg.hashseed)
                for _ in range(max(1, cfg.repeat))]
    res = runs[0]
    flaky = flaky_nodes(runs)
    B, G = (0, 0) if flaky else (min(r.B for r in runs), min(r.G for r in runs))
    miss = "" if B * G else ("flaky" if flaky else "base_invalid" if not res.base.valid else
                             "base_passed" if not res.B else "gold_invalid" if not res.gold.valid else "gold_failed")

    def brief(ex) -> dict[str, Any]:
        return {"valid": ex.valid, "verdict": ex.verdict.value if ex.verdict else None,
                "failure_kind": ex.failure_kind.value, "diagnostic": ex.diagnostic[:600],
                "nodes": [n.__dict__ for n in ex.nodes][:50], "phases": ex.phases, "duration_s": ex.duration_s,
                # the seed, to replay a run (`--hashseed`; SymPy's RecursionErrors vary even under one seed:
                # results/README.md); prestarted: the run was started ahead of time (harness/prestart.py),
                # prestart_stale: why it could not be
                "hashseed": ex.extra.get("hashseed"), "prestarted": ex.extra.get("prestarted"),
                "prestart_stale": ex.extra.get("prestart_stale"),
                "output_tail": ex.output_tail[-1500:] if miss else ""}  # kept where a miss needs explaining

    out = {**rec, "B": B, "G": G, "Q": B * G, "miss": miss, "bundle_digest": bundle.digest(),
           "environment": env.describe(), "base": brief(res.base), "gold": brief(res.gold)}
    if cfg.repeat > 1:
        out["repeat"] = cfg.repeat
        out["flaky_nodes"] = flaky
        out["runs"] = [{"base": (r.base.failure_kind.value, r.base.extra.get("hashseed")),
                        "gold": (r.gold.failure_kind.value, r.gold.extra.get("hashseed"))} for r in runs]
    return out


def flaky_nodes(runs: Sequence[Any]) -> dict[str, str]:
    """Nodes whose outcome changes across repeated runs of the same side (Base or Gold), with what was seen:
    their verdict depends on something other than the code (a hash seed, timing, the order of runs)."""
    out: dict[str, str] = {}
    for side in ("base", "gold"):
        seen: dict[str, list[str]] = {}
        for r in runs:
            for n in getattr(r, side).nodes:
                seen.setdefault(n.node, []).append(n.outcome)
        for node, outcomes in seen.items():
            if len(set(outcomes)) > 1:
                out[node] = f"{side}: " + ", ".join(outcomes)
    return out


def run_audit(tasks: Sequence[Task], cfg: AuditConfig, **run: Any) -> RunSummary:
    """The audit's units; `run`: how they run (`run_units`' workers, backend, show_progress, ray_address, prepare)."""
    store = RecordStore(cfg.out)
    units = [Unit(unit_key(t.instance_id, cfg.test_source), (t, cfg)) for t in tasks]
    return run_units(units, audit_unit, store=store, label="audit", count=lambda r: {"B": r["B"], "Q": r["Q"]},
                     **run)


def summarize_audit(tasks: Sequence[Task], cfg: AuditConfig) -> dict[str, Any]:
    recs = {r["instance_id"]: r for r in RecordStore(cfg.out).iter() if r["test_source"] == cfg.test_source}
    n = len(tasks)
    q = [recs.get(t.instance_id, {}).get("Q", 0) for t in tasks]
    per_repo: dict[str, dict[str, int]] = {}
    for t in tasks:
        d = per_repo.setdefault(t.repo, {"tasks": 0, "Q": 0})
        d["tasks"] += 1
        d["Q"] += recs.get(t.instance_id, {}).get("Q", 0)
    misses = [{"instance_id": t.instance_id, "miss": recs[t.instance_id]["miss"] if t.instance_id in recs else "not_run",
               "base": (recs.get(t.instance_id) or {}).get("base", {}).get("failure_kind"),
               "gold": (recs.get(t.instance_id) or {}).get("gold", {}).get("failure_kind"),
               "error": (recs.get(t.instance_id) or {}).get("error", "")}
              for t in tasks if recs.get(t.instance_id, {}).get("Q", 0) != 1]
    phases: dict[str, list[float]] = {}
    for r in recs.values():
        for side in ("base", "gold"):
            for k, v in (r.get(side) or {}).get("phases", {}).items():
                phases.setdefault(k, []).append(v)
    return {"tasks": n, "audited": len(recs), "b2g_pct": pct(sum(q), n),
            "B_pct": pct(sum(recs.get(t.instance_id, {}).get("B", 0) for t in tasks), n),
            "miss_kinds": dict(Counter(m["miss"] for m in misses)), "misses": misses, "per_repo": per_repo,
            "check_phase_median_s": {k: round(statistics.median(v), 3) for k, v in phases.items()}}


def audit_path(out_dir: str | Path, source: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source)
    return Path(out_dir) / f"audit_{safe}.jsonl"
