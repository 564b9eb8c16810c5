"""Experiment presets (`experiments/presets/*.yaml`): which task set, which model plays each role of the
paper, which protocol profile, how many runs - so a notebook names one preset instead of twenty knobs.

A preset binds *roles* (the paper's agents: `test_base` = the untrained Qwen3.5-35B-A3B Test agent,
`repair_trained` = the trained Repair agent, `test_gpt56` = GPT-5.6-sol ...) to model specs. A binding
marked `stand_in: true` is another model playing that role (the CPU smoke model, a scripted policy);
its values are labeled "<paper label> [stand-in: <name>]" and never shown as the paper's condition. A
role left unbound, or whose `${ENV}` is unset, is "not run here: <reason>". A preset may `extend` another
(its keys replace the other's, key by key). Bad presets fail here with the file and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.config import ProtocolConfig, apply_overrides, load_protocol, read_yaml_mapping
from execcritic.errors import ExecCriticError, InputError
from execcritic.pipeline.models import validate_spec
from execcritic.results.reasons import REASONS

REPO = Path(__file__).resolve().parents[2]
PRESETS_DIR = REPO / "experiments" / "presets"

#: role -> (what the paper means by it, reason ids of results.reasons when it is not bound)
ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "test_base": ("untrained Qwen3.5-35B-A3B as Test agent (Base-35B)", ("gpu:qwen35b",)),
    "test_sft": ("Qwen3.5-35B-A3B after SFT on 5K DeepSeek-V4-Flash CoT trajectories", ("ckpt:trained",)),
    "test_rl": ("RL-35B: the SFT checkpoint after 200 GRPO steps", ("ckpt:trained",)),
    "test_sft_1k": ("SFT on 1K teacher trajectories (Figure 6a)", ("ckpt:trained",)),
    "test_sft_3k": ("SFT on 3K teacher trajectories (Figure 6a)", ("ckpt:trained",)),
    "test_sft_10k": ("SFT on 10K teacher trajectories (Figure 6a)", ("ckpt:trained",)),
    "test_sft_gpt56": ("SFT on GPT-5.6-sol trajectories without CoT (Table 4)", ("api:gpt56", "ckpt:trained")),
    "test_rl_gpt56": ("RL from the GPT-5.6-sol SFT checkpoint (Table 4)", ("api:gpt56", "ckpt:trained")),
    "test_codex53": ("Codex-5.3 as Test agent", ("api:codex53",)),
    "test_deepseek": ("DeepSeek-V4-Flash-0731 as Test agent (the SFT teacher)", ("api:deepseek",)),
    "test_gpt56": ("GPT-5.6-sol as Test agent", ("api:gpt56",)),
    "repair_base": ("untrained Qwen3.5-35B-A3B as Repair agent", ("gpu:qwen35b",)),
    "repair_trained": ("Repair agent trained with the full T2I objective and Oracle-test feedback", ("ckpt:trained",)),
    "repair_standard": ("Repair agent trained with the standard objective (no T2I)", ("train:gpu",)),
    "repair_t2i_no_bonus": ("Repair agent trained with T2I but no direct-solve bonus", ("train:gpu",)),
    "repair_generated_fb": ("Repair agent trained with generated-test feedback", ("train:gpu",)),
    "repair_gpt56": ("GPT-5.6-sol as Repair agent", ("api:gpt56",)),
}
#: roles whose model is a checkpoint the paper trains (the training adapter can produce them)
TRAINED_ROLES = frozenset({"test_sft", "test_rl", "test_sft_1k", "test_sft_3k", "test_sft_10k", "test_sft_gpt56",
                           "test_rl_gpt56", "repair_trained", "repair_standard", "repair_t2i_no_bonus",
                           "repair_generated_fb"})
TRAINING_ENGINES = ("verl", "cpu", "none")
BENCHMARKS = ("verified", "multilingual", "pro")
EXECUTORS = ("threads", "ray")          # where the pipeline units run (pipeline.workers)
_KEYS = {"name", "title", "banner", "protocol", "set", "dataset", "instances", "limit", "build_envs", "backend",
         "runs", "workers", "seeds", "benchmarks", "training", "train_on_cpu", "train_recipe", "models", "extends",
         "executor", "ray_address"}
_TRAIN_KEYS = {"model", "name", "profile", "set", "instances", "ray_address"}
_BINDING_KEYS = {"spec", "name", "stand_in", "requires_env"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Binding:
    """One role's model: `spec` (None when unbound, then `reason` says why), a display `name`, and
    whether it is a stand-in for the paper's model."""

    role: str
    spec: str | None
    name: str
    stand_in: bool = False
    reason: str = ""

    @property
    def bound(self) -> bool:
        return self.spec is not None


