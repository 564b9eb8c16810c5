"""GRPO over real episodes on TRL 1.16: issue groups, DAPO dynamic sampling, each agent's masking rule.

Why a runner and a trainer subclass on top of `trl_adapter`: TRL computes one advantage rule (a `None` reward
is left out of the group mean: the Test rule), has no turn slack (Eq. 5 compares a rollout with its group)
and no dynamic sampling (DAPO: keep only groups with non-zero reward variance, oversampling until
`groups_per_step` are kept). So:

- `GroupRolloutRunner` (TRL's `rollout_func`) runs the `rollouts_per_group` episodes of each issue group the
  step asks for (threads: `workers`, each with its own `HFPolicy` on the shared weights), scores each group
  with `episodes.score_group` (Eq. 5 with turn slack / Eq. 6; both masking rules; `execcritic.rewards`
  only) and offers it to `rewards.DynamicSampler`; a dropped group is replaced by a fresh group of another
  issue until the step is full or `grpo.max_groups_offered` groups were offered (`rewards.offer_room`); how the
  step ends (`stop_reason` `full` | `offer_cap`, fillers, reward summary) is `rewards.end_step`, shared with
  verl's replay buffer: a capped step proceeds with dropped groups as fillers whose samples train nothing.
  Masked rollouts and fillers get an all-zero loss mask too, so they are out of the update (slime's
  `remove_sample`) and out of the per-token normalizer. With `records_path`, every rollout of the step is
  written there (token ids, sampling logprobs, the loss mask used, reward breakdown, advantage).
- `make_trainer` builds a `GRPOTrainer` subclass whose advantages are the runner's (TRL's own are replaced
  after it computes them; its logged advantages follow). A minibatch without a trainable token (no kept group
  in it) runs no forward or backward pass, so the optimizer step leaves every parameter untouched: no weight
  decay, no auxiliary loss, no Adam moment. It also logs an approximate KL (k3) of the current policy to the
  sampling policy over the trained tokens, whatever `grpo.kl_coef` is.
- `MetricsRecorder` writes one row per GRPO step to `results/training/<run_id>/metrics.jsonl` (the store's
  `training` schema) when a checkpoint is saved, so the curve never holds a step whose weights were lost. A row
  aggregates every minibatch (optimizer step) of its GRPO step: mean loss, entropy, clip fraction and KL, mean
  and max gradient norm, skipped optimizer steps, and the training throughput.

One process only (the CPU path): the advantage replacement assumes TRL's batch is this process's batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainerCallback

from execcritic.agents.models.base import SamplingConfig
from execcritic.config import PAPER, ProtocolConfig, RepairRLConfig, TestRLConfig
from execcritic.errors import InputError
from execcritic.rewards import DynamicSampler, end_step, offer_room
from execcritic.training.episodes import EpisodeResult, GroupScore, run_episode, score_group
from execcritic.training.policy import HFPolicy, TrajectorySample
from execcritic.training.trl_adapter import (
    RolloutRunner,
    episode_reward,
    grpo_args,
    peak_rss_mb,
    plan_rollouts,
    prompt_key,
    rollout_sampling,
)

Episode = Callable[[HFPolicy, dict[str, Any]], EpisodeResult]

# reward-level histogram columns (`level_*` in the training schema)
TEST_LEVEL_COLUMNS = {"no_valid_submission": "level_invalid", "not_base_to_gold": "level_zero",
                      "q_low_ba": "level_q", "q_mid_ba": "level_ba08", "q_full_ba": "level_ba1"}
REPAIR_LEVEL_COLUMNS = {"invalid_patch": "level_zero", "forbidden_test_modification": "level_zero",
                        "usable_selected_fails": "level_local_fail",
                        "selected_passes_official_fails": "level_local_pass",
                        "resolved_after_revision": "level_revision", "resolved_at_round0": "level_round0"}


def role_config(role: str, protocol: ProtocolConfig = PAPER) -> TestRLConfig | RepairRLConfig:
    return protocol.test_rl if role == "test" else protocol.repair_rl


@dataclass
class Group:
    """One issue group: its row, its episodes in order, their group score and the sampler's decision."""

    row: dict[str, Any]
    results: list[EpisodeResult]
    score: GroupScore
    kept: bool
    reason: str | None
    filler: bool = False


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _live(groups: list[Group]) -> list[float]:
    """The unmasked rollouts' final rewards of `groups` (what DAPO and the step's reward summary are over)."""
    return [rw for gr in groups for rw, m in zip(gr.score.rewards, gr.score.masked) if not m]


