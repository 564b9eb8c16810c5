"""`execcritic candidates build DATASET`: officially labeled candidate pools for Test-agent RL (§4.1, §5)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from execcritic.cli.common import JSON_OPTION, emit_json, guarded, protocol_options
from execcritic.config import ProtocolConfig
from execcritic.tasks import load_tasks
from execcritic.training.candidates import build_candidates, load_pools

app = typer.Typer(no_args_is_help=True, help="Labeled candidate patches (Gold, Gold mutants, Repair-run patches), "
                                             "each labeled by a real official run.")


DATASET_ARG = typer.Argument("verified-sdist", help="task set")
INSTANCE = typer.Option(None, help="instance id (repeatable)")
LIMIT = typer.Option(None, help="first N tasks")
REPAIR_RUN = typer.Option(None, "--repair-run", help="a pipeline run directory whose repair.jsonl supplies final "
                          "and Round-0 patches (repeatable)")
MUTANTS = typer.Option(True, "--mutants/--no-mutants", help="add deterministic Gold mutants")
RUN_ID = typer.Option(None, help="results/candidates/<run_id> (an existing one resumes)")
ROOT = typer.Option(Path("results/candidates"), help="where candidate runs live")
WORKERS = typer.Option(1, help="official evaluations in parallel")
BACKEND = typer.Option(None, help="local | docker (default: the task's own)")
NO_PROGRESS = typer.Option(False, help="no progress bars")
RUN_DIR = typer.Argument(..., help="results/candidates/<run_id>")


@app.command("build")
@protocol_options
def build_cmd(
    dataset: str = DATASET_ARG, instance: list[str] | None = INSTANCE, limit: int | None = LIMIT,
    repair_run: list[Path] | None = REPAIR_RUN, mutants: bool = MUTANTS, run_id: str | None = RUN_ID,
    root: Path = ROOT, workers: int = WORKERS, backend: str | None = BACKEND, no_progress: bool = NO_PROGRESS,
    as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig,
) -> None:
    """Label every candidate of every instance with the official evaluator (resumable); report the RL sets."""
    with guarded(as_json):
        ts = load_tasks(dataset, instance_ids=instance or None)
        tasks = list(ts)[:limit] if limit else list(ts)
        rid = run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        res = build_candidates(tasks, root / rid, repair_runs=repair_run or [], mutants=mutants, protocol=protocol,
                               backend=backend, workers=workers, show_progress=not no_progress,
                               datasets=[ts.manifest()], command=sys.argv)
    out = {"run_dir": str(res.run_dir), "labels": res.summary.to_dict(), "pools": res.pools,
           "test_rl_set": [i for i, p in res.pools.items() if p["test_rl"]],
           "repair_rl_set": [i for i, p in res.pools.items() if p["repair_rl"]]}
    if as_json:
        emit_json(out)
        return
    typer.echo(f"{res.run_dir}: {out['labels']}")
    for iid, p in res.pools.items():
        typer.echo(f"  {iid}: {p['labeled']} labeled ({p['correct']} correct, {p['incorrect']} incorrect, "
                   f"{p['unlabeled']} without a label) test_rl={p['test_rl']} repair_rl={p['repair_rl']}")


@app.command("show")
def show_cmd(run_dir: Path = RUN_DIR, as_json: bool = JSON_OPTION) -> None:
    """Pool sizes and labels of a candidate run (every record checked)."""
    with guarded(as_json):
        pools = load_pools(run_dir)
    data = {iid: p.to_dict() for iid, p in pools.items()}
    if as_json:
        emit_json(data)
        return
    for iid, p in data.items():
        typer.echo(f"{iid}: {p}")
