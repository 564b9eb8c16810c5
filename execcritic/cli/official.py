"""`execcritic official DATASET --instance ID --patch FILE`: the official evaluator (all F2P + P2P)."""

from __future__ import annotations

from pathlib import Path

import typer

from execcritic.cli.common import JSON_OPTION, emit_json, guarded, protocol_options
from execcritic.config import ProtocolConfig
from execcritic.evaluation.official import evaluate_official, resolve_patch_arg
from execcritic.tasks import load_tasks
from execcritic.tasks.environment import environment_for


def register(app: typer.Typer) -> None:
    app.command("official")(official)


@protocol_options
def official(dataset: str = typer.Argument(..., help="verified-sdist, a parquet/JSONL file, hub id or alias"),
             instance: str = typer.Option(..., "--instance", help="instance id"),
             patch: str = typer.Option(..., "--patch", help="patch file, or 'gold' / 'empty'"),
             backend: str = typer.Option(None, "--backend", help="docker or local (default: the task's own)"),
             log_dir: str = typer.Option(None, help="keep eval.sh and test_output.txt here"),
             split: str = typer.Option("test", help="split for hub datasets"),
             as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Score one patch with SWE-bench's grading; did-not-run is valid=false, never 'unresolved'.

    Exit status: 0 resolved, 1 valid but unresolved, 3 invalid (did not run / patch did not apply).
    """
    with guarded(as_json):
        task = load_tasks(dataset, split=split, instance_ids=[instance]).get(instance)
        diff = resolve_patch_arg(task, patch)
        env = environment_for(task, backend=backend)
        res = evaluate_official(task, diff, env, harness=protocol.harness,
                                log_dir=Path(log_dir) if log_dir else None)
    if as_json:
        emit_json(res.to_dict())
    else:
        state = "RESOLVED" if res.resolved else ("unresolved" if res.valid else "INVALID (did not run)")
        typer.echo(f"{res.instance_id}: {state}  [backend {res.backend}, {res.duration_s:.1f}s]")
        typer.echo(f"  FAIL_TO_PASS  pass {len(res.f2p_pass)}  fail {len(res.f2p_fail)}")
        typer.echo(f"  PASS_TO_PASS  pass {len(res.p2p_pass)}  fail {len(res.p2p_fail)}")
        for name in res.f2p_fail[:10]:
            typer.echo(f"  F2P failing: {name}")
        for name in res.p2p_fail[:10]:
            typer.echo(f"  P2P failing: {name}")
        if res.error:
            typer.echo(f"  error: {res.error[:3000]}")
    raise typer.Exit(0 if res.resolved else (1 if res.valid else 3))
