"""The checkpoint registry: one trained checkpoint per *recipe fingerprint*, so a notebook that needs a trained role
trains it once and every later run (or another artifact) that needs the same checkpoint reuses it.

A recipe is a JSON-able mapping that says everything that decides the weights: the kind of run (sft | test-rl |
repair-rl), the init (a base model's weights digest, or the fingerprint of the checkpoint it starts from), the
data digest (teacher trajectories, the tasks, the labeled candidate pools), every protocol knob, the seed, the
engine and its library versions - and the training code's digest (`code_digest`: the source of `execcritic/training/`, `execcritic/rewards/`
and `execcritic/config.py`). Its fingerprint is the sha256 of its canonical JSON. A changed recipe (more data,
another objective, an edited trainer) has another fingerprint and trains anew.

Layout (under a runs root, default `runs/`, git-ignored):
- `checkpoints/<fingerprint>/manifest.json`: the recipe, the status (`training` | `complete`), the training run id
  (`ckpt-<fingerprint>`), the final checkpoint and the results directory; written atomically;
- `checkpoints/<fingerprint>/.lock`: held while the recipe trains (two notebooks that need it train it once);
- `train/ckpt-<fingerprint>/`: the TrainRun's home (checkpoints, `final/`). A run killed while training left its
  home and a `training` manifest: the next `ensure` resumes it from its last checkpoint (`TrainRun.resume`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from execcritic.errors import InputError
from execcritic.files import atomic_write_json, locked

PACKAGE = Path(__file__).resolve().parents[1]
#: the sources whose digest is part of every fingerprint (what the trainer does with the data)
CODE = ("training", "rewards", "config.py")
MANIFEST = "manifest.json"


def code_digest() -> str:
    """sha256 over the training code's file names and contents (`CODE`, relative to the package)."""
    h = hashlib.sha256()
    for part in CODE:
        root = PACKAGE / part
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
        for f in files:
            h.update(f"{f.relative_to(PACKAGE)}\0".encode() + f.read_bytes() + b"\0")
    return h.hexdigest()


def fingerprint(recipe: Mapping[str, Any]) -> str:
    """The recipe's identity: sha256 of its canonical JSON (keys sorted), first 20 hex digits."""
    blob = json.dumps(recipe, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


class Registry:
    """Checkpoints by recipe fingerprint under `root` (`root/checkpoints/`, `root/train/`)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    @property
    def runs_root(self) -> Path:
        return self.root / "train"

    def dir(self, fp: str) -> Path:
        return self.root / "checkpoints" / fp

    @staticmethod
    def run_id(fp: str) -> str:
        return f"ckpt-{fp}"

    def manifest(self, fp: str) -> dict[str, Any] | None:
        path = self.dir(fp) / MANIFEST
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            raise InputError("not a checkpoint-registry manifest (bad JSON)", file=str(path)) from None

    def lookup(self, fp: str) -> dict[str, Any] | None:
        """The complete entry of `fp` whose final checkpoint is still on disk, else None."""
        m = self.manifest(fp)
        if m and m.get("status") == "complete" and (Path(m["final_checkpoint"]) / "config.json").is_file():
            return m
        return None

    def ensure(self, recipe: Mapping[str, Any], train: Callable[[str, Path, bool], dict[str, Any]], *,
               describe: Mapping[str, Any] | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
        """The entry of `recipe`: reused when complete; else trained by `train(run_id, runs_root, resume)` (which
        returns `training.run.train`'s result), resuming a killed run of the same recipe. Returns the manifest
        with `reused` (bool) added."""
        fp = fingerprint(recipe)
        here = self.dir(fp)
        found = self.lookup(fp)
        if found:
            return {**found, "reused": True}
        with locked(here / ".lock"):
            found = self.lookup(fp)              # another process trained it while this one waited
            if found:
                return {**found, "reused": True}
            run_id = self.run_id(fp)
            home = self.runs_root / run_id
            resume = home.exists()
            before = self.manifest(fp) or {}
            entry = {"fingerprint": fp, "recipe": dict(recipe), **dict(describe or {}), "status": "training",
                     "run_id": run_id, "runs_dir": str(home), "started": before.get("started") or _now(),
                     "sessions": [*before.get("sessions", []), {"started": _now(), "resumed": resume}]}
            atomic_write_json(here / MANIFEST, entry)
            log(f"[checkpoint {fp}] {'resuming' if resume else 'training'} {entry.get('title', recipe.get('kind'))} "
                f"(run {run_id})")
            result = train(run_id, self.runs_root, resume)
            entry.update(status="complete", finished=_now(), final_checkpoint=str(result["final_checkpoint"]),
                         results=str(result.get("results", "")),
                         wall_s=result.get("wall_s"))
            atomic_write_json(here / MANIFEST, entry)
            return {**entry, "reused": False}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = ["CODE", "MANIFEST", "Registry", "code_digest", "fingerprint"]
