"""`execcritic generate-tests | repair | score | run | summarize`: the evaluation pipeline (Appendix A.3)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import List, Optional

import typer

from execcritic.cli.common import JSON_OPTION, emit_json, guarded
from execcritic.config import PAPER, ProtocolConfig


# Named budget profiles. `paper` is the protocol as published; `smoke` is a small-budget run for the
# embedded CPU model (a few turns per phase) - every value it changes is recorded as a deviation.
PROFILES = {
    "paper": {},
    "smoke": {"round0_turns": 4, "turns_per_round": 3, "revision_rounds": 2, "test_turns": 4,
              "max_submissions": 2},
}


def _protocol(round0_turns, turns_per_round, revision_rounds, test_turns, max_submissions, test_timeout,
              profile: str = "paper") -> ProtocolConfig:
    """Paper defaults, with explicit (recorded) deviations only where the user asks for them."""
    if profile not in PROFILES:
        raise typer.BadParameter(f"unknown profile {profile!r}; known: {sorted(PROFILES)}")
    preset = PROFILES[profile]
    round0_turns = round0_turns if round0_turns is not None else preset.get("round0_turns")
    turns_per_round = turns_per_round if turns_per_round is not None else preset.get("turns_per_round")
    revision_rounds = revision_rounds if revision_rounds is not None else preset.get("revision_rounds")
    test_turns = test_turns if test_turns is not None else preset.get("test_turns")
    max_submissions = max_submissions if max_submissions is not None else preset.get("max_submissions")
    p = PAPER
    repair = dataclasses.replace(p.repair, **{k: v for k, v in (("round0_turns", round0_turns),
                                                                  ("turns_per_round", turns_per_round),
                                                                  ("revision_rounds", revision_rounds)) if v is not None})
    test = dataclasses.replace(p.test_agent, **{k: v for k, v in (("max_turns", test_turns),
                                                                    ("max_submissions", max_submissions)) if v is not None})
    harness = dataclasses.replace(p.harness, **({"test_timeout_s": test_timeout} if test_timeout else {}))
    return dataclasses.replace(p, repair=repair, test_agent=test, harness=harness)


def _tasks(dataset: str, split: str, instances: list[str] | None, limit: int | None):
    from execcritic.tasks import load_tasks

    ts = load_tasks(dataset, split=split, instance_ids=instances or None)
    tasks = list(ts)
    return (tasks[:limit] if limit else tasks), ts


def register(app: typer.Typer) -> None:
    def make(stage: str, help_text: str):
        @app.command(stage, help=help_text)
        def command(
            dataset: str = typer.Argument("verified-sdist", help="task set: file, hub id, alias or verified-sdist"),
            out: Path = typer.Option(Path("runs/default"), help="run directory (records, trajectories)"),
            instance: Optional[List[str]] = typer.Option(None, help="instance id (repeatable)"),
            limit: Optional[int] = typer.Option(None, help="first N tasks"),
            split: str = typer.Option("test"),
            test_source: List[str] = typer.Option(["oracle"], help="oracle | none | a model spec (repeatable)"),
            repair_model: str = typer.Option("local", help="model spec for the Repair agent"),
            runs: int = typer.Option(3, help="Repair runs per (issue, source); paper: 3"),
            workers: int = typer.Option(1, help="parallel units"),
            executor: str = typer.Option("threads", help="threads | ray"),
            backend: Optional[str] = typer.Option(None, help="local | docker (default: the task's own)"),
            round0_turns: Optional[int] = typer.Option(None, help="deviation from the paper's 200"),
            turns_per_round: Optional[int] = typer.Option(None, help="deviation from the paper's 40"),
            revision_rounds: Optional[int] = typer.Option(None, help="deviation from the paper's 5"),
            test_turns: Optional[int] = typer.Option(None, help="deviation from the paper's 60"),
            max_submissions: Optional[int] = typer.Option(None, help="deviation from the paper's 5"),
            test_timeout: Optional[float] = typer.Option(None, help="seconds per gate check (paper: 240)"),
            profile: str = typer.Option("paper", help="budget profile: paper | smoke (recorded deviations)"),
            no_progress: bool = typer.Option(False, help="no progress bars"),
            as_json: bool = JSON_OPTION,
        ) -> None:
            from execcritic.pipeline import stages
            from execcritic.pipeline.models import served_specs
            from execcritic.results.manifest import build_manifest

            with guarded(as_json):
                tasks, ts = _tasks(dataset, split, instance, limit)
                protocol = _protocol(round0_turns, turns_per_round, revision_rounds, test_turns, max_submissions,
                                     test_timeout, profile)
                builtin = [s for s in test_source if s in stages.SOURCES_BUILTIN]
                models = [s for s in test_source if s not in stages.SOURCES_BUILTIN]
                need_repair_model = stage in ("repair", "run")
                wanted = [repair_model if need_repair_model else None, *models]
                with served_specs(*wanted) as served:
                    endpoints = tuple((w, s) for w, s in zip(wanted, served) if w and s and w != s)
                    cfg = stages.PipelineConfig(out_dir=str(out), test_sources=tuple(builtin + models),
                                                repair_model=repair_model, runs=runs, backend=backend,
                                                protocol=protocol, endpoints=endpoints)
                    kw = dict(workers=workers, backend=executor, show_progress=not no_progress)
                    if stage == "run":
                        summaries = stages.run_all(tasks, cfg, **kw)
                    else:
                        fn = {"generate-tests": stages.generate_tests, "repair": stages.repair,
                              "score": stages.score}[stage]
                        summaries = {stage: fn(tasks, cfg, **kw)}
                summary = stages.summarize(tasks, cfg)
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
