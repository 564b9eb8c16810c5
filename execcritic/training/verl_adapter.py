"""verl 0.9.1 adapter: the real Test/Repair episodes as verl agent loops, each agent's masking rule as an
advantage estimator, and the paper's DAPO filter as verl's replay-buffer filter (§4, Eq. 5-6, Tables 7-8).

Why an adapter and not verl's `tool_agent`: the episodes (`episodes.TestEpisode`, `episodes.RepairEpisode`)
already run the agents, the sandboxes, the harness and the official evaluator, and record the token
sequence through a `TokenPolicy`. Here only the sampler changes: `ServerPolicy` asks verl's rollout server
for each turn through verl's own `LLMServerClient.generate` (token-in/token-out, sticky per episode), so the
sample is the same trajectory-level sample the TRL path trains on.

- `TestAgentLoop` / `RepairAgentLoop` (`@register`ed as `execcritic_test` / `execcritic_repair`): run one
  episode in a thread (the episode code is synchronous; each turn hops back onto the worker's event loop to
  await the server) and return an `AgentLoopOutput`: prompt ids, response ids, `response_mask` (model tokens
  1; tool output, harness feedback and envelopes 0), rollout logprobs, and the reward of that same episode's
  harness verdict. A masked or aborted rollout gets an all-zero `response_mask` (slime's `remove_sample`):
  it trains nothing and is how the estimator, which sees only tensors, knows it is masked.
- Advantage estimators (`register_adv_est`): `execcritic_test_grpo` (masked rollouts out of the group mean,
  Eq. 5's turn slack within the group) and `execcritic_repair_grpo` (masked rollouts in the mean with their
  raw reward, then 0; an aborted one too, at `aborted_raw_reward`: only `grpo.aborted_baseline='invalid_level'`
  runs here, see `verl_config.check_aborted_baseline`); group mean baseline, no std division - `execcritic.rewards`
  does the arithmetic.
  What they read from verl's batch: the reward (sum of `token_level_rewards`), the mask flag (an all-zero
  `response_mask`) and, for the turn slack, the number of model turns (runs of 1s in `response_mask`: every
  turn is one run, separated by non-empty envelopes; the loop checks this against the episode's turn count
  and fails closed). So verl's rollout rejection sampling (`algorithm.rollout_correction.rollout_rs`), which
  edits `response_mask`, must stay off; `verl_config.validate_verl_overrides` rejects it.
- DAPO: `group_drops` classifies finished groups with `rewards.drop_reason` over the unmasked rollouts' final
  rewards (after the turn slack); `verl_sampler.ExecCriticReplayBuffer` (verl's v1 replay buffer with this
  classification) evicts dropped groups and refills until `data.train_batch_size` (16) groups are kept.

Protocol: the loops and estimators read `ProtocolConfig` from `$EXECCRITIC_PROTOCOL` (a profile name or YAML
file; unset = the paper's), so one file decides the episode budgets and the reward numbers in every Ray
process. Sandbox backend: `$EXECCRITIC_SANDBOX_BACKEND` (unset = the task environment's default); Repair's
official evaluations: `$EXECCRITIC_REPAIR_OFFICIAL` (`needed`, default, or `always`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.trainer.ppo.core_algos import register_adv_est
from verl.workers.rollout.replica import TokenOutput

from execcritic.agents.models.base import ContextWindowExceeded, ModelError, SamplingConfig
from execcritic.config import PAPER, ProtocolConfig, load_protocol
from execcritic.errors import InputError
from execcritic.harness.gate import LabeledPatch
from execcritic.rewards import (
    DropReason,
    GroupAdvantages,
    TestLevel,
    aborted_raw_reward,
    drop_reason,
    group_advantages,
    turn_slack,
)
from execcritic.training.episodes import (
    EpisodeResult,
    RepairEpisode,
    TestEpisode,
    repair_row,
    run_episode,
    test_row,
)
from execcritic.training.policy import LocalSampler, TokenPolicy, TrajectorySample, stop_ids_for
from execcritic.training.verl_config import (
    ADV_ESTIMATOR_NAMES,
    AGENT_LOOP_NAMES,
    PROTOCOL_ENV,
    check_aborted_baseline,
)

BACKEND_ENV = "EXECCRITIC_SANDBOX_BACKEND"
# Repair: run the official evaluation on every usable terminal patch ("always": the resolved rate of rollouts
# is known too) or only where Eq. 6 depends on it ("needed", default: the same rewards, fewer official runs)
OFFICIAL_ENV = "EXECCRITIC_REPAIR_OFFICIAL"
# reward_extra_info keys (verl copies them into the batch; the replay buffer reads them per trajectory)
REWARD_KEY, MASKED_KEY, TURNS_KEY = "execcritic_reward", "execcritic_masked", "execcritic_turns"
TURN_MISMATCH_KEY = "execcritic_turn_mismatch"


def protocol_from_env() -> ProtocolConfig:
    """The protocol every Ray process of a run shares (`$EXECCRITIC_PROTOCOL`, else the paper's)."""
    name = os.environ.get(PROTOCOL_ENV)
    return load_protocol(name) if name else PAPER


# --------------------------------------------------------------------------------------------------
# Rows: what a verl dataset (parquet) holds per instance
# --------------------------------------------------------------------------------------------------

def verl_record(role: str, row: dict[str, Any], task_set: str) -> dict[str, Any]:
    """One verl dataset row for an `episodes.test_row` / `repair_row`: the opening messages as verl's
    `prompt` (raw chat), the loop to run, and in `extra_info` what rebuilds the row in a Ray worker (the task
    set and instance id; the labeled candidate pool inline, so a worker needs no results directory)."""
    if role not in AGENT_LOOP_NAMES:
        raise InputError(f"role must be one of {sorted(AGENT_LOOP_NAMES)}, got {role!r}", field="role")
    extra: dict[str, Any] = {"role": role, "task_set": task_set, "instance_id": row["instance_id"]}
    if role == "test":
        extra["candidates"] = [{"patch": c.patch, "resolved": bool(c.resolved), "source": c.source}
                               for c in row.get("candidates") or ()]
    else:
        extra["feedback_node"] = row.get("feedback_node")
    return {"data_source": f"execcritic/{role}", "prompt": list(row["prompt"]),
            "agent_name": AGENT_LOOP_NAMES[role], "extra_info": extra}


def write_verl_dataset(records: Sequence[dict[str, Any]], path: str | os.PathLike) -> str:
    """Write `verl_record` rows as the parquet file verl's `RLHFDataset` reads (`data.train_files`); each row's
    `extra_info.index` is its position (verl uses it to group traces)."""
    import pandas as pd  # lazy: only for writing datasets

    if not records:
        raise InputError("no rows to write", file=str(path))
    rows = [{**r, "extra_info": {**r["extra_info"], "index": i}} for i, r in enumerate(records)]
    roles = {r["extra_info"]["role"] for r in rows}
    if len(roles) != 1:
        raise InputError(f"one role per dataset file (the launch file picks one loop), got {sorted(roles)}",
                         file=str(path), field="extra_info.role")
    pd.DataFrame(rows).to_parquet(path, index=False)
    return str(path)


@functools.lru_cache(maxsize=1024)
def _task(task_set: str, instance_id: str):
    """One task of a task set, loaded once per process (every rollout of a group asks for it)."""
    from execcritic.tasks.load import load_tasks  # lazy: task sets import the sdist machinery

    tasks = load_tasks(task_set, instance_ids=[instance_id]).tasks
    return tasks[0] if len(tasks) == 1 else None


def row_from_record(role: str, extra_info: dict[str, Any], protocol: ProtocolConfig) -> dict[str, Any]:
    """The episode row back from a dataset record's `extra_info` (the task reloaded from its task set)."""
    where = f"extra_info of a verl {role} row"
    for key in ("task_set", "instance_id"):
        if not extra_info.get(key):
            raise InputError(f"missing {key!r}", file=where, field=f"extra_info.{key}")
    iid = str(extra_info["instance_id"])
    task = _task(str(extra_info["task_set"]), iid)
    if task is None:
        raise InputError(f"task set {extra_info['task_set']!r} has no instance {iid!r}", file=where,
                         field="extra_info.instance_id")
    if role == "test":
        cands = []
        for i, c in enumerate(extra_info.get("candidates") or ()):
            if not isinstance(c, dict) or not isinstance(c.get("patch"), str) or not isinstance(c.get("resolved"), bool):
                raise InputError("a candidate needs a string 'patch' and a boolean 'resolved'", file=where,
                                 instance=iid, field=f"extra_info.candidates[{i}]")
            cands.append(LabeledPatch(c["patch"], c["resolved"], str(c.get("source") or "")))
        return test_row(task, cands, protocol)
    row = repair_row(task, protocol)
    if extra_info.get("feedback_node"):
        row["feedback_node"] = str(extra_info["feedback_node"])
    return row


# --------------------------------------------------------------------------------------------------
# Sampling through verl's rollout server
# --------------------------------------------------------------------------------------------------

class ServerPolicy(TokenPolicy):
    """A `TokenPolicy` whose turns are sampled by a verl rollout server (vLLM/SGLang, or `CPUTokenServer`).

    `generate(prompt_ids, sampling_params) -> TokenOutput` is a blocking call (the agent loop bridges it to
    `LLMServerClient.generate` on its event loop). Budgets follow verl's tensor layout: the first prompt must
    fit `prompt_length` (a longer one is refused, never truncated), and prompt + response must fit
    `prompt_length + response_length` and the response `response_length`, so a sample always fits verl's
    padded batch. A turn the server aborts or returns without logprobs is a `ModelError` (operational: the
    episode is aborted and masked)."""

    def __init__(self, tokenizer, generate: Callable[[list[int], dict[str, Any]], TokenOutput], *,
                 sampling_params: dict[str, Any], prompt_length: int, response_length: int,
                 sampling: SamplingConfig | None = None, stop_ids: set[int] | None = None,
                 name: str = "verl-rollout-server", **kwargs: Any):
        super().__init__(tokenizer, stop_ids=stop_ids or stop_ids_for(tokenizer), sampling=sampling, name=name,
                         context_window=prompt_length + response_length, **kwargs)
        self._server_generate = generate
        self.server_params = dict(sampling_params)
        self.prompt_length, self.response_length = int(prompt_length), int(response_length)
        self.server_fields: list[dict[str, Any]] = []   # TokenOutput.extra_fields per turn (global_steps, ...)

    def begin_episode(self, seed: int | None = None) -> None:
        super().begin_episode(seed)
        self.server_fields = []
        self.context_window = self.prompt_length + self.response_length

    def _generate(self, prompt_ids: list[int], max_new: int) -> tuple[list[int], list[float], str]:
        if not self.turns:
            if len(prompt_ids) > self.prompt_length:
                raise ContextWindowExceeded(f"the opening prompt has {len(prompt_ids)} tokens, more than "
                                            f"actor_rollout_ref.rollout.prompt_length={self.prompt_length}")
            # from now on the response (everything after this prompt) must fit response_length
            self.context_window = len(prompt_ids) + self.response_length
            max_new = min(max_new, self.response_length)
        params = {**self.server_params, "max_tokens": max(1, int(max_new)), "logprobs": True,
                  "stop_token_ids": sorted(self.stop_ids)}
        s = self.sampling
        for key, value in (("temperature", s.temperature), ("top_p", s.top_p), ("top_k", s.top_k)):
            if value is not None and key not in self.server_params:
                params[key] = value
        out = self._server_generate(list(prompt_ids), params)
        self.server_fields.append(dict(out.extra_fields or {}))
        if out.stop_reason == "aborted":
            raise ModelError("the rollout server aborted the request")
        ids = list(out.token_ids)
        if not ids:
            raise ModelError("the rollout server returned no tokens")
        if out.log_probs is None or len(out.log_probs) != len(ids):
            raise ModelError(f"the rollout server returned {None if out.log_probs is None else len(out.log_probs)} "
                             f"logprobs for {len(ids)} tokens (set actor_rollout_ref.rollout.calculate_log_probs)")
        if len(ids) > max_new:
            raise ModelError(f"the rollout server returned {len(ids)} tokens for max_tokens={max_new}")
        finish = "stop" if ids[-1] in self.stop_ids else "length"
        return ids, [float(x) for x in out.log_probs], finish


class CPUTokenServer:
    """A token-in/token-out rollout server on CPU with the same `generate` signature as verl's vLLM/SGLang
    servers (`prompt_ids`, `sampling_params` -> `TokenOutput`), sampling with `policy.LocalSampler`. For CPU
    tests and the GPU check's dry run; wrap it with `ray.remote` to serve verl's `LLMServerClient`.

    `processor_factory(request_index) -> (name, logits_processor)`: optional constrained decoding per episode,
    keyed by request id; the tests use it as a scripted token policy, named as such - the model still runs and
    its logprobs are recorded. The name comes back in `TokenOutput.extra_fields`. verl's `LLMServerClient`
    replaces the request id by a fresh one on every turn unless `rollout.full_determinism` is set, so a scripted
    run sets it (the agent loops then use verl's deterministic per-sample ids)."""

    def __init__(self, model_path: str, *, processor_factory: Callable[[int], tuple[str, Any]] | None = None,
                 seed: int = 0, threads: int = 1):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        torch.set_num_threads(threads)
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: train/cpu-model extra

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path)
        self.sampler = LocalSampler(self.model, stop_ids_for(self.tokenizer, self.model.generation_config))
        self.factory = processor_factory
        self.seed = seed
        self.requests: dict[str, tuple[str, Any]] = {}
        self.calls = 0
        self._lock = asyncio.Lock()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data=None, video_data=None, **kwargs: Any) -> TokenOutput:
        async with self._lock:   # one model, batch 1: requests take turns
            if request_id not in self.requests:
                self.requests[request_id] = self.factory(len(self.requests)) if self.factory else ("", None)
            name, processor = self.requests[request_id]
            gen = torch.Generator().manual_seed(self.seed + self.calls)
            self.calls += 1
            p = sampling_params
            stop = set(p.get("stop_token_ids") or ()) | self.sampler.stop_ids
            sampler = LocalSampler(self.model, stop) if stop != self.sampler.stop_ids else self.sampler
            ids, lps, _ = await asyncio.to_thread(
                sampler.generate, list(prompt_ids), int(p.get("max_tokens") or 1), temperature=p.get("temperature"),
                top_p=p.get("top_p"), top_k=p.get("top_k"), generator=gen, logits_processor=processor)
        extra = {"global_steps": 0, **({"scripted_plan": name} if name else {})}
        return TokenOutput(token_ids=ids, log_probs=lps if p.get("logprobs") else None, stop_reason="completed",
                           extra_fields=extra)

    def served(self) -> dict[str, int]:
        """Turns answered and distinct request ids (episodes, when ids are sticky) seen so far."""
        return {"turns": self.calls, "requests": len(self.requests)}


