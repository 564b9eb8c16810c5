"""Every knob the paper fixes, as one named value whose default is the paper's.

Deviations are made by constructing a config with other values (they are recorded in every result
manifest), never by editing code paths. Sources: paper §3, Appendix A.3/A.4, B.1, B.3, Tables 7-9.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HarnessConfig:
    """Fail-closed execution of a Test bundle (Appendix B.1)."""

    test_timeout_s: float = 240.0          # Table 8: repair test timeout 240 s (also used for gate checks)
    setup_timeout_s: float = 600.0         # Table 8: environment setup 600 s
    memory_limit_mb: int = 4096            # per check; exceeding it is `out_of_memory`, never a verdict
    output_tail_chars: int = 8000          # bounded output kept on an Execution record
    max_test_patch_bytes: int = 200_000    # a larger test.patch is rejected ("huge patch")
    max_command_chars: int = 4000
    max_contract_field_chars: int = 4000


@dataclass(frozen=True)
class TestAgentConfig:
    """Learn to Test episode (paper §3.1, Listing 2, Table 7)."""

    __test__ = False  # not a pytest test class

    max_submissions: int = 5               # "at most 5 submission attempts"
    max_turns: int = 60                    # "within 60 turns"
    max_output_tokens: int = 8192          # Test agent sampling, max output tokens
    episode_timeout_s: float = 900.0       # Table 7: 900 s per generation episode
    context_tokens: int = 48_000           # Table 7: 48k context
    diagnostics_chars: int = 6000          # bounded Base-gate diagnostics returned to the agent


@dataclass(frozen=True)
class RepairConfig:
    """Test to Improve controller (paper §3.2, Eq. 10-11, Listings 4-12, Table 9)."""

    round0_turns: int = 200                # Round 0 direct solve
    revision_rounds: int = 5               # at most five feedback-guided revision rounds
    turns_per_round: int = 40              # 40 turns per revision round; forced CHECK after 40 turns
    feedback_chars: int = 6000             # generated-test feedback envelope cap
    apply_diagnostics_chars: int = 12_000  # patch-application diagnostics cap (Listing 12)
    temperature: float = 0.6               # Repair evaluation sampling temperature
    runs_per_source: int = 3               # resolved rates are means over 3 Repair runs
    context_tokens: int = 65_536


@dataclass(frozen=True)
class TestRewardConfig:
    """Eq. 5: Test-agent reward levels and the turn penalty."""

    __test__ = False

    no_valid_submission: float = -0.2
    not_base_to_gold: float = 0.0
    q_low_ba: float = 0.2                  # Q=1 and BA < 0.8
    q_mid_ba: float = 0.5                  # Q=1 and 0.8 <= BA < 1
    q_full_ba: float = 1.0                 # Q=1 and BA = 1
    ba_mid_threshold: float = 0.8
    max_candidates: int = 8                # <= 8 deduplicated labeled candidates
    turn_penalty_margin: int = 8           # > 8 turns longer than the shortest same-level rollout
    turn_penalty_factor: float = 0.5


@dataclass(frozen=True)
class RepairRewardConfig:
    """Eq. 6: Repair-agent reward levels."""

    invalid: float = 0.0                   # invalid/missing patch or forbidden test modification
    usable_selected_fails: float = 0.1
    selected_passes_official_fails: float = 0.2
    resolved_after_revision: float = 1.0
    resolved_at_round0: float = 1.5


@dataclass(frozen=True)
class GRPOConfig:
    """GRPO settings shared by both agents (§4, Tables 7-8)."""

    std_normalization: bool = False        # group-mean subtraction, no std division
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    learning_rate: float = 1e-6
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    weight_decay: float = 0.1
    groups_per_step: int = 16              # DAPO dynamic sampling keeps 16 non-zero-variance groups
    rollouts_per_group: int = 8            # x 8 rollouts = 128 per step
    test_agent_steps: int = 200
    repair_agent_steps: int = 100
    sft_trajectories: int = 5000


@dataclass(frozen=True)
class ProtocolConfig:
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    test_agent: TestAgentConfig = field(default_factory=TestAgentConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)
    test_reward: TestRewardConfig = field(default_factory=TestRewardConfig)
    repair_reward: RepairRewardConfig = field(default_factory=RepairRewardConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def deviations(self) -> dict[str, tuple[Any, Any]]:
        """Fields that differ from the paper's defaults: {'repair.turns_per_round': (40, 30)}."""
        paper = ProtocolConfig().to_dict()
        mine = self.to_dict()
        out: dict[str, tuple[Any, Any]] = {}
        for section, values in mine.items():
            for key, value in values.items():
                if paper[section][key] != value:
                    out[f"{section}.{key}"] = (paper[section][key], value)
        return out


PAPER = ProtocolConfig()
