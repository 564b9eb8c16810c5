"""`execcritic figures`: regenerate paper_figures/ from results/ (reported beside measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from execcritic.cli.common import JSON_OPTION, emit_json
from execcritic.errors import InputError
from execcritic.figures import build_all


def register(app: typer.Typer) -> None:
    @app.command("figures")
    def figures(results: Annotated[Path, typer.Option(help="the results store to read")] = Path("results"),
                out: Annotated[Path, typer.Option(help="where to write tables and figures")] = Path("paper_figures"),
                reported: Annotated[Path | None, typer.Option(
                    help="reported numbers (default: RESULTS/paper/reported_numbers.json)")] = None,
                run: Annotated[list[str] | None, typer.Option(
                    help="ARTIFACT=RUN_ID: show this run instead of the latest complete one (repeatable)")] = None,
                as_json: bool = JSON_OPTION) -> None:
        """Every table as Markdown + LaTeX, Figures 5 and 6 as PNG + PDF; same inputs, same bytes."""

        pins = {}
        for item in run or []:
            artifact, sep, run_id = item.partition("=")
            if not sep or not artifact or not run_id:
                raise InputError(f"--run {item!r}: expected ARTIFACT=RUN_ID", field="run")
            pins[artifact] = run_id
        report = build_all(results, out, reported_path=reported, runs=pins)
        if as_json:
            emit_json(report.to_dict())
            return
        for artifact, src in report.sources.items():
            typer.echo(f"{artifact:8s} {('measured: ' + src) if src else 'reported only (not run here)'}")
        if report.training:
            typer.echo("training: " + ", ".join(report.training))
        for s in report.skipped:
            typer.echo(f"skipped incomplete run: {s}")
        typer.echo(f"wrote {len(report.files)} files to {out}")
