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


@pytest.fixture
def paper_weights(monkeypatch, tmp_path):
    """The paper preset's base model variable set (a directory with a config.json; nothing loads it here)."""
    weights = tmp_path / "qwen"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    monkeypatch.setenv("EXECCRITIC_QWEN_WEIGHTS", str(weights))
    monkeypatch.delenv("EXECCRITIC_RAY_ADDRESS", raising=False)
    return weights


def test_paper_training_prints_its_cost_and_refuses_past_the_allowance(no_training, paper_weights, monkeypatch,
                                                                        capsys):
    """Before a verl launch: the roles, steps, GPUs and estimated GPU-hours are printed, and without
    allow_gpu_hours covering the estimate nothing starts (checked with 8 GPUs present: nothing is launched); past
    it, training starts (the `no_training` fixture stops it there)."""
    monkeypatch.setattr(training, "cluster_gpus", lambda address: 8)
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
    with pytest.raises(AssertionError, match="training of repair_standard was started"):
        _plans(parameters("table3", preset="paper", allow_gpu_hours=total + 1))


def test_paper_training_says_what_it_lacks(no_training, paper_weights, monkeypatch, capsys):
    """Past the gate, a role is not launched on fewer GPUs than its layout (this machine, or the named Ray
    cluster), without the base model's directory, or (SFT) without its teacher; each says so."""
    monkeypatch.setattr(training, "cluster_gpus", lambda address: 0)
    plans = _plans(parameters("table3", preset="paper", allow_gpu_hours=1e9))
    assert all("trains with verl on 8 GPUs; this machine has no GPU" in x.reason for x in plans.values())
    assert "Training this run needs (verl" in capsys.readouterr().out
    monkeypatch.setenv("EXECCRITIC_RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setattr(training, "cluster_gpus", lambda address: 4 if address == "10.0.0.1:6379" else 0)
    plans = _plans(parameters("table3", preset="paper", allow_gpu_hours=1e9))
    assert all("the Ray cluster at 10.0.0.1:6379 has 4 GPUs" in x.reason for x in plans.values())
    monkeypatch.delenv("EXECCRITIC_QWEN_WEIGHTS")
    plans = _plans(parameters("table3", preset="paper", allow_gpu_hours=1e9))
    assert all("needs $EXECCRITIC_QWEN_WEIGHTS" in x.reason for x in plans.values())
    monkeypatch.setenv("EXECCRITIC_QWEN_WEIGHTS", str(paper_weights))
    monkeypatch.setattr(training, "cluster_gpus", lambda address: 8)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    row = _plans(parameters("table1", preset="paper", allow_gpu_hours=1e9, test_sources=["Qwen3.5-35B-A3B + SFT"]))
    assert "the SFT teacher role test_deepseek is not bound" in row["Qwen3.5-35B-A3B + SFT"].reason


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
