"""Benchmark the offline audit (a script, not a timed test).

Measures, on the qualified `verified-sdist` tasks (or --limit of them):
  1. audit throughput with 1 and 2 workers (tasks/min) and the speed-up ratio;
  2. per-check latency split into reset / apply / run / parse (medians over every Base and Gold check);
  3. the local backend's reset-before-grade (one sandbox, reset per check) against a fresh copy per
     check (a new LocalSandbox each time), on the same bundle and task, interleaved rounds.
Writes results/bench/audit.json with a manifest. Whether PYTHONDONTWRITEBYTECODE was set is recorded.

  python experiments/bench_audit.py [--limit 12] [--rounds 5] [--dataset verified-sdist]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from execcritic.harness.oracle.build import oracle_bundle
from execcritic.harness.execute import execute
from execcritic.pipeline.audit import AuditConfig, run_audit, summarize_audit
from execcritic.pipeline.envs import task_environment
from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.tasks import load_tasks


def throughput(tasks, workers: int, out_dir: Path) -> dict:
    cfg = AuditConfig(out=str(out_dir / f"audit_w{workers}.jsonl"))
    t0 = time.monotonic()
    run = run_audit(tasks, cfg, workers=workers, show_progress=False)
    wall = time.monotonic() - t0
    s = summarize_audit(tasks, cfg)
    return {"workers": workers, "tasks": len(tasks), "wall_s": round(wall, 2),
            "tasks_per_min": round(60 * len(tasks) / wall, 2), "b2g_pct": s["b2g_pct"], "errors": run.errors,
            "check_phase_median_s": s["check_phase_median_s"]}


def reset_vs_fresh(task, rounds: int) -> dict:
    env = task_environment(task)
    bundle = oracle_bundle(task)
    reuse, fresh, create = [], [], []
    sandbox = env.open_sandbox()
    try:
        execute(task, bundle, sandbox=sandbox)  # warm-up, dropped
        for _ in range(rounds):
            t = time.monotonic()
            ex = execute(task, bundle, sandbox=sandbox)
            reuse.append(time.monotonic() - t)
            assert ex.valid, ex.diagnostic
            t = time.monotonic()
            with env.open_sandbox() as s2:
                create.append(time.monotonic() - t)
                ex = execute(task, bundle, sandbox=s2)
            fresh.append(time.monotonic() - t)
            assert ex.valid, ex.diagnostic
    finally:
        sandbox.close()
    med = statistics.median
    return {"instance_id": task.instance_id, "rounds": rounds, "reset_before_grade_median_s": round(med(reuse), 3),
            "fresh_copy_median_s": round(med(fresh), 3), "fresh_copy_create_median_s": round(med(create), 3),
            "fresh_over_reset": round(med(fresh) / med(reuse), 2)}


def spread_over_repos(tasks: list, limit: int) -> list:
    """`limit` tasks taken round-robin over the repositories (instance-id order within each), so the
    sample is not all Django."""
    by_repo: dict[str, list] = {}
    for t in tasks:
        by_repo.setdefault(t.repo, []).append(t)
    picked: list = []
    while len(picked) < min(limit, len(tasks)):
        for queue in by_repo.values():
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return picked


def main() -> None:
    note_start()    # the manifest names the code this script started with
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="verified-sdist")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="results/bench/audit.json")
    args = ap.parse_args()
    ts = load_tasks(args.dataset)
    tasks = spread_over_repos(list(ts), args.limit)
    with tempfile.TemporaryDirectory() as tmp:
        one = throughput(tasks, 1, Path(tmp))
        two = throughput(tasks, 2, Path(tmp))
    repos = {}
    for t in tasks:  # one task per repo for the reset comparison
        repos.setdefault(t.repo, t)
    comparison = [reset_vs_fresh(t, args.rounds) for t in repos.values()]
    payload = {"throughput": [one, two], "speedup_2_workers": round(two["tasks_per_min"] / one["tasks_per_min"], 2),
               "reset_vs_fresh_copy": comparison, "instances": [t.instance_id for t in tasks],
               "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"), "loadavg": os.getloadavg()}
    manifest = build_manifest(datasets=[ts.manifest()], extra={"limit": args.limit, "rounds": args.rounds})
    path = write_result(args.out, payload, manifest)
    print(path)
    import json

    print(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
