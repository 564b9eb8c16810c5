"""The pipeline's three record types (flat JSON objects: one pandas row each), kept in append-only
`results.records.RecordStore` files."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from execcritic.results.records import RecordStore, unit_key

__all__ = ["GenerationRecord", "RecordStore", "RepairRecord", "ScoreRecord", "unit_key"]


@dataclass
class GenerationRecord:
    """One generation episode per (issue, Test source). `bundle` is set iff a bundle qualified."""

    instance_id: str
    source: str                                  # "oracle" | "none" | "model:<spec>"
    qualified: bool = False
    exit_status: str = ""
    bundle: dict | None = None                   # TestBundle.to_dict() of the retained bundle
    gate: dict | None = None                     # harness.execution.gate_record of the last Base gate
    attempts_used: int = 0
    candidate_bundle: dict | None = None         # oracle: the bundle that was gated, qualified or not
    error: str = ""
    trajectory: str = ""
    episode: dict = field(default_factory=dict)  # the Test-agent episode record (attempts, turns, history)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        episode = d.pop("episode")
        return {**episode, **d}


@dataclass
class RepairRecord:
    """One Repair run per (issue, Test source, run index) reusing that pair's one bundle."""

    instance_id: str
    source: str
    run: int
    qualified_bundle: bool
    result: dict                                 # RepairResult.to_record()
    trajectory: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "source": self.source, "run": self.run,
                "qualified_bundle": self.qualified_bundle, **self.result, "trajectory": self.trajectory}


@dataclass
class ScoreRecord:
    """One fresh official evaluation of a terminal Repair patch (`repair_key` names the run)."""

    instance_id: str
    repair_key: str
    official: dict                               # OfficialResult.to_dict()

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "repair_key": self.repair_key, **self.official}