# --------------------------------------------------------------------------------------------------
# The agent loops
# --------------------------------------------------------------------------------------------------

def response_turns(mask: Sequence[int]) -> int:
    """Model turns of a trajectory-level sample: runs of 1s in its loss mask."""
    runs, prev = 0, 0
    for m in mask:
        if m and not prev:
            runs += 1
        prev = 1 if m else 0
    return runs


TURN_MISMATCHES: Counter = Counter()   # this process's masks for a turn/token-run mismatch, by role


def loop_output(result: EpisodeResult, placeholder: TrajectorySample, *, seconds: float,
                protocol: ProtocolConfig = PAPER) -> AgentLoopOutput:
    """verl's `AgentLoopOutput` of one episode. Masked/aborted: all-zero response mask (trains nothing; the
    estimator's mask flag). The reward is the episode's own: Eq. 5's level reward (the turn slack needs the
    group: the estimator applies it) or Eq. 6's reward; an aborted episode has none and brings
    `rewards.aborted_raw_reward` (the TRL group step uses the same number).

    A rollout whose count of model-token runs differs from its turn count is masked (the estimator reads turns
    from the mask); every such mask is counted (`TURN_MISMATCH_KEY` in the batch, `TURN_MISMATCHES` here, the
    replay buffer's per-step metric) and printed, so a valid rollout is never dropped silently."""
    sample = result.sample or placeholder
    masked = bool(result.masked or result.sample is None or result.reward is None)
    turns = response_turns(sample.env_mask)
    mismatch = not masked and turns != sample.turns
    if mismatch:
        # the estimator counts turns from the mask: if that is not the episode's count, mask rather than
        # apply the turn slack to a wrong number
        result.info["aborted"] = f"mask has {turns} model-token runs for {sample.turns} turns"
        masked = True
        TURN_MISMATCHES[result.role] += 1
        print(f"[verl {result.role}] rollout of {result.info.get('instance_id')} masked: {result.info['aborted']} "
              f"({TURN_MISMATCHES[result.role]} so far in this process)", file=sys.stderr, flush=True)
    reward = aborted_raw_reward(protocol.repair_reward) if result.reward is None else float(result.reward)
    mask = [0] * len(sample.env_mask) if masked else list(sample.env_mask)
    info = {REWARD_KEY: reward, MASKED_KEY: float(masked), TURNS_KEY: float(0 if masked else turns),
            TURN_MISMATCH_KEY: float(mismatch)}
    extra = {"reward_extra_info": info, "execcritic": result.to_record()}
    return AgentLoopOutput(prompt_ids=list(sample.prompt_ids), response_ids=list(sample.completion_ids),
                           response_mask=mask, response_logprobs=[float(x) for x in sample.logprobs],
                           reward_score=reward, num_turns=2 * sample.turns + 1,
                           metrics=AgentLoopMetrics(generate_sequences=seconds), extra_fields=extra)


