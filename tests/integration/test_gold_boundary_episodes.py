"""The Gold boundary at run time (the static half is tests/unit/test_gold_boundary.py): real Test-agent and
Repair episodes on the toolz demo task, in real bubblewrap sandboxes, driven by scripted stand-ins that never
write the fix themselves. Nothing the model receives, and nothing the trajectory records, may contain a Gold
line, the official test patch's test, or a FAIL_TO_PASS name.
"""

from __future__ import annotations

import json
import shlex

import pytest

from execcritic.agents.loop import CHECK_MARKER, SUBMIT_MARKER
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.agents.repair import run_repair
from execcritic.agents.test_agent import run_test_agent
from execcritic.config import PAPER, RepairConfig, TestAgentConfig
from execcritic.harness.services import BaseGate, CandidateVerifier
from execcritic.sandbox.base import Limits
from tests.bundles import ScenarioKit, contract

pytestmark = pytest.mark.integration


def secrets(task) -> list[str]:
    """Text only Gold or the official tests carry: Gold's added lines, the official test's added lines,
    the F2P test names."""
    added = [ln[1:].strip() for ln in task.patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    tests = [ln[1:].strip() for ln in task.test_patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    names = [n.split("::")[-1] for n in task.fail_to_pass]
    return [s for s in added + tests + names if len(s) > 8]


def leaks(task, *texts: str) -> list[str]:
    return [s for s in secrets(task) for t in texts if s in t]


@pytest.fixture(scope="module")
def boxes(demo_toolz):
    limits = Limits(memory_mb=1024, pids=PAPER.harness.pids_limit)
    ws, ver = demo_toolz.open_local(limits=limits), demo_toolz.open_local(limits=limits)
    yield demo_toolz, ws, ver
    ws.close()
    ver.close()


def test_secrets_are_what_gold_and_the_official_tests_carry(demo_toolz):
    s = secrets(demo_toolz.task)
    assert "d[item] += 1" in s and "test_frequencies_counts_repeats" in s


def test_test_agent_sees_no_gold(boxes):
    demo, ws, ver = boxes
    task = demo.task
    body = "\n\ndef test_counts_repeats():\n    assert frequencies(['a', 'a', 'b']) == {'a': 2, 'b': 1}\n"
    node = "toolz/tests/test_itertoolz.py::test_counts_repeats"
    steps = [["cd /testbed && git log --all --oneline && git status && ls /tmp"],
             [f"cd /testbed && printf %s {shlex.quote(body)} >> toolz/tests/test_itertoolz.py"],
             [f"printf '%s\\n' {shlex.quote(f'python3 -m pytest -p no:cacheprovider {node}')} > /tmp/test_command && "
              f"printf '%s' {shlex.quote(json.dumps(contract(['test_counts_repeats'])))} > /tmp/test_contract.json && "
              "cd /testbed && git add -AN && git diff --no-color > /tmp/test.patch"],
             [f"echo {SUBMIT_MARKER}"]]
    model = ScriptedModel(steps)
    gate = BaseGate(task, ver, harness=PAPER.harness, diagnostics_chars=PAPER.test_agent.diagnostics_chars)
    res = run_test_agent(task.view(), model, workspace=ws, gate=gate, config=TestAgentConfig(max_turns=6))
    assert res.qualified                      # the episode really ran through the Base gate
    received = json.dumps(model.calls)
    recorded = json.dumps(res.trajectory.to_dict()) + json.dumps(res.to_record(), default=str)
    assert leaks(task, received, recorded) == []


def test_repair_agent_with_a_generated_bundle_sees_no_gold_or_official_test(boxes):
    demo, ws, ver = boxes
    task = demo.task
    kit = ScenarioKit(demo, ver)
    generated = kit.bundle("def test_counts_repeats():\n    from toolz import frequencies\n"
                           "    assert frequencies(['a', 'a']) == {'a': 2}\n", ["test_counts_repeats"])
    wrong = "cd /testbed && sed -i 's/d\\[item\\] = 1/d[item] = 1  # first look/' toolz/itertoolz.py"
    export = "cd /testbed && git add -A -N && git diff > /tmp/fix.patch"
    steps = [[wrong], [export], [f"echo {SUBMIT_MARKER}"],
             ["cd /testbed && git diff && ls /tmp"], [export], [f"echo {CHECK_MARKER}"], [f"echo {SUBMIT_MARKER}"]]
    model = ScriptedModel(steps)
    verifier = CandidateVerifier(task, generated, ver, harness=PAPER.harness, feedback_chars=PAPER.repair.feedback_chars)
    res = run_repair(task.view(), model, workspace=ws, verifier=verifier,
                     config=RepairConfig(turns_per_round=3, revision_rounds=2))
    assert res.entered_repair and any(c.trigger == "initial" for c in res.checks)   # feedback was really given
    received = json.dumps(model.calls)
    recorded = json.dumps(res.trajectory.to_dict()) + json.dumps(res.to_record(), default=str)
    assert leaks(task, received, recorded) == []
