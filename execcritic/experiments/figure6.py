"""Figure 6: (a) Test-agent Base-to-Gold vs the number of SFT teacher trajectories (0 = the base model),
the teacher's own rate and RL from the 5K checkpoint; (b) Test-agent and (c) Repair-agent GRPO reward
curves, which come from training runs (`results/training/`, via the training adapter)."""

from __future__ import annotations

from execcritic.experiments import training
from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

POINTS = (("sft", 0, "test_base"), ("sft", 1000, "test_sft_1k"), ("sft", 3000, "test_sft_3k"),
          ("sft", 5000, "test_sft"), ("sft", 10000, "test_sft_10k"), ("sft_rl", 5000, "test_rl"),
          ("teacher", 0, "test_deepseek"))
CURVES = (("test", "base"), ("test", "sft"), ("repair", "base"))

SPEC = ArtifactSpec("figure6", "b2g", tuple(
    Condition({"checkpoint": ck, "sft_trajectories": n}, test=role, labels={"checkpoint": role})
    for ck, n, role in POINTS), test_column="checkpoint", curves=CURVES)


def curve_reasons(params: Params) -> dict[str, str]:
    """Why each training curve of panels (b) and (c) is not run here (the adapter's words)."""
    return {f"{role} RL from {init}": training.curve(role, init, params.preset)[1] for role, init in CURVES}


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress, extra_manifest={"not_run_curves": curve_reasons(params)})
