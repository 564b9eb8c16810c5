"""What a command checks before its first unit of work starts, so that bad input costs seconds and one clear
line instead of a run of identical unit errors and a plausible 0.0%:

- every model spec parses (and a scripted factory imports);
- every model endpoint answers `GET /models` and lists the model the spec names (after the suite started the
  ones it serves itself);
- a `bundles:` Test source names a readable generation file;
- every selected task's environment is there or is built now: `verified-sdist` environments are built (locked
  and atomic, `tasks.sdist.build`), `verified-git` environments and instance checkouts too (`tasks.git.build`,
  from the git sources in $EXECCRITIC_GIT_SOURCES), a row's own prepared checkout must exist, and a Docker
  task's image must be present in a reachable engine.

On a Ray cluster the driver checks only that the cluster answers (`ray_cluster`): each node makes a unit's
environment in its own cache before running it (`NodeEnvironments`, the same `prepare_environments`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execcritic.errors import EnvironmentMissing, ExecCriticError, InputError, check_size
from execcritic.limits import MAX_BUNDLE_BYTES
from execcritic.pipeline.envs import task_environment
from execcritic.pipeline.models import split_endpoint, validate_spec
from execcritic.results.records import RecordStore
from execcritic.tasks.git import build as git_build
from execcritic.tasks.mlgit import build as ml_build
from execcritic.tasks.model import Task
from execcritic.tasks.sdist.build import build_env
from execcritic.tasks.sdist.recipe import load_recipe


class EndpointUnavailable(ExecCriticError):
    """A model endpoint did not answer, or does not serve the model its spec names."""


def check_specs(specs: Mapping[str, str | None]) -> None:
    """`{flag: spec}`: each spec parses (InputError naming the flag otherwise)."""
    for flag, spec in specs.items():
        if spec is not None:
            validate_spec(spec, field=flag)


def probe_endpoint(spec: str, *, flag: str = "model", timeout_s: float = 15.0) -> None:
    """`GET <base>/models` must answer (the SDK retries transient failures) and list the spec's model."""
    found = split_endpoint(spec)
    if found is None:
        return                                  # scripted: nothing to probe
    base, model, key_env = found
    import openai  # lazy: serve extra

    key = (os.environ.get(key_env) if key_env else None) or "EMPTY"
    client = openai.OpenAI(base_url=base, api_key=key, timeout=timeout_s, max_retries=2)
    try:
        served = [m.id for m in client.models.list()]
    except openai.AuthenticationError as exc:
        raise EndpointUnavailable(f"{flag}: {base} refused the API key (HTTP {exc.status_code}); set "
                                  f"${key_env or 'OPENAI_API_KEY'} or add ?key_env=VAR to the spec") from None
    except openai.APIStatusError as exc:
        raise EndpointUnavailable(f"{flag}: {base}/models answered HTTP {exc.status_code}; the base URL of an "
                                  "OpenAI-compatible server usually ends in /v1") from None
    except openai.APIError as exc:
        raise EndpointUnavailable(f"{flag}: no model server answers at {base} ({type(exc).__name__}: "
                                  f"{str(exc)[:200]}); start it, or fix the URL in the spec") from None
    if model not in served:
        listed = ", ".join(served[:8]) + (" ..." if len(served) > 8 else "")
        raise EndpointUnavailable(f"{flag}: {base} does not serve {model!r} (it serves: {listed or 'nothing'}); "
                                  "fix the name after '#' in the spec")


def probe_endpoints(specs: Mapping[str, str | None]) -> None:
    for flag, spec in specs.items():
        if spec is not None:
            probe_endpoint(spec, flag=flag)


def check_test_source(source: str) -> None:
    """`oracle`, `none`, a model spec, or `bundles:<generation.jsonl>` with a readable file of records."""
    if not source.startswith("bundles:"):
        return
    path = Path(source.split(":", 1)[1])
    if not path.is_file():
        raise InputError(f"--test-source {source}: no such generation file", file=str(path), field="--test-source")
    try:
        store = RecordStore(path)
        records = store.load()
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        raise InputError(f"--test-source {source}: not a generation record file ({exc})", file=str(path),
                         field="--test-source") from None
    for n, r in enumerate(records, 1):
        if r.get("bundle"):
            check_size(f"the bundle of record {n}", len(json.dumps(r["bundle"])), MAX_BUNDLE_BYTES, file=str(path),
                       field=f"line {n}")
    if not any(r.get("qualified") and r.get("bundle") for r in records):
        raise InputError(f"--test-source {source}: the file holds no qualified bundle ({len(records)} records)",
                         file=str(path), field="--test-source")


