"""Run one paper artifact: plan its conditions, run the pipeline units they need, turn the pipeline's
records into the artifact's records, and write them through the results store.

Pipeline units live in one directory per run (`<results>/pipeline/suite-<run_id>/<benchmark>/`): one
generation store shared by every Repair agent (each revises against the same fixed bundle per issue and
Test source, as the paper's paired comparisons need), one directory per Repair model, an audit per Test
source. Units are keyed and append-only, so a killed run resumes where it stopped and artifacts that
share conditions (Table 2 and Figure 5b, Table 1 and Figure 6a) share the work. Denominators are the
paper's: every instance of the task set; a missing or invalid score counts as a failure and is reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from execcritic.agents.models.local_server import smollm2_gguf_path
from execcritic.errors import EnvironmentMissing, ExecCriticError
from execcritic.experiments import training
from execcritic.experiments.conditions import BUILTIN_SOURCES, ArtifactSpec, Planned, plan
from execcritic.experiments.envs import SUITE_TASK_SETS, ensure_envs
from execcritic.experiments.presets import Binding, role_reason, served_spec
from execcritic.experiments.resolved import Params
from execcritic.files import atomic_write
from execcritic.hashing import weights_sha256
from execcritic.pipeline import preflight, stages
from execcritic.pipeline.audit import AuditConfig, run_audit
from execcritic.pipeline.config import PipelineConfig, source_label
from execcritic.pipeline.models import is_served_locally, served_specs, split_endpoint
from execcritic.pipeline.records import RecordStore, unit_key
from execcritic.pipeline.stats import revision_turn_stats
from execcritic.pipeline.units import score_unit
from execcritic.pipeline.workers import Unit, run_units
from execcritic.results.fingerprint import owned
from execcritic.results.schemas import schema
from execcritic.results.store import Run, load_run, new_run
from execcritic.tasks import load_tasks
from execcritic.tasks.model import Task

#: set by `execcritic reproduce` for the notebooks it runs: it has already run (and retried) every pipeline
#: unit, so the notebook only turns the records into the artifact's and renders it
PREPARED_ENV = "EXECCRITIC_UNITS_PREPARED"
LANGUAGES = {"Python": "python", "Rust": "rust", "C++": "cpp", "C": "c", "Java": "java"}


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]


def _rel(path: Path) -> Path:
    """A path relative to the working directory when it lies under it (records stay portable)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


# ---- task sets ---------------------------------------------------------------------------------------

def load_set(dataset: str, params: Params, languages: Iterable[str] = ()) -> tuple[Any, list[Task]]:
    """The task set of a run: the preset's (or given) instances of `dataset`, the first `limit` of them;
    Multilingual rows filtered to `languages` (each language keeps its own first `limit`)."""
    on_error = "skip" if languages else "raise"
    ts = load_tasks(dataset, instance_ids=list(params.instances) if params.instances and not languages else None,
                    on_error=on_error)
    tasks = list(ts)
    if languages:
        keep = {LANGUAGES[lang] for lang in languages}
        by: dict[str, list[Task]] = {}
        for t in tasks:
            if t.language in keep:
                by.setdefault(t.language, []).append(t)
        tasks = [t for lang in sorted(by) for t in (by[lang][:params.limit] if params.limit else by[lang])]
    elif params.limit:
        tasks = tasks[:params.limit]
    return ts, tasks


# ---- pipeline work -----------------------------------------------------------------------------------

@dataclass
class Group:
    """The pipeline work of one task set (benchmark) in one run directory."""

    benchmark: str
    dataset: str
    taskset: Any
    tasks: list[Task]
    dir: Path
    b2g: set[str] = field(default_factory=set)                  # Test sources to audit on Base and Gold
    resolve: dict[str, set[str]] = field(default_factory=dict)  # Repair spec -> Test sources
    round0: bool = False

    @property
    def sources(self) -> list[str]:
        out = set(self.b2g)
        for s in self.resolve.values():
            out |= s
        return sorted(out)

    def repair_dir(self, spec: str) -> Path:
        return self.dir / f"repair-{_safe(spec)}"

    def audit_path(self, source: str) -> Path:
        return self.dir / "audit" / f"audit_{_safe(source_label(source))}.jsonl"


