"""The official evaluator's Docker path: swebench's own `run_instance` with the row's unchanged
eval_script in the row's official `sweb.eval.*` image.

The official images cannot be pulled here (no registry), so the end-to-end check runs only where the
image for the instance is already present in the engine; elsewhere it skips and says why. The
fail-closed behaviour without an engine is checked everywhere (no mocks: a real unreachable socket).
"""

from __future__ import annotations


import pytest

from tests.allowed_skips import allowed
from tests.paths import VERIFIED, rows_missing

INSTANCE = "sympy__sympy-24443"


@pytest.fixture(scope="module")
def task():
    if why := rows_missing():
        pytest.skip(why)
    from execcritic.tasks import load_tasks

    return load_tasks(str(VERIFIED), instance_ids=[INSTANCE]).get(INSTANCE)


def test_no_engine_is_invalid_not_unresolved(task, tmp_path, monkeypatch):
    from execcritic.evaluation.official import evaluate_official
    from execcritic.tasks.environment import environment_for

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    env = environment_for(task, backend="docker")
    assert env.kind == "docker" and env.image == task.image
    res = evaluate_official(task, task.patch, env)
    assert not res.valid and not res.resolved
    assert "Docker" in res.error or "docker" in res.error


@pytest.mark.docker
@pytest.mark.slow
def test_official_image_gold_and_empty(task, private_dockerd, monkeypatch):
    """Needs the official image `task.image` in the suite's engine: only a registry provides it."""
    from docker import errors

    try:
        private_dockerd.client().images.get(task.image)
    except errors.ImageNotFound:
        pytest.skip(allowed("official-image", f"{task.image} is not in the engine (`docker pull` it where a "
                                              "registry is reachable)"))
    monkeypatch.setenv("DOCKER_HOST", private_dockerd.base_url)
    from execcritic.evaluation.official import evaluate_official
    from execcritic.tasks.environment import environment_for

    env = environment_for(task, backend="docker")
    gold = evaluate_official(task, task.patch, env)
    assert gold.valid and gold.resolved, gold.error
    empty = evaluate_official(task, "", env)
    assert not empty.resolved


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("project", ["toolz", "boltons"])
def test_swebench_harness_unchanged_on_a_local_image(project, demo_toolz, demo_boltons, docker_client,
                                                     private_dockerd, base_image, monkeypatch):
    """The Docker path end to end: swebench's own `run_instance` with the row's eval_script, unchanged,
    against a real daemon and an image laid out like `sweb.eval.*` (repository at /testbed) - built
    locally because the official ones cannot be pulled here. Gold -> resolved; empty -> unresolved
    (valid); a patch that does not apply -> invalid with swebench's apply diagnostic."""
    from execcritic.evaluation.official import evaluate_official
    from execcritic.sandbox.images import build_task_image
    from execcritic.tasks.environment import TaskEnvironment

    demo = demo_toolz if project == "toolz" else demo_boltons
    image = build_task_image(docker_client, demo.repo, f"execcritic/test-task:{project}-demo", base=base_image)
    monkeypatch.setenv("DOCKER_HOST", private_dockerd.base_url)  # swebench's cleanup shells out to `docker`
    env = TaskEnvironment(kind="docker", image=image, base_commit=demo.task.base_commit)
    gold = evaluate_official(demo.task, demo.task.patch, env)
    assert gold.valid and gold.resolved, gold.error
    assert set(gold.f2p_pass) == set(demo.task.fail_to_pass) and gold.backend == "docker"
    empty = evaluate_official(demo.task, "", env)
    assert empty.valid and not empty.resolved and set(empty.f2p_fail) == set(demo.task.fail_to_pass)
    bad = evaluate_official(demo.task, demo.task.patch.replace(demo.spec.buggy.strip(), "nothing here"), env)
    assert not bad.valid and not bad.resolved and not bad.patch_applied and "apply" in bad.error.lower()
