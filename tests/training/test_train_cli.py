"""The training drivers end to end: SFT on Test-agent trajectories the real pipeline wrote, `execcritic train`
killed and resumed from its checkpoint, and a trained checkpoint served and evaluated by the pipeline.

Real parts: the pipeline's generation stage (with a scripted *teacher*, named as such), TRL's SFTTrainer and
GRPOTrainer on the tiny Qwen3.5-MoE, checkpoints, the results store, `transformers serve`, the official
evaluator. The random tiny model writes garbage, which is what these control-flow tests need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from execcritic.config import load_protocol
from execcritic.results.store import load_run
from tests.paths import REPO, VERIFIED
from tests.training_fixtures import kill_when

pytestmark = [pytest.mark.train, pytest.mark.slow]


def _tensor(path: Path, name: str):
    from safetensors.torch import load_file

    return load_file(str(next(path.glob("*.safetensors"))))[name]


def test_sft_on_pipeline_trajectories(sympy_task, tiny_model_dir, tmp_path):
    from execcritic.pipeline import stages
    from execcritic.pipeline.config import PipelineConfig
    from execcritic.training.run import TrainRun, train

    proto = load_protocol("cpu-train")
    spec = f"scripted:{REPO / 'tests' / 'scripted_policies.py'}:public_test_teacher"
    cfg = PipelineConfig(out_dir=str(tmp_path / "teacher-run"), test_sources=(spec,), protocol=proto)
    gen = stages.generate_tests([sympy_task], cfg, show_progress=False)
    assert gen.done == 1, gen.to_dict()
    record = json.loads(cfg.paths["generation"].read_text().splitlines()[0])
    assert record["qualified"] and Path(record["trajectory"]).is_file()

    run = TrainRun(kind="sft", preset="tiny-cpu", model=str(tiny_model_dir), run_id="sft-test", protocol=proto,
                   sft_data=[str(cfg.paths["generation"])], teacher="scripted:public_test_teacher",
                   runs_root=tmp_path / "runs", results_root=tmp_path / "results", label="test")
    started = time.monotonic()
    result = train(run)
    wall = time.monotonic() - started
    assert result["admitted"] == 1 and result["steps"] and all(s["loss"] > 0 for s in result["steps"])
    final = Path(result["final_checkpoint"])
    assert (final / "config.json").is_file() and (final / "tokenizer_config.json").is_file()
    name = "lm_head.weight"
    assert not _tensor(final, name).equal(_tensor(tiny_model_dir, name))        # a real optimizer step
    saved = load_run("sft", "sft-test", root=tmp_path / "results")          # the store's `sft` schema
    m = saved.manifest
    assert m["admitted"] == 1 and m["deviations_from_paper"] and m["role"] == "test" and m["status"] == "complete"
    assert m["instances"] == [sympy_task.instance_id] and m["n_instances"] == 1    # what it trained on
    rows = saved.records.to_dict("records")                                 # metrics.jsonl, one row per step
    assert len(rows) == len(result["steps"]) and rows[0]["loss"] > 0 and 0 <= rows[0]["mean_token_accuracy"] <= 1
    assert rows[0]["optimizer_step_s"] > 0 and m["peak_rss_mb"] > 0
    assert m["init"] == "checkpoint"                                     # a foreign HF dir is not guessed
    meta = json.loads((final / "execcritic-training.json").read_text())
    assert meta["kind"] == "sft" and meta["run_id"] == "sft-test"        # RL from it is "from sft"
    print(f"\n[sft] 1 trajectory, {len(rows)} step(s): {wall:.1f} s, peak RSS {m['peak_rss_mb']:.0f} MB, "
          f"optimizer.step {rows[0]['optimizer_step_s'] * 1000:.1f} ms")


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "EXECCRITIC_VERIFIED": str(VERIFIED), "HF_HUB_OFFLINE": "1",
            "EXECCRITIC_RESULTS": str(tmp_path / "results"), "TRL_EXPERIMENTAL_SILENCE": "1"}


def test_train_cli_resumes_after_kill(sympy_task, tiny_model_dir, tmp_path):
    """`execcritic train repair-rl` is SIGKILLed after its first checkpoint and resumed with --resume: the run
    finishes with every GRPO step in metrics.jsonl exactly once and the manifest records both sessions."""
    argv = [sys.executable, "-m", "execcritic.cli", "train", "repair-rl", "--dataset", "verified-sdist", "--instance",
            sympy_task.instance_id, "--model", str(tiny_model_dir), "-c", "cpu-train", "--preset", "tiny-cpu",
            "--run-id", "resume-test", "--workers", "2", "--official", "needed", "--label", "test",
            "--set", "repair_rl.steps=2", "--set", "grpo.rollouts_per_group=2", "--set", "grpo.max_groups_offered=1",
            "--set", "repair_rl.global_batch_size=2", "--set", "repair.round0_turns=1",
            "--set", "repair.turns_per_round=1", "--set", "repair_rl.max_response_tokens=8", "--json"]
    ckpt = tmp_path / "runs" / "train" / "resume-test" / "checkpoints" / "checkpoint-1"
    kill_when(argv, (ckpt / "trainer_state.json").is_file, cwd=tmp_path, env=_env(tmp_path), log=tmp_path / "first.log")
    metrics = tmp_path / "results" / "training" / "resume-test" / "metrics.jsonl"
    first = [json.loads(x)["step"] for x in metrics.read_text().splitlines()]
    assert first == [0]                                       # written when checkpoint-1 was saved

    done = subprocess.run([*argv, "--resume"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert all(r["n_rollouts"] >= 0 and "reward_mean" in r and "optimizer_s" in r for r in rows)
    manifest = json.loads(metrics.with_name("manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["sessions"]) == 2
    assert manifest["instances"] == [sympy_task.instance_id]            # the denominator, on resume too
    assert manifest["resumed_from"][0].endswith("checkpoint-1") and manifest["role"] == "repair"
    assert manifest["init"] == "checkpoint" and manifest["init_model"]["path"] == str(tiny_model_dir)
    assert manifest["deviations_from_paper"]["repair_rl.steps"] == {"paper": 100, "used": 2}
    assert (tmp_path / "runs" / "train" / "resume-test" / "final" / "config.json").is_file()


@pytest.mark.integration
def test_evaluate_a_checkpoint_with_the_pipeline(sympy_task, tiny_model_dir, tmp_path):
    """A checkpoint goes through `execcritic train evaluate`: served by `transformers serve`, Test generation +
    B2G audit and Repair + official scoring, with no manual step."""
    from typer.testing import CliRunner

    from execcritic.cli import app

    out = tmp_path / "eval"
    args = ["train", "evaluate", str(tiny_model_dir), "--instance", sympy_task.instance_id, "--out", str(out),
            "--no-progress", "--json", "-c", "cpu-train", "--set", "test_agent.max_turns=1",
            "--set", "repair.round0_turns=1", "--set", "repair.turns_per_round=1", "--runs", "1"]
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    wall = time.monotonic() - started
    assert result.exit_code == 0, result.output[-3000:]
    data = json.loads((out / "evaluation.json").read_text())
    assert data["spec"] == f"hf:{tiny_model_dir.resolve()}"
    assert data["audit"]["tasks"] == 1 and data["audit"]["b2g_pct"] == 0.0          # a random model: no bundle
    gen = [json.loads(x) for x in (out / "generation.jsonl").read_text().splitlines()]
    assert gen[0]["source"] == data["spec"].join(["model:", ""]) and gen[0]["turns"] == 1
    score = [json.loads(x) for x in (out / "score.jsonl").read_text().splitlines()]
    assert len(score) == 1 and score[0]["valid"] and not score[0]["resolved"]      # a fresh official run
    src = data["pipeline"]["sources"][f"model:{data['spec']}"]
    assert src["resolved_pct_mean"] == 0.0 and data["manifest"]["model"]["checkpoint"] == str(tiny_model_dir.resolve())
    print(f"\n[evaluate] serve + generate + audit + repair + score: {wall:.1f} s ({data['timings']})")