def _placeholder(policy: TokenPolicy, row: dict[str, Any]) -> TrajectorySample:
    from execcritic.training.trl_adapter import RolloutRunner  # lazy: imports transformers' Trainer callbacks

    return RolloutRunner._placeholder(policy, row)


# a turn the rollout server has not answered in this long is an operational failure (the episode is masked)
TURN_TIMEOUT_S = 1800.0
_EPISODES: dict[tuple, Any] = {}
_EPISODES_LOCK = threading.Lock()


class _EpisodeLoop(AgentLoopBase):
    """One real episode per `run` (see module docstring)."""

    role = ""

    def _episode(self, protocol: ProtocolConfig):
        """The episode object, one per process and setting: the Repair episode caches each instance's frozen
        Oracle F2P bundle, so every rollout of a group reuses it."""
        backend = os.environ.get(BACKEND_ENV) or None
        official = os.environ.get(OFFICIAL_ENV) or "needed"
        key = (self.role, protocol.digest(), backend, official)
        with _EPISODES_LOCK:
            if key not in _EPISODES:
                _EPISODES[key] = (TestEpisode(protocol, backend) if self.role == "test"
                                  else RepairEpisode(protocol, backend, official=official))
            return _EPISODES[key]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        protocol = protocol_from_env()
        extra_info = kwargs.get("extra_info")
        if not isinstance(extra_info, dict):
            raise InputError("a verl row needs an 'extra_info' mapping (build rows with verl_adapter.verl_record)",
                             field="extra_info")
        row = await asyncio.to_thread(row_from_record, self.role, extra_info, protocol)
        loop = asyncio.get_running_loop()
        # sticky: every turn of this episode goes to one server (prefix cache). Under rollout.full_determinism the
        # id is the sample's priority, as verl's own loops make it (and verl then passes it on to the server)
        priority = kwargs.get("priority")
        if getattr(self.rollout_config, "full_determinism", False) and priority is not None:
            request_id = f"det-{int(priority)}"
        else:
            request_id = uuid.uuid4().hex

        def generate(prompt_ids: list[int], params: dict[str, Any]) -> TokenOutput:
            fut = asyncio.run_coroutine_threadsafe(
                self.server_manager.generate(request_id, prompt_ids=prompt_ids, sampling_params=params), loop)
            try:
                return fut.result(timeout=TURN_TIMEOUT_S)
            except TimeoutError as exc:
                fut.cancel()
                raise ModelError(f"the rollout server did not answer within {TURN_TIMEOUT_S:.0f} s") from exc
            except Exception as exc:  # a server/Ray failure is operational: mask the rollout, never score it
                raise ModelError(f"the rollout server failed: {type(exc).__name__}: {str(exc)[:500]}") from exc

        rc = self.rollout_config
        budget = protocol.test_agent.max_output_tokens if self.role == "test" else protocol.repair_rl.max_response_tokens
        policy = ServerPolicy(self.tokenizer, generate, sampling_params=sampling_params,
                              prompt_length=int(rc.prompt_length), response_length=int(rc.response_length),
                              sampling=SamplingConfig.rl_rollout(protocol, max_tokens=budget))
        seed = int.from_bytes(hashlib.sha256(f"{rc.get('seed', 0)}/{request_id}".encode()).digest()[:4], "little")
        started = time.monotonic()
        result = await asyncio.to_thread(run_episode, self.role, self._episode(protocol), policy, row, seed)
        if policy.server_fields:
            steps = [f.get("global_steps") for f in policy.server_fields if f.get("global_steps") is not None]
            result.info["server"] = {k: v for k, v in policy.server_fields[0].items() if k != "global_steps"}
        else:
            steps = []
        placeholder = _placeholder(policy, row) if result.sample is None else result.sample
        out = loop_output(result, placeholder, seconds=time.monotonic() - started, protocol=protocol)
        if steps:   # verl's off-policy accounting reads these (its own tool loop sets them the same way)
            out.extra_fields["min_global_steps"], out.extra_fields["max_global_steps"] = min(steps), max(steps)
        return out


