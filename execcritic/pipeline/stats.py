"""The paper's statistics over pipeline records (pure: records in, numbers out).

Every instance stays in every denominator; Repair resolved rates are means over runs; a missing or
invalid official score counts as unresolved and is also reported separately (Appendix A.3).
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Sequence

from execcritic.pipeline.config import PipelineConfig, source_label
from execcritic.pipeline.records import RecordStore, unit_key
from execcritic.tasks.model import Task


def summarize(tasks: Sequence[Task], cfg: PipelineConfig) -> dict[str, Any]:
    """Per Test source: qualified bundles, local passes, and the official resolved rate as the mean over
    runs with every instance in the denominator (a missing or invalid score counts as unresolved and is
    also reported separately)."""
    paths = cfg.paths
    gen = {(r["instance_id"], r["source"]): r for r in RecordStore(paths["generation"]).iter()}
    reps = list(RecordStore(paths["repair"]).iter())
    scores = {r["key"]: r for r in RecordStore(paths["score"]).iter()}
    n = len(tasks)
    out: dict[str, Any] = {"tasks": n, "runs": cfg.runs, "sources": {}}
    for s in cfg.test_sources:
        label = source_label(s)
        per_run = []
        invalid = missing = 0
        for k in range(cfg.runs):
            resolved = 0
            for t in tasks:
                key = unit_key(t.instance_id, label, f"run{k}")
                sc = scores.get(key)
                if sc is None:
                    missing += 1
                elif not sc["valid"]:
                    invalid += 1
                else:
                    resolved += bool(sc["resolved"])
            per_run.append(pct(resolved, n))
        mine = [r for r in reps if r["source"] == label]
        out["sources"][label] = {
            "qualified": sum(1 for t in tasks if gen.get((t.instance_id, label), {}).get("qualified")),
            "resolved_pct_mean": (round(statistics.fmean(per_run), 2)
                                  if per_run and None not in per_run else None),
            "resolved_pct_per_run": per_run,
            "local_pass": sum(r.get("local_status") == "pass" for r in mine),
            "entered_repair": sum(bool(r.get("entered_repair")) for r in mine),
            "official_invalid": invalid, "official_missing": missing,
            "final_reasons": dict(sorted(_count(r.get("final_reason") for r in mine).items())),
        }
    out["revision_turns"] = revision_turn_stats(reps)
    return out


def pct(part: float, whole: int) -> float | None:
    """A percentage, or None where it is undefined (a rate over zero tasks or runs is not 0%)."""
    return round(100.0 * part / whole, 2) if whole else None


def shown(value: float | None, unit: str = "%") -> str:
    """How a person reads a rate: `undefined` where there is nothing to divide by."""
    return "undefined" if value is None else f"{value}{unit}"


def _count(items: Iterable[Any]) -> dict[Any, int]:
    d: dict[Any, int] = {}
    for i in items:
        d[i] = d.get(i, 0) + 1
    return d


def _percentile(sorted_vals: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_vals:
        return 0.0
    pos = (len(sorted_vals) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def revision_turn_stats(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The paper's revision-turn distribution: additional model turns after Round 0, over the repair
    trajectories that entered feedback-guided repair (paper: n=120, mean 13, median 11, p75 17, p90 34,
    35.8% <= 5 turns, 47.5% <= 10 turns)."""
    turns = sorted(float(r["revision_turns"]) for r in records if r.get("entered_repair"))
    if not turns:
        return {"n": 0}
    n = len(turns)
    return {"n": n, "mean": round(statistics.fmean(turns), 2), "median": statistics.median(turns),
            "p75": round(_percentile(turns, 0.75), 2), "p90": round(_percentile(turns, 0.90), 2),
            "share_le_5_pct": round(100.0 * sum(t <= 5 for t in turns) / n, 1),
            "share_le_10_pct": round(100.0 * sum(t <= 10 for t in turns) / n, 1)}