def served_spec(spec: str) -> str:
    """The spec a model client uses: a scripted policy given by a relative file path is found from the
    repository root (notebooks run from notebooks/, the CLI from anywhere); records keep `spec` itself."""
    if spec.startswith("scripted:"):
        _, module, factory = spec.split(":", 2)
        if (module.endswith(".py") or "/" in module) and not Path(module).is_absolute() \
                and not Path(module).is_file() and (REPO / module).is_file():
            return f"scripted:{REPO / module}:{factory}"
    return spec


def check_spec(spec: str, *, field: str, file: str | None = None) -> str:
    """validate_spec (pipeline.models) with the file that holds the spec in the error."""
    try:
        validate_spec(served_spec(spec), field=field)
    except InputError as exc:
        raise InputError(exc.message, file=file or exc.file, field=field) from None
    return spec


def role_reason(role: str) -> str:
    """The registry's words for why a role has no model here."""
    return "; ".join(REASONS[r] for r in ROLES[role][1])


@dataclass(frozen=True)
class TrainSetup:
    """How a preset trains a role (`train_recipe`): the base model (`tiny`, `smollm2` or a HF checkpoint
    directory) and its display name, the training protocol profile and its `set` overrides, the training
    instances (None: the run's own instances) and, for verl, the Ray cluster to join (None: a local one). `model`
    and `ray_address` may name `${VAR}`s; `unset` lists the variables that were not set (the run says so)."""

    model: str = "smollm2"
    name: str = "SmolLM2-135M-Instruct"
    profile: str = "cpu-train"
    set: Mapping[str, Any] = field(default_factory=dict)
    instances: tuple[str, ...] | None = None
    ray_address: str | None = None
    unset: tuple[str, ...] = ()

    def protocol(self, values: Mapping[str, Any] | None = None, *, where: str = "train_recipe") -> ProtocolConfig:
        """The training protocol: the profile, the preset's `set`, then `values` (a recipe's own knobs)."""
        try:
            return apply_overrides(load_protocol(self.profile), {**self.set, **(values or {})}, where=where)
        except ExecCriticError as exc:
            raise InputError(str(exc), field=where) from None


@dataclass(frozen=True)
class Preset:
    name: str
    path: Path
    title: str
    banner: str
    protocol_profile: str
    protocol_set: Mapping[str, Any]
    dataset: str | None
    instances: tuple[str, ...] | None
    limit: int | None
    build_envs: bool
    backend: str | None
    runs: int
    workers: int
    seeds: tuple[int, ...]
    benchmarks: Mapping[str, str | None]
    training: str
    models: Mapping[str, Binding] = field(default_factory=dict)
    train_on_cpu: bool = False            # CPU presets: train the artifact's roles without being asked (opt-in)
    train: TrainSetup = field(default_factory=TrainSetup)
    dataset_unset: tuple[str, ...] = ()   # the variables its `dataset: ${VAR}` names that are not set
    executor: str = "threads"             # 'ray': the units spread over a Ray cluster, each node making its own envs
    ray_address: str | None = None        # the cluster to join (None: a local one on this machine)

    def protocol(self, runs: int | None = None) -> ProtocolConfig:
        """The protocol this preset runs: its profile, its `set` overrides, and its number of runs."""
        try:
            cfg = load_protocol(self.protocol_profile)
            values = {**self.protocol_set, "repair.runs_per_source": runs or self.runs}
            return apply_overrides(cfg, values, where=f"{self.path}: set")
        except ExecCriticError as exc:
            raise InputError(str(exc), file=str(self.path), field="set") from None

    def binding(self, role: str) -> Binding:
        if role in self.models:
            return self.models[role]
        return Binding(role, None, role, reason=f"{role_reason(role)} (preset {self.name} binds no model to "
                                                f"role {role})")


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def preset_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    cand = PRESETS_DIR / f"{name_or_path}.yaml"
    if cand.is_file():
        return cand
    raise InputError(f"unknown preset {str(name_or_path)!r}; known: {', '.join(preset_names())} "
                     "(or a path to a preset YAML file)", file=str(PRESETS_DIR), field="preset")


