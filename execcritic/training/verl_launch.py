"""Launching a recipe with verl (the `paper` preset's engine): the job a notebook starts past its cost gate.

A `TrainRun` (the same one the TRL path trains on CPU) becomes one `VerlJob`:
- RL (`test-rl`, `repair-rl`): `python -m verl.trainer.main_ppo` with the run's launch file
  (`verl_config.render_yaml(role, protocol)`: Tables 7-8 for the paper's protocol, byte-equal to the committed
  `verl_configs/<role>_rl.yaml`; a recipe's own knobs, e.g. Table 3's standard objective, change it), the rows of
  `run.rl_rows` as verl's dataset (`verl_adapter.verl_record`), the protocol every Ray process reads
  (`$EXECCRITIC_PROTOCOL`), and the Ray cluster to join (`ray_kwargs.ray_init.address`; unset: a local one).
- SFT: `verl.trainer.sft_trainer` under `torch.distributed.run` on this node (verl's SFT trainer does not use Ray)
  on the admitted trajectories (`build_sft_set`) as verl's multi-turn `messages`/`tools` rows, with Table 7a's
  knobs.

Its homes are the TRL path's: `runs/train/<run_id>/` (launch file, data, verl's checkpoints, `final/`) and
`results/<training|sft>/<run_id>/` (`launch.log`: every line verl printed, also streamed to the caller;
`verl_metrics.jsonl`: verl's own per-step metrics; `metrics.jsonl` in the results store's schema; manifest). verl
resumes a killed job from its last checkpoint (`trainer.resume_mode=auto`); the last checkpoint becomes the Hugging
Face directory `final/` the role is served from (`verl.model_merger` for the Megatron actor; SFT saves `hf_model`).

`cluster_gpus` counts the GPUs of the cluster a job would join: a launch on fewer than its layout needs is refused
before it starts. What runs on this machine (no GPU): every file and the command (composed by verl's own Hydra
configs in the tests), the GPU count of a real local Ray cluster, and a real `main_ppo` started on it failing
closed. A launch that trains needs GPUs, Megatron-Core and SGLang, and was never run here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from execcritic.config import ProtocolConfig
from execcritic.errors import ExecCriticError, InputError
from execcritic.rewards import REWARD_OVER, STOP_REASONS
from execcritic.training.verl_config import ENGINE_DEVIATIONS, PROTOCOL_ENV, RUNTIME, render_yaml

REPO = Path(__file__).resolve().parents[2]        # verl resolves `agent_loop_config_path` from the working dir
PPO_MODULE = "verl.trainer.main_ppo"
SFT_MODULE = "verl.trainer.sft_trainer"
MERGER_MODULE = "verl.model_merger"
PROJECT = "execcritic"
VERL_METRICS = "verl_metrics.jsonl"
LAUNCH_LOG = "launch.log"
#: verl's per-step keys -> the results store's `training` columns (the rest stay in verl_metrics.jsonl); the
#: DAPO counts are the replay buffer's (`verl_sampler`), the rest verl's own
TRAINING_COLUMNS = {
    "reward_mean": "training/execcritic/reward_mean", "reward_std": "training/execcritic/reward_std",
    "masked_share": "training/execcritic/masked_share", "kept_groups": "training/execcritic/kept_groups",
    "dropped_groups": "training/execcritic/dropped_groups", "n_rollouts": "training/execcritic/n_rollouts",
    "filler_groups": "training/execcritic/filler_groups", "offered_groups": "training/execcritic/groups_offered",
    "stop_reason": "training/execcritic/offer_cap", "reward_over": "training/execcritic/reward_over",
    "optimizer_steps_skipped": "training/execcritic/optimizer_steps_skipped",
    "reward_mean_offered": "training/execcritic/reward_mean_offered",
    "reward_n_offered": "training/execcritic/reward_n_offered",
    "loss": "actor/pg_loss", "kl": "actor/ppo_kl", "lr": "actor/lr", "entropy": "actor/entropy",
    "clip_ratio": "actor/pg_clipfrac", "response_tokens_mean": "response_length/mean", "wall_s": "timing_s/step",
}
SFT_COLUMNS = {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm"}


class VerlLaunchFailed(ExecCriticError):
    """The verl job ended without a checkpoint (its exit status and the tail of its log say why)."""


@dataclass(frozen=True)
class VerlJob:
    """One verl launch: the command, its environment additions, and where everything lands."""

    kind: str
    run_id: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    home: Path
    results: Path
    gpus: int
    backend: str                        # the checkpoint format: megatron (RL actor) | fsdp (SFT)

    @property
    def checkpoints(self) -> Path:
        return self.home / "checkpoints"

    @property
    def final(self) -> Path:
        return self.home / "final"

    @property
    def command(self) -> str:
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items()) + " " + shlex.join(self.argv)


def _role(kind: str) -> str:
    return {"test-rl": "test", "repair-rl": "repair"}.get(kind, "test")


def gpus_needed(kind: str) -> int:
    """The GPUs of the recipe's layout (Tables 7e, 8b: 8 GPUs x 1 node; SFT on the Test agent's)."""
    rt = RUNTIME[_role(kind)]
    return rt.gpus_per_node * rt.nodes


def _common(run_id: str, home: Path, results: Path, protocol: ProtocolConfig, attempt: int) -> tuple[list[str], dict]:
    home.mkdir(parents=True, exist_ok=True)
    results.mkdir(parents=True, exist_ok=True)
    proto = home / "protocol.yaml"
    proto.write_text(yaml.safe_dump(protocol.to_dict(), sort_keys=True))
    overrides = [f"trainer.project_name={PROJECT}", f"trainer.experiment_name={run_id}",
                 f"trainer.default_local_dir={home / 'checkpoints'}", "trainer.logger=[console,file]",
                 "trainer.resume_mode=auto", f"hydra.run.dir={home / 'hydra'}"]   # not ./outputs of the checkout
    # verl's file logger truncates its file when it opens it: one file per attempt, merged by step afterwards
    env = {PROTOCOL_ENV: str(proto), "VERL_FILE_LOGGER_PATH": str(results / f"verl_metrics.attempt{attempt}.jsonl")}
    return overrides, env


def _attempt(results: Path) -> int:
    return len(list(results.glob("verl_metrics.attempt*.jsonl"))) + 1


def rl_job(kind: str, *, run_id: str, model: str, rows: Sequence[Mapping[str, Any]], task_set: str,
           protocol: ProtocolConfig, home: Path, results: Path, ray_address: str | None = None,
           python: str = sys.executable) -> VerlJob:
    """The verl job of a Test or Repair GRPO run on `rows` (`training.run.rl_rows`)."""
    from execcritic.training.verl_adapter import verl_record, write_verl_dataset  # lazy: imports verl and torch

    role = _role(kind)
    overrides, env = _common(run_id, home, results, protocol, _attempt(results))
    launch = home / "launch"
    launch.mkdir(exist_ok=True)
    (launch / f"{role}_rl.yaml").write_text(render_yaml(role, protocol))
    data = write_verl_dataset([verl_record(role, dict(r), task_set) for r in rows], home / "train.parquet")
    rl = protocol.test_rl if role == "test" else protocol.repair_rl
    overrides += [f"data.train_files={data}", f"data.val_files={data}", "trainer.test_freq=-1",
                  "trainer.val_before_train=false", f"actor_rollout_ref.model.path={model}",
                  f"trainer.total_training_steps={rl.steps}", f"trainer.save_freq={rl.save_interval}"]
    if ray_address:
        overrides.append(f"+ray_kwargs.ray_init.address={ray_address}")
    argv = (python, "-m", PPO_MODULE, "--config-path", str(launch), "--config-name", f"{role}_rl", *overrides)
    return VerlJob(kind, run_id, argv, env, home, results, gpus_needed(kind), "megatron")


def sft_job(*, run_id: str, model: str, rows: Sequence[Mapping[str, Any]], protocol: ProtocolConfig, home: Path,
            results: Path, python: str = sys.executable) -> VerlJob:
    """The verl job of an SFT run on admitted trajectories (`build_sft_set` rows: `messages`, `tools`)."""
    import pandas as pd  # lazy: only for writing datasets

    s, g = protocol.sft, protocol.grpo
    if not rows:
        raise InputError("no admitted SFT trajectory to train on", field="sft_data")
    if s.epochs != int(s.epochs):
        raise InputError(f"verl's SFT trainer runs whole epochs; sft.epochs is {s.epochs}", field="sft.epochs")
    overrides, env = _common(run_id, home, results, protocol, _attempt(results))
    data = home / "sft.parquet"
    pd.DataFrame([{"messages": r["messages"], "tools": r["tools"]} for r in rows]).to_parquet(data, index=False)
    gpus = gpus_needed("sft")
    overrides += [f"data.train_files={data}", "data.messages_key=messages", "data.tools_key=tools",
                  f"data.max_length={s.max_length}", "data.truncation=right", f"data.train_batch_size={s.batch_size}",
                  f"model.path={model}", f"optim.lr={s.learning_rate}", f"optim.betas=[{g.adam_beta1},{g.adam_beta2}]",
                  f"optim.weight_decay={g.weight_decay}", f"trainer.total_epochs={int(s.epochs)}",
                  f"trainer.save_freq={protocol.test_rl.save_interval}",   # SFT states none: the RL interval
                  "checkpoint.save_contents=[model,optimizer,extra,hf_model]"]
    argv = (python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc_per_node={gpus}",
            "-m", SFT_MODULE, *overrides)
    return VerlJob("sft", run_id, argv, env, home, results, gpus, "fsdp")


def cluster_gpus(address: str | None = None, *, timeout_s: float = 120.0) -> int:
    """GPUs of the Ray cluster at `address` (its `cluster_resources`), or of this machine when None (a local
    cluster is started on it by the job). A cluster that cannot be reached is an error naming the address."""
    if not address:
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        except (FileNotFoundError, subprocess.TimeoutExpired):
            return 0
        return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else 0
    probe = ("import json, ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
             "print(json.dumps(ray.cluster_resources())); ray.shutdown()" % address)
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise InputError(f"the Ray cluster at {address} did not answer within {timeout_s:g} s",
                         field="ray_address") from None
    if out.returncode != 0:
        raise InputError(f"cannot join the Ray cluster at {address}: {_tail(out.stderr, 3)}", field="ray_address")
    return int(json.loads(out.stdout.strip().splitlines()[-1]).get("GPU", 0))


def _tail(text: str, n: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def latest_step(checkpoints: Path) -> int | None:
    """The last step verl saved (its `latest_checkpointed_iteration.txt`; SFT: the highest `global_step_N`)."""
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    if marker.is_file():
        return int(marker.read_text().strip())
    steps = [int(m.group(1)) for p in checkpoints.glob("global_step_*") if (m := re.fullmatch(r"global_step_(\d+)", p.name))]
    return max(steps) if steps else None


def read_verl_metrics(results: Path) -> list[dict[str, Any]]:
    """verl's per-step metrics over every attempt of the job (its file logger's `{"step", "data"}` lines; a
    resumed attempt's row replaces the earlier one of the same step), in step order."""
    by_step: dict[int, dict[str, Any]] = {}
    for path in sorted(results.glob("verl_metrics.attempt*.jsonl"), key=lambda p: int(p.stem.split("attempt")[1])):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                step, data = int(rec["step"]), dict(rec["data"])
            except (ValueError, KeyError, TypeError):
                raise InputError("not a verl file-logger line (needs 'step' and 'data')", file=f"{path}:{n}") from None
            by_step.setdefault(step, {}).update(data)
    return [{"step": s, **by_step[s]} for s in sorted(by_step)]


