"""`execcritic train sft | test-rl | repair-rl | evaluate`: training on real episodes, and the loop back into
the evaluation pipeline. Thin: the work is in `execcritic.training.run` and `execcritic.training.evaluate`."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import typer

from execcritic.cli.common import JSON_OPTION, emit_json, guarded, protocol_options
from execcritic.config import ProtocolConfig
from execcritic.tasks import load_tasks

app = typer.Typer(no_args_is_help=True, help="SFT and GRPO on real episodes (TRL, CPU-testable); evaluate a "
                                             "trained checkpoint with the pipeline.")

DATASET_ARG = typer.Argument("verified-sdist", help="task set")
INSTANCE = typer.Option(None, help="instance id (repeatable)")
LIMIT = typer.Option(None, help="first N tasks")
CANDIDATES = typer.Option(None, help="labeled pools: results/candidates/<run_id> (required for test-rl; restricts "
                          "repair-rl to its RL set)")
WORKERS = typer.Option(1, help="episodes (or pipeline units) run in parallel (threads)")
THREADS = typer.Option(1, help="torch CPU threads")
SEED = typer.Option(0, help="seed of episode sampling and the data order")
OFFICIAL = typer.Option("always", help="repair-rl: official evaluation on every usable terminal patch ('always') or "
                        "only where Eq. 6 depends on it ('needed')")
LABEL = typer.Option("", help="label shown in progress lines and the manifest (e.g. 'CPU smoke run')")
BACKEND = typer.Option(None, help="local | docker (default: the task's own)")
DATA = typer.Option(..., "--data", help="generation.jsonl with Test-agent trajectories (repeatable)")
REASONING = typer.Option(True, "--reasoning/--no-reasoning", help="keep the teacher's reasoning (Table 4)")
TEACHER = typer.Option(None, help="teacher name (default: the records' model source)")
CHECKPOINT = typer.Argument(..., help="a HF checkpoint dir (e.g. runs/train/<run_id>/final)")
EVAL_DATASET = typer.Option("verified-sdist", help="task set")
OUT = typer.Option(None, help="pipeline run directory (default: runs/eval/<checkpoint parent name>)")
WHAT = typer.Option(["test", "repair"], help="test (generation + B2G audit) and/or repair (resolved rate)")
NO_PROGRESS = typer.Option(False, help="no progress bars")
PRESET = typer.Option("custom", "--preset", help="a name for this run's setting, recorded in the results store "
                      "(e.g. cpu-smoke, paper); the numbers come from -c/--set")
MODEL = typer.Option("smollm2", "--model", help="HF checkpoint dir, or 'tiny' / 'smollm2'")
RUN_ID = typer.Option(None, "--run-id", help="run id (default: <UTC time>-<kind>-<preset>)")
RESUME = typer.Option(False, "--resume", help="continue run --run-id from its last checkpoint")
INIT = typer.Option(None, "--init", help="what --model is, as Figure 6b names the curve: base | sft | ... (default: "
                    "base for tiny/smollm2, the kind of run that wrote a checkpoint of this CLI, else 'checkpoint')")


def _run_id(kind: str, preset: str, run_id: str | None) -> str:
    return run_id or f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{kind}-{re.sub(r'[^A-Za-z0-9._-]', '_', preset)}"


def _tasks(dataset: str, instances: list[str] | None, limit: int | None):
    ts = load_tasks(dataset, instance_ids=instances or None)
    tasks = list(ts)
    return (tasks[:limit] if limit else tasks), ts


def _emit(result: dict, as_json: bool) -> None:
    if as_json:
        emit_json(result)
    else:
        typer.echo(json.dumps({k: v for k, v in result.items() if k != "steps"}, indent=2, default=str))


def _rl(kind: str):
    @protocol_options
    def command(
        dataset: str = DATASET_ARG, instance: list[str] | None = INSTANCE, limit: int | None = LIMIT,
        candidates: str | None = CANDIDATES, preset: str = PRESET, model: str = MODEL, run_id: str | None = RUN_ID,
        resume: bool = RESUME, workers: int = WORKERS, threads: int = THREADS, seed: int = SEED,
        official: str = OFFICIAL, label: str = LABEL, backend: str | None = BACKEND, init: str | None = INIT,
        as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig,
    ) -> None:
        from execcritic.training.run import TrainRun, train  # lazy: torch/transformers/trl (train extra)

        with guarded(as_json):
            tasks, ts = _tasks(dataset, instance, limit)
            run = TrainRun(kind=kind, preset=preset, model=model, run_id=_run_id(kind, preset, run_id),
                           protocol=protocol, tasks=tasks, candidates=candidates, workers=workers, seed=seed,
                           resume=resume, backend=backend, threads=threads, official=official, label=label,
                           init=init, datasets=[ts.manifest()], command=sys.argv)
            result = train(run)
        _emit(result, as_json)

    command.__doc__ = {"test-rl": "Test-agent GRPO (Eq. 5, Table 7) on real Test episodes with labeled candidates.",
                       "repair-rl": "Repair-agent GRPO (Eq. 6, Table 8) on real Repair episodes with one Oracle F2P "
                                    "test."}[kind]
    return command


app.command("test-rl")(_rl("test-rl"))
app.command("repair-rl")(_rl("repair-rl"))


@app.command("sft")
@protocol_options
def sft_cmd(
    data: list[str] = DATA, preset: str = PRESET, model: str = MODEL, run_id: str | None = RUN_ID,
    resume: bool = RESUME, reasoning: bool = REASONING, teacher: str | None = TEACHER, threads: int = THREADS,
    seed: int = SEED, label: str = LABEL, init: str | None = INIT, as_json: bool = JSON_OPTION, *,
    protocol: ProtocolConfig,
) -> None:
    """Test-agent SFT (Table 7a) on admitted teacher trajectories (protocol-valid, clean Base failure)."""
    from execcritic.training.run import TrainRun, train  # lazy: torch/transformers/trl (train extra)

    with guarded(as_json):
        run = TrainRun(kind="sft", preset=preset, model=model, run_id=_run_id("sft", preset, run_id),
                       protocol=protocol, sft_data=list(data), reasoning_visible=reasoning, teacher=teacher,
                       seed=seed, resume=resume, threads=threads, label=label, init=init, command=sys.argv)
        result = train(run)
    _emit(result, as_json)


@app.command("evaluate")
@protocol_options
def evaluate_cmd(
    checkpoint: Path = CHECKPOINT, dataset: str = EVAL_DATASET, instance: list[str] | None = INSTANCE,
    limit: int | None = LIMIT, out: Path | None = OUT, what: list[str] = WHAT, workers: int = WORKERS,
    backend: str | None = BACKEND, no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION, *,
    protocol: ProtocolConfig,
) -> None:
    """Serve CHECKPOINT and evaluate it with the pipeline: Test B2G audit and Repair resolved rate."""
    from execcritic.training.evaluate import evaluate_checkpoint  # lazy: torch for serving (cpu-model extra)

    with guarded(as_json):
        tasks, ts = _tasks(dataset, instance, limit)
        target = out or Path("runs/eval") / checkpoint.resolve().parent.name
        result = evaluate_checkpoint(checkpoint, tasks, target, protocol=protocol, what=what, workers=workers,
                                     backend=backend, show_progress=not no_progress, datasets=[ts.manifest()],
                                     command=sys.argv)
    if as_json:
        emit_json(result)
        return
    audit = result.get("audit") or {}
    typer.echo(f"checkpoint {result['checkpoint']}")
    if audit:
        typer.echo(f"  Test: Base-to-Gold {audit['b2g_pct']}% of {audit['tasks']} (misses {audit['miss_kinds']})")
    for label, s in result["pipeline"]["sources"].items():
        typer.echo(f"  Repair [{label}]: resolved {s['resolved_pct_mean']}% (runs {s['resolved_pct_per_run']}), "
                   f"final reasons {s['final_reasons']}")
    typer.echo(f"  records and evaluation.json in {result['out']}")
