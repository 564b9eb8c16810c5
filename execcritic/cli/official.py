"""`execcritic official --dataset D --instance ID --patch FILE|gold|empty`: the official evaluator (all F2P + P2P)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)

from execcritic import cancel
from execcritic.cli.common import (BACKEND, DATASET, INSTANCES, JSON_OPTION, LIMIT, NO_PROGRESS, SPLIT,
                                   WORKERS, ExitCode, emit_json, load_selected, progress_on, protocol_options,
                                   stderr_console)
from execcritic.config import ProtocolConfig
from execcritic.evaluation.official import evaluate_official, read_patch_file, resolve_patch_arg
from execcritic.pipeline import preflight
from execcritic.tasks.environment import environment_for


def register(app: typer.Typer) -> None:
    app.command("official")(official)


@protocol_options("harness")
def official(dataset: str = DATASET, instance: Optional[List[str]] = INSTANCES, limit: Optional[str] = LIMIT,
             patch: str = typer.Option(..., "--patch", help="patch file, or 'gold' / 'empty' (each task's own)"),
             backend: Optional[str] = BACKEND,
             log_dir: Optional[Path] = typer.Option(None, "--log-dir", help="keep eval.sh and test_output.txt "
                                                    "here (one subdirectory per instance)"),
             split: str = SPLIT, workers: int = WORKERS, no_progress: bool = NO_PROGRESS,
             as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Score a patch with SWE-bench's grading; did-not-run is INVALID, never 'unresolved'.

    Exit status: 0 every instance resolved, 1 some valid but unresolved, 3 some invalid (did not run / patch did
    not apply).
    """
    text = None if patch in ("gold", "empty") else read_patch_file(patch)  # a bad --patch fails before work
    tasks, _ = load_selected(dataset, instance, limit, split)
    diffs = {t.instance_id: resolve_patch_arg(t, patch) if text is None else text for t in tasks}
    preflight.prepare_environments(tasks, backend)
    show = progress_on(as_json, no_progress)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn()]
    with Progress(*columns, console=stderr_console(), disable=not show, transient=True) as progress, \
            ThreadPoolExecutor(max_workers=workers) as pool, cancel.cancellable():    # (Ctrl-C: within seconds)
        bar = progress.add_task(f"official evaluation ({patch})", total=len(tasks))

        def one(task):
            logs = Path(log_dir) / task.instance_id if log_dir and len(tasks) > 1 else log_dir
            res = evaluate_official(task, diffs[task.instance_id], environment_for(task, backend=backend),
                                    harness=protocol.harness, log_dir=Path(logs) if logs else None)
            progress.advance(bar)
            return res

        results = list(pool.map(one, tasks))
    code = (ExitCode.INVALID if any(not r.valid for r in results) else
            ExitCode.NEGATIVE if any(not r.resolved for r in results) else ExitCode.OK)
    if as_json:
        emit_json(results[0].to_dict() if len(results) == 1 else {"results": [r.to_dict() for r in results],
                                                                   "exit_code": int(code)})
        raise typer.Exit(code)
    console = Console()
    for res in results:
        state = "RESOLVED" if res.resolved else ("unresolved" if res.valid else "INVALID (did not run)")
        console.print(f"{res.instance_id}: {state}  [backend {res.backend}, {res.duration_s:.1f}s]", highlight=False)
        console.print(f"  FAIL_TO_PASS  pass {len(res.f2p_pass)}  fail {len(res.f2p_fail)}", highlight=False)
        console.print(f"  PASS_TO_PASS  pass {len(res.p2p_pass)}  fail {len(res.p2p_fail)}", highlight=False)
        for name in res.f2p_fail[:10]:
            console.print(f"  F2P failing: {name}", highlight=False)
        for name in res.p2p_fail[:10]:
            console.print(f"  P2P failing: {name}", highlight=False)
        if res.error:
            console.print(f"  error: {res.error[:3000]}", highlight=False)
    if len(results) > 1:
        console.print(f"{sum(r.resolved for r in results)}/{len(results)} resolved, "
                      f"{sum(not r.valid for r in results)} invalid")
    raise typer.Exit(code)
