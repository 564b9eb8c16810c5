"""Every knob the paper fixes, as one named value whose default is the paper's - the one place each
knob lives.

Each field carries its default, a help text and, where the paper fixes it, its source (TRL's
`GRPOConfig` style). Everything else derives from these dataclasses: the command line (`protocol_options`
generates one option per field that declares a `cli` name, plus `-c PROFILE|FILE.yaml` and `--set
KEY=VALUE` for every field), the YAML profiles in `execcritic/profiles/` (mini-swe-agent's `-c`), and
the manifests' `deviations_from_paper`. Deviations are made by constructing a config with other values
(recorded in every result manifest), never by editing code paths. Sources: paper §3, §4, Appendix
A.3/A.4, B.1, B.3, Tables 7-9.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pydantic
import yaml

from execcritic.errors import InputError
from execcritic.limits import MAX_PATCH_BYTES

PROFILES_DIR = Path(__file__).parent / "profiles"


def knob(default: Any, help: str, *, source: str = "", cli: str = "", choices: tuple[str, ...] = (),
         unstated: bool = False, **bounds: float) -> Any:
    """A config field: its default, what it does, where the paper fixes it, an optional CLI name, and what
    values are valid (`choices`, or pydantic bounds `ge`/`gt`/`le`/`lt`): a negative turn count or a zero
    timeout is refused where it is given, never discovered mid-run. `unstated`: the paper needs a value here
    but does not give one, so the default is this suite's choice; every manifest records it as a deviation
    (`manifest_deviations`)."""
    return field(default=default, metadata={"help": help, "source": source, "cli": cli, "choices": choices,
                                            "bounds": bounds, "unstated": unstated})


@dataclass(frozen=True)
class HarnessConfig:
    """Fail-closed execution of a Test bundle (Appendix B.1) and the limits of every process tree that
    runs repository code (executor, official evaluator, agent workspaces; both backends)."""

    test_timeout_s: float = knob(240.0, "wall-clock limit of one bundle execution (Base gate, audit, CHECK)",
                                 source="Table 8: repair test timeout 240 s", cli="--test-timeout", gt=0, le=86_400)
    setup_timeout_s: float = knob(600.0, "limit for preparing a sandbox run: copying/warming the checkout, "
                                  "starting a container, applying a patch", source="Table 8: setup 600 s", gt=0,
                                  le=86_400)
    memory_limit_mb: int = knob(4096, "memory limit of every process tree that runs repository code; "
                                "exceeding it is `out_of_memory`, never a verdict", cli="--memory-mb", ge=64,
                                le=1_048_576)
    pids_limit: int = knob(1024, "process limit of every process tree that runs repository code; a fork bomb "
                           "ends as a sandbox limit, never a verdict", ge=16, le=4_194_304)
    output_limit_bytes: int = knob(4 * 1024 * 1024, "captured output of one command (head and tail kept, "
                                   "the middle dropped and marked)", ge=1024, le=1 << 30)
    output_tail_chars: int = knob(8000, "bounded output tail kept on an Execution record", ge=0, le=10_000_000)
    max_test_patch_bytes: int = knob(200_000, "a larger test.patch is rejected (`patch.too_large`)", ge=1,
                                     le=MAX_PATCH_BYTES)
    max_command_chars: int = knob(4000, "a longer test_command is rejected (`command.too_long`)", ge=1, le=1_000_000)
    max_contract_field_chars: int = knob(4000, "a longer test_contract.json field is rejected", ge=1, le=1_000_000)
    official_timeout_s: float = knob(1800.0, "wall-clock limit of one official evaluation (all F2P + P2P)",
                                     source="swebench run_evaluation's default timeout", gt=0, le=86_400)
    official_plain_run: bool = knob(True, "grade officially twice: under the reporter and plain (no reporter, no "
                                    "trace of the harness); a resolution they disagree on is `plain_run_disagrees` "
                                    "(a candidate that acts differently when it can tell the harness is there)")
    official_runs_together: bool = knob(True, "run the two official runs at the same time, the plain one in a "
                                        "sandbox of its own opened from the task environment; off: one after the "
                                        "other in one sandbox, in random order")
    reuse_rewritten_tests: bool = knob(True, "serve pytest's rewritten test modules, compiled by a clean Base "
                                       "run and kept by the harness outside the tree, to later runs "
                                       "(harness/rewrite_cache.py); off: every run rewrites them")
    prestart_next_run: bool = knob(True, "start the same command's interpreter, reporter and pytest import "
                                   "ahead of the next execute, which releases it once its patches are applied: "
                                   "after a pytest run in the reset sandbox, or as the run goes in the sandbox's "
                                   "twin (an overlay working copy) in the background (harness/prestart.py; "
                                   "backends that can spawn: local, Docker); off: every run starts cold")


@dataclass(frozen=True)
class WorkspaceConfig:
    """The agents' bash tool (both agents share the loop)."""

    command_timeout_s: float = knob(180.0, "wall-clock limit of one agent bash command; the agent sees a "
                                    "timeout note", cli="--command-timeout", gt=0, le=86_400)
    observation_chars: int = knob(10_000, "an action's output shown to the model is cut to this many "
                                  "characters (head and tail kept)", ge=1, le=10_000_000)


