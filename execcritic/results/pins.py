"""Which runs `paper_figures/` shows: named in one committed file, never "the latest".

A reviewer cites `results/paper_runs.json`: one run id per paper artifact and the training runs of Figure 6's
curves. `execcritic reproduce` writes it for the runs it made; `execcritic figures --run A=ID --pin` edits it.
Any other run in the store (an exploratory notebook run, a 0-record paper-preset run) is not shown until it
is pinned, so a run made by accident never silently replaces the cited one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from execcritic.errors import InputError
from execcritic.files import atomic_write_json, locked

FILE = "paper_runs.json"
NOTE = ("The runs paper_figures/ is built from: one run id per paper artifact (results/<artifact>/<run_id>/) and "
        "the training runs drawn in Figure 6 (results/training/<run_id>/). Written by `execcritic reproduce`; "
        "`execcritic figures --run ARTIFACT=RUN_ID --pin` changes one.")


def pins_path(root: str | Path) -> Path:
    return Path(root) / FILE


def read_pins(root: str | Path) -> dict[str, Any]:
    """{"runs": {artifact: run_id}, "training": [run_id, ...]}; empty when the store has no pins file."""
    path = pins_path(root)
    if not path.is_file():
        return {"runs": {}, "training": []}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg} at line {exc.lineno})", file=str(path)) from None
    runs, training = data.get("runs", {}), data.get("training", [])
    if not isinstance(runs, dict) or not all(isinstance(v, str) for v in runs.values()):
        raise InputError("`runs` must map artifact names to run ids", file=str(path), field="runs")
    if not isinstance(training, list) or not all(isinstance(v, str) for v in training):
        raise InputError("`training` must be a list of run ids", file=str(path), field="training")
    return {"runs": dict(runs), "training": list(training)}


def write_pins(root: str | Path, *, runs: Mapping[str, str] | None = None,
               training: Sequence[str] | None = None) -> Path:
    """Pin `runs` (merged into the existing pins) and, when given, replace the pinned training runs."""
    path = pins_path(root)
    with locked(path.with_name(f".{FILE}.lock")):
        current = read_pins(root)
        current["runs"].update(runs or {})
        if training is not None:
            current["training"] = sorted(dict.fromkeys(training))
        return atomic_write_json(path, {"note": NOTE, "runs": dict(sorted(current["runs"].items())),
                                        "training": current["training"]})


__all__ = ["FILE", "pins_path", "read_pins", "write_pins"]
