"""Scripted *teachers* for CPU SFT demonstrations: deterministic stand-ins, never models, named as such.

Why they exist: a CPU run of the training stack needs honest teacher trajectories that a 135M model can
imitate, and the paper's teachers (DeepSeek-V4-Flash, GPT-5.6-sol) are out of reach here. Both teachers read
what an agent must never see - that is why they are stand-ins and why they live in the training layer (which
may read Gold; the agents package may not):

- `oracle_test_teacher` plays the Test agent: it writes the official F2P test patch and its exact command, with
  a short generated contract, in one turn, then submits. Its trajectory runs through the real generation stage
  (real workspace, real Base gate); admission is the paper's (a clean Base failure).
- `gold_patch_teacher` plays the Repair agent: it applies Gold's source patch, exports it as the prompt asks,
  then submits. Its trajectory runs through the real Repair controller and verifier.

Referenced by model spec, e.g. `scripted:execcritic.training.teachers:oracle_test_teacher`. Every trajectory and
manifest names the teacher (`scripted:...`), so nothing trained on them can pass for a model's own data.
"""

from __future__ import annotations

import json

from execcritic.agents.loop import SUBMIT_MARKER
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.tasks.model import Task

TEST_TEACHER = "scripted:execcritic.training.teachers:oracle_test_teacher"
REPAIR_TEACHER = "scripted:execcritic.training.teachers:gold_patch_teacher"
EXPORT_FIX = "cd /testbed && git add -A -N && git diff -- . > /tmp/fix.patch"


def heredocs(files: list[tuple[str, str]], then: str = "") -> str:
    """One bash command writing each `(path, text)` with a quoted heredoc (no expansion), then `then`; every
    terminator is unique and stands alone on its line."""
    heads, bodies = [], []
    for i, (path, text) in enumerate(files):
        tag = f"EOF{i}"
        while tag in text:
            tag += "_X"
        heads.append(f"cat > {path} <<'{tag}'")
        bodies.append((text if text.endswith("\n") else text + "\n") + tag)
    return " && ".join(heads) + (f" && {then}" if then else "") + "\n" + "\n".join(bodies)


def short_contract(nodes: list[str]) -> str:
    """A minimal valid test contract for the official nodes (one line; what a terse teacher writes)."""
    return json.dumps({"entrypoint": "public API", "trigger": "the issue's example", "expected_output":
                       "the corrected behavior", "issue_evidence": ["the issue"], "alternative_hypotheses":
                       ["none"], "non_assertions": ["internals"], "test_nodes": nodes})


def oracle_test_teacher(task: Task, role: str = "test", run_index: int = 0) -> ScriptedModel:
    """Test-agent teacher (a stand-in reading the official tests): official F2P patch + command, short contract."""
    b = oracle_bundle(task)
    nodes = list(json.loads(b.contract_text)["test_nodes"])
    write = heredocs([("/tmp/test.patch", b.test_patch), ("/tmp/test_command", b.test_command),
                      ("/tmp/test_contract.json", short_contract(nodes))])
    return ScriptedModel([[write], [f"echo {SUBMIT_MARKER} && cat /tmp/test.patch"]],
                         name=f"{TEST_TEACHER}:{task.instance_id}")


def gold_patch_teacher(task: Task, role: str = "repair", run_index: int = 0) -> ScriptedModel:
    """Repair teacher (a stand-in reading Gold): applies Gold, exports the patch, submits."""
    apply = heredocs([("/tmp/gold.patch", task.patch)],
                     then=f"cd /testbed && git apply --recount /tmp/gold.patch && {EXPORT_FIX.split(' && ', 1)[1]}")
    return ScriptedModel([[apply], [f"echo {SUBMIT_MARKER} && cat /tmp/fix.patch"]],
                         name=f"{REPAIR_TEACHER}:{task.instance_id}")


__all__ = ["REPAIR_TEACHER", "TEST_TEACHER", "gold_patch_teacher", "heredocs", "oracle_test_teacher",
           "short_contract"]
