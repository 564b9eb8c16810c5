"""Fixtures for training on real `verified-sdist` episodes (sympy__sympy-24443: a short issue that fits the tiny
model's 8k window, and a built environment).

What is real here: the task, its built environment, the sandboxes, the harness (Base gate, Gold audit,
discrimination, the Oracle F2P bundle) and every official label. What is scripted, and named as such: the
*token* choices of the random tiny model on some turns (`ForcedTurns`: constrained decoding, the model still
runs and its logprobs are recorded), the bundles/patches those forced turns write, and one Repair-run record
in the pipeline's `repair.jsonl` shape that supplies a hand-made candidate.
"""

from __future__ import annotations

import json
import threading

import pytest

from execcritic.agents.loop import CHECK_MARKER, SUBMIT_MARKER
from execcritic.bundle.model import TestBundle
from tests.sdist import load_sdist_tasks
from tests.training_fixtures import ForcedTurns, bash_call_text

INSTANCE = "sympy__sympy-24443"
RENAMED = "_verify_images"
BIN_TEST = "PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning bin/test -C --verbose"


def _test_file_patch(path: str, body: str) -> str:
    lines = body.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def _bundle(path: str, body: str, node: str, entrypoint: str) -> TestBundle:
    contract = {"entrypoint": entrypoint, "trigger": "the identity map of DihedralGroup(3) onto itself",
                "expected_output": "accepted as a homomorphism", "issue_evidence": ["the issue's D3 example"],
                "alternative_hypotheses": ["only inverted generators are mishandled"],
                "non_assertions": ["the error message text"], "test_nodes": [node]}
    return TestBundle(_test_file_patch(path, body), f"{BIN_TEST} {path} -k {node}", json.dumps(contract, indent=1))


# A repository-native regression test through the public API: fails on Base (ValueError), passes on a fix.
PUBLIC = _bundle("sympy/combinatorics/tests/test_homomorphism_d3.py",
                 "from sympy.combinatorics.homomorphisms import homomorphism\n"
                 "from sympy.combinatorics.named_groups import DihedralGroup\n\n\n"
                 "def test_dihedral_identity_homomorphism():\n"
                 "    D3 = DihedralGroup(3)\n"
                 "    T = homomorphism(D3, D3, D3.generators, D3.generators)\n"
                 "    assert T.is_isomorphism()\n",
                 "test_dihedral_identity_homomorphism", "sympy.combinatorics.homomorphisms.homomorphism")

# The same behaviour pinned through a private helper: a correct candidate that renames the helper breaks its
# import, an operational error in candidate discrimination that masks the trajectory (§4.1).
PRIVATE = _bundle("sympy/combinatorics/tests/test_check_homomorphism.py",
                  "from sympy.combinatorics.homomorphisms import _check_homomorphism\n"
                  "from sympy.combinatorics.named_groups import DihedralGroup\n\n\n"
                  "def test_check_homomorphism_dihedral():\n"
                  "    D3 = DihedralGroup(3)\n"
                  "    assert _check_homomorphism(D3, D3, dict(zip(D3.generators, D3.generators)))\n",
                  "test_check_homomorphism_dihedral", "sympy.combinatorics.homomorphisms._check_homomorphism")


def heredoc(path: str, text: str, tag: str) -> str:
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {path} <<'{tag}'\n{body}{tag}"


def write_bundle(b: TestBundle) -> str:
    return "\n".join([heredoc("/tmp/test.patch", b.test_patch, "EOF_PATCH"),
                      heredoc("/tmp/test_command", b.command_line, "EOF_CMD"),
                      heredoc("/tmp/test_contract.json", b.contract_text, "EOF_JSON")])


SUBMIT_TEST = f"echo {SUBMIT_MARKER} && cat /tmp/test.patch"
EXPORT = "cd /testbed && git add -A -N && git diff > /tmp/fix.patch"
SUBMIT_FIX = f"echo {SUBMIT_MARKER} && cat /tmp/fix.patch"
CHECK_FIX = f"echo {CHECK_MARKER} && cat /tmp/fix.patch"


