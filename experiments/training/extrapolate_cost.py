"""What the paper's training recipe (Tables 7-8) would cost, extrapolated from the parts measured by the CPU smoke
runs of this repository. Labeled EXTRAPOLATION everywhere: the measured inputs come from committed files (read, not
typed in), every other input is a named ASSUMPTION (a command-line flag with its default shown in the output), and
no GPU was available, so nothing about GPU speed is measured here.

Two settings:
  one-node-cpu  this machine class (2 shared cores, TRL, the SmolLM2-135M stand-in): the recipe's rollout and token
                volume at the measured CPU rates. Qwen3.5-35B-A3B itself cannot run here at all (about 140 GB of fp32
                weights against 23 GB of RAM; SmolLM2's 8k window cannot hold the 48k/65k contexts either).
  gpu-8         one 8-GPU node as in the paper's launch configs (Megatron TP2/CP4/EP4 + SGLang rollouts): generation
                and training from ASSUMED GPU rates; sandbox and test execution from the MEASURED CPU seconds per
                execution, spread over an ASSUMED number of sandbox cores.

Model of one GRPO step (both settings):
  rollouts  = groups x rollouts_per_group x oversampling  (DAPO dynamic sampling drops zero-variance groups;
              the oversampling factor is an assumption: the smoke runs kept no group at all)
  per rollout: generation (generated tokens / generation rate) + sandbox setup (measured per episode) + agent
              commands (turns x command seconds, assumed) + scoring executions (Test: Base gate, Gold audit on Base
              and Gold, up to 8 candidates; Repair: CHECK runs and one official evaluation), each execution at the
              measured seconds of a test run in these environments
  training: forward+backward over every token of the kept rollouts (+ the logprob pass) and the optimizer step.

  PYTHONPATH=. python experiments/training/extrapolate_cost.py --out results/training/cpu-smoke-extrapolation.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from execcritic.config import PAPER
from execcritic.results.manifest import build_manifest, write_result

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
SOURCES = {
    "throughput": "training/cpu-smoke-throughput.json",
    "sft": "sft/cpu-smoke-sft-smollm2.json",
    "test_rl": "training/cpu-smoke-test-rl-smollm2/metrics.jsonl",
    "repair_rl": "training/cpu-smoke-repair-rl-smollm2/metrics.jsonl",
    "candidates": "candidates/cpu-smoke-sympy/candidates.jsonl",
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def measured(results: Path) -> dict[str, Any]:
    """Every measured input, each with the file it comes from."""
    tp = json.loads((results / SOURCES["throughput"]).read_text())
    runs = {r["workers"]: r for r in tp["runs"]}
    one = runs[min(runs)]
    eps = one["episodes_detail"]
    gen_tokens, gen_s = sum(e["model_tokens"] for e in eps), sum(e["generate_s"] for e in eps)
    overhead = (one["wall_s"] - gen_s) / len(eps)
    sft = json.loads((results / SOURCES["sft"]).read_text())
    step = sft["steps"][0]
    test_rows, repair_rows = _jsonl(results / SOURCES["test_rl"]), _jsonl(results / SOURCES["repair_rl"])
    grpo = test_rows + repair_rows
    offs = [o["official"]["duration_s"] for o in _jsonl(results / SOURCES["candidates"])
            if (o.get("official") or {}).get("valid") and not o["official"].get("timed_out")]
    grpo_rest = statistics.median(r["wall_s"] - r["rollout_s"] - r["optimizer_s"] for r in grpo)
    samples = {r["episodes"] for r in grpo}
    seq_tokens = statistics.fmean(e["sequence_tokens"] for e in eps)
    return {
        "generation_tokens_per_s_per_worker": {"value": round(gen_tokens / gen_s, 2), "source": SOURCES["throughput"],
                                               "how": f"model tokens / seconds inside sampling, {len(eps)} episodes, "
                                                      f"{min(runs)} worker, SmolLM2-135M fp32, 1 torch thread"},
        "episode_setup_s": {"value": round(overhead, 2), "source": SOURCES["throughput"],
                            "how": f"(wall - seconds inside sampling) / episodes at {min(runs)} worker: two bwrap "
                                   "sandboxes copied in and torn down, the episode loop and scoring; no agent command "
                                   "ran (SmolLM2 wrote no valid tool call)"},
        "test_execution_s": {"value": round(statistics.median(offs), 2), "source": SOURCES["candidates"],
                             "how": f"median of {len(offs)} valid official runs of labeled candidates (sympy, "
                                    "bwrap, setup + apply + F2P/P2P tests); the proxy for one bundle execution"},
        "speedup_2_workers": {"value": round(runs[max(runs)]["episodes_per_min"] / one["episodes_per_min"], 3)
                              if len(runs) > 1 else None, "source": SOURCES["throughput"],
                              "how": "episodes/min with 2 workers / with 1 (the 1-minute load average during each "
                                     "is in the source: the machine was shared)"},
        "cpu_s_per_episode": {"value": round(one["cpu_s"] / one["episodes"], 1), "source": SOURCES["throughput"],
                              "how": "process + children CPU seconds per episode at 1 worker (less load-dependent "
                                     "than wall seconds)"},
        "sft_step_s": {"value": round(step["step_s"], 2), "source": SOURCES["sft"],
                       "how": "one SFT optimizer step (forward + backward + optimizer.step) on one trajectory"},
        "sft_optimizer_step_s": {"value": round(step["optimizer_step_s"], 3), "source": SOURCES["sft"]},
        "sft_peak_rss_mb": {"value": sft["peak_rss_mb"], "source": SOURCES["sft"]},
        "grpo_train_s_per_step": {"value": round(grpo_rest, 1), "source": f"{SOURCES['test_rl']}, {SOURCES['repair_rl']}",
                                  "how": "median over the 6 GRPO steps of wall - rollout - optimizer.step: TRL's "
                                         "logprob and loss passes (forward + backward) over the step's samples and "
                                         "a checkpoint save (cpu-train saves every step)"},
        "sample_tokens": {"value": round(seq_tokens), "source": SOURCES["throughput"],
                          "how": "mean prompt + completion tokens of a trajectory sample, same instances and budgets "
                                 "as the GRPO smoke runs"},
        "train_tokens_per_s": {"value": round(max(samples) * seq_tokens / grpo_rest, 2),
                               "source": f"{SOURCES['throughput']} + GRPO metrics",
                               "how": f"{max(samples)} samples x mean sample tokens / GRPO train seconds per step "
                                      "(a lower bound on the rate: the checkpoint save is inside)"},
        "grpo_optimizer_step_s": {"value": round(statistics.median(r["optimizer_s"] for r in grpo if r["step"] > 0), 3),
                                  "source": f"{SOURCES['test_rl']}, {SOURCES['repair_rl']}",
                                  "how": "median optimizer.step() after the first (AdamW state allocated at step 0)"},
        "grpo_peak_rss_mb": {"value": max(r["peak_rss_mb"] for r in grpo),
                             "source": f"{SOURCES['test_rl']}, {SOURCES['repair_rl']}"},
    }


def per_rollout(role: str, a: argparse.Namespace, m: dict[str, Any]) -> dict[str, float]:
    """Generated tokens and sandbox seconds (setup + agent commands + scoring executions) of one rollout."""
    turns = a.test_turns if role == "test" else a.repair_turns
    executions = a.test_executions if role == "test" else a.repair_executions
    return {"turns": turns, "generated_tokens": turns * a.tokens_per_turn,
            "sandbox_s": m["episode_setup_s"]["value"] + turns * a.command_s
            + executions * m["test_execution_s"]["value"]}


def setting(name: str, role: str, a: argparse.Namespace, m: dict[str, Any]) -> dict[str, Any]:
    p = PAPER
    steps = p.test_rl.steps if role == "test" else p.repair_rl.steps
    kept = p.grpo.groups_per_step * p.grpo.rollouts_per_group
    rollouts = kept * a.oversampling
    seq = a.test_sequence_tokens if role == "test" else a.repair_sequence_tokens
    r = per_rollout(role, a, m)
    if name == "one-node-cpu":
        # one rollout at 1 worker = its generation at the measured rate + its sandbox seconds, rollouts one after
        # another (2 workers were measured no faster on this shared 2-core machine); training at the measured CPU
        # rate; nothing overlaps on one machine
        one = r["generated_tokens"] / m["generation_tokens_per_s_per_worker"]["value"] + r["sandbox_s"]
        rollout_s = rollouts * one
        gen_s = rollouts * r["generated_tokens"] / m["generation_tokens_per_s_per_worker"]["value"]
        train_s = kept * seq / m["train_tokens_per_s"]["value"] + m["grpo_optimizer_step_s"]["value"]
        step_s = rollout_s + train_s
        hours = step_s * steps / 3600
        return {"rollouts_per_step": rollouts, "rollout_phase_s": round(rollout_s),
                "generation_share_of_rollout": round(gen_s / (gen_s + rollouts * r["sandbox_s"]), 3),
                "train_s": round(train_s), "step_s": round(step_s), "steps": steps,
                "total_days": round(hours / 24, 1), "total_years": round(hours / 24 / 365, 2)}
    gen_s = rollouts * r["generated_tokens"] / (8 * a.gpu_decode_tokens_per_s)
    sandbox_s = rollouts * r["sandbox_s"] / a.sandbox_cores
    # rollouts run concurrently: the rollout phase is bounded by the aggregate generation, the sandbox cores, and
    # the longest single rollout (its turns are sequential)
    longest = r["turns"] * (a.tokens_per_turn / a.gpu_tokens_per_s_per_stream) + r["sandbox_s"]
    phase = max(gen_s, sandbox_s, longest)
    flops = (6 + 2) * a.active_params * kept * seq        # forward + backward, plus the logprob forward; KL 0: no ref
    train_s = flops / (8 * a.gpu_peak_flops * a.mfu)
    step_s = phase + train_s + a.weight_sync_s
    hours = step_s * steps / 3600
    return {"rollouts_per_step": rollouts, "generation_s": round(gen_s), "sandbox_s": round(sandbox_s),
            "longest_rollout_s": round(longest),
            "rollout_bound_by": {gen_s: "generation", sandbox_s: "sandboxes / test execution",
                                 longest: "longest rollout"}[phase],
            "train_s": round(train_s), "step_s": round(step_s), "steps": steps, "total_hours": round(hours, 1),
            "gpu_hours": round(8 * hours)}


#: (flag, default, what it is): every input that is not measured here
ASSUMPTIONS: tuple[tuple[str, float | int, str], ...] = (
    ("oversampling", 2.0, "rollouts generated per kept rollout (DAPO dynamic sampling; the smoke runs kept no group)"),
    ("test-turns", 30.0, "mean Test-agent turns (cap 60, Table 7)"),
    ("repair-turns", 60.0, "mean Repair turns over all rounds (Round 0 cap 200, then up to 5 x 40; the paper reports "
                           "a mean of 13 revision turns)"),
    ("tokens-per-turn", 400.0, "generated tokens per turn, reasoning + tool call (cap 8,192, Table 9a)"),
    ("command-s", 2.0, "mean seconds of one agent bash command in a sandbox"),
    ("test-executions", 8.0, "mean bundle executions per Test rollout (a valid one: Base gate per attempt, Gold audit "
                             "on Base and Gold, up to 8 candidates; an invalid one: none)"),
    ("repair-executions", 3.0, "mean CHECK runs + the official evaluation per Repair rollout"),
    ("test-sequence-tokens", 30_000.0, "tokens of one Test sample (context 48k, Table 7)"),
    ("repair-sequence-tokens", 40_000.0, "tokens of one Repair sample (context 65k, Table 8)"),
    ("gpu-decode-tokens-per-s", 2_500.0, "aggregate decode tokens/s per GPU for Qwen3.5-35B-A3B under SGLang at high "
                                         "concurrency - never measured here (no GPU)"),
    ("gpu-tokens-per-s-per-stream", 60.0, "decode tokens/s of one rollout's own stream - never measured here"),
    ("active-params", 3e9, "active parameters per token (A3B)"),
    ("gpu-peak-flops", 989e12, "bf16 dense peak FLOP/s per GPU (H100 SXM class)"),
    ("mfu", 0.2, "model FLOPs utilisation of Megatron MoE training with TP2/CP4/EP4"),
    ("sandbox-cores", 64, "CPU cores running sandboxes and tests beside the 8 GPUs"),
    ("weight-sync-s", 30.0, "trainer -> rollout engine weight update per step (colocated)"),
)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--out", required=True)
    g = ap.add_argument_group("ASSUMPTIONS (not measured here)")
    for name, default, what in ASSUMPTIONS:
        g.add_argument(f"--{name}", type=type(default), default=default, help=f"{what} (default {default})")
    a = ap.parse_args(argv)
    m = measured(Path(a.results))
    out = {"label": "EXTRAPOLATION from CPU smoke measurements; GPU rates are assumptions (no GPU was available)",
           "measured": m, "assumptions": {k: v for k, v in vars(a).items() if k not in ("results", "out")},
           "recipe": {"groups_per_step": PAPER.grpo.groups_per_step, "rollouts_per_group": PAPER.grpo.rollouts_per_group,
                      "test_steps": PAPER.test_rl.steps, "repair_steps": PAPER.repair_rl.steps,
                      "test_max_turns": PAPER.test_agent.max_turns, "test_context": PAPER.test_agent.context_tokens,
                      "repair_context": PAPER.repair.context_tokens, "test_timeout_s": PAPER.harness.test_timeout_s},
           "settings": {name: {role: setting(name, role, a, m) for role in ("test", "repair")}
                        for name in ("one-node-cpu", "gpu-8")}}
    # how the 8-GPU totals move when one assumption is halved or doubled (all others at their values)
    out["sensitivity_gpu8_total_hours"] = {
        name.replace("-", "_"): {f"x{f}": {role: setting("gpu-8", role, argparse.Namespace(
            **{**vars(a), name.replace("-", "_"): type(default)(getattr(a, name.replace("-", "_")) * f)}), m)["total_hours"]
            for role in ("test", "repair")} for f in (0.5, 2)}
        for name, default, _ in ASSUMPTIONS if name not in ("gpu-peak-flops",)}
    manifest = build_manifest(config=PAPER, extra={"artifact": "training-extrapolation", "label": out["label"],
                                                   "sources": SOURCES})
    write_result(Path(a.out), out, manifest)
    print(json.dumps(out["settings"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
