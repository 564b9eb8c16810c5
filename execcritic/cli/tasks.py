"""`execcritic tasks ...`: inspect task sets, build the verified-sdist, verified-git and multilingual-git
environments, qualify verified-git and multilingual-git."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from execcritic.cli.common import (DATASET, DATASET_REQUIRED, INSTANCES, JSON_OPTION, NO_PROGRESS, SPLIT,
                                   WORKERS, ExitCode, emit_json, progress_on, protocol_options,
                                   stderr_console, unit_failures)
from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.evaluation.official import evaluate_official
from execcritic.evaluation.qualify import SUPPORTED_REPOS, run_pipeline
from execcritic.evaluation.qualify_git import run_qualification
from execcritic.evaluation.qualify_ml import ROWS_NAME, c_rows, run_ml_qualification
from execcritic.tasks import git as git_tasks
from execcritic.tasks import load_tasks
from execcritic.tasks.git import build as git_build
from execcritic.tasks.git import recipe as git_recipe
from execcritic.tasks.git.plan import DEFAULT_CUTOFF
from execcritic.tasks.git.source import SOURCES_ENV, configured_sources
from execcritic.tasks import mlgit
from execcritic.tasks.mlgit import build as ml_build
from execcritic.tasks.sdist import DATASET_ENV, NAME, load_verified_sdist, verified_source
from execcritic.tasks.sdist.build import build_env, cache_root
from execcritic.tasks.sdist.recipe import RECIPE_PATH, load_recipe
from execcritic.tasks.stats import task_stats

app = typer.Typer(no_args_is_help=True, help="Task sets: load, list and summarize SWE-bench-style rows; build the "
                                             "verified-sdist, verified-git and multilingual-git environments; qualify "
                                             "verified-git and multilingual-git.")
GIT_RESULTS = Path("results/verified_git")
ML_RESULTS = Path("results/multilingual_git")
RECIPES = {NAME: load_recipe, git_tasks.NAME: git_recipe.load_recipe, mlgit.NAME: mlgit.load_recipe}


REPOS = typer.Option(None, "--repo", help="only these repos (repeatable)")


@app.command("stats")
def stats(dataset: str = DATASET_REQUIRED, split: str = SPLIT,
          skip_bad_rows: bool = typer.Option(False, "--skip-bad-rows", metavar="",
                                             help="leave out (and list) rows that fail validation"),
          as_json: bool = JSON_OPTION) -> None:
    """Per-repo counts and FAIL_TO_PASS statistics."""
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
    if s["tasks"]:
        console.print(f"FAIL_TO_PASS per instance: median {f['median']}, mean {f['mean']:.2f}, "
                      f"min {f['min']}, max {f['max']}")
    console.print(f"dataset sha256 {s['dataset']['sha256']}")


@app.command("list")
def list_tasks(dataset: str = DATASET,
               recipe: Optional[Path] = typer.Option(None, "--recipe", help="another recipe file (default: the "
                                                                              "committed one)"),
               as_json: bool = JSON_OPTION) -> None:
    """The qualified instances of a suite task set (verified-sdist, verified-git), from its committed recipe
    (builds nothing)."""
    if dataset not in RECIPES:
        raise InputError(f"--dataset {dataset!r} is not a suite task set with a recipe; known: {', '.join(RECIPES)}",
                         field="--dataset")
    rows = RECIPES[dataset](str(recipe) if recipe else None).listing()
    if as_json:
        emit_json(rows)
        return
    console = Console()
    table = Table(title=f"{dataset} ({len(rows)} instances)")
    for col in ("instance_id", "repo", "release", "python"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["instance_id"], r["repo"], r["release"], r["python"])
    console.print(table)


ROWS = typer.Option(None, "--rows", help=f"the SWE-bench Verified rows the recipe's instances come from (a path "
                    f"or hub id; default ${DATASET_ENV}, else the hub): read by --reselect and --verify")


@app.command("build-sdist")
@protocol_options("harness")
def build_sdist(instance: Optional[List[str]] = INSTANCES,
                repo: Optional[List[str]] = REPOS,
                rows: Optional[str] = ROWS,
                reselect: bool = typer.Option(False, "--reselect", metavar="",
                                              help="re-run selection + qualification from the rows and rewrite the "
                                                   "recipe (default: build the committed recipe)"),
                verify: bool = typer.Option(False, "--verify", metavar="",
                                            help="after building, check gold -> resolved and empty -> unresolved "
                                                 "through the official evaluator"),
                workers: int = WORKERS,
                results: Path = typer.Option(Path("runs/verified_sdist"), "--results",
                                             help="qualification results dir (--reselect)"),
                recipe_out: Optional[Path] = typer.Option(None, "--recipe-out", help="recipe file to write "
                                                          "(--reselect); default the committed recipe"),
                no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Build the verified-sdist environments (download sdists, Base repos, venvs) under the cache dir.

    Idempotent (an environment built from this recipe is reused untouched, and the output says so), locked
    (one builder per environment) and atomic (built beside, renamed into place).
    """
    console = stderr_console()

    def log(message: str) -> None:
        if not as_json:
            console.print(message, highlight=False)

    if rows:
        os.environ[DATASET_ENV] = rows
    if reselect:
        all_rows = load_tasks(verified_source(rows))
        repos = set(repo or SUPPORTED_REPOS)
        _known(instance, {t.instance_id for t in all_rows if t.repo in repos}, "--instance", "the selected repos")
        tasks = [t for t in all_rows if t.repo in repos and (not instance or t.instance_id in instance)]
        summary = run_pipeline(tasks, root=cache_root(), results_dir=results,
                               recipe_out=recipe_out or RECIPE_PATH, jobs=workers, harness=protocol.harness,
                               dataset_manifest=all_rows.manifest(), log=log)
        if as_json:
            emit_json(summary)
        else:
            typer.echo(f"qualified {summary['qualified']} from {summary['repos_with_qualified']} repos")
        return
    recipe = load_recipe()
    _known(instance, {i.instance_id for i in recipe.instances}, "--instance", "the verified-sdist recipe")
    _known(repo, {i.repo for i in recipe.instances}, "--repo", "the verified-sdist recipe")
    wanted = [i for i in recipe.instances if (not instance or i.instance_id in instance)
              and (not repo or i.repo in repo)]
    keys = sorted({i.env for i in wanted})
    out: dict = {"cache": str(cache_root()), "envs": {}, "verified": {}}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not progress_on(as_json, no_progress) or len(keys) < 2)
    with progress:
        bar = progress.add_task("environments", total=len(keys))
        for key in keys:
            progress.update(bar, description=f"environment {key}")
            t0 = time.monotonic()
            built, _ = build_env(recipe.envs[key], resolve=False, progress=False, log=log)
            out["envs"][key] = {"path": str(built.root), "seconds": round(time.monotonic() - t0, 1),
                                "built": not built.record.get("reused"),
                                "build_seconds": built.record.get("build_seconds")}
            progress.advance(bar)
    if verify and wanted:
        for task in load_verified_sdist(instance_ids=[i.instance_id for i in wanted]):
            gold = evaluate_official(task, task.patch, harness=protocol.harness)
            empty = evaluate_official(task, "", harness=protocol.harness)
            ok = gold.valid and gold.resolved and empty.valid and not empty.resolved
            out["verified"][task.instance_id] = {"ok": ok, "gold": [gold.valid, gold.resolved, gold.error[:300]],
                                                 "empty": [empty.valid, empty.resolved, empty.error[:300]]}
            log(f"{task.instance_id}: {'ok' if ok else 'FAILED'}")
    bad = [k for k, v in out["verified"].items() if not v["ok"]]
    if as_json:
        emit_json(out)
    else:
        made = [k for k, v in out["envs"].items() if v["built"]]
        typer.echo(f"{len(out['envs'])} environment(s) ready under {out['cache']}: {len(made)} built now, "
                   f"{len(out['envs']) - len(made)} already built from this recipe (unchanged)")
        if out["verified"]:
            typer.echo(f"verified {len(out['verified']) - len(bad)}/{len(out['verified'])}")
    if bad:
        raise typer.Exit(ExitCode.NEGATIVE)


