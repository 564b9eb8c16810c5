"""`multilingual-git`: SWE-bench Multilingual's C and C++ tasks at their exact base commits, without images.

Each instance's Base is the row's own `base_commit` (and its submodules at the commits it records), fetched from a
git source the user names (`tasks/git/source.py`: an upstream URL or a local mirror); its environment is the
repository's toolchain from Debian packages (`toolchain.py`), and its checkout holds the Base's build, made by
the row's own eval_script build steps (`build.py`, `script.py`). Multilingual's `version` is the pull request's
number - every row its own - so an environment is per repository and what is per version (the build) lives in
the checkout. The committed recipe (`recipe.json`) lists the instances qualified by measurement (`execcritic
tasks qualify-ml`) with their toolchain versions. Each returned Task is the Multilingual row with its eval_script
less the clean steps (`dropped_steps` says which and why) and with the steps its toolchain runs otherwise
(`replaced_steps`), PASS_TO_PASS less the nodes the recipe records as
unable to run here, and `extra["multilingual_git"]` naming its environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from execcritic.errors import InputError
from execcritic.tasks.load import TaskSet, load_tasks, register_task_set
from execcritic.tasks.mlgit.script import build_steps, with_replaced_steps, without_clean_steps
from execcritic.tasks.mlgit.toolchain import TOOLCHAINS, NativeEnv
from execcritic.tasks.model import Task
from execcritic.tasks.sdist.recipe import (
    InstanceRecipe,
    Recipe,
    cached_recipe,
    instance_dicts,
    parse_instances,
    required,
)

NAME = "multilingual-git"
SCHEMA = 1
RECIPE_PATH = Path(__file__).with_name("recipe.json")
DATASET = "multilingual"                 # the hub alias; $EXECCRITIC_MULTILINGUAL points it at a local copy


def ml_task(task: Task, env: NativeEnv, inst: InstanceRecipe | None = None) -> Task:
    """The Multilingual row as a multilingual-git task on `env`; `inst` (its recipe entry, when qualified) removes
    the PASS_TO_PASS nodes that cannot run here and names the flaky ones."""
    excluded = dict(inst.p2p_excluded) if inst is not None else {}
    tc = TOOLCHAINS[task.repo]
    script, dropped = without_clean_steps(task.eval_script)
    script, replaced = with_replaced_steps(script, tc.replace_steps)
    extra = dict(task.extra or {})
    run_env = tc.run_env
    extra["multilingual_git"] = {"env": env.key, "language": env.language, "p2p_excluded": excluded,
                                 "dropped_steps": dropped, **({"replaced_steps": replaced} if replaced else {}),
                                 **({"procfs": tc.procfs} if tc.procfs else {}),
                                 "run_env": {k: v for k, (v, _) in run_env.items()},
                                 "run_env_why": {k: why for k, (_, why) in run_env.items()}}
    extra["build_steps"] = build_steps(script)          # run by `execute` after the patches (harness/execute.py)
    extra["flaky_nodes"] = sorted(inst.flaky_nodes) if inst is not None else []
    return dataclasses.replace(task, eval_script=script, extra=extra,
                               pass_to_pass=tuple(t for t in task.pass_to_pass if t not in excluded))


def multilingual_rows(dataset: str | None = None) -> TaskSet:
    """SWE-bench Multilingual's rows (the hub id, or $EXECCRITIC_MULTILINGUAL's local copy), the C/C++ ones
    and every other; the one row with an empty FAIL_TO_PASS is left out and listed in `skipped`."""
    return load_tasks(dataset or DATASET, on_error="skip")


def parse_recipe(data: Mapping[str, Any], *, path: str = "<recipe>") -> Recipe:
    if data.get("schema") != SCHEMA or data.get("task_set") != NAME:
        raise InputError(f"not a {NAME} recipe of schema {SCHEMA} (task_set={data.get('task_set')!r}, "
                         f"schema={data.get('schema')!r})", file=path, field="task_set")
    envs = {}
    for key, e in required(data, "envs", dict, file=path, where={}).items():
        where = {"instance": f"env:{key}"}
        repo = required(e, "repo", str, file=path, where=where)
        if repo not in TOOLCHAINS:
            raise InputError(f"{repo} has no toolchain in tasks/mlgit/toolchain.py", file=path, field="repo", **where)
        envs[key] = NativeEnv(key, repo, required(e, "language", str, file=path, where=where),
                              dict(required(e, "packages", dict, file=path, where=where)))
    instances = parse_instances(required(data, "instances", list, file=path, where={}), envs, path=path)
    return Recipe(path, dict(data.get("dataset") or {}), envs, instances, dict(data.get("notes") or {}),
                  task_set=NAME)


def load_recipe(path: str | Path | None = None) -> Recipe:
    return cached_recipe(Path(path) if path else RECIPE_PATH, parse_recipe,
                         "run `execcritic tasks qualify-ml` to create it")


def recipe_to_dict(envs: Mapping[str, NativeEnv], instances: list[InstanceRecipe], *, dataset: Mapping[str, Any],
                   notes: Mapping[str, Any]) -> dict[str, Any]:
    used = {i.env for i in instances}
    return {"schema": SCHEMA, "task_set": NAME, "dataset": dict(dataset), "notes": dict(notes),
            "envs": {k: e.to_dict() for k, e in sorted(envs.items()) if k in used},
            "instances": instance_dicts(instances)}


def qualified_languages(recipe_path: str | Path | None = None) -> set[str]:
    """Table 5's language names ("C", "C++") with at least one qualified row in the recipe (none without one)."""
    try:
        return {e.language for e in load_recipe(recipe_path).envs.values()}
    except InputError:
        return set()


def load_multilingual_git(split: str = "test", instance_ids: Sequence[str] | None = None, *,
                          dataset: str | None = None, recipe_path: str | None = None) -> TaskSet:
    """The recipe's qualified instances (all, or `instance_ids`), from the Multilingual rows."""
    recipe = load_recipe(recipe_path)
    rows = multilingual_rows(dataset)
    wanted = list(instance_ids) if instance_ids is not None else [i.instance_id for i in recipe.instances]
    tasks = []
    for iid in wanted:
        inst = recipe.instance(iid)
        try:
            task = rows.get(iid)
        except InputError as exc:
            raise InputError(f"the {NAME} recipe names {iid} but the Multilingual rows at {rows.source} do not have "
                             f"it; point $EXECCRITIC_MULTILINGUAL at SWE-bench Multilingual", file=recipe.path,
                             instance=iid) from exc
        tasks.append(ml_task(task, recipe.envs[inst.env], inst))
    return TaskSet(f"{NAME}:{rows.source}", split, tuple(tasks), rows.sha256)


register_task_set(NAME, load_multilingual_git)