def _endpoints(specs: Iterable[str], served: dict[str, str]) -> tuple[tuple[str, str], ...]:
    out = []
    for s in sorted(set(specs)):
        if s in BUILTIN_SOURCES:
            continue
        target = served.get(s) or served_spec(s)
        if target != s:
            out.append((s, target))
    return tuple(out)


def _gen_cfg(g: Group, params: Params, endpoints) -> PipelineConfig:
    return PipelineConfig(out_dir=str(g.dir), test_sources=tuple(g.sources), repair_model="none",
                          backend=params.preset.backend, protocol=params.protocol, endpoints=endpoints)


def _repair_cfg(g: Group, spec: str, params: Params, endpoints) -> PipelineConfig:
    return PipelineConfig(out_dir=str(g.repair_dir(spec)), test_sources=tuple(sorted(g.resolve[spec])),
                          repair_model=spec, backend=params.preset.backend, protocol=params.protocol,
                          endpoints=endpoints, generation_dir=str(g.dir))


def _served_needed(groups: Sequence[Group], params: Params) -> list[str]:
    """The specs the suite serves itself (`local`, `hf:<checkpoint>`) that a unit still to run uses: only those
    are started."""
    out: list[str] = []
    for g in groups:
        gen = RecordStore(g.dir / "generation.jsonl")
        for spec in sorted(set(g.sources) | set(g.resolve)):
            if not is_served_locally(spec) or spec in out:
                continue
            if spec in g.sources and any(unit_key(t.instance_id, source_label(spec)) not in gen for t in g.tasks):
                out.append(spec)
            elif spec in g.resolve:
                done = RecordStore(g.repair_dir(spec) / "repair.jsonl")
                if any(unit_key(t.instance_id, source_label(s), f"run{k}") not in done
                       for s in g.resolve[spec] for t in g.tasks for k in range(params.runs)):
                    out.append(spec)
    return out


def _executor(params: Params) -> dict[str, Any]:
    """How the units run (`run_units`' keywords): threads here, or over the preset's Ray cluster, where each node
    makes (or checks) a unit's environment in its own cache first (the driver builds none)."""
    if params.preset.executor != "ray":
        return {}
    return {"backend": "ray", "ray_address": params.preset.ray_address,
            "prepare": preflight.NodeEnvironments(params.preset.backend)}


def nodes_build(params: Params) -> bool:
    """The run's environments are built by the Ray nodes that run its units, not here."""
    return params.preset.executor == "ray"


def _write_lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write(path, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))


def _audit(g: Group, source: str, params: Params, show_progress: bool) -> Any:
    """The offline Gold audit of one Test source's qualified bundles (Base again, then Gold)."""
    label = source_label(source)
    recs = [r for r in RecordStore(g.dir / "generation.jsonl").iter() if r["source"] == label]
    bundles = g.dir / "audit" / f"bundles_{_safe(label)}.jsonl"
    _write_lines(bundles, recs)
    qualified = {r["instance_id"] for r in recs if r.get("qualified")}
    cfg = AuditConfig(out=str(g.audit_path(source)), test_source=f"bundles:{bundles}",
                      backend=params.preset.backend, protocol=params.protocol)
    return run_audit([t for t in g.tasks if t.instance_id in qualified], cfg, workers=params.workers,
                     show_progress=show_progress, **_executor(params))


def _score_round0(g: Group, cfg: PipelineConfig, params: Params, show_progress: bool) -> Any:
    """A fresh official score of each Round-0 patch that differs from the terminal one (Tables 3, 6)."""
    by_id = {t.instance_id: t for t in g.tasks}
    store = RecordStore(Path(cfg.out_dir) / "score_round0.jsonl")
    units = []
    for r in RecordStore(cfg.paths["repair"]).iter():
        p0 = (r.get("round0") or {}).get("patch") or ""
        if r["instance_id"] in by_id and p0 != (r.get("final_patch") or ""):
            units.append(Unit(r["key"], (by_id[r["instance_id"]], r["key"], p0, cfg)))
    return run_units(units, score_unit, store=store, workers=params.workers, label="score Round 0",
                     count=lambda rec: {"resolved": rec.get("resolved", False)}, show_progress=show_progress,
                     **_executor(params))


