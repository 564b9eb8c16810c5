"""verified-git on a Ray cluster (the `paper-git` preset's executor): a head without CPUs and two worker nodes,
started here as `ray start` processes as a user starts them, each worker node with its own cache and its own git
source (a local mirror). The driver joins the cluster and runs the pipeline - Oracle bundle Base-gated, Repair by a
scripted policy (not a model), the image-free official evaluator - on verified-git rows. Nothing is built on the
driver's cache: each node builds the environment and checkouts its units need in its own cache, from the recipe
the driver read, and the records equal a run on threads."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from execcritic.pipeline import stages
from execcritic.pipeline.config import PipelineConfig
from execcritic.pipeline.preflight import NodeEnvironments
from execcritic.pipeline.records import RecordStore
from execcritic.tasks.git import build as git_build
from execcritic.tasks.git import git_task
from execcritic.tasks.git.plan import plan_envs
from execcritic.tasks.sdist.recipe import Recipe
from tests.integration.test_pipeline import POLICY, protocol, stable
from tests.integration.test_verified_git import REPO, SPEC, build_mirror, needs_sandbox, row

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]   # one Ray cluster at a time
CUTOFF = "2100-01-01T00:00:00Z"          # the spec's install checks that pip is held to it (test_verified_git)


@pytest.fixture
def mirror(tmp_path):
    return build_mirror(tmp_path)


@pytest.fixture
def cluster(mirror, tmp_path):
    """(address, [cache of each worker node]): `ray start --head --num-cpus=0` and two `ray start --address`
    worker nodes of one CPU each, their EXECCRITIC_CACHE and EXECCRITIC_GIT_SOURCES their own."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")       # its own session dir: /tmp/ray is not touched
    start = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats", "--num-gpus=0"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("EXECCRITIC_CACHE", None)
    caches = [tmp_path / f"node{i}-cache" for i in range(2)]
    procs = [subprocess.Popen(start + ["--head", f"--port={port}", f"--temp-dir={temp}", "--num-cpus=0",
                                       "--include-dashboard=false"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    address = f"127.0.0.1:{port}"
    try:
        _wait_for_port(port, procs[0])
        ray.init(address=address, log_to_driver=False)
        for n, cache in enumerate(caches, 1):       # one at a time: two joining at once can race for their ports
            log = (tmp_path / f"node{n}.log").open("w")
            procs.append(subprocess.Popen(start + [f"--address={address}", "--num-cpus=1"],
                                          env={**env, "EXECCRITIC_CACHE": str(cache),
                                               "EXECCRITIC_GIT_SOURCES": f"{REPO}={mirror['path']}"},
                                          stdout=log, stderr=subprocess.STDOUT))
            _wait_for_cpus(n, procs[-1], tmp_path / f"node{n}.log")
        yield address, caches
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the Ray head did not come up on port {port} (exit {proc.poll()})") from None
            time.sleep(1)


def _wait_for_cpus(n: int, proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(node["Resources"].get("CPU", 0) for node in ray.nodes() if node["Alive"]) < n:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"worker node {n} did not join (exit {proc.poll()}): {log.read_text()[-3000:]}")
        time.sleep(1)


def test_verified_git_units_run_on_two_ray_nodes_each_building_its_own_environment(mirror, cluster, tmp_path,
                                                                                  monkeypatch):
    needs_sandbox()
    address, caches = cluster
    src = {REPO: str(mirror["path"])}
    # the recipe, as qualification leaves it: the env resolved once (here, in the driver's own cache)
    (env,) = plan_envs([row(mirror)], {REPO: {"0.1": SPEC}}, sources=src, cutoff=CUTOFF).envs.values()
    driver = tmp_path / "driver-cache"
    _, locked = git_build.build_env(env, source=src[REPO], root=driver / "verified-git", resolve=True)
    recipe = Recipe("<this test>", {}, {locked.key: locked}, (), task_set="verified-git")
    tasks = [git_task(row(mirror, f"demo__calc-{i}"), locked) for i in (1, 2, 3, 4)]
    kw = {"test_sources": ("oracle",), "repair_model": POLICY, "protocol": protocol(1)}

    t0 = time.monotonic()
    got = stages.run_all(tasks, PipelineConfig(out_dir=str(tmp_path / "ray"), **kw), workers=2, backend="ray",
                         ray_address=address, prepare=NodeEnvironments(None, git_recipe=recipe), show_progress=False)
    wall = time.monotonic() - t0
    assert all(s.errors == 0 and s.complete for s in got.values()), [s.failures for s in got.values()]
    assert len(set().union(*(s.nodes for s in got.values()))) == 2, [s.nodes for s in got.values()]
    score = RecordStore(tmp_path / "ray" / "score.jsonl").load()
    assert len(score) == 4 and all(r["valid"] and r["resolved"] for r in score), score
    gen = RecordStore(tmp_path / "ray" / "generation.jsonl").load()
    assert all(r["qualified"] for r in gen)

    # each worker node built the environment in its own cache, and the checkouts of the units it ran there
    ran_on = []
    for cache in caches:
        root = cache / "verified-git"                                   # (git_build.cache_root() on that node)
        assert (git_build.env_dir(locked.key, root) / "env.json").is_file(), f"no env built in {cache}"
        ran_on.append({t.instance_id for t in tasks if git_build.checkout_dir(t.instance_id, root).is_dir()})
    assert all(ran_on) and set().union(*ran_on) == {t.instance_id for t in tasks}, ran_on
    assert not any(git_build.checkout_dir(t.instance_id, driver / "verified-git").exists() for t in tasks)

    # the same run on threads, on this machine (its env in one cache): the same records
    monkeypatch.setenv("EXECCRITIC_CACHE", str(driver))
    git_build.ensure(tasks, sources=src, recipe=recipe)
    stages.run_all(tasks, PipelineConfig(out_dir=str(tmp_path / "threads"), **kw), workers=2, show_progress=False)
    assert stable(tmp_path / "ray") == stable(tmp_path / "threads")
    print(f"\n4 verified-git instances x (generate, repair, score) on 2 Ray nodes: {wall:.0f} s, builds included")


def test_a_notebook_run_under_a_ray_preset_sends_its_units_to_the_nodes(cluster, demo_toolz, demo_boltons,
                                                                          tmp_path, monkeypatch):
    """The experiments path (what a notebook and `reproduce` run) under a preset with `executor: ray` - the ci
    preset's scripted stand-ins on the demo tasks, extended the way `paper-git` extends `paper`: every unit runs
    on a worker node, the run completes, and its manifest names the cluster and the units each node ran."""
    from execcritic.experiments import core
    from execcritic.experiments.artifacts import SPECS
    from execcritic.experiments.params import parameters

    address, _ = cluster
    ds = tmp_path / "demo.jsonl"
    ds.write_text("".join(json.dumps(d.task_row("demo-1")) + "\n" for d in (demo_toolz, demo_boltons)))
    monkeypatch.setenv("EXECCRITIC_CI_DATASET", str(ds))
    preset = tmp_path / "ci-ray.yaml"
    preset.write_text(f"name: ci-ray\nextends: ci\nexecutor: ray\nray_address: {address}\n")
    params = parameters("table1", preset=str(preset), output_dir=str(tmp_path / "results"))
    run = core.execute(SPECS["table1"], params, show_progress=False)
    assert run.manifest["status"] == "complete" and len(run.records), run.manifest
    placed = run.manifest["executor"]
    assert placed["ray_address"] == address
    assert len(placed["units_per_node"]) == 2, placed                 # both worker nodes (the head has no CPU)
    assert sum(placed["units_per_node"].values()) > 0
