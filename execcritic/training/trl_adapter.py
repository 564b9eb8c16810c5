"""A thin TRL 1.16 adapter: SFT on chat trajectories, and GRPO whose rollouts are real agent-loop episodes.

Why TRL here: it is the CPU-testable engine (the paper's engine, slime, is GPU/GitHub-only). Everything that
is ExecCritic-specific stays engine-agnostic: an *episode runner* `episode(policy, row) -> (TrajectorySample,
reward_or_None, info)` runs one multi-turn episode with an `HFPolicy` and scores it; this module only moves its
output into TRL's `rollout_func` contract and its reward into a reward function. A reward of `None` means
"operational error": TRL 1.16 turns it into NaN, leaves it out of the group mean and forces its advantage to 0
(the paper's masking rule, §4.1/Table 8).

Optimizer and GRPO knobs come from `execcritic.config.GRPOConfig` (lr, Adam betas, weight decay, clip 0.2/0.28,
KL 0, no std division); only the things the paper does not fix (loss aggregation, schedule, batch shape for
tests) are arguments here.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainerCallback

from execcritic.agents.loop import Session, Submitted, Trajectory
from execcritic.agents.models.base import ContextWindowExceeded, SamplingConfig, format_error_text
from execcritic.config import PAPER, GRPOConfig, ProtocolConfig, RepairRLConfig, TestRLConfig, WorkspaceConfig
from execcritic.errors import InputError
from execcritic.sandbox.base import Sandbox
from execcritic.training.episodes import OPERATIONAL_ERRORS
from execcritic.training.policy import HFPolicy, TrajectorySample

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is labelled experimental; we know

EpisodeFn = Callable[[HFPolicy, dict[str, Any]], tuple[TrajectorySample | None, float | None, dict[str, Any]]]


# --------------------------------------------------------------------------------------------------
# Trainer arguments from the paper config
# --------------------------------------------------------------------------------------------------

def optimizer_kwargs(grpo: GRPOConfig = PAPER.grpo) -> dict[str, Any]:
    """Actor optimizer (Tables 7b, 8a): Adam(beta1, beta2), lr, weight decay, as TrainingArguments fields."""
    return {"learning_rate": grpo.learning_rate, "adam_beta1": grpo.adam_beta1, "adam_beta2": grpo.adam_beta2,
            "weight_decay": grpo.weight_decay}


def _cpu_default() -> bool:
    import torch  # lazy: train/cpu-model extra

    return not torch.cuda.is_available()


def rollout_sampling(role: TestRLConfig | RepairRLConfig, protocol: ProtocolConfig = PAPER) -> SamplingConfig:
    """Rollout sampling of a role (Tables 7c, 8c) with its response budget (Table 7b: 8,192; Table 8a: 6,122)."""
    max_tokens = (role.max_response_tokens if isinstance(role, RepairRLConfig)
                  else protocol.test_agent.max_output_tokens)
    return SamplingConfig.rl_rollout(protocol, max_tokens=max_tokens)


# the paper's loss reductions, as TRL names them: "dapo" aggregates per token over the batch, "grpo" is the
# per-sequence mean
LOSS_TYPES = {"per-token": "dapo", "per-sequence": "grpo"}


def grpo_args(output_dir: str, *, role: TestRLConfig | RepairRLConfig = PAPER.test_rl, grpo: GRPOConfig = PAPER.grpo,
              sampling: SamplingConfig | None = None, num_generations: int | None = None,
              per_device_train_batch_size: int | None = None, max_steps: int | None = None, seed: int = 0,
              **overrides: Any):
    """`trl.GRPOConfig` for the paper's GRPO: group-mean advantages without std division, clip 0.2/0.28, KL 0.

    The role's config gives the steps, the schedule (constant for the Test agent, Table 7b; cosine for Repair,
    Table 8a), the loss reduction and the save interval. The TRL temperature must be the rollout temperature:
    TRL divides the logits by it when it recomputes logps.
    """
    if role.loss_reduction not in LOSS_TYPES:
        raise InputError(f"loss_reduction must be one of {sorted(LOSS_TYPES)}, got {role.loss_reduction!r}",
                         field="loss_reduction")
    from trl import GRPOConfig as TRLGRPOConfig  # lazy: train extra

    sampling = sampling or rollout_sampling(role)
    g = num_generations or grpo.rollouts_per_group
    if role.lr_horizon_steps < role.steps:
        raise InputError(f"lr_horizon_steps ({role.lr_horizon_steps}) must be at least steps ({role.steps}): the "
                         "schedule spans the run", field="lr_horizon_steps")
    kwargs: dict[str, Any] = {
        **optimizer_kwargs(grpo),
        "output_dir": output_dir, "num_generations": g, "per_device_train_batch_size": per_device_train_batch_size or g,
        "max_steps": role.steps if max_steps is None else max_steps, "loss_type": LOSS_TYPES[role.loss_reduction],
        "lr_scheduler_type": role.lr_schedule, "warmup_steps": 0, "save_steps": role.save_interval,
        "epsilon": grpo.clip_low, "epsilon_high": grpo.clip_high, "beta": grpo.kl_coef,
        "scale_rewards": "group" if grpo.std_normalization else "none",
        "temperature": 1.0 if sampling.temperature is None else sampling.temperature,
        "use_cpu": _cpu_default(), "report_to": "none", "save_strategy": "no", "logging_steps": 1, "seed": seed,
        "bf16": False, "gradient_accumulation_steps": 1, "dataloader_num_workers": 0,
    }
    kwargs.update(overrides)
    if kwargs["lr_scheduler_type"] == "cosine" and "lr_scheduler_kwargs" not in overrides:
        # HF's cosine reaches 0 at max_steps; Table 8b's runs stop at `steps` of a `lr_horizon_steps` schedule
        # (300 vs 100), so the cosine spans the horizon: num_cycles = max_steps / (2 x horizon in optimizer steps)
        horizon = role.lr_horizon_steps * kwargs.get("steps_per_generation", 1)
        kwargs["lr_scheduler_kwargs"] = {"num_cycles": kwargs["max_steps"] / (2 * horizon)}
    return TRLGRPOConfig(**kwargs)


def sft_args(output_dir: str, *, grpo: GRPOConfig = PAPER.grpo, max_steps: int = 1,
             per_device_train_batch_size: int = 2, seed: int = 0, **overrides: Any):
    """`trl.SFTConfig` with the actor optimizer of the paper and loss on assistant tokens only.

    The paper does not state SFT optimizer values (Table 7a); the RL actor's Adam betas, weight decay and lr are
    the defaults here, override them explicitly (they are recorded in the trainer's args)."""
    from trl import SFTConfig  # lazy: train extra

    kwargs: dict[str, Any] = {
        **optimizer_kwargs(grpo), "output_dir": output_dir, "max_steps": max_steps,
        "per_device_train_batch_size": per_device_train_batch_size, "assistant_only_loss": True,
        "lr_scheduler_type": "constant", "warmup_steps": 0, "use_cpu": _cpu_default(), "report_to": "none",
        "save_strategy": "no", "logging_steps": 1, "seed": seed, "bf16": False, "dataloader_num_workers": 0,
    }
    kwargs.update(overrides)
    return SFTConfig(**kwargs)


# --------------------------------------------------------------------------------------------------
# SFT
# --------------------------------------------------------------------------------------------------

def sft_example(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One `{"messages", "tools"}` row as TRL's SFT tokenization needs it: tool-call arguments as mappings (Jinja
    templates iterate them), absent fields dropped, and tools as a JSON string (Arrow cannot hold the union of
    arbitrary JSON schemas; TRL decodes the string)."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.loads(fn["arguments"] or "{}")
                calls.append({"type": "function", "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return {"messages": out, "tools": json.dumps(tools)}


def make_sft_trainer(model, tokenizer, examples: list[dict[str, Any]], output_dir: str, *,
                     callbacks: list | None = None, **args: Any):
    """`SFTTrainer` on chat examples (`{"messages", "tools"}`), loss on assistant tokens only.

    With `assistant_only_loss`, TRL swaps in the `{% generation %}`-tagged training variant of the Qwen3.5
    template, so tool responses, user/system turns and role headers carry label -100."""
    from datasets import Dataset  # lazy: HF datasets (slow import)
    from trl import SFTTrainer  # lazy: train extra

    rows = [e if isinstance(e.get("tools"), str) else sft_example(e["messages"], e.get("tools") or []) for e in examples]
    return SFTTrainer(model=model, args=sft_args(output_dir, **args), train_dataset=Dataset.from_list(rows),
                      processing_class=tokenizer, callbacks=callbacks)


# --------------------------------------------------------------------------------------------------
# GRPO: rollouts as agent-loop episodes
# --------------------------------------------------------------------------------------------------

def prompt_key(prompt: list[dict[str, Any]] | str) -> str:
    """Identity of a dataset prompt that survives the Arrow round trip (which adds `None` for absent fields)."""
    if isinstance(prompt, str):
        return json.dumps(prompt)
    return json.dumps([{k: v for k, v in m.items() if v is not None} for m in prompt], sort_keys=True)


def plan_rollouts(prompts: list[Any], num_generations: int, expected: int | None = None) -> list[int]:
    """Indices into `prompts`, one per episode to run.

    TRL 1.16 hands `rollout_func` the per-process slice *already repeated* `num_generations` times (its sampler
    repeats every index), although its docstring says "no duplication"; then one episode runs per entry. If a
    later version passes unique prompts, each is run `num_generations` times. `expected` (the number of
    completions TRL will score) decides when known; otherwise consecutive identical blocks of size
    `num_generations` are taken as duplication."""
    n, g = len(prompts), num_generations
    identity, expanded = list(range(n)), [i for i in range(n) for _ in range(g)]
    if expected is not None:
        if n == expected:
            return identity
        if n * g == expected:
            return expanded
        raise ValueError(f"rollout_func got {n} prompts; TRL expects {expected} completions with {g} generations "
                         "per prompt, which fits neither duplicated nor unique prompts")
    keys = [prompt_key(p) for p in prompts]
    duplicated = g > 1 and n % g == 0 and all(len(set(keys[i:i + g])) == 1 for i in range(0, n, g))
    return identity if duplicated or g == 1 else expanded


def episode_reward(prompts, completions, episode_reward=None, **kwargs) -> list[float | None]:
    """TRL reward function: the episode runner's reward, forwarded by `rollout_func` as an extra field.
    `None` stays `None` (TRL: excluded from the group mean, advantage 0)."""
    if episode_reward is None:
        raise ValueError("no `episode_reward` field: this reward function only works with `RolloutRunner`")
    return [None if r is None else float(r) for r in episode_reward]


class RolloutRunner:
    """TRL `rollout_func`: one agent-loop episode per completion TRL will score.

    rows: the dataset rows, each with a `prompt` (messages, used by TRL for logging and here to find the row;
        TRL passes rollout_func only the prompts) plus whatever the episode runner needs.
    episode: `episode(policy, row) -> (sample | None, reward | None, info)`; `None` sample = the episode could not
        produce one (it is replaced by a one-token, fully masked placeholder with reward None).
    Operational failures (`episodes.OPERATIONAL_ERRORS`) inside an episode are masked the same way; anything else
    (including `TemplateDriftError`) propagates: a broken sample must stop training, not be trained on.
    """

    def __init__(self, episode: EpisodeFn, rows: list[dict[str, Any]], *, sampling: SamplingConfig | None = None,
                 seed: int = 0, policy_kwargs: dict[str, Any] | None = None):
        self.episode = episode
        self.rows: dict[str, dict[str, Any]] = {}
        for row in rows:
            key = prompt_key(row["prompt"])
            if key in self.rows and self.rows[key] is not row:
                raise ValueError("two dataset rows share one prompt; rollout_func could not tell them apart")
            self.rows[key] = row
        self.sampling = sampling or SamplingConfig.rl_rollout()
        self.seed = seed
        self.policy_kwargs = dict(policy_kwargs or {})
        self.policy: HFPolicy | None = None
        self.calls: list[dict[str, Any]] = []   # per call: prompts received, episodes run, seconds

    def _policy(self, trainer) -> HFPolicy:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.policy is None or self.policy.model is not model:
            self.policy = HFPolicy(model, trainer.processing_class, sampling=self.sampling, **self.policy_kwargs)
        return self.policy

    def _episode_seed(self, step: int, index: int) -> int:
        digest = hashlib.sha256(f"{self.seed}/{step}/{len(self.calls)}/{index}".encode()).digest()
        return int.from_bytes(digest[:8], "little") & 0x7FFFFFFFFFFFFFFF

    def __call__(self, prompts: list[Any], trainer) -> dict[str, list]:
        started = time.monotonic()
        policy = self._policy(trainer)
        training = trainer.model.training
        g = trainer.num_generations if training else trainer.num_generations_eval
        expected = trainer.args.generation_batch_size // trainer.accelerator.num_processes if training else None
        plan = plan_rollouts(prompts, g, expected)
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                "episode_reward": [], "episode_info": []}
        for j, i in enumerate(plan):
            row = self.rows.get(prompt_key(prompts[i]))
            if row is None:
                raise KeyError(f"rollout_func got a prompt that is not one of the {len(self.rows)} rows it was given")
            policy.begin_episode(seed=self._episode_seed(trainer.state.global_step, j))
            try:
                sample, reward, info = self.episode(policy, row)
            except OPERATIONAL_ERRORS as exc:
                sample, reward, info = None, None, {"aborted": f"{type(exc).__name__}: {exc}"}
            if sample is None:
                sample, reward = self._placeholder(policy, row), None
                info = {**info, "placeholder": True}
            out["prompt_ids"].append(sample.prompt_ids)
            out["completion_ids"].append(sample.completion_ids)
            out["logprobs"].append(sample.logprobs)
            out["env_mask"].append(sample.env_mask)
            out["episode_reward"].append(reward)
            out["episode_info"].append(info)
        self.calls.append({"step": trainer.state.global_step, "prompts": len(prompts),
                           "unique_prompts": len({prompt_key(p) for p in prompts}), "episodes": len(plan),
                           "duplicated_by_trl": len(plan) == len(prompts) and g > 1,
                           "seconds": time.monotonic() - started})
        return out

    @staticmethod
    def _placeholder(policy: HFPolicy, row: dict[str, Any]) -> TrajectorySample:
        """A sample that trains nothing: the row's prompt, one end-of-turn token, mask 0."""
        try:
            prompt = policy.renderer.encode(policy.renderer.render(row["prompt"], policy.tools, generation_prompt=True))
        except Exception:  # noqa: BLE001 - the placeholder must exist even for an unrenderable row
            prompt = [policy.tokenizer.pad_token_id]
        stop = min(policy.stop_ids)
        return TrajectorySample(prompt_ids=prompt, completion_ids=[stop], logprobs=[0.0], env_mask=[0], turns=0)


def make_grpo_trainer(model, tokenizer, rows: list[dict[str, Any]], episode: EpisodeFn, output_dir: str, *,
                      sampling: SamplingConfig | None = None, seed: int = 0, callbacks: list | None = None,
                      policy_kwargs: dict[str, Any] | None = None, **args: Any):
    """`GRPOTrainer` whose completions are agent-loop episodes (see `RolloutRunner`); returns (trainer, runner)."""
    from datasets import Dataset  # lazy: HF datasets (slow import)
    from trl import GRPOTrainer  # lazy: train extra

    sampling = sampling or SamplingConfig.rl_rollout()
    runner = RolloutRunner(episode, rows, sampling=sampling, seed=seed, policy_kwargs=policy_kwargs)
    dataset = Dataset.from_list([{"prompt": r["prompt"]} for r in rows])
    trainer = GRPOTrainer(model=model, reward_funcs=[episode_reward], args=grpo_args(output_dir, sampling=sampling,
                          seed=seed, **args), train_dataset=dataset, processing_class=tokenizer,
                          rollout_func=runner, callbacks=callbacks)
    return trainer, runner


# --------------------------------------------------------------------------------------------------
# An episode runner on the real agent loop
# --------------------------------------------------------------------------------------------------

@dataclass
class EpisodeOutcome:
    """What a reward function sees: the row, the trajectory, whether and what was submitted, the open sandbox."""

    row: dict[str, Any]
    trajectory: Trajectory
    sandbox: Sandbox
    submitted: Submitted | None
    end_reason: str                    # "submitted" | "max_turns" | "context"
    turns: int
    sample: TrajectorySample | None = None


@dataclass
class SessionEpisode:
    """`episode(policy, row)` on `execcritic.agents.loop.Session`: the row's messages, bash actions in a sandbox,
    Listing 3 for turns without a valid call; it ends at the submit marker, after `max_turns`, or when the context
    is full. `reward(outcome)` runs while the sandbox is still open and may return `None` (operational error).

    This is the foundation the Test-agent and Repair-controller episodes plug into; their own controllers
    (submission gates, revision rounds) replace this plain loop later."""

    open_sandbox: Callable[[dict[str, Any]], Sandbox]
    reward: Callable[[EpisodeOutcome], float | None]
    max_turns: int
    initial_messages: Callable[[dict[str, Any]], list[dict[str, Any]]] = field(
        default=lambda row: [dict(m) for m in row["prompt"]])
    workspace: WorkspaceConfig = PAPER.workspace
    context_tokens: int | None = None

    def __call__(self, policy: HFPolicy, row: dict[str, Any]):
        sandbox = self.open_sandbox(row)
        try:
            trajectory = Trajectory(meta={"policy": policy.serialize(), "sandbox": sandbox.describe()})
            session = Session(policy, sandbox, trajectory=trajectory, format_error=format_error_text,
                              config=self.workspace, context_tokens=self.context_tokens)
            session.messages.extend(self.initial_messages(row))
            submitted, end = None, "max_turns"
            try:
                while session.turns < self.max_turns:
                    session.step()
            except Submitted as exc:
                submitted, end = exc, "submitted"
            except ContextWindowExceeded:
                end = "context"
            sample = policy.assemble_sample() if policy.turns else None
            outcome = EpisodeOutcome(row=row, trajectory=trajectory, sandbox=sandbox, submitted=submitted,
                                     end_reason=end, turns=session.turns, sample=sample)
            reward = self.reward(outcome)
        finally:
            sandbox.close()
        info = {"end_reason": end, "turns": session.turns, "submitted": submitted is not None,
                "model_tokens": sample.model_tokens if sample else 0,
                "noncanonical_turns": sample.noncanonical_turns if sample else []}
        return sample, reward, info


# --------------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------------

def peak_rss_mb() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class StepTimer(TrainerCallback):
    """Per optimizer step: wall time of the whole step (rollouts included for GRPO), of `optimizer.step()` alone,
    and the process's peak RSS after it."""

    def __init__(self):
        self.steps: list[dict[str, float]] = []
        self._t0 = self._t_opt = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._t_opt = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        self._opt_s = time.perf_counter() - self._t_opt

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append({"step": state.global_step, "step_s": time.perf_counter() - self._t0,
                           "optimizer_step_s": getattr(self, "_opt_s", float("nan")), "peak_rss_mb": peak_rss_mb()})
