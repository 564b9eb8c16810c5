"""A run's resolved parameters: the preset with every override applied (checked by `params.parameters`).

Its own module so that the per-artifact modules and `core` can use it without importing the parameter check,
which imports the artifact registry (the layer stays one-way: resolved <- core <- artifacts <- params)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from execcritic.config import ProtocolConfig
from execcritic.experiments.presets import ROLES, Binding, Preset


@dataclass(frozen=True)
class Params:
    """A notebook's resolved parameters: the preset with every override applied."""

    artifact: str
    preset: Preset
    dataset: str | None
    instances: tuple[str, ...] | None
    limit: int | None
    models: Mapping[str, Binding]
    test_sources: tuple[str, ...] | None
    repair_agents: tuple[str, ...] | None
    runs: int
    workers: int
    seeds: tuple[int, ...]
    output_dir: Path
    reuse: str | None
    run_id: str
    work_dir: Path | None
    protocol: ProtocolConfig
    given: Mapping[str, Any] = field(default_factory=dict)     # what the caller passed (for the manifest)
    train: bool = False                 # CPU presets: train the trained roles the artifact uses (opt-in)
    allow_gpu_hours: float = 0.0        # verl presets: the largest GPU-hour estimate a launch may start with
    skip_unrunnable: bool = False       # a condition that cannot run here is rendered "not run here", not an error

    def binding(self, role: str) -> Binding:
        return self.models[role] if role in self.models else self.preset.binding(role)

    @property
    def pipeline_dir(self) -> Path:
        """Where this run's pipeline units (episodes, Repair runs, official scores) are kept."""
        return self.work_dir or (self.output_dir / "pipeline" / f"suite-{self.run_id}")

    def describe(self) -> pd.DataFrame:
        """The resolved parameters as a two-column table (shown under the parameters cell)."""
        rows = [("artifact", self.artifact), ("preset", f"{self.preset.name}: {self.preset.banner}"),
                ("dataset", self.dataset), ("instances", ", ".join(self.instances) if self.instances else "all"),
                ("limit", self.limit), ("runs", self.runs), ("workers", self.workers), ("seeds", list(self.seeds)),
                ("output_dir", str(self.output_dir)), ("run_id", self.run_id), ("reuse", self.reuse),
                ("training", f"{self.preset.training}" + (", train=True (CPU stand-ins are trained)" if self.train
                                                          else "") + (f", allow_gpu_hours={self.allow_gpu_hours:g}"
                                                                      if self.preset.training == "verl" else "")),
                ("protocol deviations", ", ".join(f"{k}={b}" for k, (_, b) in self.protocol.deviations().items())
                 or "none")]
        for role in ROLES:
            b = self.binding(role)
            if b.bound:
                rows.append((f"model: {role}", f"{b.spec}" + (f" (stand-in: {b.name})" if b.stand_in else "")))
        return pd.DataFrame(rows, columns=["parameter", "value"])


def new_run_id(preset: str) -> str:
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{preset}"


def with_run_id(params: Params, run_id: str) -> Params:
    return replace(params, run_id=run_id)


__all__ = ["Params", "new_run_id", "with_run_id"]
