"""Eq. 5 (Test reward), Eq. 6 (Repair reward), GRPO advantages and DAPO dynamic sampling, checked against
the paper's statements: hand-computed boundary cases plus hypothesis properties that restate each rule
independently of the implementation's code path."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from execcritic.config import GRPOConfig, RepairRewardConfig, TestRewardConfig
from execcritic.rewards import (
    DropReason,
    DynamicSampler,
    RepairLevel,
    RepairRollout,
    TestLevel,
    TestRollout,
    advantages_for_repair_agent,
    advantages_for_test_agent,
    balanced_accuracy,
    drop_reason,
    eq5_level,
    group_advantages,
    group_repair_rewards,
    group_test_rewards,
    repair_reward,
)

CFG = TestRewardConfig()
RCFG = RepairRewardConfig()


def q1(tp=0, fn=0, tn=0, fp=0, turns=10, errors=0) -> TestRollout:
    """A valid submission with clean Base failure and Gold pass (Q=1)."""
    return TestRollout(True, True, True, tp=tp, fn=fn, tn=tn, fp=fp, operational_errors=errors, turns=turns)


# ---- balanced accuracy ------------------------------------------------------------------------------


@pytest.mark.parametrize("counts, tpr, tnr, ba", [
    ((2, 0, 2, 0), 1, 1, 1),
    ((1, 1, 1, 1), Fraction(1, 2), Fraction(1, 2), Fraction(1, 2)),
    ((3, 2, 1, 0), Fraction(3, 5), 1, Fraction(4, 5)),
    ((4, 0, 0, 0), 1, 0, Fraction(1, 2)),      # negative class absent: its recall is 0
    ((0, 0, 0, 3), 0, 0, 0),                   # positive class absent, every negative passes
    ((0, 0, 5, 0), 0, 1, Fraction(1, 2)),
    ((0, 0, 0, 0), 0, 0, 0),                   # no valid candidate execution at all
])
def test_balanced_accuracy_cases(counts, tpr, tnr, ba):
    assert balanced_accuracy(*counts) == (tpr, tnr, ba)


counts_st = st.tuples(*[st.integers(0, 8)] * 4).filter(lambda c: sum(c) <= 8)


@given(counts_st)
def test_single_class_pool_has_ba_at_most_half(c):
    """§4.1: 'a single-class candidate pool has BA <= 0.5 under this convention'."""
    tp, fn, tn, fp = c
    _, _, ba = balanced_accuracy(tp, fn, tn, fp)
    if tp + fn == 0 or tn + fp == 0:
        assert ba <= Fraction(1, 2)
    assert (ba == 1) == (tp > 0 and tn > 0 and fn == 0 and fp == 0)


# ---- Eq. 5 levels -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout, level, reward", [
    (TestRollout(False, turns=5), TestLevel.NO_VALID_SUBMISSION, -0.2),
    (TestRollout(True, False, True, tp=2, tn=2), TestLevel.NOT_BASE_TO_GOLD, 0.0),   # B = 0
    (TestRollout(True, True, False, tp=2, tn=2), TestLevel.NOT_BASE_TO_GOLD, 0.0),   # G = 0
    (TestRollout(True, False, False), TestLevel.NOT_BASE_TO_GOLD, 0.0),
    (q1(tp=2, tn=2), TestLevel.Q_FULL_BA, 1.0),                 # BA = 1
    (q1(tp=3, fn=2, tn=1), TestLevel.Q_MID_BA, 0.5),            # BA = (3/5 + 1)/2 = 0.8 exactly
    (q1(tp=4, fn=1, tn=4, fp=1), TestLevel.Q_MID_BA, 0.5),      # BA = 0.8 exactly
    (q1(tp=1, tn=4, fp=1), TestLevel.Q_MID_BA, 0.5),            # BA = 0.9
    (q1(tp=7, fn=1), TestLevel.Q_LOW_BA, 0.2),                  # single class: BA = 7/16
    (q1(tp=3, fn=1, tn=3, fp=1), TestLevel.Q_LOW_BA, 0.2),      # BA = 0.75
    (q1(tp=5, fn=2, tn=1), TestLevel.Q_MID_BA, 0.5),            # BA = (5/7 + 1)/2 = 6/7
    (q1(), TestLevel.Q_LOW_BA, 0.2),                            # Q = 1 with no valid candidate run: BA = 0
])
def test_eq5_levels(rollout, level, reward):
    assert eq5_level(rollout) == (level, reward)


def test_eq5_just_below_the_mid_threshold():
    # BA = (7/9 + 9/11)/2 = 0.7979..: just below 0.8
    r = q1(tp=7, fn=2, tn=9, fp=2)
    assert balanced_accuracy(7, 2, 9, 2)[2] < Fraction(4, 5)
    assert eq5_level(r) == (TestLevel.Q_LOW_BA, 0.2)


def test_eq5_values_and_threshold_come_from_the_config():
    cfg = dataclasses.replace(CFG, ba_mid_threshold=0.75, q_mid_ba=0.6, no_valid_submission=-1.0)
    assert eq5_level(q1(tp=3, fn=1, tn=3, fp=1), cfg) == (TestLevel.Q_MID_BA, 0.6)
    assert eq5_level(TestRollout(False), cfg) == (TestLevel.NO_VALID_SUBMISSION, -1.0)


def _expected_level(r: TestRollout) -> float:
    """Eq. 5 restated with exact rationals from the paper's table (Table 7d)."""
    if not r.valid_submission:
        return -0.2
    if not (r.base_clean_fail and r.gold_pass):
        return 0.0
    pos, neg = r.tp + r.fn, r.tn + r.fp
    ba = (Fraction(r.tp, pos) if pos else 0) / 2 + (Fraction(r.tn, neg) if neg else 0) / 2
    return 1.0 if ba == 1 else 0.5 if ba >= Fraction(8, 10) else 0.2


