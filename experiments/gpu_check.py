"""GPU check (<= 5 minutes): a few GRPO steps of the tiny random-init Qwen3.5-MoE (`training/tiny_model.py`) with
real vLLM rollouts, printing and writing throughput: rollouts/s, completion tokens/s, optimizer step time and peak
GPU memory.

NOT RUN HERE: it was written and tested on a CPU-only machine (no GPU was lent to the task that wrote it). Only
`--dry-run` has run (tests/training/test_gpu_check.py): it builds the model, validates the verl launch files
against the installed verl, imports the verl adapter, and builds the exact TRL config of the GPU run - it
measures nothing. Its JSON says `"ran": false`; never quote numbers from a dry run.

What a GPU run does: TRL 1.16 `GRPOTrainer` with `use_vllm=True, vllm_mode="colocate"` (vLLM in this process,
sharing the GPU) and the paper's GRPO settings from `ProtocolConfig` (`trl_adapter.grpo_args`: clip 0.2/0.28, KL
0, Adam 0.9/0.98, wd 0.1, no std division). Prompts are the Test agent's real opening messages for a few issues
when SWE-bench rows are available, else fixed chat prompts; the reward is SYNTHETIC (a length target, so groups
have variance) because this measures the engine, not the agents: no sandbox, no harness. It does not run the verl
stack (that needs Megatron and a multi-GPU layout; see docs/training_engines.md).

    python experiments/gpu_check.py --dry-run                  # CPU: prepare and validate, measure nothing
    python experiments/gpu_check.py [--steps 3] [--out results/bench/gpu_check.json]   # GPU + vllm installed

`--recipe learning-curve` runs the CPU learning-curve study's recipe instead (experiments/training/learning_curve.sh:
scripted stand-in teacher SFT at two sizes, GRPO from SFT on real verified-sdist episodes, checkpoint evaluations)
at a larger size (profile `gpu-curve`: 8 rollouts x 2 groups per step, 40 steps) with SmolLM2-135M on the GPU
(TRL's trainer and the in-process sampler use CUDA when it is there), then its analysis. It needs what the CPU study
needs on that machine: the task environments built (`execcritic tasks build-sdist`, which downloads sdists: build
them before the machine goes offline, or carry the cache) and the embedded model. Its dry run checks the profile,
the script and the environments, and measures nothing. Results: results/learning_curve/gpu-curve/, labeled
stand-in; never quote a number from a dry run.

Exit status: 0 ran (or a dry run passed), 2 could not run here (no CUDA or no vLLM: the JSON says why), 1 failed
(the learning-curve recipe with a task environment missing, dry run or not: one line names them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "results" / "bench" / "gpu_check.json"
FALLBACK_PROMPTS = [
    "List the Python files in the repository and show the first lines of setup.py.",
    "Find where the function parse_args is defined and print its signature.",
    "Run the test suite for the utils module and report which tests fail.",
    "Show the git log of the last three commits touching the tests directory.",
]


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def prompts(n: int) -> tuple[list[list[dict[str, str]]], str]:
    """(chat prompts, where they came from): Test-agent opening messages of real issues when the rows exist."""
    try:
        from execcritic.tasks import load_tasks
        from execcritic.training.episodes import test_prompt

        tasks = load_tasks("verified-sdist").tasks[:n]
        if tasks:
            return [test_prompt(t) for t in tasks], "verified-sdist test-agent prompts"
    except Exception as exc:  # noqa: BLE001 - prompts are a convenience; fixed ones measure the same engine
        print(f"[gpu-check] no SWE-bench rows ({type(exc).__name__}: {str(exc)[:200]}); using fixed prompts",
              file=sys.stderr)
    return [[{"role": "user", "content": p}] for p in FALLBACK_PROMPTS[:n]], "fixed prompts"


def length_reward(target: int):
    """SYNTHETIC reward (not a paper reward): closeness of the completion length to `target` tokens."""
    def reward(prompts, completions, completion_ids=None, **kwargs):
        return [-abs(len(ids) - target) / target for ids in completion_ids]
    return reward


def trl_args(out_dir: str, args, on_gpu: bool):
    from execcritic.config import PAPER
    from execcritic.training.trl_adapter import grpo_args

    g = args.generations
    return grpo_args(out_dir, role=PAPER.test_rl, grpo=PAPER.grpo, num_generations=g,
                     per_device_train_batch_size=g * args.prompts_per_step, max_steps=args.steps,
                     max_completion_length=args.max_completion, steps_per_generation=1,
                     use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=args.vllm_memory,
                     vllm_max_model_length=args.max_model_len, use_cpu=not on_gpu, bf16=on_gpu,
                     save_strategy="no", logging_steps=1, report_to="none")


def prepare(args) -> dict[str, Any]:
    """Everything but the GPU work: model, configs, imports. Returns facts for the JSON."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from execcritic.training.tiny_model import ensure_tiny_model
    from execcritic.training.verl_config import ROLES, config_file, load_verl_yaml

    facts: dict[str, Any] = {}
    started = time.monotonic()
    model_dir = Path(args.model_dir) if args.model_dir else ensure_tiny_model()
    facts["model_dir"] = str(model_dir)
    facts["model_build_s"] = round(time.monotonic() - started, 2)
    facts["verl_launch_files"] = {}
    if _version("verl"):
        for role in ROLES:
            load_verl_yaml(config_file(role))
            facts["verl_launch_files"][role] = str(config_file(role).relative_to(REPO))
        import execcritic.training.verl_adapter  # noqa: F401 - registers the loops and estimators

    facts["trl_args"] = {k: getattr(trl_args(str(Path(args.work_dir) / "trl"), args, on_gpu=False), k)
                         for k in ("use_vllm", "vllm_mode", "num_generations", "per_device_train_batch_size",
                                   "max_completion_length", "epsilon", "epsilon_high", "beta", "learning_rate",
                                   "adam_beta2", "weight_decay", "scale_rewards", "loss_type")}
    return facts


