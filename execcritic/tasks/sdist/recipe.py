"""The committed `verified-sdist` recipe: which Verified instances, on which PyPI release, in which env.

Only the recipe is committed (instance ids, releases, sdist sha256, Base commit, interpreter, the
SWE-bench spec used, the resolved lock). Rows come from the Verified dataset and code from PyPI at build
time. Validation is strict: every error names the recipe file, the instance or env, and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from execcritic.errors import InputError
from execcritic.tasks.sdist.select import Release

RECIPE_PATH = Path(__file__).with_name("recipe.json")
SCHEMA = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class EnvRecipe:
    key: str                          # envs/<key>/ in the cache
    repo: str
    release: Release
    base_commit: str                  # git commit of the unpacked sdist (deterministic)
    python: str                       # "3.9": the interpreter SWE-bench's spec names
    spec: Mapping[str, Any]           # SWE-bench 4.1.0 spec for (repo, version), verbatim
    spec_version: str                 # the SWE-bench version key the spec came from
    exclude_newer: str                # uv --exclude-newer cutoff for what the spec does not pin
    requirements: tuple[str, ...]     # requirement lines read from the sdist (SWE-bench's reqs paths)
    lock: tuple[str, ...]             # pip freeze of the built venv, minus the project itself
    skipped: Mapping[str, str] = field(default_factory=dict)   # requirement/step -> why it was left out
    # non-empty: why this env's Gold run needs the real ctypes (measured); the sandbox then leaves the foreign-
    # function interface visible - a reduced guarantee (docs/failure_kinds.md). Not part of the build digest.
    ffi: str = ""

    @property
    def label(self) -> str:
        """What `tasks list` shows in its release column."""
        return self.release.version

    def digest_payload(self) -> dict[str, Any]:
        """What determines the built env: a change here means a rebuild."""
        return {"release": self.release.to_dict(), "base_commit": self.base_commit, "python": self.python,
                "spec": dict(self.spec), "exclude_newer": self.exclude_newer,
                "requirements": list(self.requirements), "lock": list(self.lock)}


@dataclass(frozen=True)
class InstanceRecipe:
    instance_id: str
    repo: str
    version: str                      # the SWE-bench version of the row
    env: str                          # EnvRecipe.key
    p2p_excluded: Mapping[str, str] = field(default_factory=dict)  # node -> why it cannot run here
    # bundle nodes whose verdict changed across repeated runs here (`execcritic audit --repeat N
    # --update-recipe`): node -> what was seen. A bound flaky node makes an execution `flaky_node`.
    flaky_nodes: Mapping[str, str] = field(default_factory=dict)
    # the git source the row's Base was fetched from when it was qualified (verified-git; empty: not recorded). A
    # commit hash names its content, so any source that serves the commit serves the same files
    source: str = ""


@dataclass(frozen=True)
class Recipe:
    path: str
    dataset: Mapping[str, Any]
    envs: Mapping[str, EnvRecipe]
    instances: tuple[InstanceRecipe, ...]
    notes: Mapping[str, Any] = field(default_factory=dict)
    task_set: str = "verified-sdist"

    def instance(self, instance_id: str) -> InstanceRecipe:
        for inst in self.instances:
            if inst.instance_id == instance_id:
                return inst
        raise InputError(f"instance is not in the {self.task_set} recipe", file=self.path, instance=instance_id)

    def env_for(self, instance_id: str) -> EnvRecipe:
        return self.envs[self.instance(instance_id).env]

    def listing(self) -> list[dict[str, str]]:
        """`tasks list`: one entry per qualified instance, no building."""
        return [{"instance_id": i.instance_id, "repo": i.repo, "release": self.envs[i.env].label,
                 "python": self.envs[i.env].python, "env": i.env} for i in self.instances]


def required(d: Mapping[str, Any], name: str, typ, *, file: str, where: dict) -> Any:
    if name not in d:
        raise InputError("required field is missing", file=file, field=name, **where)
    value = d[name]
    if not isinstance(value, typ):
        raise InputError(f"expected {typ.__name__ if isinstance(typ, type) else typ}, got {type(value).__name__}",
                         file=file, field=name, **where)
    return value


def env_interpreter_and_spec(key: str, e: Mapping[str, Any], *, path: str,
                             where: Mapping[str, str]) -> tuple[str, dict]:
    """An environment entry's interpreter version ('3.9') and SWE-bench spec (with install and test_cmd), checked
    (every suite recipe's environments have both)."""
    python = required(e, "python", str, file=path, where=where)
    if not re.match(r"^\d+\.\d+$", python):
        raise InputError(f"python must look like '3.9', got {python!r}", file=path, field="python", **where)
    spec = required(e, "spec", dict, file=path, where=where)
    for f in ("install", "test_cmd"):
        required(spec, f, str, file=path, where={"instance": f"env:{key} spec"})
    return python, spec


def parse_recipe(data: Mapping[str, Any], *, path: str = "<recipe>") -> Recipe:
    if data.get("schema") != SCHEMA:
        raise InputError(f"unsupported recipe schema {data.get('schema')!r}; expected {SCHEMA}", file=path,
                         field="schema")
    envs: dict[str, EnvRecipe] = {}
    for key, e in required(data, "envs", dict, file=path, where={}).items():
        where = {"instance": f"env:{key}"}
        rel = required(e, "release", dict, file=path, where=where)
        for f in ("project", "version", "upload_time", "filename", "url", "sha256"):
            required(rel, f, str, file=path, where=where)
        if not _SHA256.match(rel["sha256"]):
            raise InputError("release.sha256 must be 64 lowercase hex digits", file=path, field="release.sha256",
                             **where)
        base = required(e, "base_commit", str, file=path, where=where)
        if not _SHA1.match(base):
            raise InputError("base_commit must be a 40-hex git commit", file=path, field="base_commit", **where)
        python, spec = env_interpreter_and_spec(key, e, path=path, where=where)
        envs[key] = EnvRecipe(
            key=key, repo=required(e, "repo", str, file=path, where=where),
            release=Release(rel["project"], rel["version"], rel["upload_time"], rel["filename"], rel["url"],
                            rel["sha256"], int(rel.get("size") or 0)),
            base_commit=base, python=python, spec=spec,
            spec_version=required(e, "spec_version", str, file=path, where=where),
            exclude_newer=required(e, "exclude_newer", str, file=path, where=where),
            requirements=tuple(required(e, "requirements", list, file=path, where=where)),
            lock=tuple(required(e, "lock", list, file=path, where=where)),
            skipped=dict(e.get("skipped") or {}), ffi=str(e.get("ffi") or ""))
    instances = parse_instances(required(data, "instances", list, file=path, where={}), envs, path=path)
    return Recipe(path, dict(data.get("dataset") or {}), envs, instances, dict(data.get("notes") or {}))


def parse_instances(items: list, envs: Mapping[str, Any], *, path: str) -> tuple[InstanceRecipe, ...]:
    """The `instances` list of a recipe (every suite task set's recipe has one): each names a defined env."""
    instances = []
    seen: set[str] = set()
    for i in items:
        iid = required(i, "instance_id", str, file=path, where={})
        where = {"instance": iid}
        if iid in seen:
            raise InputError("duplicate instance in recipe", file=path, field="instance_id", **where)
        seen.add(iid)
        env = required(i, "env", str, file=path, where=where)
        if env not in envs:
            raise InputError(f"env {env!r} is not defined under 'envs'", file=path, field="env", **where)
        excluded = i.get("p2p_excluded") or {}
        if not isinstance(excluded, dict):
            raise InputError("p2p_excluded must map node -> reason", file=path, field="p2p_excluded", **where)
        flaky = i.get("flaky_nodes") or {}
        if not isinstance(flaky, dict):
            raise InputError("flaky_nodes must map node -> what was seen", file=path, field="flaky_nodes", **where)
        source = i.get("source") or ""
        if not isinstance(source, str):
            raise InputError("source must be the git source the Base was fetched from (a URL or a path)", file=path,
                             field="source", **where)
        instances.append(InstanceRecipe(iid, required(i, "repo", str, file=path, where=where),
                                        required(i, "version", str, file=path, where=where), env, dict(excluded),
                                        dict(flaky), source))
    return tuple(instances)


def instance_dicts(instances: list[InstanceRecipe]) -> list[dict[str, Any]]:
    """`parse_instances`'s input, sorted by instance id."""
    return [{"instance_id": i.instance_id, "repo": i.repo, "version": i.version, "env": i.env,
             **({"p2p_excluded": dict(i.p2p_excluded)} if i.p2p_excluded else {}),
             **({"flaky_nodes": dict(i.flaky_nodes)} if i.flaky_nodes else {}),
             **({"source": i.source} if i.source else {})}
            for i in sorted(instances, key=lambda x: x.instance_id)]


def load_recipe(path: str | Path | None = None) -> Recipe:
    """The committed recipe (default) or another recipe file."""
    return cached_recipe(Path(path) if path else RECIPE_PATH, parse_recipe,
                         "run `execcritic tasks build-sdist --reselect` to create it")


def cached_recipe(p: Path, parse, hint: str):
    """`parse(json, path=...)` of a recipe file, parsed again only when the file changed."""
    return _load_cached(str(p.resolve()), p.stat().st_mtime_ns if p.exists() else 0, parse, hint)


@lru_cache(maxsize=8)
def _load_cached(path: str, _mtime: int, parse, hint: str):
    p = Path(path)
    if not p.exists():
        raise InputError(f"recipe file not found; {hint}", file=path)
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"recipe is not valid JSON ({exc.msg} at line {exc.lineno})", file=path) from exc
    return parse(data, path=path)


