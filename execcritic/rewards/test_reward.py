"""Eq. 5: the Test-agent reward, computed over the group of K rollouts of one issue (paper §4.1, Table 7d).

Why a group function and not a per-rollout one: the turn slack compares a rollout with the *shortest
rollout of the same reward level in its group* (§4.1: "Within each positive reward level, a rollout that
exceeds the shortest rollout by more than eight turns receives half of its original reward."), so a
rollout's final reward depends on its siblings.

Masking (§4.1, App. A.1): "If any candidate execution encounters an operational error, the entire affected
Test trajectory receives zero advantage and is masked from the policy update and group statistics; the error
is not counted as a correct rejection or as a behavioral failure." A masked rollout is therefore not a
rejection: it keeps its (informational) level, is left out of the turn-slack reference and of the group mean
(`execcritic.rewards.advantages.advantages_for_test_agent`), and gets advantage 0.

Pure: no I/O. Numbers come from `TestRewardConfig` (paper defaults).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from execcritic.config import PAPER, TestRewardConfig


class TestLevel(str, enum.Enum):
    """The five branches of Eq. 5 (names follow `TestRewardConfig`)."""

    __test__ = False

    NO_VALID_SUBMISSION = "no_valid_submission"   # -0.2: completed without a valid submission
    NOT_BASE_TO_GOLD = "not_base_to_gold"         # 0: B=0 or G=0
    Q_LOW_BA = "q_low_ba"                         # 0.2: Q=1, BA < 0.8
    Q_MID_BA = "q_mid_ba"                         # 0.5: Q=1, 0.8 <= BA < 1
    Q_FULL_BA = "q_full_ba"                       # 1.0: Q=1, BA = 1


POSITIVE_LEVELS = frozenset({TestLevel.Q_LOW_BA, TestLevel.Q_MID_BA, TestLevel.Q_FULL_BA})
"""The levels the turn slack applies to (§4.1 "within each positive reward level"): the Q=1 levels."""


@dataclass(frozen=True)
class TestRollout:
    """What the offline audit measured for one Test rollout: the inputs of Eq. 5.

    `valid_submission`: the episode produced a protocol-valid bundle (artifacts validated; §3.1).
    `base_clean_fail` (B) / `gold_pass` (G): Eq. 3; an operationally invalid Base or Gold run counts as 0
    (App. B.1). `tp, fn, tn, fp`: valid executions over the labeled candidates (positive = officially
    correct candidate; tp = correct & PASS, fn = correct & FAIL, tn = incorrect & FAIL, fp = incorrect &
    PASS). `operational_errors`: candidate executions without a verdict. `turns`: model turns of the
    rollout.
    """

    __test__ = False

    valid_submission: bool
    base_clean_fail: bool = False
    gold_pass: bool = False
    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0
    operational_errors: int = 0
    turns: int = 0

    def __post_init__(self) -> None:
        for name in ("tp", "fn", "tn", "fp", "operational_errors", "turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"TestRollout.{name} must be a non-negative int, got {value!r}")
        if not self.valid_submission and (self.base_clean_fail or self.gold_pass or self.candidates_run):
            raise ValueError("TestRollout without a valid submission cannot have Base/Gold outcomes or "
                             "candidate executions (there is no bundle to run)")

    @property
    def candidates_run(self) -> int:
        return self.tp + self.fn + self.tn + self.fp + self.operational_errors


@dataclass(frozen=True)
class TestRewardBreakdown:
    """Everything Eq. 5 used for one rollout. `final` is the reward (after the turn slack); `level_reward`
    is the Eq. 5 value before it. A masked rollout has `final == level_reward` (it is in no group statistic
    and its advantage is 0), `masked=True` and a `mask_reason`."""

    __test__ = False

    B: int
    G: int
    Q: int
    BA: float
    TPR: float
    TNR: float
    turns: int
    level: TestLevel
    level_reward: float
    final: float
    masked: bool
    mask_reason: str | None
    turn_penalized: bool = False
    shortest_level_turns: int | None = None  # shortest unmasked same-level rollout in the group

    @property
    def reward(self) -> float:
        """The reward that enters GRPO (alias of `final`; the Repair breakdown has the same attribute)."""
        return self.final


def balanced_accuracy(tp: int, fn: int, tn: int, fp: int) -> tuple[Fraction, Fraction, Fraction]:
    """(TPR, TNR, BA) exactly, over valid executions. §4.1: "recall set to zero when a class is absent.
    Consequently, a single-class candidate pool has BA <= 0.5"."""
    tpr = Fraction(tp, tp + fn) if tp + fn else Fraction(0)
    tnr = Fraction(tn, tn + fp) if tn + fp else Fraction(0)
    return tpr, tnr, (tpr + tnr) / 2


