"""The Gold boundary as a type: what an agent may see of a task.

The paper's central claim is that Gold (the reference patch) and the official tests neither enter
generation nor decide admission (§3.1, Appendix B.1). Agents therefore receive a `TaskView` - the issue
text and the repository's identity - and talk to the harness only through services that hold the full
task for them (`harness.services.BaseGate`, `harness.services.CandidateVerifier`). A `TaskView` has no
field that could carry Gold, the official test patch or its test names; `tests/unit/test_gold_boundary.py`
checks that, and that the agents package never reaches for them.
"""

from __future__ import annotations

from dataclasses import dataclass

# Task fields that carry Gold or the official tests: never part of a view, never read by an agent.
HIDDEN_FIELDS = ("patch", "test_patch", "fail_to_pass", "pass_to_pass", "eval_script")


@dataclass(frozen=True)
class TaskView:
    instance_id: str
    repo: str
    problem_statement: str      # the issue text d
    language: str               # the repository's language (which rules apply to its tests)
