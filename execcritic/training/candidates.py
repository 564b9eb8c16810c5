"""Labeled candidate pools for Test-agent RL (§4.1: "candidate Repair patches labeled by V*"; §5 setup).

Per instance, a pool of candidate source patches, each labeled by a real run of the official evaluator
(resolved = correct):
- `gold`: the reference patch (officially resolved on a qualified task, but it is labeled like any other);
- `mutant:<kind>`: deterministic Gold mutants (`training.mutants`: near misses, *usually* incorrect - their
  label is never assumed);
- `repair:<model>`: terminal and Round-0 patches of Repair runs read from pipeline run directories
  (`repair.jsonl`), from whatever model produced them.

Candidates are deduplicated by content (the harness's own digest). A candidate whose official evaluation is
operationally invalid gets no label and stays out of the pool (it is recorded, with why). Records are
append-only (`results.records.RecordStore`: a killed build resumes where it stopped, a label is never
computed twice) under `results/candidates/<run_id>/candidates.jsonl`, with `manifest.json`
(`results.manifest.build_manifest`) and `pools.json` (per-instance counts and set membership).

Set membership (§5): the Test RL set keeps instances with at least `test_rl.min_candidates` labeled
candidates; the Repair RL set additionally requires both labels (`*.require_both_labels`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.config import PAPER, ProtocolConfig, RepairRLConfig, TestRLConfig
from execcritic.errors import InputError
from execcritic.evaluation.official import evaluate_official
from execcritic.files import atomic_write_json
from execcritic.harness.gate import LabeledPatch
from execcritic.pipeline.envs import task_environment
from execcritic.pipeline.workers import RunSummary, Unit, run_units
from execcritic.results.manifest import build_manifest, write_result
from execcritic.results.records import RecordStore, unit_key
from execcritic.tasks.model import Task
from execcritic.training.datasets import read_jsonl
from execcritic.training.mutants import gold_mutants

RECORDS = "candidates.jsonl"
POOLS = "pools.json"
KINDS = ("gold", "mutant", "repair")


@dataclass(frozen=True)
class Candidate:
    """An unlabeled candidate: its patch, what kind it is, and where it came from."""

    instance_id: str
    patch: str
    kind: str                    # gold | mutant | repair
    source: str                  # e.g. "gold", "mutant:drop_hunk:0", "repair:<model>:<run dir>:<key>:final"
    description: str = ""

    @property
    def digest(self) -> str:
        return LabeledPatch(self.patch, False).digest


def gold_and_mutants(task: Task, *, mutants: bool = True) -> list[Candidate]:
    out = [Candidate(task.instance_id, task.patch, "gold", "gold", "the reference patch")]
    if mutants:
        for i, m in enumerate(gold_mutants(task.patch)):
            out.append(Candidate(task.instance_id, m.patch, "mutant", f"mutant:{m.kind}:{i}", m.description))
    return out


def _repair_model(run_dir: Path) -> str:
    """The Repair model spec of a pipeline run (its summary.json manifest), or the directory name."""
    try:
        manifest = json.loads((run_dir / "summary.json").read_text())["manifest"]
        return str((manifest.get("model") or {}).get("repair") or run_dir.name)
    except (OSError, ValueError, KeyError, TypeError):
        return run_dir.name


def repair_candidates(run_dir: str | Path, instance_ids: Iterable[str] | None = None) -> list[Candidate]:
    """Terminal (`final_patch`) and Round-0 (`round0.patch`) patches of every Repair record in a pipeline run
    directory. A malformed record is an InputError naming the file, the line and the field."""
    run_dir = Path(run_dir)
    path = run_dir / "repair.jsonl"
    if not path.is_file():
        raise InputError("no repair.jsonl in the pipeline run directory", file=str(path))
    wanted = set(instance_ids) if instance_ids is not None else None
    model = _repair_model(run_dir)
    out: list[Candidate] = []
    for n, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{n}"
        iid = rec.get("instance_id")
        if not isinstance(iid, str) or not iid:
            raise InputError("record has no instance_id", file=where, field="instance_id")
        if wanted is not None and iid not in wanted:
            continue
        final = rec.get("final_patch")
        if not isinstance(final, str):
            raise InputError(f"final_patch must be a string, got {type(final).__name__}", file=where, instance=iid,
                             field="final_patch")
        round0 = rec.get("round0")
        if round0 is not None and not isinstance(round0, dict):
            raise InputError("round0 must be an object", file=where, instance=iid, field="round0")
        key = rec.get("key") or unit_key(iid, rec.get("source"), rec.get("run"))
        for which, patch in (("final", final), ("round0", (round0 or {}).get("patch") or "")):
            if not isinstance(patch, str):
                raise InputError("round0.patch must be a string", file=where, instance=iid, field="round0.patch")
            if patch.strip():
                out.append(Candidate(iid, patch, "repair", f"repair:{model}:{run_dir}:{key}:{which}"))
    return out


def dedupe(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per (instance, content digest); the first source wins, the others are kept as aliases
    in the record (`also`)."""
    seen: dict[tuple[str, str], Candidate] = {}
    for c in candidates:
        if c.patch.strip():
            seen.setdefault((c.instance_id, c.digest), c)
    return list(seen.values())


