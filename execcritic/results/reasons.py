"""Why a paper condition has no measured value here: a small registry, so a table never shows an
invented number and every empty cell says what it would take to fill it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REASONS: dict[str, str] = {
    "api:gpt56": "closed model GPT-5.6-sol needs an API endpoint",
    "api:codex53": "closed model Codex-5.3 needs an API endpoint",
    "api:deepseek": "DeepSeek-V4-Flash-0731 needs an API endpoint",
    "gpu:qwen35b": "Qwen3.5-35B-A3B needs a GPU serving endpoint (vLLM/SGLang)",
    "ckpt:trained": "the trained Qwen3.5-35B-A3B checkpoints (SFT/RL) need the GPU training runs",
    "sft:gpu": "SFT of Qwen3.5-35B-A3B needs GPUs",
    "train:gpu": "GRPO training of Qwen3.5-35B-A3B needs GPUs",
    "data:swe-rebench": "SWE-ReBench training data not available offline",
    "data:pro": "SWE-bench Pro data not available offline",
    "images:multilingual": "Multilingual official images need a container registry (its C and C++ rows run "
                           "image-free: the multilingual-git task set)",
    "no-run": "no run of this artifact under results/",
}

# condition column -> value -> reason ids (in the order they are shown)
_BY_VALUE: dict[str, dict[Any, tuple[str, ...]]] = {
    "test_source": {
        "Qwen3.5-35B-A3B": ("gpu:qwen35b",), "Qwen3.5-35B-A3B + SFT": ("ckpt:trained",),
        "Qwen3.5-35B-A3B + SFT + RL": ("ckpt:trained",), "Codex-5.3": ("api:codex53",),
        "DeepSeek-V4-Flash-0731": ("api:deepseek",), "GPT-5.6-sol": ("api:gpt56",),
        "Base-35B": ("gpu:qwen35b",), "RL-35B": ("ckpt:trained",),
    },
    "repair_agent": {"base": ("gpu:qwen35b",), "trained": ("ckpt:trained",), "GPT-5.6-sol": ("api:gpt56",),
                     "Qwen3.5-35B-A3B": ("gpu:qwen35b",)},
    "objective": {"*": ("train:gpu", "data:swe-rebench")},
    "training_feedback": {"*": ("train:gpu", "data:swe-rebench")},
    "teacher": {"GPT-5.6-sol (no CoT)": ("api:gpt56", "data:swe-rebench"),
                "DeepSeek-V4-Flash (CoT)": ("api:deepseek", "data:swe-rebench")},
    "stage": {"sft": ("sft:gpu",), "sft_rl": ("sft:gpu", "train:gpu")},
    "language": {"Python": ("ckpt:trained",), "C": ("ckpt:trained",), "C++": ("ckpt:trained",),
                 "*": ("images:multilingual", "ckpt:trained")},
    "benchmark": {"SWE-bench Pro": ("data:pro",)},
    "feedback_source": {"GPT-5.6 generated": ("api:gpt56",), "Qwen-35B generated": ("gpu:qwen35b",)},
    "checkpoint": {"sft": ("api:deepseek", "data:swe-rebench", "sft:gpu"),
                   "sft_rl": ("api:deepseek", "sft:gpu", "train:gpu"), "teacher": ("api:deepseek",)},
}

# curves with no training run: (role, init) -> reason ids
CURVES: dict[tuple[str, str], tuple[str, ...]] = {
    ("test", "base"): ("train:gpu", "data:swe-rebench"),
    ("test", "sft"): ("api:deepseek", "sft:gpu", "train:gpu", "data:swe-rebench"),
    ("repair", "base"): ("train:gpu", "data:swe-rebench"),
}


def reason_ids(fields: Mapping[str, Any]) -> list[str]:
    if fields.get("checkpoint") == "sft" and fields.get("sft_trajectories") == 0:
        return ["gpu:qwen35b"]                    # "SFT on 0 trajectories" is the untrained base model
    out: list[str] = []
    for col, value in fields.items():
        table = _BY_VALUE.get(col, {})
        for rid in table.get(value, table.get("*", ())):
            if rid not in out:
                out.append(rid)
    return out or ["no-run"]


def not_run(fields: Mapping[str, Any]) -> str:
    """'not run here: <reason>; <reason>' for a condition given by its condition columns."""
    return "not run here: " + "; ".join(REASONS[r] for r in reason_ids(fields))


def not_run_curve(role: str, init: str) -> str:
    return "not run here: " + "; ".join(REASONS[r] for r in CURVES.get((role, init), ("no-run",)))


__all__ = ["CURVES", "REASONS", "not_run", "not_run_curve", "reason_ids"]
