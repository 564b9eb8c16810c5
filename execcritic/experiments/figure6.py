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


def curves(params: Params) -> tuple[dict[str, str], dict[str, str]]:
    """Panels (b) and (c): the GRPO runs this run trained or reused for each curve ({curve: training run id}), and
    why the others are not run here (the adapter's words). The figure draws the runs under `<output_dir>/training/`."""
    runs, why = {}, {}
    for role, init in CURVES:
        entry, reason = training.curve(role, init, params)
        if entry is not None:
            runs[f"{role} RL from {init}"] = entry["run_id"]
        else:
            why[f"{role} RL from {init}"] = reason
    return runs, why


def run(params: Params, *, show_progress: bool = True) -> Run:
    runs, why = curves(params)
    return execute(SPEC, params, show_progress=show_progress,
                   extra_manifest={"not_run_curves": why, "training_curves": runs})
