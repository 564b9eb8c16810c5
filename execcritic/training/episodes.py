"""The real agent episodes as RL rollouts: one Test-agent or Repair episode in real sandboxes, driven by a
token-recording policy (`HFPolicy`), scored from the harness (paper §4, Eq. 5-6, Tables 7-8).

Why here and not in `agents/`: the episodes themselves are the agents' (`run_test_agent`,
`RepairController`) and are called unchanged; what RL adds is the *scoring*, which reads Gold (the Gold
audit), labeled candidates (discrimination), the official tests (the Oracle F2P bundle) and the official
evaluator - everything the agents must never reach. The training layer may; nothing below it imports this.

- `TestEpisode`: `run_test_agent` with a `BaseGate`; then, for the retained bundle, `gold_audit` (B, G) and
  `discriminate` over the instance's labeled candidates (TPR/TNR/BA), as Eq. 5's inputs (`TestRollout`).
  A candidate execution without a verdict masks the trajectory (§4.1); discrimination stops at the first
  one (the trajectory is masked whatever the rest would say).
- `RepairEpisode`: one `RepairController` run - Round 0 and every revision round in ONE trajectory-level
  sample - with a `CandidateVerifier` over the instance's single deterministic Oracle F2P node (Table 8c),
  then Eq. 6 from the terminal local verdict and a fresh official evaluation of the terminal patch.

Both return an `EpisodeResult`; unpacking it gives the `(sample, reward_or_None, info)` triple that
`trl_adapter.RolloutRunner` expects, so the same episode objects serve TRL and (later) a verl agent loop.
Eq. 5's turn slack compares a rollout with its group, so the Test reward here is the level reward; the
group step (`score_group`) applies the slack and each agent's masking rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from execcritic.agents.models.base import ModelError
from execcritic.agents.repair import RepairController, RepairResult
from execcritic.agents.test_agent import run_test_agent
from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER, ProtocolConfig
from execcritic.errors import EnvironmentMissing, SandboxError
from execcritic.evaluation.official import evaluate_official
from execcritic.harness.execute import base_reader
from execcritic.harness.execution import Execution, FailureKind
from execcritic.harness.gate import LabeledPatch, discriminate, gold_audit, select_candidates
from execcritic.harness.oracle import build_oracle
from execcritic.harness.services import BaseGate, CandidateVerifier
from execcritic.pipeline.envs import task_environment
from execcritic.prompts import prompts
from execcritic.rewards import (
    GroupAdvantages,
    RepairRewardBreakdown,
    RepairRollout,
    TestRewardBreakdown,
    TestRollout,
    aborted_out_of_baseline,
    aborted_raw_reward,
    group_advantages,
    group_test_rewards,
    repair_reward,
)
from execcritic.sandbox.base import Limits, Sandbox
from execcritic.tasks.model import Task
from execcritic.training.datasets import oracle_f2p_node
from execcritic.training.policy import TokenPolicy, TrajectorySample

ROLES = ("test", "repair")
# failures of the machinery, not of the policy: the rollout is masked (aborted) and the run goes on
OPERATIONAL_ERRORS = (ModelError, SandboxError, EnvironmentMissing)


@dataclass
class EpisodeResult:
    """One rollout: the trajectory-level sample, its raw reward, whether it is masked, the reward
    breakdown, and what happened (`info`). `rollout` holds the reward equation's inputs so a group step
    can rescore (Eq. 5's turn slack). `reward` is None only when the episode produced no score at all
    (aborted: no trajectory, an infrastructure failure before scoring)."""

    sample: TrajectorySample | None
    reward: float | None
    masked: bool
    breakdown: TestRewardBreakdown | RepairRewardBreakdown | None
    info: dict[str, Any] = field(default_factory=dict)
    role: str = ""                              # "test" | "repair"
    rollout: TestRollout | RepairRollout | None = None

    @property
    def aborted(self) -> bool:
        return self.rollout is None

    def __iter__(self):
        """`sample, reward, info = result`: the `trl_adapter.RolloutRunner` contract (a masked rollout's
        reward is None there, which TRL leaves out of the group mean - the Test rule)."""
        yield self.sample
        yield None if (self.masked or self.reward is None) else self.reward
        yield {**self.info, "masked": self.masked}

    def to_record(self) -> dict[str, Any]:
        """A flat JSON-able summary (for logs and per-step metrics; the sample itself is not included)."""
        b = dataclasses.asdict(self.breakdown) if self.breakdown is not None else None
        if b is not None and "level" in b:
            b["level"] = getattr(self.breakdown.level, "value", b["level"])
        return {"role": self.role, "reward": self.reward, "masked": self.masked, "aborted": self.aborted,
                "model_tokens": self.sample.model_tokens if self.sample else 0,
                "turns": self.sample.turns if self.sample else 0, "breakdown": b, "info": self.info}


def aborted_result(role: str, sample: TrajectorySample | None, why: str, **info: Any) -> EpisodeResult:
    """An episode that could not be scored (an operational failure): masked, no reward."""
    return EpisodeResult(sample, None, True, None, {"aborted": why, **info}, role, None)


def run_episode(role: str, episode, policy: TokenPolicy, row: dict[str, Any], seed: int | None) -> EpisodeResult:
    """One episode with a fresh turn record; an operational failure (`OPERATIONAL_ERRORS`: the model backend,
    the sandbox, or the task environment missing or being rebuilt) becomes a masked, aborted result and the run
    goes on. Anything else (a `TemplateDriftError`, a bug) propagates: a broken sample must stop training, not
    be trained on. Shared by the TRL runner and the verl agent loops."""
    policy.begin_episode(seed=seed)
    try:
        return episode(policy, row)
    except OPERATIONAL_ERRORS as exc:
        sample = policy.assemble_sample() if policy.turns else None
        notes = "; ".join(getattr(exc, "__notes__", []))
        why = f"{type(exc).__name__}: {exc}" + (f" ({notes})" if notes else "")
        print(f"[{role}-rl] episode of {row.get('instance_id')} aborted (masked): {why[:500]}",
              file=sys.stderr, flush=True)
        return aborted_result(role, sample, why, instance_id=row.get("instance_id"))


# --------------------------------------------------------------------------------------------------
# Rows: what a trainer's dataset holds per instance
# --------------------------------------------------------------------------------------------------

def test_prompt(task: Task, protocol: ProtocolConfig = PAPER) -> list[dict[str, str]]:
    """The Test agent's opening messages exactly as `run_test_agent` says them (the row's identity)."""
    p = prompts("test_agent")
    return [{"role": "system", "content": p.render("system_template")},
            {"role": "user", "content": p.render("instance_template", task=task.problem_statement,
                                                 step_limit=protocol.test_agent.max_turns)}]


def repair_prompt(task: Task, protocol: ProtocolConfig = PAPER) -> list[dict[str, str]]:
    """The Repair controller's fresh Round-0 opening messages."""
    p = prompts("repair")
    return [{"role": "system", "content": p.render("round0_system_template")},
            {"role": "user", "content": p.render("round0_instance_template", task=task.problem_statement,
                                                 step_limit=protocol.repair.round0_turns)}]


