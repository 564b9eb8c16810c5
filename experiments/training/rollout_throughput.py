"""Rollout throughput of real Test-agent episodes on CPU: the same episodes (same rows, same seeds) with 1 and
with 2 worker threads, each worker an `HFPolicy` on the shared weights (`training.grpo.GroupRolloutRunner`).

Reports wall time, episodes per minute, the process's CPU time (self + sandboxed children), model tokens and
tokens per second, per-episode rollout/generation/scoring seconds (generation = time inside the model's sampling;
the rest of an episode is sandboxes, tool commands, the Base gate and the Gold audit), and the machine's load
average before, during (sampled every 5 s) and after (the development machines are shared: wall times there are
inflated by other tenants; CPU time is not).

  python experiments/training/rollout_throughput.py --model smollm2 --instance sympy__sympy-24443 \
      --out results/training/cpu-smoke-throughput.json
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

from execcritic.config import load_protocol
from execcritic.harness.gate import LabeledPatch
from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.tasks.sdist import load_verified_sdist
from execcritic.training.episodes import TestEpisode, test_row
from execcritic.training.grpo import GroupRolloutRunner, role_config
from execcritic.training.run import load_model
from execcritic.training.trl_adapter import peak_rss_mb, rollout_sampling


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class LoadSampler:
    """The 1-minute load average sampled every `every_s` seconds while a measurement runs (shared machines)."""

    def __init__(self, every_s: float = 5.0):
        self.every_s, self.samples, self._stop = every_s, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every_s)

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        xs = self.samples or [os.getloadavg()[0]]
        return {"load1_mean": round(statistics.fmean(xs), 2), "load1_max": round(max(xs), 2),
                "load1_samples": len(xs), "every_s": self.every_s}


def main(argv: list[str]) -> int:
    note_start()    # the manifest names the code this script started with
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--instance", action="append", required=True)
    ap.add_argument("--rollouts", type=int, default=2, help="episodes per instance")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", action="append", default=[], dest="sets")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    proto = load_protocol("cpu-train", ["test_agent.max_turns=3", "test_agent.max_output_tokens=96", *args.sets])
    tasks = list(load_verified_sdist(instance_ids=args.instance))
    model, tok, facts = load_model(args.model)
    # the Gold audit and discrimination run only for a qualified bundle; an untrained model rarely gets one, so
    # the pool does not change the cost measured here: Gold alone keeps the rows valid
    rows = [test_row(t, [LabeledPatch(t.patch, True, "gold")], proto) for t in tasks]
    out: dict = {"model": facts, "instances": args.instance, "rollouts_per_instance": args.rollouts, "runs": []}
    t_start, timings = time.monotonic(), {}
    for w in args.workers:
        # the sampling GRPO training uses (`make_trainer`): Table 7c's temperature with the Test agent's per-turn
        # response budget; without it a turn may run to the context window and the episodes are not training's
        runner = GroupRolloutRunner("test", TestEpisode(proto), rows, protocol=proto, workers=w,
                                    sampling=rollout_sampling(role_config("test", proto), proto))
        runner._model, runner._tokenizer = model, tok
        model.eval()
        load0, cpu0, t0 = os.getloadavg(), cpu_seconds(), time.monotonic()
        with LoadSampler() as load:
            groups = runner.run_groups(rows, args.rollouts, step=0, first_index=0)
        wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
        eps = [r for g in groups for r in g]
        tokens = sum(r.sample.model_tokens for r in eps if r.sample)
        run = {"workers": w, "episodes": len(eps), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
               "episodes_per_min": round(60 * len(eps) / wall, 3), "model_tokens": tokens,
               "model_tokens_per_s": round(tokens / wall, 2),
               "rollout_s_median": statistics.median(r.info.get("rollout_s", 0.0) for r in eps),
               "generate_s_median": statistics.median(r.info.get("generate_s", 0.0) for r in eps),
               "score_s_median": statistics.median(r.info.get("score_s", 0.0) for r in eps),
               "generate_share": round(sum(r.info.get("generate_s", 0.0) for r in eps)
                                       / max(1e-9, sum(r.info.get("rollout_s", 0.0) + r.info.get("score_s", 0.0)
                                                       for r in eps)), 4),
               "episodes_detail": [{k: r.info.get(k) for k in ("instance_id", "exit_status", "turns", "rollout_s",
                                                                "generate_s", "score_s", "aborted")}
                                   | {"model_tokens": r.sample.model_tokens if r.sample else 0,
                                      "sequence_tokens": len(r.sample.prompt_ids) + len(r.sample.completion_ids)
                                      if r.sample else 0} for r in eps],
               "exit_statuses": [r.info.get("exit_status") for r in eps],
               "load_avg_before": [round(x, 2) for x in load0], "load_avg_after": [round(x, 2) for x in os.getloadavg()],
               "load_during": load.summary(),
               "peak_rss_mb": round(peak_rss_mb(), 1)}
        print(run, flush=True)
        run["sampling"] = runner.sampling.to_dict()
        out["runs"].append(run)
        timings[f"workers_{w}_wall_s"] = run["wall_s"]
    timings["total_wall_s"] = round(time.monotonic() - t_start, 2)
    manifest = build_manifest(config=proto, model=facts, timings=timings, extra={"artifact": "training-throughput",
                                                                "label": "CPU measurement (shared machine)"})
    write_result(Path(args.out), out, manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
