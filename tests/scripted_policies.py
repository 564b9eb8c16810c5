"""Deterministic scripted *policies* for demonstrations and tests of the pipeline's control flow.

These are not models and never claim to be: each builds a `ScriptedModel` whose manifest says
"scripted". `wrong_then_gold` plays a Repair agent that first submits a wrong patch (a harmless
comment in the first file Gold touches), receives the feedback envelope, then applies Gold and CHECKs.
It reads Gold *because it is a scripted stand-in* used to exercise the Test-to-Improve loop end to end
(first CHECK fails with feedback, second passes, official resolved) - never a result about agents.
`official_tests` plays a Test agent that submits the official F2P bundle (it reads the official tests,
again only because it is a stand-in); `no_tests` plays one that never submits.

They live with the tests, outside the agents package: only a stand-in may read Gold, and the pipeline
hands it the full task through its factory. Referenced by spec strings:
`scripted:tests/scripted_policies.py:wrong_then_gold`.
"""

from __future__ import annotations

import shlex

from execcritic.agents.loop import CHECK_MARKER, SUBMIT_MARKER
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.tasks.model import Task
from execcritic.training.teachers import heredocs

EXPORT = "cd /testbed && git add -A -N && git diff -- . > /tmp/fix.patch"


def _first_source_file(patch: str) -> str:
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            return line[6:].strip()
    raise ValueError("the gold patch names no file")


def _write_then(path: str, text: str, then: str) -> str:
    """`cat > path <<'TAG' && then` with the body after it: the terminator must stand alone on its line."""
    tag = "EXECCRITIC_SCRIPTED_EOF"
    while tag in text:
        tag += "_X"
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {path} <<'{tag}' && {then}\n{body}{tag}"


def wrong_then_gold(task: Task, role: str = "repair", run_index: int = 0) -> ScriptedModel:
    target = _first_source_file(task.patch)
    comment = "# scripted policy: a first attempt that changes nothing\n"
    steps = [
        ["cd /testbed && git status --short"],
        [f"cd /testbed && printf %s {shlex.quote(chr(10) + comment)} >> {shlex.quote(target)}"],
        [EXPORT],
        [f"echo {SUBMIT_MARKER} && cat /tmp/fix.patch"],
        # revision round 1: revert the wrong attempt, apply the fix, CHECK
        [f"cd /testbed && git checkout -- {shlex.quote(target)} && "
         + _write_then("/tmp/gold.patch", task.patch, "(git apply --whitespace=nowarn /tmp/gold.patch || "
                                                      "patch --batch --forward -p1 --fuzz=5 -i /tmp/gold.patch)")],
        [EXPORT],
        [f"echo {CHECK_MARKER} && cat /tmp/fix.patch"],
        # round 2, reached only when Gold cannot pass (an impossible variant): FINAL-SUBMIT what it has
        [f"echo {SUBMIT_MARKER}"],
    ]
    return ScriptedModel(steps, name=f"scripted:wrong_then_gold:{task.instance_id}")


def gives_up(task: Task, role: str = "repair", run_index: int = 0) -> ScriptedModel:
    """Submits an empty Round-0 patch at once, and FINAL-SUBMITs it again in the first revision round (a floor
    for the pipeline: never resolves)."""
    return ScriptedModel([[EXPORT], [f"echo {SUBMIT_MARKER} && cat /tmp/fix.patch"], [f"echo {SUBMIT_MARKER}"]],
                         name="scripted:gives_up")


def official_tests(task: Task, role: str = "test", run_index: int = 0) -> ScriptedModel:
    """A Test-agent stand-in: writes the official F2P bundle (test patch, exact command, contract) where
    the Test agent submits from, in one turn, then submits. Qualifies exactly when the official bundle does."""
    b = oracle_bundle(task)
    write = heredocs([("/tmp/test.patch", b.test_patch), ("/tmp/test_command", b.test_command),
                      ("/tmp/test_contract.json", b.contract_text)])
    steps = [[write], [f"echo {SUBMIT_MARKER} && cat /tmp/test.patch"]]
    return ScriptedModel(steps, name=f"scripted:official_tests:{task.instance_id}")


def no_tests(task: Task, role: str = "test", run_index: int = 0) -> ScriptedModel:
    """A Test-agent stand-in that looks around and never submits (a Base-gate failure every time)."""
    return ScriptedModel([["cd /testbed && ls"]] * 3, name="scripted:no_tests")


def public_test_teacher(task: Task, role: str = "test", run_index: int = 0) -> ScriptedModel:
    """A scripted Test-agent *teacher* (a stand-in, named as such) for SFT data on sympy__sympy-24443 only:
    writes a repository-native regression test through the public API as the three bundle files, then
    submits. Its trajectory is a real Test-agent episode (real workspace, real Base gate)."""
    from tests.training.rl_fixtures import INSTANCE, PUBLIC, SUBMIT_TEST, write_bundle

    if task.instance_id != INSTANCE:
        raise ValueError(f"public_test_teacher only knows {INSTANCE}, not {task.instance_id}")
    steps = [["cd /testbed && ls sympy/combinatorics/tests | head -5"], [write_bundle(PUBLIC)], [SUBMIT_TEST]]
    return ScriptedModel(steps, name="scripted:public_test_teacher")
