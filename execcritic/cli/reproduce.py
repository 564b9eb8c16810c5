"""`execcritic reproduce`: every paper artifact's notebook under one preset, then paper_figures/, then a
summary a person reads (what ran, measured beside reported, where things are, how long each part took)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from execcritic.cli.common import JSON_OPTION, ExitCode, emit_json
from execcritic.errors import InputError

# (the experiments, figures and results libraries - pandas, matplotlib, papermill - are imported when the command
# runs, not when `execcritic reproduce --help` is asked for)


def _duration(s: float) -> str:
    s = float(s)
    return f"{s:.0f} s" if s < 90 else f"{s // 60:.0f} min {s % 60:02.0f} s"


def register(app: typer.Typer) -> None:
    @app.command("reproduce")
    def reproduce(
        preset: Annotated[str, typer.Option(help="paper | smoke | ci, or a preset YAML (experiments/presets/)")] = "smoke",
        only: Annotated[list[str] | None, typer.Option(help="only this artifact (repeatable): table1 ... figure6")] = None,
        from_results: Annotated[bool, typer.Option(
            "--from-results", metavar="", help="run nothing: re-render the pinned runs (results/paper_runs.json) and paper_figures/"
        )] = False,
        results: Annotated[Path, typer.Option(help="results store")] = Path("results"),
        figures: Annotated[Path, typer.Option(help="where paper_figures are written")] = Path("paper_figures"),
        rendered: Annotated[Path, typer.Option(help="--from-results: where re-rendered notebooks go")] = Path(
            "runs/rendered"),
        workers: Annotated[int | None, typer.Option("--workers", "-w", min=1, max=1024,
                                                    help="parallel pipeline units (default: the preset's)")] = None,
        fresh: Annotated[bool, typer.Option("--fresh", metavar="",
                                            help="start a new session even if one of this preset was killed")] = False,
        train: Annotated[bool, typer.Option("--train", metavar="", help=(
            "CPU presets: train the trained roles (the notebooks' train=True; ~1.5 h at the smoke size on 2 CPUs) and pin "
            "Figure 6's GRPO runs"))] = False,
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Run the paper artifacts' notebooks (papermill) under a preset, resumably, then paper_figures/."""
        from rich.console import Console  # lazy: rich, off the start-up path

        from execcritic.experiments import reproduce as rp  # lazy: papermill, pandas
        from execcritic.experiments.core import UnitCounts  # lazy: pandas
        from execcritic.experiments.presets import load_preset  # lazy: pandas (with the experiments)
        from execcritic.figures import build_all  # lazy: matplotlib
        from execcritic.figures.notebook import measured_rows, shown_runs  # lazy: matplotlib
        from execcritic.results import paper  # lazy: pandas
        from execcritic.results.pins import pins_path  # lazy: pandas

        console = Console(stderr=as_json, width=None if sys.stdout.isatty() else 120)
        t_all = time.monotonic()
        artifacts = rp.check_artifacts(only)
        pre = load_preset(preset)
        if not from_results:
            rp.check_parameters(pre.name, artifacts, results, workers, train)   # before a session file is written
        if from_results and train:
            raise InputError("--from-results runs nothing, so it cannot --train: pass one of them", field="--train")
        if from_results and not any(shown_runs(results, artifacts).values()):
            raise InputError(f"--from-results: {results} pins no run of {', '.join(artifacts)} "
                             f"({pins_path(results).name}); nothing to render (run `execcritic reproduce` first)",
                             file=str(results), field="--results")
        command = shlex.join(["execcritic", *sys.argv[1:]]) if sys.argv[1:2] == ["reproduce"] else \
            f"execcritic reproduce --preset {preset}"
        os.environ["EXECCRITIC_INVOKED_BY"] = command
        results.mkdir(parents=True, exist_ok=True)
        timings: list[tuple[str, float, str]] = []
        console.rule(f"[bold]execcritic reproduce[/] - preset {pre.name}")
        console.print(pre.banner)
        if from_results:
            with _progress(console, as_json) as prog, rp.one_kernel() as km:
                bar = prog.add_task("re-render notebooks", total=len(artifacts))
                for a in artifacts:
                    prog.update(bar, description=f"re-render {a}")
                    t0 = time.monotonic()
                    out = rp.render_notebook(a, results, rendered, km=km)
                    timings.append((f"{a} notebook (re-render)", time.monotonic() - t0,
                                    str(out) if out else "no pinned run: nothing to render"))
                    prog.advance(bar)
            session, failed = None, ""
        else:
            failed = ""
            session, resumed = rp.open_session(pre.name, results, artifacts, command=command, fresh=fresh,
                                               train=train)
            console.print(f"session [bold]{session.session}[/] ({'continued: finished work is skipped' if resumed else 'new'})"
                          f" - state in {session.path}")
            t0 = time.monotonic()
            counts = UnitCounts()
            stage = rp.timed_part(session, "pipeline units", lambda: rp.prepare(
                session, artifacts, workers=workers, show_progress=not as_json, counts=counts))
            detail = f"{counts}; " + ", ".join(f"{k} {_duration(v)}" for k, v in stage.items() if v >= 1)
            timings.append(("pipeline units (environments, episodes, Repair runs, official scores)",
                            time.monotonic() - t0, detail.rstrip("; ")))
            session.part("pipeline units").detail = detail.rstrip("; ")
            session.save()
            if counts.errors:
                failed = (f"{counts.errors} pipeline unit(s) failed twice (tracebacks in "
                          f"{results}/pipeline/suite-{session.session}/**/*.errors.jsonl); their instances count "
                          "as missing in this run's tables. Run the same command again to retry them.")
                console.print(f"[bold red]warning:[/] {failed}")
            with _progress(console, as_json) as prog:
                bar = prog.add_task("notebooks", total=len(artifacts))
                for a in artifacts:
                    prog.update(bar, description=f"notebook {a}")
                    name = f"notebook {a}"
                    if rp.is_complete(a, session.session, results) and session.part(name).status == "done" \
                            and not failed:
                        timings.append((f"{a} notebook", 0.0, "already complete (skipped)"))
                    else:
                        t0 = time.monotonic()
                        path = rp.timed_part(session, name, lambda a=a: rp.run_notebook(session, a, workers=workers))
                        if failed:
                            session.part(name).status = "partial"        # rerun after the units are retried
                        timings.append((f"{a} notebook", time.monotonic() - t0, str(path / "notebook.ipynb")))
                    prog.advance(bar)
        if session is not None and not failed:
            rp.pin(session)
        t0 = time.monotonic()
        own = results / "paper" / "reported_numbers.json"
        report = build_all(results, figures, reported_path=own if own.is_file() else paper.DEFAULT_PATH)
        timings.append(("paper_figures", time.monotonic() - t0, f"{len(report.files)} files in {figures}"))
        if session is not None:
            session.part("paper_figures").status = "done"
            session.part("paper_figures").seconds = round(time.monotonic() - t0, 1)
            rp.finish(session, complete=not failed)
        runs = shown_runs(results, artifacts)
        total = time.monotonic() - t_all
        rows = [r for run in runs.values() if run is not None for r in measured_rows(run)]
        if as_json:
            emit_json({"preset": pre.name, "session": session.session if session else None,
                       "timings": [{"part": n, "seconds": round(s, 1), "detail": d} for n, s, d in timings],
                       "measured": rows, "figures": str(figures), "results": str(results), "total_s": round(total, 1)})
            return
        _summary(console, pre, session, runs, rows, timings, total, results, figures)
        if session is not None and session.status != "finished":
            console.print(f"[bold red]incomplete:[/] {failed}")
            raise typer.Exit(ExitCode.UNITS_FAILED)


