"""Real TRL 1.16 steps on CPU with the tiny Qwen3.5-MoE: one SFT step on tool-calling chat examples, and one
GRPO step whose rollouts are multi-turn agent-loop episodes (`Session`) in real bubblewrap sandboxes.

Checked from TRL's own computed tensors: the optimizer step is a gradient-driven Adam step with the paper's
lr/betas/weight decay; tool, feedback and envelope tokens carry loss mask 0; a `None` reward (and an episode
that failed operationally) gets exactly zero advantage and is left out of the group mean. Step time and peak
RSS are printed (run with `-s` to see them)."""

from __future__ import annotations

import json
import math

import pytest

from execcritic.agents.loop import SUBMIT_MARKER
from execcritic.agents.models.base import BASH_TOOL, SamplingConfig
from execcritic.config import PAPER
from execcritic.errors import SandboxError
from execcritic.training.trl_adapter import (
    SessionEpisode,
    StepTimer,
    make_grpo_trainer,
    make_sft_trainer,
    peak_rss_mb,
    plan_rollouts,
)
from tests.training_fixtures import ForcedTurns, bash_call_text

SYSTEM = {"role": "system", "content": "You are a careful software engineer. Use the bash tool."}
USER = {"role": "user", "content": "The add function in calc.py is wrong. Fix it, then submit."}


