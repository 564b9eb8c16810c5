"""Every paper artifact's specification, by name."""

from __future__ import annotations

from execcritic.experiments import figure5, figure6, table1, table2, table3, table4, table5, table6
from execcritic.experiments.conditions import ArtifactSpec

MODULES = {m.SPEC.artifact: m for m in (table1, table2, table3, table4, table5, table6, figure5, figure6)}
SPECS: dict[str, ArtifactSpec] = {a: m.SPEC for a, m in MODULES.items()}

__all__ = ["MODULES", "SPECS"]