def _exact(x: float) -> Fraction:
    # the config's 0.8 is the decimal 4/5, not the binary float just above it
    return Fraction(repr(float(x)))


def eq5_level(rollout: TestRollout, config: TestRewardConfig = PAPER.test_reward) -> tuple[TestLevel, float]:
    """Eq. 5 for one rollout, before the turn slack. BA is compared exactly (a rational of counts)."""
    if not rollout.valid_submission:
        return TestLevel.NO_VALID_SUBMISSION, config.no_valid_submission
    if not (rollout.base_clean_fail and rollout.gold_pass):
        return TestLevel.NOT_BASE_TO_GOLD, config.not_base_to_gold
    _, _, ba = balanced_accuracy(rollout.tp, rollout.fn, rollout.tn, rollout.fp)
    if ba == 1:
        return TestLevel.Q_FULL_BA, config.q_full_ba
    if ba >= _exact(config.ba_mid_threshold):
        return TestLevel.Q_MID_BA, config.q_mid_ba
    return TestLevel.Q_LOW_BA, config.q_low_ba


@dataclass(frozen=True)
class TurnSlack:
    """The turn slack's outcome for one rollout: the reward after it, whether it was halved, and the reference
    (the shortest unmasked rollout of the same positive level in the group; None for the other levels)."""

    final: float
    penalized: bool
    reference: int | None


def turn_slack(levels: Sequence[TestLevel], level_rewards: Sequence[float], turns: Sequence[int],
               masked: Sequence[bool], config: TestRewardConfig = PAPER.test_reward) -> list[TurnSlack]:
    """Eq. 5's turn slack over one group, in input order (§4.1: "Within each positive reward level, a rollout
    that exceeds the shortest rollout by more than eight turns receives half of its original reward").

    For a positive level, the reference is the shortest *unmasked* rollout of that same level in this group
    (masked rollouts are "excluded from the group statistics"); a rollout with `turns - shortest >
    turn_penalty_margin` (strictly more than 8) gets `turn_penalty_factor` (0.5) of its level reward. Levels -0.2
    and 0 are never scaled, and neither is a masked rollout. Engines that only see each rollout's level reward
    and turns (the verl estimator) apply the slack with this function too."""
    if not (len(levels) == len(level_rewards) == len(turns) == len(masked)):
        raise ValueError(f"turn_slack needs one level, level reward, turn count and mask flag per rollout, got "
                         f"{len(levels)}, {len(level_rewards)}, {len(turns)}, {len(masked)}")
    shortest: dict[TestLevel, int] = {}
    for level, t, m in zip(levels, turns, masked):
        if level in POSITIVE_LEVELS and not m:
            shortest[level] = min(shortest.get(level, t), t)
    out = []
    for level, reward, t, m in zip(levels, level_rewards, turns, masked):
        ref = shortest.get(level) if level in POSITIVE_LEVELS else None
        penalized = (not m) and ref is not None and t - ref > config.turn_penalty_margin
        out.append(TurnSlack(reward * config.turn_penalty_factor if penalized else reward, penalized, ref))
    return out


def group_test_rewards(rollouts: Sequence[TestRollout],
                 config: TestRewardConfig = PAPER.test_reward) -> list[TestRewardBreakdown]:
    """Eq. 5 plus the turn slack (`turn_slack`) for the K rollouts of one issue, in input order."""
    for i, r in enumerate(rollouts):
        if r.candidates_run > config.max_candidates:
            raise ValueError(f"rollout {i}: {r.candidates_run} candidate executions, more than the cap of "
                             f"{config.max_candidates} deduplicated candidates (Table 7c)")
    levels = [eq5_level(r, config) for r in rollouts]
    masked = [r.operational_errors > 0 for r in rollouts]
    slack = turn_slack([lv for lv, _ in levels], [rw for _, rw in levels], [r.turns for r in rollouts], masked,
                       config)
    out = []
    for r, (level, level_reward), m, sl in zip(rollouts, levels, masked, slack):
        tpr, tnr, ba = balanced_accuracy(r.tp, r.fn, r.tn, r.fp)
        reason = None
        if m:
            reason = (f"candidate_operational_error: {r.operational_errors} of {r.candidates_run} candidate "
                      "executions had no verdict")
        b, g = int(r.base_clean_fail), int(r.gold_pass)
        out.append(TestRewardBreakdown(
            B=b, G=g, Q=b * g, BA=float(ba), TPR=float(tpr), TNR=float(tnr), turns=r.turns, level=level,
            level_reward=level_reward, final=sl.final, masked=m, mask_reason=reason, turn_penalized=sl.penalized,
            shortest_level_turns=sl.reference))
    return out
