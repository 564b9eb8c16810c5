"""`execcritic bundle ...`: validate Test bundles, one directory or every official bundle of a dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from execcritic.bundle.model import BUNDLE_FILES, TestBundle
from execcritic.cli.common import JSON_OPTION, ExitCode, emit_json
from execcritic.errors import InputError, check_size
from execcritic.files import atomic_write_json
from execcritic.harness.oracle.check import check_official, load_rows, summarize
from execcritic.harness.oracle.outlines import outline_reader
from execcritic.harness.validate import validate_bundle
from execcritic.limits import MAX_BUNDLE_BYTES
from execcritic.tasks import load_tasks

app = typer.Typer(
    no_args_is_help=True, help="Test bundles: validate (test.patch, test_command, test_contract.json)."
)


@app.command("check")
def check(
    directory: Optional[Path] = typer.Argument(
        None, help="bundle directory: test.patch, test_command, test_contract.json"
    ),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", "-d", help="the task set holding the task the bundle is for (with --instance), or "
                                      "whose official bundles --oracle checks"
    ),
    instance: Optional[List[str]] = typer.Option(
        None, "--instance", "-i", help="instance_id of the task the bundle is for (one)"
    ),
    oracle: bool = typer.Option(
        False, "--oracle", metavar="", help="validate the *official* bundle of every instance of --dataset instead"
    ),
    sources: Optional[Path] = typer.Option(
        None,
        "--sources",
        help="release outlines standing in for Base sources (experiments/oracle_validation.py writes them)",
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the full JSON report here"),
    min_rate: Optional[float] = typer.Option(
        None, "--min-rate", min=0.0, max=1.0, help="with --oracle: exit 1 if the valid rate is below this (0-1)"
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Exit 0 iff the bundle is valid; otherwise print every problem (exit 1). With --oracle, report the
    rate of official bundles that validate and every rejection grouped by problem code."""
    if oracle:
        if directory is not None or instance:
            raise InputError("--oracle checks every official bundle of --dataset: give no DIRECTORY or --instance",
                             field="--oracle")
        if not dataset:
            raise InputError("--oracle needs --dataset (the task set whose official bundles to check)",
                             field="--dataset")
        _check_oracle(dataset, sources, out, min_rate, as_json)
        return
    if directory is None:
        raise InputError("give a bundle DIRECTORY (with --dataset/--instance), or --oracle --dataset DATASET")
    if min_rate is not None or sources is not None:
        raise InputError("--min-rate and --sources go with --oracle", field="--min-rate")
    if len(instance or []) > 1:
        raise InputError("a bundle is for one task: give one --instance", field="--instance")
    task = None
    files = [directory / name for name in BUNDLE_FILES if (directory / name).is_file()]
    check_size("the bundle", sum(f.stat().st_size for f in files), MAX_BUNDLE_BYTES, file=str(directory))
    bundle = TestBundle.from_dir(directory)
    if dataset or instance:
        if not (dataset and instance):
            raise InputError("--dataset and --instance go together (the task the bundle is for)")
        task = load_tasks(dataset, instance_ids=instance).get(instance[0])
    problems = validate_bundle(bundle, task)
    report = {
        "valid": not problems,
        "problems": [p.to_dict() for p in problems],
        "bundle": str(directory),
        "instance": instance[0] if instance else None,
        "digest": bundle.digest(),
    }
    if out:
        atomic_write_json(out, report)
    if as_json:
        emit_json(report)
    else:
        console = Console()
        if not problems:
            console.print(f"[green]valid[/green] {directory}" + (f" for {instance[0]}" if instance else ""))
        else:
            console.print(f"[red]invalid[/red] {directory}: {len(problems)} problem(s)")
            for p in problems:
                console.print(f"  {p.artifact}: [bold]{p.code}[/bold] {p.message}", highlight=False)
    raise typer.Exit(ExitCode.OK if not problems else ExitCode.NEGATIVE)


def _check_oracle(
    dataset: str, sources: Optional[Path], out: Optional[Path], min_rate: Optional[float], as_json: bool
) -> None:

    tasks, bad, sha = load_rows(dataset)
    outlines = None
    if sources is not None:
        if not sources.is_file():
            raise InputError("outlines file not found", file=str(sources), field="--sources")
        outlines = json.loads(sources.read_text())
    results = []
    used = {}
    for task in tasks:
        reader = outline_reader(outlines, task) if outlines else None
        r = check_official(task)
        needs_base = r.inferred or any(p.code.startswith("oracle.") for p in r.problems)
        if reader is not None and needs_base:
            r = check_official(task, read_base=reader)
            used[task.instance_id] = f"{task.repo}@{task.version}"
        results.append(r)
    report = summarize(results + bad)
    report["dataset"] = {"source": dataset, "rows": len(tasks) + len(bad), "sha256": sha}
    report["release_sources_used"] = used
    if not report["total"]:
        raise InputError(f"{dataset} holds no rows: there is no rate to report", field="--dataset")
    if out:
        atomic_write_json(out, report, indent=1)
    if as_json:
        emit_json(report)
    else:
        console = Console()
        console.print(
            f"official bundles of {dataset}: [bold]{report['valid']}/{report['total']}[/bold] valid "
            f"({report['rate']:.1%})" + (f"; Base stand-ins used for {len(used)}" if used else "")
        )
        table = Table(title="rejections by problem code")
        table.add_column("code")
        table.add_column("n", justify="right")
        table.add_column("instances")
        for code, ids in report["rejections_by_code"].items():
            table.add_row(code, str(len(ids)), " ".join(ids))
        console.print(table)
        for rej in report["rejections"]:
            console.print(f"[bold]{rej['instance_id']}[/bold]", highlight=False)
            for p in rej["problems"]:
                console.print(f"   {p['code']}: {p['message'][:300]}", highlight=False)
    if min_rate is not None and report["rate"] < min_rate:
        raise typer.Exit(ExitCode.NEGATIVE)
