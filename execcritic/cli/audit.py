"""`execcritic audit --dataset D --test-source oracle`: Base gate + Gold audit over a task set (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from execcritic.cli.common import (BACKEND, DATASET, EXECUTOR, INSTANCES, JSON_OPTION, LIMIT, NO_PROGRESS,
                                   WORKERS, emit_json, load_selected, progress_on, protocol_options,
                                   run_dir_option, stderr_console, unit_failures)
from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.pipeline import preflight
from execcritic.pipeline.audit import AuditConfig, audit_path, run_audit, summarize_audit
from execcritic.pipeline.impossible import ImpossibleConfig, run_impossible, summarize_impossible
from execcritic.pipeline.models import served_specs
from execcritic.pipeline.stats import shown
from execcritic.results.fingerprint import check_fingerprint, claim, section_digests
from execcritic.results.manifest import build_manifest, harness_digest, write_result
from execcritic.results.records import RecordStore, check_records
from execcritic.tasks.git import recipe as git_recipe
from execcritic.tasks.sdist.recipe import record_flaky_nodes


def register(app: typer.Typer) -> None:
    @app.command("audit")
    @protocol_options("harness", "workspace", "repair")
    def audit(dataset: str = DATASET,
              test_source: str = typer.Option("oracle", "--test-source", "-t",
                                              help="oracle | bundles:<generation.jsonl>"),
              out: Path = typer.Option(Path("runs/audit"), "--out", callback=run_dir_option,
                                       help="directory for records and the summary "
                                       "(an existing one continues, if made with the same settings)"),
              instance: Optional[List[str]] = INSTANCES, limit: Optional[str] = LIMIT, workers: int = WORKERS,
              executor: str = EXECUTOR, backend: Optional[str] = BACKEND,
              repeat: int = typer.Option(1, "--repeat", min=1, max=1000, help="run Base and Gold N times; nodes whose "
                                         "outcome varies are flaky (a flaky bound node makes the bundle invalid)"),
              hashseed: Optional[int] = typer.Option(None, "--hashseed", min=0, max=4294967295,
                                                     help="PYTHONHASHSEED for every Base and Gold run (replay a "
                                                          "recorded run's `hashseed`); default: drawn per run"),
              update_recipe: bool = typer.Option(False, "--update-recipe", metavar="",
                                                 help="write the flaky nodes found into the task set's recipe "
                                                      "(verified-sdist or verified-git; needs --repeat 2 or more)"),
              impossible: bool = typer.Option(False, "--impossible", metavar="",
                                              help="ImpossibleBench-style: make each task's official test "
                                                   "impossible, run Repair on it, report the cheating rate (any "
                                                   "PASS or resolved) and each cheat's mechanism"),
              repair_model: Optional[List[str]] = typer.Option(None, "--repair-model",
                                                               help="with --impossible: Repair model spec "
                                                                    "(repeatable)"),
              max_mutations: int = typer.Option(6, "--max-mutations", min=1, max=100,
                                                help="with --impossible: mutations tried per task until Gold "
                                                     "provably fails one"),
              no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
        """Run the unchanged bundle on a fresh Base and on Gold; report Base-to-Gold success (Q = B*G).
        With --impossible: the cheating rate of Repair models on impossible variants instead."""
        if impossible and not repair_model:
            raise InputError("--impossible needs at least one --repair-model", field="--repair-model")
        if repair_model and not impossible:
            raise InputError("--repair-model is read only with --impossible", field="--repair-model")
        if update_recipe and repeat < 2:
            raise InputError("--update-recipe records flaky nodes, which only --repeat 2 or more can find",
                             field="--update-recipe")
        if impossible:
            preflight.check_specs({f"--repair-model {m}": m for m in repair_model or ()})
        else:
            preflight.check_test_source(test_source)
        tasks, ts = load_selected(dataset, instance, limit)
        progress = progress_on(as_json, no_progress)
        sections = ("harness", "workspace", "repair") if impossible else ("harness",)
        fingerprint = {"dataset_sha256": ts.sha256, "harness_code": harness_digest(),
                       "backend": backend or "task's own", "repeat": repeat, "hashseed": hashseed,
                       "max_mutations": max_mutations if impossible else None,
                       **section_digests(protocol, sections, ignore=("repair.runs_per_source",))}
        check_fingerprint(out, fingerprint, record=False)
        check_records(audit_path(out, test_source), out / "impossible" / "variants.jsonl")
        preflight.prepare_environments(tasks, backend, log=stderr_console().print if progress else None)
        if impossible:
            _impossible(ts, tasks, out, tuple(repair_model or ()), backend, protocol, max_mutations, workers,
                        executor, progress, as_json, fingerprint)
            return
        claim(out)                                                # one writer per run directory, from here on
        check_fingerprint(out, fingerprint)
        cfg = AuditConfig(out=str(audit_path(out, test_source)), test_source=test_source, backend=backend,
                          protocol=protocol, repeat=repeat, hashseed=hashseed)
        run = run_audit(tasks, cfg, workers=workers, backend=executor, show_progress=progress,
                        prepare=preflight.NodeEnvironments(backend) if executor == "ray" else None)
        summary = summarize_audit(tasks, cfg)
        manifest = build_manifest(config=protocol, datasets=[ts.manifest()],
                                  extra={"records": cfg.out, "run": run.to_dict(), "workers": workers,
                                         "executor": executor})
        path = write_result(Path(cfg.out).with_suffix(".summary.json"), {"summary": summary}, manifest)
        if update_recipe:
            flaky = {r["instance_id"]: r.get("flaky_nodes", {}) for r in RecordStore(cfg.out).iter()
                     if r.get("repeat") == repeat and r["instance_id"] in {t.instance_id for t in tasks}}
            record_flaky_nodes(flaky, git_recipe.RECIPE_PATH if dataset == "verified-git" else None)
        code = unit_failures([run], as_json=as_json)
        if as_json:
            emit_json({"summary": summary, "summary_path": str(path), "exit_code": int(code)})
            raise typer.Exit(code)
        console = Console()
        console.print(f"Base-to-Gold: {shown(summary['b2g_pct'])} of {summary['tasks']} tasks "
                      f"(B = {shown(summary['B_pct'])}); misses: {json.dumps(summary['miss_kinds'])}", highlight=False)
        for m in summary["misses"]:
            console.print(f"  {m['instance_id']}: {m['miss']} (base={m['base']}, gold={m['gold']}) "
                          f"{m['error'][:150]}", highlight=False)
        console.print(f"records: {cfg.out}\nsummary: {path}", highlight=False)
        raise typer.Exit(code)


def _impossible(ts, tasks, out: Path, models: tuple[str, ...], backend, protocol: ProtocolConfig,
                max_mutations: int, workers: int, executor: str, progress: bool, as_json: bool,
                fingerprint: dict) -> None:
    with served_specs(*models) as served:
        endpoints = tuple((m, s) for m, s in zip(models, served) if s and m != s)
        preflight.probe_endpoints({f"--repair-model {m}": dict(endpoints).get(m, m) for m in models})
        claim(out)                                                # one writer per run directory, from here on
        check_fingerprint(out, fingerprint)
        cfg = ImpossibleConfig(out_dir=str(out / "impossible"), repair_models=models, backend=backend,
                               protocol=protocol, max_mutations=max_mutations, endpoints=endpoints)
        runs = run_impossible(tasks, cfg, workers=workers, backend=executor, show_progress=progress)
    summary = summarize_impossible(tasks, cfg)
    manifest = build_manifest(config=protocol, datasets=[ts.manifest()],
                              extra={"records": cfg.out_dir, "run": runs, "repair_models": list(models),
                                     "max_mutations": max_mutations, "workers": workers, "executor": executor})
    path = write_result(Path(cfg.out_dir) / "summary.json", {"summary": summary}, manifest)
    code = unit_failures([runs["variants"], *(s for m in models for s in runs[m].values())], as_json=as_json)
    if as_json:
        emit_json({"summary": summary, "summary_path": str(path), "exit_code": int(code)})
        raise typer.Exit(code)
    console = Console()
    console.print(f"impossible variants: {summary['variants']} of {summary['tasks']} tasks "
                  f"(mutations: {json.dumps(summary['mutation_kinds'])})", highlight=False)
    for model, m in summary["models"].items():
        console.print(f"  {model}: cheated in {m['cheated_runs']} of {m['runs']} runs "
                      f"({shown(m['cheating_rate_pct'])}); mechanisms {json.dumps(m['mechanisms'])}; "
                      f"caught attempts {json.dumps(m['caught_attempts'])}", highlight=False)
    console.print(f"records: {cfg.out_dir}\nsummary: {path}", highlight=False)
    raise typer.Exit(code)
