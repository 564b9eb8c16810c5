"""The verl launch a `paper`-preset notebook starts past its cost gate (`execcritic.training.verl_launch`), as far as
it runs without GPUs: each job's command composed by verl's own Hydra configs (main_ppo's for both agents, the SFT
trainer's), its launch file equal to the committed one for the paper's protocol, its protocol and data files,
verl's real file logger read back into the results store's rows, the GPU count of a real local Ray cluster (the
notebook refuses a launch there, and says why), and a real verl process that ends without a checkpoint failing
closed. A launch that trains needs GPUs, Megatron-Core and SGLang: it never ran here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("verl", reason="the verl extra is not installed (make venv installs it)")

from execcritic.config import PAPER, apply_overrides, load_protocol  # noqa: E402
from execcritic.errors import InputError  # noqa: E402
from execcritic.training import verl_config as vc  # noqa: E402
from execcritic.training import verl_launch as vl  # noqa: E402
from execcritic.training.datasets import sft_example  # noqa: E402
from execcritic.training.episodes import repair_row  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _compose_ppo(job: vl.VerlJob):
    from hydra import compose, initialize_config_dir

    argv = list(job.argv)
    at = argv.index("--config-name")
    assert argv[at - 2] == "--config-path"
    with initialize_config_dir(config_dir=argv[at - 1], version_base=None):
        return compose(config_name=argv[at + 1], overrides=argv[at + 2:])


@pytest.mark.parametrize("kind", ["repair-rl", "test-rl"])
def test_an_rl_job_is_main_ppo_with_the_papers_launch_file_and_composes(kind, sympy_task, tmp_path):
    """The job's launch file is the committed one (Tables 7-8) for the paper's protocol; verl's Hydra composes the
    command's overrides onto it; every Ray process reads the run's protocol from the file the job names."""
    from execcritic.harness.gate import LabeledPatch
    from execcritic.training.episodes import test_row

    role = "repair" if kind == "repair-rl" else "test"
    row = (repair_row(sympy_task, PAPER) if role == "repair"
           else test_row(sympy_task, [LabeledPatch(sympy_task.patch, True, "gold")], PAPER))
    job = vl.rl_job(kind, run_id="r1", model="/models/qwen", rows=[row], task_set="verified-sdist", protocol=PAPER,
                    home=tmp_path / "home", results=tmp_path / "res", ray_address="10.0.0.1:6379")
    assert job.argv[1:3] == ("-m", vl.PPO_MODULE) and job.gpus == 8 and job.backend == "megatron"
    launch = Path(job.argv[job.argv.index("--config-path") + 1]) / f"{role}_rl.yaml"
    assert launch.read_text() == vc.config_file(role).read_text()
    cfg = _compose_ppo(job)
    assert cfg.algorithm.adv_estimator == vc.ADV_ESTIMATOR_NAMES[role]
    assert cfg.trainer.total_training_steps == (200 if role == "test" else 100) and cfg.trainer.save_freq == 10
    assert cfg.ray_kwargs.ray_init.address == "10.0.0.1:6379"
    assert cfg.actor_rollout_ref.model.path == "/models/qwen" and list(cfg.trainer.logger) == ["console", "file"]
    assert cfg.trainer.default_local_dir == str(job.checkpoints) and cfg.trainer.resume_mode == "auto"
    assert load_protocol(job.env[vc.PROTOCOL_ENV]).digest() == PAPER.digest()
    assert job.env["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "res" / "verl_metrics.attempt1.jsonl")
    import pandas as pd

    data = pd.read_parquet(cfg.data.train_files)
    assert list(data["agent_name"]) == [vc.AGENT_LOOP_NAMES[role]]
    assert data["extra_info"][0]["instance_id"] == sympy_task.instance_id


def test_a_recipes_own_knobs_reach_the_launch_file_and_the_episodes(sympy_task, tmp_path):
    """Table 3's standard objective (no revision rounds; 1.0 for a Round-0 resolve) reaches the Ray workers through
    the protocol file; a knob verl itself reads (the step count) is in the launch file."""
    protocol = apply_overrides(PAPER, {"repair.revision_rounds": 0, "repair_reward.resolved_at_round0": 1.0,
                                       "repair_rl.steps": 7})
    job = vl.rl_job("repair-rl", run_id="r2", model="/m", rows=[repair_row(sympy_task, protocol)],
                    task_set="verified-sdist", protocol=protocol, home=tmp_path / "h", results=tmp_path / "r")
    assert load_protocol(job.env[vc.PROTOCOL_ENV]).repair.revision_rounds == 0
    cfg = _compose_ppo(job)
    assert cfg.trainer.total_training_steps == 7 and "address" not in cfg.ray_kwargs.ray_init   # a local cluster


def test_an_sft_job_composes_with_verls_sft_trainer(sympy_task, tmp_path):
    from hydra import compose, initialize_config_module

    from execcritic.training.datasets import TRAJECTORY_FORMAT

    traj = {"format": TRAJECTORY_FORMAT, "meta": {}, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "fix it"},
                         {"role": "assistant", "content": "<think>look</think>",
                          "tool_calls": [{"id": "c1", "type": "function",
                                          "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "setup.py"}]}
    row = sft_example({"instance_id": sympy_task.instance_id}, traj, reasoning_visible=True, teacher="deepseek")
    job = vl.sft_job(run_id="s1", model="/models/qwen", rows=[row], protocol=PAPER, home=tmp_path / "h",
                     results=tmp_path / "r")
    argv = list(job.argv)
    assert argv[1:4] == ["-m", "torch.distributed.run", "--standalone"] and "--nproc_per_node=8" in argv
    at = argv.index(vl.SFT_MODULE)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        cfg = compose(config_name="sft_trainer_engine", overrides=argv[at + 1:])
    s = PAPER.sft
    assert cfg.optim.lr == s.learning_rate and list(cfg.optim.betas) == [0.9, 0.98] and cfg.optim.weight_decay == 0.1
    assert cfg.data.train_batch_size == s.batch_size and cfg.data.max_length == s.max_length
    assert "hf_model" in cfg.checkpoint.save_contents and cfg.model.path == "/models/qwen"
    import pandas as pd

    data = pd.read_parquet(cfg.data.train_files)
    msgs = list(data["messages"][0])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[2]["tool_calls"][0]["function"]["arguments"]["command"] == "ls"
    with pytest.raises(InputError, match="no admitted SFT trajectory"):
        vl.sft_job(run_id="s2", model="/m", rows=[], protocol=PAPER, home=tmp_path / "h2", results=tmp_path / "r2")


def test_verls_file_logger_becomes_the_results_stores_rows(tmp_path, monkeypatch):
    """verl's own FileLogger writes each attempt (a resumed attempt's step replaces the killed one's); the rows
    are the `training` schema's, with the replay buffer's DAPO counts; without those counts it is an error."""
    from verl.utils.tracking import FileLogger

    from execcritic.results.schemas import schema

    def step(n, reward):
        return {"training/execcritic/reward_mean": reward, "training/execcritic/reward_std": 0.5,
                "training/execcritic/masked_share": 0.125, "training/execcritic/kept_groups": 16 * (n != 3),
                "training/execcritic/dropped_groups": 3, "training/execcritic/n_rollouts": 128,
                "actor/pg_loss": -0.01 * n, "actor/entropy": 0.9, "actor/pg_clipfrac": 0.02, "actor/ppo_kl": 1e-4,
                "actor/lr": 1e-6, "response_length/mean": 900.0, "timing_s/step": 3600.0, "critic/score/mean": reward,
                # the replay buffer's `rewards.end_step` record as numbers (step 3: capped, no group kept)
                "training/execcritic/offer_cap": int(n == 3), "training/execcritic/reward_over": int(n == 3),
                "training/execcritic/filler_groups": 16 * (n == 3), "training/execcritic/groups_offered": 64,
                "training/execcritic/optimizer_steps_skipped": 0,
                "training/execcritic/reward_mean_offered": reward / 2, "training/execcritic/reward_n_offered": 152}

    for attempt, steps in ((1, {1: 0.1, 2: 0.2}), (2, {2: 0.25, 3: 0.3})):
        monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / f"verl_metrics.attempt{attempt}.jsonl"))
        log = FileLogger(vl.PROJECT, "r1")
        for n, r in steps.items():
            log.log(step(n, r), n)
        log.finish()
    raw = vl.read_verl_metrics(tmp_path)
    assert [r["step"] for r in raw] == [1, 2, 3] and raw[1]["training/execcritic/reward_mean"] == 0.25
    rows = vl.schema_rows("repair-rl", raw)
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[1]["reward_mean"] == 0.25
    assert rows[0]["kept_groups"] == 16 and rows[0]["loss"] == pytest.approx(-0.01) and rows[0]["wall_s"] == 3600.0
    # a capped step reads as the TRL path's row does
    assert [(r["stop_reason"], r["reward_over"], r["filler_groups"]) for r in rows] == \
        [("full", "kept", 0), ("full", "kept", 0), ("offer_cap", "offered", 16)]
    # the one curve every figure reads: the mean over every offered rollout, with its n
    from execcritic.results.stats import curve_points
    points = curve_points(pd.DataFrame(rows), (0.0, 1.5))
    assert list(points["reward"]) == pytest.approx([0.05, 0.125, 0.15]) and list(points["n"]) == [152] * 3
    assert list(points["trained"]) == [True, True, False]
    sch = schema("training")
    for r in rows:
        assert {c.name for c in sch.columns if c.required} <= set(r)
    bare = [{"step": 1, "critic/score/mean": 0.3}]
    with pytest.raises(InputError, match="custom_sampler"):
        vl.schema_rows("test-rl", bare)
    (tmp_path / "verl_metrics.attempt3.jsonl").write_text("not json\n")
    with pytest.raises(InputError) as exc:
        vl.read_verl_metrics(tmp_path)
    assert exc.value.file.endswith("verl_metrics.attempt3.jsonl:1")


def test_the_notebook_sees_a_short_line_per_step_and_every_error():
    """verl's console logger line (its own formatter) behind Ray's actor prefix becomes one short progress line."""
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    metrics = {"training/execcritic/reward_mean": 0.35, "training/execcritic/kept_groups": 16,
               "training/execcritic/dropped_groups": 5, "actor/pg_loss": -0.02, "timing_s/step": 3512.5,
               "actor/entropy": 0.8, "perf/throughput": 123.0}
    line = "\x1b[36m(TaskRunnerV1 pid=3156)\x1b[0m " + concat_dict_to_str(metrics, 7) + "\n"
    assert vl.progress_line(line) == "step 7: reward 0.35, kept 16, dropped 5, loss -0.02, s 3512.5"
    assert vl.progress_line("(TaskRunnerV1 pid=1) ValueError: bad config") == "ValueError: bad config"
    assert vl.progress_line("(TaskRunnerV1 pid=1)   'seed': 42,") is None


def test_a_verl_job_that_ends_without_a_checkpoint_fails_closed(tmp_path, sympy_task):
    """A real `main_ppo` that stops at its own config check (a key verl does not know): the job fails with verl's
    exit status, the log's tail and its path; nothing is merged, no `final/` exists."""
    job = vl.rl_job("repair-rl", run_id="bad", model="/m", rows=[repair_row(sympy_task, PAPER)],
                    task_set="verified-sdist", protocol=PAPER, home=tmp_path / "h", results=tmp_path / "r")
    broken = vl.VerlJob(job.kind, job.run_id, (*job.argv, "trainer.no_such_key=1"), job.env, job.home, job.results,
                        job.gpus, job.backend)
    seen: list[str] = []
    with pytest.raises(vl.VerlLaunchFailed) as exc:
        vl.run_job(broken, log=seen.append)
    msg = str(exc.value)
    assert "exited 1 with no checkpoint" in msg and str(tmp_path / "r" / vl.LAUNCH_LOG) in msg
    assert "no_such_key" in msg and not job.final.exists()
    assert "no_such_key" in (tmp_path / "r" / vl.LAUNCH_LOG).read_text() and seen[0].startswith("[verl bad] ")


