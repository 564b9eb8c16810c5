"""Every branch of the Repair controller, driven by a deterministic scripted model (ScriptedModel,
a stand-in, not a model) in real bubblewrap sandboxes on the toolz demo task.

Branches covered (SPEC §2.4, Listings 4-12):
  1. no qualified bundle -> Round-0 patch forwarded (Base-gate failure)        test_no_bundle_forwards_round0
  2. Round-0 patch passes the initial gate -> submitted, no revision           test_round0_pass_ends_repair
  3. wrong Round-0 patch -> envelope -> fixed -> CHECK passes (Listing 9)      test_check_fail_then_pass
  4. unchanged CHECK -> Listing 11, gate not rerun, no check consumed          test_unchanged_candidate_is_not_rerun
  5. no CHECK within the round's turns -> forced check                        test_forced_check_after_round_turns
  6. budget exhausted -> LATEST candidate force-submitted (Listing 10)         test_budget_exhaustion_submits_latest
     (no revision budget at all -> the failing p0 stands)                     test_zero_revision_rounds_scores_the_checked_round0_patch
  7. FINAL-SUBMIT before a pass -> current candidate, gate recorded apart      test_final_submit_before_pass
  8. inconclusive CHECK grants no extra budget                                 test_inconclusive_check_consumes_a_round
  9. provided patch applies -> it is p0                                        test_provided_patch_mode
 10. provided patch does not apply -> Listing 12 recovery in the same budget   test_unapplicable_provided_patch_recovers
 11. test-file edits excluded from candidates and flagged; new files included test_candidate_excludes_tests_includes_new_files
 12. Round 0 turn limit -> the workspace diff is p0                           test_round0_turn_limit
 13. a turn without an action -> Listing 3, the turn counts                    test_format_error_costs_a_turn
 14. context budget spent in a round -> latest candidate gated, then submitted test_context_exhausted_in_revision_*
 15. context budget spent in Round 0 / refused by the endpoint -> p0 goes on  test_context_exhausted_in_round0,
                                                                              test_endpoint_refusal_ends_round0
"""

from __future__ import annotations

import json

import pytest

from execcritic.agents.loop import CHECK_MARKER, SUBMIT_MARKER
from execcritic.agents.models.base import ContextWindowExceeded, build_response
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.agents.repair import run_repair
from execcritic.config import PAPER, RepairConfig
from execcritic.harness.services import CandidateVerifier
from execcritic.sandbox.base import Limits
from tests.bundles import ScenarioKit

pytestmark = pytest.mark.integration

FIX = "cd /testbed && sed -i 's/d\\[item\\] = 1/d[item] += 1/' toolz/itertoolz.py"
WRONG = "cd /testbed && sed -i 's/d\\[item\\] = 1/d[item] = 1  # looked at it/' toolz/itertoolz.py"
WRONG2 = "cd /testbed && sed -i 's/  # looked at it/  # looked again/' toolz/itertoolz.py"
BREAK_IMPORT = "cd /testbed && echo 'def broken(:' >> toolz/itertoolz.py"
EXPORT = "cd /testbed && git add -A -N && git diff > /tmp/fix.patch"


def submit() -> list[list[str]]:
    return [[EXPORT], [f"echo {SUBMIT_MARKER} && cat /tmp/fix.patch"]]


def check() -> list[list[str]]:
    return [[EXPORT], [f"echo {CHECK_MARKER} && cat /tmp/fix.patch"]]


@pytest.fixture(scope="module")
def env(demo_toolz):
    limits = Limits(memory_mb=1024, pids=PAPER.harness.pids_limit)
    ws, ver = demo_toolz.open_local(limits=limits), demo_toolz.open_local(limits=limits)
    kit = ScenarioKit(demo_toolz, ver)
    yield kit, ws, ver, kit.official_bundle()
    ws.close()
    ver.close()


def repair(env, steps, *, bundle=True, config=RepairConfig(), **kw):
    kit, ws, ver, official = env
    model = ScriptedModel(steps)
    verifier = (CandidateVerifier(kit.task, official, ver, harness=PAPER.harness, feedback_chars=config.feedback_chars)
                if bundle else None)
    res = run_repair(kit.task.view(), model, workspace=ws, verifier=verifier, config=config, **kw)
    return res, model


def overflowing(commands: list[str]):
    """A step whose reply the server reports as filling far more than any context budget."""
    return lambda _messages: build_response(
        "", [{"id": "big-0", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
            {"command": c})}} for c in commands], tool_mode="tools",
        usage={"prompt_tokens": 10**7, "completion_tokens": 10}, latency_s=0.0, finish_reason="tool_calls")


