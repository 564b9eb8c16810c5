"""The pipeline end to end on real projects: generate-tests -> repair -> score, with workers, a local
Ray cluster, and an interrupted (kill -9) run resumed to the same records as an uninterrupted one.

Tasks: the toolz and boltons demo tasks (tests/demo_tasks.py), several instance ids each, written to a
JSONL dataset exactly as a user would pass one. Test source: the official bundle; Repair policy: the
scripted `wrong_then_gold` stand-in (first a wrong patch, then the fix after the feedback envelope).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from execcritic.config import load_protocol
from execcritic.pipeline import stages
from execcritic.pipeline.config import PipelineConfig
from execcritic.pipeline.records import RecordStore
from execcritic.pipeline.stats import summarize
from execcritic.tasks import load_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

POLICIES = Path(__file__).resolve().parents[1] / "scripted_policies.py"
POLICY = f"scripted:{POLICIES}:wrong_then_gold"


def protocol(runs: int):
    return load_protocol(values={"repair.runs_per_source": runs, "harness.memory_limit_mb": 1024})
STABLE = {"generation": ("key", "qualified", "exit_status"),
          "repair": ("key", "final_reason", "final_patch_sha", "local_status", "revision_rounds"),
          "score": ("key", "resolved", "valid", "patch_applied")}


def write_dataset(path: Path, demos, copies: int) -> Path:
    with path.open("w") as fh:
        for demo in demos:
            for i in range(copies):
                fh.write(json.dumps(demo.task_row(f"demo-{i + 1}")) + "\n")
    return path


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, demo_toolz, demo_boltons):
    return write_dataset(tmp_path_factory.mktemp("ds") / "demo.jsonl", [demo_toolz, demo_boltons], 5)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "execcritic.cli", *args]


def run_cmd(dataset: Path, out: Path, *extra: str) -> list[str]:
    return cli("run", "--dataset", str(dataset), "--out", str(out), "--test-source", "oracle", "--repair-model", POLICY,
               "--runs", "1", "--no-progress", "--json", *extra)


def stable(out: Path) -> dict[str, list[tuple]]:
    got = {}
    for name, fields in STABLE.items():
        rows = RecordStore(out / f"{name}.jsonl").load()
        got[name] = sorted(tuple(r.get(f) for f in fields) for r in rows)
    return got


def test_scripted_end_to_end_first_check_fails_then_passes_then_resolved(tmp_path, dataset):
    tasks = list(load_tasks(str(dataset)))[::5][:2] + list(load_tasks(str(dataset)))[1:2]
    cfg = PipelineConfig(out_dir=str(tmp_path / "run"), test_sources=("oracle",), repair_model=POLICY,
                         protocol=protocol(1))
    summaries = stages.run_all(tasks, cfg, workers=2, show_progress=False)
    assert all(s.errors == 0 for s in summaries.values()), {k: v.to_dict() for k, v in summaries.items()}
    gen = RecordStore(tmp_path / "run" / "generation.jsonl").load()
    assert len(gen) == 3 and all(r["qualified"] for r in gen)
    for r in RecordStore(tmp_path / "run" / "repair.jsonl").load():
        assert [(c["trigger"], c["status"]) for c in r["checks"]] == [("initial", "hard_fail"), ("check", "pass")]
        assert r["final_reason"] == "check_pass" and r["entered_repair"]
        traj = json.loads(Path(r["trajectory"]).read_text())
        assert any("<failing_test_output>" in str(m.get("content")) for m in traj["messages"])
    scores = RecordStore(tmp_path / "run" / "score.jsonl").load()
    assert len(scores) == 3 and all(s["valid"] and s["resolved"] for s in scores)
    summary = summarize(tasks, cfg)
    assert summary["sources"]["oracle"]["resolved_pct_mean"] == 100.0
    assert summary["revision_turns"]["n"] == 3


def test_none_source_keeps_round0_in_the_denominator(tmp_path, dataset):
    tasks = list(load_tasks(str(dataset)))[:2]
    cfg = PipelineConfig(out_dir=str(tmp_path / "run"), test_sources=("none",),
                         repair_model=f"scripted:{POLICIES}:gives_up", protocol=protocol(2))
    stages.run_all(tasks, cfg, show_progress=False)
    summary = summarize(tasks, cfg)["sources"]["none"]
    assert summary["qualified"] == 0 and summary["resolved_pct_per_run"] == [0.0, 0.0]
    assert summary["final_reasons"] == {"no_bundle": 4}
    assert len(RecordStore(tmp_path / "run" / "score.jsonl").load()) == 4   # every Round-0 fallback is scored


@pytest.mark.xdist_group("ray")     # one Ray cluster on the machine at a time (tests/conftest.py)
def test_ray_backend_matches_threads(tmp_path, dataset):
    pytest.importorskip("ray")
    import ray

    tasks = list(load_tasks(str(dataset)))[:2]
    kw = dict(test_sources=("oracle",), repair_model=POLICY, protocol=protocol(1))
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        stages.run_all(tasks, PipelineConfig(out_dir=str(tmp_path / "ray"), **kw), workers=2, backend="ray",
                       show_progress=False)
    finally:
        ray.shutdown()
    stages.run_all(tasks, PipelineConfig(out_dir=str(tmp_path / "thr"), **kw), show_progress=False)
    assert stable(tmp_path / "ray") == stable(tmp_path / "thr")


def test_kill_midway_and_resume_equals_uninterrupted(tmp_path, dataset):
    """kill -9 a 10-task run after a few repair records, resume it, compare with an uninterrupted run."""
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(run_cmd(dataset, killed, "--workers", "2"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    deadline = time.monotonic() + 900
    repair_log = killed / "repair.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if repair_log.exists() and repair_log.read_text().count("\n") >= 3:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(RecordStore(repair_log).load())
    assert 3 <= partial < 10
    resumed = subprocess.run(run_cmd(dataset, killed, "--workers", "2"), capture_output=True, text=True, env=env,
                             timeout=1800)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    fresh = subprocess.run(run_cmd(dataset, tmp_path / "fresh", "--workers", "2"), capture_output=True, text=True,
                           env=env, timeout=1800)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    got, want = stable(killed), stable(tmp_path / "fresh")
    assert got == want
    assert [len(v) for v in got.values()] == [10, 10, 10]
    for name in STABLE:  # nothing duplicated by the resume
        keys = [r["key"] for r in RecordStore(killed / f"{name}.jsonl").load()]
        assert len(keys) == len(set(keys))
