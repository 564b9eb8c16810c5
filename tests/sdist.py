"""verified-sdist tasks for tests: real SWE-bench Verified rows with their environments built from the
committed recipe (cache-aware: a built env is reused; a fresh machine builds it from PyPI sdists)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.paths import VERIFIED, rows_missing


def sdist_requirements() -> str | None:
    """Why verified-sdist tasks cannot run here, or None."""
    if why := rows_missing():
        return why
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    return None


def load_sdist_tasks(instance_ids: list[str]) -> dict:
    """instance id -> Task, every needed env built first; skips the calling test when the shared rows or
    bubblewrap are missing."""
    why = sdist_requirements()
    if why:
        pytest.skip(why)
    os.environ["EXECCRITIC_VERIFIED"] = str(VERIFIED)
    from execcritic.tasks.sdist import load_verified_sdist
    from execcritic.tasks.sdist.build import build_env
    from execcritic.tasks.sdist.recipe import load_recipe

    recipe = load_recipe()
    for key in sorted({recipe.instance(i).env for i in instance_ids}):
        build_env(recipe.envs[key], resolve=False, progress=False)
    return {t.instance_id: t for t in load_verified_sdist(instance_ids=instance_ids)}


__all__ = ["load_sdist_tasks", "sdist_requirements"]
