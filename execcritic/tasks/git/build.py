"""Build `verified-git` environments (one per repository x version) and instance checkouts (one per row).

Layout under the cache root (`$EXECCRITIC_CACHE/verified-git`, else the user cache dir):

    envs/<key>/venv/                   the venv SWE-bench's spec describes, shared read-only by the version's rows
    envs/<key>/setup/                  the repository at the env's setup commit, where the install ran
    envs/<key>/env.json                what was built, the lock, the install's products, timings; written last
    checkouts/<instance_id>/           the row's base_commit, fetched shallowly; pre_install applied, the
                                       install's products added; .git/execcritic-checkout.json written last

The install (editable, at /testbed under bubblewrap) points the venv at /testbed, so any checkout of that
version bound at /testbed imports from itself. What an install writes into the tree rather than the venv
(egg-info metadata, setuptools_scm's version file, compiled extensions) is recorded as the env's products and
copied into every instance checkout that lacks them; a repository with compiled extensions rebuilds, in the
checkout, the ones whose sources differ from the setup commit's (`rebuild_extensions`).

Both kinds of directory have the guarantees of `envbuild`: idempotent (reused when built from the same recipe
and, for a checkout, the same env), locked, atomic (built beside, swapped in), and held shared by sandboxes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from execcritic.files import atomic_write, locked
from execcritic.tasks.envbuild import (
    BUILD_TOOLS,
    BuildError,
    StepLog,
    VenvPlan,
    build_environ,
    build_lock,
    build_once,
    build_venv,
    bwrap_prefix,
    cache_base,
    read_env_requirements,
    read_requirements,
    run_pre_install,
    use_lock,
)
from execcritic.tasks.git.basereqs import FILES, read_build_requires, read_install_requires, without_numpy
from execcritic.tasks.git.recipe import GitEnvRecipe, digest, load_recipe
from execcritic.tasks.git.source import fetch_commit, git_env, source_for

RECORD = "execcritic-checkout.json"          # under the checkout's .git/
# not products: caches anywhere, and the top-level scratch dirs of builds and test runs
SKIP_ANYWHERE = ("__pycache__",)
SKIP_TOP = ("build", ".eggs", ".tox", ".pytest_cache", ".hypothesis", "dist")
SKIP_SUFFIXES = (".pyc", ".pyo")
# compiled sources: a checkout whose copy differs from the setup commit's rebuilds its extensions
COMPILED_SUFFIXES = (".pyx", ".pxd", ".pxi", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".f", ".f90", ".tp",
                     ".src")
REBUILD = "python setup.py build_ext --inplace"
# build tools resolved without the date cutoff - but not Cython: the repository's own .pyx files need the
# Cython of their era (scikit-learn 0.2x does not compile with Cython 3)
EXEMPT = tuple(t for t in BUILD_TOOLS if t != "cython")


def cache_root() -> Path:
    return cache_base() / "verified-git"


def env_dir(key: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "envs" / key


def checkout_dir(instance_id: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "checkouts" / instance_id


def checkout_record(checkout: Path) -> Path:
    return checkout / ".git" / RECORD


@dataclass
class BuiltGitEnv:
    key: str
    root: Path                # envs/<key>
    record: dict

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def setup(self) -> Path:
        return self.root / "setup"

    @property
    def activation(self) -> str:
        return f"source {self.venv}/bin/activate"


def load_built(key: str, root: Path | None = None) -> BuiltGitEnv | None:
    d = env_dir(key, root)
    rec = d / "env.json"
    if not rec.is_file():
        return None
    return BuiltGitEnv(key, d, json.loads(rec.read_text()))


def _reusable(env: GitEnvRecipe, root: Path, resolve: bool) -> tuple[BuiltGitEnv, GitEnvRecipe] | None:
    """(built, env with the built lock) when the cache holds an env built from this recipe (or, resolving,
    from the same starting point)."""
    built = load_built(env.key, root)
    if built is None:
        return None
    rec = built.record
    if resolve:
        if rec.get("resolved_from") != digest(env.resolve_payload()):
            return None
    elif digest(env.digest_payload()) not in (rec.get("recipe_digest"), rec.get("digest")):
        return None                     # built from another recipe (`digest`: what a resolving build produced)
    return built, dataclasses.replace(env, lock=tuple(rec["lock"]), requirements=tuple(rec["requirements"]),
                                      skipped=dict(rec.get("skipped", {})))


def build_env(env: GitEnvRecipe, *, source: str, root: Path | None = None, resolve: bool = False,
              reqs_paths: Sequence[str] = (), env_yml_paths: Sequence[str] = (), progress: bool = False,
              log: Callable[[str], None] | None = None) -> tuple[BuiltGitEnv, GitEnvRecipe]:
    """Build (or reuse) a (repository, version) environment: (built, the env with its lock).

    resolve=False installs the recipe's lock exactly; resolve=True reads the spec's requirement files
    (`reqs_paths`, or the conda environment file at one of `env_yml_paths`, at the setup commit) and resolves
    with uv under `--exclude-newer env.exclude_newer`.
    `built.record["reused"]` says whether this call built it."""
    root = root or cache_root()
    d = env_dir(env.key, root)

    def build_into(staging: Path) -> tuple[BuiltGitEnv, GitEnvRecipe]:
        return _build_into(env, staging, d, source=source, resolve=resolve, reqs_paths=reqs_paths,
                           env_yml_paths=env_yml_paths, progress=progress, log=log)

    (built, resolved), now = build_once(d, lambda: _reusable(env, root, resolve), build_into)
    if not now and log:
        log(f"env {env.key}: already built from this recipe, unchanged ({d})")
    built = BuiltGitEnv(env.key, d, {**built.record, "reused": not now})
    return built, resolved


def _build_into(env: GitEnvRecipe, staging: Path, d: Path, *, source: str, resolve: bool,
                reqs_paths: Sequence[str], env_yml_paths: Sequence[str], progress: bool,
                log) -> tuple[BuiltGitEnv, GitEnvRecipe]:
    t0 = time.monotonic()
    steps = StepLog()
    fetch_commit(source, env.setup_commit, staging / "setup", steps=steps, log=log)
    fetch_vendored(env, staging / "setup", steps, log=log)
    requirements = list(env.requirements)
    skipped: dict[str, str] = {}
    if resolve:
        packages = env.spec.get("packages")
        if packages == "requirements.txt":
            requirements = read_requirements(staging / "setup", reqs_paths)
            if not requirements:
                skipped["packages: requirements.txt"] = f"none of {list(reqs_paths)} exists at the setup commit"
        elif packages == "environment.yml":
            requirements, left_out = read_env_requirements(staging / "setup", env_yml_paths)
            skipped.update(left_out)
    plan = VenvPlan(python=env.python, spec=env.spec, requirements=requirements + list(env.base_requirements),
                    exclude_newer=env.exclude_newer,
                    version=env.project_version, lock=env.lock, skipped={**env.skipped, **skipped},
                    install=install_command(env.spec), exempt=EXEMPT, extra_pre_install=tuple(env.adaptations),
                    post_install=lambda co: build_requirements(co) if has_extensions(install_products(co)) else [],
                    legacy_requirements=lambda co: install_requirements(co, install_command(env.spec)),
                    own_prefix=env.own_prefix)
    venv = build_venv(plan, steps, staging=staging, final=d, checkout="setup", resolve=resolve,
                      progress=progress, log=log)
    skipped_all = {**(skipped if resolve else {}), **venv.skipped}
    resolved = dataclasses.replace(env, lock=tuple(venv.lock), requirements=tuple(requirements),
                                   skipped=skipped_all)
    products = install_products(staging / "setup")
    record = {"key": env.key, "repo": env.repo, "version": env.version,
              "recipe_digest": digest(env.digest_payload()), "digest": digest(resolved.digest_payload()),
              "resolved_from": digest(env.resolve_payload()), "setup_commit": env.setup_commit,
              "project_version": env.project_version, "python": env.python,
              "interpreter": str(venv.interpreter), "own_prefix": env.own_prefix, "lock": venv.lock,
              "requirements": requirements,
              "skipped": skipped_all, "host_steps": venv.host_steps, "products": products,
              "compiled": compiled_sources(staging / "setup") if has_extensions(products) else {},
              "steps": steps.steps, "build_seconds": round(time.monotonic() - t0, 1),
              "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reused": False}
    record["disk_bytes"] = disk_bytes(staging)
    atomic_write(staging / "env.json", json.dumps(record, indent=1))
    return BuiltGitEnv(env.key, staging, record), resolved


def install_command(spec: Mapping) -> str:
    """The spec's install, editable: the venv is read-only in the sandbox and shared by every checkout of
    the version, so each must import from itself at /testbed (`python setup.py install` and `pip install .`
    would copy one commit's code into the venv)."""
    cmd = spec["install"].strip()
    if cmd == "python setup.py install":
        return "python -m pip install -e ."
    return cmd.replace("pip install .", "pip install -e .") if cmd.endswith("pip install .") else cmd


def _git_paths(repo: Path, *args: str) -> list[str]:
    res = subprocess.run(["git", "-C", str(repo), *args, "-z"], capture_output=True, env=git_env(), check=False)
    if res.returncode != 0:
        raise BuildError(f"git {' '.join(args)} in {repo} failed: {res.stderr.decode(errors='replace')[-500:]}")
    return [p for p in res.stdout.decode(errors="surrogateescape").split("\0") if p]


def install_products(checkout: Path) -> list[str]:
    """Files the install wrote into the tree (untracked, ignored or not), minus caches and build dirs."""
    out = []
    for rel in _git_paths(checkout, "ls-files", "--others"):
        parts = rel.split("/")
        if parts[0] in SKIP_TOP or any(p in SKIP_ANYWHERE for p in parts) or rel.endswith(SKIP_SUFFIXES):
            continue
        if (checkout / rel).is_file() and not (checkout / rel).is_symlink():
            out.append(rel)
    return sorted(out)


def build_requirements(checkout: Path) -> list[str]:
    """What building the extensions asks for (`basereqs.read_build_requires`: pyproject.toml's build-system
    requirements and setup.py's literal `setup_requires`), minus numpy (the spec pins it): a repository with compiled
    extensions rebuilds them in each checkout without build isolation and without network, from the venv.
    (matplotlib 3.4's setup_requires names setuptools_scm_git_archive: setuptools fetches what the venv lacks, and
    every rebuild failed there.)"""
    return without_numpy(read_build_requires(metadata_files(checkout)))


def metadata_files(checkout: Path) -> dict[str, str]:
    """The project's metadata files in a checkout (basereqs.FILES), as the basereqs readers take them."""
    return {name: (checkout / name).read_text(errors="replace") for name in FILES if (checkout / name).is_file()}


def install_requirements(checkout: Path, install: str) -> list[str]:
    """What the spec's install asks pip to resolve: the project's install requirements and those of the extras it
    names (`pip install -e .[test]`). Installed first, held to the env's date cutoff, where the install itself
    runs on a pip that has no cutoff (envbuild: the legacy editable install): astropy 3.1's `.[test]` otherwise
    brought 2025's pyparsing, whose deprecation warnings astropy's tests raise as errors."""
    named = re.search(r"(?:^|\s)(?:-e\s+)?\.\[([^\]]+)\]", install)
    extras = [e.strip() for e in named.group(1).split(",")] if named else []
    return read_install_requires(metadata_files(checkout), extras)


def has_extensions(products: Sequence[str]) -> bool:
    return any(p.endswith(".so") for p in products)


def compiled_sources(checkout: Path) -> dict[str, str]:
    """{path: blob id} of the tracked compiled sources (what decides whether a checkout rebuilds)."""
    res = subprocess.run(["git", "-C", str(checkout), "ls-files", "-s"], capture_output=True, text=True,
                         env=git_env(), check=True)
    out = {}
    for line in res.stdout.splitlines():
        meta, _, path = line.partition("\t")
        if path.endswith(COMPILED_SUFFIXES):
            out[path] = meta.split()[1]
    return out


def disk_bytes(path: Path) -> int:
    """Bytes on disk under `path` (hard links counted once, as du does)."""
    res = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    try:
        return int(res.stdout.split()[0])
    except (IndexError, ValueError):
        return -1


# ---- instance checkouts ------------------------------------------------------------------------------

@dataclass
class PreparedCheckout:
    path: Path
    record: dict

    @property
    def reused(self) -> bool:
        return bool(self.record.get("reused"))


def checkout_reusable(d: Path, base_commit: str, env_digest: str) -> PreparedCheckout | None:
    rec = checkout_record(d)
    if not rec.is_file():
        return None
    record = json.loads(rec.read_text())
    if record.get("base_commit") != base_commit or record.get("env_digest") != env_digest:
        return None
    return PreparedCheckout(d, record)


def prepare_checkout(instance_id: str, base_commit: str, built: BuiltGitEnv, env: GitEnvRecipe, *,
                     source: str, root: Path | None = None,
                     log: Callable[[str], None] | None = None) -> PreparedCheckout:
    """The row's Base as a checkout for its env (fetched, pre_install applied, install products added,
    extensions rebuilt where their sources differ), built once per (base commit, env build)."""
    d = checkout_dir(instance_id, root)
    env_digest = built.record["digest"]

    def build_into(staging: Path) -> PreparedCheckout:
        t0 = time.monotonic()
        steps = StepLog()
        fetch_commit(source, base_commit, staging, steps=steps, log=log)
        fetched = time.monotonic() - t0
        run_pre_install(steps, env.spec, staging, built.venv, env.project_version, extra=tuple(env.adaptations),
                        log=log)
        added = add_products(staging, built)
        copy_vendored(env, built, staging)
        rebuilt = rebuild_extensions(staging, built, env, steps, log=log)
        record = {"instance_id": instance_id, "base_commit": base_commit, "env": env.key,
                  "env_digest": env_digest, "products_added": len(added), "rebuilt": rebuilt,
                  "fetch_seconds": round(fetched, 2), "seconds": round(time.monotonic() - t0, 2),
                  "steps": steps.steps, "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        record["disk_bytes"] = disk_bytes(staging)
        atomic_write(checkout_record(staging), json.dumps(record, indent=1))
        return PreparedCheckout(d, record)

    found, now = build_once(d, lambda: checkout_reusable(d, base_commit, env_digest), build_into)
    found.record["reused"] = not now
    return found


def fetch_vendored(env: GitEnvRecipe, checkout: Path, steps: StepLog, *, log=None) -> None:
    """Each of the env's vendored sources (plan.VENDORED) at its path in the setup checkout, from the configured
    source of its repository, its `prepare` step run there without network; the install then builds it."""
    for rel, v in sorted(env.vendored.items()):
        dest = checkout / rel
        fetch_commit(source_for(v["repo"]), v["commit"], dest, steps=steps, log=log)
        steps.run(bwrap_prefix(checkout, [], network=False) + ["bash", "-ec", f"cd {rel} && {v['prepare']}"],
                  what=f"prepare {rel}", log=log)


def copy_vendored(env: GitEnvRecipe, built: BuiltGitEnv, checkout: Path) -> None:
    """The vendored sources as the env's install left them (built: a rebuild of the checkout's extensions links
    them and builds them no more), where the checkout has none."""
    for rel in sorted(env.vendored):
        src, dst = built.setup / rel, checkout / rel
        if not src.is_dir():
            raise BuildError(f"env {env.key} has no {rel} (vendored from {env.vendored[rel]['repo']}): rebuild "
                             "the env")
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def add_products(checkout: Path, built: BuiltGitEnv) -> list[str]:
    """Copy the env's install products into the checkout where it has no such file, and keep git from
    listing them (they are part of the prepared Base, as in SWE-bench's images)."""
    added = []
    for rel in built.record.get("products", []):
        src, dst = built.setup / rel, checkout / rel
        if dst.exists() or dst.is_symlink() or not src.is_file():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)       # dated now: newer than the fetched sources, so builds see them current
        shutil.copymode(src, dst)
        added.append(rel)
    if added:
        exclude = checkout / ".git" / "info" / "exclude"
        exclude.parent.mkdir(exist_ok=True)
        with open(exclude, "a") as fh:
            fh.write("\n# the environment's install products (execcritic verified-git)\n")
            fh.write("".join(f"/{rel}\n" for rel in added))
    return added


def rebuild_extensions(checkout: Path, built: BuiltGitEnv, env: GitEnvRecipe, steps: StepLog, *,
                       log=None) -> list[str]:
    """For an env with compiled extensions: the compiled sources whose blob differs from the setup commit's
    are touched (newer than the copied products) and `python setup.py build_ext --inplace` rebuilds what
    depends on them. Returns the changed sources ([] when nothing needed a rebuild)."""
    setup = built.record.get("compiled") or {}
    if not setup:
        return []
    here = compiled_sources(checkout)
    changed = sorted(p for p, blob in here.items() if setup.get(p) != blob)
    if not changed:
        return []
    now = time.time() + 1
    for rel in changed:
        os.utime(checkout / rel, (now, now))
    steps.run(bwrap_prefix(checkout, [], network=False)
              + ["bash", "-c", f"source {built.venv}/bin/activate && {REBUILD}"],
              what=f"rebuild extensions ({len(changed)} changed sources)",
              env=build_environ(built.venv, env.project_version), log=log, timeout=7200)
    return changed


def prune_checkout(instance_id: str, root: Path | None = None) -> bool:
    """Delete a cached checkout (waits for its users and any builder); True if there was one."""
    d = checkout_dir(instance_id, root)
    if not d.exists():
        return False
    with locked(build_lock(d)), locked(use_lock(d)):
        existed = d.exists()
        shutil.rmtree(d, ignore_errors=True)
    return existed


def ensure(tasks, *, sources: Mapping[str, str] | None = None, recipe=None, root: Path | None = None,
           log: Callable[[str], None] | None = None, advance: Callable[[str], None] | None = None) -> dict:
    """Build (or reuse) the environments and checkouts of verified-git tasks from the recipe (its locks, not a
    new resolution): what a command runs before its first unit of work."""
    recipe = recipe or load_recipe()
    out: dict[str, list[str]] = {"envs": [], "checkouts": [], "built": []}
    for task in tasks:
        info = (task.extra or {}).get("verified_git")
        if not info:
            continue
        env = recipe.envs[info["env"]]
        source = source_for(task.repo, sources)
        built, _ = build_env(env, source=source, root=root, log=log)
        if env.key not in out["envs"]:
            out["envs"].append(env.key)
            if not built.record.get("reused"):
                out["built"].append(env.key)
        co = prepare_checkout(task.instance_id, task.base_commit, built, env, source=source, root=root, log=log)
        out["checkouts"].append(task.instance_id)
        if not co.reused:
            out["built"].append(task.instance_id)
        if advance:
            advance(task.instance_id)
    return out
