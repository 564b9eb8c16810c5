"""Task environments are shared by every process on a machine (audits, pipelines, training, tests): builds are
idempotent, locked, atomic, and never pull an environment from under a process that uses it. Real builds of
the smallest verified-sdist environment (requests, seconds from PyPI) in a private cache, raced by real
processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from execcritic.config import PAPER
from execcritic.errors import EnvironmentMissing
from execcritic.sandbox.base import Limits
from execcritic.tasks.environment import environment_for
from execcritic.tasks.sdist import load_verified_sdist
from tests.paths import REPO, VERIFIED, needs_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_rows]

KEY = "requests-2.27.0-py3.9-e7e57a95"
BUILD = textwrap.dedent('''
    import dataclasses, json, sys, time
    from execcritic.tasks.sdist.build import build_env
    from execcritic.tasks.sdist.recipe import load_recipe
    env = load_recipe().envs[sys.argv[1]]
    if sys.argv[2] == "changed":      # another recipe for the same key: the env is rebuilt and swapped in
        env = dataclasses.replace(env, exclude_newer="2023-01-01T00:00:00Z")
    built, _ = build_env(env, progress=False)
    print(json.dumps({"reused": built.record["reused"], "built_at": built.record["built_at"], "t": time.time()}))
''')


def _build(cache: Path, variant: str = "recipe") -> subprocess.Popen:
    env = {**os.environ, "EXECCRITIC_CACHE": str(cache), "EXECCRITIC_VERIFIED": str(VERIFIED)}
    return subprocess.Popen([sys.executable, "-c", BUILD, KEY, variant], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECCRITIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EXECCRITIC_VERIFIED", str(VERIFIED))
    return tmp_path / "cache"


def _env_root(cache: Path) -> Path:
    return cache / "verified-sdist" / "envs" / KEY


def test_two_processes_racing_one_build_build_it_once(cache):
    a, b = _build(cache), _build(cache)
    results = [_result(a), _result(b)]
    assert sorted(r["reused"] for r in results) == [False, True]       # one built, the other waited and reused
    assert len({r["built_at"] for r in results}) == 1
    again = _result(_build(cache))
    assert again["reused"] is True                                     # idempotent: a third call changes nothing
    leftovers = [p.name for p in _env_root(cache).parent.iterdir() if ".staging-" in p.name or ".old-" in p.name]
    assert leftovers == []


def test_a_rebuild_waits_for_the_processes_using_the_environment(cache):
    _result(_build(cache))
    task = next(iter(load_verified_sdist(instance_ids=["psf__requests-6028"])))
    record = _env_root(cache) / "env.json"
    first = json.loads(record.read_text())
    box = environment_for(task).open_sandbox(limits=Limits.from_config(PAPER.harness))
    rebuild = _build(cache, "changed")
    time.sleep(20)                      # the rebuild is done building in its staging directory by now...
    assert rebuild.poll() is None       # ...and waits to swap: this sandbox still uses the environment
    seen = box.run("python -c 'import requests, sys; print(requests.__version__, sys.prefix)'", timeout=120)
    assert seen.exit_code == 0 and seen.output.startswith("2.27.0"), seen.output
    assert json.loads(record.read_text())["built_at"] == first["built_at"]
    closed_at = time.time()
    box.close()
    swapped = _result(rebuild)
    assert swapped["reused"] is False and swapped["t"] >= closed_at
    assert json.loads(record.read_text())["recipe_digest"] != first["recipe_digest"]
    with environment_for(task).open_sandbox(limits=Limits.from_config(PAPER.harness)) as again:
        assert again.run("python -c 'import requests'", timeout=120).exit_code == 0   # complete, at its path


def test_a_build_killed_midway_leaves_no_half_built_environment(cache):
    proc = _build(cache)
    staging = None
    deadline = time.time() + 300
    while time.time() < deadline and staging is None:             # kill it while it builds beside the env
        found = [p for p in _env_root(cache).parent.glob(f".{KEY}.staging-*")] if _env_root(cache).parent.is_dir() \
            else []
        staging = found[0] if found and (found[0] / "venv").is_dir() else None
        time.sleep(0.05)
    assert staging is not None, "the build never reached its staging directory"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (_env_root(cache) / "env.json").exists()            # users see no environment, not half of one
    task = next(iter(load_verified_sdist(instance_ids=["psf__requests-6028"])))
    with pytest.raises(EnvironmentMissing, match="not built"):
        environment_for(task).open_sandbox(limits=Limits())
    assert _result(_build(cache))["reused"] is False               # the next build cleans up and completes
    assert not list(_env_root(cache).parent.glob(f".{KEY}.staging-*"))
