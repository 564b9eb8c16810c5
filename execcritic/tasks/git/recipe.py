"""The committed `verified-git` recipe: which Verified instances qualified, and each (repository, version)
environment they share.

An environment is SWE-bench's spec for the (repository, version) (swebench 4.1.0's table, verbatim), the
commit its requirement files and install step were read at (the row's environment_setup_commit, or the
newest Base commit of that version when a source lacks it; `setup_note` says so), the project version
setuptools_scm is told, the date cutoff for what the spec leaves unpinned, and the resolved lock. Instances
carry the same fields as every suite recipe's (`sdist.recipe.InstanceRecipe`); their Base is the row's own
`base_commit`. Errors name the recipe file, the instance or env, and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.errors import InputError
from execcritic.tasks.sdist.recipe import (
    InstanceRecipe,
    Recipe,
    cached_recipe,
    env_interpreter_and_spec,
    instance_dicts,
    parse_instances,
    required,
)

RECIPE_PATH = Path(__file__).with_name("recipe.json")
SCHEMA = 1
TASK_SET = "verified-git"
_SHA1 = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class GitEnvRecipe:
    key: str                          # envs/<key>/ in the cache
    repo: str
    version: str                      # the SWE-bench version (the spec's key)
    python: str                       # "3.9": the interpreter SWE-bench's spec names
    spec: Mapping[str, Any]           # SWE-bench 4.1.0 spec for (repo, version), verbatim
    setup_commit: str                 # where the requirement files are read and the install step runs
    project_version: str              # SETUPTOOLS_SCM_PRETEND_VERSION for the install
    exclude_newer: str                # uv --exclude-newer cutoff for what the spec does not pin
    requirements: tuple[str, ...] = ()     # requirement lines read at setup_commit (SWE-bench's reqs paths)
    lock: tuple[str, ...] = ()             # pip freeze of the built venv, minus the project itself
    skipped: Mapping[str, str] = field(default_factory=dict)   # requirement/step -> why it was left out
    setup_note: str = ""              # why setup_commit is not the row's environment_setup_commit
    # local adaptations: shell steps run after the spec's pre_install (env and every checkout) -> why
    adaptations: Mapping[str, str] = field(default_factory=dict)
    # requirement -> which rows' Bases need it: what the Bases require and the setup commit does not (basereqs.py)
    base_requirements: Mapping[str, str] = field(default_factory=dict)
    # sources a build downloads from outside the package index, taken from a git source instead (plan.VENDORED):
    # path in the checkout -> {"repo", "commit", "prepare" (a shell step run in it), "why"}
    vendored: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # non-empty: why this env's tests need the real ctypes (plan.FFI); the sandbox then leaves the foreign-function
    # modules visible. A property of the runs, not of the build: not in the digest
    ffi: str = ""

    @property
    def label(self) -> str:
        return self.version

    @property
    def own_prefix(self) -> bool:
        """tox-current-env (`tox --current-env`, sphinx >= 3.4) starts tests through a symlink to the env's
        interpreter, which a venv does not survive: the env is built as a prefix of its own (`make_own_prefix`)."""
        return "--current-env" in str(self.spec.get("test_cmd", ""))

    def digest_payload(self) -> dict[str, Any]:
        """What determines the built env: a change here means a rebuild (and new instance checkouts)."""
        return {"repo": self.repo, "version": self.version, "python": self.python, "spec": dict(self.spec),
                "setup_commit": self.setup_commit, "project_version": self.project_version,
                "exclude_newer": self.exclude_newer, "requirements": list(self.requirements),
                "lock": list(self.lock), **({"adaptations": dict(self.adaptations)} if self.adaptations else {}),
                **({"base_requirements": sorted(self.base_requirements)} if self.base_requirements else {}),
                **({"own_prefix": True} if self.own_prefix else {}),
                **({"vendored": {k: dict(v) for k, v in self.vendored.items()}} if self.vendored else {})}

    def resolve_payload(self) -> dict[str, Any]:
        """What a resolving build starts from (the lock and the requirements are what it finds)."""
        payload = self.digest_payload()
        for k in ("requirements", "lock"):
            payload.pop(k)
        return payload

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "version": self.version, "python": self.python, "spec": dict(self.spec),
                "setup_commit": self.setup_commit, "project_version": self.project_version,
                "exclude_newer": self.exclude_newer, "requirements": list(self.requirements),
                "lock": list(self.lock), "skipped": dict(self.skipped),
                **({"setup_note": self.setup_note} if self.setup_note else {}),
                **({"adaptations": dict(self.adaptations)} if self.adaptations else {}),
                **({"base_requirements": dict(self.base_requirements)} if self.base_requirements else {}),
                **({"vendored": {k: dict(v) for k, v in self.vendored.items()}} if self.vendored else {}),
                **({"ffi": self.ffi} if self.ffi else {})}


def digest(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def env_key(repo: str, version: str, python: str, spec: Mapping[str, Any]) -> str:
    """`django-3.0-py3.6-<spec hash>`: one environment per (repository, version)."""
    h = hashlib.sha256(json.dumps(dict(spec), sort_keys=True).encode()).hexdigest()[:8]
    return f"{repo.split('/')[1].lower()}-{version}-py{python}-{h}"


def parse_env(key: str, e: Mapping[str, Any], *, path: str) -> GitEnvRecipe:
    where = {"instance": f"env:{key}"}
    setup = required(e, "setup_commit", str, file=path, where=where)
    if not _SHA1.match(setup):
        raise InputError("setup_commit must be a 40-hex git commit", file=path, field="setup_commit", **where)
    python, spec = env_interpreter_and_spec(key, e, path=path, where=where)
    return GitEnvRecipe(
        key=key, repo=required(e, "repo", str, file=path, where=where),
        version=required(e, "version", str, file=path, where=where), python=python, spec=spec, setup_commit=setup,
        project_version=required(e, "project_version", str, file=path, where=where),
        exclude_newer=required(e, "exclude_newer", str, file=path, where=where),
        requirements=tuple(required(e, "requirements", list, file=path, where=where)),
        lock=tuple(required(e, "lock", list, file=path, where=where)), skipped=dict(e.get("skipped") or {}),
        setup_note=str(e.get("setup_note") or ""), adaptations=dict(e.get("adaptations") or {}),
        base_requirements=dict(e.get("base_requirements") or {}), vendored=_vendored(e, path, where),
        ffi=str(e.get("ffi") or ""))


def _vendored(e: Mapping[str, Any], path: str, where: Mapping[str, str]) -> dict[str, dict[str, str]]:
    out = {}
    for rel, v in dict(e.get("vendored") or {}).items():
        if not isinstance(v, Mapping) or not all(isinstance(v.get(k), str) for k in ("repo", "commit", "prepare")):
            raise InputError(f"vendored[{rel!r}] must give repo, commit and prepare as strings", file=path,
                             field="vendored", **where)
        if not _SHA1.match(v["commit"]):
            raise InputError(f"vendored[{rel!r}].commit must be a 40-hex git commit", file=path, field="vendored",
                             **where)
        out[rel] = {k: str(x) for k, x in v.items()}
    return out


def parse_recipe(data: Mapping[str, Any], *, path: str = "<recipe>") -> Recipe:
    if data.get("schema") != SCHEMA:
        raise InputError(f"unsupported recipe schema {data.get('schema')!r}; expected {SCHEMA}", file=path,
                         field="schema")
    if data.get("task_set") != TASK_SET:
        raise InputError(f"not a {TASK_SET} recipe (task_set={data.get('task_set')!r})", file=path,
                         field="task_set")
    envs = {key: parse_env(key, e, path=path) for key, e in required(data, "envs", dict, file=path, where={}).items()}
    instances = parse_instances(required(data, "instances", list, file=path, where={}), envs, path=path)
    for inst in instances:
        env = envs[inst.env]
        if (inst.repo, inst.version) != (env.repo, env.version):
            raise InputError(f"instance is {inst.repo} {inst.version} but its env is {env.repo} {env.version}",
                             file=path, instance=inst.instance_id, field="env")
    return Recipe(path, dict(data.get("dataset") or {}), envs, instances, dict(data.get("notes") or {}),
                  task_set=TASK_SET)


def load_recipe(path: str | Path | None = None) -> Recipe:
    """The committed recipe (default) or another recipe file."""
    return cached_recipe(Path(path) if path else RECIPE_PATH, parse_recipe,
                         "run `execcritic tasks qualify-git` to create it")


def recipe_to_dict(envs: Mapping[str, GitEnvRecipe], instances: list[InstanceRecipe], *,
                   dataset: Mapping[str, Any], notes: Mapping[str, Any]) -> dict[str, Any]:
    used = {i.env for i in instances}
    return {"schema": SCHEMA, "task_set": TASK_SET, "dataset": dict(dataset), "notes": dict(notes),
            "envs": {k: e.to_dict() for k, e in sorted(envs.items()) if k in used},
            "instances": instance_dicts(instances)}