def test_row(task: Task, candidates: Sequence[LabeledPatch], protocol: ProtocolConfig = PAPER) -> dict[str, Any]:
    """A Test-RL row: the prompt, the task (held by the trainer, never shown to the agent) and the instance's
    labeled candidate pool."""
    return {"prompt": test_prompt(task, protocol), "instance_id": task.instance_id, "task": task,
            "candidates": tuple(candidates)}


def repair_row(task: Task, protocol: ProtocolConfig = PAPER, generated: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """A Repair-RL row (Table 8: the problem statement is the only input). Its feedback test is the Oracle F2P
    node chosen by `training.datasets.oracle_f2p_node` (the main configuration), or, for Table 6's "Generated
    tests", `generated`: the generation record of a qualified generated bundle of the same instance."""
    row = {"prompt": repair_prompt(task, protocol), "instance_id": task.instance_id, "task": task}
    if generated is None:
        return {**row, "feedback_node": oracle_f2p_node(task.to_row(), task.dataset or None)}
    if generated.get("instance_id") != task.instance_id or generated.get("qualified") is not True:
        raise ValueError(f"not a qualified generated bundle of {task.instance_id}")
    b = generated["bundle"]
    return {**row, "feedback_bundle": TestBundle(b["test_patch"], b["test_command"], b["test_contract"]),
            "feedback_generator": str(generated.get("source"))}


# --------------------------------------------------------------------------------------------------
# Shared plumbing
# --------------------------------------------------------------------------------------------------

@dataclass
class _Boxes:
    """Opens the sandboxes of one episode (workspace + verifier) from the task's environment."""

    protocol: ProtocolConfig
    backend: str | None

    def open(self, task: Task) -> Sandbox:
        env = task_environment(task, self.backend)
        return env.open_sandbox(limits=Limits.from_config(self.protocol.harness))


def _sample(policy: TokenPolicy) -> TrajectorySample | None:
    return policy.assemble_sample() if policy.turns else None


def _generate_s(policy: TokenPolicy) -> float:
    """Seconds the episode spent sampling from the model (the rest of `rollout_s` is sandboxes, tools, gate)."""
    return round(sum(t.generate_s for t in policy.turns), 3)


def _task(row: dict[str, Any]) -> Task:
    task = row.get("task")
    if not isinstance(task, Task):
        raise TypeError(f"row {row.get('instance_id')!r} carries no Task under 'task' (build it with test_row / "
                        "repair_row)")
    return task


def _exec_summary(ex: Execution) -> dict[str, Any]:
    return {"valid": ex.valid, "verdict": ex.verdict.value if ex.verdict else None,
            "failure_kind": ex.failure_kind.value, "duration_s": round(ex.duration_s, 3)}


def repository_paths(paths: Sequence[str]) -> list[str]:
    """The paths of the repository among changed paths: not git's own files (the workspace's sanitizing gc repacks
    `.git/objects`), which are no episode's change."""
    return [p for p in paths if p != ".git" and not p.startswith(".git/")]


def workspace_facts(workspace: Sandbox, base: Sandbox, events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How an episode spoke and what it changed, for evaluations that ask whether a policy learned the protocol and
    the repository (issue 44): `format_errors` (model turns without a well-formed tool call), `touched` (the paths
    the episode left changed in its workspace) and `touched_dirs_at_base` (those of their parent directories that
    exist at Base, read from `base` after a reset). Not part of any reward."""
    touched = sorted(repository_paths(workspace.changed_paths()))
    dirs = sorted({p.rsplit("/", 1)[0] if "/" in p else "." for p in touched})
    at_base: list[str] = []
    if dirs:
        base.reset()
        quoted = " ".join(shlex.quote(d) for d in dirs)
        out = base.run(f"cd /testbed && for d in {quoted}; do [ -d \"$d\" ] && printf '%s\\n' \"$d\"; done; true",
                       timeout=30)
        at_base = sorted(set(out.output.split()) & set(dirs))
    return {"format_errors": sum(1 for e in events if e.get("kind") == "model" and e.get("format_error")),
            "touched": touched, "touched_dirs_at_base": at_base}


# --------------------------------------------------------------------------------------------------
# Test agent (Eq. 5)
# --------------------------------------------------------------------------------------------------

@dataclass
class TestEpisode:
    """`episode(policy, row) -> EpisodeResult` for the Test agent (§4.1, Table 7).

    The reward inputs: `valid_submission` is a bundle that passed validation (a retained bundle, or an attempt
    the Base gate ran); B and G come from a fresh `gold_audit` of the retained bundle (an attempt that reached
    the gate but was not retained had B = 0 there: Eq. 5's 0 level); candidates are the row's labeled pool,
    deduplicated and capped at `test_reward.max_candidates` by the harness's own selection.
    """

    __test__ = False

    protocol: ProtocolConfig = PAPER
    backend: str | None = None
    stop_at_first_candidate_error: bool = True   # the trajectory is masked anyway; the rest need not run

    def __call__(self, policy: TokenPolicy, row: dict[str, Any]) -> EpisodeResult:
        task = _task(row)
        p = self.protocol
        boxes = _Boxes(p, self.backend)
        started = time.monotonic()
        with boxes.open(task) as workspace, boxes.open(task) as verifier:
            gate = BaseGate(task, verifier, harness=p.harness, diagnostics_chars=p.test_agent.diagnostics_chars)
            res = run_test_agent(task.view(), policy, workspace=workspace, gate=gate, config=p.test_agent,
                                 workspace_config=p.workspace)
            sample = _sample(policy)
            rollout_s = time.monotonic() - started
            info: dict[str, Any] = {"instance_id": task.instance_id, "exit_status": res.exit_status,
                                    "qualified": res.qualified, "turns": res.turns, "attempts": len(res.attempts),
                                    "rollout_s": round(rollout_s, 3), "generate_s": _generate_s(policy)}
            if res.exit_status == "workspace_error":
                return aborted_result("test", sample, "workspace_error: the Gold-free workspace could not be "
                                      "sanitized", **info)
            scored = time.monotonic()
            rollout = self._score(task, res.bundle, res, row.get("candidates") or (), verifier, info)
            info["score_s"] = round(time.monotonic() - scored, 3)
            info.update(workspace_facts(workspace, verifier, res.trajectory.events))
        breakdown = group_test_rewards([rollout], p.test_reward)[0]
        info["level"] = breakdown.level.value
        return EpisodeResult(sample, breakdown.level_reward, breakdown.masked, breakdown, info, "test", rollout)

    def _score(self, task: Task, bundle: TestBundle | None, res, candidates: Sequence[LabeledPatch],
               verifier: Sandbox, info: dict[str, Any]) -> TestRollout:
        gated = any(a.stage == "base_gate" for a in res.attempts)
        if bundle is None:
            # a validated attempt that the gate did not retain failed to fail cleanly on Base: B = 0
            return TestRollout(valid_submission=gated, turns=res.turns)
        h = self.protocol.harness
        audit = gold_audit(task, bundle, sandbox=verifier, config=h)
        info["audit"] = {"B": audit.B, "G": audit.G, "base": _exec_summary(audit.base),
                         "gold": _exec_summary(audit.gold)}
        counts = {"tp": 0, "fn": 0, "tn": 0, "fp": 0, "operational_errors": 0}
        runs: list[dict[str, Any]] = []
        chosen = select_candidates(candidates, self.protocol.test_reward.max_candidates)
        for cand in chosen:
            d = discriminate(task, bundle, [cand], sandbox=verifier, config=h, limit=1)
            for k in counts:
                counts[k] += getattr(d, k)
            runs.extend({**r, "source": cand.source} for r in d.runs)
            if d.operational_errors and self.stop_at_first_candidate_error:
                break
        info["candidates"] = {"pool": len(candidates), "selected": len(chosen), "run": len(runs), "runs": runs,
                              "positives": sum(c.resolved for c in chosen)}
        return TestRollout(valid_submission=True, base_clean_fail=bool(audit.B), gold_pass=bool(audit.G),
                           turns=res.turns, **counts)


# --------------------------------------------------------------------------------------------------
# Repair agent (Eq. 6)
# --------------------------------------------------------------------------------------------------

OFFICIAL_WHEN = ("always", "needed")
UNUSABLE_KINDS = (FailureKind.PATCH_APPLY_FAILED, FailureKind.FORBIDDEN_SOURCE_EDIT)


def oracle_node_bundle(task: Task, node: str, sandbox: Sandbox) -> tuple[TestBundle, dict[str, Any]]:
    """The official bundle restricted to one FAIL_TO_PASS node (Table 8c: one deterministic Oracle F2P test).

    Built by the harness's oracle builder on the task with FAIL_TO_PASS = (node,), reading the Base from
    `sandbox` (fresh after a reset). Tests the official test patch *adds* are still declared (a bundle must
    declare every test it adds, SPEC §2.1); they are reported in the returned facts."""
    sandbox.reset()
    one = dataclasses.replace(task, fail_to_pass=(node,))
    build = build_oracle(one, read_base=base_reader(sandbox))
    return build.bundle, {"node": node, "declared": list(build.declared), "added_extra": list(build.added_extra),
                          "overmatch_extra": list(build.overmatch_extra), "runner": build.runner,
                          "bundle_digest": build.bundle.digest()}


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""


@dataclass
class RepairEpisode:
    """`episode(policy, row) -> EpisodeResult` for the Repair agent (§4.2, Table 8, App. A.2).

    `official`: "always" runs the fresh official evaluation on every usable terminal patch (the resolved
    rate of rollouts is then known too); "needed" only where Eq. 6 depends on it (a selected-test PASS, or a
    masked rollout's raw reward) - a z = FAIL gets 0.1 "regardless of the official outcome"."""

    protocol: ProtocolConfig = PAPER
    backend: str | None = None
    official: str = "always"
    _bundles: dict[str, tuple[TestBundle, dict[str, Any]]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.official not in OFFICIAL_WHEN:
            raise ValueError(f"official must be one of {OFFICIAL_WHEN}, got {self.official!r}")

    def bundle_for(self, task: Task, node: str, sandbox: Sandbox) -> tuple[TestBundle, dict[str, Any]]:
        """The frozen one-node bundle of an instance (deterministic, so built once per instance)."""
        with self._lock:
            if task.instance_id not in self._bundles:
                self._bundles[task.instance_id] = oracle_node_bundle(task, node, sandbox)
            return self._bundles[task.instance_id]

    def __call__(self, policy: TokenPolicy, row: dict[str, Any]) -> EpisodeResult:
        task = _task(row)
        p = self.protocol
        generated: TestBundle | None = row.get("feedback_bundle")
        boxes = _Boxes(p, self.backend)
        started = time.monotonic()
        with boxes.open(task) as workspace, boxes.open(task) as verifier_box:
            if generated is not None:     # Table 6: a frozen qualified generated bundle, as at evaluation
                bundle, facts = generated, {"source": "generated", "generator": row.get("feedback_generator"),
                                            "bundle_digest": generated.digest()}
            else:
                node = row.get("feedback_node") or oracle_f2p_node(task.to_row(), task.dataset or None)
                bundle, facts = self.bundle_for(task, node, verifier_box)
                facts = {"source": "oracle_f2p", **facts}
            verifier = CandidateVerifier(task, bundle, verifier_box, harness=p.harness,
                                         feedback_chars=p.repair.feedback_chars)
            controller = RepairController(task.view(), policy, workspace=workspace, verifier=verifier,
                                          config=p.repair, workspace_config=p.workspace)
            res = controller.run()
            sample = _sample(policy)
            info: dict[str, Any] = {"instance_id": task.instance_id, "final_reason": res.final_reason,
                                    "revision_rounds": res.revision_rounds, "total_turns": res.total_turns,
                                    "revision_turns": res.revision_turns, "checks": len(res.checks),
                                    "feedback": facts, "rollout_s": round(time.monotonic() - started, 3),
                                    "generate_s": _generate_s(policy)}
            scored = time.monotonic()
            kind, excluded, source = self._terminal(res, verifier)
            info["terminal"] = {"failure_kind": kind.value if kind else None, "source": source}
            info["excluded_paths"] = excluded
        patch = res.final_patch
        usable = bool(patch.strip()) and kind not in UNUSABLE_KINDS
        forbidden = bool(excluded)
        z = None
        if usable and not forbidden and kind is not None:
            z = "PASS" if kind is FailureKind.PASSED else "FAIL" if kind is FailureKind.BEHAVIORAL_FAILURE \
                else "INVALID"
        u = None
        need = usable and not forbidden and (self.official == "always" or z in ("PASS", "INVALID"))
        if need:
            off = evaluate_official(task, patch, task_environment(task, self.backend), harness=p.harness)
            u = off.resolved if off.valid else None
            info["official"] = {"resolved": off.resolved, "valid": off.valid, "error": off.error[:500],
                                "duration_s": round(off.duration_s, 3)}
        info["score_s"] = round(time.monotonic() - scored, 3)
        rollout = RepairRollout(patch_usable=usable, forbidden_test_edit=forbidden, selected_test=z,
                                official_resolved=u, at_round0=res.revision_rounds == 0)
        breakdown = repair_reward(rollout, p.repair_reward)
        info["level"] = breakdown.level.value
        info["final_patch_sha"] = _sha16(patch)
        return EpisodeResult(sample, breakdown.reward, breakdown.masked, breakdown, info, "repair", rollout)

    @staticmethod
    def _terminal(res: RepairResult, verifier: CandidateVerifier) -> tuple[FailureKind | None, list[str], str]:
        """(failure kind of the terminal patch's selected-test execution, the paths its candidate excluded -
        test edits -, where the execution came from).

        The controller gates the terminal candidate on every path that has a verifier; that last check of the
        terminal candidate is its terminal execution (`RepairResult` keeps its failure kind, which is all Eq. 6
        reads). A terminal candidate that was never gated is checked here. An empty patch runs nothing."""
        sha = _sha16(res.final_patch)
        last = next((c for c in reversed(res.checks) if c.candidate_sha == sha), None)
        excluded = list(last.excluded_paths) if last is not None else list(res.round0.get("excluded_paths") or [])
        if not res.final_patch.strip():
            return None, excluded, "empty_patch"
        if last is not None:
            return FailureKind(last.failure_kind), excluded, f"controller_check:{last.trigger}"
        return verifier.check(res.final_patch).failure_kind, excluded, "terminal_check"


# --------------------------------------------------------------------------------------------------
# Groups: Eq. 5's turn slack, each agent's masking rule
# --------------------------------------------------------------------------------------------------

@dataclass
class GroupScore:
    """The final rewards, masks and advantages of one issue group, in rollout order."""

    rewards: list[float]
    masked: list[bool]
    advantages: GroupAdvantages
    breakdowns: list[Any]


def score_group(role: str, results: Sequence[EpisodeResult], protocol: ProtocolConfig = PAPER) -> GroupScore:
    """Group rewards and advantages with the role's rule (`rewards.advantages`).

    Test: Eq. 5 over the group (turn slack against the shortest unmasked rollout of the same level); masked
    and aborted rollouts are left out of the mean. Repair: Eq. 6 per rollout; masked rollouts enter the mean
    with their raw reward (`repair_reward.masked_raw_reward`), an aborted one with `aborted_raw_reward` or not at
    all (`grpo.aborted_baseline`), then both get 0 - the same numbers the verl estimator computes from its batch."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    live = [i for i, r in enumerate(results) if not r.aborted]
    rewards = [aborted_raw_reward(protocol.repair_reward) if role == "repair" else 0.0] * len(results)
    masked = [True] * len(results)
    breakdowns: list[Any] = [None] * len(results)
    if role == "test":
        scored = group_test_rewards([results[i].rollout for i in live], protocol.test_reward)  # type: ignore[misc]
    else:
        scored = [results[i].breakdown for i in live]
    for i, b in zip(live, scored):
        rewards[i], masked[i], breakdowns[i] = b.reward, b.masked, b
    adv = group_advantages(rewards, masked, masked_in_statistics=role == "repair", config=protocol.grpo,
                           excluded=aborted_out_of_baseline(role, [r.aborted for r in results], protocol.grpo))
    return GroupScore(rewards, masked, adv, breakdowns)


__all__ = [
    "OFFICIAL_WHEN",
    "OPERATIONAL_ERRORS",
    "EpisodeResult",
    "GroupScore",
    "RepairEpisode",
    "TestEpisode",
    "aborted_result",
    "oracle_node_bundle",
    "repair_prompt",
    "repair_row",
    "run_episode",
    "score_group",
    "test_prompt",
    "test_row",
]
