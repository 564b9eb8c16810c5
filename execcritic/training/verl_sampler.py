"""verl's v1 replay buffer with the paper's DAPO filter (§5.1, Table 8b): keep groups whose *unmasked*
rollouts' final rewards vary, evict the rest and refill until `data.train_batch_size` groups are kept.

Why a subclass and not `algorithm.filter_groups`: verl's built-in filter drops a group only when the metric is
identical across ALL its trajectories, so a group whose only spread comes from masked (operationally errored)
rollouts would be kept; the paper excludes those. The classification is `verl_adapter.group_drops` (which is
`rewards.drop_reason` after Eq. 5's turn slack); eviction, refill (2k per k evicted, bounded in-flight) and
draining are verl's own. A separate module because verl's replay buffer imports TransferQueue at import time.

Bounded oversampling (`grpo.max_groups_offered`): the buffer counts the groups offered in a step (the step's
first batch plus every refill) and never dispatches past the cap. verl's sync trainer needs exactly
`train_batch_size` groups per step and would train dropped ones to fill it, so when a refill is needed and the
cap is spent the run stops with `OfferCapReached` naming the counts (the TRL runner instead proceeds with the
groups it kept, and changes no weight when it kept none). Per step the buffer reports the groups offered, the
rollouts masked for a turn/token-run mismatch (`verl_adapter.loop_output`), and what the TRL path's per-step row
says (`verl_launch.TRAINING_COLUMNS`): kept and dropped groups, the kept rollouts, the mean and sample sd of the
kept unmasked rollouts' final rewards and the masked share of the offered rollouts.

Selected by `trainer.v1.sampler.custom_sampler` in the generated launch files; its `sampler_kwargs` carry the
role, `train_batch_size` (kept groups per step), `max_groups_offered` and `max_inflight_gen_batches`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from execcritic.errors import ExecCriticError, InputError
from execcritic.training.verl_adapter import (
    TURN_MISMATCH_KEY,
    drop_counts,
    drops_of,
    group_scores,
    protocol_from_env,
)

FILTER_NAME = "execcritic_unmasked_reward_variance"


class OfferCapReached(ExecCriticError):
    """A step needed another group but `grpo.max_groups_offered` groups were already offered."""


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
        self.protocol = protocol_from_env()
        self.max_groups_offered = int(kw.get("max_groups_offered", self.protocol.grpo.max_groups_offered))
        self._refill_inner = refill_fn
        self.offered = 0
        self._mismatched: set[str] = set()
        self._scores: dict[str, tuple[list[float], list[bool]]] = {}
        self._dropped: set[str] = set()
        super().__init__(trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                         sampler_kwargs, refill_fn=self._refill if refill_fn is not None else None,
                         filter_groups_metric=FILTER_NAME, train_batch_size=int(kw["train_batch_size"]),
                         gen_batch_size=1, max_inflight_gen_batches=int(kw.get("max_inflight_gen_batches", 1)))
        if self.max_groups_offered < self.train_batch_size:
            raise InputError(f"max_groups_offered ({self.max_groups_offered}) is below train_batch_size "
                             f"({self.train_batch_size})", field="trainer.v1.sampler.sampler_kwargs.max_groups_offered")

    def _refill(self, k: int) -> None:
        room = self.max_groups_offered - self.offered
        if room <= 0:
            raise OfferCapReached(f"DAPO oversampling cap reached: {self.offered} groups offered this step "
                                  f"(grpo.max_groups_offered={self.max_groups_offered}) and fewer than "
                                  f"{self.train_batch_size} kept; the policy gives too few groups with reward "
                                  "variance (see the step's filter_groups metrics)")
        n = min(k, room)
        self.offered += n
        self._refill_inner(n)

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        self.offered, self._mismatched = self.train_batch_size, set()   # the step's first batch
        self._scores, self._dropped = {}, set()
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        prefix = self._metrics_prefix(partition_id)
        metrics[f"{prefix}/execcritic/groups_offered"] = self.offered
        metrics[f"{prefix}/execcritic/turn_mismatch_masked"] = len(self._mismatched)
        kept = sorted({k.split("_")[0] for k in batch.keys})
        metrics.update({f"{prefix}/execcritic/{k}": v for k, v in self.step_stats(kept).items()})
        return batch, metrics

    def step_stats(self, kept: list[str]) -> dict[str, float | int]:
        """The step's DAPO counts and reward summary (the TRL path's row: `grpo.GroupRolloutRunner._stats`)."""
        offered = [self._scores[u] for u in (*kept, *sorted(self._dropped)) if u in self._scores]
        rewards = [r for u in kept if u in self._scores for r, m in zip(*self._scores[u]) if not m]
        masks = [m for _, ms in offered for m in ms]
        return {"kept_groups": len(kept), "dropped_groups": len(self._dropped),
                "n_rollouts": sum(len(self._scores[u][1]) for u in kept if u in self._scores),
                "reward_mean": statistics.fmean(rewards) if rewards else 0.0,
                "reward_std": statistics.stdev(rewards) if len(rewards) >= 2 else 0.0,
                "masked_share": sum(masks) / len(masks) if masks else 0.0}

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
                info = dict((fields or {}).get("reward_extra_info") or {})
                groups[key.split("_")[0]].append(info)
                if info.get(TURN_MISMATCH_KEY):
                    self._mismatched.add(key)
        scores = group_scores(self.role, dict(groups), self.protocol)
        drops = drops_of(scores)
        self._scores.update(scores)
        self._dropped |= set(drops)
        return set(drops), drop_counts(drops)
