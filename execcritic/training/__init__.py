"""Training: the engine-agnostic pieces RL needs from an agent episode, and thin engine adapters.

- `tiny_model`: a tiny random-init Qwen3.5-MoE with the real Qwen3.5 chat template, built offline (tests).
- `policy`: `HFPolicy`, an in-process HF causal LM behind the `ChatModel` interface that records token ids,
  sampling logprobs and loss masks per turn; `assemble_sample` makes one trajectory-level sample per episode.
- `trl_adapter`: TRL 1.16 `SFTTrainer`/`GRPOTrainer` wiring; GRPO rollouts are agent-loop episodes
  (`episode(policy, row) -> (sample, reward_or_None, info)`).

Submodules import torch/transformers/trl; nothing is imported here so that `import execcritic.training` stays
cheap on machines without the `train` extra.
"""