rollout_st = st.one_of(
    st.builds(TestRollout, st.just(False), turns=st.integers(0, 60)),
    st.builds(lambda b, g, c, e, t: TestRollout(True, b, g, *c, operational_errors=e, turns=t),
              st.booleans(), st.booleans(), counts_st, st.integers(0, 1), st.integers(0, 60)),
).filter(lambda r: r.candidates_run <= 8)


@given(rollout_st)
def test_eq5_level_matches_the_table(r):
    assert eq5_level(r)[1] == _expected_level(r)


def test_inconsistent_test_rollouts_are_rejected():
    with pytest.raises(ValueError):
        TestRollout(False, base_clean_fail=True)
    with pytest.raises(ValueError):
        TestRollout(False, tp=1)
    with pytest.raises(ValueError):
        TestRollout(True, True, True, tp=-1)
    with pytest.raises(ValueError, match="cap"):
        group_test_rewards([q1(tp=5, tn=4)])  # 9 candidates > the Table 7c cap of 8


# ---- turn slack -------------------------------------------------------------------------------------


def test_turn_slack_margin_is_strict_and_per_level():
    rs = [q1(tp=1, tn=1, turns=10),   # 1.0, shortest of its level
          q1(tp=1, tn=1, turns=18),   # 1.0, exactly 8 longer: kept
          q1(tp=1, tn=1, turns=19),   # 1.0, 9 longer: halved
          q1(tp=1, tn=1, fp=1, turns=40),   # BA = (1 + 1/2)/2 = 0.75: the 0.2 level, alone in it
          q1(tp=3, tn=4, fp=1, turns=30),   # BA = (1 + 3/4)/2 = 0.875: the 0.5 level, alone: never penalized
          TestRollout(True, True, False, turns=60),   # level 0: never scaled
          TestRollout(False, turns=2)]                # -0.2: never scaled
    out = group_test_rewards(rs)
    assert [b.final for b in out] == [1.0, 1.0, 0.5, 0.2, 0.5, 0.0, -0.2]
    assert [b.turn_penalized for b in out] == [False, False, True, False, False, False, False]
    assert out[2].shortest_level_turns == 10 and out[4].shortest_level_turns == 30
    # the 40-turn 0.2-level rollout is compared with its own level only, not with the 10-turn 1.0 rollout
    assert out[3].level == TestLevel.Q_LOW_BA and out[3].shortest_level_turns == 40


def test_masked_rollout_is_not_the_turn_reference():
    rs = [q1(tp=1, tn=1, turns=3, errors=1), q1(tp=1, tn=1, turns=20), q1(tp=1, tn=1, turns=29)]
    out = group_test_rewards(rs)
    assert out[0].masked and out[0].mask_reason.startswith("candidate_operational_error")
    assert [b.final for b in out[1:]] == [1.0, 0.5]  # reference is 20 (unmasked), not 3


def test_turn_slack_uses_the_config():
    cfg = dataclasses.replace(CFG, turn_penalty_margin=2, turn_penalty_factor=0.25)
    out = group_test_rewards([q1(tp=1, tn=1, turns=10), q1(tp=1, tn=1, turns=13)], cfg)
    assert [b.final for b in out] == [1.0, 0.25]