def schema_rows(kind: str, verl_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the results store's `training` (RL: 0-based step) or `sft` schema from verl's metrics. An RL step
    without the replay buffer's DAPO counts is an error: the curve would lack what makes it readable."""
    out = []
    for r in verl_rows:
        if kind == "sft":
            if "train/loss" not in r:
                continue                        # a validation-only row
            out.append({"step": int(r["step"]), **{k: r.get(v) for k, v in SFT_COLUMNS.items()},
                        "mean_token_accuracy": None})
            continue
        missing = [v for k, v in TRAINING_COLUMNS.items() if k in _REQUIRED and v not in r]
        if missing:
            raise InputError(f"verl's metrics of step {r['step']} lack {missing} (is the execcritic replay buffer "
                             "selected: trainer.v1.sampler.custom_sampler?)", field=missing[0])
        row = {k: r.get(v) for k, v in TRAINING_COLUMNS.items()}
        row.update(step=int(r["step"]) - 1, **{k: int(row[k]) for k in ("kept_groups", "dropped_groups", "n_rollouts")})
        # the replay buffer's numeric codes back to the TRL row's words (`rewards.end_step`); absent in old runs
        for key, words in (("stop_reason", STOP_REASONS), ("reward_over", REWARD_OVER)):
            row[key] = None if row[key] is None else words[int(row[key])]
        for key in ("filler_groups", "offered_groups", "optimizer_steps_skipped", "reward_n_offered"):
            row[key] = None if row[key] is None else int(row[key])
        row.update({k.rsplit("/", 1)[1]: int(v) for k, v in r.items() if k.startswith("training/execcritic/level_")})
        out.append(row)
    return out


_REQUIRED = ("reward_mean", "reward_std", "masked_share", "kept_groups", "dropped_groups", "n_rollouts")


_RAY_PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*m)?\([^)]*\)(?:\x1b\[[0-9;]*m)?\s*")
#: the per-step metrics a progress line shows (label, verl key)
PROGRESS = (("reward", "training/execcritic/reward_mean"), ("kept", "training/execcritic/kept_groups"),
            ("dropped", "training/execcritic/dropped_groups"), ("masked", "training/execcritic/masked_share"),
            ("loss", "actor/pg_loss"), ("loss", "train/loss"), ("s", "timing_s/step"))


def progress_line(line: str) -> str | None:
    """What the notebook shows of one line verl printed: a short line per step (verl's console logger prints every
    metric: `step:N - key:value - ...`, behind Ray's `(Actor pid=...)` prefix), errors as they are, else None."""
    text = _RAY_PREFIX.sub("", line.rstrip())
    if text.startswith("step:"):
        fields = dict(part.split(":", 1) for part in text.split(" - ") if ":" in part)
        shown = [f"{label} {fields[key]}" for label, key in PROGRESS if key in fields]
        return f"step {fields['step']}" + (": " + ", ".join(shown) if shown else "")
    if text.startswith("Traceback") or "Error" in text.split(":", 1)[0]:
        return text
    return None


def run_job(job: VerlJob, *, log: Callable[[str], None] = print, cwd: Path = REPO) -> dict[str, Any]:
    """Run `job` to its end: every line verl prints goes to `launch.log`, a progress line per step and every error
    to `log` (`progress_line`). Returns the final checkpoint, the metrics and the wall time; a job that ends without
    a checkpoint raises `VerlLaunchFailed` with its exit status and log tail."""
    log_path = job.results / LAUNCH_LOG
    log(f"[verl {job.run_id}] {job.command}")
    started = time.monotonic()
    tail: list[str] = []
    with log_path.open("a") as fh:
        fh.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {job.command}\n")
        proc = subprocess.Popen(job.argv, cwd=cwd, env={**os.environ, **job.env}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            tail = (tail + [line.rstrip()])[-40:]
            shown = progress_line(line)
            if shown is not None:
                log(f"[verl {job.run_id}] {shown}")
        rc = proc.wait()
    step = latest_step(job.checkpoints)
    if rc != 0 or step is None:
        raise VerlLaunchFailed(f"verl {job.kind} job {job.run_id} exited {rc} "
                               f"{'with no checkpoint' if step is None else f'after saving step {step}'} "
                               f"(log: {log_path}):\n" + "\n".join(tail[-15:]))
    final = merge_checkpoint(job, step, log=log)
    rows = read_verl_metrics(job.results)
    (job.results / VERL_METRICS).write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    return {"final_checkpoint": str(final), "step": step, "verl_rows": rows,
            "wall_s": round(time.monotonic() - started, 2)}


def merge_checkpoint(job: VerlJob, step: int, *, log: Callable[[str], None] = print) -> Path:
    """`final/`: the Hugging Face weights of the last saved step (SFT saved them itself; the Megatron actor is
    merged by `verl.model_merger`), replaced atomically."""
    saved = job.checkpoints / f"global_step_{step}"
    tmp = job.home / "final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if job.backend == "fsdp":
        hf = saved / "huggingface"
        if not (hf / "config.json").is_file():
            raise VerlLaunchFailed(f"verl saved no Hugging Face weights at {hf} (checkpoint.save_contents lacks "
                                   "hf_model?)")
        shutil.copytree(hf, tmp)
    else:
        argv = [sys.executable, "-m", MERGER_MODULE, "merge", "--backend", job.backend, "--local_dir",
                str(saved / "actor"), "--target_dir", str(tmp)]
        log(f"[verl {job.run_id}] {shlex.join(argv)}")
        out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        if out.returncode != 0 or not (tmp / "config.json").is_file():
            raise VerlLaunchFailed(f"merging {saved / 'actor'} into a Hugging Face checkpoint failed "
                                   f"(exit {out.returncode}):\n{_tail(out.stdout + out.stderr, 15)}")
    shutil.rmtree(job.final, ignore_errors=True)
    os.replace(tmp, job.final)
    return job.final


def train_verl(run: Any, *, task_set: str, ray_address: str | None = None, log: Callable[[str], None] = print
               ) -> dict[str, Any]:
    """Train a `training.run.TrainRun` with verl (`task_set`: the name its Ray workers load `run.tasks` from):
    its job (`rl_job` / `sft_job`), its results run in the store
    (reopened and continued when the job resumes), the job to its end, then the per-step rows and the final
    checkpoint. The same return shape as `training.run.train`."""
    from execcritic.results.store import new_run  # lazy: pandas
    from execcritic.training.run import TRAINING_META, feedback_facts, init_label, rl_rows, sft_rows  # lazy: trl

    p = run.protocol
    if run.kind == "sft":
        rows, rejected = sft_rows(run)
        instances = [r["instance_id"] for r in rows]
        extra: dict[str, Any] = {"data": run.sft_data, "admitted": len(rows), "rejected": rejected,
                                 "teacher": run.teacher, "reasoning_visible": run.reasoning_visible}
    else:
        rows = rl_rows(run)
        instances = [r["instance_id"] for r in rows]
        extra = {"candidates": run.candidates, "feedback": feedback_facts(run, rows), "official": run.official}
    artifact = "sft" if run.kind == "sft" else "training"
    writer = new_run(artifact, run.preset, run_id=run.run_id, root=run.results_root, config=p, instances=instances,
                     models={"policy": run.model}, command=run.command, datasets=run.datasets, seeds=[run.seed],
                     extra={"role": run.role, "init": init_label(run), "engine": "verl", "label": run.label,
                            "runs_dir": str(run.home), "ray_address": ray_address, **extra})
    if run.kind == "sft":
        job = sft_job(run_id=run.run_id, model=run.model, rows=rows, protocol=p, home=run.home, results=writer.path)
    else:
        job = rl_job(run.kind, run_id=run.run_id, model=run.model, rows=rows, task_set=task_set,
                     protocol=p, home=run.home, results=writer.path, ray_address=ray_address)
    writer.manifest.update({"verl_command": job.command, "gpus": job.gpus, "engine_deviations": ENGINE_DEVIATIONS})
    try:
        out = run_job(job, log=log)
        for row in schema_rows(run.kind, out["verl_rows"]):
            writer.append(row)
        (job.final / TRAINING_META).write_text(json.dumps({"kind": run.kind, "run_id": run.run_id, "engine": "verl",
                                                           "init": init_label(run), "model": run.model}, indent=2))
        writer.manifest.update({"final_checkpoint": str(job.final), "train_wall_s": out["wall_s"],
                                "last_step": out["step"]})
        loaded = writer.finalize()
    except BaseException:
        writer.close("incomplete")
        raise
    return {"run_id": run.run_id, "results": str(loaded.path), "final_checkpoint": str(job.final),
            "steps": out["step"], "wall_s": out["wall_s"]}


__all__ = ["LAUNCH_LOG", "TRAINING_COLUMNS", "VERL_METRICS", "VerlJob", "VerlLaunchFailed", "cluster_gpus",
           "gpus_needed", "latest_step", "merge_checkpoint", "progress_line", "read_verl_metrics", "rl_job", "run_job", "schema_rows",
           "sft_job", "train_verl"]
