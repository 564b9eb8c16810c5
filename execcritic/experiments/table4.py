"""Table 4: Test-agent SFT teacher comparison - Base-to-Gold after SFT and after SFT + RL, for SFT data
from GPT-5.6-sol without chain of thought and from DeepSeek-V4-Flash with it (single run)."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

ROWS = (("GPT-5.6-sol (no CoT)", False, "test_sft_gpt56", "test_rl_gpt56"),
        ("DeepSeek-V4-Flash (CoT)", True, "test_sft", "test_rl"))

SPEC = ArtifactSpec("table4", "b2g", tuple(
    Condition({"teacher": teacher, "stage": stage}, test=role, labels={"teacher": role}, record={"cot": cot})
    for teacher, cot, sft, rl in ROWS for stage, role in (("sft", sft), ("sft_rl", rl))),
    test_column="teacher")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
