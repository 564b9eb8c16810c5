"""Group plumbing of GRPO on episodes, without sandboxes: each agent's rule in `score_group`, the batch shape
from the config, and the rollout runner's DAPO dynamic sampling (oversampling until `groups_per_step` groups
with non-zero reward variance are kept, the cap and its fillers, zeroed loss masks for masked rollouts).

The episodes here are *scripted outcomes* (`scripted_episode`, named as such: they return fixed reward inputs
instead of running an agent) so that the sampler's decisions can be checked exactly; the real episodes are
exercised in test_rl_real_episodes.py."""

from __future__ import annotations

import dataclasses
import itertools
import math
from types import SimpleNamespace

import pytest

from execcritic.config import load_protocol, manifest_deviations
from execcritic.errors import InputError
from execcritic.rewards import RepairRollout, TestRollout, repair_reward
from execcritic.training.episodes import EpisodeResult, aborted_result, score_group
from execcritic.training.grpo import GroupRolloutRunner, batch_shape
from execcritic.training.policy import TrajectorySample

PAPER = load_protocol()


def make_test_result(valid=True, B=1, G=1, tp=0, fn=0, tn=0, fp=0, errors=0, turns=3) -> EpisodeResult:
    r = TestRollout(valid_submission=valid, base_clean_fail=bool(B) and valid, gold_pass=bool(G) and valid, tp=tp,
                    fn=fn, tn=tn, fp=fp, operational_errors=errors, turns=turns)
    return EpisodeResult(None, 0.0, errors > 0, None, {}, "test", r)


def repair_result(**kw) -> EpisodeResult:
    r = RepairRollout(**kw)
    b = repair_reward(r)
    return EpisodeResult(None, b.reward, b.masked, b, {}, "repair", r)


def test_test_rule_turn_slack_and_masking():
    group = [make_test_result(tp=1, tn=1, turns=2), make_test_result(tp=1, tn=1, turns=20), make_test_result(valid=False),
             make_test_result(tp=1, tn=1, errors=1, turns=2)]
    s = score_group("test", group, PAPER)
    assert s.rewards == [1.0, 0.5, -0.2, 1.0]                  # the 20-turn rollout is halved (> 8 longer)
    assert s.masked == [False, False, False, True]
    mean = (1.0 + 0.5 - 0.2) / 3                                # the masked rollout is out of the mean
    assert s.advantages.advantages == pytest.approx((1.0 - mean, 0.5 - mean, -0.2 - mean, 0.0))
    assert s.advantages.advantages[3] == 0.0


def test_repair_rule_masked_in_the_mean_then_zeroed():
    group = [repair_result(patch_usable=True, selected_test="PASS", official_resolved=True, at_round0=True),
             repair_result(patch_usable=True, selected_test="FAIL"),
             repair_result(patch_usable=True, selected_test="INVALID", official_resolved=False)]
    s = score_group("repair", group, PAPER)
    assert s.rewards == [1.5, 0.1, 0.1] and s.masked == [False, False, True]
    mean = (1.5 + 0.1 + 0.1) / 3
    assert s.advantages.advantages == pytest.approx((1.5 - mean, 0.1 - mean, 0.0))


def test_an_aborted_repair_rollout_enters_the_mean_with_the_floor_as_in_verl():
    """[0.1, aborted, 0]: before, TRL left the aborted rollout out of the mean (0.05, 0, -0.05) while verl put it
    in with 0 (0.067, 0, -0.033); both now bring `aborted_raw_reward` (0) into the mean (App. A.2)."""
    va = pytest.importorskip("execcritic.training.verl_adapter")
    group = [repair_result(patch_usable=True, selected_test="FAIL"), aborted_result("repair", None, "SandboxError: x"),
             repair_result(patch_usable=False)]
    s = score_group("repair", group, PAPER)
    assert s.advantages.advantages == pytest.approx((0.1 - 0.1 / 3, 0.0, -0.1 / 3)) and s.masked[1]
    sample = TrajectorySample([1, 2], [3, 4, 5], [-1.0] * 3, [1, 0, 1], 2)
    outs = [va.loop_output(dataclasses.replace(r, sample=None if r.aborted else sample), sample, seconds=0.0)
            .extra_fields["reward_extra_info"] for r in group]
    _, verl = va.score_verl_group("repair", [o[va.REWARD_KEY] for o in outs], [bool(o[va.MASKED_KEY]) for o in outs],
                                  [int(o[va.TURNS_KEY]) for o in outs], PAPER)
    assert verl.advantages == pytest.approx(s.advantages.advantages)


