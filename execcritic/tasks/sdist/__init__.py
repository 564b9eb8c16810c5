"""`verified-sdist`: real SWE-bench Verified tasks whose Base is a PyPI source distribution.

The committed recipe (`recipe.json`) names the qualified instances, the release each runs on, the
sdist sha256, the Base commit and the environment (interpreter, SWE-bench spec, lock). Rows come from
the Verified dataset: `$EXECCRITIC_VERIFIED` (a parquet/JSONL path or hub id), else the hub id
`SWE-bench/SWE-bench_Verified`. Each returned Task is the Verified row rebased onto the sdist Base:
`base_commit` is the sdist commit, PASS_TO_PASS omits the nodes the recipe records as unable to run
here (with reasons, in `extra`), and `extra["verified_sdist"]` says where its environment is.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from execcritic.errors import InputError
from execcritic.tasks.load import TaskSet, load_tasks, register_task_set
from execcritic.tasks.model import Task
from execcritic.tasks.sdist.recipe import load_recipe

NAME = "verified-sdist"
DEFAULT_DATASET = "SWE-bench/SWE-bench_Verified"
DATASET_ENV = "EXECCRITIC_VERIFIED"


def verified_source(dataset: str | None = None) -> str:
    return dataset or os.environ.get(DATASET_ENV) or DEFAULT_DATASET


def rebase_task(task: Task, recipe, inst) -> Task:
    """The Verified row as a verified-sdist task (see module docstring)."""
    env = recipe.envs[inst.env]
    excluded = dict(inst.p2p_excluded)
    p2p = tuple(t for t in task.pass_to_pass if t not in excluded)
    extra = dict(task.extra or {})
    extra["verified_sdist"] = {"env": env.key, "release": env.release.version, "project": env.release.project,
                               "base_commit": env.base_commit, "upstream_base_commit": task.base_commit,
                               "python": env.python, "p2p_excluded": excluded, "ffi": env.ffi}
    extra["flaky_nodes"] = sorted(inst.flaky_nodes)
    return dataclasses.replace(task, base_commit=env.base_commit, pass_to_pass=p2p, extra=extra,
                               eval_script=task.eval_script.replace(task.base_commit, env.base_commit))


def recipe_rows(recipe, name: str, instance_ids: Sequence[str] | None, dataset: str | None,
                split: str) -> tuple[TaskSet, list[tuple[object, Task]]]:
    """The Verified rows a suite recipe names (all its instances, or `instance_ids`), each with its instance
    recipe; a recipe instance the rows lack is an error naming the dataset to point at."""
    wanted = list(instance_ids) if instance_ids is not None else [i.instance_id for i in recipe.instances]
    rows = load_tasks(verified_source(dataset), split=split)
    out = []
    for iid in wanted:
        inst = recipe.instance(iid)
        try:
            out.append((inst, rows.get(iid)))
        except InputError as exc:
            raise InputError(f"the {name} recipe names {iid} but the Verified rows at {rows.source} "
                             f"do not have it; point ${DATASET_ENV} at SWE-bench Verified", file=recipe.path,
                             instance=iid) from exc
    return rows, out


def load_verified_sdist(split: str = "test", instance_ids: Sequence[str] | None = None, *,
                        dataset: str | None = None, recipe_path: str | None = None) -> TaskSet:
    recipe = load_recipe(recipe_path)
    rows, found = recipe_rows(recipe, NAME, instance_ids, dataset, split)
    tasks = []
    for inst, task in found:
        if task.repo != inst.repo:
            raise InputError(f"recipe says repo {inst.repo}, dataset row says {task.repo}", file=recipe.path,
                             instance=inst.instance_id, field="repo")
        tasks.append(rebase_task(task, recipe, inst))
    return TaskSet(f"{NAME}:{rows.source}", split, tuple(tasks), rows.sha256)


register_task_set(NAME, load_verified_sdist)
