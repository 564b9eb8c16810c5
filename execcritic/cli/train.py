"""`execcritic train sft | test-rl | repair-rl | evaluate`: training on real episodes, and the loop back into
the evaluation pipeline. Thin: the work is in `execcritic.training.run` and `execcritic.training.evaluate`."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from execcritic.cli.common import (BACKEND, DATASET, INSTANCES, JSON_OPTION, LIMIT, NO_PROGRESS, choice,
                                   choices, emit_json, load_selected, progress_on, protocol_options, run_dir_option)
from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.pipeline import preflight
from execcritic.pipeline.stats import shown

app = typer.Typer(no_args_is_help=True, help="SFT and GRPO on real episodes (TRL, CPU-testable); evaluate a "
                                             "trained checkpoint with the pipeline.")

CANDIDATES = typer.Option(None, "--candidates", help="labeled pools: a `candidates build` run directory (required "
                          "for test-rl; restricts repair-rl to its RL set)")
WORKERS_EP = typer.Option(1, "--workers", "-w", min=1, max=1024,
                          help="episodes (or pipeline units) run in parallel (threads)")
TORCH_THREADS = typer.Option(1, "--torch-threads", min=1, max=1024, help="torch CPU threads of the trainer")
SEED = typer.Option(0, "--seed", min=0, help="seed of episode sampling and the data order")
OFFICIAL = typer.Option("always", "--official", metavar="always|needed", callback=choice("always", "needed"),
                        help="repair-rl: official evaluation on every usable terminal patch ('always') or only where "
                             "Eq. 6 depends on it ('needed')")
FEEDBACK_FROM = typer.Option(None, "--feedback-from", help="repair-rl, Table 6's generated-test feedback: a "
                             "generation.jsonl whose qualified bundles are the feedback tests (repeatable; instances "
                             "without one are left out and listed in the manifest); default: one Oracle F2P test")
FEEDBACK_GENERATOR = typer.Option(None, "--feedback-generator", help="with --feedback-from: only bundles of this "
                                  "record source (e.g. model:<spec>), when the files hold several per instance")
LABEL = typer.Option("", "--label", help="label shown in progress lines and the manifest (e.g. 'CPU smoke run')")
DATA = typer.Option(..., "--data", help="generation.jsonl with Test-agent trajectories, or with --agent repair "
                    "the repair.jsonl of `execcritic run` (repeatable)")
REASONING = typer.Option(True, "--reasoning/--no-reasoning", metavar="", help="keep the teacher's reasoning (Table 4)")
TEACHER = typer.Option(None, "--teacher", help="teacher name (default: the records' model source)")
AGENT = typer.Option("test", "--agent", metavar="test|repair", callback=choice("test", "repair"),
                     help="which agent: test | repair")
POLICY = typer.Argument(..., help="a HF checkpoint dir, or 'smollm2' / 'tiny'")
EPISODES = typer.Option(2, "--episodes", min=1, max=100_000, help="episodes per instance")
EPISODE_OUT = typer.Option(..., "--out", help="episode records (JSONL; resumable); the summary goes to "
                           "<out>.summary.json")
CHECKPOINT = typer.Argument(..., help="a HF checkpoint dir (e.g. runs/train/<run_id>/final)")
OUT = typer.Option(None, "--out", callback=run_dir_option,
                   help="pipeline run directory (default: runs/eval/<checkpoint parent name>)")
WHAT = typer.Option(["test", "repair"], "--what", callback=choices("test", "repair"),
                    help="test (generation + B2G audit) and/or repair (resolved rate); repeatable")
PRESET = typer.Option("custom", "--preset", help="a name for this run's setting, recorded in the results store "
                      "(e.g. cpu-smoke, paper); the numbers come from -c/--set")
MODEL = typer.Option("smollm2", "--model", help="HF checkpoint dir, or 'tiny' / 'smollm2'")
RUN_ID = typer.Option(None, "--run-id", help="run id (default: <UTC time>-<kind>-<preset>)")
RESUME = typer.Option(False, "--resume", metavar="", help="continue run --run-id from its last checkpoint")
INIT = typer.Option(None, "--init", help="what --model is, as Figure 6b names the curve: base | sft | ... (default: "
                    "base for tiny/smollm2, the kind of run that wrote a checkpoint of this CLI, else 'checkpoint')")


def _run_id(kind: str, preset: str, run_id: str | None) -> str:
    return run_id or f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{kind}-{re.sub(r'[^A-Za-z0-9._-]', '_', preset)}"


def _model(model: str) -> str:
    if model not in ("tiny", "smollm2") and not (Path(model) / "config.json").is_file():
        raise InputError("--model is 'tiny', 'smollm2' or a HF checkpoint directory (with config.json)",
                         file=model, field="--model")
    return model


def _files(paths: list[str], flag: str) -> list[str]:
    for p in paths:
        if not Path(p).is_file():
            raise InputError("no such file", file=p, field=flag)
    return paths


def _emit(result: dict, as_json: bool) -> None:
    if as_json:
        emit_json(result)
    else:
        typer.echo(json.dumps({k: v for k, v in result.items() if k != "steps"}, indent=2, default=str))


RL_SECTIONS = {"test-rl": ("harness", "workspace", "test_agent", "test_reward", "grpo", "test_rl"),
               "repair-rl": ("harness", "workspace", "repair", "repair_reward", "grpo", "repair_rl")}


def _rl(kind: str):
    @protocol_options(*RL_SECTIONS[kind])
    def command(
        dataset: str = DATASET, instance: Optional[List[str]] = INSTANCES, limit: Optional[str] = LIMIT,
        candidates: Optional[str] = CANDIDATES, preset: str = PRESET, model: str = MODEL,
        run_id: Optional[str] = RUN_ID, resume: bool = RESUME, workers: int = WORKERS_EP,
        torch_threads: int = TORCH_THREADS, seed: int = SEED, official: str = OFFICIAL, label: str = LABEL,
        backend: Optional[str] = BACKEND, init: Optional[str] = INIT, as_json: bool = JSON_OPTION,
        feedback_from: Optional[List[str]] = FEEDBACK_FROM, feedback_generator: Optional[str] = FEEDBACK_GENERATOR,
        *, protocol: ProtocolConfig,
    ) -> None:
        from execcritic.training.run import TrainRun, train  # lazy: torch/transformers/trl (train extra)

        if kind == "test-rl" and (feedback_from or feedback_generator):
            raise InputError("--feedback-from/--feedback-generator choose a Repair agent's feedback tests "
                             "(repair-rl only)", field="--feedback-from")
        if feedback_generator and not feedback_from:
            raise InputError("--feedback-generator selects among --feedback-from's bundles: give --feedback-from",
                             field="--feedback-generator")
        feedback_from = _files(list(feedback_from or []), "--feedback-from")
        if kind == "test-rl" and not candidates:
            raise InputError("test-rl needs --candidates (a `candidates build` run directory)", field="--candidates")
        if candidates and not Path(candidates).is_dir():
            raise InputError("no such candidate run directory", file=candidates, field="--candidates")
        if resume and not run_id:
            raise InputError("--resume continues a run: give its --run-id", field="--resume")
        tasks, ts = load_selected(dataset, instance, limit)
        preflight.prepare_environments(tasks, backend)
        run = TrainRun(kind=kind, preset=preset, model=_model(model), run_id=_run_id(kind, preset, run_id),
                       protocol=protocol, tasks=tasks, candidates=candidates, workers=workers, seed=seed,
                       resume=resume, backend=backend, threads=torch_threads, official=official, label=label,
                       init=init, datasets=[ts.manifest()], command=sys.argv, feedback_from=feedback_from,
                       feedback_generator=feedback_generator)
        _emit(train(run), as_json)

    command.__doc__ = {"test-rl": "Test-agent GRPO (Eq. 5, Table 7) on real Test episodes with labeled candidates.",
                       "repair-rl": "Repair-agent GRPO (Eq. 6, Table 8) on real Repair episodes with one Oracle F2P "
                                    "test, or generated tests (--feedback-from, Table 6)."}[kind]
    return command


app.command("test-rl")(_rl("test-rl"))
app.command("repair-rl")(_rl("repair-rl"))


@app.command("sft")
@protocol_options("sft", "grpo", "test_agent")
def sft_cmd(
    data: List[str] = DATA, preset: str = PRESET, model: str = MODEL, run_id: Optional[str] = RUN_ID,
    resume: bool = RESUME, reasoning: bool = REASONING, teacher: Optional[str] = TEACHER,
    torch_threads: int = TORCH_THREADS, seed: int = SEED, label: str = LABEL, init: Optional[str] = INIT,
    agent: str = AGENT, as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig,
) -> None:
    """SFT on admitted teacher trajectories: the Test agent's (Table 7a; protocol-valid, clean Base failure) or,
    with --agent repair, the Repair agent's (`execcritic run` records whose terminal patch passed the local gate)."""
    from execcritic.training.run import TrainRun, train  # lazy: torch/transformers/trl (train extra)

    if resume and not run_id:
        raise InputError("--resume continues a run: give its --run-id", field="--resume")
    run = TrainRun(kind="sft", preset=preset, model=_model(model), run_id=_run_id("sft", preset, run_id),
                   protocol=protocol, sft_data=_files(list(data), "--data"), reasoning_visible=reasoning,
                   teacher=teacher, agent=agent, seed=seed, resume=resume, threads=torch_threads, label=label, init=init,
                   command=sys.argv)
    _emit(train(run), as_json)


