"""Figure 5: resolved rate by feedback source - (a) GPT-5.6-sol as Repair agent on SWE-bench Verified
and Pro, (b) the base Qwen Repair agent on Verified (no test, Qwen-generated, GPT-5.6-generated and
Oracle F2P tests). Panel (b) shares its Repair runs with Table 2's base row when both run together."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

_A = (("Baseline", "none"), ("GPT-5.6 generated", "test_gpt56"), ("Oracle", "oracle"))
_B = (("Baseline", "none"), ("Qwen-35B generated", "test_base"), ("GPT-5.6 generated", "test_gpt56"),
      ("Oracle", "oracle"))


def _cond(panel: str, bench: str, agent: str, role: str, label: str, source: str) -> Condition:
    labels = {"repair_agent": role, **({"feedback_source": source} if source.startswith("test_") else {})}
    return Condition({"panel": panel, "benchmark": bench, "repair_agent": agent, "feedback_source": label},
                     test=source, repair=role, benchmark="pro" if bench == "SWE-bench Pro" else "verified",
                     labels=labels)


SPEC = ArtifactSpec("figure5", "resolve", (
    *(_cond("a", bench, "GPT-5.6-sol", "repair_gpt56", label, source)
      for bench in ("SWE-bench Verified", "SWE-bench Pro") for label, source in _A),
    *(_cond("b", "SWE-bench Verified", "Qwen3.5-35B-A3B", "repair_base", label, source) for label, source in _B)),
    test_column="feedback_source", repair_column="repair_agent")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