GIT_SOURCE = typer.Option(None, "--git-source", metavar="REPO=SOURCE|TEMPLATE",
                          help=f"where a repository's commits come from (repeatable): `owner/name=<URL or local "
                               f"mirror path>`, or a template with {{repo}}/{{owner}}/{{name}} for the others; "
                               f"added to ${SOURCES_ENV}; default https://github.com/<repo>.git")


# the options qualify-git and qualify-ml share
REPEAT = typer.Option(2, "--repeat", min=1, max=1000,
                      help="runs of Base and Gold per instance (flaky nodes are those whose status changes)")
RESULTS_HELP = "results dir (instances.jsonl is the resumable state)"
RECIPE_OUT = typer.Option(None, "--recipe-out", help="recipe file to write; default the committed one for the "
                          "committed --results, else <results>/recipe.json")
LIMIT = typer.Option(None, "--limit", min=1, help="stop after N undecided rows")
REDO = typer.Option(False, "--redo", metavar="", help="decide again rows already in the results")
KEEP_CHECKOUTS = typer.Option(False, "--keep-checkouts", metavar="", help="keep each instance checkout in the cache "
                              "(default: delete it once decided; a later run fetches it again)")


def git_recipe_out(results: Path, recipe_out: Optional[Path] = None) -> Path:
    """Where qualify-git writes its recipe: the committed one only from the committed results; a scratch results dir
    (one row tried elsewhere) writes beside itself, never over the committed recipe with its few rows."""
    if recipe_out is not None:
        return recipe_out
    return git_recipe.RECIPE_PATH if results.resolve() == GIT_RESULTS.resolve() else results / "recipe.json"


