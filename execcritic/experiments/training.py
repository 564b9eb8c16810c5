"""A thin adapter to the training entry points, so the training-based artifacts (Tables 3, 4, 6, the
trained rows of Tables 1, 2, 5 and Figure 6) call training the same way on every preset.

The training CLI (`execcritic/cli/train.py`): `execcritic train sft|test-rl|repair-rl ... --json` prints
one JSON object with `final_checkpoint` (a HF checkpoint directory, served as the model spec
`hf:<dir>`) and writes the RL runs' per-step metrics under `results/training/<run_id>/` (the `training`
schema), where Figure 6's curves are drawn from. `reproduce` does not train checkpoints itself (the paper's
recipes are GPU-days; a CPU SFT on a few trajectories says nothing about them): a trained role is
evaluated when a notebook binds it to a checkpoint (`models={"test_sft": "hf:<final_checkpoint>"}`), and is
otherwise "not run here: <reason>" - never a number. Wherever the preset's engine cannot run here (verl
needs GPUs) the reason says so.
"""

from __future__ import annotations

import importlib.util
import shutil

from execcritic.experiments.presets import Binding, Preset
from execcritic.results.reasons import REASONS

ENTRY_MODULE = "execcritic.cli.train"

#: role -> the training command that produces its checkpoint (what the adapter will run)
RECIPES: dict[str, str] = {
    "test_sft": "train sft (5K DeepSeek-V4-Flash CoT trajectories)",
    "test_sft_1k": "train sft (1K trajectories)", "test_sft_3k": "train sft (3K trajectories)",
    "test_sft_10k": "train sft (10K trajectories)", "test_sft_gpt56": "train sft (GPT-5.6-sol, no CoT)",
    "test_rl": "train test-rl (from the 5K SFT checkpoint)", "test_rl_gpt56": "train test-rl (from the GPT-5.6 SFT)",
    "repair_trained": "train repair-rl (full T2I, Oracle-test feedback)",
    "repair_standard": "train repair-rl (standard objective)",
    "repair_t2i_no_bonus": "train repair-rl (T2I, no direct-solve bonus)",
    "repair_generated_fb": "train repair-rl (generated-test feedback)",
}
CURVE_RECIPES: dict[tuple[str, str], str] = {("test", "base"): "train test-rl (from the base model)",
                                             ("test", "sft"): "train test-rl (from the SFT checkpoint)",
                                             ("repair", "base"): "train repair-rl"}


def entry_point_available() -> bool:
    return importlib.util.find_spec(ENTRY_MODULE) is not None


def _engine_reason(preset: Preset) -> str | None:
    if preset.training == "none":
        return f"preset {preset.name} runs no training"
    if preset.training == "verl" and shutil.which("nvidia-smi") is None:
        return f"{REASONS['train:gpu']} (preset {preset.name} trains with verl; this machine has no GPU)"
    if not entry_point_available():
        return ("the training entry point `execcritic train` (execcritic/cli/train.py) is not in this checkout "
                "yet; the adapter calls it once it lands")
    return None


def checkpoint(role: str, preset: Preset) -> tuple[Binding | None, str]:
    """The trained model for `role` under `preset`: (binding, "") or (None, why it is not run here)."""
    recipe = RECIPES.get(role)
    if recipe is None:
        return None, f"role {role} is not produced by training"
    why = _engine_reason(preset) or ("`reproduce` does not train checkpoints: train one "
                                     "and bind the role to it, e.g. models={'%s': 'hf:<final_checkpoint>'}" % role)
    return None, f"{why} (needs `execcritic {recipe}`)"


def curve(role: str, init: str, preset: Preset) -> tuple[None, str]:
    """A training curve (Figure 6b/6c) under `preset`: (None, why it is not run here); the curves themselves are
    drawn from the runs under results/training/."""
    recipe = CURVE_RECIPES.get((role, init), "train")
    why = _engine_reason(preset) or (f"no complete training run with role {role}, init {init} under "
                                     "results/training/ (Figure 6 draws the curves from there)")
    return None, f"{why} (needs `execcritic {recipe}`)"


__all__ = ["CURVE_RECIPES", "ENTRY_MODULE", "RECIPES", "checkpoint", "curve", "entry_point_available"]
