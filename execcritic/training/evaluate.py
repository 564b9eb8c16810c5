"""Close the loop: serve a trained checkpoint and evaluate it with the existing pipeline, no manual step.

`evaluate_checkpoint(ckpt, tasks, out)` = what a user would otherwise type by hand:
  execcritic generate-tests -d DATASET --test-source hf:CKPT --out OUT      (Test agent: generation + Base gate)
  execcritic audit -d DATASET --test-source bundles:OUT/generation.jsonl    (offline Gold audit: B2G)
  execcritic run -d DATASET --test-source hf:CKPT --repair-model hf:CKPT    (Repair + fresh official scoring)
run through the same pipeline functions, with the checkpoint behind one `transformers serve` process
(`pipeline.models.served_specs`, spec `hf:<dir>`). Everything is resumable (the pipeline's records) and the
summary (B2G, resolved rate, per-stage counts) is written with its manifest to `OUT/evaluation.json`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from execcritic.config import PAPER, ProtocolConfig
from execcritic.errors import InputError
from execcritic.pipeline import stages
from execcritic.pipeline.audit import AuditConfig, audit_path, run_audit, summarize_audit
from execcritic.pipeline.config import PipelineConfig
from execcritic.pipeline.models import served_specs
from execcritic.pipeline.stats import summarize
from execcritic.results.manifest import build_manifest, write_result
from execcritic.tasks.model import Task

WHAT = ("test", "repair")


def evaluate_checkpoint(checkpoint: str | Path, tasks: Sequence[Task], out: str | Path, *,
                        protocol: ProtocolConfig = PAPER, what: Sequence[str] = WHAT, workers: int = 1,
                        backend: str | None = None, show_progress: bool = True,
                        datasets: list[dict[str, Any]] | None = None,
                        command: list[str] | str | None = None) -> dict[str, Any]:
    """Test B2G audit and/or Repair resolved rate of `checkpoint` on `tasks` (see module docstring)."""
    ckpt = Path(checkpoint).resolve()
    if not (ckpt / "config.json").is_file():
        raise InputError("not a HF checkpoint directory (no config.json)", file=str(ckpt), field="checkpoint")
    unknown = set(what) - set(WHAT)
    if unknown:
        raise InputError(f"unknown evaluation {sorted(unknown)}; choose from {WHAT}", field="what")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spec = f"hf:{ckpt}"
    started = time.monotonic()
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"checkpoint": str(ckpt), "spec": spec, "out": str(out)}
    with served_specs(spec) as (served,):
        timings["serve_start_s"] = round(time.monotonic() - started, 2)
        cfg = PipelineConfig(out_dir=str(out), test_sources=(spec,) if "test" in what else ("none",),
                             repair_model=spec, backend=backend, protocol=protocol, endpoints=((spec, served),))
        kw = {"workers": workers, "show_progress": show_progress}
        t = time.monotonic()
        stage_runs = {"generate-tests": stages.generate_tests(tasks, cfg, **kw).to_dict()}
        timings["generate_s"] = round(time.monotonic() - t, 2)
        if "test" in what:
            t = time.monotonic()
            acfg = AuditConfig(out=str(audit_path(out, f"bundles:{cfg.paths['generation']}")),
                               test_source=f"bundles:{cfg.paths['generation']}", backend=backend, protocol=protocol)
            stage_runs["audit"] = run_audit(tasks, acfg, workers=workers, show_progress=show_progress).to_dict()
            result["audit"] = summarize_audit(tasks, acfg)
            timings["audit_s"] = round(time.monotonic() - t, 2)
        if "repair" in what:
            t = time.monotonic()
            stage_runs["repair"] = stages.repair(tasks, cfg, **kw).to_dict()
            stage_runs["score"] = stages.score(tasks, cfg, **kw).to_dict()
            timings["repair_score_s"] = round(time.monotonic() - t, 2)
    result["pipeline"] = summarize(tasks, cfg)
    result["stages"] = stage_runs
    result["timings"] = {**timings, "total_s": round(time.monotonic() - started, 2)}
    manifest = build_manifest(command=command, config=protocol, datasets=datasets,
                              model={"checkpoint": str(ckpt), "spec": spec, "served_as": "transformers serve, text "
                                     "mode (one fenced bash block per turn)"},
                              extra={"artifact": "checkpoint-evaluation", "instances": [t.instance_id for t in tasks],
                                     "what": list(what)})
    write_result(out / "evaluation.json", result, manifest)
    return result


__all__ = ["WHAT", "evaluate_checkpoint"]
