"""GRPO group advantages for both agents (paper §4, Tables 7b/8a: group-mean subtraction enabled,
group-standard-deviation division disabled).

The two agents mask differently, and the difference is the point:
- Test agent (§4.1): a masked rollout is "masked from the policy update *and group statistics*": it is left
  out of the mean (and std) and its advantage is 0.
- Repair agent (App. A.2): zero advantage is "a final advantage override *after* any group centering or
  normalization, not a replacement of the raw reward by zero": the masked rollout's raw reward is in the
  mean (and std); its own advantage is then set to 0.

`GRPOConfig.std_normalization=True` divides the centered rewards by the sample standard deviation
(ddof=1, as TRL and the reference trainer do) of the same rollouts that formed the mean; a group whose
statistics set has fewer than two rollouts or zero spread is only centered (its advantages are already 0).
Pure: no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from execcritic.config import PAPER, GRPOConfig


class _Scored(Protocol):
    @property
    def reward(self) -> float: ...

    @property
    def masked(self) -> bool: ...


@dataclass(frozen=True)
class GroupAdvantages:
    """Per-rollout advantages (input order) and the statistics they came from. `mean`/`std` are None when
    no rollout entered the statistics (or, for `std`, when it was not used)."""

    advantages: tuple[float, ...]
    mean: float | None
    std: float | None
    n_statistics: int


def group_advantages(rewards: Sequence[float], masked: Sequence[bool], *, masked_in_statistics: bool,
                     config: GRPOConfig = PAPER.grpo, excluded: Sequence[bool] | None = None) -> GroupAdvantages:
    """reward - group mean (optionally / group std); masked rollouts get 0.

    `masked_in_statistics=False` is the Test-agent rule, True the Repair-agent rule (module docstring).
    `excluded`: masked rollouts left out of the statistics whatever the rule (aborted Repair rollouts under
    `grpo.aborted_baseline='exclude'`, see `aborted_out_of_baseline`)."""
    if len(rewards) != len(masked):
        raise ValueError(f"{len(rewards)} rewards but {len(masked)} mask flags")
    out = list(excluded) if excluded is not None else [False] * len(rewards)
    if len(out) != len(rewards) or any(x and not m for x, m in zip(out, masked)):
        raise ValueError("excluded needs one flag per rollout, and only masked rollouts can be excluded")
    for r in rewards:
        if not math.isfinite(r):
            raise ValueError(f"non-finite reward {r!r}")
    stats = [float(r) for r, m, x in zip(rewards, masked, out) if not x and (masked_in_statistics or not m)]
    if not stats:
        return GroupAdvantages(tuple(0.0 for _ in rewards), None, None, 0)
    # exact arithmetic: a group of equal rewards gets advantages of exactly 0, not float dust
    mean = sum(map(Fraction, stats)) / len(stats)
    std = None
    scale = 1.0
    if config.std_normalization:
        std = statistics.stdev(stats) if len(stats) >= 2 else 0.0
        if std > 0:
            scale = std
    adv = tuple(0.0 if m else float(Fraction(float(r)) - mean) / scale for r, m in zip(rewards, masked))
    return GroupAdvantages(adv, float(mean), std, len(stats))


def aborted_out_of_baseline(role: str, aborted: Sequence[bool], config: GRPOConfig = PAPER.grpo) -> list[bool] | None:
    """`group_advantages`' `excluded` for a group: the aborted Repair rollouts under `aborted_baseline='exclude'`
    (None: nothing beyond the role's rule; a Test rollout that aborted is masked and out of the mean anyway)."""
    if role != "repair" or config.aborted_baseline == "invalid_level":
        return None
    if config.aborted_baseline != "exclude":
        raise ValueError(f"grpo.aborted_baseline must be 'invalid_level' or 'exclude', got {config.aborted_baseline!r}")
    return [bool(a) for a in aborted]


def advantages_for_test_agent(breakdowns: Sequence[_Scored],
                              config: GRPOConfig = PAPER.grpo) -> GroupAdvantages:
    """Test rule (§4.1): masked rollouts are excluded from the group statistics and get 0."""
    return group_advantages([b.reward for b in breakdowns], [b.masked for b in breakdowns],
                            masked_in_statistics=False, config=config)


def advantages_for_repair_agent(breakdowns: Sequence[_Scored],
                                config: GRPOConfig = PAPER.grpo) -> GroupAdvantages:
    """Repair rule (App. A.2): masked rollouts enter the statistics with their raw reward, then get 0."""
    return group_advantages([b.reward for b in breakdowns], [b.masked for b in breakdowns],
                            masked_in_statistics=True, config=config)
