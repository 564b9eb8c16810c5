"""Table 3: Repair-objective ablation - Repair agents trained with the standard objective, T2I without
the direct-solve bonus, and full T2I; Round-0 and final resolved rates with fixed RL-35B tests."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

ROWS = (("Standard (no T2I)", "repair_standard"), ("T2I, no direct bonus", "repair_t2i_no_bonus"),
        ("Full T2I", "repair_trained"))

SPEC = ArtifactSpec("table3", "resolve", tuple(
    Condition({"objective": label, "test_source": "RL-35B"}, test="test_rl", repair=role,
              labels={"objective": role, "test_source": "test_rl"}) for label, role in ROWS),
    round0=True, test_column="test_source", repair_column="objective")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
