"""The Test-agent episode, driven by a deterministic scripted model (a stand-in, not a model) in real
bubblewrap sandboxes on the toolz demo task.

Covered: qualification on the first valid clean-Base-failing submission; rejection at validation
(file-level selector) then revision; a Base-passing test rejected by the gate with bounded
diagnostics; missing bundle files; the 5-submission cap; the turn cap; the context budget; the Gold-free workspace
(history sanitized and re-verified); (the Gold boundary itself is tests/unit/test_gold_boundary.py).
"""

from __future__ import annotations

import json
import shlex

import pytest

from execcritic.agents.loop import SUBMIT_MARKER
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.agents.test_agent import run_test_agent
from execcritic.agents.workspace import sanitize_history
from execcritic.config import PAPER, TestAgentConfig
from execcritic.harness.services import BaseGate
from execcritic.sandbox.base import Limits
from tests.bundles import contract

pytestmark = pytest.mark.integration

GOOD_TEST = "\n\ndef test_counts_repeats():\n    assert frequencies(['a', 'a', 'b']) == {'a': 2, 'b': 1}\n"
PASSING_TEST = "\n\ndef test_counts_repeats():\n    assert frequencies(['a', 'b']) == {'a': 1, 'b': 1}\n"
NODE = "toolz/tests/test_itertoolz.py::test_counts_repeats"


def write_test(body: str) -> list[str]:
    return [f"cd /testbed && git checkout -q -- toolz/tests && printf %s {shlex.quote(body)} "
            ">> toolz/tests/test_itertoolz.py"]


def prepare(command: str = f"python3 -m pytest -p no:cacheprovider {NODE}", nodes=("test_counts_repeats",)):
    blob = json.dumps(contract(list(nodes)))
    return [f"printf '%s\\n' {shlex.quote(command)} > /tmp/test_command && printf '%s' {shlex.quote(blob)} > "
            "/tmp/test_contract.json && cd /testbed && git add -AN && git diff --no-color > /tmp/test.patch"]


SUBMIT = [f"echo {SUBMIT_MARKER} && cat /tmp/test.patch"]


@pytest.fixture(scope="module")
def boxes(demo_toolz):
    limits = Limits(memory_mb=1024, pids=PAPER.harness.pids_limit)
    ws, ver = demo_toolz.open_local(limits=limits), demo_toolz.open_local(limits=limits)
    yield demo_toolz.task, ws, ver
    ws.close()
    ver.close()


def run(boxes, steps, config=TestAgentConfig()):
    task, ws, ver = boxes
    gate = BaseGate(task, ver, harness=PAPER.harness, diagnostics_chars=config.diagnostics_chars)
    return run_test_agent(task.view(), ScriptedModel(steps), workspace=ws, gate=gate, config=config)


def test_first_clean_failure_is_qualified(boxes):
    res = run(boxes, [["cd /testbed && git status"], write_test(GOOD_TEST), prepare(), SUBMIT])
    assert res.qualified and res.exit_status == "qualified" and len(res.attempts) == 1
    assert res.bundle is not None and "test_counts_repeats" in res.bundle.test_patch
    assert res.attempts[0].gate["failure_kind"] == "behavioral_failure"
    assert res.history["before"]["sanitized"] and res.history["after"]["sanitized"], res.history
    rec = res.to_record()
    assert rec["attempts_used"] == 1 and rec["prompt_digest"] == res.prompt_digest


def test_file_level_selector_rejected_then_fixed(boxes):
    steps = [write_test(GOOD_TEST), prepare("python3 -m pytest toolz/tests/test_itertoolz.py"), SUBMIT,
             prepare(), SUBMIT]
    res = run(boxes, steps)
    assert res.qualified and len(res.attempts) == 2
    assert res.attempts[0].stage == "validation" and res.attempts[0].reasons
    rejected = [m for m in res.trajectory.messages if "SUBMISSION REJECTED at validation" in str(m.get("content"))]
    assert rejected


def test_base_passing_test_is_rejected_with_diagnostics(boxes):
    res = run(boxes, [write_test(PASSING_TEST), prepare(), SUBMIT, write_test(GOOD_TEST), prepare(), SUBMIT])
    assert res.qualified and len(res.attempts) == 2
    first = res.attempts[0]
    assert first.stage == "base_gate" and first.gate["verdict"] == "PASS" and not first.qualified
    feedback = [m["content"] for m in res.trajectory.messages if "REJECTED at base_gate" in str(m.get("content"))]
    assert feedback and "verdict: PASS" in feedback[0] and len(feedback[0]) <= 6200


def test_missing_files_rejected(boxes):
    res = run(boxes, [["rm -f /tmp/test.patch /tmp/test_command /tmp/test_contract.json"], SUBMIT],
              TestAgentConfig(max_turns=2))
    # `cat` of a missing file exits 1, so the marker is not a submission: nothing was attempted
    assert res.attempts == [] and res.exit_status == "turns_exhausted"
    res = run(boxes, [["rm -f /tmp/test_command /tmp/test_contract.json && echo diff > /tmp/test.patch"], SUBMIT],
              TestAgentConfig(max_turns=2))
    assert res.attempts[0].stage == "files" and not res.qualified
    assert any("/tmp/test_command" in r for r in res.attempts[0].reasons)


def test_submission_cap(boxes):
    bad = prepare("python3 -m pytest toolz/tests/test_itertoolz.py")
    res = run(boxes, [write_test(GOOD_TEST), bad] + [SUBMIT] * 5, TestAgentConfig(max_submissions=5))
    assert res.exit_status == "submissions_exhausted" and len(res.attempts) == 5 and not res.qualified


def test_turn_cap(boxes):
    res = run(boxes, [["true"]] * 3, TestAgentConfig(max_turns=3))
    assert res.exit_status == "turns_exhausted" and res.turns == 3 and res.attempts == []


def test_context_budget_ends_the_episode(boxes):
    """The server reports more tokens than the 48k Test context: the next request is not sent."""
    from execcritic.agents.models.base import build_response

    big = build_response("", [{"id": "c0", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
        {"command": "ls"})}}], tool_mode="tools", usage={"prompt_tokens": 47_990, "completion_tokens": 20},
        latency_s=0.0, finish_reason="tool_calls")
    res = run(boxes, [big, write_test(GOOD_TEST)])
    assert res.exit_status == "context_exhausted" and res.turns == 1 and res.bundle is None


def test_workspace_has_no_route_to_the_fix(boxes):
    res = run(boxes, [["cd /testbed && git log --all --oneline | wc -l && git remote | wc -l"]],
              TestAgentConfig(max_turns=1))
    facts = res.history["before"]["facts"]
    assert facts["remotes"] == 0 and facts["extra_refs"] == 0 and facts["reflog"] == 0
    assert facts["all_commits"] == facts["head_commits"] and facts["unreachable"] == 0


def test_a_stale_gc_pid_from_another_host_does_not_stop_sanitizing(boxes):
    """A cached checkout built while git's background gc ran keeps its gc.pid; from the sandbox's hostname git gc
    took it for a gc running elsewhere and refused for 12 hours (every Django Test episode: workspace_error)."""
    _, ws, _ = boxes
    ws.reset()
    ws.run("printf '12345 another-host' > /testbed/.git/gc.pid", timeout=30)
    try:
        report = sanitize_history(ws)
        assert report.sanitized, report.error
    finally:
        ws.reset()
