"""Table 1: Test-agent Base-to-Gold success on SWE-bench Verified, one generation episode per issue and
Test source; Q = clean Base failure x Gold pass (offline audit), every instance in the denominator."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

ROWS = (("Qwen3.5-35B-A3B", "test_base"), ("Qwen3.5-35B-A3B + SFT", "test_sft"),
        ("Qwen3.5-35B-A3B + SFT + RL", "test_rl"), ("Codex-5.3", "test_codex53"),
        ("DeepSeek-V4-Flash-0731", "test_deepseek"), ("GPT-5.6-sol", "test_gpt56"))

SPEC = ArtifactSpec("table1", "b2g", tuple(
    Condition({"test_source": label}, test=role, labels={"test_source": role}) for label, role in ROWS),
    test_column="test_source")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
