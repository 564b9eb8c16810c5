"""Table 5: cross-language Base-to-Gold of the Python-only post-trained Test agent (RL-35B): Python on
SWE-bench Verified, Rust/C++/C/Java on the SWE-bench Multilingual subsets (official images). Each
language is a rate over its own subset (per-condition denominators in the manifest)."""

from __future__ import annotations

from execcritic.experiments.conditions import ArtifactSpec, Condition
from execcritic.experiments.core import execute
from execcritic.experiments.resolved import Params
from execcritic.results.store import Run

SPEC = ArtifactSpec("table5", "b2g", (
    Condition({"language": "Python"}, test="test_rl", labels={"language": "test_rl"},
              record={"dataset": "SWE-bench Verified"}),
    *(Condition({"language": lang}, test="test_rl", benchmark="multilingual", language=lang,
                labels={"language": "test_rl"}, record={"dataset": "SWE-bench Multilingual"})
      for lang in ("Rust", "C++", "C", "Java"))), test_column="language")


def run(params: Params, *, show_progress: bool = True) -> Run:
    return execute(SPEC, params, show_progress=show_progress)