@settings(max_examples=200)
@given(st.lists(rollout_st, min_size=1, max_size=8))
def test_turn_slack_property(group):
    """§4.1: 'Within each positive reward level, a rollout that exceeds the shortest rollout by more than
    eight turns receives half of its original reward', the shortest taken among unmasked same-level
    rollouts of the group; masked rollouts are left as they are."""
    out = group_test_rewards(group)
    for r, b in zip(group, out):
        level_reward = _expected_level(r)
        assert b.level_reward == level_reward
        assert b.masked == (r.operational_errors > 0)
        same = [o.turns for o, ob in zip(group, out) if ob.level == b.level and not ob.masked]
        penalize = (not b.masked) and level_reward > 0 and r.turns - min(same) > 8
        assert b.final == (level_reward * 0.5 if penalize else level_reward)
        assert b.Q == int(r.base_clean_fail and r.gold_pass)


# ---- Eq. 6 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout, level, reward, masked", [
    (RepairRollout(False), RepairLevel.INVALID_PATCH, 0.0, False),
    (RepairRollout(True, True, "PASS", True, True), RepairLevel.FORBIDDEN_TEST_MODIFICATION, 0.0, False),
    (RepairRollout(False, True), RepairLevel.FORBIDDEN_TEST_MODIFICATION, 0.0, False),
    # a valid selected-test failure is 0.1 regardless of the official outcome
    (RepairRollout(True, False, "FAIL", True, True), RepairLevel.SELECTED_FAILS, 0.1, False),
    (RepairRollout(True, False, "FAIL", False), RepairLevel.SELECTED_FAILS, 0.1, False),
    (RepairRollout(True, False, "FAIL", None), RepairLevel.SELECTED_FAILS, 0.1, False),
    (RepairRollout(True, False, "PASS", False, True), RepairLevel.SELECTED_PASSES_OFFICIAL_FAILS, 0.2, False),
    (RepairRollout(True, False, "PASS", True, False), RepairLevel.RESOLVED_AFTER_REVISION, 1.0, False),
    (RepairRollout(True, False, "PASS", True, True), RepairLevel.RESOLVED_AT_ROUND0, 1.5, False),
    # operationally invalid terminal test: masked, raw reward by z := u
    # masked_raw_reward "lower_bound" (the default): a usable patch without a test verdict brings 0.1, whatever u
    (RepairRollout(True, False, "INVALID", True, True), RepairLevel.SELECTED_FAILS, 0.1, True),
    (RepairRollout(True, False, "INVALID", False), RepairLevel.SELECTED_FAILS, 0.1, True),
    (RepairRollout(True, False, "INVALID", None), RepairLevel.SELECTED_FAILS, 0.1, True),
    # a valid selected pass whose official evaluation has no verdict
    (RepairRollout(True, False, "PASS", None, True), RepairLevel.SELECTED_PASSES_OFFICIAL_FAILS, 0.2, True),
])
def test_eq6_branches(rollout, level, reward, masked):
    b = repair_reward(rollout)
    assert (b.level, b.reward, b.masked) == (level, reward, masked)
    assert (b.mask_reason is not None) == masked


def test_eq6_values_come_from_the_config():
    cfg = dataclasses.replace(RCFG, resolved_at_round0=1.0, usable_selected_fails=0.05)
    assert repair_reward(RepairRollout(True, False, "PASS", True, True), cfg).reward == 1.0
    assert repair_reward(RepairRollout(True, False, "FAIL", True), cfg).reward == 0.05


def test_repair_rollout_input_checks():
    with pytest.raises(ValueError):
        RepairRollout(True, False, None)      # usable patch, terminal test never reported
    with pytest.raises(ValueError):
        RepairRollout(True, False, "pass")    # not a verdict name


repair_st = st.builds(RepairRollout, st.booleans(), st.booleans(),
                      st.sampled_from(["PASS", "FAIL", "INVALID"]), st.sampled_from([True, False, None]),
                      st.booleans())


@given(repair_st)
def test_eq6_property(r):
    b = repair_reward(r)
    if r.forbidden_test_edit or not r.patch_usable:
        assert (b.reward, b.masked) == (0.0, False)
        return
    no_verdict = r.selected_test == "INVALID" or (r.selected_test == "PASS" and r.official_resolved is None)
    assert b.masked == no_verdict
    if r.selected_test == "FAIL":
        assert b.reward == 0.1
    elif r.selected_test == "PASS":
        assert b.reward == (0.2 if not r.official_resolved else 1.5 if r.at_round0 else 1.0)
    assert b.reward in (0.1, 0.2, 1.0, 1.5)


# ---- advantages -------------------------------------------------------------------------------------