def messages_with(res, text):
    return [m for m in res.trajectory.messages if text in str(m.get("content", ""))]


def test_no_bundle_forwards_round0(env):
    res, _ = repair(env, [[WRONG], *submit()], bundle=False)
    assert res.final_reason == "no_bundle" and res.checks == [] and res.revision_rounds == 0
    assert "looked at it" in res.final_patch and res.round0["exit_status"] == "submitted"


def test_round0_pass_ends_repair(env):
    res, model = repair(env, [[FIX], *submit()])
    assert res.final_reason == "round0_pass" and res.local_status == "pass"
    assert [c.trigger for c in res.checks] == ["initial"] and res.revision_turns == 0
    assert model.remaining == 0


def test_check_fail_then_pass(env):
    res, _ = repair(env, [[WRONG], *submit(), [FIX], *check()])
    assert res.final_reason == "check_pass" and res.local_status == "pass"
    assert [(c.trigger, c.status) for c in res.checks] == [("initial", "hard_fail"), ("check", "pass")]
    assert "d[item] += 1" in res.final_patch
    assert messages_with(res, "<failing_test_output>") and messages_with(res, "gate_status: hard_fail")
    assert messages_with(res, "The hidden generated-test CHECK passed in a valid execution")
    assert res.revision_rounds == 1 and res.revision_turns == 3


def test_unchanged_candidate_is_not_rerun(env):
    res, _ = repair(env, [[WRONG], *submit(), *check(), [FIX], *check()])
    assert res.unchanged_checks == 1
    assert [c.trigger for c in res.checks] == ["initial", "check"]   # the unchanged CHECK ran nothing
    assert messages_with(res, "did not make a new source-code change")
    assert res.final_reason == "check_pass" and res.revision_rounds == 1


def test_forced_check_after_round_turns(env):
    cfg = RepairConfig(turns_per_round=3, revision_rounds=2)
    res, _ = repair(env, [[WRONG], *submit(), ["ls"], ["ls"], [FIX]], config=cfg)
    assert [(c.trigger, c.status) for c in res.checks] == [("initial", "hard_fail"), ("forced", "pass")]
    assert res.final_reason == "check_pass"


def test_budget_exhaustion_submits_latest(env):
    cfg = RepairConfig(turns_per_round=3, revision_rounds=2)
    res, _ = repair(env, [[WRONG], *submit(), [WRONG2], *check(), ["true"], ["true"], ["true"]], config=cfg)
    assert res.final_reason == "budget_exhausted" and res.revision_rounds == 2
    assert "looked again" in res.final_patch            # the latest candidate, not Round 0's
    assert res.final_patch != res.round0["patch"]
    assert messages_with(res, "has not produced a valid pass after the fifth feedback-guided revision")


def test_zero_revision_rounds_scores_the_checked_round0_patch(env):
    """`--revision-rounds 0` (Round 0 only, an ablation): the initial CHECK fails, and Round 0's patch is final."""
    res, model = repair(env, [[WRONG], *submit()], config=RepairConfig(revision_rounds=0))
    assert res.final_reason == "budget_exhausted" and res.revision_rounds == 0 and res.revision_turns == 0
    assert [(c.trigger, c.status) for c in res.checks] == [("initial", "hard_fail")]
    assert res.final_patch == res.round0["patch"] and model.remaining == 0
    assert "looked at it" in res.final_patch and not messages_with(res, "<failing_test_output>")


def test_final_submit_before_pass(env):
    res, _ = repair(env, [[WRONG], *submit(), [WRONG2], *submit()])
    assert res.final_reason == "final_submit" and "looked again" in res.final_patch
    assert res.checks[-1].trigger == "final_submit" and res.local_status == "hard_fail"


def test_inconclusive_check_consumes_a_round(env):
    cfg = RepairConfig(turns_per_round=4, revision_rounds=2)
    res, _ = repair(env, [[WRONG], *submit(), [BREAK_IMPORT], *check(), ["true"], ["true"], ["true"], ["true"]],
                    config=cfg)
    statuses = [(c.trigger, c.status) for c in res.checks]
    assert statuses[1] == ("check", "inconclusive") and res.checks[1].valid is False
    assert res.final_reason == "budget_exhausted" and res.revision_rounds == 2


def test_provided_patch_mode(env):
    kit = env[0]
    res, _ = repair(env, [], provided_patch=kit.task.patch)
    assert res.mode == "provided" and res.round0["applied"] and res.final_reason == "round0_pass"