@pytest.mark.parametrize("choice", ["invalid_level", "exclude"])
def test_the_baseline_of_aborted_repair_rollouts_is_one_named_choice(choice):
    """Two aborted rollouts in a group of six (1.5, 0.1, 0.2 unmasked; a masked one at its 0.1 lower bound):
    'invalid_level' (default, the paper is silent) puts them in the mean at 0, 'exclude' leaves them out, so the
    unmasked advantages differ by a hand-computed shift. Masked and aborted rollouts get 0 either way."""
    proto = load_protocol(values={"grpo.aborted_baseline": choice})
    group = [repair_result(patch_usable=True, selected_test="PASS", official_resolved=True, at_round0=True),
             repair_result(patch_usable=True, selected_test="FAIL"),
             repair_result(patch_usable=True, selected_test="PASS", official_resolved=False),
             repair_result(patch_usable=True, selected_test="INVALID", official_resolved=False),
             aborted_result("repair", None, "SandboxError: x"), aborted_result("repair", None, "ModelError: y")]
    s = score_group("repair", group, proto)
    assert s.masked == [False, False, False, True, True, True]
    mean = {"invalid_level": (1.5 + 0.1 + 0.2 + 0.1 + 0.0 + 0.0) / 6, "exclude": (1.5 + 0.1 + 0.2 + 0.1) / 4}[choice]
    assert s.advantages.advantages == pytest.approx((1.5 - mean, 0.1 - mean, 0.2 - mean, 0.0, 0.0, 0.0))
    assert s.advantages.n_statistics == {"invalid_level": 6, "exclude": 4}[choice]
    # every manifest records it (the config, and as a choice the paper leaves open)
    assert manifest_deviations(proto)["grpo.aborted_baseline"]["used"] == choice


def test_the_masked_repair_raw_reward_is_one_named_choice():
    """A usable patch whose terminal test gave no verdict, official PASS: 'lower_bound' (default) brings 0.1 into
    the mean; 'official_stand_in' (the earlier behaviour) 1.5. Either way its own advantage is 0."""
    r = RepairRollout(patch_usable=True, selected_test="INVALID", official_resolved=True, at_round0=True)
    low = repair_reward(r)
    assert low.masked and low.reward == 0.1 and PAPER.repair_reward.masked_raw_reward == "lower_bound"
    stand_in = load_protocol(values={"repair_reward.masked_raw_reward": "official_stand_in"}).repair_reward
    assert repair_reward(r, stand_in).reward == 1.5
    assert PAPER.unstated() == {"repair_reward.masked_raw_reward": "lower_bound", "sft.learning_rate": 1e-6,
                                "grpo.aborted_baseline": "invalid_level"}
    with pytest.raises(ValueError, match="masked_raw_reward"):
        repair_reward(r, load_protocol(values={"repair_reward.masked_raw_reward": "zero"}).repair_reward)


def test_an_environment_error_inside_an_episode_masks_the_rollout(tiny_model):
    """A task environment missing (or rebuilt under the run) is operational: the rollout is aborted and masked,
    and the run goes on (before, `EnvironmentMissing` propagated and killed the run)."""
    from execcritic.errors import EnvironmentMissing
    from execcritic.training.episodes import run_episode
    from execcritic.training.policy import HFPolicy

    def episode(policy, row):
        raise EnvironmentMissing("the task checkout /x is not built")

    model, tok = tiny_model
    res = run_episode("repair", episode, HFPolicy(model, tok), {"instance_id": "i"}, 0)
    assert res.aborted and res.masked and "EnvironmentMissing" in res.info["aborted"]


