"""Build `multilingual-git` instance checkouts: the row's Base, fetched, with the Base's build in it.

Layout under the cache root (`$EXECCRITIC_CACHE/multilingual-git`, else the user cache dir):

    checkouts/<instance_id>/     the row's base_commit (and its submodules at the commits it records), fetched
                                 shallowly from the named git source; a JavaScript/TypeScript row's dependencies
                                 installed from its lockfile (the one step with network); the eval_script's build
                                 steps run once at the Base under bubblewrap (no network, the checkout at /testbed),
                                 so its build products are part of the prepared Base; .git/execcritic-checkout.json
                                 written last
    tools/<name>@<version>/      a package manager a row's package.json names (pnpm), from the npm registry
    npm-cache/, pnpm-store/      the package managers' download caches, shared by the checkouts' installs

Tracked files the build changed (generated sources a repository commits, e.g. jq's src/lexer.c) are put back, so
the Base is the row's commit plus build products. A run copies the checkout with its build (times kept), applies its patches and runs the eval_script's build
steps again: make and cmake rebuild only what the patches touched. The guarantees are `envbuild`'s: idempotent
(reused when built from the same base commit, build steps and toolchain versions), locked, atomic, held shared by
sandboxes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from execcritic.errors import EnvironmentMissing
from execcritic.files import atomic_write
from execcritic.tasks.envbuild import BuildError, StepLog, build_once, bwrap_prefix, cache_base
from execcritic.tasks.git.build import PreparedCheckout, checkout_record, checkout_reusable, disk_bytes
from execcritic.tasks.git.source import fetch_commit, git_env, source_for
from execcritic.tasks.mlgit.script import build_steps
from execcritic.tasks.mlgit.toolchain import TOOLCHAINS, DepsInstall, NativeEnv, native_env

#: a build of the Base (redis with its dependencies, jq with oniguruma) on a slow machine
BUILD_TIMEOUT_S = 3600
#: a dependency install from the npm registry (vuejs/core: ~1,000 packages)
INSTALL_TIMEOUT_S = 1800
# what the build steps see: no venv, no user configuration; $(nproc) works inside the sandbox
BUILD_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp",
             "LANG": "C.UTF-8", "TERM": "dumb"}


def cache_root() -> Path:
    return cache_base() / "multilingual-git"


def checkout_dir(instance_id: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "checkouts" / instance_id


def tool_dir(name: str, version: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "tools" / f"{name}@{version}"


def tool_path(tool: Path, path: str) -> str:
    """PATH with an installed package manager's bin dir first (the install, the Base's build and every run)."""
    return f"{tool / 'node_modules' / '.bin'}:{path}"


def build_digest(env: NativeEnv, steps: list[str]) -> str:
    """What a prepared checkout was built from besides its commit: the toolchain's versions, the build steps, the
    submodules fetched, the dependency install, and that tracked files are restored after the build."""
    tc = TOOLCHAINS[env.repo]
    extra = {"submodules": list(tc.submodules)} if tc.submodules is not None else {}
    if tc.install is not None:
        extra["install"] = [tc.install.command, tc.install.manager, tc.install.lockfile]
    return hashlib.sha256(json.dumps({"env": env.digest(), "steps": steps, "restore_tracked": True, **extra}).encode()
                          ).hexdigest()[:16]


def package_manager(checkout: Path, install: DepsInstall) -> tuple[str, str] | None:
    """(name, version) of the package manager the Base's package.json names for `install` (`packageManager`, as
    corepack reads it), or None for npm, which comes with the toolchain's nodejs."""
    if install.manager == "npm":
        return None
    try:
        field = json.loads((checkout / "package.json").read_text()).get("packageManager") or ""
    except (OSError, ValueError) as exc:
        raise BuildError(f"the Base's package.json cannot be read for its packageManager: {exc}") from exc
    name, _, version = field.partition("@")
    version = version.split("+")[0]
    if name != install.manager or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise BuildError(f"the Base's package.json names packageManager {field!r}, not an exact {install.manager} "
                         "version to install")
    return name, version


def ensure_tool(name: str, version: str, root: Path | None = None, *,
                log: Callable[[str], None] | None = None) -> Path:
    """`name@version` from the npm registry under `tools/` (built once, locked, atomic); returns its dir."""
    d = tool_dir(name, version, root)
    record = d / "tool.json"

    def build_into(staging: Path) -> Path:
        steps = StepLog()
        try:
            steps.run(["npm", "install", "--prefix", str(staging), "--no-save", "--no-package-lock", "--no-audit",
                       "--no-fund", f"{name}@{version}"], what=f"install {name}@{version} from the npm registry",
                      env={**BUILD_ENV, **npm_env(root)}, log=log, timeout=INSTALL_TIMEOUT_S)
        except BuildError as exc:            # the machine's reach, not the row's: it stays undecided
            raise EnvironmentMissing(f"{name}@{version}, the package manager the row names, cannot be installed "
                                     f"here: {exc}") from exc
        atomic_write(staging / "tool.json", json.dumps({"name": name, "version": version, "steps": steps.steps}))
        return d

    found, _ = build_once(d, lambda: d if record.is_file() else None, build_into)
    return found


