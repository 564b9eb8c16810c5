"""DAPO dynamic sampling (paper §5.1; Table 8b "Zero-variance group filtering: Enabled").

§5.1: "each update retains 16 issue groups with nonzero within-group reward variance and samples eight
rollouts per group, yielding 128 rollouts" and "Dynamic sampling keeps issues for which the generated Test
bundles receive distinguishable execution rewards, excluding trajectories masked because of
candidate-execution errors." So the variance is taken over the *unmasked* rollouts: a group whose only
differences come from masked rollouts carries no usable signal. Groups are taken as they come (oversampling)
until `groups_per_step` are kept; every drop is counted with its reason.

Bounded oversampling (`GRPOConfig.max_groups_offered`, ours: §5.1 states no cap) is decided here too, once for
both engines: `offer_room` says how many more groups a step may offer, `end_step` how a step ends and what its
row records. A step that reached the cap with too few kept groups is not an error: it is filled with dropped
groups that train nothing (the TRL runner and verl's replay buffer both need a full batch) and recorded as
`offer_cap`, so a hard batch neither stops the run nor stops a resumed one again at the same step.

Pure: no I/O. Sizes come from `GRPOConfig` (paper defaults 16 x 8).
"""

from __future__ import annotations

import enum
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from execcritic.config import PAPER, GRPOConfig

T = TypeVar("T")


class DropReason(str, enum.Enum):
    ALL_MASKED = "all_masked"                # no unmasked rollout
    TOO_FEW_UNMASKED = "too_few_unmasked"    # one unmasked rollout: a variance needs two
    ALL_EQUAL_REWARDS = "all_equal_rewards"  # >= 2 unmasked rollouts, zero variance


def drop_reason(rewards: Sequence[float], masked: Sequence[bool]) -> DropReason | None:
    """None when the group is kept: its unmasked rewards have non-zero variance (two distinct values)."""
    if len(rewards) != len(masked):
        raise ValueError(f"{len(rewards)} rewards but {len(masked)} mask flags")
    live = [float(r) for r, m in zip(rewards, masked) if not m]
    if not live:
        return DropReason.ALL_MASKED
    if len(live) < 2:
        return DropReason.TOO_FEW_UNMASKED
    if len(set(live)) == 1:
        return DropReason.ALL_EQUAL_REWARDS
    return None


@dataclass(frozen=True)
class SamplingDecision:
    kept: bool
    reason: DropReason | None


class DynamicSampler(Generic[T]):
    """Accumulates issue groups for one GRPO step: keep a group iff `drop_reason` is None, until
    `groups_per_step` groups (x `rollouts_per_group` rollouts) are kept. Offering a group to a full step is
    an error (the caller stops generating; in-flight extras are simply not offered)."""

    def __init__(self, config: GRPOConfig = PAPER.grpo):
        self.config = config
        self.kept: list[T] = []
        self.offered = 0
        self.dropped: Counter[str] = Counter()

    @property
    def full(self) -> bool:
        return len(self.kept) >= self.config.groups_per_step

    @property
    def n_rollouts(self) -> int:
        return len(self.kept) * self.config.rollouts_per_group

    def offer(self, group: T, rewards: Sequence[float], masked: Sequence[bool]) -> SamplingDecision:
        if self.full:
            raise RuntimeError(f"the step already holds {len(self.kept)} kept groups (groups_per_step="
                               f"{self.config.groups_per_step}); stop offering")
        if len(rewards) != self.config.rollouts_per_group:
            raise ValueError(f"a group has {len(rewards)} rollouts; rollouts_per_group is "
                             f"{self.config.rollouts_per_group}")
        reason = drop_reason(rewards, masked)
        self.offered += 1
        if reason is None:
            self.kept.append(group)
            return SamplingDecision(True, None)
        self.dropped[reason.value] += 1
        return SamplingDecision(False, reason)

    def offer_scored(self, group: T, breakdowns: Sequence) -> SamplingDecision:
        """`offer` for reward breakdowns of either agent (anything with `.reward` and `.masked`)."""
        return self.offer(group, [b.reward for b in breakdowns], [b.masked for b in breakdowns])

    def stats(self) -> dict:
        return {"offered": self.offered, "kept": len(self.kept),
                "dropped": dict(sorted(self.dropped.items())), "rollouts": self.n_rollouts, "full": self.full}


