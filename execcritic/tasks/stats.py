"""Benchmark statistics the paper quotes (Verified: 500 tasks, 12 repos, F2P median 1, mean 3.03)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from execcritic.tasks.load import TaskSet


def _summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"median": 0, "mean": 0.0, "min": 0, "max": 0}
    median = statistics.median(values)
    return {"median": int(median) if float(median).is_integer() else median,
            "mean": round(statistics.fmean(values), 2),
            "min": min(values), "max": max(values)}


def task_stats(tasks: TaskSet) -> dict[str, Any]:
    f2p = [len(t.fail_to_pass) for t in tasks]
    p2p = [len(t.pass_to_pass) for t in tasks]
    per_repo: dict[str, dict[str, Any]] = {}
    for repo, count in sorted(Counter(t.repo for t in tasks).items(), key=lambda kv: (-kv[1], kv[0])):
        repo_f2p = [len(t.fail_to_pass) for t in tasks if t.repo == repo]
        per_repo[repo] = {"tasks": count, "f2p": _summary(repo_f2p)}
    return {
        "dataset": tasks.manifest(),
        "tasks": len(tasks),
        "repos": len(per_repo),
        "languages": dict(Counter(t.language for t in tasks)),
        "fail_to_pass": _summary(f2p),
        "pass_to_pass": _summary(p2p),
        "per_repo": per_repo,
    }
