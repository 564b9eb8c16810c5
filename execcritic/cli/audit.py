"""`execcritic audit DATASET --test-source oracle`: Base gate + Gold audit over a task set (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from execcritic.cli.common import JSON_OPTION, emit_json, guarded, protocol_options
from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.pipeline.audit import AuditConfig, audit_path, run_audit, summarize_audit
from execcritic.pipeline.impossible import ImpossibleConfig, run_impossible, summarize_impossible
from execcritic.pipeline.models import served_specs
from execcritic.results.records import RecordStore
from execcritic.tasks.sdist.recipe import record_flaky_nodes
from execcritic.results.manifest import build_manifest, write_result
from execcritic.tasks import load_tasks


def register(app: typer.Typer) -> None:
    @app.command("audit")
    @protocol_options
    def audit(dataset: str = typer.Argument("verified-sdist", help="task set"),
              test_source: str = typer.Option("oracle", help="oracle | bundles:<generation.jsonl>"),
              out: Path = typer.Option(Path("results/audit"), help="directory for records and the summary"),
              instance: Optional[List[str]] = typer.Option(None, help="instance id (repeatable)"),
              limit: Optional[int] = typer.Option(None),
              workers: int = typer.Option(1), executor: str = typer.Option("threads", help="threads | ray"),
              backend: Optional[str] = typer.Option(None, help="local | docker (default: the task's own)"),
              repeat: int = typer.Option(1, help="run Base and Gold N times; nodes whose outcome varies are "
                                                 "flaky (a flaky bound node makes the bundle invalid)"),
              hashseed: Optional[int] = typer.Option(None, help="PYTHONHASHSEED for every Base and Gold run "
                                                                 "(replay a recorded run's `hashseed`); default: "
                                                                 "drawn per run and recorded"),
              update_recipe: bool = typer.Option(False, help="write the flaky nodes found into the "
                                                             "verified-sdist recipe (with --repeat)"),
              impossible: bool = typer.Option(False, help="ImpossibleBench-style: make each task's official test "
                                                          "impossible, run Repair on it, report the cheating "
                                                          "rate (any PASS or resolved) and each cheat's mechanism"),
              repair_model: Optional[List[str]] = typer.Option(None, help="with --impossible: Repair model spec "
                                                                          "(repeatable)"),
              max_mutations: int = typer.Option(6, help="with --impossible: mutations tried per task until "
                                                        "Gold provably fails one"),
              no_progress: bool = typer.Option(False), as_json: bool = JSON_OPTION, *,
              protocol: ProtocolConfig) -> None:
        """Run the unchanged bundle on a fresh Base and on Gold; report Base-to-Gold success (Q = B*G).
        With --impossible: the cheating rate of Repair models on impossible variants instead."""
        with guarded(as_json):
            ts = load_tasks(dataset, instance_ids=instance or None)
            tasks = list(ts)[:limit] if limit else list(ts)
            if impossible:
                if not repair_model:
                    raise InputError("--impossible needs at least one --repair-model", field="repair_model")
                _impossible(ts, tasks, out, tuple(repair_model), backend, protocol, max_mutations, workers,
                            executor, not no_progress, as_json)
                return
            cfg = AuditConfig(out=str(audit_path(out, test_source)), test_source=test_source, backend=backend,
                              protocol=protocol, repeat=repeat, hashseed=hashseed)
            run = run_audit(tasks, cfg, workers=workers, backend=executor, show_progress=not no_progress)
            summary = summarize_audit(tasks, cfg)
            manifest = build_manifest(config=protocol, datasets=[ts.manifest()], extra={"records": cfg.out, "run": run.to_dict(),
                                                                       "workers": workers, "executor": executor})
            path = write_result(Path(cfg.out).with_suffix(".summary.json"), {"summary": summary}, manifest)
            if update_recipe and repeat > 1:
                flaky = {r["instance_id"]: r.get("flaky_nodes", {}) for r in RecordStore(cfg.out).iter()
                         if r.get("repeat") == repeat and r["instance_id"] in {t.instance_id for t in tasks}}
                record_flaky_nodes(flaky)
        if as_json:
            emit_json({"summary": summary, "summary_path": str(path)})
            return
        typer.echo(f"Base-to-Gold: {summary['b2g_pct']}% of {summary['tasks']} tasks "
                   f"(B = {summary['B_pct']}%); misses: {json.dumps(summary['miss_kinds'])}")
        for m in summary["misses"]:
            typer.echo(f"  {m['instance_id']}: {m['miss']} (base={m['base']}, gold={m['gold']}) {m['error'][:150]}")
        typer.echo(f"records: {cfg.out}\nsummary: {path}")


def _impossible(ts, tasks, out: Path, models: tuple[str, ...], backend, protocol: ProtocolConfig,
                max_mutations: int, workers: int, executor: str, progress: bool, as_json: bool) -> None:
    with served_specs(*models) as served:
        cfg = ImpossibleConfig(out_dir=str(out / "impossible"), repair_models=models, backend=backend,
                               protocol=protocol, max_mutations=max_mutations,
                               endpoints=tuple((m, s) for m, s in zip(models, served) if s and m != s))
        runs = run_impossible(tasks, cfg, workers=workers, backend=executor, show_progress=progress)
    summary = summarize_impossible(tasks, cfg)
    manifest = build_manifest(config=protocol, datasets=[ts.manifest()],
                              extra={"records": cfg.out_dir, "run": runs, "repair_models": list(models),
                                     "max_mutations": max_mutations, "workers": workers, "executor": executor})
    path = write_result(Path(cfg.out_dir) / "summary.json", {"summary": summary}, manifest)
    if as_json:
        emit_json({"summary": summary, "summary_path": str(path)})
        return
    typer.echo(f"impossible variants: {summary['variants']} of {summary['tasks']} tasks "
               f"(mutations: {json.dumps(summary['mutation_kinds'])})")
    for model, m in summary["models"].items():
        typer.echo(f"  {model}: cheated in {m['cheated_runs']} of {m['runs']} runs "
                   f"({m['cheating_rate_pct']}%); mechanisms {json.dumps(m['mechanisms'])}; "
                   f"caught attempts {json.dumps(m['caught_attempts'])}")
    typer.echo(f"records: {cfg.out_dir}\nsummary: {path}")