@dataclass
class UnitCounts:
    """How many pipeline units ran, were already done (resume), or raised (left for a resume), and which."""

    ran: int = 0
    skipped: int = 0
    errors: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)   # RunSummary.failures of every stage
    stopped: list[str] = field(default_factory=list)
    nodes: dict[str, int] = field(default_factory=dict)             # Ray: units run per node

    def add(self, summary: Any) -> None:
        if summary is not None:
            self.ran += summary.done
            self.skipped += summary.skipped
            self.errors += summary.errors
            self.failures += summary.failures
            if summary.stopped:
                self.stopped.append(summary.stopped)
            for node, n in summary.nodes.items():
                self.nodes[node] = self.nodes.get(node, 0) + n

    def table(self, limit: int = 20) -> str:
        """The errored units, one line each (instance/source/run key, stage, first line of the error, where
        the full record is)."""
        rows = [f"  {f['key']}  [{f['stage']}]  {f['error']}  ({f['record']})" for f in self.failures[:limit]]
        if len(self.failures) > limit:
            rows.append(f"  ... and {len(self.failures) - limit} more (same files)")
        return "\n".join(rows + [f"  stopped: {why}" for why in self.stopped])

    def __str__(self) -> str:
        if not self.ran and not self.errors:
            return f"nothing left to run ({self.skipped} units already done)"
        return f"{self.ran} units run, {self.skipped} already done" + (f", {self.errors} failed" if self.errors else "")


class UnitsFailed(ExecCriticError):
    """Pipeline units of a notebook run raised: the run is left incomplete (its finished records are kept) and
    the notebook fails, naming them, so that papermill exits non-zero instead of rendering a partial table."""


def check_runnable(planned: Sequence[Planned], groups: dict[str, Group], params: Params, *, label: str = "") -> bool:
    """The command line's preflight, for a notebook run, before its first unit: every model endpoint the runnable
    conditions use answers and serves its model, and every task of their task sets can get a sandbox (the Docker
    engine and images for the Docker path, built environments for the image-free one). A condition that cannot
    run stops the run here with the reasons - or, with `skip_unrunnable`, is rendered `not run here: <reason>`
    (its real reason). Returns True when a condition was set aside (the caller rebuilds its groups)."""
    problems: dict[int, tuple[Planned, list[str]]] = {}      # id(planned) -> (planned, why it cannot run)
    probed: dict[str, str] = {}
    runnable = [p for p in planned if p.runnable]
    for p in runnable:
        for role, b in p.bindings.items():
            spec = b.spec
            if spec in BUILTIN_SOURCES or is_served_locally(spec) or split_endpoint(spec) is None:
                continue
            if spec not in probed:
                try:
                    preflight.probe_endpoint(served_spec(spec), flag=f"models.{role} ({spec})")
                    probed[spec] = ""
                except preflight.EndpointUnavailable as exc:
                    probed[spec] = str(exc)
            if probed[spec]:
                problems.setdefault(id(p), (p, []))[1].append(probed[spec])
    for key, g in groups.items():
        if any(p.cond.benchmark == key for p in runnable):
            try:
                if nodes_build(params):
                    preflight.ray_cluster(params.preset.ray_address)
                else:
                    preflight.prepare_environments(g.tasks, params.preset.backend)
            except EnvironmentMissing as exc:
                why = f"{g.dataset} ({params.preset.backend or 'the task set'}'s sandboxes): {exc}"
                for p in runnable:
                    if p.cond.benchmark == key:
                        problems.setdefault(id(p), (p, []))[1].append(why)
    if not problems:
        return False
    if not params.skip_unrunnable:
        shown = "; ".join(dict.fromkeys(why for _, whys in problems.values() for why in whys))
        labels = ", ".join(p.paper_label for p, _ in problems.values())
        raise EnvironmentMissing(f"{label or params.artifact}: {len(problems)} condition(s) cannot run here ({labels}): "
                                 f"{shown}. Nothing was run. Fix that, or pass skip_unrunnable=True to render them as "
                                 "`not run here` with this reason")
    for p, whys in problems.values():
        p.reason = "could not run when this run started: " + "; ".join(whys)
    return True


