"""`execcritic tasks ...`: inspect task sets."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from execcritic.cli.common import JSON_OPTION, emit_json, guarded
from execcritic.tasks import load_tasks
from execcritic.tasks.stats import task_stats

app = typer.Typer(no_args_is_help=True, help="Task sets: load, list and summarize SWE-bench-style rows.")


@app.command("stats")
def stats(dataset: str = typer.Argument(..., help="parquet/JSONL file, hub id, or alias (verified, ...)"),
          split: str = typer.Option("test", help="split for hub datasets"),
          as_json: bool = JSON_OPTION) -> None:
    """Per-repo counts and FAIL_TO_PASS statistics."""
    with guarded(as_json):
        s = task_stats(load_tasks(dataset, split=split))
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