def run_gpu(args, facts: dict[str, Any]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    from execcritic.training.tiny_model import load_tiny_model
    from execcritic.training.trl_adapter import StepTimer

    model, tok = load_tiny_model(facts["model_dir"])
    chats, source = prompts(args.prompts_per_step * args.steps)
    facts["prompts"] = source
    dataset = Dataset.from_list([{"prompt": c} for c in chats])
    timer = StepTimer()
    trainer = GRPOTrainer(model=model, reward_funcs=[length_reward(args.max_completion // 2)],
                          args=trl_args(str(Path(args.work_dir) / "trl"), args, on_gpu=True), train_dataset=dataset,
                          processing_class=tok, callbacks=[timer])
    rollouts: list[dict[str, float]] = []
    inner = trainer._generate_and_score_completions

    def timed(inputs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = inner(inputs)
        torch.cuda.synchronize()
        rollouts.append({"seconds": time.perf_counter() - t0, "rollouts": int(out["completion_ids"].shape[0]),
                         "completion_tokens": int(out["completion_mask"].sum())})
        return out

    trainer._generate_and_score_completions = timed
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    measured = rollouts[1:] or rollouts          # the first rollout phase includes vLLM warm-up
    secs = sum(r["seconds"] for r in measured)
    free, total = torch.cuda.mem_get_info()
    return {"wall_s": round(wall, 2), "steps": len(timer.steps),
            "rollouts_per_s": round(sum(r["rollouts"] for r in measured) / secs, 3),
            "completion_tokens_per_s": round(sum(r["completion_tokens"] for r in measured) / secs, 1),
            "rollout_phases": rollouts, "warmup_excluded": len(rollouts) > 1,
            "optimizer_step_s": [round(s["optimizer_step_s"], 4) for s in timer.steps],
            "step_s": [round(s["step_s"], 3) for s in timer.steps],
            "peak_torch_allocated_gb": round(torch.cuda.max_memory_allocated() / 2**30, 3),
            "peak_torch_reserved_gb": round(torch.cuda.max_memory_reserved() / 2**30, 3),
            "device_used_gb_at_end": round((total - free) / 2**30, 3),
            "gpu": torch.cuda.get_device_name(0)}


LEARNING_CURVE = REPO / "experiments" / "training" / "learning_curve.sh"


def learning_curve(args, dry_run: bool) -> dict[str, Any]:
    """The learning-curve recipe at the gpu-curve size (module docstring); a dry run validates and plans only."""
    import subprocess

    from execcritic.config import load_protocol
    from execcritic.tasks import load_tasks
    from execcritic.training.grpo import batch_shape

    proto = load_protocol(args.profile)
    facts: dict[str, Any] = {"profile": args.profile, "deviations": {k: list(v) for k, v in proto.deviations().items()},
                             "batch_shape": {r: batch_shape(r, proto) for r in ("test", "repair")}}
    subprocess.run(["bash", "-n", str(LEARNING_CURVE)], check=True)
    text = LEARNING_CURVE.read_text()
    ids = sorted(set(re.findall(r"[a-z_-]+__[a-z_-]+-\d+", text.split("POOLS=")[0])))
    missing = []
    for task in load_tasks("verified-sdist", instance_ids=ids).tasks:
        from execcritic.pipeline.envs import task_environment

        env = task_environment(task, None)
        if env.checkout is None or not Path(env.checkout).is_dir():
            missing.append(task.instance_id)
    facts["instances"], facts["environments_missing"] = ids, missing
    env = {**os.environ, "PROFILE": args.profile, "STUDY": args.profile, "PY": sys.executable,
           "LABEL": f"GPU learning curve ({args.profile}), SmolLM2-135M stand-in"}
    commands = [["bash", str(LEARNING_CURVE), "all"],
                [sys.executable, str(REPO / "experiments" / "training" / "learning_curve.py"), "--study", args.profile]]
    facts["commands"] = [" ".join(c) for c in commands]
    if dry_run or missing:      # a run without its environments would fail hours in: main says what is missing
        return facts
    started = time.monotonic()
    for cmd in commands:
        subprocess.run(cmd, check=True, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, timeout=args.time_limit)
    facts["wall_s"] = round(time.monotonic() - started, 1)
    facts["summary"] = str(REPO / "results" / "learning_curve" / args.profile / "summary.json")
    return facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="prepare and validate on any machine; measure nothing")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--prompts-per-step", type=int, default=2)
    ap.add_argument("--generations", type=int, default=8, help="rollouts per prompt (the paper's 8)")
    ap.add_argument("--max-completion", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--vllm-memory", type=float, default=0.3, help="vLLM's share of GPU memory (colocated)")
    ap.add_argument("--model-dir", default=None, help="a built tiny model (default: build/cache it)")
    ap.add_argument("--work-dir", default="/tmp/execcritic-gpu-check")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--recipe", choices=("engine", "learning-curve"), default="engine",
                    help="engine: TRL + vLLM throughput, synthetic reward; learning-curve: the CPU study's recipe "
                         "at the --profile size (module docstring)")
    ap.add_argument("--profile", default="gpu-curve", help="learning-curve: the protocol profile")
    ap.add_argument("--time-limit", type=float, default=3 * 3600, help="learning-curve: seconds per command")
    args = ap.parse_args(argv)

    report: dict[str, Any] = {"script": "experiments/gpu_check.py", "ran": False, "dry_run": args.dry_run,
                              "args": vars(args), "host": platform.node(), "python": platform.python_version(),
                              "versions": {p: _version(p) for p in ("torch", "transformers", "trl", "vllm", "verl")}}
    status = 0
    try:
        import torch

        lc = args.recipe == "learning-curve"
        if not lc:
            report.update(prepare(args))
        why = None
        if not args.dry_run:
            why = ("no CUDA device" if not torch.cuda.is_available()
                   else "vllm is not installed" if not lc and not _version("vllm") else None)
        if args.dry_run:
            if lc:
                report["learning_curve"] = learning_curve(args, dry_run=True)
            report["note"] = "dry run: prepared and validated only; nothing was measured"
        elif why:
            report["not_run"] = why
            status = 2
        else:
            report["learning_curve" if lc else "results"] = (learning_curve(args, dry_run=False) if lc
                                                             else run_gpu(args, report))
            report["ran"] = True
    except Exception as exc:  # noqa: BLE001 - the report must say what failed
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()[-4000:]
        status = 1
    missing = (report.get("learning_curve") or {}).get("environments_missing")
    if missing:
        report["ran"], report["error"] = False, (f"missing task environments ({len(missing)}): {', '.join(missing)} "
                                                 "(build them: execcritic tasks build-sdist)")
        status = 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    if missing:                 # one line: what the run needs and this machine lacks
        print(f"[gpu-check] {report['error']}", file=sys.stderr)
        return status
    summary = report.get("results") or {k: report.get(k) for k in ("note", "not_run", "error") if report.get(k)}
    print(json.dumps(summary, indent=1, default=str))
    print(f"[gpu-check] ran={report['ran']} -> {out}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
