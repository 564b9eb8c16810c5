"""One notion of "the environment a task runs in", for every backend.

- docker: the official `sweb.eval.*` image the row names (conda env `testbed` activated), or a
  locally built image with the same layout;
- local: a built checkout (the Base, bound at /testbed) plus a venv bound read-only at its own host
  path, run under the `local` (bubblewrap) sandbox - the `verified-sdist` task set's environments (one
  checkout and venv per release) and the `verified-git` task set's (a venv per repository x version, a
  checkout per instance).

The executor and the official evaluator take a TaskEnvironment and call `open_sandbox()`; sandbox
backends are imported lazily so that choosing one never imports the other's dependencies.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from execcritic import cancel
from execcritic.errors import EnvironmentMissing
from execcritic.files import hold_shared
from execcritic.sandbox import overlay
from execcritic.sandbox.base import Limits, Sandbox
from execcritic.sandbox.local import DEFAULT_PATH, LocalSandbox, fast_tree_dir, warm_checkout
from execcritic.tasks.envbuild import use_lock
from execcritic.tasks.git import build as git_build
from execcritic.tasks.mlgit import build as ml_build
from execcritic.tasks.sdist.build import env_dir

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

OFFICIAL_ACTIVATION = "source /opt/miniconda3/bin/activate && conda activate testbed"


@dataclass(frozen=True)
class TaskEnvironment:
    kind: Literal["docker", "local"]
    image: str = ""                       # docker
    checkout: Path | None = None          # local: the prepared checkout (copied into each sandbox)
    venv: Path | None = None              # local: bound read-only at its own path
    activation: str = ""                  # shell prelude before every command
    base_commit: str = ""                 # the Base commit inside the checkout/image
    upstream_base_commit: str = ""        # the row's base_commit, when the Base is a stand-in (sdist)
    env: dict[str, str] = field(default_factory=dict)   # extra environment variables for every run
    meta: dict[str, Any] = field(default_factory=dict)  # manifest facts (release, env key, python)
    ffi: bool = False                     # the recipe says Gold needs the real ctypes (sandbox/confine.py)
    tools: tuple[Path, ...] = ()          # local: more host dirs bound read-only (a package manager's install)
    procfs: bool = False                  # local: the runner needs a procfs (log-graded runners only: sandbox/local)

    def open_sandbox(self, *, limits: Limits, **opts: Any) -> Sandbox:
        """A fresh sandbox at Base under `limits` (every caller states them: `Limits.from_config`).
        Local defaults: isolated, no network (override via opts). Backends are imported here, on use:
        the docker SDK is a heavy optional dependency."""
        opts["limits"] = limits
        opts.setdefault("ffi", self.ffi)
        if self.procfs:
            opts.setdefault("procfs", True)
        if self.kind == "docker":
            from execcritic.sandbox.docker import DockerSandbox  # lazy: imports the docker SDK

            opts.setdefault("activate", self.activation)
            if self.env:
                opts.setdefault("env", self.env)
            return cancel.track(DockerSandbox(self.image, **opts))     # (closed at Ctrl-C: execcritic/cancel.py)
        build = self.meta.get("build_command", "execcritic tasks build-sdist")
        # a rebuild (or prune) of the env or the checkout waits until this sandbox closes
        held = [hold_shared(use_lock(Path(r))) for r in (self.meta.get("env_root"), self.meta.get("checkout_root"))
                if r]
        try:
            ready = self.meta.get("ready_files")
            if ready is None and self.meta.get("env_root"):
                ready = [Path(self.meta["env_root"]) / "env.json"]
            for f in ready or ():
                if not Path(f).is_file():
                    raise EnvironmentMissing(f"the task environment is not built, or a build of it did not finish "
                                             f"({f} is missing); run `{build}` first")
            if self.checkout is None or not Path(self.checkout).is_dir():
                raise EnvironmentMissing(f"the task checkout {self.checkout} is not built; run `{build}` first")
            if self.venv is not None and not (Path(self.venv) / "bin" / "python").exists():
                raise EnvironmentMissing(f"the task venv {self.venv} is not built; run `{build}`")
            opts.setdefault("activate", self.activation)
            opts.setdefault("isolated", True)
            opts.setdefault("network", False)
            if self.env:
                opts.setdefault("env", self.env)
            binds = [*self.tools, *opts.pop("binds", ())]
            if self.venv is not None:
                binds[:0] = [self.venv, *own_prefix_base(self.meta.get("env_root"))]
            warm_checkout(self.checkout, activate=self.activation, binds=binds)   # once per environment
            # the checkout held (its use lock, above) is unchanged while the sandbox lives: reset's reference
            opts.setdefault("pristine", bool(held))
            opts.setdefault("tree_dir", trees_dir())
            box = LocalSandbox(self.checkout, binds=binds, **opts)
        except BaseException:
            for h in held:
                h.close()
            raise
        for h in held:
            box.hold(h)
        return box

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "image": self.image, "checkout": str(self.checkout or ""), "ffi": self.ffi,
                "venv": str(self.venv or ""), "base_commit": self.base_commit,
                "upstream_base_commit": self.upstream_base_commit, **self.meta}


TREES_PREFIX = "execcritic-trees-"


def trees_dir() -> str | None:
    """This process's own directory under `fast_tree_dir()`, where its sandboxes make their working copies. A run
    killed before its sandboxes closed leaves its copies there - in memory, on a memory file system - so the first
    sandbox a process opens removes the directories of this user's processes that are gone (`sweep_trees`)."""
    base = fast_tree_dir()
    if base is None:
        return None
    mine = Path(base) / f"{TREES_PREFIX}{os.getpid()}"
    if not mine.is_dir():
        sweep_trees(Path(base))
        mine.mkdir(mode=0o700, exist_ok=True)
        atexit.register(_remove_if_empty, mine)
    return str(mine)


