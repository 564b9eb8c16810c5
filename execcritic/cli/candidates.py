"""`execcritic candidates build`: officially labeled candidate pools for Test-agent RL (§4.1, §5)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from execcritic.cli.common import (BACKEND, DATASET, INSTANCES, JSON_OPTION, LIMIT, NO_PROGRESS, WORKERS,
                                   emit_json, load_selected, progress_on, protocol_options, unit_failures)
from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.pipeline import preflight
from execcritic.results.fingerprint import check_fingerprint, claim, section_digests
from execcritic.results.manifest import harness_digest
from execcritic.training.candidates import build_candidates, load_pools

app = typer.Typer(no_args_is_help=True, help="Labeled candidate patches (Gold, Gold mutants, Repair-run patches), "
                                             "each labeled by a real official run.")

REPAIR_RUN = typer.Option(None, "--repair-run", help="a pipeline run directory whose repair.jsonl supplies final "
                          "and Round-0 patches (repeatable)")
MUTANTS = typer.Option(True, "--mutants/--no-mutants", metavar="", help="add deterministic Gold mutants")
RUN_ID = typer.Option(None, "--run-id", help="<root>/<run_id> (an existing one continues, if made with the same "
                      "settings); default: the UTC time")
ROOT = typer.Option(Path("runs/candidates"), "--root", help="where candidate runs live")
RUN_DIR = typer.Argument(..., help="a candidate run directory (<root>/<run_id>)")


@app.command("build")
@protocol_options("harness", "test_rl", "repair_rl")
def build_cmd(
    dataset: str = DATASET, instance: Optional[List[str]] = INSTANCES, limit: Optional[str] = LIMIT,
    repair_run: Optional[List[Path]] = REPAIR_RUN, mutants: bool = MUTANTS, run_id: Optional[str] = RUN_ID,
    root: Path = ROOT, workers: int = WORKERS, backend: Optional[str] = BACKEND, no_progress: bool = NO_PROGRESS,
    as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig,
) -> None:
    """Label every candidate of every instance with the official evaluator (resumable); report the RL sets."""
    for r in repair_run or ():
        if not (r / "repair.jsonl").is_file():
            raise InputError("not a pipeline run directory (no repair.jsonl)", file=str(r), field="--repair-run")
    tasks, ts = load_selected(dataset, instance, limit)
    rid = run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    fingerprint = {"dataset_sha256": ts.sha256, "harness_code": harness_digest(), "backend": backend or "task's own",
                   **section_digests(protocol, ("harness",))}
    check_fingerprint(root / rid, fingerprint, option="--run-id", record=False)
    claim(root / rid, option="--run-id")                          # one writer per run directory
    check_fingerprint(root / rid, fingerprint, option="--run-id")
    preflight.prepare_environments(tasks, backend)
    res = build_candidates(tasks, root / rid, repair_runs=repair_run or [], mutants=mutants, protocol=protocol,
                           backend=backend, workers=workers, show_progress=progress_on(as_json, no_progress),
                           datasets=[ts.manifest()], command=sys.argv)
    code = unit_failures([res.summary], as_json=as_json)
    out = {"run_dir": str(res.run_dir), "labels": res.summary.to_dict(), "pools": res.pools,
           "test_rl_set": [i for i, p in res.pools.items() if p["test_rl"]],
           "repair_rl_set": [i for i, p in res.pools.items() if p["repair_rl"]], "exit_code": int(code)}
    if as_json:
        emit_json(out)
        raise typer.Exit(code)
    console = Console()
    labels = res.summary.to_dict()
    console.print(f"{res.run_dir}: {labels['done']} labeled now, {labels['skipped']} already labeled, "
                  f"{labels['errors']} errored; counts {labels['counts']}", highlight=False)
    for iid, p in res.pools.items():
        console.print(f"  {iid}: {p['labeled']} labeled ({p['correct']} correct, {p['incorrect']} incorrect, "
                      f"{p['unlabeled']} without a label) test_rl={p['test_rl']} repair_rl={p['repair_rl']}",
                      highlight=False)
    raise typer.Exit(code)


@app.command("show")
def show_cmd(run_dir: Path = RUN_DIR, as_json: bool = JSON_OPTION) -> None:
    """Pool sizes and labels of a candidate run (every record checked)."""
    if not run_dir.is_dir():
        raise InputError("no such candidate run directory", file=str(run_dir), field="RUN_DIR")
    pools = load_pools(run_dir)
    data = {iid: p.to_dict() for iid, p in pools.items()}
    if as_json:
        emit_json(data)
        return
    for iid, p in data.items():
        typer.echo(f"{iid}: {p}")
