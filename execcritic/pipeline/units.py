"""One unit of pipeline work each: a generation episode, a Repair run, an official score (the I/O:
sandboxes, models, trajectories). Module-level functions of plain payloads, so Ray can ship them.

Agents get a `TaskView` and a harness service (`BaseGate`, `CandidateVerifier`); only this layer, the
audit and the official evaluator hold the full task.
"""

from __future__ import annotations

from typing import Any

from execcritic.agents.models.base import SamplingConfig
from execcritic.agents.repair import RepairController
from execcritic.agents.test_agent import run_test_agent
from execcritic.bundle.model import TestBundle
from execcritic.errors import InputError
from execcritic.evaluation.official import evaluate_official
from execcritic.harness.execute import base_reader
from execcritic.harness.gate import base_gate
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.harness.services import BaseGate, CandidateVerifier
from execcritic.pipeline.config import PipelineConfig, source_label
from execcritic.pipeline.envs import task_environment
from execcritic.pipeline.models import make_model
from execcritic.pipeline.records import GenerationRecord, RepairRecord, ScoreRecord
from execcritic.sandbox.base import Limits, Sandbox
from execcritic.tasks.model import Task


def _sandbox(task: Task, cfg: PipelineConfig) -> Sandbox:
    return task_environment(task, cfg.backend).open_sandbox(limits=Limits.from_config(cfg.protocol.harness))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]


def generation_unit(payload: tuple[Task, str, PipelineConfig]) -> dict[str, Any]:
    task, source, cfg = payload
    rec = GenerationRecord(task.instance_id, source_label(source))
    if source == "none":
        rec.exit_status = "no_test_source"
        return rec.to_dict()
    p = cfg.protocol
    if source == "oracle":
        with _sandbox(task, cfg) as verifier:
            try:  # the Base test modules resolve class scopes the dataset's test names leave out
                bundle = oracle_bundle(task, read_base=base_reader(verifier))
            except InputError as exc:
                rec.exit_status, rec.error = "oracle_unbuildable", str(exc)
                return rec.to_dict()
            gate = base_gate(task, bundle, sandbox=verifier, config=p.harness,
                             diagnostics_chars=p.test_agent.diagnostics_chars)
        rec.qualified = gate.qualified
        rec.exit_status = "qualified" if gate.qualified else "base_gate_failed"
        rec.bundle = bundle.to_dict() if gate.qualified else None
        rec.candidate_bundle = bundle.to_dict()
        rec.gate = gate.record
        rec.attempts_used = 1
        return rec.to_dict()
    model = make_model(cfg.resolve(source), task=task, role="test", sampling=SamplingConfig.test_agent(p))
    with _sandbox(task, cfg) as workspace, _sandbox(task, cfg) as verifier:
        gate_service = BaseGate(task, verifier, harness=p.harness, diagnostics_chars=p.test_agent.diagnostics_chars)
        res = run_test_agent(task.view(), model, workspace=workspace, gate=gate_service, config=p.test_agent,
                             workspace_config=p.workspace)
    traj = cfg.paths["test_trajectories"] / f"{_safe(task.instance_id)}__{_safe(source_label(source))}.json"
    res.trajectory.save(traj)
    episode = res.to_record()
    rec.qualified, rec.exit_status = res.qualified, res.exit_status
    rec.bundle = episode.pop("bundle")
    rec.attempts_used = episode.pop("attempts_used")
    rec.gate = next((a.gate for a in reversed(res.attempts) if a.gate), None)
    rec.trajectory = str(traj)
    rec.episode = episode
    return rec.to_dict()


def repair_unit(payload: tuple[Task, str, int, dict | None, PipelineConfig]) -> dict[str, Any]:
    task, source, run_index, bundle_dict, cfg = payload
    p = cfg.protocol
    bundle = (TestBundle(bundle_dict["test_patch"], bundle_dict["test_command"], bundle_dict["test_contract"])
              if bundle_dict else None)
    model = make_model(cfg.resolve(cfg.repair_model), task=task, role="repair", run_index=run_index,
                       sampling=SamplingConfig.repair_eval(p))
    name = f"{_safe(task.instance_id)}__{_safe(source_label(source))}__run{run_index}.json"
    traj = cfg.paths["trajectories"] / "repair" / name
    with _sandbox(task, cfg) as workspace, _sandbox(task, cfg) as verifier_box:
        verifier = (CandidateVerifier(task, bundle, verifier_box, harness=p.harness, feedback_chars=p.repair.feedback_chars)
                    if bundle is not None else None)
        controller = RepairController(task.view(), model, workspace=workspace, verifier=verifier, config=p.repair,
                                      workspace_config=p.workspace)
        try:
            res = controller.run()
        finally:  # a unit that raises (e.g. the model endpoint is down) still leaves its trajectory
            controller.trajectory.save(traj)
    return RepairRecord(task.instance_id, source_label(source), run_index, bundle is not None, res.to_record(),
                        str(traj)).to_dict()


def score_unit(payload: tuple[Task, str, str, PipelineConfig]) -> dict[str, Any]:
    task, repair_key, patch, cfg = payload
    res = evaluate_official(task, patch, task_environment(task, cfg.backend), harness=cfg.protocol.harness)
    return ScoreRecord(task.instance_id, repair_key, res.to_dict()).to_dict()
