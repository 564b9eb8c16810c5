"""Before/after probes of issue 21's trainer fixes: the same scenarios run against whatever `execcritic` is on the
path, so running it on the commit before the fixes and on this one gives the before/after numbers.

    PYTHONPATH=<checkout> .venv/bin/python experiments/training/fix_probes.py --out probes.json

Scenarios (scripted episode outcomes, named as such; the tiny Qwen3.5-MoE and real TRL optimizer steps):
- `aborted_group_advantages`: Repair group [0.1, aborted, 0] through the TRL group step;
- `masked_raw_reward`: Eq. 6 raw reward of a masked rollout (usable patch, terminal test without a verdict,
  official PASS, Round 0);
- `environment_error`: an episode whose task environment is missing;
- `no_kept_group_step`: parameter tensors a GRPO step moves when its only group is dropped (lr 1e-3, paper's
  weight decay);
- `oversampling`: groups one step offers on a policy without reward variance under the default cap (stopped by
  the probe at 200 groups when nothing else stops it);
- `repair_lr_at_checkpoint`: Table 8b's schedule at the reported checkpoint (step 100), paper config;
- `reward_std`: the logged sd of the rewards [0, 1.5, 0, 1.5].
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from types import SimpleNamespace


def probes() -> dict:
    import torch
    from transformers import get_scheduler

    import execcritic
    from execcritic.config import PAPER, load_protocol
    from execcritic.errors import EnvironmentMissing
    from execcritic.rewards import RepairRollout, repair_reward
    from execcritic.training.episodes import EpisodeResult, aborted_result, run_episode, score_group
    from execcritic.training.grpo import GroupRolloutRunner, make_trainer
    from execcritic.training.policy import HFPolicy, TrajectorySample
    from execcritic.training.tiny_model import ensure_tiny_model, load_tiny_model
    from execcritic.training.trl_adapter import grpo_args

    out: dict = {"execcritic": execcritic.__file__}

    def result(**kw):
        r = RepairRollout(**kw)
        b = repair_reward(r)
        return EpisodeResult(None, b.reward, b.masked, b, {}, "repair", r)

    group = [result(patch_usable=True, selected_test="FAIL"), aborted_result("repair", None, "x"),
             result(patch_usable=False)]
    out["aborted_group_advantages"] = [round(a, 4) for a in score_group("repair", group, PAPER).advantages.advantages]
    out["masked_raw_reward"] = repair_reward(RepairRollout(patch_usable=True, selected_test="INVALID",
                                                           official_resolved=True, at_round0=True)).reward
    work = tempfile.mkdtemp()
    model_dir = ensure_tiny_model(work)
    model, tok = load_tiny_model(model_dir)

    def missing(policy, row):
        raise EnvironmentMissing("the task checkout is not built")

    try:
        res = run_episode("repair", missing, HFPolicy(model, tok), {"instance_id": "i"}, 0)
        out["environment_error"] = f"masked={res.masked}, aborted={res.aborted}; the run goes on"
    except EnvironmentMissing as exc:
        out["environment_error"] = f"propagated ({type(exc).__name__}): the run dies"

    calls = {"n": 0}

    def scripted(reward, limit=None):
        def run(policy, row):
            calls["n"] += 1
            if limit and calls["n"] > limit:
                raise RuntimeError("probe limit")
            r = RepairRollout(patch_usable=True, selected_test="FAIL", official_resolved=False)
            b = repair_reward(r)
            sample = TrajectorySample([1, 2], [3, 4, 5], [-1.0] * 3, [1, 0, 1], 1)
            return EpisodeResult(sample, reward, False, type(b)(**{**b.__dict__, "reward": reward}),
                                 {"instance_id": row["instance_id"]}, "repair", r)
        return run

    rows = [{"prompt": [{"role": "user", "content": "flat"}], "instance_id": "flat"}]
    proto = load_protocol(values={"grpo.rollouts_per_group": 2, "grpo.groups_per_step": 1,
                                  "repair_rl.global_batch_size": 2, "repair_rl.steps": 1,
                                  "grpo.learning_rate": 1e-3, "grpo.max_groups_offered": 2})
    trainer, _ = make_trainer("repair", model, tok, rows, scripted(0.1), work + "/ck", protocol=proto)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    moved = [n for n, p in model.named_parameters() if not p.detach().equal(before[n])]
    out["no_kept_group_step"] = {"moved_tensors": len(moved), "tensors": len(before),
                                 "max_abs_change": max(float((p.detach() - before[n]).abs().max())
                                                       for n, p in model.named_parameters())}

    model.train()
    flat = load_protocol(values={"grpo.rollouts_per_group": 2, "grpo.groups_per_step": 1})
    calls["n"] = 0
    runner = GroupRolloutRunner("repair", scripted(0.1, limit=400), rows, protocol=flat)
    fake = SimpleNamespace(accelerator=SimpleNamespace(unwrap_model=lambda m: m, num_processes=1), model=model,
                           processing_class=tok, num_generations=2, num_generations_eval=2,
                           args=SimpleNamespace(generation_batch_size=2), state=SimpleNamespace(global_step=0))
    try:
        runner([rows[0]["prompt"]] * 2, fake)
        out["oversampling"] = {"default_cap": flat.grpo.max_groups_offered, "offered": runner.step_stats["offered_groups"],
                               "stop_reason": runner.step_stats.get("stop_reason")}
    except RuntimeError:
        out["oversampling"] = {"default_cap": flat.grpo.max_groups_offered, "offered": ">= 200",
                               "stop_reason": "none: still sampling when the probe stopped it"}

    args = grpo_args(work + "/lr", role=PAPER.repair_rl, grpo=PAPER.grpo)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
    sched = get_scheduler(args.lr_scheduler_type, opt, num_warmup_steps=0, num_training_steps=args.max_steps,
                          scheduler_specific_kwargs=args.lr_scheduler_kwargs or {})
    for _ in range(100):
        opt.step()
        sched.step()
    out["repair_lr_at_checkpoint"] = {"lr": opt.param_groups[0]["lr"], "peak": PAPER.grpo.learning_rate}
    from execcritic.training import grpo

    out["reward_std"] = grpo._std([0.0, 1.5, 0.0, 1.5])
    out["reward_std_note"] = f"population sd {statistics.pstdev([0, 1.5, 0, 1.5]):.4f}, sample sd " \
                             f"{statistics.stdev([0, 1.5, 0, 1.5]):.4f}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    result = probes()
    with open(a.out, "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
