"""Sandboxes: run a command against a prepared checkout with real isolation and exact reset.

Backends: `local` (a copy of the checkout under bubblewrap; `isolated=False` for a plain
subprocess) and `docker` (one long-lived container from an official `sweb.eval.*` image or a
locally built one). Both follow the conventions in `base.py`. Heavy imports (the docker SDK)
happen only when the docker backend is used.
"""

from __future__ import annotations

from typing import Any

from execcritic.errors import InputError
from execcritic.sandbox import docker, local
from execcritic.sandbox.base import MAX_OUTPUT_BYTES, WORKDIR, CommandResult, Sandbox
from execcritic.sandbox.capture import OutputCapture
from execcritic.sandbox.local import LocalSandbox
from execcritic.sandbox.snapshot import TreeSnapshot

BACKENDS = ("local", "docker")


def open_sandbox(backend: str, **kwargs: Any) -> Sandbox:
    """Create a sandbox by backend name.

    local:  open_sandbox("local", checkout=Path, activate=..., binds=[venv], isolated=True, memory_mb=...)
    docker: open_sandbox("docker", image="swebench/sweb.eval....", client=..., memory_mb=...)
    """
    if backend == "local":

        return LocalSandbox(**kwargs)
    if backend == "docker":
        from execcritic.sandbox.docker import DockerSandbox  # lazy: imports the docker SDK

        return DockerSandbox(**kwargs)

    raise InputError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}",
                     field="backend")


def __getattr__(name: str):
    # lazy re-exports, so `import execcritic.sandbox` stays cheap
    if name == "LocalSandbox":

        return getattr(local, name)
    if name in ("DockerSandbox", "OFFICIAL_ACTIVATE"):

        return getattr(docker, name)
    raise AttributeError(name)


__all__ = ["BACKENDS", "MAX_OUTPUT_BYTES", "WORKDIR", "CommandResult", "Sandbox", "open_sandbox",
           "LocalSandbox", "DockerSandbox", "TreeSnapshot", "OutputCapture", "OFFICIAL_ACTIVATE"]