@app.command("eval-episodes")
@protocol_options(*RL_SECTIONS["test-rl"], *RL_SECTIONS["repair-rl"])
def eval_episodes_cmd(
    model: str = POLICY, dataset: str = DATASET, instance: Optional[List[str]] = INSTANCES,
    limit: Optional[str] = LIMIT, agent: str = AGENT, episodes: int = EPISODES, out: Path = EPISODE_OUT,
    candidates: Optional[str] = CANDIDATES, seed: int = SEED, torch_threads: int = TORCH_THREADS,
    backend: Optional[str] = BACKEND, label: str = LABEL, as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig,
) -> None:
    """Evaluate a policy on the RL episodes themselves (in process, the training sampler): Test valid-submission,
    Base-gate and B2G rates, or Repair usable-patch and resolved rates and Eq. 6 reward, with bootstrap CIs."""
    from execcritic.training.heldout import run_evaluation  # lazy: torch/transformers

    if candidates and not Path(candidates).is_dir():
        raise InputError("no such candidate run directory", file=candidates, field="--candidates")
    tasks, ts = load_selected(dataset, instance, limit)
    preflight.prepare_environments(tasks, backend)
    result = run_evaluation(_model(model), agent, tasks, out, protocol=protocol, episodes=episodes, seed=seed,
                            backend=backend, candidates=candidates, threads=torch_threads, label=label,
                            datasets=[ts.manifest()], command=sys.argv)
    _emit(result, as_json)


