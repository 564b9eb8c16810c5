"""The notebooks' training path for real (issue 24): the `ci` preset with train=True trains the tiny random
Qwen3.5-MoE through `execcritic.experiments.training` (the same Trainer the smoke preset uses with SmolLM2), the
checkpoint registry reuses a checkpoint whose recipe fingerprint it knows and trains a changed recipe anew, a
training killed part-way resumes from its last checkpoint, and a notebook run under papermill trains, serves and
evaluates a checkpoint and writes its row, labeled a stand-in trained on CPU.

Real parts: the demo tasks (real projects, a re-introduced bug), the generation stage with the scripted stand-in
teacher (named as such), TRL's SFT and GRPO trainers, checkpoints, `transformers serve`, the harness, the results
store. The random tiny model writes garbage, which is all a control-flow test needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from execcritic.experiments import training
from execcritic.experiments.params import parameters
from execcritic.training.registry import Registry
from tests.paths import REPO
from tests.training_fixtures import kill_when

pytestmark = [pytest.mark.train, pytest.mark.slow]

TOOLZ = "toolz__demo-1"


@pytest.fixture
def ci_train(demo_toolz, tmp_path, monkeypatch):
    """The demo task as the ci preset's dataset; the checkpoint registry and results in tmp_path."""
    ds = tmp_path / "demo.jsonl"
    ds.write_text(json.dumps(demo_toolz.task_row("demo-1")) + "\n")
    env = {"EXECCRITIC_CI_DATASET": str(ds), training.RUNS_ENV: str(tmp_path / "runs"), "HF_HUB_OFFLINE": "1",
           "TRL_EXPERIMENTAL_SILENCE": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return tmp_path, ds, {**os.environ, **env, "PYTHONPATH": str(REPO)}


def _params(tmp_path: Path, artifact: str = "table1", preset: str = "ci", **kw):
    return parameters(artifact, preset=preset, train=True, instances=[TOOLZ], output_dir=str(tmp_path / "results"),
                      **kw)


def _tensor(path: Path, name: str):
    from safetensors.torch import load_file

    return load_file(str(next(Path(path).glob("*.safetensors"))))[name]


def test_ci_trains_the_tiny_model_and_reuses_the_checkpoint_by_fingerprint(ci_train):
    from execcritic.training.run import model_dir

    tmp_path, _, _ = ci_train
    t = training.prepare(_params(tmp_path), ["test_sft"], log=print)
    b, why = t.checkpoint("test_sft")
    assert b is not None, why
    assert b.stand_in and b.name.endswith(", trained on CPU") and "SFT on 1 scripted-teacher trajectory" in b.name
    final = Path(b.spec[3:])
    assert (final / "config.json").is_file()
    name = "lm_head.weight"
    assert not _tensor(final, name).equal(_tensor(model_dir("tiny"), name))        # a real optimizer step
    entry = t.done["test_sft"]
    assert not entry["reused"] and entry["status"] == "complete"
    sft = json.loads((Path(entry["results"]) / "manifest.json").read_text())
    assert sft["status"] == "complete" and sft["teacher"].startswith("scripted:") and sft["admitted"] == 1
    stamp = (final / "config.json").stat().st_mtime_ns

    # a rerun, and another role whose recipe comes out the same here (1K trajectories -> 1 on one instance)
    again = training.prepare(_params(tmp_path, "figure6"), ["test_sft", "test_sft_1k"], log=print)
    for role in ("test_sft", "test_sft_1k"):
        b2, why = again.checkpoint(role)
        assert b2 is not None and b2.spec == b.spec, why
        assert again.done[role]["reused"] and again.done[role]["fingerprint"] == entry["fingerprint"]
    assert (final / "config.json").stat().st_mtime_ns == stamp                    # not trained again

    # a changed recipe (the teacher's reasoning hidden: Table 4's GPT-5.6 row) trains anew
    b3, why = again.checkpoint("test_sft_gpt56")
    assert b3 is not None and b3.spec != b.spec and "(no reasoning)" in b3.name, why
    assert not again.done["test_sft_gpt56"]["reused"]
    m = again.manifest()
    assert set(m["checkpoints"]) == {"test_sft", "test_sft_1k", "test_sft_gpt56"} and m["engine"] == "cpu"


def _preset(path: Path, dataset: str, knobs: dict, instances: list[str] | None = None) -> Path:
    """A CPU preset (file stem = name) training the tiny model with the cpu-train profile plus `knobs`."""
    import yaml

    body = {"name": path.stem, "title": f"training test {path.stem}", "banner": "a training test", "protocol": "smoke",
            "dataset": dataset, "build_envs": False, "runs": 1, "workers": 2, "training": "cpu",
            "train_recipe": {"model": "tiny", "name": "tiny random Qwen3.5-MoE", "profile": "cpu-train", "set": knobs}}
    if instances:
        body["instances"] = instances
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


# 4 steps, a checkpoint after each: the kill lands after checkpoint-1 with steps still to run (with 2 steps, a fast
# machine finished the second within kill_when's grace second and the run was complete when killed)
RESUME_KNOBS = {"repair.round0_turns": 1, "repair.turns_per_round": 1, "grpo.rollouts_per_group": 2,
                "grpo.max_groups_offered": 1, "repair_rl.steps": 4, "repair_rl.save_interval": 1,
                "repair_rl.global_batch_size": 2, "repair_rl.max_response_tokens": 8}

TRAIN_ONE = """
import sys
from execcritic.experiments import training
from execcritic.experiments.params import parameters
p = parameters("table3", preset=sys.argv[1], train=True, instances=[sys.argv[2]], output_dir=sys.argv[3])
b, why = training.prepare(p, ["repair_trained"]).checkpoint("repair_trained")
print("BINDING", b.spec if b else why, flush=True)
"""


def test_a_killed_training_resumes_from_its_last_checkpoint(ci_train):
    """A notebook process training Repair RL (4 GRPO steps) is SIGKILLed after its first checkpoint; the next run
    of the same recipe finds the registry entry `training`, resumes the same TrainRun from its last checkpoint and
    ends with every step recorded once."""
    tmp_path, ds, env = ci_train
    preset = _preset(tmp_path / "ci-resume.yaml", str(ds), RESUME_KNOBS)
    results = tmp_path / "results"
    argv = [sys.executable, "-c", TRAIN_ONE, str(preset), TOOLZ, str(results)]
    runs = tmp_path / "runs"
    kill_when(argv, lambda: bool(list(runs.glob("train/ckpt-*/checkpoints/checkpoint-1/trainer_state.json"))),
              cwd=REPO, env=env, log=tmp_path / "first.log")
    [entry_dir] = list((runs / "checkpoints").iterdir())
    killed = json.loads((entry_dir / "manifest.json").read_text())
    assert killed["status"] == "training" and killed["role"] == "repair_trained"
    last = max(int(p.parent.name.split("-")[1])
               for p in runs.glob("train/ckpt-*/checkpoints/checkpoint-*/trainer_state.json"))

    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0 and "BINDING hf:" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    entry = Registry(runs).lookup(entry_dir.name)
    assert entry and [s["resumed"] for s in entry["sessions"]] == [False, True]
    metrics = results / "training" / entry["run_id"] / "metrics.jsonl"
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == [0, 1, 2, 3]
    manifest = json.loads(metrics.with_name("manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["resumed_from"][0].endswith(f"checkpoint-{last}")
    assert manifest["label"] == "repair_trained stand-in, trained on CPU"


@pytest.mark.integration
def test_a_notebook_run_trains_serves_and_evaluates_its_row(ci_train):
    """Table 1's `+ SFT` row under papermill with the ci preset and train=True: the notebook trains the tiny model
    (1 SFT step on 1 teacher trajectory), serves the checkpoint and runs the Test agent and the audit on it; the
    row is the trained checkpoint's, labeled a stand-in trained on CPU. A second run reuses the checkpoint."""
    import papermill

    from execcritic.experiments import reproduce
    from execcritic.results.store import load_run

    tmp_path, _, _ = ci_train
    results = tmp_path / "results"
    row = "Qwen3.5-35B-A3B + SFT"

    def run(run_id: str):
        out = tmp_path / f"{run_id}.ipynb"
        papermill.execute_notebook(str(reproduce.notebook_path("table1")), str(out), kernel_name="python3",
                                   cwd=str(REPO), progress_bar=False,
                                   parameters={"preset": "ci", "output_dir": str(results), "train": True,
                                               "test_sources": [row], "instances": [TOOLZ], "run_id": run_id})
        nb = json.loads(out.read_text())
        return load_run("table1", run_id, root=results), "\n".join(
            "".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))

    first, text = run("trained-1")
    assert "Training on CPU" in text and "[test_sft] trained checkpoint" in text
    cond = first.manifest["training"]["checkpoints"]["test_sft"]
    rec = first.records.to_dict("records")
    assert len(rec) == 1 and rec[0]["instance_id"] == TOOLZ
    assert rec[0]["test_source"].startswith(f"{row} [stand-in: tiny random Qwen3.5-MoE + SFT")
    assert rec[0]["test_source"].endswith("trained on CPU]")
    assert rec[0]["model"] == f"hf:{cond['final_checkpoint']}"                  # the checkpoint was served
    assert first.manifest["models"]["test_sft"]["weights_sha256"]
    assert first.manifest["status"] == "complete"

    second, text = run("trained-2")
    assert "[test_sft] reused checkpoint" in text
    assert second.manifest["training"]["checkpoints"]["test_sft"]["fingerprint"] == cond["fingerprint"]


def test_figure6_draws_the_curves_its_own_run_trained(ci_train):
    """Figure 6c's Repair curve comes from the GRPO run the figure's own run trained (1 step of the tiny model);
    a curve that cannot be trained here (Test RL: the demo task's Gold has no mutant, so no pool of >= 2 labeled
    candidates) says why."""
    from execcritic import experiments
    from execcritic.figures.notebook import curve_runs, training_curves

    tmp_path, _, _ = ci_train
    run = experiments.run(_params(tmp_path, "figure6", test_sources=["teacher"], run_id="f6"), show_progress=False)
    ids = run.manifest["training_curves"]
    assert set(ids) == {"repair RL from base"}
    assert "eligible for Test RL" in run.manifest["not_run_curves"]["test RL from base"]
    drawn = curve_runs(run)
    assert [r.run_id for r in drawn] == [ids["repair RL from base"]]
    assert drawn[0].manifest["role"] == "repair" and drawn[0].manifest["init"] == "base"
    points = training_curves(run)
    assert list(points["run"]) == [f"training/{ids['repair RL from base']}"] and list(points["step"]) == [0]


OFFICIAL_TESTS = "scripted:tests/scripted_policies.py:official_tests"


def _trained_run(ci_train, artifact: str, run_id: str):
    """`artifact` run with train=True and RL-35B's tests bound to a scripted policy (named as such): (run, the
    checkpoints its run trained, by role)."""
    from execcritic import experiments

    tmp_path, _, _ = ci_train
    run = experiments.run(_params(tmp_path, artifact, run_id=run_id, models={"test_rl": OFFICIAL_TESTS}),
                          show_progress=False)
    assert run.manifest["status"] == "complete"
    return run, run.manifest["training"]["checkpoints"]


@pytest.mark.integration
def test_table3_fills_its_rows_from_the_objectives_its_run_trained(ci_train):
    """Table 3 with train=True (RL-35B's tests bound to a scripted policy, named as such): each objective's Repair
    agent is trained by this run with its own knobs (standard: no revision round and 1.0 for a solve; no direct
    bonus: 1.0 at Round 0; full T2I: Eq. 6), served, run and officially scored; every row says it is a stand-in
    trained on CPU."""
    tmp_path = ci_train[0]
    run, trained = _trained_run(ci_train, "table3", "t3")
    assert set(trained) == {"repair_standard", "repair_t2i_no_bonus", "repair_trained"}
    assert len({e["fingerprint"] for e in trained.values()}) == 3
    reg = Registry(tmp_path / "runs")
    knobs = {role: reg.manifest(e["fingerprint"])["recipe"]["protocol"] for role, e in trained.items()}
    assert knobs["repair_standard"]["repair"]["revision_rounds"] == 0
    assert knobs["repair_standard"]["repair_reward"]["resolved_at_round0"] == 1.0
    assert knobs["repair_t2i_no_bonus"]["repair"]["revision_rounds"] == knobs["repair_trained"]["repair"]["revision_rounds"]
    assert knobs["repair_t2i_no_bonus"]["repair_reward"]["resolved_at_round0"] == 1.0
    assert knobs["repair_trained"]["repair_reward"]["resolved_at_round0"] == 1.5
    rec = run.records
    assert len(rec) == 3 and rec["objective"].str.endswith(", trained on CPU]").all()
    assert set(rec["repair_model"]) == {f"hf:{e['final_checkpoint']}" for e in trained.values()}
    assert rec["official_valid"].all()                     # each terminal patch had a fresh official run


@pytest.mark.integration
def test_table6_trains_repair_on_generated_and_on_oracle_feedback(ci_train):
    """Table 6 with train=True: the "Generated tests" Repair agent is trained on the frozen qualified tests of the
    run's Test role (RL-35B bound to a scripted policy here, named as such: the binding wins) that the real
    generation stage and Base gate produced, the "Oracle tests" one on one Oracle F2P node; both are served, run
    with the same tests and officially scored, and the registry tells the two recipes apart."""
    from execcritic.results.store import load_run

    tmp_path = ci_train[0]
    run, trained = _trained_run(ci_train, "table6", "t6")
    assert set(trained) == {"repair_generated_fb", "repair_trained"}
    assert trained["repair_generated_fb"]["fingerprint"] != trained["repair_trained"]["fingerprint"]
    gen = load_run("training", trained["repair_generated_fb"]["run_id"], root=tmp_path / "results").manifest
    oracle = load_run("training", trained["repair_trained"]["run_id"], root=tmp_path / "results").manifest
    assert oracle["feedback"] == {"source": "oracle_f2p"}
    fb = gen["feedback"]
    assert fb["source"] == "generated" and fb["generator"] == f"model:{OFFICIAL_TESTS}"
    assert set(fb["bundles"]) == {TOOLZ} and fb["no_qualified_bundle"] == []
    rollouts = [json.loads(x) for x in (Path(gen["runs_dir"]) / "rollouts.jsonl").read_text().splitlines()]
    assert rollouts and {r["info"]["feedback"]["bundle_digest"] for r in rollouts} == set(fb["bundles"].values())
    rec = run.records
    assert len(rec) == 2 and rec["training_feedback"].str.endswith(", trained on CPU]").all()
    assert rec["official_valid"].all()

    # a Test role whose tests never pass the Base gate leaves generated-test training nothing: the row says so
    none = _params(tmp_path, "table6", run_id="t6-none", models={"test_rl": "scripted:tests/scripted_policies.py:no_tests"})
    b, why = training.prepare(none, ["repair_generated_fb"], log=print).checkpoint("repair_generated_fb")
    assert b is None and "no training instance got a qualified test from test_rl" in why


TEST_RL_KNOBS = {"test_agent.max_turns": 1, "test_agent.max_output_tokens": 16, "grpo.rollouts_per_group": 2,
                 "grpo.max_groups_offered": 1, "test_rl.steps": 1, "test_rl.global_batch_size": 2}


def test_figure6_test_rl_curve_trains_on_labeled_pools(sympy_task, tmp_path, monkeypatch):
    """Figure 6b's Test RL from the base model through the notebook path on a real verified-sdist instance: the
    adapter labels Gold and its mutants with real official runs, keeps the instance (a pool with both labels),
    and runs one GRPO step of the tiny model's Test episodes; the run is recorded with role test, init base."""
    from execcritic.results.store import load_run

    monkeypatch.setenv(training.RUNS_ENV, str(tmp_path / "runs"))
    preset = _preset(tmp_path / "sdist-tiny.yaml", "verified-sdist", TEST_RL_KNOBS, [sympy_task.instance_id])
    p = parameters("figure6", preset=str(preset), train=True, output_dir=str(tmp_path / "results"))
    entry, why = training.curve("test", "base", p, log=print)
    assert entry is not None, why
    [labeled] = list((tmp_path / "runs" / "candidates").iterdir())
    pools = json.loads((labeled / "pools.json").read_text())["pools"]
    assert pools[sympy_task.instance_id]["test_rl"] and pools[sympy_task.instance_id]["incorrect"] >= 1
    run = load_run("training", entry["run_id"], root=tmp_path / "results")
    assert run.manifest["role"] == "test" and run.manifest["init"] == "base" and run.manifest["status"] == "complete"
    assert [r["step"] for r in run.records.to_dict("records")] == [0]
