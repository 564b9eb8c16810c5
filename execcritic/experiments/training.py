"""The training adapter: a notebook run whose preset has a training engine trains the trained roles its artifact
uses (Tables 3, 4, 6, the trained rows of Tables 1, 2, 5 and Figure 6), then serves and evaluates the checkpoint
in the same run. A role bound by the preset or by `models={role: "hf:<dir>"}` is never trained: the binding wins.

Each trained role has a recipe (`RECIPES`): SFT on teacher trajectories, Test RL from the SFT checkpoint it names,
Repair RL with one of Table 3's objectives or Table 6's feedback sources. A checkpoint is identified by its
recipe's fingerprint (`execcritic.training.registry`: data digest, init, every protocol knob, seed, engine and the
training code's digest): a rerun, or another artifact needing the same checkpoint, reuses it; a changed recipe
trains anew; a training killed part-way resumes from its last checkpoint.

Engines (the preset's `training`):
- `cpu` (smoke, ci): the CPU recipe of the learning-curve work (TRL, `execcritic.training.run.train`) at the
  preset's `train_recipe` size (base model, profile, instances). **Opt-in**: it runs only with the notebook
  parameter `train=True` (or a preset with `train_on_cpu: true`), so `make run` does not train. SFT data come from
  a scripted stand-in teacher (`execcritic.training.teachers`) through the real generation stage; Test RL's labeled
  candidate pools from `execcritic.training.candidates` (real official runs). Every trained row is labeled
  `[stand-in: <base> + <recipe>, trained on CPU]`.
- `verl` (paper): before anything starts, the run prints what it would train (roles, steps, GPUs, an estimated
  GPU-hours from `ASSUMED`, a documented extrapolation, not a measurement) and launches nothing unless the
  parameter `allow_gpu_hours` covers the estimate. Past the gate each role's recipe is launched with verl
  (`execcritic.training.verl_launch`) on the Ray cluster `train_recipe.ray_address` names (unset: a local one on
  this node), from the base model `train_recipe.model`; SFT data are the teacher role's trajectories (DeepSeek-
  V4-Flash, or GPT-5.6-sol for Table 4's row) through the real generation stage. verl's per-step lines stream
  into the notebook; `<output_dir>/training|sft/<run_id>/` holds its log and metrics. A cluster (or machine) with
  fewer GPUs than the recipe's layout, an unset base model, or an unbound teacher: the role says so.
- `none`: no training.

The training CLI (`execcritic train sft|test-rl|repair-rl`) stays the manual way to train a checkpoint outside a
notebook; bind it with `models={"test_sft": "hf:runs/train/<run_id>/final"}`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from importlib.metadata import version
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.config import PAPER, ProtocolConfig
from execcritic.errors import ExecCriticError, InputError
from execcritic.hashing import weights_sha256
from execcritic.experiments.envs import SUITE_TASK_SETS, ensure_envs
from execcritic.experiments.presets import REPO, Binding, served_spec
from execcritic.experiments.resolved import Params
from execcritic.results.reasons import REASONS
from execcritic.tasks import load_tasks
from execcritic.training.teachers import TEST_TEACHER
from execcritic.training.verl_launch import cluster_gpus, gpus_needed

ENTRY_MODULE = "execcritic.cli.train"
#: where the checkpoint registry and the training runs live (git-ignored); $EXECCRITIC_RUNS overrides
RUNS_ENV = "EXECCRITIC_RUNS"
CPU_LABEL = "trained on CPU"
VERL_LABEL = "trained here with verl"


@dataclass(frozen=True)
class Recipe:
    """How the paper trains one role. `init`: `base` (the preset's base model) or the role whose checkpoint it
    starts from; `sft_trajectories`: the paper's SFT data size; `objective`: the protocol knobs of a Repair
    objective (Table 3); `feedback`: the Repair agent's feedback source during training (Table 6): one Oracle F2P
    test, or the qualified tests of the trained Test role `feedback_tests` (the paper evaluates both Table 6 rows
    with RL-35B tests and does not say whose tests fed generated-test training: this is the suite's reading)."""

    kind: str                                   # sft | test-rl | repair-rl
    paper: str                                  # the paper's recipe, in words
    init: str = "base"
    sft_trajectories: int = 0
    reasoning_visible: bool = True
    objective: Mapping[str, Any] = field(default_factory=dict)
    objective_name: str = ""
    feedback: str = "oracle"                    # oracle | generated
    feedback_tests: str = "test_rl"             # generated: the trained Test role whose qualified tests give it
    teacher_role: str = "test_deepseek"         # sft with verl: the role whose trajectories are the SFT data

    @property
    def command(self) -> str:
        return f"train {self.kind} ({self.paper})"


#: Table 3's objectives as protocol knobs: standard training has no Test-to-Improve revision (the direct solve is
#: the whole episode, so a resolved patch earns 1.0); T2I without the direct-solve bonus pays Round-0 success as
#: revision success (1.0 instead of 1.5); full T2I is Eq. 6 as the paper states it.
STANDARD = {"repair.revision_rounds": 0, "repair_reward.resolved_at_round0": 1.0}
NO_BONUS = {"repair_reward.resolved_at_round0": 1.0}

RECIPES: dict[str, Recipe] = {
    "test_sft": Recipe("sft", "5K DeepSeek-V4-Flash CoT trajectories", sft_trajectories=5000),
    "test_sft_1k": Recipe("sft", "1K trajectories", sft_trajectories=1000),
    "test_sft_3k": Recipe("sft", "3K trajectories", sft_trajectories=3000),
    "test_sft_10k": Recipe("sft", "10K trajectories", sft_trajectories=10000),
    "test_sft_gpt56": Recipe("sft", "GPT-5.6-sol, no CoT", sft_trajectories=5000, reasoning_visible=False,
                             teacher_role="test_gpt56"),
    "test_rl": Recipe("test-rl", "from the 5K SFT checkpoint", init="test_sft"),
    "test_rl_gpt56": Recipe("test-rl", "from the GPT-5.6 SFT", init="test_sft_gpt56"),
    "repair_trained": Recipe("repair-rl", "full T2I, Oracle-test feedback", objective_name="full T2I"),
    "repair_standard": Recipe("repair-rl", "standard objective", objective=STANDARD, objective_name="standard"),
    "repair_t2i_no_bonus": Recipe("repair-rl", "T2I, no direct-solve bonus", objective=NO_BONUS,
                                  objective_name="T2I, no direct bonus"),
    "repair_generated_fb": Recipe("repair-rl", "generated-test feedback", feedback="generated",
                                  objective_name="generated-test feedback"),
}
#: Figure 6b/6c's GRPO curves: (agent, init) -> the recipe whose run draws it (a curve and a table row that need
#: the same run share its checkpoint: RL from SFT is Table 1's RL-35B recipe, Repair from base Table 2's)
CURVE_RECIPES: dict[tuple[str, str], str] = {("test", "base"): "test_rl_base", ("test", "sft"): "test_rl",
                                             ("repair", "base"): "repair_trained"}
RECIPES["test_rl_base"] = Recipe("test-rl", "from the base model (Figure 6b)")

# ---- cost before launch (verl) --------------------------------------------------------------------------

#: ASSUMPTIONS of the GPU-hour estimate (none measured: no GPU run of the paper's recipe exists here). An RL step's
#: wall time is taken as its longest rollout (the episode budget: Test 900 s, Repair ~1 h for Round 0 + 5 revision
#: rounds with official runs) plus the update; SFT as tokens / throughput. GPU-hours = wall hours x the GPUs of the
#: recipe's layout (Tables 7e, 8b: 8 GPUs x 1 node). An order of magnitude to decide on, not a forecast.
ASSUMED = {
    "test-rl": {"step_hours": 0.5, "why": "one step >= its longest Test episode (900 s) + update; 0.5 h"},
    "repair-rl": {"step_hours": 1.0, "why": "one step >= its longest Repair episode (Round 0 + 5 x 40-turn "
                                            "revisions with official runs) + update; 1 h"},
    "sft": {"tokens_per_trajectory": 24_000, "tokens_per_s_per_gpu": 1_500,
            "why": "24K tokens a trajectory (half the 48K context), 1,500 trained tokens/s per GPU"},
}


def estimate(role: str, recipe: Recipe, protocol: ProtocolConfig = PAPER) -> dict[str, Any]:
    """One recipe's launch at the paper's size: steps, GPUs and the GPU-hour estimate (`ASSUMED`)."""
    gpus = gpus_needed(recipe.kind)
    if recipe.kind == "sft":
        a = ASSUMED["sft"]
        n = recipe.sft_trajectories or protocol.sft.trajectories
        tokens = n * protocol.sft.epochs * a["tokens_per_trajectory"]
        steps = math.ceil(n * protocol.sft.epochs / max(1, protocol.sft.batch_size))
        hours = tokens / (a["tokens_per_s_per_gpu"] * gpus) / 3600 * gpus
    else:
        steps = protocol.test_rl.steps if recipe.kind == "test-rl" else protocol.repair_rl.steps
        hours = steps * ASSUMED[recipe.kind]["step_hours"] * gpus
    return {"role": role, "recipe": recipe.command, "steps": steps, "gpus": gpus, "gpu_hours": round(hours, 1),
            "assumption": ASSUMED[recipe.kind]["why"]}


def launch_plan(roles: Sequence[str]) -> list[dict[str, Any]]:
    """What a verl launch would train for `roles`, dependencies (the SFT a Test RL starts from) first, once each."""
    out: dict[str, dict[str, Any]] = {}

    def add(role: str) -> None:
        r = RECIPES[role]
        if r.init != "base":
            add(r.init)
        out.setdefault(role, estimate(role, r))

    for role in roles:
        if role in RECIPES:
            add(role)
    return list(out.values())


def plan_text(plan: Sequence[dict[str, Any]], allow: float) -> str:
    total = sum(p["gpu_hours"] for p in plan)
    lines = [f"Training this run needs (verl, estimated {total:,.0f} GPU-hours in all; allow_gpu_hours={allow:g}):"]
    lines += [f"  {p['role']}: execcritic {p['recipe']}, {p['steps']} steps on {p['gpus']} GPUs, ~{p['gpu_hours']:,.0f} "
              f"GPU-hours ({p['assumption']})" for p in plan]
    return "\n".join(lines)


# ---- engines ---------------------------------------------------------------------------------------------

def _needs(recipe: Recipe, why: str) -> str:
    return f"{why} (needs `execcritic {recipe.command}`)"


def runs_root() -> Path:
    return Path(os.environ.get(RUNS_ENV) or REPO / "runs").resolve()


class Trainer:
    """The trained roles of one notebook run: decides per engine, trains (or reuses) on CPU, and keeps what it
    did for the manifest (`done`). Built by `prepare`; `checkpoint(role)` is `conditions.plan`'s callback."""

    teacher = TEST_TEACHER          # the scripted stand-in teacher of every SFT recipe (named in every record)

    def __init__(self, params: Params, roles: Sequence[str], *, log: Callable[[str], None] = print,
                 root: Path | None = None):
        self.params, self.preset, self.log = params, params.preset, log
        self.root = root or runs_root()
        self.roles = [r for r in dict.fromkeys(roles) if r in RECIPES]
        self.memo: dict[str, tuple[Binding | None, str]] = {}
        self.done: dict[str, dict[str, Any]] = {}
        self.plan: list[dict[str, Any]] = []
        self.refused = ""
        self._tasks: tuple[Any, list[Any]] | None = None
        self._gpus: dict[str | None, int | str] = {}     # GPUs (or why unknown) by Ray address
        if self.preset.training == "verl" and self.roles:
            self.plan = launch_plan(self.roles)
            total = sum(p["gpu_hours"] for p in self.plan)
            log(plan_text(self.plan, params.allow_gpu_hours))
            if total > params.allow_gpu_hours:
                self.refused = (f"launch refused before it started: training needs ~{total:,.0f} GPU-hours (estimate) "
                                f"> allow_gpu_hours={params.allow_gpu_hours:g}; pass allow_gpu_hours={math.ceil(total)} "
                                "to launch")
                log(f"Not launched: {self.refused}.")
        elif self.preset.training == "cpu" and self.roles and params.train:
            log(f"Training on CPU (stand-ins, {self.preset.train.name} from preset {self.preset.name}): "
                + ", ".join(f"{r} ({RECIPES[r].command})" for r in self.roles))

    # -- the plan's callback
    def checkpoint(self, role: str) -> tuple[Binding | None, str]:
        if role not in self.memo:
            self.memo[role] = self._checkpoint(role)
        return self.memo[role]

    def _checkpoint(self, role: str) -> tuple[Binding | None, str]:
        recipe = RECIPES.get(role)
        if recipe is None:
            return None, f"role {role} is not produced by training"
        preset = self.preset
        if preset.training == "none":
            return None, _needs(recipe, f"preset {preset.name} runs no training")
        verl = preset.training == "verl"
        if verl:
            why = self.refused or self.verl_blocker(role)
            if why:
                return None, _needs(recipe, why)
        elif not self.params.train:
            return None, _needs(recipe, f"CPU training is opt-in (preset {preset.name}): pass train=True to train "
                                        "a stand-in here, or bind the role to a checkpoint with "
                                        "models={<role>: 'hf:<final_checkpoint>'}")
        try:
            entry = self.train(role)
        except ExecCriticError as exc:
            return None, _needs(recipe, f"{'verl' if verl else 'CPU'} training of {role} did not produce a "
                                        f"checkpoint: {exc}")
        spec = f"hf:{entry['final_checkpoint']}"
        return Binding(role, spec, f"{entry['title']}, {VERL_LABEL if verl else CPU_LABEL}", stand_in=not verl), ""

    def verl_blocker(self, role: str) -> str:
        """Why `role` (and the roles it starts from) cannot be launched with verl here, or ""."""
        setup, recipe = self.preset.train, RECIPES[role]
        if setup.unset:
            return (f"train_recipe of preset {self.preset.name} needs ${', $'.join(setup.unset)} (the base model's "
                    "Hugging Face directory)")
        address = None if recipe.kind == "sft" else setup.ray_address    # verl's SFT trainer runs on this node
        if address not in self._gpus:
            try:
                self._gpus[address] = cluster_gpus(address)
            except InputError as exc:
                self._gpus[address] = str(exc)
        gpus = self._gpus[address]
        if isinstance(gpus, str):
            return gpus
        need = gpus_needed(recipe.kind)
        if gpus < need:
            where = f"the Ray cluster at {address}" if address else "this machine"
            have = "no GPU" if not gpus else f"{gpus} GPU{'s' if gpus > 1 else ''}"
            return (f"{REASONS['train:gpu']} (preset {self.preset.name} trains with verl on {need} GPUs; {where} "
                    f"has {have})")
        if recipe.kind == "sft" and not self.params.binding(recipe.teacher_role).bound:
            return (f"the SFT teacher role {recipe.teacher_role} is not bound: "
                    f"{self.params.binding(recipe.teacher_role).reason}")
        return self.verl_blocker(recipe.init) if recipe.init != "base" else ""

    # -- CPU training
    def tasks(self) -> tuple[Any, list[Any]]:
        """The training task set: the preset's `train_recipe.instances`, else the run's instances (built first
        when the preset builds environments)."""
        if self._tasks is None:

            p = self.params
            ids = self.preset.train.instances or p.instances
            if self.preset.build_envs and p.dataset in SUITE_TASK_SETS and ids:
                ensure_envs(ids, dataset=p.dataset, log=self.log)
            ts = load_tasks(p.dataset, instance_ids=list(ids) if ids else None)
            tasks = list(ts)[:p.limit] if p.limit and not self.preset.train.instances else list(ts)
            if not tasks:
                raise InputError(f"no training instances in {p.dataset}", field="train_recipe.instances")
            self._tasks = (ts, tasks)
        return self._tasks

    def train(self, role: str) -> dict[str, Any]:
        """Train (or reuse) the checkpoint of `role` (a key of RECIPES) with the preset's engine (CPU: TRL; verl)
        and return its registry entry."""
        if role in self.done:
            return self.done[role]
        from execcritic.training.registry import Registry, code_digest  # lazy: light, but keep the layer lazy
        from execcritic.training.run import MODEL_ALIASES, TrainRun, model_dir  # lazy: torch/transformers/trl

        recipe, setup, p = RECIPES[role], self.preset.train, self.params
        verl = self.preset.training == "verl"
        ts, tasks = self.tasks()
        knobs = dict(recipe.objective)
        if recipe.init == "base":
            init_model, init_name = setup.model, setup.name
            if verl and not (Path(setup.model) / "config.json").is_file():
                raise InputError(f"train_recipe.model {setup.model!r} is not a Hugging Face model directory (no "
                                 "config.json)", file=str(self.preset.path), field="train_recipe.model")
            path = model_dir(setup.model)
            init = {"model": setup.model if setup.model in MODEL_ALIASES else str(path),
                    "weights_sha256": _weights(path)}
            init_label = "base"
        else:
            parent = self.train(recipe.init)
            init_model, init_name = parent["final_checkpoint"], parent["title"]
            init = {"checkpoint_of": parent["fingerprint"]}
            init_label = "sft"
        extra: dict[str, Any] = {}
        if recipe.kind == "sft":
            # CPU: the paper's data size scaled to the training instances; verl: the paper's
            n = recipe.sft_trajectories if verl else max(1, min(len(tasks), round(len(tasks) * recipe.sft_trajectories
                                                                                  / 10_000)))
            knobs["sft.trajectories"] = n
            protocol = setup.protocol(knobs, where=f"train_recipe (role {role})")
            teacher = self.params.binding(recipe.teacher_role) if verl else None
            data = (self._generation("teachers", str(teacher.spec), tasks, protocol) if teacher
                    else self.teacher_data(tasks, protocol))
            digest = _sha(data.read_bytes())
            extra = {"sft_data": [str(data)], "teacher": teacher.name if teacher else self.teacher}
            title = (f"{init_name} + SFT on {'up to ' if verl else ''}{n} "
                     f"{teacher.name if teacher else 'scripted-teacher'} trajector{'y' if n == 1 else 'ies'}"
                     + ("" if recipe.reasoning_visible else " (no reasoning)"))
        else:
            protocol = setup.protocol(knobs, where=f"train_recipe (role {role})")
            rows = _sha(json.dumps([t.to_row() for t in tasks], sort_keys=True, default=str).encode())
            digest = rows
            steps = protocol.test_rl.steps if recipe.kind == "test-rl" else protocol.repair_rl.steps
            if recipe.kind == "test-rl":
                cand = self.candidates(tasks, protocol)
                tasks = [t for t in tasks if t.instance_id in cand["eligible"]]
                if not tasks:
                    raise InputError("no training instance has a labeled candidate pool eligible for Test RL "
                                     f"(>= {protocol.test_rl.min_candidates} candidates)", file=cand["dir"],
                                     field="test_rl.min_candidates")
                digest = _sha((rows + cand["digest"] + ",".join(t.instance_id for t in tasks)).encode())
                extra = {"candidates": cand["dir"]}
            if recipe.feedback == "generated":
                fb = self.generated_feedback(recipe, tasks, protocol)
                tasks = [t for t in tasks if t.instance_id in fb["bundles"]]
                digest = _sha((rows + json.dumps(fb["bundles"], sort_keys=True)).encode())
                extra = {"feedback_from": [fb["path"]], "feedback_generator": fb["generator"]}
            what = "Test" if recipe.kind == "test-rl" else f"Repair, {recipe.objective_name}"
            title = f"{init_name} + {steps} GRPO step{'s' if steps != 1 else ''} ({what})"
        recipe_doc = {"kind": recipe.kind, "engine": _engine_versions(verl), "init": init, "data": digest,
                      "instances": [t.instance_id for t in tasks], "dataset": p.dataset,
                      "protocol": protocol.to_dict(), "reasoning_visible": recipe.reasoning_visible,
                      "teacher": extra.get("teacher"), "seed": p.seeds[0],
                      "official": "needed", "code": code_digest()}

        def run(run_id: str, runs_root: Path, resume: bool) -> dict[str, Any]:
            from execcritic.training.run import train  # lazy: torch/transformers/trl

            job = TrainRun(kind=recipe.kind, preset=self.preset.name, model=str(init_model), run_id=run_id,
                           protocol=protocol, tasks=tasks if recipe.kind != "sft" else [],
                           sft_data=extra.get("sft_data", []), candidates=extra.get("candidates"),
                           feedback_from=extra.get("feedback_from", []),
                           feedback_generator=extra.get("feedback_generator"),
                           reasoning_visible=recipe.reasoning_visible, teacher=extra.get("teacher"), agent="test",
                           workers=p.workers, seed=p.seeds[0], resume=resume, backend=self.preset.backend,
                           runs_root=runs_root, results_root=p.output_dir, official="needed",
                           label=f"{role}, {VERL_LABEL}" if verl else f"{role} stand-in, {CPU_LABEL}",
                           init=init_label, datasets=[ts.manifest()],
                           command=f"execcritic.experiments ({p.artifact}, preset {self.preset.name}): {recipe.command}")
            if verl:
                from execcritic.training.verl_launch import train_verl  # lazy: pandas, the results store

                return train_verl(job, task_set=p.dataset, ray_address=setup.ray_address, log=self.log)
            return train(job)

        entry = Registry(self.root).ensure(recipe_doc, run, describe={"title": title, "role": role,
                                                                     "paper_recipe": recipe.command},
                                           log=self.log)
        entry = {**entry, "title": title, "role": role}      # this run's words (a reused entry keeps its first)
        self.log(f"[{role}] {'reused' if entry['reused'] else 'trained'} checkpoint {entry['fingerprint']}: "
                 f"{entry['final_checkpoint']}")
        self.done[role] = entry
        return entry

    def teacher_data(self, tasks: Sequence[Any], protocol: ProtocolConfig) -> Path:
        """Teacher trajectories of the scripted stand-in teacher on `tasks`, through the real generation stage."""
        return self._generation("teachers", self.teacher, tasks, protocol)

    def generated_feedback(self, recipe: Recipe, tasks: Sequence[Any], protocol: ProtocolConfig) -> dict[str, Any]:
        """Table 6's generated-test feedback: the Test role `recipe.feedback_tests` - its bound model when the run
        binds one (the binding wins, as everywhere), else its trained (or reused) checkpoint - writes tests for
        `tasks` through the real generation stage and its Base gate; the qualified ones are the frozen feedback
        tests of Repair training (an instance without one is left out of it)."""
        from execcritic.pipeline.config import source_label  # lazy: the pipeline
        from execcritic.training.datasets import qualified_bundles, read_jsonl  # lazy: light

        bound = self.params.binding(recipe.feedback_tests)
        if bound.bound:
            spec, name = str(bound.spec), bound.name
        else:
            gen = self.train(recipe.feedback_tests)
            spec, name = f"hf:{gen['final_checkpoint']}", gen["title"]
        path = self._generation("generated-tests", spec, tasks, protocol)
        bundles = qualified_bundles(read_jsonl(path), generator=source_label(spec), source=str(path))
        if not bundles:
            raise InputError(f"no training instance got a qualified test from {recipe.feedback_tests} ({name}): "
                             "generated-test feedback has nothing to train on", file=str(path), field="qualified")
        return {"path": str(path), "generator": source_label(spec),
                "bundles": {iid: rec["bundle"].get("digest") for iid, rec in sorted(bundles.items())}}

    def _generation(self, kind: str, source: str, tasks: Sequence[Any], protocol: ProtocolConfig) -> Path:
        """generation.jsonl of Test source `source` on `tasks` (resumable; kept under the runs root by the source,
        tasks and protocol that made it). A checkpoint (`hf:`) is served for the run, as in evaluation."""
        from execcritic.pipeline import stages  # lazy: the pipeline
        from execcritic.pipeline.config import PipelineConfig  # lazy: the pipeline
        from execcritic.pipeline.models import served_specs  # lazy: the pipeline

        key = _sha(json.dumps([source, [t.instance_id for t in tasks], protocol.digest()]).encode())[:16]
        with served_specs(source) as (target,):
            target = target if target != source else served_spec(source)
            cfg = PipelineConfig(out_dir=str(self.root / kind / key), test_sources=(source,), protocol=protocol,
                                 backend=self.preset.backend, endpoints=((source, target),) if target != source else ())
            stages.generate_tests(list(tasks), cfg, workers=self.params.workers, show_progress=False)
        path = Path(cfg.paths["generation"])
        if not path.is_file():
            raise InputError(f"{source} wrote no Test trajectory", file=str(path), field="generation")
        return path

    def candidates(self, tasks: Sequence[Any], protocol: ProtocolConfig) -> dict[str, Any]:
        """Labeled candidate pools (Gold and its mutants, labeled by real official runs) for Test RL."""
        from execcritic.training.candidates import RECORDS, build_candidates, load_pools  # lazy: the pipeline

        key = _sha(json.dumps([[t.instance_id for t in tasks], protocol.digest()]).encode())[:16]
        out = self.root / "candidates" / key
        build_candidates(list(tasks), out, protocol=protocol, backend=self.preset.backend,
                         workers=self.params.workers, show_progress=False)
        pools = load_pools(out)
        eligible = [t.instance_id for t in tasks if t.instance_id in pools and pools[t.instance_id].eligible(protocol.test_rl)]
        return {"dir": str(out), "digest": _sha((out / RECORDS).read_bytes()), "eligible": eligible}

    def manifest(self) -> dict[str, Any]:
        """What this run trained or reused, or why not (the artifact's manifest `training`)."""
        out: dict[str, Any] = {"engine": self.preset.training, "train": self.params.train}
        if self.plan:
            out["launch_plan"] = self.plan
            out["allow_gpu_hours"] = self.params.allow_gpu_hours
            out["refused"] = self.refused or None
        out["checkpoints"] = {r: {k: e.get(k) for k in ("fingerprint", "title", "final_checkpoint", "results",
                                                        "reused", "run_id")} for r, e in self.done.items()}
        out["not_trained"] = {r: why for r, (b, why) in self.memo.items() if b is None}
        return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _engine_versions(verl: bool = False) -> dict[str, str]:
    """The engine and the library versions that decide what an optimizer step does (part of the fingerprint)."""
    if verl:
        return {"name": "verl", **{pkg: version(pkg) for pkg in ("verl", "transformers", "torch")}}
    return {"name": "trl-cpu", **{pkg: version(pkg) for pkg in ("trl", "transformers", "torch")}}


def _weights(path: Path) -> str:
    return weights_sha256(path)


def prepare(params: Params, roles: Sequence[str], **kw: Any) -> Trainer:
    return Trainer(params, roles, **kw)


def checkpoint(role: str, params: Params) -> tuple[Binding | None, str]:
    """The trained model for `role` in this run: (binding, "") or (None, why it is not run here)."""
    return Trainer(params, [role], log=lambda _: None).checkpoint(role)


def curve(role: str, init: str, params: Params, *, log: Callable[[str], None] = print
          ) -> tuple[dict[str, Any] | None, str]:
    """A GRPO curve of Figure 6b/6c in this run: (registry entry of the run that draws it, "") when the run trained
    or reused it (its per-step metrics are under `<output_dir>/training/<run_id>/`, where the figure reads them), else
    (None, why not)."""
    key = CURVE_RECIPES[(role, init)]
    trainer = prepare(params, [key], log=log)
    got, why = trainer.checkpoint(key)
    return (trainer.done[key], "") if got is not None else (None, why)


__all__ = ["ASSUMED", "CPU_LABEL", "CURVE_RECIPES", "ENTRY_MODULE", "RECIPES", "Recipe", "Trainer", "checkpoint",
           "curve", "estimate", "launch_plan", "plan_text", "prepare",
           "runs_root"]