def _call(command: str, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def _snapshot(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _adam_update_units(before, model, name: str):
    """Per-element first Adam step in units of lr, with the decoupled weight decay removed:
    p1 = p0 - lr*wd*p0 - lr*u, so u = -(p1 - p0 + lr*wd*p0) / lr, and |u| ~= 1 wherever the gradient is non-zero."""
    grpo = PAPER.grpo
    p0, p1 = before[name], dict(model.named_parameters())[name].detach()
    return -(p1 - p0 + grpo.learning_rate * grpo.weight_decay * p0) / grpo.learning_rate


def _assert_paper_optimizer(trainer) -> None:
    """Adam(beta1, beta2), lr and weight decay as in execcritic.config (norms and biases are not decayed)."""
    grpo, groups = PAPER.grpo, trainer.optimizer.param_groups
    assert {g["lr"] for g in groups} == {grpo.learning_rate}
    assert {tuple(g["betas"]) for g in groups} == {(grpo.adam_beta1, grpo.adam_beta2)}
    assert {g["weight_decay"] for g in groups} == {grpo.weight_decay, 0.0}


def _report(label: str, timer: StepTimer, extra: str = "") -> None:
    step = timer.steps[-1]
    print(f"\n[{label}] step {step['step_s']:.2f} s (optimizer.step {step['optimizer_step_s'] * 1000:.1f} ms), "
          f"peak RSS {peak_rss_mb():.0f} MB {extra}")


# --------------------------------------------------------------------------------------------------
# rollout planning (pure): TRL's observed prompt duplication and the documented no-duplication contract
# --------------------------------------------------------------------------------------------------

def test_plan_rollouts_handles_duplicated_and_unique_prompts():
    a, b = [{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]
    assert plan_rollouts([a, a, b, b], 2, expected=4) == [0, 1, 2, 3]          # TRL 1.16: already repeated
    assert plan_rollouts([a, b], 2, expected=4) == [0, 0, 1, 1]                # docstring contract: unique
    assert plan_rollouts([a, a, b, b], 2) == [0, 1, 2, 3]                      # eval, structure decides
    assert plan_rollouts([a, b], 2) == [0, 0, 1, 1]
    with pytest.raises(ValueError):
        plan_rollouts([a, b, a], 2, expected=4)


# --------------------------------------------------------------------------------------------------
# SFT
# --------------------------------------------------------------------------------------------------

@pytest.mark.train
def test_sft_step_on_tool_calling_chat(tiny_model, tmp_path):
    model, tok = tiny_model
    examples = [
        {"messages": [SYSTEM, USER,
                      {"role": "assistant", "content": "", "tool_calls": [_call("cat calc.py", "c1")]},
                      {"role": "tool", "tool_call_id": "c1", "content": "TOOL-OUTPUT def add(a, b): return a - b"},
                      {"role": "assistant", "content": "", "tool_calls": [_call(f"echo {SUBMIT_MARKER}", "c2")]}],
         "tools": [BASH_TOOL]},
        {"messages": [SYSTEM, USER,
                      {"role": "assistant", "content": "Looking.", "tool_calls": [_call("ls", "c1")]},
                      {"role": "tool", "tool_call_id": "c1", "content": "TOOL-OUTPUT calc.py README"}],
         "tools": [BASH_TOOL]},
    ]
    timer = StepTimer()
    trainer = make_sft_trainer(model, tok, examples, str(tmp_path / "sft"), callbacks=[timer], max_steps=1,
                               per_device_train_batch_size=2)
    # the loss mask TRL built: assistant tokens 1; system, user, tool output and role headers 0
    row = trainer.train_dataset[0]
    ids, mask = row["input_ids"], [label != -100 for label in row["labels"]]
    text_in = tok.decode([t for t, m in zip(ids, mask) if m])
    text_out = tok.decode([t for t, m in zip(ids, mask) if not m])
    assert "TOOL-OUTPUT" in text_out and "TOOL-OUTPUT" not in text_in
    assert "<function=bash>" in text_in and "cat calc.py" in text_in and SUBMIT_MARKER in text_in
    assert "<|im_start|>user" in text_out and "<|im_start|>assistant" in text_out
    assert "<|im_start|>" not in text_in

    before = _snapshot(model)
    result = trainer.train()
    assert math.isfinite(result.training_loss) and result.training_loss > 0
    _assert_paper_optimizer(trainer)
    units = _adam_update_units(before, model, "lm_head.weight").abs()
    assert float(units.median()) == pytest.approx(1.0, abs=0.1)   # a real gradient-driven Adam step of size lr
    _report("SFT", timer, f"loss {result.training_loss:.3f}")


# --------------------------------------------------------------------------------------------------
# GRPO with multi-turn agent-loop rollouts
# --------------------------------------------------------------------------------------------------

@pytest.mark.train
@pytest.mark.slow
def test_grpo_step_with_session_rollouts(tiny_model, tiny_repo, tmp_path):
    from execcritic.sandbox.local import LocalSandbox

    model, tok = tiny_model
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    rewards = iter([1.0, 0.2, None, "sandbox-fails"])   # what the (future) harness would say, in episode order
    planned: list = []

    def open_sandbox(row):
        planned.append(next(rewards))
        if planned[-1] == "sandbox-fails":   # a simulated operational failure: the episode cannot start
            raise SandboxError("simulated: the sandbox could not be created")
        return LocalSandbox(tiny_repo, isolated=True)

    def reward(outcome):
        assert outcome.trajectory.events[1]["kind"] == "action" and outcome.trajectory.events[1]["exit_code"] == 0
        return planned[-1]

    base = SessionEpisode(open_sandbox=open_sandbox, reward=reward, max_turns=3)

    def episode(policy, row):
        # turn 1 is constrained to a real bash call (a random model never writes one); later turns are free
        policy.logits_processor = ForcedTurns([tok.encode(bash_call_text(row["command"]), add_special_tokens=False)],
                                              stop)
        return base(policy, row)

    rows = [{"prompt": [SYSTEM, USER], "command": "grep -n return calc.py && echo TOOL-SAYS-$((40+2))"}]
    budget = len(tok.encode(bash_call_text(rows[0]["command"]), add_special_tokens=False)) + 8
    captured: dict = {}
    timer = StepTimer()
    trainer, runner = make_grpo_trainer(model, tok, rows, episode, str(tmp_path / "grpo"),
                                        sampling=SamplingConfig.rl_rollout(max_tokens=budget), callbacks=[timer],
                                        num_generations=4, per_device_train_batch_size=4, max_steps=1)
    score = trainer._generate_and_score_completions

    def observe(inputs):   # keep what TRL computed (advantages, masks) for the assertions; no behaviour change
        out = score(inputs)
        captured.update({k: v.detach().clone() for k, v in out.items() if hasattr(v, "detach")})
        return out

    trainer._generate_and_score_completions = observe
    before = _snapshot(model)
    trainer.train()

    # TRL handed rollout_func the one prompt already repeated num_generations times
    assert runner.calls[0]["prompts"] == 4 and runner.calls[0]["unique_prompts"] == 1
    assert runner.calls[0]["duplicated_by_trl"] is True

    # advantages: mean over the scorable rewards [1.0, 0.2] only, no std division; None/aborted -> exactly 0
    adv = captured["advantages"].tolist()
    assert adv == pytest.approx([0.4, -0.4, 0.0, 0.0], abs=1e-6)
    assert adv[2] == 0.0 and adv[3] == 0.0
    assert list(trainer._logs["advantages"]) == pytest.approx(adv, abs=1e-6)
    logged = list(trainer._logs["rewards"]["episode_reward"])
    assert logged[:2] == pytest.approx([1.0, 0.2]) and math.isnan(logged[2]) and math.isnan(logged[3])

    # TRL's loss mask is our env_mask: 1 on sampled tokens, 0 on tool output / Listing 3 / envelopes
    tool_mask, completion_mask, completion_ids = captured["tool_mask"], captured["completion_mask"], \
        captured["completion_ids"]
    for i in range(3):
        n = int(completion_mask[i].sum())
        ids, m = completion_ids[i, :n].tolist(), tool_mask[i, :n].tolist()
        env_text = tok.decode([t for t, k in zip(ids, m) if not k])
        model_text = tok.decode([t for t, k in zip(ids, m) if k])
        assert "TOOL-SAYS-42" in env_text and "<tool_response>" in env_text
        assert "Every response must contain at least one standard bash tool call" in env_text
        assert "TOOL-SAYS-42" not in model_text and "<function=bash>" in model_text
        assert sum(m) > 0 and sum(m) < n
    assert int(completion_mask[3].sum()) == 1 and int(tool_mask[3, 0]) == 0   # the aborted episode's placeholder

    # the optimizer step: gradient-driven, with the paper's optimizer settings
    _assert_paper_optimizer(trainer)
    assert trainer.args.epsilon == PAPER.grpo.clip_low and trainer.args.epsilon_high == PAPER.grpo.clip_high
    assert trainer.args.beta == PAPER.grpo.kl_coef and trainer.args.scale_rewards == "none"
    units = _adam_update_units(before, model, "lm_head.weight").abs()
    assert float(units.median()) == pytest.approx(1.0, abs=0.1)
    rollout_s = runner.calls[0]["seconds"]
    _report("GRPO", timer, f"(4 episodes of <=3 turns in bwrap: {rollout_s:.2f} s of the step)")