def test_repair_masked_enters_the_mean_and_test_masked_does_not():
    rewards, masked = [1.5, 0.1, 0.1, 1.0], [False, False, False, True]
    rep = group_advantages(rewards, masked, masked_in_statistics=True)
    assert rep.mean == pytest.approx(0.675) and rep.n_statistics == 4
    assert rep.advantages == pytest.approx((0.825, -0.575, -0.575, 0.0))
    tst = group_advantages(rewards, masked, masked_in_statistics=False)
    assert tst.mean == pytest.approx(1.7 / 3) and tst.n_statistics == 3
    assert tst.advantages == pytest.approx((1.5 - 1.7 / 3, 0.1 - 1.7 / 3, 0.1 - 1.7 / 3, 0.0))


def test_std_knob_is_real():
    rewards, masked = [1.0, 0.0, 0.0, 0.0], [False] * 4
    plain = group_advantages(rewards, masked, masked_in_statistics=False)
    assert plain.advantages == pytest.approx((0.75, -0.25, -0.25, -0.25)) and plain.std is None
    # sample std (ddof=1) of [1,0,0,0] = sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    scaled = group_advantages(rewards, masked, masked_in_statistics=False,
                              config=GRPOConfig(std_normalization=True))
    assert scaled.std == pytest.approx(0.5)
    assert scaled.advantages == pytest.approx((1.5, -0.5, -0.5, -0.5))
    flat = group_advantages([0.2] * 4, masked, masked_in_statistics=False,
                            config=GRPOConfig(std_normalization=True))
    assert flat.advantages == (0.0, 0.0, 0.0, 0.0)


def test_all_masked_group_has_zero_advantages():
    out = group_advantages([1.0, 0.5], [True, True], masked_in_statistics=False)
    assert out.advantages == (0.0, 0.0) and out.mean is None


rewards_st = st.lists(st.tuples(st.sampled_from([-0.2, 0.0, 0.1, 0.2, 0.25, 0.5, 1.0, 1.5]), st.booleans()),
                      min_size=1, max_size=8)


@given(rewards_st, st.booleans(), st.booleans())
def test_advantage_properties(pairs, repair_rule, std_norm):
    rewards = [r for r, _ in pairs]
    masked = [m for _, m in pairs]
    cfg = GRPOConfig(std_normalization=std_norm)
    out = group_advantages(rewards, masked, masked_in_statistics=repair_rule, config=cfg)
    stats = [r for r, m in pairs if repair_rule or not m]
    for a, m in zip(out.advantages, masked):
        if m:
            assert a == 0.0
    if not stats:
        assert all(a == 0.0 for a in out.advantages)
        return
    exact = [Fraction(r) for r in stats]
    mean = sum(exact) / len(exact)
    sd = 1.0
    if std_norm and len(stats) > 1:
        var = sum((r - mean) ** 2 for r in exact) / (len(exact) - 1)
        sd = math.sqrt(var) if var > 0 else 1.0
    for a, r, m in zip(out.advantages, rewards, masked):
        if not m:
            assert a == pytest.approx(float(Fraction(r) - mean) / sd, abs=1e-9)
            if len(set(stats)) == 1:
                assert a == 0.0  # equal rewards: exactly no signal
    if not repair_rule and not std_norm:
        assert sum(out.advantages) == pytest.approx(0.0, abs=1e-9)  # centered over the unmasked rollouts


@given(st.lists(rollout_st, min_size=2, max_size=8))
def test_test_rule_masked_reward_never_moves_the_others(group):
    """A masked Test rollout is out of the group statistics: changing its candidates/turns changes nothing
    for its siblings."""
    out = advantages_for_test_agent(group_test_rewards(group))
    bumped = [dataclasses.replace(r, turns=0, tp=0, fn=0, tn=0, fp=0) if r.operational_errors else r
              for r in group]
    bumped = [dataclasses.replace(r, operational_errors=1) if o.operational_errors else r
              for r, o in zip(bumped, group)]
    again = advantages_for_test_agent(group_test_rewards(bumped))
    assert again.advantages == pytest.approx(out.advantages)


def test_repair_rule_masked_reward_does_move_the_others():
    a = [RepairRollout(True, False, "PASS", True, True), RepairRollout(True, False, "FAIL", False),
         RepairRollout(True, False, "INVALID", True, True)]
    b = a[:2] + [RepairRollout(True, False, "PASS", None)]
    adv_a = advantages_for_repair_agent(group_repair_rewards(a)).advantages
    adv_b = advantages_for_repair_agent(group_repair_rewards(b)).advantages
    assert adv_a[2] == adv_b[2] == 0.0
    assert adv_a[0] != adv_b[0]  # the masked rollout's raw reward (0.1 vs 0.2) is in the mean
    stand_in = RepairRewardConfig(masked_raw_reward="official_stand_in")
    assert group_repair_rewards(a, stand_in)[2].reward == 1.5      # the other named choice: z := u


