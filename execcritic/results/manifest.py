"""The manifest every result under results/ carries: enough to trust a number and regenerate it.

git SHA (and whether the tree was dirty) when the command started, the exact command, the protocol config and its
deviations from the paper, harness and prompt digests, model, dataset ids + hashes, seeds, timings, host facts.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from execcritic import __version__
from execcritic.config import PAPER, ProtocolConfig, manifest_deviations
from execcritic.files import atomic_write
from execcritic.prompts import prompt_digests

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_AT_START: dict[str, Any] | None = None


def git_state(repo: Path | None = None) -> dict[str, Any]:
    """HEAD and whether the code that ran differs from it: `changed_paths` lists (up to 20) the changed tracked
    paths that make it dirty. Changes under `results/` (a run rewriting its own output) do not, and are only
    counted."""
    repo = repo or _PACKAGE_DIR.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                                capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None, "changed_paths": []}
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    code = [p for p in changed if not p.startswith("results/")]
    return {"sha": sha or None, "dirty": bool(code), "changed_paths": code[:20],
            "results_paths_changed": len(changed) - len(code)}


#: the packages whose code decides a measured number (issue 45): a pinned run made by other code than HEAD's is stale
MEASURING = ("harness", "sandbox", "runners", "bundle", "evaluation", "agents", "pipeline", "rewards", "prompts",
             "experiments", "training")


def _digest(subs: tuple[str, ...], pattern: str) -> str:
    h = hashlib.sha256()
    for sub in subs:
        for path in sorted((_PACKAGE_DIR / sub).rglob(pattern)):
            if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            h.update(str(path.relative_to(_PACKAGE_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def harness_digest() -> str:
    """sha256 over the harness-defining sources: bundle validation, runners, classifier, executor."""
    return _digest(("bundle", "runners", "harness", "sandbox"), "*.py")


def measuring_digest() -> str:
    """sha256 over every file of the packages that decide a measured number (`MEASURING`: the harness's, and the
    agents, pipeline, rewards, prompts, experiments and training code), templates and data files included."""
    return _digest(MEASURING, "*")


def note_start(repo: Path | None = None) -> None:
    """Record the code a command starts with. A long run outlives commits made while it runs; its manifest must name
    the code it imported at start, not the HEAD found when it writes (`code_state`)."""
    global _AT_START
    _AT_START = _code_now(repo)


def _code_now(repo: Path | None) -> dict[str, Any]:
    return {"git": git_state(repo), "harness_digest": harness_digest(), "measuring_digest": measuring_digest(),
            "prompt_digests": prompt_digests()}


def code_state(repo: Path | None = None) -> dict[str, Any]:
    """git, harness and prompt digests as of the command's start (`note_start`), or as of now when none was noted.
    What differs by write time is kept under `changed_during_run`, so a manifest says when the tree moved under it."""
    now = _code_now(repo)
    if _AT_START is None:
        return now
    moved = {k: now[k] for k in ("harness_digest", "measuring_digest", "prompt_digests")
             if now[k] != _AT_START.get(k)}
    if any(now["git"].get(k) != _AT_START["git"].get(k) for k in ("sha", "dirty", "changed_paths")):
        moved["git"] = now["git"]
    return {**_AT_START, **({"changed_during_run": moved} if moved else {})}


def host_facts() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}


def build_manifest(*, command: list[str] | str | None = None, config: ProtocolConfig = PAPER,
                   datasets: list[dict[str, Any]] | None = None, model: dict[str, Any] | None = None,
                   seeds: list[int] | None = None, timings: dict[str, float] | None = None,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    if command is None:
        command = sys.argv
    if not isinstance(command, str):
        command = shlex.join(str(c) for c in command)
    return {
        "execcritic_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        **code_state(),
        "config": config.to_dict(),
        "config_digest": config.digest(),
        "deviations_from_paper": manifest_deviations(config),
        "model": model,
        "datasets": datasets or [],
        "seeds": seeds or [],
        "timings": timings or {},
        "host": host_facts(),
        **(extra or {}),
    }


def write_result(path: str | Path, payload: dict[str, Any], manifest: dict[str, Any]) -> Path:
    """Write `payload` with its manifest as one JSON document (atomic rename)."""
    return atomic_write(path, json.dumps({"manifest": manifest, **payload}, indent=2, default=str) + "\n")
