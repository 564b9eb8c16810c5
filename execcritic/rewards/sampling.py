"""DAPO dynamic sampling (paper §5.1; Table 8b "Zero-variance group filtering: Enabled").

§5.1: "each update retains 16 issue groups with nonzero within-group reward variance and samples eight
rollouts per group, yielding 128 rollouts" and "Dynamic sampling keeps issues for which the generated Test
bundles receive distinguishable execution rewards, excluding trajectories masked because of
candidate-execution errors." So the variance is taken over the *unmasked* rollouts: a group whose only
differences come from masked rollouts carries no usable signal. Groups are taken as they come (oversampling)
until `groups_per_step` are kept; every drop is counted with its reason.

Pure: no I/O. Sizes come from `GRPOConfig` (paper defaults 16 x 8).
"""

from __future__ import annotations

import enum
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