def sweep_trees(base: Path) -> list[Path]:
    """Remove the tree directories under `base` of this user's processes that no longer run; returns them."""
    gone = []
    for d in base.glob(TREES_PREFIX + "*"):
        try:
            pid = int(d.name[len(TREES_PREFIX):])
            if d.stat().st_uid != os.getuid():
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            overlay.unmount_under(d)          # a killed process's overlay working copies are still mounted
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
        except (ValueError, OSError):     # not ours to judge (a name of another form, another user's process)
            continue
    return gone


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def own_prefix_base(env_root: str | None) -> list[Path]:
    """The base interpreter of an env built as a prefix of its own (`envbuild.make_own_prefix`): its copied binary
    loads the base's libpython, and it has no pyvenv.cfg from which the sandbox would learn the base - the env's
    record names it."""
    if not env_root:
        return []
    try:
        record = json.loads((Path(env_root) / "env.json").read_text())
    except (OSError, ValueError):
        return []
    if not record.get("own_prefix") or not record.get("interpreter"):
        return []
    return [Path(record["interpreter"]).resolve().parent.parent]


def docker_environment(task: "Task", image: str | None = None) -> TaskEnvironment:
    if not (image or task.image):
        raise EnvironmentMissing(f"row {task.instance_id} names no Docker image (field `image`)")
    return TaskEnvironment(kind="docker", image=image or task.image, activation=OFFICIAL_ACTIVATION,
                           base_commit=task.base_commit)


def environment_for(task: "Task", *, backend: str | None = None, root: Path | None = None) -> TaskEnvironment:
    """The environment a task runs in: its built env for `verified-sdist` and `verified-git` tasks, else the
    official image named by the row. `backend` forces one ('docker' or 'local')."""
    sdist = (task.extra or {}).get("verified_sdist")
    git = (task.extra or {}).get("verified_git")
    native = (task.extra or {}).get("multilingual_git")
    if backend == "docker" or (backend is None and not sdist and not git and not native):
        return docker_environment(task)
    if git:
        return git_environment(task, root)
    if native:
        return native_environment(task, root)
    if not sdist:
        raise EnvironmentMissing(f"{task.instance_id} has no local environment: only `verified-sdist`, "
                                 "`verified-git` and `multilingual-git` tasks run under the local backend; use the "
                                 "docker backend")

    d = env_dir(sdist["env"], root)
    return TaskEnvironment(kind="local", checkout=d / "checkout", venv=d / "venv",
                           activation=f"source {d / 'venv'}/bin/activate", base_commit=sdist["base_commit"],
                           upstream_base_commit=sdist["upstream_base_commit"],
                           meta={"env": sdist["env"], "release": sdist["release"], "python": sdist["python"],
                                 "env_root": str(d), **({"ffi": sdist["ffi"]} if sdist.get("ffi") else {})},
                           ffi=bool(sdist.get("ffi")))


def git_environment(task: "Task", root: Path | None = None) -> TaskEnvironment:
    """A verified-git task's environment: its (repository, version) venv and its own checkout."""
    info = task.extra["verified_git"]
    d = git_build.env_dir(info["env"], root)
    c = git_build.checkout_dir(task.instance_id, root)
    return TaskEnvironment(kind="local", checkout=c, venv=d / "venv", activation=f"source {d / 'venv'}/bin/activate",
                           base_commit=task.base_commit, upstream_base_commit=task.base_commit,
                           meta={"task_set": "verified-git", "env": info["env"], "version": info["version"],
                                 "python": info["python"], "env_root": str(d), "checkout_root": str(c),
                                 "ready_files": [str(d / "env.json"), str(git_build.checkout_record(c))],
                                 "build_command": "execcritic tasks build-git",
                                 **({"ffi": info["ffi"]} if info.get("ffi") else {})},
                           ffi=bool(info.get("ffi")))


def native_environment(task: "Task", root: Path | None = None) -> TaskEnvironment:
    """A multilingual-git task's environment: its checkout with the Base's build, the host's toolchain (no venv), and
    the package manager its dependencies were installed with where that is not the toolchain's (vuejs/core's pnpm,
    named by the checkout's record: the row's scripts call it)."""
    info = task.extra["multilingual_git"]
    c = ml_build.checkout_dir(task.instance_id, root)
    env, tools = dict(info.get("run_env") or {}), ()
    tool = ml_build.recorded_tool(c, root)
    if tool is not None:
        tools = (tool,)
        env["PATH"] = ml_build.tool_path(tool, env.get("PATH", DEFAULT_PATH))
    return TaskEnvironment(kind="local", checkout=c, base_commit=task.base_commit, tools=tools,
                           procfs=bool(info.get("procfs")),
                           upstream_base_commit=task.base_commit, env=env,
                           meta={"task_set": "multilingual-git", "env": info["env"], "language": info["language"],
                                 "checkout_root": str(c), "ready_files": [str(git_build.checkout_record(c))],
                                 "build_command": "execcritic tasks build-ml"})