def label_unit(payload: tuple[Task, Candidate, ProtocolConfig, str | None]) -> dict[str, Any]:
    """One official evaluation of one candidate (the pipeline's unit shape: plain payload in, record out)."""
    task, cand, protocol, backend = payload
    res = evaluate_official(task, cand.patch, task_environment(task, backend), harness=protocol.harness)
    return {"instance_id": cand.instance_id, "digest": cand.digest, "kind": cand.kind, "source": cand.source,
            "description": cand.description, "patch": cand.patch,
            "resolved": res.resolved if res.valid else None, "official_valid": res.valid,
            "official": {k: v for k, v in res.to_dict().items() if k not in ("report", "log_path")}}


# ---- loading a pool run ---------------------------------------------------------------------------

@dataclass
class Pool:
    instance_id: str
    labeled: list[LabeledPatch] = field(default_factory=list)
    unlabeled: list[dict[str, Any]] = field(default_factory=list)   # official invalid: {source, error}

    @property
    def positives(self) -> int:
        return sum(c.resolved for c in self.labeled)

    @property
    def negatives(self) -> int:
        return sum(not c.resolved for c in self.labeled)

    def eligible(self, rl: TestRLConfig | RepairRLConfig) -> bool:
        """§5: enough labeled candidates, and both labels when the set requires them."""
        both = self.positives > 0 and self.negatives > 0
        return len(self.labeled) >= rl.min_candidates and (both or not rl.require_both_labels)

    def to_dict(self, protocol: ProtocolConfig = PAPER) -> dict[str, Any]:
        kinds: dict[str, dict[str, int]] = {}
        for c in self.labeled:
            k = kinds.setdefault(c.source.split(":", 1)[0], {"correct": 0, "incorrect": 0})
            k["correct" if c.resolved else "incorrect"] += 1
        return {"labeled": len(self.labeled), "correct": self.positives, "incorrect": self.negatives,
                "unlabeled": len(self.unlabeled), "by_kind": kinds,
                "test_rl": self.eligible(protocol.test_rl), "repair_rl": self.eligible(protocol.repair_rl)}


_RECORD_FIELDS = {"instance_id": str, "digest": str, "kind": str, "source": str, "patch": str, "official_valid": bool}


def load_pools(run_dir: str | Path) -> dict[str, Pool]:
    """Pools of a `results/candidates/<run_id>/` directory. Every record is checked; a malformed one is an
    InputError naming the file, the line and the field."""
    path = Path(run_dir) / RECORDS
    if not path.is_file():
        raise InputError("no candidate records here (run `execcritic candidates build` first)", file=str(path))
    pools: dict[str, Pool] = {}
    for n, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{n}"
        for name, typ in _RECORD_FIELDS.items():
            if not isinstance(rec.get(name), typ):
                raise InputError(f"{name} must be a {typ.__name__}, got {type(rec.get(name)).__name__}", file=where,
                                 instance=rec.get("instance_id") if isinstance(rec.get("instance_id"), str) else None,
                                 field=name)
        iid = rec["instance_id"]
        if rec["kind"] not in KINDS:
            raise InputError(f"kind must be one of {KINDS}, got {rec['kind']!r}", file=where, instance=iid, field="kind")
        resolved = rec.get("resolved")
        if rec["official_valid"] and not isinstance(resolved, bool):
            raise InputError("a valid official evaluation needs a boolean label", file=where, instance=iid,
                             field="resolved")
        if not rec["official_valid"] and resolved is not None:
            raise InputError("an invalid official evaluation cannot carry a label", file=where, instance=iid,
                             field="resolved")
        if LabeledPatch(rec["patch"], False).digest != rec["digest"]:
            raise InputError("digest does not match the patch", file=where, instance=iid, field="digest")
        pool = pools.setdefault(iid, Pool(iid))
        if rec["official_valid"]:
            pool.labeled.append(LabeledPatch(rec["patch"], resolved, rec["source"]))
        else:
            pool.unlabeled.append({"source": rec["source"], "error": (rec.get("official") or {}).get("error", "")})
    return pools