def _std(xs: list[float]) -> float | None:
    """Sample standard deviation (ddof=1, TRL's `reward_std`); None below two values."""
    return statistics.stdev(xs) if len(xs) >= 2 else None


class GroupRolloutRunner:
    """TRL `rollout_func`: real episodes in issue groups with dynamic sampling (module docstring).

    role: "test" | "repair" (which reward/masking rule). episode: `episode(policy, row) -> EpisodeResult`.
    rows: dataset rows (`episodes.test_row` / `repair_row`); TRL passes prompts, rows are found by prompt.
    """

    def __init__(self, role: str, episode: Episode, rows: list[dict[str, Any]], *, protocol: ProtocolConfig = PAPER,
                 sampling: SamplingConfig | None = None, seed: int = 0, workers: int = 1,
                 policy_kwargs: dict[str, Any] | None = None, records_path: str | None = None):
        if role not in ("test", "repair"):
            raise ValueError(f"role must be 'test' or 'repair', got {role!r}")
        g = protocol.grpo
        if g.max_groups_offered < g.groups_per_step:
            raise InputError(f"grpo.max_groups_offered ({g.max_groups_offered}) must be at least groups_per_step "
                             f"({g.groups_per_step}): a step offers at least the groups it keeps, and the cap is "
                             "what ends a step on a policy without reward variance", field="grpo.max_groups_offered")
        self.records_path = records_path
        self.role, self.episode, self.protocol = role, episode, protocol
        self.rows: dict[str, dict[str, Any]] = {}
        for row in rows:
            key = prompt_key(row["prompt"])
            if key in self.rows and self.rows[key] is not row:
                raise ValueError(f"two rows share one prompt ({row.get('instance_id')}); rollout_func could not "
                                 "tell them apart")
            self.rows[key] = row
        self.order = list(self.rows.values())
        # default: the role's rollout sampling with its per-turn response budget (as make_trainer passes it); a
        # bare rl_rollout() would let a turn run to the context window
        self.sampling = sampling or _rollout_sampling(role, protocol)
        self.seed, self.workers = seed, max(1, int(workers))
        self.policy_kwargs = dict(policy_kwargs or {})
        self._local = threading.local()
        self._model = None
        self.last_advantages: list[float] | None = None
        self.last_groups: list[Group] = []
        self.step_stats: dict[str, Any] = {}
        self.calls: list[dict[str, Any]] = []

    # -- policies: one per worker thread, all on the trainer's weights -----------------------------
    def _policy(self) -> HFPolicy:
        policy = getattr(self._local, "policy", None)
        if policy is None or policy.model is not self._model:
            policy = HFPolicy(self._model, self._tokenizer, sampling=self.sampling, **self.policy_kwargs)
            self._local.policy = policy
        return policy

    def _seed(self, step: int, group: int, k: int) -> int:
        digest = hashlib.sha256(f"{self.seed}/{step}/{group}/{k}".encode()).digest()
        return int.from_bytes(digest[:8], "little") & 0x7FFFFFFFFFFFFFFF

    def _run_one(self, row: dict[str, Any], seed: int) -> EpisodeResult:
        return run_episode(self.role, self.episode, self._policy(), row, seed)

    def run_groups(self, rows: list[dict[str, Any]], g: int, step: int, first_index: int) -> list[list[EpisodeResult]]:
        """Run `g` episodes for each row (all episodes of all rows in the worker pool); results in row order."""
        jobs = [(i, k, row) for i, row in enumerate(rows) for k in range(g)]
        out: list[list[EpisodeResult | None]] = [[None] * g for _ in rows]

        def job(item):
            i, k, row = item
            return i, k, self._run_one(row, self._seed(step, first_index + i, k))

        if self.workers == 1:
            done = map(job, jobs)
        else:
            pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rollout")
            done = pool.map(job, jobs)
        try:
            for i, k, res in done:
                out[i][k] = res
        finally:
            if self.workers != 1:
                pool.shutdown(wait=True)
        return out  # type: ignore[return-value]

    def _draws(self, step: int):
        """Replacement issues for dropped groups: a per-step seeded permutation of the rows, cycled (resumable:
        a function of the step alone)."""
        rng = random.Random(f"{self.seed}/draws/{step}")
        while True:
            order = list(self.order)
            rng.shuffle(order)
            yield from order

    # -- rollout_func ------------------------------------------------------------------------------
    def __call__(self, prompts: list[Any], trainer) -> dict[str, list]:
        started = time.monotonic()
        self._model = trainer.accelerator.unwrap_model(trainer.model)
        self._tokenizer = trainer.processing_class
        training = trainer.model.training
        g = trainer.num_generations if training else trainer.num_generations_eval
        expected = trainer.args.generation_batch_size // trainer.accelerator.num_processes if training else None
        plan = plan_rollouts(prompts, g, expected)
        if len(plan) % g:
            raise ValueError(f"{len(plan)} rollouts do not form groups of {g}")
        slots = []
        for j in range(0, len(plan), g):
            row = self.rows.get(prompt_key(prompts[plan[j]]))
            if row is None:
                raise KeyError(f"rollout_func got a prompt that is not one of the {len(self.rows)} rows it was given")
            slots.append(row)
        step = trainer.state.global_step
        grpo = dataclasses.replace(self.protocol.grpo, groups_per_step=len(slots), rollouts_per_group=g)
        sampler: DynamicSampler[Group] = DynamicSampler(grpo)
        cap = max(self.protocol.grpo.max_groups_offered, len(slots)) if training else len(slots)
        dropped: list[Group] = []
        draws = self._draws(step)
        queue = list(slots)
        offered = 0
        was_training = self._model.training
        self._model.eval()   # once for the phase: worker threads must not toggle train/eval under each other
        try:
            while not sampler.full:
                need = offer_room(len(slots) - len(sampler.kept), offered, cap)
                if need <= 0:
                    break       # the cap: end_step fills the step with dropped groups (stop reason offer_cap)
                batch = [queue.pop(0) if queue else next(draws) for _ in range(need)]
                for row, results in zip(batch, self.run_groups(batch, g, step, offered)):
                    group = Group(row, results, score_group(self.role, results, self.protocol), False, None)
                    offered += 1
                    if not training:      # evaluation: no dynamic sampling
                        group.kept = True
                        sampler.kept.append(group)
                        continue
                    decision = sampler.offer(group, group.score.rewards, group.score.masked)
                    group.kept, group.reason = decision.kept, decision.reason.value if decision.reason else None
                    if not decision.kept:
                        dropped.append(group)
        finally:
            self._model.train(was_training)
        end = end_step(len(sampler.kept), dropped, len(slots), offered=offered, cap=cap,
                       kept_rewards=_live(sampler.kept), offered_rewards=_live([*sampler.kept, *dropped]))
        groups: list[Group] = [*sampler.kept, *(dataclasses.replace(f, filler=True) for f in end.fillers)]
        self.last_groups = groups
        out = self._output(groups, step, dropped if training else [])
        seconds = time.monotonic() - started
        self.step_stats = self._stats(groups, dropped, sampler, offered, seconds, g)
        self.step_stats.update(end.record())
        stop_reason = self.step_stats["stop_reason"] = end.stop_reason if training else "eval"
        self.step_stats["trained_tokens"] = sum(sum(m) for m in out["env_mask"])
        self.step_stats["sample_tokens"] = sum(len(a) + len(b) for a, b in zip(out["prompt_ids"],
                                                                                out["completion_ids"]))
        self.calls.append({"step": step, "prompts": len(prompts), "groups": len(slots), "offered": offered,
                           "seconds": seconds, "stop_reason": stop_reason})
        return out

    def _output(self, groups: list[Group], step: int, dropped: list[Group]) -> dict[str, list]:
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                "episode_reward": [], "episode_info": []}
        advantages: list[float] = []
        records: list[dict[str, Any]] = []
        for gi, group in enumerate(groups):
            for k, (res, reward, masked, adv) in enumerate(zip(group.results, group.score.rewards, group.score.masked,
                                                               group.score.advantages.advantages)):
                sample = res.sample or self._placeholder(group.row)
                trains = not (masked or group.filler or res.sample is None)
                mask = list(sample.env_mask) if trains else [0] * len(sample.env_mask)
                out["prompt_ids"].append(sample.prompt_ids)
                out["completion_ids"].append(sample.completion_ids)
                out["logprobs"].append(sample.logprobs)
                out["env_mask"].append(mask)
                out["episode_reward"].append(None if masked else reward)
                out["episode_info"].append({**res.info, "masked": masked, "filler": group.filler})
                advantages.append(adv if trains else 0.0)
                records.append(_rollout_record(step, gi, k, group, res, reward, masked, advantages[-1], sample, mask))
        # dropped groups that did not become fillers trained nothing either; recorded for debugging
        used = {id(gr.results) for gr in groups}
        for gr in (d for d in dropped if id(d.results) not in used):
            for k, (res, reward, masked) in enumerate(zip(gr.results, gr.score.rewards, gr.score.masked)):
                sample = res.sample or self._placeholder(gr.row)
                records.append(_rollout_record(step, None, k, gr, res, reward, masked, 0.0, sample,
                                               [0] * len(sample.env_mask)))
        self.last_advantages = advantages
        if self.records_path:
            with open(self.records_path, "a") as fh:
                fh.writelines(json.dumps(rec, default=str) + "\n" for rec in records)
        return out

    def _placeholder(self, row: dict[str, Any]) -> TrajectorySample:
        return RolloutRunner._placeholder(self._policy(), row)

    def _stats(self, groups: list[Group], dropped: list[Group], sampler, offered: int,
               seconds: float, g: int) -> dict[str, Any]:
        """The per-step facts the metrics row needs (`results/training/*/metrics.jsonl`; the stop reason, fillers
        and reward summary are `end_step`'s, shared with verl)."""
        kept = [gr for gr in groups if not gr.filler]
        offered_groups = kept + dropped
        episodes = [r for gr in offered_groups for r in gr.results]
        levels: Counter[str] = Counter()
        columns = TEST_LEVEL_COLUMNS if self.role == "test" else REPAIR_LEVEL_COLUMNS
        for gr in offered_groups:
            for b, m in zip(gr.score.breakdowns, gr.score.masked):
                if b is None or m:
                    continue
                col = columns[b.level.value]
                if self.role == "test" and getattr(b, "turn_penalized", False):
                    col += "_halved"
                levels[col] += 1
        stats: dict[str, Any] = {
            "masked_share": (sum(1 for gr in offered_groups for m in gr.score.masked if m) / len(episodes))
            if episodes else 0.0,
            "aborted": sum(1 for r in episodes if r.aborted),
            "aborted_reasons": sorted({str(r.info.get("aborted"))[:300] for r in episodes if r.aborted}),
            "dropped_groups": len(dropped), "offered_groups": offered,
            "dropped_reasons": dict(sorted(sampler.dropped.items())),
            "n_rollouts": len(kept) * g, "episodes": len(episodes),
            "rollout_s": round(seconds, 3),
            "episodes_per_min": round(60.0 * len(episodes) / seconds, 3) if seconds > 0 else None,
            "turns_mean": _mean([float(r.sample.turns) for r in episodes if r.sample]),
            "model_tokens_mean": _mean([float(r.sample.model_tokens) for r in episodes if r.sample]),
            "model_tokens_total": sum(r.sample.model_tokens for r in episodes if r.sample),
            "workers": self.workers,
            **{k: int(v) for k, v in levels.items()},
        }
        infos = [r.info for r in episodes]
        if self.role == "test":
            scored = [r for r in episodes if not r.aborted]
            stats["base_gate_rate"] = _mean([float(bool(r.info.get("qualified"))) for r in scored])
            qs = [r.breakdown for r in scored if r.breakdown is not None]
            stats["b2g"] = _mean([float(b.Q) for b in qs])
            stats["ba_mean"] = _mean([b.BA for b in qs if b.Q])
        else:
            offs = [i["official"] for i in infos if i.get("official")]
            stats["official_resolved_share"] = _mean([float(o["resolved"]) for o in offs])
            stats["round0_pass_share"] = _mean([float(i.get("final_reason") == "round0_pass") for i in infos])
            stats["local_pass_share"] = _mean([float((i.get("terminal") or {}).get("failure_kind") == "passed")
                                               for i in infos])
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in stats.items()}


