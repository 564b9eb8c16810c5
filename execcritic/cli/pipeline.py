"""`execcritic generate-tests | repair | score | run`: the evaluation pipeline (Appendix A.3)."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from execcritic.cli.common import (BACKEND, DATASET, EXECUTOR, INSTANCES, JSON_OPTION, LIMIT, NO_PROGRESS,
                                   SPLIT, WORKERS, emit_json, load_selected, progress_on, protocol_options,
                                   run_dir_option, stderr_console, unit_failures)
from execcritic.config import ProtocolConfig
from execcritic.files import atomic_write_json
from execcritic.pipeline import preflight, stages
from execcritic.pipeline.config import SOURCES_BUILTIN, PipelineConfig
from execcritic.pipeline.models import served_specs
from execcritic.pipeline.stats import shown, summarize
from execcritic.results.fingerprint import check_fingerprint, claim
from execcritic.results.manifest import build_manifest
from execcritic.results.records import check_records

RECORD_FILES = ("generation", "repair", "score")
STAGES = {"generate-tests": stages.generate_tests, "repair": stages.repair, "score": stages.score}
# the protocol sections each stage reads (its options and `--set` keys, and its run fingerprint)
SECTIONS = {"generate-tests": ("harness", "workspace", "test_agent"), "repair": ("harness", "workspace", "repair"),
            "score": ("harness",), "run": ("harness", "workspace", "test_agent", "repair")}
TEST_SOURCE = typer.Option(["oracle"], "--test-source", "-t",
                           help="oracle | none | a model spec for the Test agent (repeatable)")
REPAIR_MODEL = typer.Option("local", "--repair-model", help="model spec of the Repair agent (`local`: the embedded "
                            "CPU model; openai:<url>#<model>; hf:<checkpoint dir>; scripted:<file>:<factory>)")
OUT = typer.Option(Path("runs/default"), "--out", callback=run_dir_option,
                   help="run directory (records, trajectories); an existing one "
                   "continues, if it was made with the same settings")


def register(app: typer.Typer) -> None:
    def make(stage: str, help_text: str):
        reads_repair = stage in ("repair", "run")

        @protocol_options(*SECTIONS[stage])
        def command(dataset: str = DATASET, out: Path = OUT, instance: Optional[List[str]] = INSTANCES,
                    limit: Optional[str] = LIMIT, split: str = SPLIT, test_source: List[str] = TEST_SOURCE,
                    repair_model: str = REPAIR_MODEL, workers: int = WORKERS, executor: str = EXECUTOR,
                    backend: Optional[str] = BACKEND, no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION,
                    *, protocol: ProtocolConfig) -> None:
            _run_stage(stage, dataset, out, instance, limit, split, test_source,
                       repair_model if reads_repair else None, workers, executor, backend,
                       progress_on(as_json, no_progress), as_json, protocol)

        if not reads_repair:  # a command shows only the options it reads
            command = _without(command, "repair_model")
        command.__doc__ = help_text
        app.command(stage, help=help_text)(command)

    make("generate-tests", "One Test-generation episode per (issue, Test source); Base-gate every bundle.")
    make("repair", "Repair runs (Round 0 + feedback-guided revision) reusing each qualified bundle.")
    make("score", "Fresh official evaluation of every terminal Repair patch.")
    make("run", "generate-tests -> repair -> score, resumable.")


def _without(fn, name: str):
    # annotations resolved here: the strings `from __future__ import annotations` leaves in a borrowed signature
    # cannot be resolved from the wrapper, and typer >= 0.29 then fails on the first option it coerces
    sig, hints = inspect.signature(fn), typing.get_type_hints(fn)
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in sig.parameters.values() if p.name != name]

    def wrapper(**kwargs):
        return fn(**kwargs, **{name: None})

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper


def _run_stage(stage: str, dataset: str, out: Path, instance, limit, split: str, test_source: list[str],
               repair_model: str | None, workers: int, executor: str, backend: str | None, progress: bool,
               as_json: bool, protocol: ProtocolConfig) -> None:
    console = stderr_console()
    models = [s for s in dict.fromkeys(test_source) if s not in SOURCES_BUILTIN]
    specs = {f"--test-source {m}": m for m in models}
    if repair_model is not None:
        specs["--repair-model"] = repair_model
    preflight.check_specs(specs)                                  # before anything is loaded or started
    tasks, ts = load_selected(dataset, instance, limit, split)
    fingerprint = stages.run_fingerprint(stage, SECTIONS[stage], protocol, dataset_sha=ts.sha256,
                                         repair_model=repair_model, backend=backend)
    check_fingerprint(out, fingerprint, record=False)
    check_records(*(p for k, p in PipelineConfig(out_dir=str(out)).paths.items() if k in RECORD_FILES))
    envs = preflight.prepare_environments(tasks, backend, log=console.print if progress else None)
    wanted = [repair_model, *models]
    with served_specs(*wanted) as served:
        endpoints = tuple((w, s) for w, s in zip(wanted, served) if w and s and w != s)
        preflight.probe_endpoints({flag: dict(endpoints).get(spec, spec) for flag, spec in specs.items()})
        claim(out)                                                # one writer per run directory, from here on
        check_fingerprint(out, fingerprint)
        cfg = PipelineConfig(out_dir=str(out), test_sources=tuple(dict.fromkeys(test_source)),
                             repair_model=repair_model or "", backend=backend, protocol=protocol,
                             endpoints=endpoints)
        kw = dict(workers=workers, backend=executor, show_progress=progress,    # a Ray node without an env makes it
                  prepare=preflight.NodeEnvironments(backend) if executor == "ray" else None)
        if stage == "run":
            summaries = stages.run_all(tasks, cfg, **kw)
        else:
            summaries = {stage: STAGES[stage](tasks, cfg, **kw)}
    summary = summarize(tasks, cfg)
    manifest = build_manifest(config=protocol, datasets=[ts.manifest()],
                              model={"repair": repair_model, "test_sources": list(cfg.test_sources)},
                              extra={"stages": {k: v.to_dict() for k, v in summaries.items()},
                                     "fingerprint": fingerprint, "environments": envs})
    atomic_write_json(Path(out) / "summary.json", {"manifest": manifest, "summary": summary})
    code = unit_failures(summaries.values(), console, as_json=as_json)
    if as_json:
        emit_json({"stages": {k: v.to_dict() for k, v in summaries.items()}, "summary": summary,
                   "exit_code": int(code)})
    else:
        _print_summary(Console(), stage, summaries, summary, out)
    raise typer.Exit(code)


def _print_summary(console: Console, stage: str, summaries, summary: dict, out: Path) -> None:
    work = Table(title="units", title_justify="left")
    for col in ("stage", "total", "done now", "already done", "errored", "counts"):
        work.add_column(col)
    for name, s in summaries.items():
        work.add_row(name, str(s.total), str(s.done), str(s.skipped), str(s.errors),
                     " ".join(f"{k}={v}" for k, v in sorted(s.counts.items())))
    console.print(work)
    table = Table(title=f"{summary['tasks']} task(s), {summary['runs']} Repair run(s) per (task, Test source)",
                  title_justify="left")
    for col in ("Test source", "qualified", "resolved (mean over runs)", "per run", "local pass",
                "official invalid", "official missing"):
        table.add_column(col)
    for label, s in summary["sources"].items():
        table.add_row(label, f"{s['qualified']}/{summary['tasks']}", shown(s["resolved_pct_mean"]),
                      ", ".join(shown(x) for x in s["resolved_pct_per_run"]) or "-", str(s["local_pass"]),
                      str(s["official_invalid"]), str(s["official_missing"]))
    console.print(table)
    turns = summary.get("revision_turns") or {}
    if turns.get("n"):
        console.print(f"revision turns over {turns['n']} repaired trajectories: mean {turns['mean']}, "
                      f"median {turns['median']}, p90 {turns['p90']}")
    console.print(f"records and summary.json in {out}")
