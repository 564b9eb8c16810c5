"""Training data for the paper's two RL recipes: Gold mutants for candidate pools, Test-agent SFT rows and
Repair-agent RL rows (§4, Tables 4, 6-8). Pure transformations; no sandbox."""

from execcritic.training.datasets import (
    RepairSet,
    SFTSet,
    build_repair_rl_set,
    build_sft_set,
    load_trajectory,
    oracle_f2p_node,
    read_jsonl,
    repair_rl_row,
    repair_rl_row_generated,
    sft_admission,
    sft_example,
    sft_messages,
    validate_trajectory,
)
from execcritic.training.mutants import KINDS, Mutant, gold_mutants

__all__ = [
    "KINDS",
    "Mutant",
    "RepairSet",
    "SFTSet",
    "build_repair_rl_set",
    "build_sft_set",
    "gold_mutants",
    "load_trajectory",
    "oracle_f2p_node",
    "read_jsonl",
    "repair_rl_row",
    "repair_rl_row_generated",
    "sft_admission",
    "sft_example",
    "sft_messages",
    "validate_trajectory",
]
