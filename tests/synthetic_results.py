"""SYNTHETIC fixtures for the results-store and figure tests: small runs written through the store API
with made-up outcomes. They are test data only - preset `synthetic-fixture`, model `synthetic:fixture` -
and never belong under the repository's results/."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from execcritic.results.store import Run, RunWriter, new_run

PRESET = "synthetic-fixture"
MODEL = "synthetic:fixture"
REPO = Path(__file__).resolve().parents[1]
REPORTED = REPO / "results" / "paper" / "reported_numbers.json"


def ids(n: int) -> list[str]:
    return [f"synthetic__inst-{i:03d}" for i in range(n)]


def b2g(instance_id: str, q: int, *, run: int = 0, b: int | None = None, base_valid: bool | None = True,
        gold_valid: bool | None = True, **cond: Any) -> dict[str, Any]:
    """A Base-to-Gold record; q=1 means clean Base failure and Gold pass."""
    b = q if b is None else b
    g = q
    miss = "" if q else ("no_bundle" if base_valid is None else "base_invalid" if base_valid is False else
                         "base_passed" if not b else "gold_invalid" if gold_valid is False else "gold_failed")
    return {"instance_id": instance_id, "run": run, "model": MODEL, "qualified": base_valid is not None and bool(b),
            "B": b, "G": g, "Q": q, "base_valid": base_valid, "gold_valid": gold_valid,
            "base_failure_kind": None if base_valid is None else "behavioral_failure" if b else "passed",
            "gold_failure_kind": None if gold_valid is None else "passed" if q else "behavioral_failure",
            "miss": miss, **cond}


def resolve(instance_id: str, run: int, resolved: bool, *, official_valid: bool = True,
            round0_resolved: bool | None = None, round0_official_valid: bool | None = None,
            **cond: Any) -> dict[str, Any]:
    rec = {"instance_id": instance_id, "run": run, "repair_model": MODEL, "resolved": resolved,
           "official_valid": official_valid, "local_status": "pass" if resolved else "hard_fail",
           "final_reason": "check_pass" if resolved else "budget_exhausted", "qualified_bundle": True,
           "round0_resolved": round0_resolved, **cond}
    if round0_official_valid is not None:
        rec["round0_official_valid"] = round0_official_valid
    return rec


def writer(root: Path, artifact: str, instances: list[str], runs: int = 1, run_id: str | None = None,
           **extra: Any) -> RunWriter:
    return new_run(artifact, PRESET, root=root, run_id=run_id, instances=instances, runs=runs,
                   models={"test": {"spec": MODEL, "endpoint": None}, "repair": {"spec": MODEL, "endpoint": None}},
                   command=["synthetic-fixture", artifact], extra=extra or None)


# Table 1: 10 instances; base Q on 0..2, +SFT Q on 0..5 (pairs: 3 better, 0 worse), one extra measured-only
# source; one invalid Gold run on the base model.
TABLE1_Q = {"Qwen3.5-35B-A3B": [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
            "Qwen3.5-35B-A3B + SFT": [1, 1, 1, 1, 1, 1, 0, 0, 0, 0],
            "synthetic-only source": [1, 0, 1, 0, 1, 0, 1, 0, 1, 0]}


def make_table1(root: Path) -> Run:
    inst = ids(10)
    w = writer(root, "table1", inst)
    for source, qs in TABLE1_Q.items():
        for i, q in zip(inst, qs):
            if source == "Qwen3.5-35B-A3B" and i == inst[9]:
                w.append(b2g(i, 0, b=1, gold_valid=False, test_source=source))
            else:
                w.append(b2g(i, q, test_source=source))
    return w.finalize()


# Table 2: 6 instances x 3 runs; base/none resolves instances 0-1 in every run, base/oracle adds
# instance 2 in runs 0 and 1; trained/none has one invalid official score and one missing record.
def make_table2(root: Path) -> Run:
    inst = ids(6)
    w = writer(root, "table2", inst, runs=3)
    for k in range(3):
        for j, i in enumerate(inst):
            w.append(resolve(i, k, j < 2, repair_agent="base", test_source="none"))          # alias of None (Round 0)
            w.append(resolve(i, k, j < 2 or (j == 2 and k < 2), repair_agent="base", test_source="oracle"))
            if (j, k) == (5, 2):
                continue                                                                     # a missing record
            if (j, k) == (4, 1):
                w.append(resolve(i, k, False, official_valid=False, repair_agent="trained", test_source="none"))
                continue
            w.append(resolve(i, k, j < 3, repair_agent="trained", test_source="none"))
    return w.finalize()


FIG5 = {("a", "SWE-bench Verified", "GPT-5.6-sol", "Baseline"): [1, 1, 1, 0, 0],
        ("a", "SWE-bench Verified", "GPT-5.6-sol", "Oracle"): [1, 1, 1, 1, 0],
        ("b", "SWE-bench Verified", "Qwen3.5-35B-A3B", "Baseline"): [1, 0, 0, 0, 0]}


def make_figure5(root: Path) -> Run:
    inst = ids(5)
    w = writer(root, "figure5", inst)
    for (panel, bench, agent, fs), vals in FIG5.items():
        for i, v in zip(inst, vals):
            w.append(resolve(i, 0, bool(v), panel=panel, benchmark=bench, repair_agent=agent, feedback_source=fs))
    return w.finalize()


FIG6 = {("sft", 0): [1, 0, 0, 0, 0], ("sft", 1000): [1, 1, 0, 0, 0], ("sft", 5000): [1, 1, 1, 0, 0],
        ("sft_rl", 5000): [1, 1, 1, 1, 0], ("teacher", 0): [1, 1, 1, 1, 1]}


def make_figure6(root: Path) -> Run:
    inst = ids(5)
    w = writer(root, "figure6", inst)
    for (ck, n), qs in FIG6.items():
        for i, q in zip(inst, qs):
            w.append(b2g(i, q, checkpoint=ck, sft_trajectories=n))
    return w.finalize()


def curve(steps: int, start: float, slope: float) -> list[dict[str, Any]]:
    return [{"step": s, "reward_mean": round(start + slope * s, 6), "reward_std": 0.05, "masked_share": 0.0625,
             "reward_mean_offered": round(start + slope * s, 6), "episodes": 152,
             "kept_groups": 16, "dropped_groups": 3, "n_rollouts": 128, "level_zero": 60, "level_q": 40,
             "level_ba1": 28} for s in range(steps)]


def make_training(root: Path, role: str, init: str, steps: int = 10, start: float = 0.2,
                  slope: float = 0.02) -> Run:
    w = new_run("training", PRESET, root=root, runs=1, instances=[], run_id=f"synthetic-{role}-{init}",
                models={"policy": {"spec": MODEL}}, command=["synthetic-fixture", "training"],
                extra={"role": role, "init": init})
    w.extend(curve(steps, start, slope))
    return w.finalize()


def make_all(root: Path) -> dict[str, Run]:
    """Every synthetic run the figure tests use, plus the reported numbers where build_all looks."""
    (root / "paper").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPORTED, root / "paper" / "reported_numbers.json")
    return {"table1": make_table1(root), "table2": make_table2(root), "figure5": make_figure5(root),
            "figure6": make_figure6(root), "train_test_sft": make_training(root, "test", "sft"),
            "train_test_base": make_training(root, "test", "base", start=0.2, slope=0.002),
            "train_repair": make_training(root, "repair", "base", steps=8, start=0.3, slope=0.03)}