def run_groups(groups: Sequence[Group], params: Params, *, show_progress: bool = True,
               counts: UnitCounts | None = None) -> dict[str, float]:
    """Every pipeline unit the groups need (skipping finished ones); returns seconds per stage."""
    timings: dict[str, float] = {}
    counts = counts if counts is not None else UnitCounts()

    @contextmanager
    def timed(name: str) -> Iterator[None]:
        t0 = time.monotonic()
        yield
        timings[name] = round(timings.get(name, 0.0) + time.monotonic() - t0, 1)

    if not any(g.b2g or g.resolve for g in groups):
        return timings
    needed = _served_needed(groups, params)
    kw = {"workers": params.workers, "show_progress": show_progress, **_executor(params)}
    with served_specs(*needed) as served_list:
        served = dict(zip(needed, served_list))
        for g in groups:
            endpoints = _endpoints(set(g.sources) | set(g.resolve), served)
            with timed("generate-tests"):
                counts.add(stages.generate_tests(g.tasks, _gen_cfg(g, params, endpoints), **kw))
            for source in sorted(g.b2g):
                with timed("audit"):
                    counts.add(_audit(g, source, params, show_progress))
            for spec in sorted(g.resolve):
                cfg = _repair_cfg(g, spec, params, endpoints)
                with timed("repair"):
                    counts.add(stages.repair(g.tasks, cfg, **kw))
                with timed("score"):
                    counts.add(stages.score(g.tasks, cfg, **kw))
                if g.round0:
                    with timed("score Round 0"):
                        counts.add(_score_round0(g, cfg, params, show_progress))
    return timings


# ---- records -----------------------------------------------------------------------------------------

def _tasks_of(p: Planned, g: Group) -> list[Task]:
    if p.cond.language and p.cond.benchmark == "multilingual":
        return [t for t in g.tasks if t.language == LANGUAGES[p.cond.language]]
    return g.tasks


def b2g_records(p: Planned, g: Group) -> list[dict[str, Any]]:
    """One Base-to-Gold record per instance: no qualified bundle -> Q=0 (`no_bundle`), else the audit's
    B, G, Q with validity and failure kinds (an invalid run counts 0 and is kept as such)."""
    label = source_label(p.test_spec)
    gen = {r["key"]: r for r in RecordStore(g.dir / "generation.jsonl").iter()}
    audit = {r["instance_id"]: r for r in RecordStore(g.audit_path(p.test_spec)).iter()}
    out = []
    for t in _tasks_of(p, g):
        gr = gen.get(unit_key(t.instance_id, label))
        if gr is None:
            continue                                   # not generated: counted as missing
        rec = {"instance_id": t.instance_id, "run": 0, "model": p.test_spec, "qualified": bool(gr.get("qualified")),
               "attempts_used": gr.get("attempts_used"), "exit_status": gr.get("exit_status") or None,
               "repo": t.repo, **p.fields, **p.cond.record}
        a = audit.get(t.instance_id) if gr.get("qualified") else None
        if not gr.get("qualified") or (a is not None and a.get("miss") == "no_bundle"):
            rec.update(B=0, G=0, Q=0, base_valid=None, gold_valid=None, base_failure_kind=None,
                       gold_failure_kind=None, miss="no_bundle", qualified=bool(gr.get("qualified")))
        elif a is None:
            continue                                   # qualified but not audited yet: missing
        else:
            rec.update(B=int(a["B"]), G=int(a["G"]), Q=int(a["Q"]), base_valid=bool(a["base"]["valid"]),
                       gold_valid=bool(a["gold"]["valid"]), base_failure_kind=a["base"]["failure_kind"],
                       gold_failure_kind=a["gold"]["failure_kind"], miss=a["miss"],
                       bundle_digest=a.get("bundle_digest"))
        out.append(rec)
    return out