def record_flaky_nodes(updates: Mapping[str, Mapping[str, str]], path: str | Path | None = None) -> Path:
    """Write measured flaky nodes into the recipe (instance -> {node: what was seen}); an empty mapping
    clears an instance's entry. Other fields are left as they are."""
    p = Path(path) if path else RECIPE_PATH
    data = json.loads(p.read_text())
    for inst in data.get("instances", []):
        if inst.get("instance_id") in updates:
            flaky = dict(updates[inst["instance_id"]])
            if flaky:
                inst["flaky_nodes"] = dict(sorted(flaky.items()))
            else:
                inst.pop("flaky_nodes", None)
    p.write_text(json.dumps(data, indent=1) + "\n")
    _load_cached.cache_clear()
    return p


def recipe_to_dict(recipe_envs: Mapping[str, EnvRecipe], instances: list[InstanceRecipe], *,
                   dataset: Mapping[str, Any], notes: Mapping[str, Any]) -> dict[str, Any]:
    envs = {}
    for key, e in sorted(recipe_envs.items()):
        envs[key] = {"repo": e.repo, "release": e.release.to_dict(), "base_commit": e.base_commit,
                     "python": e.python, "spec_version": e.spec_version, "spec": dict(e.spec),
                     "exclude_newer": e.exclude_newer, "requirements": list(e.requirements),
                     "lock": list(e.lock), "skipped": dict(e.skipped), **({"ffi": e.ffi} if e.ffi else {})}
    insts = instance_dicts(instances)
    return {"schema": SCHEMA, "task_set": "verified-sdist", "dataset": dict(dataset), "notes": dict(notes),
            "envs": envs, "instances": insts}