@dataclass(frozen=True)
class TestAgentConfig:
    """Learn to Test episode (paper §3.1, Listing 2, Table 7)."""

    __test__ = False  # not a pytest test class

    max_submissions: int = knob(5, "submission attempts per episode", source="§3.1: at most 5 submission "
                                "attempts", cli="--max-submissions", ge=1, le=1000)
    max_turns: int = knob(60, "model turns per episode", source="§3.1 / Table 7: 60 turns", cli="--test-turns",
                          ge=1, le=100_000)
    max_output_tokens: int = knob(8192, "max output tokens per Test-agent turn", source="Table 9a", ge=1,
                                  le=10_000_000)
    episode_timeout_s: float = knob(900.0, "wall-clock limit of one generation episode",
                                    source="Table 7: 900 s", gt=0, le=604_800)
    context_tokens: int = knob(48_000, "context budget (the model's own window when smaller)",
                               source="Table 7: 48k context", ge=1, le=10_000_000)
    diagnostics_chars: int = knob(6000, "bounded Base-gate diagnostics returned to the agent",
                                  source="Appendix B.1: bounded diagnostics", ge=1, le=10_000_000)


@dataclass(frozen=True)
class RepairConfig:
    """Test to Improve controller (paper §3.2, Eq. 10-11, Listings 4-12, Table 9)."""

    round0_turns: int = knob(200, "Round 0 (direct solve) turns", source="§3.2: 200-turn Round 0",
                             cli="--round0-turns", ge=1, le=100_000)
    revision_rounds: int = knob(5, "feedback-guided revision rounds", source="§3.2: at most 5 rounds",
                                cli="--revision-rounds", ge=0, le=1000)
    turns_per_round: int = knob(40, "turns per revision round; 40 turns without a CHECK force one",
                                source="§3.2: 40 turns per round", cli="--turns-per-round", ge=1, le=100_000)
    feedback_chars: int = knob(6000, "generated-test feedback envelope cap (header always kept)",
                               source="Listing 7: 6,000 characters", ge=1, le=10_000_000)
    apply_diagnostics_chars: int = knob(12_000, "patch-application diagnostics cap (Listing 12)",
                                        source="Listing 12: 12,000 characters", ge=1, le=10_000_000)
    temperature: float = knob(0.6, "Repair evaluation sampling temperature", source="Table 9b", ge=0, le=2)
    runs_per_source: int = knob(3, "Repair runs per (issue, Test source) reusing one bundle; resolved rates "
                                "are means over them", source="§5: means over 3 Repair runs", cli="--runs",
                                ge=1, le=1000)
    context_tokens: int = knob(65_536, "context budget (the model's own window when smaller)",
                               source="Table 8: 65k context", ge=1, le=10_000_000)


@dataclass(frozen=True)
class TestRewardConfig:
    """Eq. 5: Test-agent reward levels and the turn penalty."""

    __test__ = False

    no_valid_submission: float = knob(-0.2, "no valid submission", source="Eq. 5", ge=-100, le=100)
    not_base_to_gold: float = knob(0.0, "B = 0 or G = 0", source="Eq. 5", ge=-100, le=100)
    q_low_ba: float = knob(0.2, "Q = 1 and BA < 0.8", source="Eq. 5", ge=-100, le=100)
    q_mid_ba: float = knob(0.5, "Q = 1 and 0.8 <= BA < 1", source="Eq. 5", ge=-100, le=100)
    q_full_ba: float = knob(1.0, "Q = 1 and BA = 1", source="Eq. 5", ge=-100, le=100)
    ba_mid_threshold: float = knob(0.8, "balanced-accuracy threshold between the low and mid levels",
                                   source="Eq. 5", ge=0, le=1)
    max_candidates: int = knob(8, "deduplicated labeled candidates a bundle is run on", source="§2.3 / Eq. 12",
                               ge=1, le=10_000)
    turn_penalty_margin: int = knob(8, "a rollout more than this many turns longer than the shortest "
                                    "same-level rollout gets the penalty factor", source="§4", ge=0, le=100_000)
    turn_penalty_factor: float = knob(0.5, "reward factor of a too-long rollout", source="§4", ge=0, le=1)

    def bounds(self) -> tuple[float, float]:
        """The smallest and largest reward Eq. 5 can give (a penalized level included): a curve's range."""
        levels = (self.no_valid_submission, self.not_base_to_gold, self.q_low_ba, self.q_mid_ba, self.q_full_ba)
        values = [*levels, *(v * self.turn_penalty_factor for v in levels[2:])]
        return (min(values), max(values))