def resolve_records(p: Planned, g: Group, runs: int, cfg: PipelineConfig, *, round0_required: bool
                    ) -> list[dict[str, Any]]:
    """One record per instance x Repair run: the fresh official outcome of the terminal patch (a
    Base-gate failure's terminal patch is its Round-0 patch), the local gate status apart from it, and
    the Round-0 outcome (scored separately when revision changed the patch)."""
    label = source_label(p.test_spec)
    reps = {r["key"]: r for r in RecordStore(cfg.paths["repair"]).iter()}
    scores = {r["key"]: r for r in RecordStore(cfg.paths["score"]).iter()}
    r0 = {r["key"]: r for r in RecordStore(Path(cfg.out_dir) / "score_round0.jsonl").iter()}
    test_model = p.test_spec if p.test_spec not in BUILTIN_SOURCES else None
    out = []
    for t in _tasks_of(p, g):
        for k in range(runs):
            key = unit_key(t.instance_id, label, f"run{k}")
            rep, sc = reps.get(key), scores.get(key)
            if rep is None or sc is None:
                continue                               # not run or not scored: counted as missing
            valid = bool(sc.get("valid"))
            resolved = valid and bool(sc.get("resolved"))
            if ((rep.get("round0") or {}).get("patch") or "") == (rep.get("final_patch") or ""):
                r0_res, r0_valid = resolved, valid
            elif key in r0:
                r0_valid = bool(r0[key].get("valid"))
                r0_res = r0_valid and bool(r0[key].get("resolved"))
            else:
                r0_res = r0_valid = None
            if round0_required and r0_res is None:
                continue
            out.append({"instance_id": t.instance_id, "run": k, "repair_model": p.repair_spec, "test_model": test_model,
                        "resolved": resolved, "official_valid": valid, "local_status": rep.get("local_status") or "none",
                        "final_reason": rep.get("final_reason") or "", "qualified_bundle": bool(rep.get("qualified_bundle")),
                        "round0_resolved": r0_res, "round0_official_valid": r0_valid,
                        "entered_repair": bool(rep.get("entered_repair")), "revision_rounds": rep.get("revision_rounds"),
                        "revision_turns": rep.get("revision_turns"), "total_turns": rep.get("total_turns"),
                        "official_error": (sc.get("error") or None), "final_patch_sha": rep.get("final_patch_sha") or None,
                        "duration_s": rep.get("duration_s"), "repo": t.repo, **p.fields, **p.cond.record})
    return out


# ---- the artifact run --------------------------------------------------------------------------------

def _model_entry(b: Binding) -> dict[str, Any]:
    """A role's model as the manifest records it, with the identity of the weights the suite served itself
    (an endpoint's weights are the server's business: only its model name is known)."""
    served, weights = b.spec, None
    if b.spec == "local":
        served = "embedded CPU model behind a local `transformers serve` (started by the suite)"
        weights = weights_sha256(smollm2_gguf_path())        # the GGUF the checkpoint is converted from
    elif b.spec.startswith("hf:"):
        served = f"checkpoint {b.spec[3:]} behind a local `transformers serve` (started by the suite)"
        weights = weights_sha256(b.spec[3:])
    return {"spec": b.spec, "name": b.name, "stand_in": b.stand_in, "endpoint": served, "weights_sha256": weights}


def _conditions_table(planned: Sequence[Planned]) -> pd.DataFrame:
    rows = []
    for p in planned:
        label = " / ".join(str(v) for v in p.fields.values())
        status = "not run here" if not p.runnable else \
            ("stand-in" if label != p.paper_label else "run")
        rows.append({"paper_condition": p.paper_label, "recorded_as": label if p.runnable else "",
                     "status": status, "test_source": p.test_spec or "", "repair_model": p.repair_spec or "",
                     "dataset": p.dataset or "", "reason": p.reason})
    return pd.DataFrame(rows, columns=["paper_condition", "recorded_as", "status", "test_source", "repair_model",
                                       "dataset", "reason"])


def _not_run(planned: Sequence[Planned]) -> dict[str, str]:
    """Why each paper condition has no measured value in this run (for the rendered tables)."""
    out = {}
    for p in planned:
        if not p.runnable:
            out[p.paper_label] = p.reason
            continue
        stand = [b for b in p.bindings.values() if b.stand_in]
        if stand:
            why = "; ".join(dict.fromkeys(role_reason(b.role) for b in stand))
            label = " / ".join(str(v) for v in p.fields.values())
            out[p.paper_label] = f"{why}; measured here with a stand-in instead: row \"{label}\""
    return out


def command_line(artifact: str, params: Params) -> str:
    """How the run was made: the package call, and the command that ran the notebook when there was one."""
    args = ", ".join(f"{k}={v!r}" for k, v in params.given.items())
    call = f"execcritic.experiments.{artifact}.run(parameters({artifact!r}{', ' if args else ''}{args}))"
    by = os.environ.get("EXECCRITIC_INVOKED_BY")
    return f"{by} -> papermill notebook -> {call}" if by else call