def test_unapplicable_provided_patch_recovers(env):
    kit = env[0]
    broken = kit.task.patch.replace("d[item] = 1", "d[item] = 7")
    res, _ = repair(env, [[FIX], *submit()], provided_patch=broken)
    assert res.round0["applied"] is False and res.round0["exit_status"] == "recovered"
    assert messages_with(res, "could NOT be applied by the harness")
    assert res.final_reason == "round0_pass"


def test_candidate_excludes_tests_includes_new_files(env):
    edit_test = "cd /testbed && echo '# tampered' >> toolz/tests/test_itertoolz.py"
    new_file = "cd /testbed && printf 'HELPER = 1\\n' > toolz/_helper.py"
    edit_conftest = "cd /testbed && printf 'import pytest\\n' > conftest.py"
    res, _ = repair(env, [[FIX], [edit_test], [new_file], [edit_conftest], *submit()])
    assert "toolz/_helper.py" in res.final_patch and "test_itertoolz.py" not in res.final_patch
    assert set(res.round0["excluded_paths"]) == {"toolz/tests/test_itertoolz.py", "conftest.py"}
    assert res.final_reason == "round0_pass"


def test_round0_turn_limit(env):
    cfg = RepairConfig(round0_turns=2)
    res, _ = repair(env, [[WRONG], ["true"]], bundle=False, config=cfg)
    assert res.round0["exit_status"] == "turn_limit" and "looked at it" in res.final_patch


def test_format_error_costs_a_turn(env):
    res, _ = repair(env, [[], [FIX], *submit()])
    assert res.round0["turns"] == 4
    assert messages_with(res, "Every response must contain at least one standard bash tool call")


def test_prepared_untracked_build_outputs_are_not_part_of_candidates(demo_toolz, tmp_path):
    """An install leaves untracked, non-ignored files in the prepared Base (e.g. sympy.egg-info in a
    verified-sdist checkout); they are Base, never candidate changes."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(demo_toolz.repo, repo, symlinks=True)
    (repo / "PKG-INFO.generated").write_text("Name: toolz\n")
    from execcritic.sandbox.local import LocalSandbox

    ws = LocalSandbox(repo, activate=demo_toolz.activate, binds=[demo_toolz.venv])
    ver = LocalSandbox(repo, activate=demo_toolz.activate, binds=[demo_toolz.venv])
    try:
        kit = ScenarioKit(demo_toolz, ver)
        verifier = CandidateVerifier(kit.task, kit.official_bundle(), ver, harness=PAPER.harness,
                                     feedback_chars=PAPER.repair.feedback_chars)
        res = run_repair(kit.task.view(), ScriptedModel([[FIX], *submit()]), workspace=ws, verifier=verifier)
        assert "PKG-INFO.generated" not in res.final_patch and res.final_reason == "round0_pass"
        status = ws.run("cd /testbed && git status --short", timeout=30).output
        assert "PKG-INFO.generated" not in status        # hidden from the agent's git view too
    finally:
        ws.close()
        ver.close()


def test_context_exhausted_in_revision_submits_latest(env):
    res, model = repair(env, [[WRONG], *submit(), overflowing([WRONG2])])
    assert res.final_reason == "context_exhausted" and "looked again" in res.final_patch
    assert [(c.trigger, c.status) for c in res.checks] == [("initial", "hard_fail"), ("context", "hard_fail")]
    assert model.remaining == 0 and any(e["kind"] == "context_exhausted" for e in res.trajectory.events)


def test_context_exhausted_in_revision_still_takes_a_pass(env):
    res, _ = repair(env, [[WRONG], *submit(), overflowing([FIX])])
    assert res.final_reason == "check_pass" and res.checks[-1].trigger == "context"


def test_context_exhausted_in_round0(env):
    res, _ = repair(env, [overflowing([WRONG])])
    assert res.round0["exit_status"] == "context_exhausted" and res.round0["turns"] == 1
    # the revision conversation cannot start either: the unchanged p0 reuses its initial result
    assert [(c.trigger, c.reused) for c in res.checks] == [("initial", False), ("context", True)]
    assert res.final_reason == "context_exhausted" and "looked at it" in res.final_patch


def test_endpoint_refusal_ends_round0(env):
    def refuse(_messages):
        raise ContextWindowExceeded("HTTP 400: maximum context length exceeded")

    res, _ = repair(env, [[WRONG], refuse], bundle=False)
    assert res.round0["exit_status"] == "context_exhausted" and res.round0["turns"] == 1  # the refusal is no turn
    assert res.final_reason == "no_bundle" and "looked at it" in res.final_patch