@dataclass(frozen=True)
class RepairRewardConfig:
    """Eq. 6: Repair-agent reward levels."""

    invalid: float = knob(0.0, "invalid/missing patch or forbidden test modification", source="Eq. 6", ge=-100,
                          le=100)
    usable_selected_fails: float = knob(0.1, "usable patch, selected test fails", source="Eq. 6", ge=-100, le=100)
    selected_passes_official_fails: float = knob(0.2, "selected test passes, official fails", source="Eq. 6",
                                                 ge=-100, le=100)
    resolved_after_revision: float = knob(1.0, "both pass after revision", source="Eq. 6", ge=-100, le=100)
    resolved_at_round0: float = knob(1.5, "both pass at Round 0", source="Eq. 6", ge=-100, le=100)
    masked_raw_reward: str = knob(
        "lower_bound", "raw reward a masked Repair rollout brings into the group mean before its advantage is set "
        "to 0: 'lower_bound' = the smallest Eq. 6 value consistent with what is known (a usable patch whose "
        "terminal test gave no verdict: 0.1; a selected-test PASS without an official verdict: 0.2; an aborted "
        "rollout, where nothing is known: the invalid level 0); 'official_stand_in' = the official verdict "
        "stands in for the missing test verdict (z := u), 0.1 when both are missing, 0 when aborted",
        source="App. A.2 keeps the masked rollout's raw reward in the group mean but does not say what it is",
        unstated=True, choices=("lower_bound", "official_stand_in"))

    def bounds(self) -> tuple[float, float]:
        """The smallest and largest reward Eq. 6 can give: a curve's range."""
        values = (self.invalid, self.usable_selected_fails, self.selected_passes_official_fails,
                  self.resolved_after_revision, self.resolved_at_round0)
        return (min(values), max(values))


@dataclass(frozen=True)
class GRPOConfig:
    """GRPO settings shared by both agents (§4, Tables 7b-c, 8a, 8c)."""

    std_normalization: bool = knob(False, "divide advantages by the group std (the paper does not)",
                                   source="§4: group-mean subtraction, no std division")
    clip_low: float = knob(0.2, "PPO clip epsilon (low)", source="Tables 7b, 8a", gt=0, lt=1)
    clip_high: float = knob(0.28, "PPO clip epsilon (high, DAPO clip-higher)", source="Tables 7b, 8a", gt=0, le=10)
    kl_coef: float = knob(0.0, "KL coefficient", source="Tables 7b, 8a", ge=0, le=100)
    learning_rate: float = knob(1e-6, "learning rate", source="Tables 7b, 8a", gt=0, le=1)
    adam_beta1: float = knob(0.9, "Adam beta1", source="Tables 7b, 8a", ge=0, lt=1)
    adam_beta2: float = knob(0.98, "Adam beta2", source="Tables 7b, 8a", ge=0, lt=1)
    weight_decay: float = knob(0.1, "weight decay", source="Tables 7b, 8a", ge=0, le=10)
    groups_per_step: int = knob(16, "issue groups kept per step by DAPO dynamic sampling (non-zero reward "
                                "variance)", source="Tables 7c, 8c", ge=1, le=100_000)
    rollouts_per_group: int = knob(8, "rollouts per issue group (16 x 8 = 128 per step)",
                                   source="Tables 7c, 8c", ge=2, le=10_000)
    rollout_temperature: float = knob(1.0, "sampling temperature of RL rollouts", source="Tables 7c, 8c", gt=0, le=10)
    rollout_top_p: float = knob(1.0, "top-p of RL rollouts", source="Tables 7c, 8c", gt=0, le=1)
    rollout_top_k: int = knob(-1, "top-k of RL rollouts (-1: disabled)", source="Tables 7c, 8c", ge=-1, le=1_000_000)
    max_groups_offered: int = knob(64, "DAPO oversampling cap: issue groups offered per step (at least "
                                   "groups_per_step). When it is reached the step stops sampling (stop reason "
                                   "`offer_cap`, recorded per step) and trains on the groups it kept; with none kept "
                                   "it changes no weight. A policy without reward variance therefore ends each step "
                                   "instead of sampling forever",
                                   source="§5.1 states no cap; 4 x groups_per_step is ours (slime bounds its "
                                   "oversampling batches too: --over-sampling-batch-size)", ge=1, le=1_000_000)
    aborted_baseline: str = knob(
        "invalid_level", "how an aborted Repair rollout (no verdict at all: an operational failure before scoring) "
        "enters the group baseline before its advantage is set to 0: 'invalid_level' = in the mean with Eq. 6's "
        "invalid reward (0), as a masked rollout enters at its lower bound, so frequent aborts pull the mean down "
        "and shift every unmasked advantage up; 'exclude' = out of the mean (and std), so the others' advantages "
        "sum to zero. Test rollouts: aborted ones are always out (§4.1 masks them from group statistics)",
        source="Table 8b masks aborted rollouts and App. A.2 keeps masked ones in the mean; the paper is silent on "
        "whether an aborted one is in the mean", unstated=True, choices=("invalid_level", "exclude"))


