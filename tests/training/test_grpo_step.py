"""Real GRPO steps of the tiny Qwen3.5-MoE through `grpo.make_trainer` (TRL 1.16, real Adam steps), with scripted
episode *outcomes* (`scripted_episode`: fixed rewards instead of an agent, named as such) so that what the step
must do is known exactly:

- a step whose group has reward variance trains: the kept group's advantages are not all zero (they are the
  runner's, reaching TRL's loss), the loss and gradient norm are non-zero, and the weights move beyond decay;
- a step whose groups were all dropped (the oversampling cap was reached without a kept group) changes no
  parameter at all - no weight decay and no MoE auxiliary loss (both moved the model before the fix);
- a GRPO step's metrics row aggregates every minibatch (optimizer step), its `reward_std` is the sample sd,
  it carries an approximate KL to the sampling policy with kl_coef 0 and the training throughput;
- every rollout is written to the per-rollout records (token ids, logprobs, loss mask, breakdown, advantage).
"""

from __future__ import annotations

import json
import statistics

import pytest

from execcritic.config import load_protocol
from execcritic.training.grpo import MetricsRecorder, batch_shape, make_trainer
from tests.training.test_grpo_groups import _rows, scripted_episode

pytestmark = pytest.mark.train


def _snapshot(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _train(model, tok, tmp_path, outcomes, rows, **values):
    proto = load_protocol(values={"grpo.rollouts_per_group": 2, "grpo.groups_per_step": 1,
                                  "repair_rl.global_batch_size": 2, "repair_rl.steps": 1,
                                  "repair_rl.lr_horizon_steps": 1, "grpo.learning_rate": 1e-3, **values})
    shape = batch_shape("repair", proto)
    recorder = MetricsRecorder(runner=None, steps_per_generation=shape["steps_per_generation"])
    trainer, runner = make_trainer("repair", model, tok, rows, scripted_episode(outcomes), str(tmp_path / "ckpt"),
                                   protocol=proto, callbacks=[recorder], records_path=str(tmp_path / "rollouts.jsonl"))
    recorder.runner = runner
    captured: dict = {}
    score = trainer._generate_and_score_completions

    def observe(inputs):   # keep the advantages TRL trains with; no behaviour change
        out = score(inputs)
        captured.setdefault("advantages", []).extend(out["advantages"].tolist())
        return out

    trainer._generate_and_score_completions = observe
    before = _snapshot(model)
    trainer.train()
    return trainer, runner, recorder, captured, before


def test_a_kept_group_trains_with_nonzero_advantages(tiny_model, tmp_path):
    model, tok = tiny_model
    trainer, runner, recorder, captured, before = _train(
        model, tok, tmp_path, {"a": [0.0, 1.5], "b": [0.0, 1.5]}, _rows("a", "b"),
        **{"grpo.groups_per_step": 2, "repair_rl.global_batch_size": 2})      # 4 rollouts: 2 minibatches
    assert [g.kept for g in runner.last_groups] == [True, True]
    adv = captured["advantages"]
    assert len(adv) == 4 and all(a != 0.0 for a in adv)          # a kept group's advantages are never all zero
    assert adv == pytest.approx([-0.75, 0.75, -0.75, 0.75])
    row = recorder.rows[0]
    assert row["minibatches"] == 2 and row["optimizer_steps_skipped"] == 0
    assert row["loss"] is not None and row["grad_norm"] > 0 and row["grad_norm_max"] >= row["grad_norm"]
    assert row["kl_sampling"] is not None and row["kl_sampling"] >= 0    # logged with kl_coef = 0
    assert row["tokens_per_s"] > 0 and row["trained_tokens_per_s"] > 0 and row["stop_reason"] == "full"
    assert row["reward_std"] == pytest.approx(statistics.stdev([0.0, 1.5, 0.0, 1.5]))   # sample sd, as TRL
    moved = [n for n, p in model.named_parameters() if not p.detach().equal(before[n])]
    assert "lm_head.weight" in moved
    records = [json.loads(x) for x in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 4 and {r["advantage"] for r in records} == {-0.75, 0.75}
    assert all(r["completion_ids"] and len(r["logprobs"]) == len(r["loss_mask"]) == len(r["completion_ids"])
               and r["breakdown"]["level"] == "usable_selected_fails" for r in records)


def test_a_step_without_a_kept_group_changes_no_parameter(tiny_model, tmp_path):
    model, tok = tiny_model
    trainer, runner, recorder, captured, before = _train(
        model, tok, tmp_path, {"flat": [0.1]}, _rows("flat"), **{"grpo.max_groups_offered": 2})
    assert runner.step_stats["kept_groups"] == 0 and runner.step_stats["offered_groups"] == 2
    assert runner.step_stats["stop_reason"] == "offer_cap"
    assert captured["advantages"] == [0.0, 0.0]
    changed = [n for n, p in model.named_parameters() if not p.detach().equal(before[n])]
    assert changed == []                      # no weight decay, no MoE aux loss, no Adam moment
    row = recorder.rows[0]
    assert row["optimizer_steps_skipped"] == 1 and row["kept_groups"] == 0 and row["reward_over"] == "offered"
    records = [json.loads(x) for x in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(sum(r["loss_mask"]) == 0 and r["advantage"] == 0.0 for r in records)