def test_batch_shape_follows_the_config():
    assert batch_shape("test", PAPER) == {"num_generations": 8, "per_device_train_batch_size": 32,
                                          "steps_per_generation": 4}            # 128 rollouts, global batch 32
    assert batch_shape("repair", PAPER)["steps_per_generation"] == 2             # global batch 64
    cpu = load_protocol("cpu-train")
    assert batch_shape("repair", cpu) == {"num_generations": 4, "per_device_train_batch_size": 4,
                                          "steps_per_generation": 1}


# --------------------------------------------------------------------------------------------------
# dynamic sampling in the rollout runner
# --------------------------------------------------------------------------------------------------

def _trainer(model, tok, g, groups, step=0):
    model.train()   # as inside Trainer.train(): the runner samples dynamically only in training mode
    return SimpleNamespace(accelerator=SimpleNamespace(unwrap_model=lambda m: m, num_processes=1),
                           model=model, processing_class=tok, num_generations=g, num_generations_eval=g,
                           args=SimpleNamespace(generation_batch_size=g * groups), state=SimpleNamespace(global_step=step))


def scripted_episode(outcomes):
    """A scripted episode *outcome* table (a stand-in, named as such): per instance, a cycle of rewards;
    `None` = masked. It returns a tiny sample so the runner's output can be checked."""
    cycles = {k: itertools.cycle(v) for k, v in outcomes.items()}

    def run(policy, row):
        reward = next(cycles[row["instance_id"]])
        masked = reward is None
        r = RepairRollout(patch_usable=True, selected_test="INVALID" if masked else "FAIL", official_resolved=False)
        b = repair_reward(r)
        b = type(b)(**{**b.__dict__, "reward": b.reward if masked else reward})
        sample = TrajectorySample(prompt_ids=[1, 2], completion_ids=[3, 4, 5], logprobs=[-1.0] * 3, env_mask=[1, 0, 1],
                                  turns=1)
        return EpisodeResult(sample, b.reward, masked, b, {"instance_id": row["instance_id"]}, "repair", r)
    return run


def _rows(*ids):
    return [{"prompt": [{"role": "user", "content": i}], "instance_id": i} for i in ids]


@pytest.mark.train
def test_dynamic_sampling_replaces_zero_variance_groups(tiny_model):
    model, tok = tiny_model
    proto = load_protocol(values={"grpo.groups_per_step": 1, "grpo.rollouts_per_group": 2})
    rows = _rows("flat", "varied")
    runner = GroupRolloutRunner("repair", scripted_episode({"flat": [0.1], "varied": [0.0, 0.2]}), rows,
                                protocol=proto)
    out = runner([rows[0]["prompt"]] * 2, _trainer(model, tok, 2, 1))
    # the requested group ("flat") had zero variance: replaced by draws until a varied group was kept
    assert [g.row["instance_id"] for g in runner.last_groups] == ["varied"]
    assert runner.step_stats["kept_groups"] == 1 and runner.step_stats["dropped_groups"] >= 1
    assert runner.step_stats["dropped_reasons"]["all_equal_rewards"] >= 1
    assert runner.last_advantages == pytest.approx([-0.1, 0.1]) and out["env_mask"] == [[1, 0, 1], [1, 0, 1]]