@app.command("qualify-git")
@protocol_options("harness")
def qualify_git(instance: Optional[List[str]] = INSTANCES,
                repo: Optional[List[str]] = REPOS,
                rows: Optional[str] = ROWS,
                git_source: Optional[List[str]] = GIT_SOURCE,
                repeat: int = REPEAT,
                results: Path = typer.Option(GIT_RESULTS, "--results", help=RESULTS_HELP),
                recipe_out: Optional[Path] = RECIPE_OUT,
                limit: Optional[int] = LIMIT,
                redo: bool = REDO,
                keep_checkouts: bool = KEEP_CHECKOUTS,
                cutoff: str = typer.Option(DEFAULT_CUTOFF, "--cutoff", help="uv --exclude-newer date for what "
                                           "SWE-bench's specs leave unpinned"),
                no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Qualify SWE-bench Verified rows at their exact base commits (the verified-git task set) and write its
    recipe. Resumable: rows already decided in --results are skipped; kill it and run it again."""
    console = stderr_console()
    all_rows = load_tasks(verified_source(rows))
    _known(instance, {t.instance_id for t in all_rows}, "--instance", "the Verified rows")
    _known(repo, {t.repo for t in all_rows}, "--repo", "the Verified rows")
    tasks = [t for t in all_rows if (not repo or t.repo in repo) and (not instance or t.instance_id in instance)]
    summary = run_qualification(tasks, results_dir=results, recipe_out=git_recipe_out(results, recipe_out),
                                sources=configured_sources(git_source), repeat=repeat,
                                keep_checkouts=keep_checkouts, redo=redo, cutoff=cutoff, harness=protocol.harness,
                                dataset_manifest=all_rows.manifest(), all_rows=list(all_rows), limit=limit,
                                log=lambda m: console.print(m, highlight=False, markup=False),
                                progress=progress_on(as_json, no_progress))
    if as_json:
        emit_json(summary)
    else:
        typer.echo(f"qualified {summary['qualified']} of {summary['verified_rows']} ({summary['decided']} decided); "
                   f"table: {results / 'table.md'}")
    code = unit_failures([summary], console, as_json=as_json)       # rows their git source could not serve
    if code:
        raise typer.Exit(code)


@app.command("build-git")
@protocol_options("harness")
def build_git(instance: Optional[List[str]] = INSTANCES,
              repo: Optional[List[str]] = REPOS,
              rows: Optional[str] = ROWS,
              git_source: Optional[List[str]] = GIT_SOURCE,
              verify: bool = typer.Option(False, "--verify", metavar="",
                                          help="after building, check gold -> resolved and empty -> unresolved "
                                               "through the official evaluator"),
              no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Build the verified-git environments and instance checkouts of the committed recipe under the cache dir
    (idempotent, locked, atomic: an environment or checkout built from this recipe is reused untouched)."""
    console = stderr_console()
    if rows:
        os.environ[DATASET_ENV] = rows
    recipe = git_recipe.load_recipe()
    _known(instance, {i.instance_id for i in recipe.instances}, "--instance", "the verified-git recipe")
    _known(repo, {i.repo for i in recipe.instances}, "--repo", "the verified-git recipe")
    wanted = [i.instance_id for i in recipe.instances if (not instance or i.instance_id in instance)
              and (not repo or i.repo in repo)]
    tasks = list(git_tasks.load_verified_git(instance_ids=wanted))
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not progress_on(as_json, no_progress) or len(tasks) < 2)
    with progress:
        bar = progress.add_task("verified-git", total=len(tasks))
        out = git_build.ensure(tasks, sources=configured_sources(git_source), recipe=recipe,
                               log=None if as_json else lambda m: console.print(m, highlight=False, markup=False),
                               advance=lambda iid: (progress.update(bar, description=iid), progress.advance(bar)))
    out["verified"] = {}
    if verify:
        for task in tasks:
            gold = evaluate_official(task, task.patch, harness=protocol.harness)
            empty = evaluate_official(task, "", harness=protocol.harness)
            ok = gold.valid and gold.resolved and empty.valid and not empty.resolved
            out["verified"][task.instance_id] = {"ok": ok, "gold": [gold.valid, gold.resolved, gold.error[:300]],
                                                 "empty": [empty.valid, empty.resolved, empty.error[:300]]}
            console.print(f"{task.instance_id}: {'ok' if ok else 'FAILED'}", highlight=False)
    bad = [k for k, v in out["verified"].items() if not v["ok"]]
    if as_json:
        emit_json(out)
    else:
        typer.echo(f"{len(out['envs'])} environment(s) and {len(out['checkouts'])} checkout(s) ready under "
                   f"{git_build.cache_root()}: {len(out['built'])} built now, the rest already built from this recipe")
        if out["verified"]:
            typer.echo(f"verified {len(out['verified']) - len(bad)}/{len(out['verified'])}")
    if bad:
        raise typer.Exit(ExitCode.NEGATIVE)


