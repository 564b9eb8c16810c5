"""verl's v1 replay buffer with the paper's DAPO filter (§5.1, Table 8b): keep groups whose *unmasked*
rollouts' final rewards vary, evict the rest and refill until `data.train_batch_size` groups are kept.

Why a subclass and not `algorithm.filter_groups`: verl's built-in filter drops a group only when the metric is
identical across ALL its trajectories, so a group whose only spread comes from masked (operationally errored)
rollouts would be kept; the paper excludes those. The classification is `verl_adapter.group_drops` (which is
`rewards.drop_reason` after Eq. 5's turn slack); eviction, refill (2k per k evicted, bounded in-flight) and
draining are verl's own. A separate module because verl's replay buffer imports TransferQueue at import time.

Bounded oversampling (`grpo.max_groups_offered`): the buffer counts the groups offered in a step (the step's
first batch plus every refill) and never dispatches past the cap (`rewards.offer_room`, the TRL runner's rule).
verl's sync trainer needs exactly `train_batch_size` groups per step, so the step's dropped groups are held in
TransferQueue until it ends; when a refill is needed, the cap is spent and nothing is in flight, the step ends as
the TRL path's does (`rewards.end_step`): the latest dropped groups fill the empty slots and train nothing, and
the step is recorded as `offer_cap`. The run goes on (a resumed run replays such a step the same way instead of
stopping at it again). A filler trains nothing: its `response_mask` is zeroed in TransferQueue (out of the update
and of the per-token normalizer, the TRL rule). When the step kept no group at all, verl's actor would divide its
loss by zero trainable tokens, so there the fillers keep their masks and their rewards (`rm_scores`) are zeroed
instead: every advantage is exactly 0, so no policy gradient - but verl still runs its optimizer step (Adam's
moments and weight decay move the weights), where the TRL path runs none; so verl's rows record
`optimizer_steps_skipped` 0 where TRL's record the minibatches it skipped.

Per step the buffer reports the groups offered, the rollouts masked for a turn/token-run mismatch
(`verl_adapter.loop_output`), and what the TRL path's per-step row says (`verl_launch.TRAINING_COLUMNS`, from
`end_step`): kept, dropped and filler groups, the stop reason (`offer_cap` 0/1: verl's metrics are numbers), the
kept rollouts, the mean and sample sd of the kept (else offered) unmasked rollouts' final rewards with what they
are over (`reward_over`, an index into `rewards.REWARD_OVER`) and the masked share of the offered rollouts.

Selected by `trainer.v1.sampler.custom_sampler` in the generated launch files; its `sampler_kwargs` carry the
role, `train_batch_size` (kept groups per step), `max_groups_offered` and `max_inflight_gen_batches`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from execcritic.errors import InputError
from execcritic.rewards import REWARD_OVER, StepEnd, end_step, offer_room
from execcritic.training.verl_adapter import (
    TURN_MISMATCH_KEY,
    drop_counts,
    drops_of,
    group_scores,
    protocol_from_env,
)

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
        self.protocol = protocol_from_env()
        self.max_groups_offered = int(kw.get("max_groups_offered", self.protocol.grpo.max_groups_offered))
        self._refill_inner = refill_fn
        self._new_step(int(kw["train_batch_size"]))
        super().__init__(trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                         sampler_kwargs, refill_fn=self._refill if refill_fn is not None else None,
                         filter_groups_metric=FILTER_NAME, train_batch_size=int(kw["train_batch_size"]),
                         gen_batch_size=1, max_inflight_gen_batches=int(kw.get("max_inflight_gen_batches", 1)))
        if self.max_groups_offered < self.train_batch_size:
            raise InputError(f"max_groups_offered ({self.max_groups_offered}) is below train_batch_size "
                             f"({self.train_batch_size})", field="trainer.v1.sampler.sampler_kwargs.max_groups_offered")

    def _new_step(self, batch_size: int) -> None:
        """Per-step state: the step's first batch counts as offered; nothing dropped, held or capped yet."""
        self.offered, self.batch_size, self.capped = batch_size, batch_size, False
        self._mismatched: set[str] = set()
        self._scores: dict[str, tuple[list[float], list[bool]]] = {}
        self._dropped: list[str] = []            # in drop order (the latest fill a capped step, as on TRL)
        self._end: StepEnd[str] | None = None

    def _refill(self, k: int) -> None:
        n = offer_room(k, self.offered, self.max_groups_offered)
        if n <= 0:
            self.capped = True                   # the step ends once nothing is in flight (_sampleable_terminal_keys)
            return
        self.offered += n
        self._refill_inner(n)

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        self._new_step(batch_size)
        try:
            batch, metrics = super().sample(global_steps, partition_id, batch_size)
            uids = {k.split("_")[0] for k in batch.keys}
            end = self._end or self._close(sorted(uids), partition_id)
            fillers = set(end.fillers)
            self._neutralize(batch, fillers, trained=end.kept_groups > 0)
        finally:
            held = set(self._dropped) - set(self._end.fillers if self._end else ())
            if held:                             # dropped groups that fill nothing: gone, as verl evicts them
                super()._clear_groups(partition_id, held)
        prefix = self._metrics_prefix(partition_id)
        metrics[f"{prefix}/execcritic/groups_offered"] = self.offered
        metrics[f"{prefix}/execcritic/turn_mismatch_masked"] = len(self._mismatched)
        kept = sorted(uids - fillers)
        metrics.update({f"{prefix}/execcritic/{k}": v for k, v in self.step_stats(kept, end).items()})
        return batch, metrics

    def _close(self, kept: list[str], partition_id: str) -> StepEnd[str]:
        """`rewards.end_step` over the groups kept so far and the held dropped ones (the TRL runner's call)."""
        live = [r for u in kept if u in self._scores for r, m in zip(*self._scores[u]) if not m]
        offered = live + [r for u in self._dropped for r, m in zip(*self._scores[u]) if not m]
        self._end = end_step(len(kept), self._dropped, self.batch_size, offered=self.offered,
                             cap=self.max_groups_offered, kept_rewards=live, offered_rewards=offered)
        return self._end

    def step_stats(self, kept: list[str], end: StepEnd[str]) -> dict[str, float | int]:
        """The step's DAPO counts and reward summary (the TRL path's row: `end_step` and
        `grpo.GroupRolloutRunner._stats`); numbers only (verl's metric aggregation drops strings and bools)."""
        offered = [self._scores[u] for u in (*kept, *self._dropped) if u in self._scores]
        masks = [m for _, ms in offered for m in ms]
        rec = end.record()
        return {"kept_groups": len(kept), "dropped_groups": len(self._dropped), "filler_groups": rec["filler_groups"],
                "offer_cap": int(rec["stop_reason"] == "offer_cap"),
                "n_rollouts": sum(len(self._scores[u][1]) for u in kept if u in self._scores),
                "reward_mean": rec["reward_mean"], "reward_std": rec["reward_std"],
                "reward_over": REWARD_OVER.index(rec["reward_over"]),
                "reward_mean_offered": rec["reward_mean_offered"] if rec["reward_n_offered"] else 0.0,
                "reward_n_offered": rec["reward_n_offered"],
                "optimizer_steps_skipped": 0, "masked_share": sum(masks) / len(masks) if masks else 0.0}

    def _neutralize(self, batch: Any, fillers: set[str], *, trained: bool) -> None:
        """Make the fillers train nothing (module docstring): zero `response_mask` when the step kept a group,
        else zero `rm_scores` (verl's actor divides by the batch's trainable tokens)."""
        keys = [k for k in batch.keys if k.split("_")[0] in fillers]
        if not keys:
            return
        field = "response_mask" if trained else "rm_scores"
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=[field])
        zeros = [{field: torch.zeros_like(t)} for t in data[field].unbind(0)]
        tq.kv_batch_put(keys=keys, partition_id=batch.partition_id, fields=list_of_dict_to_tensordict(zeros))

    def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
        """verl evicts dropped groups at once; this buffer holds them until the step ends (a capped step's
        fillers). Everything else (surplus, failed) is cleared as verl does."""
        if partition_id != "val":
            uids = set(uids) - set(self._dropped)
        super()._clear_groups(partition_id, uids)

    def _sampleable_terminal_keys(self, partition_id: str, eviction_reasons):
        ready = super()._sampleable_terminal_keys(partition_id, eviction_reasons) - set(self._dropped)
        if partition_id == "val" or not self.capped or len(ready) >= self.batch_size:
            return ready
        if self.pending_keys[partition_id] or self.running_keys[partition_id]:
            return ready                         # in-flight groups may still be kept
        return ready | set(self._close(sorted(ready), partition_id).fillers)

    def _dapo_filtered_keys(self, partition_id: str):
        if partition_id == "val":
            return set(), drop_counts({})
        finished = self.finished_keys[partition_id] - set(self._scores)   # held dropped groups are scored once
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
        self._dropped += sorted(drops)
        return set(drops), drop_counts(drops)
