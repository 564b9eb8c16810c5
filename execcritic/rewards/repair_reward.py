"""Eq. 6: the Repair-agent terminal reward (paper §4.2, Figure 4b, Table 8d, App. A.2).

Decision order (Figure 4b): a missing/invalid terminal patch or a forbidden test modification gets 0; for a
usable patch with a *valid* terminal execution of the selected training test, z=FAIL gets 0.1 "regardless of
the official outcome", z=PASS with official u=FAIL gets 0.2, and z=PASS with u=PASS gets 1.0 after revision
or 1.5 at Round 0.

Masking differs from the Test agent's (App. A.2): "If the final test execution cannot produce a valid outcome
... the affected Repair trajectory receives advantage A(τ)=0. This is a final advantage override after any
group centering or normalization, not a replacement of the raw reward by zero." So a masked Repair rollout
keeps a raw reward that *enters* the group mean (see `advantages.advantages_for_repair_agent`). Eq. 6 has no
branch for an unknown z and the paper does not say what that raw reward is, so it is one named choice,
`RepairRewardConfig.masked_raw_reward` (recorded in every manifest as a choice the paper leaves open):
- "lower_bound" (default): the smallest Eq. 6 value consistent with what is known - a usable patch whose
  terminal test gave no verdict gets 0.1 (z could be FAIL, "regardless of the official outcome");
- "official_stand_in": z := u (the official verdict stands in for the missing one: the selected test is one
  of the official F2P tests, so u=PASS suggests z=PASS), 0.1 when u is unknown too.
A valid z=PASS whose official evaluation produced no verdict (u unknown) cannot be placed between 0.2 and
1.0/1.5 either; Eq. 6 is stated "for valid terminal evaluations", so it is masked too, with 0.2 (the known
lower bound) under both choices. A z=FAIL needs no official verdict (0.1 regardless). A rollout aborted before
any verdict (`aborted_raw_reward`, used by the group step of both engines) brings the invalid level, 0.

Pure: no I/O. Numbers come from `RepairRewardConfig` (paper defaults).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from execcritic.config import PAPER, RepairRewardConfig

MASKED_RAW_REWARDS = ("lower_bound", "official_stand_in")
VERDICTS = ("PASS", "FAIL", "INVALID")
"""Terminal selected-test execution: a valid PASS/FAIL verdict, or INVALID (operational, no verdict)."""


class RepairLevel(str, enum.Enum):
    """The branches of Eq. 6 (Table 8d rows)."""

    INVALID_PATCH = "invalid_patch"                          # missing or invalid terminal patch: 0
    FORBIDDEN_TEST_MODIFICATION = "forbidden_test_modification"  # 0
    SELECTED_FAILS = "usable_selected_fails"                 # 0.1
    SELECTED_PASSES_OFFICIAL_FAILS = "selected_passes_official_fails"  # 0.2
    RESOLVED_AFTER_REVISION = "resolved_after_revision"      # 1.0
    RESOLVED_AT_ROUND0 = "resolved_at_round0"                # 1.5


@dataclass(frozen=True)
class RepairRollout:
    """The terminal facts of one Repair rollout.

    `patch_usable`: a terminal patch exists and applies to Base. `forbidden_test_edit`: it touches tests,
    runner configuration or start-up hooks (SPEC §2.4). `selected_test`: "PASS" | "FAIL" | "INVALID" for the
    terminal execution of the selected training test on the terminal patch (None only when the patch is not
    usable: nothing was run). `official_resolved`: V*(p_t), None when the official evaluation produced no
    verdict. `at_round0`: the terminal patch is p_0 (t = 0 in Eq. 6: no feedback-guided revision round was
    started).
    """

    patch_usable: bool
    forbidden_test_edit: bool = False
    selected_test: str | None = None
    official_resolved: bool | None = None
    at_round0: bool = False

    def __post_init__(self) -> None:
        if self.selected_test is not None and self.selected_test not in VERDICTS:
            raise ValueError(f"RepairRollout.selected_test must be one of {VERDICTS} or None, got "
                             f"{self.selected_test!r}")
        if self.patch_usable and not self.forbidden_test_edit and self.selected_test is None:
            raise ValueError("a usable terminal patch needs its terminal selected-test execution: pass "
                             "'INVALID' when it produced no verdict")


@dataclass(frozen=True)
class RepairRewardBreakdown:
    """Eq. 6 for one rollout. `z`/`u`: selected-test and official verdicts ("PASS"/"FAIL"/None when there is
    no valid one). `reward` is the raw reward (it enters the group mean even when `masked`)."""

    patch_usable: bool
    forbidden_test_edit: bool
    z: str | None
    u: str | None
    at_round0: bool
    level: RepairLevel
    reward: float
    masked: bool
    mask_reason: str | None


def _verdict(resolved: bool | None) -> str | None:
    return None if resolved is None else ("PASS" if resolved else "FAIL")


def _branch(z: str, u: str | None, at_round0: bool, config: RepairRewardConfig) -> tuple[RepairLevel, float]:
    if z == "FAIL":
        return RepairLevel.SELECTED_FAILS, config.usable_selected_fails
    if u != "PASS":
        return RepairLevel.SELECTED_PASSES_OFFICIAL_FAILS, config.selected_passes_official_fails
    if at_round0:
        return RepairLevel.RESOLVED_AT_ROUND0, config.resolved_at_round0
    return RepairLevel.RESOLVED_AFTER_REVISION, config.resolved_after_revision


def aborted_raw_reward(config: RepairRewardConfig = PAPER.repair_reward) -> float:
    """The raw reward an aborted Repair rollout (no verdict at all) brings into the group mean: Eq. 6's invalid
    level, under either `masked_raw_reward` choice (nothing is known that could raise it)."""
    return config.invalid


def repair_reward(rollout: RepairRollout,
                  config: RepairRewardConfig = PAPER.repair_reward) -> RepairRewardBreakdown:
    """Eq. 6 in Figure 4b's decision order; masking as in App. A.2 (module docstring)."""
    if config.masked_raw_reward not in MASKED_RAW_REWARDS:
        raise ValueError(f"repair_reward.masked_raw_reward must be one of {MASKED_RAW_REWARDS}, got "
                         f"{config.masked_raw_reward!r}")
    u = _verdict(rollout.official_resolved)

    def result(level: RepairLevel, reward: float, z: str | None,
               reason: str | None = None) -> RepairRewardBreakdown:
        return RepairRewardBreakdown(rollout.patch_usable, rollout.forbidden_test_edit, z, u,
                                     rollout.at_round0, level, reward, reason is not None, reason)

    if rollout.forbidden_test_edit:
        return result(RepairLevel.FORBIDDEN_TEST_MODIFICATION, config.invalid, None)
    if not rollout.patch_usable:
        return result(RepairLevel.INVALID_PATCH, config.invalid, None)
    if rollout.selected_test == "INVALID":
        if u is None or config.masked_raw_reward == "lower_bound":
            why = "" if u is not None else " (official verdict unavailable too)"
            return result(RepairLevel.SELECTED_FAILS, config.usable_selected_fails, None,
                          f"terminal_test_invalid{why}")
        level, reward = _branch(u, u, rollout.at_round0, config)
        return result(level, reward, None, "terminal_test_invalid")
    z = rollout.selected_test
    assert z is not None  # __post_init__
    if z == "PASS" and u is None:
        level, reward = _branch(z, u, rollout.at_round0, config)
        return result(level, reward, z, "official_evaluation_invalid")
    level, reward = _branch(z, u, rollout.at_round0, config)
    return result(level, reward, z)


def group_repair_rewards(rollouts: Sequence[RepairRollout],
                         config: RepairRewardConfig = PAPER.repair_reward) -> list[RepairRewardBreakdown]:
    """Eq. 6 for each rollout of one issue group (no cross-rollout term, unlike Eq. 5's turn slack)."""
    return [repair_reward(r, config) for r in rollouts]
