"""What one verified-git instance costs here: building its (repository, version) environment and its checkout
in an empty cache, the first official evaluation (Gold) on them, and the same again with everything cached.

Disk is what `du` counts (hard links once: uv installs from its cache by hard link, so a venv's own bytes can be
fewer than its size). PyPI downloads come from uv's cache when it has them (the report says where it was).
The per-environment and per-checkout costs of the whole qualification are in results/verified_git/envs.json and
instances.jsonl; this script adds the first-run vs cached time of one instance.

  EXECCRITIC_VERIFIED=... EXECCRITIC_GIT_SOURCES=... python experiments/verified_git_cost.py \\
      --instance django__django-11099 --out results/verified_git/cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from execcritic.evaluation.official import evaluate_official
from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.tasks.envbuild import uv_binary, uv_cache_dir
from execcritic.tasks.environment import environment_for
from execcritic.tasks.git import build as git_build
from execcritic.tasks.git import load_verified_git
from execcritic.tasks.git.recipe import load_recipe
from execcritic.tasks.git.source import source_for


def one_pass(task, env, root: Path) -> dict:
    t0 = time.monotonic()
    source = source_for(task.repo)
    built, _ = git_build.build_env(env, source=source, root=root)
    t1 = time.monotonic()
    co = git_build.prepare_checkout(task.instance_id, task.base_commit, built, env, source=source, root=root)
    t2 = time.monotonic()
    res = evaluate_official(task, task.patch, environment_for(task, root=root))
    t3 = time.monotonic()
    return {"env_seconds": round(t1 - t0, 1), "env_built": not built.record.get("reused"),
            "checkout_seconds": round(t2 - t1, 1), "checkout_built": not co.reused,
            "gold_seconds": round(t3 - t2, 1), "gold": "resolved" if res.resolved else
            ("unresolved" if res.valid else f"invalid: {res.error[:200]}"), "total_seconds": round(t3 - t0, 1),
            "env_disk_bytes": git_build.disk_bytes(built.root), "checkout_disk_bytes": git_build.disk_bytes(co.path)}


def main(argv: list[str] | None = None) -> int:
    note_start()    # the manifest names the code this script started with
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instance", required=True)
    ap.add_argument("--out", default="results/verified_git/cost.json")
    args = ap.parse_args(argv)
    (task,) = load_verified_git(instance_ids=[args.instance])
    env = load_recipe().envs[task.extra["verified_git"]["env"]]
    with tempfile.TemporaryDirectory(prefix="verified-git-cost-", dir=os.environ.get("TMPDIR")) as tmp:
        root = Path(tmp) / "verified-git"
        first = one_pass(task, env, root)
        cached = one_pass(task, env, root)
    payload = {"instance": task.instance_id, "env": env.key, "python": env.python, "first_run": first,
               "cached": cached, "uv_cache": str(uv_cache_dir(uv_binary())),
               "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
               "note": "first_run: an empty execcritic cache (env, checkout) with uv's package cache as it was; "
                       "cached: the same commands again. The official sweb.eval.* image could not be pulled "
                       "here (no registry), so the comparison with pulling and running it is not measured"}
    write_result(args.out, payload, build_manifest(extra={"instance": task.instance_id}))
    print(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
