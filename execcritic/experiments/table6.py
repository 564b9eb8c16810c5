"""Table 6: Repair training feedback ablation - Repair agents trained with generated-test or Oracle-test
feedback, both evaluated with fixed RL-35B tests; Round-0 and final resolved rates."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

ROWS = (("Generated tests", "repair_generated_fb"), ("Oracle tests", "repair_trained"))

SPEC = ArtifactSpec("table6", "resolve", tuple(
    Condition({"training_feedback": label, "test_source": "RL-35B"}, test="test_rl", repair=role,
              labels={"training_feedback": role, "test_source": "test_rl"}) for label, role in ROWS),
    round0=True, test_column="test_source", repair_column="training_feedback")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