@dataclass(frozen=True)
class SFTConfig:
    """Test-agent supervised initialization (Table 7a, Table 4)."""

    trajectories: int = knob(5000, "teacher trajectories admitted for Test-agent SFT (protocol validity and a "
                             "clean Base failure; Gold never filters)", source="Table 7a", ge=1, le=10_000_000)
    admission: str = knob("qualified", "which Test-agent teacher trajectories SFT admits: `qualified` (a "
                          "protocol-valid bundle that failed cleanly on Base) or `submitted` (a bundle the harness "
                          "accepted and ran on Base, whatever its verdict: for a teacher that demonstrates exploring "
                          "and the protocol rather than the Base failure)", source="Table 7a: qualified",
                          choices=("qualified", "submitted"))
    epochs: float = knob(1.0, "passes over the SFT rows", source="not stated in Table 7a", gt=0, le=10_000)
    batch_size: int = knob(8, "SFT rows per optimizer step", source="not stated in Table 7a", ge=1, le=100_000)
    max_length: int = knob(48_000, "SFT example length cap in tokens (longer rows are truncated)",
                           source="Table 7b: the Test policy's 48k context", ge=1, le=10_000_000)
    learning_rate: float = knob(1e-6, "SFT learning rate (Adam betas and weight decay are the RL actor's)",
                                source="not stated in Table 7a; the RL actor's 1e-6 (Tables 7b, 8a)", unstated=True,
                                gt=0, le=1)


@dataclass(frozen=True)
class TestRLConfig:
    """Test-agent GRPO (Table 7b, 7e)."""

    __test__ = False

    steps: int = knob(200, "GRPO steps (the reported checkpoint)",
                      source="Table 7e: horizon 200, checkpoint 200", ge=1, le=1_000_000)
    lr_horizon_steps: int = knob(200, "GRPO steps the learning-rate schedule spans (a decaying schedule reaches its "
                                 "end here, which may lie beyond `steps`)", source="Table 7e: horizon 200",
                                 ge=1, le=1_000_000)
    lr_schedule: str = knob("constant", "learning-rate schedule", source="Table 7b", choices=('constant', 'cosine'))
    loss_reduction: str = knob("per-token", "policy-loss aggregation: per-token or per-sequence",
                               source="not stated in Table 7; per-token as for the Repair agent (Table 8a)",
                               choices=('per-token', 'per-sequence'))
    save_interval: int = knob(10, "steps between checkpoints", source="Table 7e", ge=1, le=1_000_000)
    global_batch_size: int = knob(32, "rollouts per optimizer update: a step's rollouts are used in minibatches of "
                                  "this size", source="Table 7e: global batch size 32", ge=1, le=1_000_000)
    min_candidates: int = knob(6, "an instance enters the Test RL set with at least this many officially labeled "
                               "candidate patches", source="§5: 'Test-agent training retains instances with at "
                               "least six candidate patches'", ge=1, le=10_000)
    require_both_labels: bool = knob(False, "the Test RL set also requires both a correct and an incorrect candidate",
                                     source="§5 requires this for Repair training only ('additionally')")