# ---- dynamic sampling -------------------------------------------------------------------------------


@pytest.mark.parametrize("rewards, masked, reason", [
    ([0.2, 0.5], [False, False], None),
    ([0.2, 0.2, 0.2], [False, False, False], DropReason.ALL_EQUAL_REWARDS),
    ([0.2, 1.0, 0.2], [False, True, False], DropReason.ALL_EQUAL_REWARDS),  # only a masked one differs
    ([0.2, 1.0], [True, True], DropReason.ALL_MASKED),
    ([0.2, 1.0, 0.0], [True, False, True], DropReason.TOO_FEW_UNMASKED),
    ([-0.2, 0.0, 0.0], [False, False, True], None),
])
def test_drop_reason(rewards, masked, reason):
    assert drop_reason(rewards, masked) == reason


@given(st.lists(st.tuples(st.sampled_from([-0.2, 0.0, 0.2, 0.5, 1.0]), st.booleans()),
                min_size=1, max_size=8))
def test_drop_reason_is_nonzero_unmasked_variance(pairs):
    live = [Fraction(repr(r)) for r, m in pairs if not m]
    variance = (sum((r - sum(live) / len(live)) ** 2 for r in live) / len(live)) if live else 0
    kept = drop_reason([r for r, _ in pairs], [m for _, m in pairs]) is None
    assert kept == (len(live) >= 2 and variance > 0)


def test_sampler_collects_16_groups_of_8():
    sampler: DynamicSampler[int] = DynamicSampler()
    flat, signal, all_masked = [0.2] * 8, [0.2] * 7 + [1.0], [True] * 8
    stream = []
    for i in range(40):
        stream.append((i, [flat, signal, signal, all_masked][i % 4]))
    for i, rewards in stream:
        if sampler.full:
            break
        masked = all_masked if rewards is all_masked else [False] * 8
        sampler.offer(i, rewards, masked)
    assert sampler.full and len(sampler.kept) == 16 and sampler.n_rollouts == 128
    assert sampler.kept == [i for i, r in stream if r is signal][:16]
    assert sampler.stats()["dropped"] == {"all_equal_rewards": 8, "all_masked": 7}
    assert sampler.offered == 16 + 8 + 7
    with pytest.raises(RuntimeError):
        sampler.offer(99, signal, [False] * 8)


def test_sampler_uses_the_config_and_checks_group_size():
    sampler: DynamicSampler[str] = DynamicSampler(GRPOConfig(groups_per_step=2, rollouts_per_group=3))
    with pytest.raises(ValueError):
        sampler.offer("x", [0.0, 1.0], [False, False])
    assert sampler.offer("a", [0.0, 1.0, 1.0], [False] * 3).kept
    d = sampler.offer("b", [0.0, 1.0, 1.0], [False, True, True])
    assert (d.kept, d.reason) == (False, DropReason.TOO_FEW_UNMASKED)
    assert sampler.offer_scored("c", group_repair_rewards([RepairRollout(False), RepairRollout(False),
                                                           RepairRollout(True, False, "FAIL")])).kept
    assert sampler.full and sampler.n_rollouts == 6 and sampler.kept == ["a", "c"]


@given(st.lists(st.lists(st.sampled_from([0.0, 0.2, 1.0]), min_size=8, max_size=8), max_size=60))
def test_sampler_keeps_the_first_signal_groups_in_order(groups):
    sampler: DynamicSampler[int] = DynamicSampler()
    for i, g in enumerate(groups):
        if sampler.full:
            break
        sampler.offer(i, g, [False] * 8)
    expected = [i for i, g in enumerate(groups) if len(set(g)) > 1][:16]
    assert sampler.kept == expected
    assert sampler.offered == (expected[-1] + 1 if len(expected) == 16 else len(groups))
    assert sum(sampler.dropped.values()) + len(sampler.kept) == sampler.offered


# ---- purity -----------------------------------------------------------------------------------------


def test_reward_modules_import_nothing_but_config():
    """Rewards are pure: no sandbox, subprocess or I/O module, and of execcritic only its config."""
    import ast
    from pathlib import Path

    import execcritic.rewards as pkg

    allowed_std = {"__future__", "collections", "collections.abc", "dataclasses", "enum", "fractions", "math",
                   "statistics", "typing"}
    for path in Path(pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                ok = name in allowed_std or name == "execcritic.config" or name.startswith("execcritic.rewards")
                assert ok, f"{path.name} imports {name}"
