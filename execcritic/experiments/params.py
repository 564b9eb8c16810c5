"""The notebooks' parameters, checked in one call before anything runs.

Every notebook has the same `parameters` cell (papermill overrides it); its next cell is
`params = experiments.parameters("<artifact>", preset=preset, ...)`, which resolves the preset and the
overrides and fails there - naming the field, and the file where there is one - on an unknown preset, an
unparsable model spec, a run id that is not in the results store, or any other bad value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from execcritic.errors import InputError
from execcritic.experiments.artifacts import SPECS
from execcritic.experiments.presets import ROLES, Binding, check_spec, load_preset
from execcritic.experiments.resolved import Params, new_run_id, with_run_id
from execcritic.results.schemas import PAPER_ARTIFACTS
from execcritic.results.store import DEFAULT_ROOT, latest_run

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")


def _int(name: str, v: Any, *, minimum: int = 1, maximum: int = 100_000) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
        raise InputError(f"{name} must be an integer >= {minimum} and <= {maximum}, got {v!r}", field=name)
    return v


def _path(name: str, v: Any) -> Path | None:
    """A directory parameter: a non-empty path (str or Path), or None."""
    if v is None:
        return None
    if not isinstance(v, (str, Path)) or not str(v).strip():
        raise InputError(f"{name} must be a directory path (a non-empty string), got {v!r}", field=name)
    return Path(v)


def _json(name: str, v: Any) -> Any:
    """A structured parameter given as JSON text (`papermill -p models '{"repair_base": "local"}'` passes a
    string: papermill's -p only types numbers and booleans) becomes the value it spells."""
    if isinstance(v, str) and v.strip()[:1] in ("{", "["):
        try:
            return json.loads(v)
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}: not valid JSON ({exc.msg} at column {exc.colno}): {v!r}", field=name) from None
    return v


def _strings(name: str, v: Any) -> tuple[str, ...] | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, Sequence) or not v or not all(isinstance(x, str) and x for x in v):
        raise InputError(f"{name} must be a non-empty list of strings (or None), got {v!r}", field=name)
    return tuple(v)