@dataclass(frozen=True)
class RepairRLConfig:
    """Repair-agent GRPO (Table 8a-c)."""

    steps: int = knob(100, "GRPO steps (the reported checkpoint)", source="Table 8b: checkpoint 100", ge=1,
                      le=1_000_000)
    lr_horizon_steps: int = knob(300, "GRPO steps the learning-rate schedule spans: the cosine decays to 0 at this "
                                 "step, so the reported checkpoint (`steps`) is a third of the way down",
                                 source="Table 8b: launcher horizon 300, reported checkpoint 100", ge=1, le=1_000_000)
    lr_schedule: str = knob("cosine", "learning-rate schedule", source="Table 8a", choices=('constant', 'cosine'))
    loss_reduction: str = knob("per-token", "policy-loss aggregation: per-token or per-sequence",
                               source="Table 8a", choices=('per-token', 'per-sequence'))
    max_response_tokens: int = knob(6122, "max tokens of one Repair rollout turn", source="Table 8a", ge=1,
                                    le=10_000_000)
    save_interval: int = knob(10, "steps between checkpoints", source="Table 8b", ge=1, le=1_000_000)
    global_batch_size: int = knob(64, "rollouts per optimizer update (minibatches of a step's rollouts)",
                                  source="Table 8b: global batch size 64", ge=1, le=1_000_000)
    min_candidates: int = knob(6, "an instance enters the Repair RL set with at least this many labeled candidates",
                               source="§5: the Test-agent condition, which Repair training 'additionally' extends", ge=1, le=10_000)
    require_both_labels: bool = knob(True, "the Repair RL set requires both correct and incorrect candidates",
                                     source="§5: 'Repair-agent training additionally requires both correct and "
                                     "incorrect candidate patches'")


