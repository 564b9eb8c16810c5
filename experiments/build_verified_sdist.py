"""Driver: (re)select, build and qualify the `verified-sdist` task set and write the recipe + results.

    python experiments/build_verified_sdist.py --dataset ../shared/data/swebench/verified_test.parquet \
        --repo sympy/sympy --repo django/django --jobs 2 --recipe-out execcritic/tasks/sdist/recipe.json

Same pipeline as `execcritic tasks build-sdist --reselect`; this script adds candidate sampling
(`--per-repo N`) for bounded runs.
Results: results/verified_sdist/{instances.jsonl,summary.json,manifest.json}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from execcritic.tasks import load_tasks
from execcritic.tasks.sdist import verified_source
from execcritic.tasks.sdist.build import cache_root
from execcritic.config import PAPER
from execcritic.evaluation.qualify import SUPPORTED_REPOS, run_pipeline


def dataset_manifest(rows, source: str) -> dict:
    """Name the dataset by hub id even when read from a local copy (no machine paths in results)."""
    local = Path(source).exists()
    return {**rows.manifest(), "source": "SWE-bench/SWE-bench_Verified (local copy)" if local else source}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=None,
                    help="Verified rows (path or hub id); default $EXECCRITIC_VERIFIED")
    ap.add_argument("--repo", action="append", help="repos to consider (default: all supported)")
    ap.add_argument("--instance", action="append", help="only these instance ids")
    ap.add_argument("--exclude", action="append", default=[], help="skip these instance ids")
    ap.add_argument("--per-repo", type=int, default=0, help="at most N candidates per repo (0 = all)")
    ap.add_argument("--max-tries", type=int, default=3)
    ap.add_argument("--order", choices=["version", "upload"], default="version",
                    help="which releases before the issue date are tried first")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--results", default="results/verified_sdist")
    ap.add_argument("--recipe-out", default=None, help="write the recipe here (only qualified instances)")
    args = ap.parse_args(argv)
    source = verified_source(args.dataset)
    rows = load_tasks(source)
    repos = args.repo or list(SUPPORTED_REPOS)
    tasks = [t for t in rows if t.repo in repos and t.instance_id not in set(args.exclude)]
    if args.instance:
        tasks = [t for t in tasks if t.instance_id in set(args.instance)]
    if args.per_repo:
        picked, count = [], {}
        for t in tasks:
            if count.get(t.repo, 0) < args.per_repo:
                picked.append(t)
                count[t.repo] = count.get(t.repo, 0) + 1
        tasks = picked
    summary = run_pipeline(tasks, root=cache_root(), results_dir=Path(args.results),
                           recipe_out=Path(args.recipe_out) if args.recipe_out else None,
                           max_tries=args.max_tries, jobs=args.jobs, order=args.order,
                           harness=dataclasses.replace(PAPER.harness, official_timeout_s=args.timeout),
                           dataset_manifest=dataset_manifest(rows, source))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
