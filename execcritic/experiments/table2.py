"""Table 2: resolved rate by Repair agent (base, trained) and Test source (none = Round 0, GPT-5.6-sol,
Oracle F2P, Base-35B, RL-35B); means over Repair runs that reuse one fixed bundle per issue and source,
Base-gate failures keep their Round-0 patch, Δ = paired difference from "None (Round 0)"."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

AGENTS = (("base", "repair_base"), ("trained", "repair_trained"))
SOURCES = (("None (Round 0)", "none"), ("GPT-5.6-sol", "test_gpt56"), ("Oracle F2P", "oracle"),
           ("Base-35B", "test_base"), ("RL-35B", "test_rl"))

SPEC = ArtifactSpec("table2", "resolve", tuple(
    Condition({"repair_agent": agent, "test_source": label}, test=source, repair=role,
              labels={"repair_agent": role, **({"test_source": source} if source.startswith("test_") else {})})
    for agent, role in AGENTS for label, source in SOURCES),
    round0=True, test_column="test_source", repair_column="repair_agent")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