def expand(text: str, env: Mapping[str, str] | None = None) -> tuple[str | None, list[str]]:
    """`${VAR}` and `${VAR:-default}` from the environment; (None, missing variables) when one is unset."""
    env = os.environ if env is None else env
    missing: list[str] = []

    def sub(m: re.Match) -> str:
        value = env.get(m.group(1))
        if value:
            return value
        if m.group(2) is not None:
            return m.group(2)
        missing.append(m.group(1))
        return ""

    out = _VAR.sub(sub, text)
    return (None if missing else out), missing


def _binding(role: str, raw: Any, path: Path, env: Mapping[str, str] | None) -> Binding:
    where = f"models.{role}"
    if role not in ROLES:
        raise InputError(f"unknown role {role!r}; known: {', '.join(ROLES)}", file=str(path), field=where)
    if isinstance(raw, str):
        raw = {"spec": raw}
    if not isinstance(raw, Mapping):
        raise InputError("a role binding is a spec string or {spec, name, stand_in, requires_env}", file=str(path),
                         field=where)
    unknown = set(raw) - _BINDING_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; known: {sorted(_BINDING_KEYS)}", file=str(path),
                         field=f"{where}.{min(unknown)}")
    if not isinstance(raw.get("spec"), str) or not raw["spec"].strip():
        raise InputError("spec must be a model spec string", file=str(path), field=f"{where}.spec")
    name = str(raw.get("name") or raw["spec"])
    stand_in = raw.get("stand_in", False)
    if not isinstance(stand_in, bool):
        raise InputError("stand_in must be true or false", file=str(path), field=f"{where}.stand_in")
    spec, missing = expand(raw["spec"], env)
    needs = raw.get("requires_env") or []
    if not isinstance(needs, list) or not all(isinstance(v, str) for v in needs):
        raise InputError("requires_env must be a list of variable names", file=str(path), field=f"{where}.requires_env")
    env_ = os.environ if env is None else env
    missing += [v for v in needs if not env_.get(v)]
    if missing:
        return Binding(role, None, name, stand_in, f"{role_reason(role)} (set {', '.join(sorted(set(missing)))} "
                                                    f"to run it; preset {path.stem})")
    check_spec(spec, file=str(path), field=f"{where}.spec")
    return Binding(role, spec, name, stand_in)


def _typed(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: Path, default: Any = None,
           optional: bool = False) -> Any:
    v = data.get(key, default)
    if v is None and optional:
        return None
    if isinstance(v, bool) and kind is int or not isinstance(v, kind):
        raise InputError(f"{key} must be {getattr(kind, '__name__', kind)}, got {v!r}", file=str(path), field=key)
    return v


def _train_setup(data: Mapping[str, Any], path: Path, env: Mapping[str, str] | None = None) -> TrainSetup:
    raw = dict(_typed(data, "train_recipe", dict, path, {}))
    unknown = set(raw) - _TRAIN_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; known: {sorted(_TRAIN_KEYS)}", file=str(path),
                         field=f"train_recipe.{min(unknown)}")
    for key in ("model", "name", "profile"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise InputError(f"{key} must be a non-empty string", file=str(path), field=f"train_recipe.{key}")
    unset: list[str] = []
    for key in ("model", "ray_address"):
        if isinstance(raw.get(key), str):
            value, missing = expand(raw[key], env)
            unset += missing
            raw[key] = value or None
    if raw.get("model") is None:
        raw.pop("model", None)
    settings = raw.get("set") or {}
    if not isinstance(settings, dict):
        raise InputError("set must map protocol knobs to values", file=str(path), field="train_recipe.set")
    instances = raw.get("instances")
    if instances is not None and (not isinstance(instances, list) or not instances
                                  or not all(isinstance(i, str) for i in instances)):
        raise InputError("instances must be a non-empty list of instance ids", file=str(path),
                         field="train_recipe.instances")
    setup = TrainSetup(**{k: raw[k] for k in ("model", "name", "profile") if k in raw}, set=dict(settings),
                       instances=tuple(instances) if instances else None, ray_address=raw.get("ray_address"),
                       unset=tuple(unset))
    try:
        setup.protocol()                                 # a bad profile or knob fails now, with the file
    except InputError as exc:
        raise InputError(exc.message, file=str(path), field="train_recipe.set") from None
    return setup


def _preset_data(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The preset file's keys over those of the preset it `extends` (recursively; a cycle is an error)."""
    data = read_yaml_mapping(path, "a preset is a YAML mapping")
    unknown = set(data) - _KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; known: {sorted(_KEYS)}", file=str(path),
                         field=min(unknown))
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str) or not base:
        raise InputError("extends must name a preset", file=str(path), field="extends")
    try:
        base_path = preset_path(base)
    except InputError as exc:
        raise InputError(exc.message, file=str(path), field="extends") from None
    if base_path.resolve() in seen or base_path.resolve() == path.resolve():
        raise InputError(f"extends {base!r} makes a cycle", file=str(path), field="extends")
    return {**_preset_data(base_path, (*seen, path.resolve())), **data}


