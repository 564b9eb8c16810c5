"""What one pipeline run is: where it writes, which Test sources and Repair model, on which backend -
and the protocol it follows. Every number lives in the protocol (`execcritic.config`); this holds only
what is not a knob of the paper (paths, model specs, the backend)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from execcritic.config import PAPER, ProtocolConfig

SOURCES_BUILTIN = ("oracle", "none")


@dataclass(frozen=True)
class PipelineConfig:
    out_dir: str
    test_sources: tuple[str, ...] = ("oracle",)     # "oracle", "none", or a model spec
    repair_model: str = "local"
    backend: str | None = None                      # None: the task's own environment kind
    protocol: ProtocolConfig = PAPER
    # spec -> the endpoint spec that serves it in this session (e.g. "local" -> openai-text:http://...):
    # records and resume keys use the stable spec, model clients the served one
    endpoints: tuple[tuple[str, str], ...] = ()
    # where generate-tests keeps its records and Test trajectories (default: out_dir). Several Repair
    # models share one directory of generated bundles, so every Repair agent revises against the same
    # fixed bundle per (issue, Test source), as the paper's paired comparisons need
    generation_dir: str | None = None

    @property
    def runs(self) -> int:
        return self.protocol.repair.runs_per_source

    def resolve(self, spec: str) -> str:
        return dict(self.endpoints).get(spec, spec)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["protocol_deviations"] = {k: list(v) for k, v in self.protocol.deviations().items()}
        return d

    @property
    def paths(self) -> dict[str, Path]:
        out = Path(self.out_dir)
        gen = Path(self.generation_dir) if self.generation_dir else out
        return {"generation": gen / "generation.jsonl", "repair": out / "repair.jsonl",
                "score": out / "score.jsonl", "trajectories": out / "trajectories",
                "test_trajectories": gen / "trajectories" / "test"}


def source_label(source: str) -> str:
    return source if source in SOURCES_BUILTIN else f"model:{source}"