def prepare_environments(tasks: Sequence[Task], backend: str | None, *, log: Callable[[str], None] | None = None,
                         git_recipe: Any = None) -> dict[str, Any]:
    """Make sure every task can get a sandbox before any unit starts. Builds missing `verified-sdist`
    environments (and says which it reused); raises EnvironmentMissing naming the instances that cannot run
    here and why. `git_recipe`: the verified-git recipe whose environments the tasks name (default: the
    committed one)."""
    sdist_keys: dict[str, list[str]] = {}
    git_tasks: list[Task] = []
    ml_tasks: list[Task] = []
    missing: list[str] = []
    images: dict[str, list[str]] = {}
    local = False
    for task in tasks:
        try:
            env = task_environment(task, backend)
        except EnvironmentMissing as exc:
            missing.append(f"{task.instance_id}: {exc}")
            continue
        local |= env.kind == "local"
        if env.kind == "docker":
            images.setdefault(env.image, []).append(task.instance_id)
        elif env.meta.get("task_set") == "verified-git":
            git_tasks.append(task)
        elif env.meta.get("task_set") == "multilingual-git":
            ml_tasks.append(task)
        elif env.meta.get("env"):
            sdist_keys.setdefault(env.meta["env"], []).append(task.instance_id)
        elif env.checkout is None or not Path(env.checkout).is_dir():
            missing.append(f"{task.instance_id}: its prepared checkout {env.checkout} does not exist")
    if local and shutil.which("bwrap") is None:
        raise EnvironmentMissing("bubblewrap (`bwrap`) is not installed; the local sandbox needs it "
                                 "(`apt-get install bubblewrap`, or `make system-deps`)")
    _fail_if(missing)
    out: dict[str, Any] = {"built": [], "reused": [], "images": sorted(images)}
    if sdist_keys:
        recipe = load_recipe()
        for key in sorted(sdist_keys):
            built, _ = build_env(recipe.envs[key], resolve=False, progress=False, log=log)
            out["reused" if built.record.get("reused") else "built"].append(key)
    if git_tasks:
        made = git_build.ensure(git_tasks, recipe=git_recipe, log=log)
        out["built"] += made["built"]
        out["reused"] += [k for k in made["envs"] + made["checkouts"] if k not in made["built"]]
    if ml_tasks:
        made = ml_build.ensure(ml_tasks, log=log)
        out["built"] += made["built"]
        out["reused"] += [k for k in made["checkouts"] if k not in made["built"]]
    if images:
        _fail_if(_missing_images(images))
    return out


@dataclass(frozen=True)
class NodeEnvironments:
    """`run_units`' `prepare` on a Ray cluster: made on the driver, called on the node before each unit - the
    unit's task gets its environment there (`prepare_environments` on that node: its $EXECCRITIC_CACHE, its
    $EXECCRITIC_GIT_SOURCES; builds are locked and idempotent, so nodes sharing a cache build each env once).
    `git_recipe` travels with it (None: the committed recipe, which every node's copy of the code has)."""

    backend: str | None = None
    git_recipe: Any = None

    def __call__(self, payload: Any) -> None:
        task = next((p for p in payload if isinstance(p, Task)), None) if isinstance(payload, tuple) else None
        if task is None:
            return
        key = (os.environ.get("EXECCRITIC_CACHE", ""), task.instance_id, self.backend)
        if key not in _PREPARED_HERE:                # once per worker process; a miss later still fails loudly
            prepare_environments([task], self.backend, git_recipe=self.git_recipe)
            _PREPARED_HERE.add(key)


_PREPARED_HERE: set[tuple[str, str, str | None]] = set()


def ray_cluster(address: str | None) -> None:
    """The Ray cluster a run's units go to answers (a local one is started by the run when `address` is None);
    EnvironmentMissing saying what to do otherwise. Only a TCP connect to the head: nothing is joined here."""
    if importlib.util.find_spec("ray") is None:
        raise EnvironmentMissing("executor ray needs Ray: pip install -e '.[ray]'")
    if not address or address == "auto":
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=10):
            pass
    except (OSError, ValueError) as exc:
        raise EnvironmentMissing(f"the Ray cluster at {address} does not answer ({exc}); start its head "
                                 "(`ray start --head`) or set EXECCRITIC_RAY_ADDRESS to host:port of a running "
                                 "one (unset: a local cluster on this machine)") from None


def _fail_if(missing: list[str]) -> None:
    if missing:
        shown = "; ".join(missing[:5]) + (f"; and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise EnvironmentMissing(f"{len(missing)} selected task(s) cannot run here: {shown}")


def _missing_images(images: Mapping[str, Iterable[str]]) -> list[str]:
    import docker  # lazy: docker SDK
    from docker import errors  # lazy: docker SDK

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach an engine says the same thing
        raise EnvironmentMissing(f"the selected tasks run in Docker images, and no Docker engine answers ({exc}); "
                                 "start one or set DOCKER_HOST") from None
    missing = []
    for image, ids in images.items():
        try:
            client.images.get(image)
        except errors.ImageNotFound:
            missing.append(f"{', '.join(sorted(ids))}: image {image} is not present (`docker pull {image}`)")
    return missing