#: a step's `stop_reason`: kept `groups_per_step` groups, or reached `max_groups_offered` first
STOP_REASONS = ("full", "offer_cap")
#: what a step row's `reward_mean` is over: the kept groups' unmasked rollouts, else every offered group's
#: unmasked rollouts (a step that trained nothing), else nothing (every rollout masked: 0 by convention)
REWARD_OVER = ("kept", "offered", "none")


def offer_room(wanted: int, offered: int, cap: int) -> int:
    """How many of `wanted` more groups a step may offer with `offered` already offered under `cap`."""
    return max(0, min(int(wanted), int(cap) - int(offered)))


@dataclass(frozen=True)
class StepEnd(Generic[T]):
    """How a GRPO step ended (`end_step`): its stop reason, the dropped groups that fill its empty slots (they
    train nothing) and the reward summary its row records."""

    stop_reason: str
    fillers: tuple[T, ...]
    kept_groups: int
    reward_mean: float
    reward_std: float
    reward_over: str
    reward_mean_offered: float | None = None
    reward_std_offered: float | None = None
    reward_n_offered: int = 0

    def record(self) -> dict:
        """The step row's columns this decides (the TRL row and verl's `training/execcritic/*` metrics). The
        offered columns are what every curve plots (`results.stats.curve_points`): the policy's reward over all it
        sampled, not only the groups DAPO kept."""
        return {"stop_reason": self.stop_reason, "kept_groups": self.kept_groups, "filler_groups": len(self.fillers),
                "reward_mean": self.reward_mean, "reward_std": self.reward_std, "reward_over": self.reward_over,
                "reward_mean_offered": self.reward_mean_offered, "reward_std_offered": self.reward_std_offered,
                "reward_n_offered": self.reward_n_offered}


def end_step(kept: int, dropped: Sequence[T], groups_per_step: int, *, offered: int, cap: int,
             kept_rewards: Sequence[float], offered_rewards: Sequence[float]) -> StepEnd[T]:
    """End a step with `kept` groups kept and `dropped` (in drop order) dropped, on either engine.

    Full: nothing to fill. Capped (`offered >= cap`, fewer than `groups_per_step` kept): the latest dropped
    groups fill the empty slots and train nothing; with none kept the step changes no weight on TRL (verl:
    `verl_sampler`). Neither full nor capped is a caller bug (it should still be sampling). Rewards:
    `kept_rewards` / `offered_rewards` are the unmasked final rewards of the kept / all offered groups; the
    mean and sample sd (ddof=1, TRL's `reward_std`; 0 below two values) are over the kept ones when there are
    any, else over the offered ones (`reward_over` says which)."""
    short = int(groups_per_step) - int(kept)
    if short > 0 and offered < cap:
        raise ValueError(f"{kept} of {groups_per_step} groups kept and {offered} < {cap} offered: the step is "
                         "neither full nor capped (keep offering)")
    if short > len(dropped):
        raise ValueError(f"{short} empty slots but only {len(dropped)} dropped groups to fill them")
    fillers = tuple(dropped[len(dropped) - short:]) if short > 0 else ()
    over, values = next(((name, list(v)) for name, v in (("kept", kept_rewards), ("offered", offered_rewards)) if v),
                        ("none", []))
    mean = statistics.fmean(values) if values else 0.0
    std = statistics.stdev(values) if len(values) >= 2 else 0.0
    off = list(offered_rewards)
    return StepEnd("offer_cap" if short > 0 else "full", fillers, int(kept), mean, std, over,
                   statistics.fmean(off) if off else None, statistics.stdev(off) if len(off) >= 2 else None, len(off))
