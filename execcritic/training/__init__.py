"""Training: the paper's two RL recipes (§4, Tables 4, 6-8) on engines, reusing the real episodes.

- `mutants`, `datasets`: Gold mutants for candidate pools, Test-agent SFT rows, Repair-agent RL rows
  (pure transformations, re-exported here).
- `tiny_model`: a tiny random-init Qwen3.5-MoE with the real Qwen3.5 chat template, built offline (tests).
- `policy`: `HFPolicy`, an in-process HF causal LM behind the `ChatModel` interface that records token ids,
  sampling logprobs and loss masks per turn; `assemble_sample` makes one trajectory-level sample per episode.
- `trl_adapter`: TRL 1.16 `SFTTrainer`/`GRPOTrainer` wiring; GRPO rollouts are agent-loop episodes
  (`episode(policy, row) -> (sample, reward_or_None, info)`).

- `verl_adapter`, `verl_sampler`, `verl_config`: the same episodes as verl 0.9.1 agent loops, the masking rules
  as verl advantage estimators, the DAPO filter as verl's replay buffer, and the launch files of Tables 7-8
  (`docs/training_engines.md`; the `verl` extra).

The engine modules import torch/transformers/trl (the `train` extra) and are not imported here, so that
`import execcritic.training` stays cheap.
"""


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