@pytest.mark.train
def test_dynamic_sampling_cap_fills_with_untrained_groups(tiny_model):
    model, tok = tiny_model
    proto = load_protocol(values={"grpo.groups_per_step": 2, "grpo.rollouts_per_group": 2,
                                  "grpo.max_groups_offered": 3})
    rows = _rows("flat", "masked", "varied")
    episode = scripted_episode({"flat": [0.1], "masked": [None, 0.1], "varied": [0.0, 0.2]})
    runner = GroupRolloutRunner("repair", episode, rows, protocol=proto)
    prompts = [rows[0]["prompt"]] * 2 + [rows[1]["prompt"]] * 2
    out = runner(prompts, _trainer(model, tok, 2, 2))
    stats = runner.step_stats
    assert stats["offered_groups"] == 3 and stats["kept_groups"] + stats["filler_groups"] == 2
    assert stats["stop_reason"] == "offer_cap"
    fillers = [g for g in runner.last_groups if g.filler]
    assert fillers and all(not g.kept for g in fillers)
    n = len(runner.last_groups[0].results)
    for k, g in enumerate(runner.last_groups):
        for j, (m, adv) in enumerate(zip(g.score.masked, runner.last_advantages[k * n:(k + 1) * n])):
            mask = out["env_mask"][k * n + j]
            if g.filler or m:
                assert adv == 0.0 and not any(mask)     # fillers and masked rollouts train nothing
            else:
                assert any(mask)


@pytest.mark.train
def test_the_default_cap_ends_a_step_on_a_policy_without_variance(tiny_model):
    """The paper states no cap; with the old default (0 = none) this step never returned. The default now stops
    after `max_groups_offered` groups with the reason recorded; a cap below groups_per_step is refused."""
    model, tok = tiny_model
    proto = load_protocol(values={"grpo.groups_per_step": 1, "grpo.rollouts_per_group": 2})
    rows = _rows("flat")
    runner = GroupRolloutRunner("repair", scripted_episode({"flat": [0.1]}), rows, protocol=proto)
    runner([rows[0]["prompt"]] * 2, _trainer(model, tok, 2, 1))
    assert runner.step_stats["offered_groups"] == PAPER.grpo.max_groups_offered == 64
    assert runner.step_stats["stop_reason"] == "offer_cap" and runner.step_stats["kept_groups"] == 0
    st = runner.step_stats                                  # the curve's point: every offered rollout with a reward
    assert st["reward_n_offered"] == round(st["episodes"] * (1 - st["masked_share"]))
    with pytest.raises(InputError, match="max_groups_offered"):
        GroupRolloutRunner("repair", scripted_episode({}), rows,
                           protocol=load_protocol(values={"grpo.max_groups_offered": 0}))


def test_episode_result_unpacks_into_the_rollout_runner_contract():
    """`trl_adapter.RolloutRunner` unpacks `(sample, reward_or_None, info)`; a masked rollout's reward is None."""
    masked = repair_result(patch_usable=True, selected_test="INVALID", official_resolved=True)
    sample, reward, info = masked
    assert sample is None and reward is None and info["masked"] is True
    kept = repair_result(patch_usable=True, selected_test="FAIL")
    assert list(kept)[1] == pytest.approx(0.1)


def test_repair_lr_schedule_spans_the_launcher_horizon(tmp_path):
    """Table 8b: horizon 300, reported checkpoint 100. Before, the cosine reached 0 at step 100 (the run's end);
    now the learning rate at the checkpoint is 0.75 of the peak (a third of the way down the cosine)."""
    import torch
    from transformers import get_scheduler

    from execcritic.training.trl_adapter import grpo_args

    def lr_at(protocol, step):
        args = grpo_args(str(tmp_path), role=protocol.repair_rl, grpo=protocol.grpo)
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
        sched = get_scheduler(args.lr_scheduler_type, opt, num_warmup_steps=0, num_training_steps=args.max_steps,
                              scheduler_specific_kwargs=args.lr_scheduler_kwargs)
        for _ in range(step):
            opt.step()
            sched.step()
        return opt.param_groups[0]["lr"]

    assert lr_at(PAPER, 100) == pytest.approx(0.75e-6)
    assert lr_at(PAPER, 50) == pytest.approx(0.5e-6 * (1 + math.cos(math.pi / 6)))
    at_end = load_protocol(values={"repair_rl.lr_horizon_steps": 100})       # the old behaviour, as a setting
    assert lr_at(at_end, 100) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(InputError, match="lr_horizon_steps"):
        grpo_args(str(tmp_path), role=load_protocol(values={"repair_rl.lr_horizon_steps": 50}).repair_rl)
