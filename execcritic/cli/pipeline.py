"""`execcritic generate-tests | repair | score | run`: the evaluation pipeline (Appendix A.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from execcritic.cli.common import JSON_OPTION, emit_json, guarded, protocol_options
from execcritic.config import ProtocolConfig
from execcritic.pipeline import stages
from execcritic.pipeline.config import SOURCES_BUILTIN, PipelineConfig
from execcritic.pipeline.models import served_specs
from execcritic.pipeline.stats import summarize
from execcritic.results.manifest import build_manifest
from execcritic.tasks import load_tasks


def _tasks(dataset: str, split: str, instances: list[str] | None, limit: int | None):
    ts = load_tasks(dataset, split=split, instance_ids=instances or None)
    tasks = list(ts)
    return (tasks[:limit] if limit else tasks), ts


STAGES = {"generate-tests": stages.generate_tests, "repair": stages.repair, "score": stages.score}


def register(app: typer.Typer) -> None:
    def make(stage: str, help_text: str):
        @app.command(stage, help=help_text)
        @protocol_options
        def command(
            dataset: str = typer.Argument("verified-sdist", help="task set: file, hub id, alias or verified-sdist"),
            out: Path = typer.Option(Path("runs/default"), help="run directory (records, trajectories)"),
            instance: Optional[List[str]] = typer.Option(None, help="instance id (repeatable)"),
            limit: Optional[int] = typer.Option(None, help="first N tasks"),
            split: str = typer.Option("test"),
            test_source: List[str] = typer.Option(["oracle"], help="oracle | none | a model spec (repeatable)"),
            repair_model: str = typer.Option("local", help="model spec for the Repair agent"),
            workers: int = typer.Option(1, help="parallel units"),
            executor: str = typer.Option("threads", help="threads | ray"),
            backend: Optional[str] = typer.Option(None, help="local | docker (default: the task's own)"),
            no_progress: bool = typer.Option(False, help="no progress bars"),
            as_json: bool = JSON_OPTION,
            *, protocol: ProtocolConfig,
        ) -> None:
            with guarded(as_json):
                tasks, ts = _tasks(dataset, split, instance, limit)
                builtin = [s for s in test_source if s in SOURCES_BUILTIN]
                models = [s for s in test_source if s not in SOURCES_BUILTIN]
                wanted = [repair_model if stage in ("repair", "run") else None, *models]
                with served_specs(*wanted) as served:
                    endpoints = tuple((w, s) for w, s in zip(wanted, served) if w and s and w != s)
                    cfg = PipelineConfig(out_dir=str(out), test_sources=tuple(builtin + models),
                                         repair_model=repair_model, backend=backend, protocol=protocol,
                                         endpoints=endpoints)
                    kw = dict(workers=workers, backend=executor, show_progress=not no_progress)
                    if stage == "run":
                        summaries = stages.run_all(tasks, cfg, **kw)
                    else:
                        summaries = {stage: STAGES[stage](tasks, cfg, **kw)}
                summary = summarize(tasks, cfg)
                manifest = build_manifest(config=protocol, datasets=[ts.manifest()],
                                          model={"repair": cfg.repair_model, "test_sources": list(cfg.test_sources)},
                                          extra={"stages": {k: v.to_dict() for k, v in summaries.items()}})
                Path(out).mkdir(parents=True, exist_ok=True)
                (Path(out) / "summary.json").write_text(json.dumps({"manifest": manifest, "summary": summary},
                                                                   indent=2, default=str))
            if as_json:
                emit_json({"stages": {k: v.to_dict() for k, v in summaries.items()}, "summary": summary})
            else:
                for k, v in summaries.items():
                    typer.echo(f"{k}: {v.to_dict()}")
                typer.echo(json.dumps(summary, indent=2))

        return command

    make("generate-tests", "One Test-generation episode per (issue, Test source); Base-gate every bundle.")
    make("repair", "Repair runs (Round 0 + feedback-guided revision) reusing each qualified bundle.")
    make("score", "Fresh official evaluation of every terminal Repair patch.")
    make("run", "generate-tests -> repair -> score, resumable.")
