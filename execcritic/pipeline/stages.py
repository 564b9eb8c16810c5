"""The paper's evaluation protocol (Appendix A.3) as three resumable stages and their composition.

  generate-tests: one generation episode per (issue, Test source); sources are `oracle` (the official
                  F2P bundle, Base-gated like any other), `none` (no test: Round 0 only) or a model
                  spec (the Test agent). At most one qualified bundle per (issue, source).
  repair:         `runs` Repair runs per (issue, source) that reuse that one bundle; a Base-gate
                  failure keeps and forwards Round 0.
  score:          a fresh official evaluation of every terminal patch, Round-0 fallbacks included.
Every instance stays in every denominator; the local gate outcome and the official outcome are
recorded separately. Records are append-only JSONL (records.py); trajectories are saved per unit.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from execcritic.config import PAPER, ProtocolConfig
from execcritic.pipeline.records import RecordStore, unit_key
from execcritic.pipeline.workers import RunSummary, Unit, run_units
from execcritic.tasks.model import Task

SOURCES_BUILTIN = ("oracle", "none")


@dataclass(frozen=True)
class PipelineConfig:
    out_dir: str
    test_sources: tuple[str, ...] = ("oracle",)     # "oracle", "none", or a model spec
    repair_model: str = "local"
    runs: int = 3                                   # Repair runs per (issue, source), paper: 3
    backend: str | None = None                      # None: the task's own environment kind
    memory_mb: int | None = 4096
    command_timeout_s: float = 180.0
    protocol: ProtocolConfig = PAPER
    # spec -> the endpoint spec that serves it in this session (e.g. "local" -> openai-text:http://...):
    # records and resume keys use the stable spec, model clients the served one
    endpoints: tuple[tuple[str, str], ...] = ()

    def resolve(self, spec: str) -> str:
        return dict(self.endpoints).get(spec, spec)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["protocol_deviations"] = {k: list(v) for k, v in self.protocol.deviations().items()}
        return d


def source_label(source: str) -> str:
    return source if source in SOURCES_BUILTIN else f"model:{source}"


def _paths(cfg: PipelineConfig) -> dict[str, Path]:
    out = Path(cfg.out_dir)
    return {"generation": out / "generation.jsonl", "repair": out / "repair.jsonl", "score": out / "score.jsonl",
            "trajectories": out / "trajectories"}


def _open(task: Task, cfg: PipelineConfig):
    from execcritic.pipeline.envs import task_environment

    env = task_environment(task, cfg.backend)
    return env, env.open_sandbox(memory_mb=cfg.memory_mb)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]


# ---- units (module-level functions: picklable for Ray) ---------------------------------------------

def generation_unit(payload: tuple[Task, str, PipelineConfig]) -> dict[str, Any]:
    task, source, cfg = payload
    base = {"instance_id": task.instance_id, "source": source_label(source)}
    if source == "none":
        return {**base, "qualified": False, "exit_status": "no_test_source", "bundle": None}
    if source == "oracle":
        from execcritic.harness.oracle.build import oracle_bundle
        from execcritic.errors import InputError
        from execcritic.harness.execute import base_reader
        from execcritic.harness.gate import base_gate

        _, verifier = _open(task, cfg)
        with verifier:
            try:  # the Base test modules resolve class scopes the dataset's test names leave out
                bundle = oracle_bundle(task, read_base=base_reader(verifier))
            except InputError as exc:
                return {**base, "qualified": False, "exit_status": "oracle_unbuildable", "bundle": None,
                        "error": str(exc)}
            gate = base_gate(task, bundle, sandbox=verifier, config=cfg.protocol.harness)
        ex = gate.execution
        return {**base, "qualified": gate.qualified, "exit_status": "qualified" if gate.qualified else "base_gate_failed",
                "bundle": bundle.to_dict() if gate.qualified else None, "candidate_bundle": bundle.to_dict(),
                "gate": {"valid": ex.valid, "verdict": ex.verdict.value if ex.verdict else None,
                         "failure_kind": ex.failure_kind.value, "diagnostic": ex.diagnostic[:1000]},
                "attempts_used": 1}
    from execcritic.agents.models.base import SamplingConfig
    from execcritic.agents.test_agent import run_test_agent
    from execcritic.pipeline.models import make_model

    model = make_model(cfg.resolve(source), task=task, role="test", sampling=SamplingConfig.test_agent(cfg.protocol))
    _, workspace = _open(task, cfg)
    _, verifier = _open(task, cfg)
    with workspace, verifier:
        res = run_test_agent(task, model, workspace=workspace, verifier=verifier, config=cfg.protocol.test_agent,
                             harness=cfg.protocol.harness, command_timeout_s=cfg.command_timeout_s)
    traj = _paths(cfg)["trajectories"] / "test" / f"{_safe(task.instance_id)}__{_safe(source_label(source))}.json"
    res.trajectory.save(traj)
    return {**base, **res.to_record(), "trajectory": str(traj)}


def repair_unit(payload: tuple[Task, str, int, dict | None, PipelineConfig]) -> dict[str, Any]:
    task, source, run_index, bundle_dict, cfg = payload
    from execcritic.agents.models.base import SamplingConfig
    from execcritic.agents.repair import RepairController
    from execcritic.bundle.model import TestBundle
    from execcritic.pipeline.models import make_model

    bundle = (TestBundle(bundle_dict["test_patch"], bundle_dict["test_command"], bundle_dict["test_contract"])
              if bundle_dict else None)
    model = make_model(cfg.resolve(cfg.repair_model), task=task, role="repair", run_index=run_index,
                       sampling=SamplingConfig.repair_eval(cfg.protocol))
    name = f"{_safe(task.instance_id)}__{_safe(source_label(source))}__run{run_index}.json"
    traj = _paths(cfg)["trajectories"] / "repair" / name
    _, workspace = _open(task, cfg)
    _, verifier = _open(task, cfg)
    with workspace, verifier:
        controller = RepairController(task, model, workspace=workspace, verifier=verifier, bundle=bundle,
                                      config=cfg.protocol.repair, harness=cfg.protocol.harness,
                                      command_timeout_s=cfg.command_timeout_s)
        try:
            res = controller.run()
        finally:  # a unit that raises (e.g. the model endpoint is down) still leaves its trajectory
            controller.trajectory.save(traj)
    record = res.to_record()
    record["checks"] = [asdict(c) for c in res.checks]
    return {"instance_id": task.instance_id, "source": source_label(source), "run": run_index,
            "qualified_bundle": bundle is not None, **record, "trajectory": str(traj)}


def score_unit(payload: tuple[Task, str, str, PipelineConfig]) -> dict[str, Any]:
    task, repair_key, patch, cfg = payload
    from execcritic.evaluation.official import evaluate_official
    from execcritic.pipeline.envs import task_environment

    res = evaluate_official(task, patch, task_environment(task, cfg.backend))
    return {"instance_id": task.instance_id, "repair_key": repair_key, **res.to_dict()}


# ---- stages -----------------------------------------------------------------------------------------

def _count_generation(r: dict) -> dict[str, int]:
    return {"qualified": r.get("qualified", False)}


def _count_repair(r: dict) -> dict[str, int]:
    return {"passed": r.get("local_status") == "pass", "entered": r.get("entered_repair", False)}


def _count_score(r: dict) -> dict[str, int]:
    return {"resolved": r.get("resolved", False), "invalid": not r.get("valid", True)}


def generate_tests(tasks: Sequence[Task], cfg: PipelineConfig, *, workers: int = 1, backend: str = "threads",
                   show_progress: bool = True) -> RunSummary:
    store = RecordStore(_paths(cfg)["generation"])
    units = [Unit(unit_key(t.instance_id, source_label(s)), (t, s, cfg)) for t in tasks for s in cfg.test_sources]
    return run_units(units, generation_unit, store=store, workers=workers, backend=backend, label="generate-tests",
                     count=_count_generation, show_progress=show_progress)


def _bundles(cfg: PipelineConfig) -> dict[tuple[str, str], dict | None]:
    out: dict[tuple[str, str], dict | None] = {}
    for r in RecordStore(_paths(cfg)["generation"]).iter():
        out[(r["instance_id"], r["source"])] = r.get("bundle") if r.get("qualified") else None
    return out


def repair(tasks: Sequence[Task], cfg: PipelineConfig, *, workers: int = 1, backend: str = "threads",
           show_progress: bool = True) -> RunSummary:
    bundles = _bundles(cfg)
    store = RecordStore(_paths(cfg)["repair"])
    units = []
    for t in tasks:
        for s in cfg.test_sources:
            label = source_label(s)
            if (t.instance_id, label) not in bundles:
                continue  # generation not finished for this pair; a later resume picks it up
            for k in range(cfg.runs):
                units.append(Unit(unit_key(t.instance_id, label, f"run{k}"),
                                  (t, s, k, bundles[(t.instance_id, label)], cfg)))
    return run_units(units, repair_unit, store=store, workers=workers, backend=backend, label="repair",
                     count=_count_repair, show_progress=show_progress)


def score(tasks: Sequence[Task], cfg: PipelineConfig, *, workers: int = 1, backend: str = "threads",
          show_progress: bool = True) -> RunSummary:
    by_id = {t.instance_id: t for t in tasks}
    store = RecordStore(_paths(cfg)["score"])
    units = [Unit(r["key"], (by_id[r["instance_id"]], r["key"], r["final_patch"], cfg))
             for r in RecordStore(_paths(cfg)["repair"]).iter() if r["instance_id"] in by_id]
    return run_units(units, score_unit, store=store, workers=workers, backend=backend, label="score",
                     count=_count_score, show_progress=show_progress)


def run_all(tasks: Sequence[Task], cfg: PipelineConfig, *, workers: int = 1, backend: str = "threads",
            show_progress: bool = True) -> dict[str, RunSummary]:
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(cfg.out_dir) / "run_config.json").write_text(json.dumps(cfg.to_dict(), indent=2, default=str))
    return {"generate-tests": generate_tests(tasks, cfg, workers=workers, backend=backend, show_progress=show_progress),
            "repair": repair(tasks, cfg, workers=workers, backend=backend, show_progress=show_progress),
            "score": score(tasks, cfg, workers=workers, backend=backend, show_progress=show_progress)}


# ---- summaries ---------------------------------------------------------------------------------------

def summarize(tasks: Sequence[Task], cfg: PipelineConfig) -> dict[str, Any]:
    """Per Test source: qualified bundles, local passes, and the official resolved rate as the mean over
    runs with every instance in the denominator (a missing or invalid score counts as unresolved and is
    also reported separately)."""
    paths = _paths(cfg)
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
            per_run.append(100.0 * resolved / n if n else 0.0)
        mine = [r for r in reps if r["source"] == label]
        out["sources"][label] = {
            "qualified": sum(1 for t in tasks if gen.get((t.instance_id, label), {}).get("qualified")),
            "resolved_pct_mean": round(statistics.fmean(per_run), 2) if per_run else 0.0,
            "resolved_pct_per_run": [round(x, 2) for x in per_run],
            "local_pass": sum(r.get("local_status") == "pass" for r in mine),
            "entered_repair": sum(bool(r.get("entered_repair")) for r in mine),
            "official_invalid": invalid, "official_missing": missing,
            "final_reasons": dict(sorted(_count(r.get("final_reason") for r in mine).items())),
        }
    out["revision_turns"] = revision_turn_stats(reps)
    return out


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


__all__ = ["PipelineConfig", "generate_tests", "repair", "score", "run_all", "summarize", "revision_turn_stats",
           "generation_unit", "repair_unit", "score_unit"]
