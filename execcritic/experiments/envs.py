"""The environments of the suite's own task sets (verified-sdist, verified-git, multilingual-git), built before a run needs them:
shared by the artifact runs (`core`), `reproduce` and the training adapter, which trains on such tasks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from execcritic.tasks.git import build as git_build
from execcritic.tasks.git import load_verified_git
from execcritic.tasks.mlgit import build as ml_build
from execcritic.tasks.mlgit import load_multilingual_git
from execcritic.tasks.sdist.build import build_env
from execcritic.tasks.sdist.recipe import load_recipe

SUITE_TASK_SETS = ("verified-sdist", "verified-git", "multilingual-git")   # task sets a preset may build


def ensure_envs(instance_ids: Sequence[str], *, dataset: str = "verified-sdist",
                log: Callable[[str], None] | None = None) -> dict[str, float]:
    """Build (or reuse, idempotently) the environments of a suite task set these instances run in (for
    verified-git: the (repository, version) envs and the instances' checkouts)."""
    if dataset == "verified-git":
        t0 = time.monotonic()
        made = git_build.ensure(load_verified_git(instance_ids=list(instance_ids)), log=log)
        return {key: round(time.monotonic() - t0, 1) for key in made["envs"]}
    if dataset == "multilingual-git":
        t0 = time.monotonic()
        made = ml_build.ensure(load_multilingual_git(instance_ids=list(instance_ids)), log=log)
        return {key: round(time.monotonic() - t0, 1) for key in made["envs"]}
    recipe = load_recipe()
    wanted = [i for i in recipe.instances if i.instance_id in set(instance_ids)]
    seconds = {}
    for key in sorted({i.env for i in wanted}):
        t0 = time.monotonic()
        build_env(recipe.envs[key], resolve=False, progress=False, log=log)
        seconds[key] = round(time.monotonic() - t0, 1)
    return seconds


__all__ = ["SUITE_TASK_SETS", "ensure_envs"]
