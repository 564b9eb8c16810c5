"""verl's v1 replay buffer with the paper's DAPO filter (§5.1, Table 8b): keep groups whose *unmasked*
rollouts' final rewards vary, evict the rest and refill until `data.train_batch_size` groups are kept.

Why a subclass and not `algorithm.filter_groups`: verl's built-in filter drops a group only when the metric is
identical across ALL its trajectories, so a group whose only spread comes from masked (operationally errored)
rollouts would be kept; the paper excludes those. The classification is `verl_adapter.group_drops` (which is
`rewards.drop_reason` after Eq. 5's turn slack); eviction, refill (2k per k evicted, bounded in-flight) and
draining are verl's own. A separate module because verl's replay buffer imports TransferQueue at import time.

Selected by `trainer.v1.sampler.custom_sampler` in the generated launch files; its `sampler_kwargs` carry the
role, `train_batch_size` (kept groups per step) and `max_inflight_gen_batches`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from execcritic.errors import InputError
from execcritic.training.verl_adapter import drop_counts, group_drops, protocol_from_env

FILTER_NAME = "execcritic_unmasked_reward_variance"


class ExecCriticReplayBuffer(ReplayBuffer):
    """`ReplayBuffer` (sync mode) whose DAPO classification is the paper's (module docstring)."""

    def __init__(self, trainer_mode: str, trainer_config: Any, max_off_policy_threshold: int | None,
                 max_off_policy_strategy: str, sampler_kwargs: Any, refill_fn=None, **kwargs: Any):
        kw = dict(sampler_kwargs or {})
        if trainer_mode != "sync":
            raise InputError("the execcritic replay buffer implements the on-policy (sync) trainer only",
                             field="trainer.v1.trainer_mode")
        for key in ("role", "train_batch_size"):
            if key not in kw:
                raise InputError(f"missing {key!r}", field=f"trainer.v1.sampler.sampler_kwargs.{key}")
        self.role = str(kw["role"])
        super().__init__(trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                         sampler_kwargs, refill_fn=refill_fn, filter_groups_metric=FILTER_NAME,
                         train_batch_size=int(kw["train_batch_size"]), gen_batch_size=1,
                         max_inflight_gen_batches=int(kw.get("max_inflight_gen_batches", 1)))
        self.protocol = protocol_from_env()

    def _dapo_filtered_keys(self, partition_id: str):
        if partition_id == "val":
            return set(), drop_counts({})
        finished = self.finished_keys[partition_id]
        keys = [k for k in self.partitions[partition_id] if k.split("_")[0] in finished]
        groups: dict[str, list[dict[str, float]]] = defaultdict(list)
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["extra_fields"])
            for key, value in zip(keys, list(data["extra_fields"]), strict=True):
                fields = getattr(value, "data", value)
                groups[key.split("_")[0]].append(dict((fields or {}).get("reward_extra_info") or {}))
        drops = group_drops(self.role, dict(groups), self.protocol)
        return set(drops), drop_counts(drops)