@register(AGENT_LOOP_NAMES["test"])
class TestAgentLoop(_EpisodeLoop):
    """The Learn-to-Test episode (`episodes.TestEpisode`) as a verl agent loop."""

    __test__ = False
    role = "test"


@register(AGENT_LOOP_NAMES["repair"])
class RepairAgentLoop(_EpisodeLoop):
    """The Repair episode (`episodes.RepairEpisode`: Round 0 and every revision round, one sample)."""

    role = "repair"


# --------------------------------------------------------------------------------------------------
# Group scoring: the estimators and the DAPO filter
# --------------------------------------------------------------------------------------------------

def _levels_by_reward(protocol: ProtocolConfig) -> dict[float, TestLevel]:
    c = protocol.test_reward
    table = {c.no_valid_submission: TestLevel.NO_VALID_SUBMISSION, c.not_base_to_gold: TestLevel.NOT_BASE_TO_GOLD,
             c.q_low_ba: TestLevel.Q_LOW_BA, c.q_mid_ba: TestLevel.Q_MID_BA, c.q_full_ba: TestLevel.Q_FULL_BA}
    if len(table) != 5:
        raise InputError("the five Eq. 5 level rewards must differ for the verl estimator to tell the levels apart",
                         field="test_reward")
    return table


def score_verl_group(role: str, rewards: Sequence[float], masked: Sequence[bool], turns: Sequence[int],
                     protocol: ProtocolConfig = PAPER) -> tuple[list[float], GroupAdvantages]:
    """(final rewards, advantages) of one group from what verl's batch carries per rollout.

    Test: Eq. 5's turn slack (`rewards.turn_slack`, the level read back from the level reward), then the Test
    rule (masked rollouts out of the mean, advantage 0). Repair: the Repair rule (masked rollouts in the mean
    with their raw reward, then advantage 0). Mean baseline; std division only if the protocol says so."""
    if role == "test":
        table = _levels_by_reward(protocol)
        levels = []
        for r, m in zip(rewards, masked):
            level = table.get(round(float(r), 9)) or next((lv for v, lv in table.items() if abs(v - r) < 1e-6), None)
            if level is None and not m:
                raise ValueError(f"reward {r} of an unmasked Test rollout is not an Eq. 5 level reward")
            levels.append(level or TestLevel.NOT_BASE_TO_GOLD)
        slack = turn_slack(levels, [float(r) for r in rewards], [int(t) for t in turns], list(masked),
                           protocol.test_reward)
        final = [s.final for s in slack]
        return final, group_advantages(final, list(masked), masked_in_statistics=False, config=protocol.grpo)
    if role == "repair":
        final = [float(r) for r in rewards]
        return final, group_advantages(final, list(masked), masked_in_statistics=True, config=protocol.grpo)
    raise ValueError(f"role must be 'test' or 'repair', got {role!r}")