class ScriptedTokenPolicy:
    """A scripted *token* policy (named as such): wraps a real episode and, for the k-th episode it starts,
    constrains the model's sampled tokens to `plans[k % len(plans)]` (a list of bash commands, one per turn;
    `None` leaves a turn free). The episode code it wraps is the real one."""

    def __init__(self, tokenizer, plans: list[tuple[str, list[str | None]]]):
        self.tok = tokenizer
        self.stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.plans = [(name, [None if c is None else self.encode(c) for c in cmds]) for name, cmds in plans]
        self.lock = threading.Lock()
        self.started = 0

    def encode(self, command: str) -> list[int]:
        return self.tok.encode(bash_call_text(command), add_special_tokens=False)

    @property
    def max_turn_tokens(self) -> int:
        return max(len(t) for _, turns in self.plans for t in turns if t) + 4

    def wrap(self, episode):
        def run(policy, row):
            with self.lock:
                name, turns = self.plans[self.started % len(self.plans)]
                self.started += 1
            policy.logits_processor = ForcedTurns(turns, self.stop)
            try:
                result = episode(policy, row)
            except Exception as exc:
                exc.add_note(f"scripted plan {name!r}")
                raise
            result.info["scripted_plan"] = name
            return result
        return run


class ServerScript:
    """The scripted token plans of a `ScriptedTokenPolicy` for a rollout *server* (`verl_adapter.CPUTokenServer`):
    the k-th episode (request id) the server sees gets plan k's forced turns (named as scripted; the model still
    runs and its logprobs are recorded). Picklable, so it can be shipped to a Ray actor."""

    def __init__(self, scripted: "ScriptedTokenPolicy"):
        self.plans = scripted.plans
        self.stop = scripted.stop

    def __call__(self, index: int):
        name, turns = self.plans[index % len(self.plans)]
        return name, ForcedTurns(turns, self.stop)


@pytest.fixture(scope="session")
def sympy_task():
    """Skips (tests/sdist.py says why) when the rows or bubblewrap are missing."""
    return load_sdist_tasks([INSTANCE])[INSTANCE]        # built here on a fresh machine (cached, locked)


def renamed_candidate(task) -> str:
    """Gold plus a rename of the private helper `_check_homomorphism` (a correct, refactoring candidate),
    computed in a real sandbox."""
    from execcritic.config import PAPER
    from execcritic.sandbox.base import Limits
    from execcritic.tasks.environment import environment_for

    with environment_for(task).open_sandbox(limits=Limits.from_config(PAPER.harness)) as sb:
        sb.write_file("/tmp/gold.patch", task.patch.encode())
        res = sb.run(f"cd /testbed && git apply /tmp/gold.patch && sed -i 's/_check_homomorphism/{RENAMED}/g' "
                     "sympy/combinatorics/homomorphisms.py && git diff -- sympy/combinatorics/homomorphisms.py",
                     timeout=120)
    assert res.exit_code == 0 and RENAMED in res.output, res.output[-2000:]
    return res.output


@pytest.fixture(scope="session")
def candidate_run(sympy_task, tmp_path_factory):
    """`build_candidates` on the task: Gold, its mutant(s), and a Repair-run candidate from a `repair.jsonl` in
    the pipeline's shape - every label from a real official run (3 runs, 2 in parallel)."""
    from execcritic.training.candidates import build_candidates

    base = tmp_path_factory.mktemp("candidates")
    repair_dir = base / "pipeline-run"
    repair_dir.mkdir()
    record = {"key": f"{INSTANCE}/oracle/run0", "instance_id": INSTANCE, "source": "oracle", "run": 0,
              "qualified_bundle": True, "final_patch": renamed_candidate(sympy_task), "round0": {"patch": ""},
              "final_reason": "check_pass"}
    (repair_dir / "repair.jsonl").write_text(json.dumps(record) + "\n")
    (repair_dir / "summary.json").write_text(json.dumps({"manifest": {"model": {
        "repair": "scripted:tests/training/rl_fixtures.py (a hand-made refactoring candidate)"}}}))
    result = build_candidates([sympy_task], base / "run", repair_runs=[repair_dir], workers=2, show_progress=False)
    return result
