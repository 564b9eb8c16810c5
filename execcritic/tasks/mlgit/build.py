"""Build `multilingual-git` instance checkouts: the row's Base, fetched, with the Base's build in it.

Layout under the cache root (`$EXECCRITIC_CACHE/multilingual-git`, else the user cache dir):

    checkouts/<instance_id>/     the row's base_commit (and its submodules at the commits it records), fetched
                                 shallowly from the named git source; the eval_script's build steps run once at
                                 the Base under bubblewrap (no network, the checkout at /testbed), so its build
                                 products are part of the prepared Base; .git/execcritic-checkout.json written last

Tracked files the build changed (generated sources a repository commits, e.g. jq's src/lexer.c) are put back, so
the Base is the row's commit plus build products. A run copies the checkout with its build (times kept), applies its patches and runs the eval_script's build
steps again: make and cmake rebuild only what the patches touched. The guarantees are `envbuild`'s: idempotent
(reused when built from the same base commit, build steps and toolchain versions), locked, atomic, held shared by
sandboxes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from execcritic.files import atomic_write
from execcritic.tasks.envbuild import StepLog, build_once, bwrap_prefix, cache_base
from execcritic.tasks.git.build import PreparedCheckout, checkout_record, checkout_reusable, disk_bytes
from execcritic.tasks.git.source import fetch_commit, git_env, source_for
from execcritic.tasks.mlgit.script import build_steps
from execcritic.tasks.mlgit.toolchain import TOOLCHAINS, NativeEnv, native_env

#: a build of the Base (redis with its dependencies, jq with oniguruma) on a slow machine
BUILD_TIMEOUT_S = 3600
# what the build steps see: no venv, no user configuration; $(nproc) works inside the sandbox
BUILD_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp",
             "LANG": "C.UTF-8", "TERM": "dumb"}


def cache_root() -> Path:
    return cache_base() / "multilingual-git"


def checkout_dir(instance_id: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "checkouts" / instance_id


def build_digest(env: NativeEnv, steps: list[str]) -> str:
    """What a prepared checkout was built from besides its commit: the toolchain's versions, the build steps, the
    submodules fetched, and that tracked files are restored after the build."""
    subs = TOOLCHAINS[env.repo].submodules
    return hashlib.sha256(json.dumps({"env": env.digest(), "steps": steps, "restore_tracked": True,
                                      **({"submodules": list(subs)} if subs is not None else {})}).encode()
                          ).hexdigest()[:16]


def prepare_checkout(task, env: NativeEnv | None = None, *, source: str | None = None, root: Path | None = None,
                     log: Callable[[str], None] | None = None) -> PreparedCheckout:
    """The row's Base with the Base's build (see the module docstring), built once per (base commit, build)."""
    env = env or native_env(task.repo)
    source = source or source_for(task.repo)
    steps_run = build_steps(task.eval_script)
    d = checkout_dir(task.instance_id, root)
    digest = build_digest(env, steps_run)

    def build_into(staging: Path) -> PreparedCheckout:
        t0 = time.monotonic()
        steps = StepLog()
        fetch_commit(source, task.base_commit, staging, steps=steps, log=log,
                     submodules=TOOLCHAINS[task.repo].submodules)
        fetched = time.monotonic() - t0
        script = "set -euxo pipefail\ncd /testbed\n" + "\n".join(steps_run) + "\n"
        run_env = {k: v for k, (v, _) in TOOLCHAINS[task.repo].run_env.items()}     # what every run sees too
        steps.run(bwrap_prefix(staging, [], network=False) + ["bash", "-c", script],
                  what=f"build the Base ({len(steps_run)} steps of the eval_script)", env={**BUILD_ENV, **run_env},
                  log=log, timeout=BUILD_TIMEOUT_S)
        restored = restore_tracked(staging)
        record = {"instance_id": task.instance_id, "base_commit": task.base_commit, "env": env.key,
                  "env_digest": digest, "toolchain": dict(env.packages), "build_steps": steps_run,
                  "restored_after_build": restored,
                  "fetch_seconds": round(fetched, 2), "build_seconds": round(time.monotonic() - t0 - fetched, 2),
                  "seconds": round(time.monotonic() - t0, 2), "steps": steps.steps,
                  "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        record["disk_bytes"] = disk_bytes(staging)
        atomic_write(checkout_record(staging), json.dumps(record, indent=1))
        return PreparedCheckout(d, record)

    found, now = build_once(d, lambda: checkout_reusable(d, task.base_commit, digest), build_into)
    found.record["reused"] = not now
    return found


def restore_tracked(checkout: Path) -> list[str]:
    """Put back the tracked files the Base's build changed (jq's build regenerates src/lexer.c, which the repository
    tracks and Gold patches: measured on jqlang__jq-2681, Gold did not apply to the built checkout). The Base is the
    row's commit plus build products, never a changed source; a run's own build steps regenerate what they need
    after its patches, as in the row's image. Returns the restored paths."""
    res = subprocess.run(["git", "-C", str(checkout), "diff", "--name-only", "-z", "--ignore-submodules=all"],
                         capture_output=True, env=git_env(), check=True)
    changed = [p for p in res.stdout.decode(errors="surrogateescape").split("\0") if p]
    if changed:
        subprocess.run(["git", "-C", str(checkout), "checkout", "-q", "--", *changed], env=git_env(), check=True)
    return changed


def ensure(tasks, *, sources: Mapping[str, str] | None = None, root: Path | None = None,
           log: Callable[[str], None] | None = None, advance: Callable[[str], None] | None = None) -> dict:
    """Build (or reuse) the checkouts of multilingual-git tasks: what a command runs before its first unit."""
    out: dict[str, list[str]] = {"envs": [], "checkouts": [], "built": []}
    for task in tasks:
        if not (task.extra or {}).get("multilingual_git"):
            continue
        env = native_env(task.repo)
        if env.key not in out["envs"]:
            out["envs"].append(env.key)
        co = prepare_checkout(task, env, source=source_for(task.repo, sources), root=root, log=log)
        out["checkouts"].append(task.instance_id)
        if not co.reused:
            out["built"].append(task.instance_id)
        if advance:
            advance(task.instance_id)
    return out