def batch_facts(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> tuple[list[float], list[bool], list[int]]:
    """(reward, masked, model turns) per row of a verl batch (see module docstring for why these three)."""
    rewards = token_level_rewards.sum(dim=-1).tolist()
    mask = response_mask.detach().cpu().to(torch.int64)
    masked = (mask.sum(dim=-1) == 0).tolist()
    turns = [response_turns(row) for row in mask.tolist()]
    return [float(r) for r in rewards], [bool(m) for m in masked], turns


def _estimate(role: str, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray | None,
              config: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    protocol = protocol_from_env()
    if config is not None and bool(getattr(config, "norm_adv_by_std_in_grpo", False)) != protocol.grpo.std_normalization:
        raise InputError(f"algorithm.norm_adv_by_std_in_grpo={config.norm_adv_by_std_in_grpo} contradicts "
                         f"grpo.std_normalization={protocol.grpo.std_normalization} of the protocol",
                         field="algorithm.norm_adv_by_std_in_grpo")
    check_aborted_baseline(role, protocol)
    if index is None:
        raise InputError("the batch has no 'uid' column: GRPO groups cannot be formed", field="uid")
    rewards, masked, turns = batch_facts(token_level_rewards, response_mask)
    groups: dict[Any, list[int]] = {}
    for i, uid in enumerate(index):
        groups.setdefault(uid, []).append(i)
    adv = torch.zeros(len(rewards), dtype=torch.float32)
    for rows in groups.values():
        _, ga = score_verl_group(role, [rewards[i] for i in rows], [masked[i] for i in rows], [turns[i] for i in rows],
                                 protocol)
        for i, a in zip(rows, ga.advantages):
            adv[i] = a
    scores = adv.to(token_level_rewards.device).unsqueeze(-1) * response_mask
    return scores, scores


@register_adv_est(ADV_ESTIMATOR_NAMES["test"])
def test_agent_advantages(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                          index: np.ndarray | None = None, config: Any = None,
                          **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator of the Test agent (§4.1): Eq. 5's turn slack, masked rollouts out of the mean, 0."""
    return _estimate("test", token_level_rewards, response_mask, index, config)


@register_adv_est(ADV_ESTIMATOR_NAMES["repair"])
def repair_agent_advantages(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                            index: np.ndarray | None = None, config: Any = None,
                            **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator of the Repair agent (App. A.2): masked rollouts in the mean, then advantage 0."""
    return _estimate("repair", token_level_rewards, response_mask, index, config)


test_agent_advantages.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def group_drops(role: str, groups: dict[str, list[dict[str, float]]], protocol: ProtocolConfig = PAPER
                ) -> dict[str, DropReason]:
    """DAPO over finished groups: {uid: why it is dropped} for groups whose unmasked rollouts' final rewards
    (after the turn slack) do not vary (`rewards.drop_reason`). `groups[uid]` holds each trajectory's
    `reward_extra_info` (the keys `loop_output` writes)."""
    return drops_of(group_scores(role, groups, protocol))


def drops_of(scores: dict[str, tuple[list[float], list[bool]]]) -> dict[str, DropReason]:
    """{uid: why it is dropped} of scored groups (`group_scores`)."""
    return {uid: reason for uid, (final, masked) in scores.items() if (reason := drop_reason(final, masked))}


def group_scores(role: str, groups: dict[str, list[dict[str, float]]], protocol: ProtocolConfig = PAPER
                 ) -> dict[str, tuple[list[float], list[bool]]]:
    """{uid: (final rewards after Eq. 5's turn slack, masked flags)} of finished groups (`reward_extra_info`)."""
    out = {}
    for uid, infos in groups.items():
        for k in (REWARD_KEY, MASKED_KEY, TURNS_KEY):
            if any(k not in info for info in infos):
                raise InputError(f"a trajectory of group {uid} has no {k!r} in reward_extra_info (not produced by "
                                 "the execcritic agent loops?)", field=f"reward_extra_info.{k}")
        masked = [bool(i[MASKED_KEY]) for i in infos]
        final, _ = score_verl_group(role, [float(i[REWARD_KEY]) for i in infos], masked,
                                    [int(i[TURNS_KEY]) for i in infos], protocol)
        out[uid] = (list(final), masked)
    return out


def drop_counts(drops: dict[str, DropReason]) -> Counter:
    return Counter(r.value for r in drops.values())


__all__ = [
    "TURN_MISMATCHES",
    "CPUTokenServer",
    "RepairAgentLoop",
    "ServerPolicy",
    "TestAgentLoop",
    "batch_facts",
    "drop_counts",
    "drops_of",
    "group_drops",
    "group_scores",
    "loop_output",
    "protocol_from_env",
    "repair_agent_advantages",
    "response_turns",
    "row_from_record",
    "score_verl_group",
    "test_agent_advantages",
    "verl_record",
    "write_verl_dataset",
]
