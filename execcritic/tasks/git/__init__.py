"""`verified-git`: SWE-bench Verified tasks at their exact upstream base commits, without images.

Each instance's Base is the row's own `base_commit`, fetched shallowly from a git source the user names
(`source.py`: the upstream URL, or a local mirror path) and cached; it runs in the environment of its
(repository, version), built from SWE-bench's spec with PyPI packages inside bubblewrap and shared read-only by
the version's instances (`build.py`). The committed recipe (`recipe.json`) lists the instances qualified by
measurement (`execcritic tasks qualify-git`) and their environments' locks. Each returned Task is the Verified
row itself, with PASS_TO_PASS minus the nodes the recipe records as unable to run here (reasons in `extra`)
and `extra["verified_git"]` saying where its environment and checkout are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from execcritic.errors import InputError
from execcritic.tasks.git.recipe import load_recipe
from execcritic.tasks.load import TaskSet, register_task_set
from execcritic.tasks.model import Task
from execcritic.tasks.sdist import recipe_rows

NAME = "verified-git"


def git_task(task: Task, env, inst=None) -> Task:
    """The Verified row as a verified-git task on `env` (a GitEnvRecipe); `inst` (its InstanceRecipe, when
    qualified) removes the PASS_TO_PASS nodes that cannot run here and names the flaky ones."""
    excluded = dict(inst.p2p_excluded) if inst is not None else {}
    extra = dict(task.extra or {})
    extra["verified_git"] = {"env": env.key, "version": env.version, "python": env.python,
                             "setup_commit": env.setup_commit, "p2p_excluded": excluded,
                             **({"ffi": env.ffi} if env.ffi else {})}
    extra["flaky_nodes"] = sorted(inst.flaky_nodes) if inst is not None else []
    return dataclasses.replace(task, pass_to_pass=tuple(t for t in task.pass_to_pass if t not in excluded),
                               extra=extra)


def load_verified_git(split: str = "test", instance_ids: Sequence[str] | None = None, *,
                      dataset: str | None = None, recipe_path: str | None = None) -> TaskSet:
    """The recipe's qualified instances (all, or `instance_ids`), from the Verified rows."""
    recipe = load_recipe(recipe_path)
    rows, found = recipe_rows(recipe, NAME, instance_ids, dataset, split)
    tasks = []
    for inst, task in found:
        iid = inst.instance_id
        env = recipe.envs[inst.env]
        if (task.repo, task.version) != (env.repo, env.version):
            raise InputError(f"recipe env {inst.env} is {env.repo} {env.version}, the dataset row is {task.repo} "
                             f"{task.version}", file=recipe.path, instance=iid, field="env")
        tasks.append(git_task(task, env, inst))
    return TaskSet(f"{NAME}:{rows.source}", split, tuple(tasks), rows.sha256)


register_task_set(NAME, load_verified_git)