def _rollout_record(step: int, group_index: int | None, k: int, group: Group, res: EpisodeResult, reward: float,
                    masked: bool, advantage: float, sample: TrajectorySample, mask: list[int]) -> dict[str, Any]:
    """One line of `rollouts.jsonl`: what a practitioner needs to debug reward hacking and masking (verl writes
    the same through its rollout dump). `group`: position in the trained batch (None: dropped, not trained)."""
    rec = res.to_record()
    return {"step": step, "group": group_index, "rollout": k, "instance_id": group.row.get("instance_id"),
            "kept": group.kept, "filler": group.filler, "drop_reason": group.reason, "masked": masked,
            "aborted": res.aborted, "reward": reward, "raw_reward": res.reward, "advantage": advantage,
            "level": rec["info"].get("level"), "breakdown": rec["breakdown"], "info": rec["info"],
            "turns": sample.turns, "model_tokens": sample.model_tokens, "trained_tokens": sum(mask),
            "prompt_ids": sample.prompt_ids, "completion_ids": sample.completion_ids, "logprobs": sample.logprobs,
            "loss_mask": mask}


# --------------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------------

def batch_shape(role: str, protocol: ProtocolConfig = PAPER) -> dict[str, int]:
    """TRL batch arguments from the config: groups_per_step x rollouts_per_group rollouts per GRPO step,
    updated in minibatches of the role's global batch (Tables 7e, 8b): steps_per_generation optimizer steps."""
    grpo, rc = protocol.grpo, role_config(role, protocol)
    rollouts = grpo.groups_per_step * grpo.rollouts_per_group
    batch = min(rc.global_batch_size, rollouts)
    if rollouts % batch:
        raise ValueError(f"{rollouts} rollouts per step cannot be split into minibatches of {batch} "
                         f"({role}_rl.global_batch_size)")
    if batch % grpo.rollouts_per_group and grpo.rollouts_per_group % batch:
        raise ValueError(f"global batch {batch} and rollouts_per_group {grpo.rollouts_per_group} must divide one "
                         "another")
    return {"num_generations": grpo.rollouts_per_group, "per_device_train_batch_size": batch,
            "steps_per_generation": rollouts // batch}


def make_trainer(role: str, model, tokenizer, rows: list[dict[str, Any]], episode: Episode, output_dir: str, *,
                 protocol: ProtocolConfig = PAPER, seed: int = 0, workers: int = 1,
                 callbacks: list | None = None, policy_kwargs: dict[str, Any] | None = None,
                 sampling: SamplingConfig | None = None, records_path: str | None = None, **args: Any):
    """(trainer, runner): a `GRPOTrainer` on real episodes with the paper's GRPO and this package's
    advantages (module docstring). `args` override `trl.GRPOConfig` fields (e.g. save_strategy for checkpoints);
    `records_path`: the per-rollout records file (`rollouts.jsonl`)."""
    import torch  # lazy: train extra
    from datasets import Dataset  # lazy: HF datasets (slow import)
    from trl import GRPOTrainer  # lazy: train extra

    rc = role_config(role, protocol)
    shape = batch_shape(role, protocol)
    sampling = sampling or _rollout_sampling(role, protocol)
    runner = GroupRolloutRunner(role, episode, rows, protocol=protocol, sampling=sampling, seed=seed, workers=workers,
                                policy_kwargs=policy_kwargs, records_path=records_path)

    class ExecCriticGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose advantages are the rollout runner's (Eq. 5 slack, both masking rules, DAPO)."""

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if self.accelerator.num_processes != 1:
                raise RuntimeError("ExecCriticGRPOTrainer replaces advantages per process; run one process")
            ours = runner.last_advantages
            if ours is None or len(ours) != len(out["advantages"]):
                raise RuntimeError(f"the rollout runner produced {None if ours is None else len(ours)} advantages "
                                   f"for {len(out['advantages'])} completions")
            out["advantages"] = torch.tensor(ours, dtype=out["advantages"].dtype, device=out["advantages"].device)
            logged = self._logs["advantages"]
            for i, a in enumerate(ours):
                logged[len(logged) - len(ours) + i] = a
            runner.last_advantages = None
            return out

        def _get_per_token_logps_and_entropies(self, *a, **kw):
            out = super()._get_per_token_logps_and_entropies(*a, **kw)
            self._last_logps = out[0]          # the loss pass's logps, for the sampling-KL metric
            return out

        def _compute_loss(self, model, inputs):
            mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["optimizer_step_skipped"].append(0.0 if bool(mask.any()) else 1.0)
            if not bool(mask.any()):
                # no kept group in this minibatch: no forward and no backward, so every gradient stays None and
                # the optimizer step moves no parameter (no weight decay, no auxiliary loss, no Adam moment)
                return torch.zeros((), device=inputs["completion_ids"].device, requires_grad=True)
            loss = super()._compute_loss(model, inputs)
            sampled = inputs.get("sampling_per_token_logps")
            if sampled is not None:
                # k3 estimate of KL(sampling policy || current policy) on the trained tokens (Schulman 2020),
                # logged whatever grpo.kl_coef is: how far the update has moved from the rollouts' policy
                log_ratio = (self._last_logps.detach() - sampled) * mask
                k3 = (torch.exp(log_ratio) - 1 - log_ratio) * mask
                self._metrics[mode]["kl_sampling"].append(float(k3.sum() / mask.sum()))
            return loss

    steps = rc.steps * shape["steps_per_generation"]
    dataset = Dataset.from_list([{"prompt": r["prompt"]} for r in rows])
    trl_args = grpo_args(output_dir, role=rc, grpo=protocol.grpo, sampling=sampling, seed=seed,
                         num_generations=shape["num_generations"],
                         per_device_train_batch_size=shape["per_device_train_batch_size"], max_steps=steps,
                         **{"steps_per_generation": shape["steps_per_generation"], **args})
    trainer = ExecCriticGRPOTrainer(model=model, reward_funcs=[episode_reward], args=trl_args, train_dataset=dataset,
                                    processing_class=tokenizer, rollout_func=runner, callbacks=callbacks)
    return trainer, runner


def _rollout_sampling(role: str, protocol: ProtocolConfig) -> SamplingConfig:
    return rollout_sampling(role_config(role, protocol), protocol)


# --------------------------------------------------------------------------------------------------
# Per-step metrics
# --------------------------------------------------------------------------------------------------

@dataclass
class MetricsRecorder(TrainerCallback):
    """One training-schema row per GRPO step, buffered until the checkpoint that holds its weights is saved
    (and at the end of training); a progress line per step on stderr and in `progress_path`.

    writer: a `results.store.RunWriter` for artifact `training` (None: rows are only kept in `rows`)."""

    runner: GroupRolloutRunner | None
    steps_per_generation: int
    writer: Any = None
    progress_path: str | None = None
    label: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    _t0: float = 0.0
    _opt_t0: float = 0.0
    _opt_s: float = 0.0
    _step_t0: float = 0.0
    _iteration_opt_s: float = 0.0
    _minibatches: list[dict[str, Any]] = field(default_factory=list)

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step % self.steps_per_generation == 0:
            self._step_t0 = time.perf_counter()
            self._iteration_opt_s = 0.0

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._opt_t0 = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        self._iteration_opt_s += time.perf_counter() - self._opt_t0

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" not in logs:
            return
        self._minibatches.append(dict(logs))     # one log per optimizer step (logging_steps=1)
        if state.global_step % self.steps_per_generation:
            return
        iteration = state.global_step // self.steps_per_generation - 1
        assert self.runner is not None
        s = self.runner.step_stats
        mb, self._minibatches = self._minibatches, []
        # TRL's step_time spans its training_step, which runs the rollouts of the step's first minibatch
        train_s = max(0.0, sum(_finite(m.get("step_time")) or 0.0 for m in mb) - (s.get("rollout_s") or 0.0))
        row = {"step": iteration, "optimizer_steps": state.global_step,
               **{k: v for k, v in s.items() if k not in ("dropped_reasons", "aborted_reasons")},
               "aborted_reasons": "; ".join(s.get("aborted_reasons") or []),
               **{f"dropped_{k}": int(v) for k, v in (s.get("dropped_reasons") or {}).items()},
               "minibatches": len(mb), "loss": _mean_of(mb, "loss"), "lr": _finite(mb[-1].get("learning_rate")),
               "entropy": _mean_of(mb, "entropy"), "kl": _mean_of(mb, "kl"),
               "kl_sampling": _mean_of(mb, "kl_sampling"), "clip_ratio": _mean_of(mb, "clip_ratio/region_mean"),
               "grad_norm": _mean_of(mb, "grad_norm"),
               "grad_norm_max": max((_finite(m.get("grad_norm")) or 0.0 for m in mb), default=None),
               "optimizer_steps_skipped": int(sum(_finite(m.get("optimizer_step_skipped")) or 0.0 for m in mb)),
               "train_s": round(train_s, 3),
               "tokens_per_s": round(s.get("sample_tokens", 0) / train_s, 2) if train_s > 0 else None,
               "trained_tokens_per_s": round(s.get("trained_tokens", 0) / train_s, 2) if train_s > 0 else None,
               "response_tokens_mean": s.get("model_tokens_mean"),
               "optimizer_s": round(self._iteration_opt_s, 4),
               "wall_s": round(time.perf_counter() - self._step_t0, 3), "peak_rss_mb": round(peak_rss_mb(), 1)}
        # reward_mean / reward_std / reward_over / stop_reason / filler_groups: `end_step`'s (the runner's stats)
        self.pending.append(row)
        self.rows.append(row)
        line = (f"[{self.label + ' ' if self.label else ''}{self.runner.role}-rl step {iteration}] reward {row['reward_mean']:.3f} +- {row['reward_std']:.3f} "
                f"kept {row['kept_groups']} dropped {row['dropped_groups']} masked {row['masked_share']:.2f} "
                f"rollout {row['rollout_s']:.1f}s opt {row['optimizer_s']:.2f}s rss {row['peak_rss_mb']:.0f}MB")
        print(line, file=sys.stderr, flush=True)
        if self.progress_path:
            with open(self.progress_path, "a") as fh:
                fh.write(json.dumps(row, default=str) + "\n")

    def flush(self) -> int:
        n = 0
        if self.writer is not None:
            for row in self.pending:
                n += bool(self.writer.append(row))
        self.pending = []
        return n

    def on_save(self, args, state, control, **kwargs):
        self.flush()

    def on_train_end(self, args, state, control, **kwargs):
        self.flush()


def _mean_of(logs: list[dict[str, Any]], key: str) -> float | None:
    """Mean of a metric over a GRPO step's minibatch logs (those that have it; None when none has)."""
    vals = [v for v in (_finite(m.get(key)) for m in logs) if v is not None]
    return statistics.fmean(vals) if vals else None


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


__all__ = [
    "REPAIR_LEVEL_COLUMNS",
    "TEST_LEVEL_COLUMNS",
    "Group",
    "GroupRolloutRunner",
    "MetricsRecorder",
    "batch_shape",
    "make_trainer",
    "role_config",
]