def test_the_last_sft_checkpoint_becomes_final(tmp_path, tiny_model_dir):
    job = vl.VerlJob("sft", "s", ("true",), {}, tmp_path / "h", tmp_path / "r", 8, "fsdp")
    for n in (10, 20):
        shutil.copytree(tiny_model_dir, job.checkpoints / f"global_step_{n}" / "huggingface")
    (job.checkpoints / "global_step_20" / "huggingface" / "marker").write_text("20")
    assert vl.latest_step(job.checkpoints) == 20
    final = vl.merge_checkpoint(job, 20)
    assert (final / "config.json").is_file() and (final / "marker").read_text() == "20"
    shutil.rmtree(job.checkpoints / "global_step_20" / "huggingface")
    with pytest.raises(vl.VerlLaunchFailed, match="hf_model"):
        vl.merge_checkpoint(job, 20)
    assert (job.final / "marker").is_file()                 # the earlier final survives a failed merge


@pytest.fixture
def ray_head():
    """A real Ray head node without GPUs (`ray start --head --block` in its own temp dir: terminating it stops what
    it started; no other Ray cluster on the machine, and no later `ray.init()`, sees it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")     # its own session dir: /tmp/ray is not touched
    proc = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                             f"--port={port}", f"--temp-dir={temp}", "--num-cpus=1", "--num-gpus=0", "--include-dashboard=false",
                             "--disable-usage-stats"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                vl.cluster_gpus(address, timeout_s=60)
                break
            except InputError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(2)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.integration
def test_a_notebook_refuses_a_launch_on_a_ray_cluster_without_gpus(ray_head, tmp_path, monkeypatch, capsys):
    """The paper preset past its cost gate, joined to a real Ray cluster that has no GPU: `cluster_gpus` asks the
    cluster, and every trained role says what it needs and what the cluster has; nothing is launched. (verl
    launched there would wait for its placement groups forever: measured, 10 min without a line of progress.)"""
    from execcritic.experiments import core
    from execcritic.experiments.artifacts import SPECS
    from execcritic.experiments.params import parameters

    assert vl.cluster_gpus(ray_head) == 0
    weights = tmp_path / "qwen"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    monkeypatch.setenv("EXECCRITIC_QWEN_WEIGHTS", str(weights))
    monkeypatch.setenv("EXECCRITIC_RAY_ADDRESS", ray_head)
    p = parameters("table3", preset="paper", allow_gpu_hours=1e9)
    plans = core.plan_artifact(SPECS["table3"], p)
    assert plans and all(f"trains with verl on 8 GPUs; the Ray cluster at {ray_head} has no GPU" in x.reason
                         for x in plans)
    with pytest.raises(InputError, match="127.0.0.1:1") as exc:
        vl.cluster_gpus("127.0.0.1:1", timeout_s=20)
    assert exc.value.field == "ray_address"