@dataclass(frozen=True)
class ProtocolConfig:
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)
    test_agent: TestAgentConfig = field(default_factory=TestAgentConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)
    test_reward: TestRewardConfig = field(default_factory=TestRewardConfig)
    repair_reward: RepairRewardConfig = field(default_factory=RepairRewardConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    test_rl: TestRLConfig = field(default_factory=TestRLConfig)
    repair_rl: RepairRLConfig = field(default_factory=RepairRLConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def unstated(self) -> dict[str, Any]:
        """Knobs the paper needs but does not fix (`knob(unstated=True)`): {key: value used}."""
        return {k.key: self.value(k.key) for k in knobs() if k.unstated}

    def value(self, key: str) -> Any:
        section, name = key.split(".", 1)
        return getattr(getattr(self, section), name)

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


# ---- knobs as data: keys, overrides, profiles -----------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    key: str              # "repair.turns_per_round"
    type: type
    default: Any          # the paper's value
    help: str
    source: str
    cli: str              # "--turns-per-round" or ""
    unstated: bool = False  # the paper leaves this open: the default is ours
    choices: tuple[str, ...] = ()
    bounds: tuple[tuple[str, float], ...] = ()   # (("ge", 1),): pydantic bounds

    def valid(self) -> str:
        """What a valid value is, in words ("an int >= 1", "one of constant, cosine")."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
        limits = " and ".join(f"{words[k]} {v}" for k, v in self.bounds)
        name = self.type.__name__
        return f"{'an' if name[0] in 'aeiou' else 'a'} {name}" + (f" {limits}" if limits else "")

    @functools.cached_property
    def adapter(self) -> pydantic.TypeAdapter:
        t: Any = typing.Literal[self.choices] if self.choices else self.type
        return pydantic.TypeAdapter(typing.Annotated[t, pydantic.Field(**dict(self.bounds))],
                                    config=pydantic.ConfigDict(allow_inf_nan=False))


def knobs() -> list[Knob]:
    """Every field of ProtocolConfig, in declaration order."""
    out = []
    for section in dataclasses.fields(ProtocolConfig):
        cls = section.default_factory  # type: ignore[misc]
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            out.append(Knob(f"{section.name}.{f.name}", hints[f.name], f.default, f.metadata.get("help", ""),
                            f.metadata.get("source", ""), f.metadata.get("cli", ""), f.metadata.get("unstated",
                                                         False),
                            tuple(f.metadata.get("choices", ())), tuple(f.metadata.get("bounds", {}).items())))
    return out


def manifest_deviations(config: ProtocolConfig) -> dict[str, dict[str, Any]]:
    """What every manifest records as `deviations_from_paper`: each knob that differs from the paper, and each
    choice the paper leaves open (paper value "unstated")."""
    out: dict[str, dict[str, Any]] = {k: {"paper": "unstated", "used": v} for k, v in config.unstated().items()}
    out.update({k: {"paper": a, "used": b} for k, (a, b) in config.deviations().items()})
    return out


def _coerce(knob_: Knob, value: Any, where: str) -> Any:
    """`value` as the knob's type, validated by pydantic against its choices and bounds (YAML and `--set`
    give typed values; command-line aliases and strings are converted as pydantic's lax mode does)."""
    try:
        if knob_.type is not bool and isinstance(value, bool) or \
                knob_.type is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        return knob_.adapter.validate_python(value)
    except (pydantic.ValidationError, ValueError):
        pass
    if where.startswith("--") and where != "--set":    # a command-line alias: name the flag the user typed
        raise InputError(f"{where} ({knob_.key}) must be {knob_.valid()}, got {value!r}", field=where)
    raise InputError(f"{knob_.key} must be {knob_.valid()}, got {value!r}", file=where or None, field=knob_.key)


def apply_overrides(config: ProtocolConfig, values: dict[str, Any], *, where: str = "") -> ProtocolConfig:
    """`config` with `{"section.field": value}` applied; an unknown key or a value of the wrong type is an
    InputError naming the key (and `where` the values came from)."""
    by_key = {k.key: k for k in knobs()}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if key not in by_key:
            close = [k for k in by_key if k.split(".")[-1] == key.split(".")[-1]]
            hint = f"; did you mean {close[0]}?" if close else "; `execcritic config show` lists every knob"
            raise InputError(f"unknown config key {key!r}{hint}", file=where or None, field=key)
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = _coerce(by_key[key], value, where)
    replaced = {s: dataclasses.replace(getattr(config, s), **kv) for s, kv in sections.items()}
    return dataclasses.replace(config, **replaced)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise InputError(f"not valid YAML{at} ({getattr(exc, 'problem', None) or exc})", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=str(path)) from None


def read_yaml_mapping(path: Path, not_mapping: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping (a preset, a launch file); both errors name the file."""
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(not_mapping, file=str(path))
    return data


def _flatten(data: Any, where: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("a config profile must be a mapping of sections to {field: value}", file=where)
    out: dict[str, Any] = {}
    for section, values in data.items():
        if not isinstance(values, dict):
            raise InputError(f"section {section!r} must be a mapping of field: value", file=where, field=section)
        for name, value in values.items():
            out[f"{section}.{name}"] = value
    return out


def profile_path(name_or_path: str) -> Path:
    """A built-in profile name (`paper`, `smoke`, ...) or a YAML file path."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise InputError("config file not found", file=str(p))
        return p
    builtin = PROFILES_DIR / f"{name_or_path}.yaml"
    if not builtin.is_file():
        known = sorted(x.stem for x in PROFILES_DIR.glob("*.yaml"))
        raise InputError(f"unknown profile {name_or_path!r}; built-in profiles: {', '.join(known)} "
                         "(or pass a .yaml file)", field="config")
    return builtin


def load_protocol(config: str | None = None, sets: Iterable[str] = (), values: dict[str, Any] | None = None,
                  base: ProtocolConfig = PAPER) -> ProtocolConfig:
    """The paper's protocol, then a profile/YAML file, then `--set KEY=VALUE` items, then `values`
    (later wins). Each step is validated against the dataclasses."""
    cfg = base
    if config:
        path = profile_path(config)
        cfg = apply_overrides(cfg, _flatten(_read_yaml(path), str(path)), where=str(path))
    parsed: dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--set expects KEY=VALUE, got {item!r}", field="--set")
        parsed[key.strip()] = yaml.safe_load(value) if value.strip() else value
    cfg = apply_overrides(cfg, parsed, where="--set")
    return apply_overrides(cfg, values or {}, where="command line")


__all__ = [
    "PAPER",
    "GRPOConfig",
    "HarnessConfig",
    "Knob",
    "ProtocolConfig",
    "RepairConfig",
    "RepairRLConfig",
    "RepairRewardConfig",
    "SFTConfig",
    "TestAgentConfig",
    "TestRLConfig",
    "TestRewardConfig",
    "WorkspaceConfig",
    "apply_overrides",
    "knob",
    "knobs",
    "load_protocol",
    "manifest_deviations",
    "profile_path",
]