#: the host's route to the npm registry, passed to the steps with network (with *_PROXY and NPM_CONFIG_*)
REACH_VARS = {"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR"}


def npm_env(root: Path | None = None) -> dict[str, str]:
    """The package managers' caches (shared by every install), no prompts, notices or telemetry, and the host's
    route to the registry (its proxy, certificate authorities and npm settings: a host behind a TLS-inspecting proxy
    has node trust it through NODE_EXTRA_CA_CERTS - measured, without it pnpm's install failed
    SELF_SIGNED_CERT_IN_CHAIN)."""
    r = root or cache_root()
    reach = {k: v for k, v in os.environ.items()
             if k.upper() in REACH_VARS or k.upper().endswith("_PROXY") or k.upper().startswith("NPM_CONFIG_")}
    return {**reach, "npm_config_cache": str(r / "npm-cache"), "npm_config_store_dir": str(r / "pnpm-store"),
            "npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}



def tool_of(package_manager: str | None, root: Path | None = None) -> Path | None:
    """The tools/ dir of a recorded `name@version` package manager (None: npm, the toolchain's own)."""
    return tool_dir(*package_manager.split("@", 1), root) if package_manager else None


def recorded_tool(checkout: Path, root: Path | None = None) -> Path | None:
    """The package manager a prepared checkout's dependencies were installed with, when not the toolchain's npm:
    the row's scripts call it, so every run has it too."""
    try:
        pm = json.loads(checkout_record(checkout).read_text()).get("install", {}).get("package_manager")
    except (OSError, ValueError):
        return None
    return tool_of(pm, root)


_SKIPPED_SCRIPTS = re.compile(r"npm warn install-scripts\s+(\S+@\S+)")


def install_deps(task, staging: Path, steps: StepLog, *, root: Path | None = None,
                 log: Callable[[str], None] | None = None) -> dict:
    """The row's dependency install (`Toolchain.install`) in the staged checkout, with network - what its image ran
    before the eval_script. Returns what the checkout record says of it ({} where the toolchain installs none)."""
    inst = TOOLCHAINS[task.repo].install
    if inst is None:
        return {}
    if not (staging / inst.lockfile).is_file():
        raise BuildError(f"{task.instance_id}: its Base has no {inst.lockfile}, from which `{inst.command}` installs")
    out: dict = {"command": inst.command, "lockfile": inst.lockfile, "why": inst.why}
    env = {**BUILD_ENV, **npm_env(root)}
    readable = []
    pm = package_manager(staging, inst)
    if pm is not None:
        tool = ensure_tool(*pm, root, log=log)
        env["PATH"] = tool_path(tool, env["PATH"])
        readable.append(tool)
        out["package_manager"] = "@".join(pm)
    caches = [Path(env["npm_config_cache"]), Path(env["npm_config_store_dir"])]
    for c in caches:
        c.mkdir(parents=True, exist_ok=True)
    text = steps.run(bwrap_prefix(staging, caches, network=True, readable=readable)
                     + ["bash", "-c", f"set -euxo pipefail\ncd /testbed\n{inst.command} 2>&1\n"],
                     what=f"install the Base's dependencies ({inst.command})", env=env, log=log,
                     timeout=INSTALL_TIMEOUT_S)
    out["npm"] = subprocess.run(["npm", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    out["install_scripts_not_run"] = sorted(set(_SKIPPED_SCRIPTS.findall(text)))
    return out


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
        installed = install_deps(task, staging, steps, root=root, log=log)
        t_installed = time.monotonic()
        script = "set -euxo pipefail\ncd /testbed\n" + "\n".join(steps_run) + "\n"
        build_env = {**BUILD_ENV, **{k: v for k, (v, _) in TOOLCHAINS[task.repo].run_env.items()}}  # as every run
        tool = tool_of(installed.get("package_manager"), root)
        if tool is not None:                  # the build steps call it too (vuejs/core: `pnpm run build ...`)
            build_env["PATH"] = tool_path(tool, build_env["PATH"])
        steps.run(bwrap_prefix(staging, [], network=False, readable=[tool] if tool else []) + ["bash", "-c", script],
                  what=f"build the Base ({len(steps_run)} steps of the eval_script)", env=build_env,
                  log=log, timeout=BUILD_TIMEOUT_S)
        restored = restore_tracked(staging)
        record = {"instance_id": task.instance_id, "base_commit": task.base_commit, "env": env.key,
                  "env_digest": digest, "toolchain": dict(env.packages), "build_steps": steps_run,
                  "restored_after_build": restored, **({"install": installed} if installed else {}),
                  "fetch_seconds": round(fetched, 2),
                  **({"install_seconds": round(t_installed - t0 - fetched, 2)} if installed else {}),
                  "build_seconds": round(time.monotonic() - t_installed, 2),
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
