"""The notebooks' training adapter without training anything: which engine decides what, the opt-in on CPU, the
cost gate before a verl launch (it refuses before anything starts), the `models` override, and the checkpoint
registry's fingerprints. The real training through this path is tests/training/test_notebook_training.py."""

from __future__ import annotations

import json

import pytest

from execcritic.errors import InputError
from execcritic.experiments import core, training
from execcritic.experiments.artifacts import SPECS
from execcritic.experiments.params import parameters
from execcritic.training import registry


@pytest.fixture
def no_training(monkeypatch):
    """Any call into CPU training fails the test (these tests check decisions taken before training)."""
    def refuse(self, role):
        raise AssertionError(f"training of {role} was started")
    monkeypatch.setattr(training.Trainer, "train", refuse)


def _plans(params):
    return {x.paper_label: x for x in core.plan_artifact(SPECS[params.artifact], params)}


def test_cpu_training_is_opt_in(no_training):
    p = parameters("table3", preset="smoke")
    assert p.train is False                                          # make run (reproduce) does not train
    for x in _plans(p).values():
        assert not x.runnable and "CPU training is opt-in (preset smoke): pass train=True" in x.reason
        assert "`execcritic train repair-rl" in x.reason
    with pytest.raises(InputError, match="train=True trains on CPU") as exc:
        parameters("table3", preset="paper", train=True)
    assert exc.value.field == "train"


def test_a_bound_role_is_never_trained(no_training, tmp_path):
    ckpt = tmp_path / "final"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    p = parameters("table1", preset="smoke", train=True, test_sources=["Qwen3.5-35B-A3B + SFT"],
                   models={"test_sft": f"hf:{ckpt}"})
    row = _plans(p)["Qwen3.5-35B-A3B + SFT"]
    assert row.runnable and row.test_spec == f"hf:{ckpt}"
    assert core.trained_roles(SPECS["table1"], p) == []              # nothing asked of the trainer


def test_paper_training_prints_its_cost_and_refuses_past_the_allowance(no_training, monkeypatch, capsys):
    """Before a verl launch: the roles, steps, GPUs and estimated GPU-hours are printed, and without
    allow_gpu_hours covering the estimate nothing starts (checked with GPUs present: nothing is launched)."""
    monkeypatch.setattr(training, "gpus_available", lambda: True)
    p = parameters("table3", preset="paper")
    plans = _plans(p)
    out = capsys.readouterr().out
    assert "Training this run needs (verl" in out and "allow_gpu_hours=0" in out
    for role in ("test_sft", "test_rl", "repair_standard", "repair_t2i_no_bonus", "repair_trained"):
        assert f"  {role}: execcritic train" in out                  # the SFT that test_rl starts from too
    assert "200 steps on 8 GPUs" in out and "100 steps on 8 GPUs" in out and "GPU-hours" in out
    total = sum(x["gpu_hours"] for x in training.launch_plan(["test_rl", "repair_standard", "repair_t2i_no_bonus",
                                                              "repair_trained"]))
    assert total > 1000                                             # GPU-days: the gate is what stops it
    for x in plans.values():
        assert not x.runnable and "launch refused before it started" in x.reason
        assert f"pass allow_gpu_hours={int(-(-total // 1))}" in x.reason
    allowed = _plans(parameters("table3", preset="paper", allow_gpu_hours=total + 1))
    for x in allowed.values():                                      # past the gate: the launch is not wired yet
        assert "launch refused" not in x.reason and "not wired yet" in x.reason


def test_paper_training_on_a_machine_without_gpus_says_so(no_training, monkeypatch, capsys):
    monkeypatch.setattr(training, "gpus_available", lambda: False)
    plans = _plans(parameters("table3", preset="paper", allow_gpu_hours=1e9))
    assert all("this machine has no GPU" in x.reason for x in plans.values())
    assert "Training this run needs (verl" in capsys.readouterr().out


def test_the_estimate_is_documented_arithmetic():
    e = training.estimate("test_rl", training.RECIPES["test_rl"])
    assert e["steps"] == 200 and e["gpus"] == 8
    assert e["gpu_hours"] == pytest.approx(200 * training.ASSUMED["test-rl"]["step_hours"] * 8)
    assert [x["role"] for x in training.launch_plan(["test_rl_gpt56"])] == ["test_sft_gpt56", "test_rl_gpt56"]


def test_fingerprints_name_the_recipe(tmp_path):
    a = {"kind": "sft", "data": "d1", "init": {"model": "tiny"}, "protocol": {"sft": {"epochs": 1.0}}}
    assert registry.fingerprint(a) == registry.fingerprint(json.loads(json.dumps(a)))        # key order free
    for change in ({"data": "d2"}, {"init": {"model": "smollm2"}}, {"protocol": {"sft": {"epochs": 2.0}}}):
        assert registry.fingerprint({**a, **change}) != registry.fingerprint(a)
    assert len(registry.code_digest()) == 64


def test_a_reused_entry_needs_its_checkpoint_on_disk(tmp_path):
    reg = registry.Registry(tmp_path)
    recipe = {"kind": "sft", "data": "x"}
    fp = registry.fingerprint(recipe)
    final = tmp_path / "train" / registry.Registry.run_id(fp) / "final"
    (reg.dir(fp)).mkdir(parents=True)
    (reg.dir(fp) / "manifest.json").write_text(json.dumps({"status": "complete", "final_checkpoint": str(final)}))
    assert reg.lookup(fp) is None                                  # the registry says done, the weights are gone
    final.mkdir(parents=True)
    (final / "config.json").write_text("{}")
    assert reg.lookup(fp)["final_checkpoint"] == str(final)