@app.command("evaluate")
@protocol_options("harness", "workspace", "test_agent", "repair")
def evaluate_cmd(
    checkpoint: Path = CHECKPOINT, dataset: str = DATASET, instance: Optional[List[str]] = INSTANCES,
    limit: Optional[str] = LIMIT, out: Optional[Path] = OUT, what: List[str] = WHAT, workers: int = WORKERS_EP,
    backend: Optional[str] = BACKEND, no_progress: bool = NO_PROGRESS, as_json: bool = JSON_OPTION, *,
    protocol: ProtocolConfig,
) -> None:
    """Serve CHECKPOINT and evaluate it with the pipeline: Test B2G audit and Repair resolved rate."""
    from execcritic.training.evaluate import evaluate_checkpoint  # lazy: torch for serving (cpu-model extra)

    if not (checkpoint / "config.json").is_file():
        raise InputError("not a HF checkpoint directory (no config.json)", file=str(checkpoint), field="CHECKPOINT")
    tasks, ts = load_selected(dataset, instance, limit)
    preflight.prepare_environments(tasks, backend)
    target = out or Path("runs/eval") / checkpoint.resolve().parent.name
    result = evaluate_checkpoint(checkpoint, tasks, target, protocol=protocol, what=what, workers=workers,
                                 backend=backend, show_progress=progress_on(as_json, no_progress),
                                 datasets=[ts.manifest()], command=sys.argv)
    if as_json:
        emit_json(result)
        return
    audit = result.get("audit") or {}
    typer.echo(f"checkpoint {result['checkpoint']}")
    if audit:
        typer.echo(f"  Test: Base-to-Gold {shown(audit['b2g_pct'])} of {audit['tasks']} (misses "
                   f"{audit['miss_kinds']})")
    for label, s in result["pipeline"]["sources"].items():
        typer.echo(f"  Repair [{label}]: resolved {shown(s['resolved_pct_mean'])} (runs "
                   f"{', '.join(shown(x) for x in s['resolved_pct_per_run'])}), final reasons {s['final_reasons']}")
    typer.echo(f"  records and evaluation.json in {result['out']}")