def load_preset(name_or_path: str | Path, *, env: Mapping[str, str] | None = None) -> Preset:
    """Load and validate a preset; every error names the file and the field."""
    path = preset_path(name_or_path)
    data = _preset_data(path)
    name = _typed(data, "name", str, path)
    if name != path.stem:
        raise InputError(f"name {name!r} must equal the file's stem {path.stem!r}", file=str(path), field="name")
    runs = _typed(data, "runs", int, path, 1)
    workers = _typed(data, "workers", int, path, 1)
    for key, v, most in (("runs", runs, 1000), ("workers", workers, 1024)):
        if not 1 <= v <= most:
            raise InputError(f"{key} must be >= 1 and <= {most}, got {v}", file=str(path), field=key)
    seeds = _typed(data, "seeds", list, path, [0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds) or not seeds:
        raise InputError("seeds must be a non-empty list of integers", file=str(path), field="seeds")
    instances = _typed(data, "instances", list, path, optional=True)
    if instances is not None and (not instances or not all(isinstance(i, str) for i in instances)):
        raise InputError("instances must be a non-empty list of instance ids", file=str(path), field="instances")
    limit = _typed(data, "limit", int, path, optional=True)
    if limit is not None and limit < 1:
        raise InputError(f"limit must be >= 1 (or absent: every instance), got {limit}", file=str(path), field="limit")
    training = _typed(data, "training", str, path, "none")
    if training not in TRAINING_ENGINES:
        raise InputError(f"training must be one of {TRAINING_ENGINES}", file=str(path), field="training")
    bench = _typed(data, "benchmarks", dict, path, {})
    if set(bench) - set(BENCHMARKS):
        raise InputError(f"benchmarks keys must be among {BENCHMARKS}", file=str(path), field="benchmarks")
    benchmarks = {k: (expand(str(bench[k]), env)[0] if bench.get(k) else None) for k in BENCHMARKS}
    dataset, dataset_unset = data.get("dataset"), ()
    if dataset is not None:
        dataset, dataset_unset = expand(str(dataset), env)   # an unset ${VAR}: no default dataset (pass one)
    settings = _typed(data, "set", dict, path, {})
    models = _typed(data, "models", dict, path, {})
    executor = _typed(data, "executor", str, path, "threads")
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}", file=str(path), field="executor")
    ray_address = _typed(data, "ray_address", str, path, optional=True)
    if ray_address is not None:
        ray_address = expand(ray_address, env)[0] or None     # '${EXECCRITIC_RAY_ADDRESS:-}': a local cluster
        if executor != "ray":
            raise InputError("ray_address needs executor: ray", file=str(path), field="ray_address")
    preset = Preset(
        name=name, path=path, title=_typed(data, "title", str, path, name),
        banner=" ".join(_typed(data, "banner", str, path, "").split()),
        protocol_profile=_typed(data, "protocol", str, path, "paper"), protocol_set=dict(settings),
        dataset=dataset, dataset_unset=tuple(dataset_unset), instances=tuple(instances) if instances else None,
        limit=limit,
        build_envs=_typed(data, "build_envs", bool, path, False), backend=_typed(data, "backend", str, path, optional=True),
        runs=runs, workers=workers, seeds=tuple(seeds), benchmarks=benchmarks, training=training,
        models={role: _binding(role, raw, path, env) for role, raw in models.items()},
        train_on_cpu=_typed(data, "train_on_cpu", bool, path, False), train=_train_setup(data, path, env),
        executor=executor, ray_address=ray_address)
    if preset.train_on_cpu and training != "cpu":
        raise InputError(f"train_on_cpu needs training: cpu (this preset trains with {training})", file=str(path),
                         field="train_on_cpu")
    preset.protocol()                                   # a bad profile or override fails now, with the file
    return preset


__all__ = ["BENCHMARKS", "EXECUTORS", "PRESETS_DIR", "REPO", "ROLES", "TRAINED_ROLES", "Binding", "Preset", "TrainSetup", "check_spec",
           "expand", "load_preset", "preset_names", "preset_path", "role_reason", "served_spec"]