def parameters(artifact: str, *, preset: str = "smoke", dataset: str | None = None,
               instances: Sequence[str] | None = None, limit: int | None = None,
               models: Mapping[str, str] | None = None, test_sources: Sequence[str] | None = None,
               repair_agent: str | Sequence[str] | None = None, runs: int | None = None, workers: int | None = None,
               seeds: Sequence[int] | None = None, output_dir: str | Path | None = None, reuse: str | None = None,
               run_id: str | None = None, work_dir: str | Path | None = None, train: bool | None = None,
               allow_gpu_hours: float | None = None, skip_unrunnable: bool | None = None) -> Params:
    """Resolve and check a notebook's parameters (see the module docstring). `models` maps a role
    (execcritic.experiments.presets.ROLES) to a model spec and replaces the preset's binding; `test_sources`
    and `repair_agent` select conditions by their paper labels (None: all of the artifact's). `train`: on a CPU
    preset, train the trained roles the artifact uses (default: the preset's `train_on_cpu`, false in the shipped
    presets); `allow_gpu_hours`: on a verl preset, the GPU-hour estimate a training launch may reach (default 0:
    the notebook prints the estimate and launches nothing). `skip_unrunnable`: a condition whose model endpoint does
    not answer, or whose task set cannot get a sandbox here (no Docker engine, a missing image), is rendered
    `not run here: <that reason>` instead of stopping the run before its first unit (the default)."""
    models, instances, test_sources = _json("models", models), _json("instances", instances), \
        _json("test_sources", test_sources)
    repair_agent, seeds = _json("repair_agent", repair_agent), _json("seeds", seeds)
    passed = {"preset": preset, "dataset": dataset, "instances": instances, "limit": limit, "models": models,
              "test_sources": test_sources, "repair_agent": repair_agent, "runs": runs, "workers": workers,
              "seeds": seeds, "output_dir": output_dir, "reuse": reuse, "run_id": run_id, "work_dir": work_dir,
              "train": train, "allow_gpu_hours": allow_gpu_hours, "skip_unrunnable": skip_unrunnable}
    given = {k: (str(v) if isinstance(v, Path) else v) for k, v in passed.items() if v is not None}
    if artifact not in PAPER_ARTIFACTS:
        raise InputError(f"unknown artifact {artifact!r}; known: {', '.join(PAPER_ARTIFACTS)}", field="artifact")
    if not isinstance(preset, str) or not preset:
        raise InputError(f"preset must be a preset name or a YAML path, got {preset!r}", field="preset")
    pre = load_preset(preset)
    root = _path("output_dir", output_dir) or DEFAULT_ROOT
    work_dir = _path("work_dir", work_dir)
    spec = SPECS[artifact]

    if reuse is not None:
        if not isinstance(reuse, str) or not reuse:
            raise InputError(f"reuse must be a run id (or 'latest'), got {reuse!r}", field="reuse")
        wanted = reuse
        if reuse == "latest":
            reuse = latest_run(artifact, root=root)
            if reuse is None:
                raise InputError(f"reuse='latest': there is no complete {artifact} run under {root} "
                                 "(results/index.csv lists the runs)", file=str(root / "index.csv"), field="reuse")
        if not (root / artifact / reuse / "manifest.json").is_file():
            raise InputError(f"reuse={wanted!r}: there is no run {artifact}/{wanted} under {root} "
                             "(results/index.csv lists the runs)", file=str(root / artifact / wanted), field="reuse")

    bindings: dict[str, Binding] = {}
    if models is not None:
        if not isinstance(models, Mapping):
            raise InputError(f"models must map a role to a model spec, e.g. {{'repair_base': 'local'}}; got {models!r}",
                             field="models")
        for role, model in models.items():
            if role not in ROLES:
                raise InputError(f"models: unknown role {role!r}; known: {', '.join(ROLES)}", field=f"models.{role}")
            if not isinstance(model, str) or not model:
                raise InputError(f"models.{role} must be a model spec (a string such as 'local' or "
                                 f"'openai:<url>#<model>'), got {model!r}", field=f"models.{role}")
            check_spec(model, field=f"models.{role}")
            base = pre.binding(role)
            name = model
            if "#" in model:                  # openai:<url>#<model>
                name = model.split("#", 1)[1].split("?", 1)[0]
            elif model.startswith("hf:"):     # a trained checkpoint: runs/train/<run_id>/final
                name = "checkpoint " + "/".join(Path(model[3:]).parts[-2:])
            # a model named by the user for a role plays it as itself; under a stand-in preset it stays a stand-in
            stand_in = base.stand_in or pre.name != "paper"
            bindings[role] = Binding(role, model, name, stand_in)

    sources = _strings("test_sources", test_sources)
    agents = _strings("repair_agent", repair_agent)
    known_sources = spec.values("test")
    for s in sources or ():
        if s not in known_sources:
            raise InputError(f"test_sources: {artifact} has no Test source {s!r}; its sources: "
                             f"{', '.join(known_sources) or 'none (no Test-source conditions)'}", field="test_sources")
    known_agents = spec.values("repair")
    for a in agents or ():
        if a not in known_agents:
            raise InputError(f"repair_agent: {artifact} has no Repair agent {a!r}; its agents: "
                             f"{', '.join(known_agents) or 'none (no Repair conditions)'}", field="repair_agent")

    ids = _strings("instances", instances)
    lim = _int("limit", limit) if limit is not None else pre.limit
    n_runs = _int("runs", runs, maximum=1000) if runs is not None else pre.runs
    n_workers = _int("workers", workers, maximum=1024) if workers is not None else pre.workers
    if seeds is not None and (isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds
                              or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        raise InputError(f"seeds must be a non-empty list of integers, got {seeds!r}", field="seeds")
    if run_id is not None and (not isinstance(run_id, str) or not _RUN_ID.match(run_id)):
        raise InputError(f"run_id {run_id!r} must match {_RUN_ID.pattern}", field="run_id")
    if dataset is not None and (not isinstance(dataset, str) or not dataset):
        raise InputError(f"dataset must be a task-set name, a file or a hub id, got {dataset!r}", field="dataset")
    if train is not None and not isinstance(train, bool):
        raise InputError(f"train must be True or False (or None: the preset's train_on_cpu), got {train!r}",
                         field="train")
    if train and pre.training != "cpu":
        raise InputError(f"train=True trains on CPU; preset {pre.name} trains with {pre.training!r} "
                         "(a verl preset launches training when allow_gpu_hours covers its estimate)", field="train")
    if allow_gpu_hours is not None and (isinstance(allow_gpu_hours, bool) or not isinstance(allow_gpu_hours, (int, float))
                                        or not 0 <= allow_gpu_hours <= 1e9):
        raise InputError(f"allow_gpu_hours must be a number >= 0 and <= 1e9, got {allow_gpu_hours!r}",
                         field="allow_gpu_hours")
    if skip_unrunnable is not None and not isinstance(skip_unrunnable, bool):
        raise InputError(f"skip_unrunnable must be True or False, got {skip_unrunnable!r}", field="skip_unrunnable")
    ds = dataset or pre.dataset
    if ds is None and reuse is None:
        unset = ", ".join(f"${v}" for v in pre.dataset_unset) or "an environment variable"
        raise InputError(f"preset {pre.name} takes its dataset from {unset}, which is not set: set it (a dataset "
                         "file or hub id), or pass dataset=...", file=str(pre.path), field="dataset")
    return Params(artifact=artifact, preset=pre, dataset=ds, instances=ids if ids is not None else pre.instances,
                  limit=lim, models=bindings, test_sources=sources, repair_agents=agents, runs=n_runs,
                  workers=n_workers, seeds=tuple(seeds) if seeds is not None else pre.seeds, output_dir=root,
                  reuse=reuse, run_id=run_id or reuse or new_run_id(pre.name),
                  work_dir=work_dir, protocol=pre.protocol(n_runs), skip_unrunnable=bool(skip_unrunnable),
                  given=given, train=pre.train_on_cpu if train is None else train,
                  allow_gpu_hours=float(allow_gpu_hours or 0.0))


__all__ = ["Params", "new_run_id", "parameters", "with_run_id"]