def _progress(console, quiet: bool):
    from rich import progress as bars  # lazy: rich, off the start-up path


    return bars.Progress(bars.TextColumn("{task.description}"), bars.BarColumn(), bars.MofNCompleteColumn(),
                         bars.TimeElapsedColumn(), console=console, disable=quiet, transient=False)


def _summary(console, pre, session, runs, rows, timings, total, results, figures) -> None:
    from rich.table import Table  # lazy: rich, off the start-up path

    from execcritic.results.pins import pins_path  # lazy: pandas

    console.rule("[bold]Summary")
    console.print(f"Preset [bold]{pre.name}[/]: {pre.banner}")
    t = Table(title="What ran, and how long it took", show_lines=False)
    for col in ("part", "time", "where / what"):
        t.add_column(col)
    for name, secs, detail in timings:
        t.add_row(name, _duration(secs), detail)
    t.add_row("[bold]total", f"[bold]{_duration(total)}", "")
    console.print(t)
    m = Table(title="Measured (this run) beside reported (paper)")
    for col in ("artifact", "condition (paper label)", "metric", "measured [95% CI]", "n", "reported (paper)"):
        m.add_column(col, overflow="fold")
    stand_ins = sorted({n for r in rows if r["stand_in"] for n in r["stand_in"].split(", ")})
    for r in rows:
        mark = " *" if r["stand_in"] else ""
        m.add_row(r["artifact"], r["condition"] + mark, r["metric"], f"{r['measured']} {r['ci']}", r["n"],
                  r["reported"])
    if rows:
        console.print(m)
        if stand_ins:
            console.print(f"* measured with a stand-in ({'; '.join(stand_ins)}), not the paper's model: the "
                          "reported value beside it is the paper's for its own model, shown for scale only.")
    else:
        console.print("No measured values (nothing ran, or every condition is not run here).")
    counts = []
    for a, run in runs.items():
        if run is None:
            counts.append(f"{a}: no run")
            continue
        why = (run.manifest.get("not_run") or {}).values()
        stood = sum("stand-in instead" in w for w in why)
        counts.append(f"{a}: {len(why) - stood} not run here" + (f", {stood} measured only with a stand-in" if stood else ""))
    console.print("Paper conditions without a measurement of their own (the reason is in each table): " +
                  "; ".join(counts))
    where = [f"results: {results}/<artifact>/{session.session}/ (records.jsonl, summary.csv, deltas.csv, "
             "conditions.csv, notebook.ipynb)" if session
             else f"results: {results}/ (the pinned runs: {pins_path(results).name})",
             f"figures: {figures}/ (README.md, <artifact>.md/.tex, figure5/figure6 .png/.pdf)"]
    if session:
        where.append(f"session log: {session.path}")
    for w in where:
        console.print(w)