def rl_instances(pools: dict[str, Pool], role: str, protocol: ProtocolConfig = PAPER, *,
                 source: str = "<pools>") -> list[str]:
    """Instance ids of the Test (`role="test"`) or Repair RL set, in pool order."""
    rl = protocol.test_rl if role == "test" else protocol.repair_rl
    return [iid for iid, p in pools.items() if p.eligible(rl)]


def require_pool(pools: dict[str, Pool], instance_id: str, rl: TestRLConfig | RepairRLConfig, *,
                 source: str) -> list[LabeledPatch]:
    """The labeled pool of one instance, or an InputError saying what it lacks."""
    pool = pools.get(instance_id)
    if pool is None:
        raise InputError("no candidate pool for this instance", file=source, instance=instance_id, field="instance_id")
    if not pool.eligible(rl):
        need = f"at least {rl.min_candidates} labeled candidates" + (" with both labels" if rl.require_both_labels
                                                                      else "")
        raise InputError(f"the pool has {len(pool.labeled)} labeled ({pool.positives} correct, {pool.negatives} "
                         f"incorrect); the RL set needs {need}", file=source, instance=instance_id, field="resolved")
    return list(pool.labeled)


# ---- building ------------------------------------------------------------------------------------

@dataclass
class BuildResult:
    run_dir: Path
    summary: RunSummary
    pools: dict[str, dict[str, Any]]


def build_candidates(tasks: Sequence[Task], run_dir: str | Path, *, repair_runs: Sequence[str | Path] = (),
                     mutants: bool = True, protocol: ProtocolConfig = PAPER, backend: str | None = None,
                     workers: int = 1, show_progress: bool = True, datasets: list[dict[str, Any]] | None = None,
                     command: list[str] | str | None = None) -> BuildResult:
    """Label every candidate of every task with a real official run (resumable); write pools.json and the
    manifest. Returns the run summary and the per-instance pool facts."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ids = [t.instance_id for t in tasks]
    cands: list[Candidate] = []
    for t in tasks:
        cands.extend(gold_and_mutants(t, mutants=mutants))
    for r in repair_runs:
        cands.extend(repair_candidates(r, ids))
    unique = dedupe(cands)
    by_id = {t.instance_id: t for t in tasks}
    store = RecordStore(run_dir / RECORDS)
    units = [Unit(unit_key(c.instance_id, c.digest), (by_id[c.instance_id], c, protocol, backend)) for c in unique]
    started = time.time()
    summary = run_units(units, label_unit, store=store, workers=workers, label="official labels",
                        count=lambda r: {"correct": r["resolved"] is True, "incorrect": r["resolved"] is False,
                                         "invalid": not r["official_valid"]}, show_progress=show_progress)
    pools = load_pools(run_dir)
    facts = {iid: pools[iid].to_dict(protocol) if iid in pools else Pool(iid).to_dict(protocol) for iid in ids}
    manifest = build_manifest(command=command, config=protocol, datasets=datasets, extra={
        "artifact": "candidates", "run_id": run_dir.name, "instances": ids, "repair_runs": [str(r) for r in repair_runs],
        "mutants": mutants, "candidates": len(unique), "labels": summary.to_dict(),
        "test_rl_set": [i for i in ids if facts[i]["test_rl"]], "repair_rl_set": [i for i in ids if facts[i]["repair_rl"]],
        "wall_s": round(time.time() - started, 2),
        "env": {"PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}})
    write_result(run_dir / POOLS, {"pools": facts}, manifest)
    atomic_write_json(run_dir / "manifest.json", manifest)
    return BuildResult(run_dir, summary, facts)


__all__ = [
    "KINDS",
    "BuildResult",
    "Candidate",
    "Pool",
    "build_candidates",
    "dedupe",
    "gold_and_mutants",
    "label_unit",
    "load_pools",
    "repair_candidates",
    "require_pool",
    "rl_instances",
]