def trained_roles(spec: ArtifactSpec, params: Params) -> list[str]:
    """The trained roles this run's selected conditions ask the training adapter for (a dry pass of `plan`)."""
    asked: list[str] = []
    plan(spec, params, checkpoint=lambda role: (asked.append(role), (None, "-"))[1])
    return list(dict.fromkeys(asked))


def plan_artifact(spec: ArtifactSpec, params: Params, trainer: training.Trainer | None = None) -> list[Planned]:
    """The artifact's conditions under `params`, trained roles asked of the training adapter (which, when the
    preset's engine runs here and the run asks for it, trains them or reuses their checkpoints)."""
    trainer = trainer or training.prepare(params, trained_roles(spec, params))
    return plan(spec, params, checkpoint=trainer.checkpoint)


def build_groups(spec: ArtifactSpec, params: Params, planned: Sequence[Planned], *,
                 timings: dict[str, float] | None = None, build_envs: bool = True) -> dict[str, Group]:
    """The pipeline work of the runnable conditions, one Group per benchmark (task set); builds the
    suite task set's environments (verified-sdist, verified-git) first when the preset asks for it."""
    runnable = [p for p in planned if p.runnable]
    root = _rel(params.pipeline_dir)
    groups: dict[str, Group] = {}
    for p in runnable:
        if p.cond.benchmark not in groups:
            langs = sorted({q.cond.language for q in runnable if q.cond.benchmark == "multilingual" == p.cond.benchmark
                            and q.cond.language})
            ts, tasks = load_set(p.dataset, params, langs)
            if build_envs and params.preset.build_envs and p.dataset in SUITE_TASK_SETS and tasks and \
                    (params.instances or langs) and not nodes_build(params):
                # the tasks this group runs: the preset's instances, or a language's rows (multilingual-git)
                t1 = time.monotonic()
                ensure_envs([t.instance_id for t in tasks], dataset=p.dataset)
                if timings is not None:
                    timings["environments"] = timings.get("environments", 0.0) + round(time.monotonic() - t1, 1)
            groups[p.cond.benchmark] = Group(p.cond.benchmark, p.dataset, ts, tasks, root / p.cond.benchmark,
                                             round0=spec.round0)
        g = groups[p.cond.benchmark]
        if spec.kind == "b2g":
            g.b2g.add(p.test_spec)
        else:
            g.resolve.setdefault(p.repair_spec, set()).add(p.test_spec)
    if not groups:                                       # nothing runnable: the denominator is still the task set
        ts, tasks = load_set(params.dataset, params) if params.dataset else (None, [])
        groups["verified"] = Group("verified", params.dataset or "", ts, tasks, root / "verified")
    return groups


def merge_groups(many: Iterable[dict[str, Group]]) -> list[Group]:
    """Several artifacts' groups of one run as one: their units are run once, shared."""
    out: dict[str, Group] = {}
    for groups in many:
        for key, g in groups.items():
            if key not in out:
                out[key] = Group(g.benchmark, g.dataset, g.taskset, list(g.tasks), g.dir, set(g.b2g),
                                 {k: set(v) for k, v in g.resolve.items()}, g.round0)
                continue
            m = out[key]
            m.b2g |= g.b2g
            for k, v in g.resolve.items():
                m.resolve.setdefault(k, set()).update(v)
            m.round0 = m.round0 or g.round0
            m.tasks += [t for t in g.tasks if t.instance_id not in {x.instance_id for x in m.tasks}]
    return list(out.values())