@app.command("qualify-ml")
@protocol_options("harness")
def qualify_ml(instance: Optional[List[str]] = INSTANCES,
               repo: Optional[List[str]] = REPOS,
               rows: Optional[str] = typer.Option(None, "--rows", help="SWE-bench Multilingual rows (file or hub "
                                                  "id); default $EXECCRITIC_MULTILINGUAL, else the hub id"),
               git_source: Optional[List[str]] = GIT_SOURCE,
               repeat: int = REPEAT,
               results: Path = typer.Option(ML_RESULTS, "--results", help=RESULTS_HELP),
               recipe_out: Optional[Path] = RECIPE_OUT,
               limit: Optional[int] = LIMIT,
               redo: bool = REDO,
               keep_checkouts: bool = KEEP_CHECKOUTS,
               as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Qualify SWE-bench Multilingual's C, C++ and JavaScript/TypeScript rows at their exact base commits (the
    multilingual-git task set) and write its recipe. Resumable: rows already decided in --results are skipped; kill it and run it again."""
    console = stderr_console()
    every = mlgit.multilingual_rows(rows)
    native = c_rows(every)
    _known(instance, {t.instance_id for t in native}, "--instance", "the Multilingual rows with a toolchain here")
    _known(repo, {t.repo for t in native}, "--repo", "the Multilingual rows with a toolchain here")
    tasks = [t for t in native if (not repo or t.repo in repo) and (not instance or t.instance_id in instance)]
    out = recipe_out or (mlgit.RECIPE_PATH if results.resolve() == ML_RESULTS.resolve() else results / "recipe.json")
    summary = run_ml_qualification(tasks, results_dir=results, recipe_out=out, sources=configured_sources(git_source),
                                   repeat=repeat, keep_checkouts=keep_checkouts, redo=redo, harness=protocol.harness,
                                   dataset_manifest=every.manifest(), all_rows=native, limit=limit,
                                   log=lambda m: console.print(m, highlight=False, markup=False))
    if as_json:
        emit_json(summary)
    else:
        typer.echo(f"qualified {summary['qualified']} of {summary['verified_rows']} {ROWS_NAME} rows "
                   f"({summary['decided']} decided); table: {results / 'table.md'}")
    code = unit_failures([summary], console, as_json=as_json)       # rows left undecided (source, toolchain)
    if code:
        raise typer.Exit(code)


@app.command("build-ml")
def build_ml(instance: Optional[List[str]] = INSTANCES, repo: Optional[List[str]] = REPOS,
             git_source: Optional[List[str]] = GIT_SOURCE, as_json: bool = JSON_OPTION) -> None:
    """Build the multilingual-git instance checkouts of the committed recipe (the Base with its build) under the
    cache dir (idempotent, locked, atomic)."""
    console = stderr_console()
    recipe = mlgit.load_recipe()
    _known(instance, {i.instance_id for i in recipe.instances}, "--instance", "the multilingual-git recipe")
    _known(repo, {i.repo for i in recipe.instances}, "--repo", "the multilingual-git recipe")
    wanted = [i.instance_id for i in recipe.instances if (not instance or i.instance_id in instance)
              and (not repo or i.repo in repo)]
    out = ml_build.ensure(mlgit.load_multilingual_git(instance_ids=wanted), sources=configured_sources(git_source),
                          log=None if as_json else lambda m: console.print(m, highlight=False, markup=False))
    if as_json:
        emit_json(out)
    else:
        typer.echo(f"{len(out['checkouts'])} checkout(s) ready under {ml_build.cache_root()}: {len(out['built'])} "
                   "built now, the rest already built")


def _known(given: list[str] | None, known: set[str], flag: str, where: str) -> None:
    unknown = sorted(set(given or ()) - known)
    if unknown:
        raise InputError(f"{flag} {', '.join(unknown)}: not in {where} ({len(known)} known; `execcritic tasks "
                         "list` shows them)", field=flag)
