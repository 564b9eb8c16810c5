"""`execcritic figures`: regenerate paper_figures/ from results/ (reported beside measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from execcritic.cli.common import JSON_OPTION, emit_json
from execcritic.errors import InputError


def register(app: typer.Typer) -> None:
    @app.command("figures")
    def figures(results: Annotated[Path, typer.Option("--results", help="the results store to read")] = Path("results"),
                out: Annotated[Path, typer.Option("--out", help="where to write tables and figures")] = Path(
                    "paper_figures"),
                reported: Annotated[Path | None, typer.Option(
                    "--reported", help="reported numbers (default: RESULTS/paper/reported_numbers.json)")] = None,
                run: Annotated[list[str] | None, typer.Option(
                    "--run", help="ARTIFACT=RUN_ID: show this run instead of the pinned one (repeatable)")] = None,
                pin: Annotated[bool, typer.Option(
                    "--pin", metavar="", help="with --run: record it in RESULTS/paper_runs.json as the pinned run")
                ] = False,
                latest: Annotated[bool, typer.Option(
                    "--latest", metavar="", help="show the latest complete run of each artifact instead of the "
                                                 "pinned ones (exploring a store of your own)")] = False,
                as_json: bool = JSON_OPTION) -> None:
        """Every table as Markdown + LaTeX, Figures 5 and 6 as PNG + PDF, from the runs RESULTS/paper_runs.json
        pins; same inputs, same bytes."""
        from execcritic.figures import build_all  # lazy: pandas and matplotlib, for this command only
        from execcritic.results.pins import write_pins  # lazy: pandas

        pins = {}
        for item in run or []:
            artifact, sep, run_id = item.partition("=")
            if not sep or not artifact or not run_id:
                raise InputError(f"--run {item!r}: expected ARTIFACT=RUN_ID", field="--run")
            if not (results / artifact / run_id / "manifest.json").is_file():
                raise InputError(f"--run {item!r}: no such run in {results}", file=str(results / artifact / run_id),
                                 field="--run")
            pins[artifact] = run_id
        if pin and not pins:
            raise InputError("--pin records the runs given with --run: name at least one", field="--pin")
        if pin:
            write_pins(results, runs=pins)
        report = build_all(results, out, reported_path=reported, runs=pins, latest=latest)
        if as_json:
            emit_json(report.to_dict())
            return
        for artifact, src in report.sources.items():
            typer.echo(f"{artifact:8s} {('measured: ' + src) if src else 'reported only (no run pinned)'}")
        if report.training:
            typer.echo("training: " + ", ".join(report.training))
        for s in report.skipped:
            typer.echo(f"not finished (not shown): {s}")
        typer.echo(f"wrote {len(report.files)} files to {out}")
