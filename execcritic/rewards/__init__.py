"""Rewards and GRPO plumbing of the paper's RL recipe (Eq. 5, Eq. 6, §4, Tables 7-8). Pure: no I/O."""

from execcritic.rewards.advantages import (
    GroupAdvantages,
    advantages_for_repair_agent,
    advantages_for_test_agent,
    group_advantages,
)
from execcritic.rewards.repair_reward import (
    RepairLevel,
    RepairRewardBreakdown,
    RepairRollout,
    aborted_raw_reward,
    group_repair_rewards,
    repair_reward,
)
from execcritic.rewards.sampling import DropReason, DynamicSampler, SamplingDecision, drop_reason
from execcritic.rewards.test_reward import (
    POSITIVE_LEVELS,
    TestLevel,
    TestRewardBreakdown,
    TestRollout,
    TurnSlack,
    balanced_accuracy,
    eq5_level,
    group_test_rewards,
    turn_slack,
)

__all__ = [
    "POSITIVE_LEVELS",
    "DropReason",
    "DynamicSampler",
    "GroupAdvantages",
    "RepairLevel",
    "RepairRewardBreakdown",
    "RepairRollout",
    "SamplingDecision",
    "TestLevel",
    "TestRewardBreakdown",
    "TestRollout",
    "TurnSlack",
    "aborted_raw_reward",
    "advantages_for_repair_agent",
    "advantages_for_test_agent",
    "balanced_accuracy",
    "drop_reason",
    "eq5_level",
    "group_advantages",
    "group_repair_rewards",
    "group_test_rewards",
    "repair_reward",
    "turn_slack",
]
