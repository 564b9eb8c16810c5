"""`execcritic tasks ...`: inspect task sets."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from execcritic.cli.common import JSON_OPTION, emit_json, guarded, protocol_options
from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.evaluation.official import evaluate_official
from execcritic.evaluation.qualify import SUPPORTED_REPOS, run_pipeline
from execcritic.tasks import load_tasks
from execcritic.tasks.sdist import DATASET_ENV, load_verified_sdist, verified_source
from execcritic.tasks.sdist.build import build_env, cache_root
from execcritic.tasks.sdist.recipe import RECIPE_PATH, load_recipe
from execcritic.tasks.stats import task_stats

app = typer.Typer(no_args_is_help=True, help="Task sets: load, list and summarize SWE-bench-style rows.")


@app.command("stats")
def stats(dataset: str = typer.Argument(..., help="parquet/JSONL file, hub id, or alias (verified, ...)"),
          split: str = typer.Option("test", help="split for hub datasets"),
          skip_bad_rows: bool = typer.Option(False, help="leave out (and list) rows that fail validation"),
          as_json: bool = JSON_OPTION) -> None:
    """Per-repo counts and FAIL_TO_PASS statistics."""
    with guarded(as_json):
        s = task_stats(load_tasks(dataset, split=split, on_error="skip" if skip_bad_rows else "raise"))
    if as_json:
        emit_json(s)
        return
    console = Console()
    table = Table(title=f"{s['dataset']['source']}  ({s['tasks']} tasks, {s['repos']} repos)")
    for col in ("repo", "tasks", "F2P median", "F2P mean"):
        table.add_column(col, justify="right" if col != "repo" else "left")
    for repo, r in s["per_repo"].items():
        table.add_row(repo, str(r["tasks"]), str(r["f2p"]["median"]), f"{r['f2p']['mean']:.2f}")
    console.print(table)
    f = s["fail_to_pass"]
    console.print(f"FAIL_TO_PASS per instance: median {f['median']}, mean {f['mean']:.2f}, "
                  f"min {f['min']}, max {f['max']}")
    console.print(f"dataset sha256 {s['dataset']['sha256']}")


@app.command("list")
def list_tasks(task_set: str = typer.Argument("verified-sdist", help="a suite task set (verified-sdist)"),
               recipe: str = typer.Option(None, help="another recipe file (default: the committed one)"),
               as_json: bool = JSON_OPTION) -> None:
    """The qualified instances of a suite task set, from its committed recipe (builds nothing)."""

    with guarded(as_json):
        if task_set != "verified-sdist":
            raise InputError(f"unknown suite task set {task_set!r}; known: verified-sdist", field="task_set")

        rows = load_recipe(recipe).listing()
    if as_json:
        emit_json(rows)
        return
    console = Console()
    table = Table(title=f"{task_set} ({len(rows)} instances)")
    for col in ("instance_id", "repo", "release", "python"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["instance_id"], r["repo"], r["release"], r["python"])
    console.print(table)


@app.command("build-sdist")
@protocol_options
def build_sdist(instance: list[str] = typer.Option(None, "--instance", help="only these instances (repeatable)"),
                repo: list[str] = typer.Option(None, "--repo", help="only these repos (repeatable)"),
                dataset: str = typer.Option(None, "--dataset",
                                            help="Verified rows (path or hub id); default $EXECCRITIC_VERIFIED "
                                                 "or SWE-bench/SWE-bench_Verified"),
                reselect: bool = typer.Option(False, "--reselect",
                                              help="re-run selection + qualification from the dataset and "
                                                   "rewrite the recipe (default: build the committed recipe)"),
                verify: bool = typer.Option(False, "--verify",
                                            help="after building, check gold -> resolved and empty -> "
                                                 "unresolved through the official evaluator"),
                jobs: int = typer.Option(1, help="parallel qualification jobs (--reselect)"),
                results: str = typer.Option("results/verified_sdist", help="results dir (--reselect)"),
                recipe_out: str = typer.Option(None, help="recipe file to write (--reselect); default the "
                                                           "committed recipe"),
                as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Build the verified-sdist environments (download sdists, Base repos, venvs) under the cache dir.

    Idempotent: an environment whose env.json matches the recipe is reused untouched.
    """


    def log(message: str) -> None:
        typer.echo(message, err=True)

    with guarded(as_json):
        if dataset:
            os.environ[DATASET_ENV] = dataset
        if reselect:

            rows = load_tasks(verified_source(dataset))
            repos = set(repo or SUPPORTED_REPOS)
            tasks = [t for t in rows if t.repo in repos and (not instance or t.instance_id in instance)]
            summary = run_pipeline(tasks, root=cache_root(), results_dir=Path(results),
                                   recipe_out=Path(recipe_out) if recipe_out else RECIPE_PATH, jobs=jobs,
                                   harness=protocol.harness, dataset_manifest=rows.manifest(), log=log)
            if as_json:
                emit_json(summary)
            else:
                typer.echo(f"qualified {summary['qualified']} from {summary['repos_with_qualified']} repos")
            return
        recipe = load_recipe()
        wanted = [i for i in recipe.instances if (not instance or i.instance_id in instance)
                  and (not repo or i.repo in repo)]
        keys = sorted({i.env for i in wanted})
        out = {"cache": str(cache_root()), "envs": {}, "verified": {}}

        for key in tqdm(keys, desc="environments", unit="env", disable=as_json or len(keys) < 2):
            t0 = time.monotonic()
            built, _ = build_env(recipe.envs[key], resolve=False, progress=not as_json, log=log)
            out["envs"][key] = {"path": str(built.root), "seconds": round(time.monotonic() - t0, 1),
                                "build_seconds": built.record.get("build_seconds")}
            log(f"env {key}: ready ({out['envs'][key]['seconds']}s)")
        if verify and wanted:

            for task in load_verified_sdist(instance_ids=[i.instance_id for i in wanted]):
                gold = evaluate_official(task, task.patch, harness=protocol.harness)
                empty = evaluate_official(task, "", harness=protocol.harness)
                ok = gold.valid and gold.resolved and empty.valid and not empty.resolved
                out["verified"][task.instance_id] = {"ok": ok, "gold": [gold.valid, gold.resolved, gold.error[:300]],
                                                     "empty": [empty.valid, empty.resolved, empty.error[:300]]}
                log(f"{task.instance_id}: {'ok' if ok else 'FAILED'}")
    if as_json:
        emit_json(out)
    else:
        typer.echo(f"{len(out['envs'])} environment(s) ready under {out['cache']}")
        bad = [k for k, v in out["verified"].items() if not v["ok"]]
        if out["verified"]:
            typer.echo(f"verified {len(out['verified']) - len(bad)}/{len(out['verified'])}")
        if bad:
            raise typer.Exit(1)