def execute(spec: ArtifactSpec, params: Params, *, show_progress: bool = True,
            extra_manifest: dict[str, Any] | None = None) -> Run:
    """Run (or continue) one artifact under `params` and return its finalized, schema-checked run."""
    if params.reuse:
        return load_run(spec.artifact, params.reuse, root=params.output_dir)
    t0 = time.monotonic()
    trainer = training.prepare(params, trained_roles(spec, params))
    planned = plan_artifact(spec, params, trainer)
    timings: dict[str, float] = {}
    groups = build_groups(spec, params, planned, timings=timings)
    prepared = os.environ.get(PREPARED_ENV) == "1"    # `execcritic reproduce` ran every unit before this notebook
    if not prepared and check_runnable(planned, groups, params):
        groups = build_groups(spec, params, planned, build_envs=False)
    runnable = [p for p in planned if p.runnable]
    instances = list(dict.fromkeys(t.instance_id for g in groups.values() for t in g.tasks))
    roles = {r: b for p in runnable for r, b in p.bindings.items()}
    runs = params.runs if spec.kind == "resolve" else 1
    extra = {"banner": f"{params.preset.banner} This run: {len(instances)} instance(s) x {runs} "
                       f"{'Repair run(s)' if spec.kind == 'resolve' else 'generation episode(s)'}.",
             "title": params.preset.title,
             "pipeline_dir": str(_rel(params.pipeline_dir)),
             "not_run": _not_run(planned), "parameters": {k: v for k, v in params.given.items()},
             "invoked_by": os.environ.get("EXECCRITIC_INVOKED_BY"), "benchmarks": {k: g.dataset for k, g in groups.items()},
             "training": trainer.manifest(), **(extra_manifest or {})}
    # one writer per run: a second notebook on the same run_id (or work_dir) is refused, naming the first
    with owned(params.output_dir / spec.artifact / params.run_id, option="run_id"), \
            (contextlib.nullcontext() if prepared else owned(params.pipeline_dir, option="work_dir")):
        writer = new_run(spec.artifact, params.preset.name, run_id=params.run_id, root=params.output_dir,
                         instances=instances, runs=runs,
                         models={r: _model_entry(b) for r, b in sorted(roles.items())},
                         command=command_line(spec.artifact, params), config=params.protocol,
                         datasets=[g.taskset.manifest() for g in groups.values() if g.taskset is not None],
                         seeds=list(params.seeds), extra=extra)
        writer.update_manifest(**extra)
        counts = UnitCounts()
        with writer:
            dens = {}
            for p in runnable:
                ids = [t.instance_id for t in _tasks_of(p, groups[p.cond.benchmark])]
                if ids != instances:
                    dens[schema(spec.artifact).condition_label(p.fields)] = ids
            if dens:
                writer.set_denominators(dens)
            if prepared:
                units = "run by `execcritic reproduce` before this notebook (one pass for every artifact)"
            else:
                timings.update(run_groups(list(groups.values()), params, show_progress=show_progress, counts=counts))
                units = str(counts)
            turns = []
            for p in runnable:
                g = groups[p.cond.benchmark]
                if spec.kind == "b2g":
                    writer.extend(b2g_records(p, g))
                else:
                    cfg = _repair_cfg(g, p.repair_spec, params, ())
                    writer.extend(resolve_records(p, g, params.runs, cfg, round0_required=spec.round0))
                    mine = {t.instance_id for t in _tasks_of(p, g)}      # the directory is shared with other runs
                    reps = [r for r in RecordStore(cfg.paths["repair"]).iter() if r["source"] == source_label(p.test_spec)
                            and r["instance_id"] in mine and int(r.get("run", 0)) < params.runs]
                    turns.append({"condition": " / ".join(str(v) for v in p.fields.values()), **revision_turn_stats(reps)})
            writer.write_table("conditions.csv", _conditions_table(planned))
            if turns:
                writer.write_table("revision_turns.csv", pd.DataFrame(turns))
            timings["total"] = round(time.monotonic() - t0, 1)
            writer.update_manifest(timings=timings, units=units,
                                   **({"executor": {"ray_address": params.preset.ray_address or "local",
                                                    "units_per_node": counts.nodes}} if nodes_build(params) else {}))
            if counts.errors or counts.stopped:
                raise UnitsFailed(f"{spec.artifact} run {params.run_id}: {counts.errors} pipeline unit(s) raised and left "
                                  f"no record; the run stays incomplete (its {counts.ran + counts.skipped} finished units "
                                  f"are kept). Run it again with run_id={params.run_id!r} to retry them:\n{counts.table()}")
            return writer.finalize(seed=params.seeds[0])


__all__ = ["PREPARED_ENV", "Group", "UnitCounts", "UnitsFailed", "b2g_records", "build_groups", "check_runnable",
           "command_line", "execute", "load_set", "merge_groups", "nodes_build", "plan_artifact", "resolve_records",
           "run_groups", "trained_roles"]
