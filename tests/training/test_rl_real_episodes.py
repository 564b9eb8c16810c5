"""GRPO on the real episodes: one real optimizer step for the Test agent and one for the Repair agent on a
`verified-sdist` task (sympy__sympy-24443) in real sandboxes, scored by the real harness and the real official
evaluator, with labeled candidate pools built by `execcritic.training.candidates` from real official runs.

The random tiny Qwen3.5-MoE cannot write a valid action, so a scripted *token* policy (`ScriptedTokenPolicy`,
named as such) constrains which tokens it samples on the planned turns; the episode, the sandbox, the harness,
the rewards, the advantages and the optimizer step are the real ones. Checked from TRL's own tensors:
parameters changed by a gradient step; masked rollouts have exactly zero advantage and no loss tokens; the
group baseline follows each agent's masking rule (Test: masked rollouts out of the mean; Repair: in the mean,
then zeroed); tool, feedback and controller tokens carry no loss."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from execcritic.config import load_protocol
from execcritic.errors import InputError
from execcritic.training.candidates import load_pools, require_pool
from tests.training.rl_fixtures import (
    EXPORT,
    PRIVATE,
    PUBLIC,
    SUBMIT_FIX,
    SUBMIT_TEST,
    ScriptedTokenPolicy,
    heredoc,
    write_bundle,
)

pytestmark = [pytest.mark.train, pytest.mark.slow]


def _capture(trainer) -> dict:
    score = trainer._generate_and_score_completions
    captured: dict = {}

    def observe(inputs):   # keep what TRL computed, for the assertions; no behaviour change
        out = score(inputs)
        captured.update({k: v.detach().clone() for k, v in out.items() if hasattr(v, "detach")})
        return out

    trainer._generate_and_score_completions = observe
    return captured


def _snapshot(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _loss_tokens(captured, i: int) -> tuple[list[int], list[int]]:
    """(trained token ids, untrained token ids) of completion i, from TRL's masks."""
    n = int(captured["completion_mask"][i].sum())
    ids = captured["completion_ids"][i, :n].tolist()
    mask = (captured["completion_mask"][i, :n] * captured["tool_mask"][i, :n]).tolist()
    return [t for t, m in zip(ids, mask) if m], [t for t, m in zip(ids, mask) if not m]


def _rollouts(runner) -> list[tuple]:
    """(result, final reward, masked, advantage) in TRL's completion order."""
    return [(r, rw, m, a) for g in runner.last_groups
            for r, rw, m, a in zip(g.results, g.score.rewards, g.score.masked, g.score.advantages.advantages)]


# --------------------------------------------------------------------------------------------------
# candidate pools
# --------------------------------------------------------------------------------------------------

def test_candidate_pools_are_labeled_by_the_official_evaluator(candidate_run, sympy_task, tmp_path):
    pools = load_pools(candidate_run.run_dir)
    pool = pools[sympy_task.instance_id]
    labels = {c.source.split(":")[0]: c.resolved for c in pool.labeled}
    assert labels["gold"] is True and labels["mutant"] is False and labels["repair"] is True
    assert candidate_run.summary.done == len(pool.labeled) + len(pool.unlabeled) == 3
    records = [json.loads(x) for x in (candidate_run.run_dir / "candidates.jsonl").read_text().splitlines()]
    assert all(r["official"]["valid"] and r["official"]["backend"] for r in records)
    manifest = json.loads((candidate_run.run_dir / "manifest.json").read_text())
    assert manifest["git"]["sha"] and manifest["config_digest"]

    # §5: the paper's Test RL set needs six labeled candidates; this pool has three
    paper = load_protocol()
    assert not pool.eligible(paper.test_rl) and sympy_task.instance_id not in manifest["test_rl_set"]
    with pytest.raises(InputError, match="needs at least 6 labeled candidates") as err:
        require_pool(pools, sympy_task.instance_id, paper.test_rl, source="candidates.jsonl")
    assert err.value.field == "resolved" and err.value.file == "candidates.jsonl"
    cpu = load_protocol("cpu-train")
    assert len(require_pool(pools, sympy_task.instance_id, cpu.test_rl, source="x")) == 3
    assert pool.eligible(cpu.repair_rl)            # both labels present
    one_class = load_protocol("cpu-train", values={"repair_rl.min_candidates": 2})
    assert not type(pool)(pool.instance_id, [c for c in pool.labeled if c.resolved]).eligible(one_class.repair_rl)

    # a malformed record names the file, the line and the field
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = [dict(r) for r in records]
    lines[1]["resolved"] = "yes"
    (bad / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(InputError) as err:
        load_pools(bad)
    assert err.value.field == "resolved" and err.value.file.endswith("candidates.jsonl:2")

    # resumable: a rebuild labels nothing again
    from execcritic.training.candidates import build_candidates

    started = time.monotonic()
    again = build_candidates([sympy_task], candidate_run.run_dir, repair_runs=[], show_progress=False)
    assert again.summary.skipped == 2 and again.summary.done == 0 and time.monotonic() - started < 30


# --------------------------------------------------------------------------------------------------
# Test agent: Eq. 5 on real episodes
# --------------------------------------------------------------------------------------------------

def test_test_agent_grpo_step_on_real_episodes(tiny_model, sympy_task, candidate_run):
    from execcritic.training.episodes import TestEpisode, test_row
    from execcritic.training.grpo import make_trainer

    model, tok = tiny_model
    scripted = ScriptedTokenPolicy(tok, [
        ("public", [write_bundle(PUBLIC), SUBMIT_TEST]),     # qualifies; discriminates the pool
        ("private", [write_bundle(PRIVATE), SUBMIT_TEST]),   # qualifies; a correct refactoring breaks its import
        ("none", ["ls", "cat README.md | head -3"]),         # never submits
    ])
    proto = load_protocol("cpu-train", values={
        "test_agent.max_turns": 2, "test_agent.max_output_tokens": scripted.max_turn_tokens,
        "grpo.rollouts_per_group": 3, "grpo.groups_per_step": 1, "test_rl.global_batch_size": 3, "test_rl.steps": 1})
    pools = load_pools(candidate_run.run_dir)
    pool = require_pool(pools, sympy_task.instance_id, proto.test_rl, source="pool")
    # Gold's run on a bundle is the Gold audit's own: leave it out of this test's pool to save two executions
    rows = [test_row(sympy_task, [c for c in pool if c.source != "gold"], proto)]
    trainer, runner = make_trainer("test", model, tok, rows, scripted.wrap(TestEpisode(proto)), "unused-out",
                                   protocol=proto, workers=2, save_strategy="no")
    captured = _capture(trainer)
    before = _snapshot(model)
    started = time.monotonic()
    trainer.train()
    wall = time.monotonic() - started

    got = {r.info.get("scripted_plan", f"aborted:{r.info.get('aborted')}"): (r, rw, m, a, i)
           for i, (r, rw, m, a) in enumerate(_rollouts(runner))}
    assert not [k for k in got if k.startswith("aborted")], list(got)
    public, private, none = got["public"], got["private"], got["none"]
    # Eq. 5 inputs from the harness
    b = public[0].breakdown
    assert (b.B, b.G, b.Q) == (1, 1, 1) and public[0].info["qualified"]
    runs = public[0].info["candidates"]["runs"]
    assert {r["source"].split(":")[0] for r in runs} == {"mutant", "repair"}
    assert b.TPR == 1.0 and b.TNR == 1.0 and public[1] == 1.0          # BA = 1: the full level
    assert private[2] is True and "candidate_operational_error" in private[0].breakdown.mask_reason
    assert any(r["failure_kind"] == "collection_error" for r in private[0].info["candidates"]["runs"])
    assert none[1] == pytest.approx(-0.2) and not none[2]
    # what the transfer study reads (heldout.transfer_metrics): every turn a tool call, and no repository file
    # changed - the bundle is written under /tmp, and the sanitizing gc's .git/ files are not the episode's
    for r in (public, none):
        assert (r[0].info["format_errors"], r[0].info["touched"], r[0].info["touched_dirs_at_base"]) == (0, [], [])

    # advantages: the Test rule - the masked rollout is out of the mean and gets exactly 0
    adv = captured["advantages"].tolist()
    mean = statistics.fmean([public[1], none[1]])
    assert adv[public[4]] == pytest.approx(public[1] - mean) and adv[none[4]] == pytest.approx(none[1] - mean)
    assert adv[private[4]] == 0.0
    trained, untrained = _loss_tokens(captured, private[4])
    assert trained == [] and untrained                                   # masked: no loss token at all

    # loss tokens: the model's sampled tokens only; tool output, harness feedback and envelopes carry none
    trained, untrained = _loss_tokens(captured, public[4])
    model_text, env_text = tok.decode(trained), tok.decode(untrained)
    assert "<function=bash>" in model_text and "EOF_PATCH" in model_text
    assert "<returncode>" in env_text and "TEST-PATCH SUBMISSION QUALIFIED" not in model_text
    assert "<tool_response>" in env_text and "<|im_start|>user" in env_text and "<returncode>" not in model_text

    # a real gradient step changed the parameters
    assert any(not before[n].equal(p.detach()) for n, p in model.named_parameters())
    stats = runner.step_stats
    assert stats["kept_groups"] == 1 and stats["masked_share"] == pytest.approx(1 / 3)
    assert stats["b2g"] == pytest.approx(2 / 3) and stats["level_ba1"] == 1 and stats["level_invalid"] == 1
    print(f"\n[test-rl] 3 real episodes + step in {wall:.1f} s (rollouts {stats['rollout_s']:.1f} s, 2 workers)")


# --------------------------------------------------------------------------------------------------
# Repair agent: Eq. 6 on real episodes
# --------------------------------------------------------------------------------------------------

def test_repair_agent_grpo_step_on_real_episodes(tiny_model, sympy_task):
    from execcritic.training.episodes import RepairEpisode, repair_row
    from execcritic.training.grpo import make_trainer

    model, tok = tiny_model
    target = "sympy/combinatorics/homomorphisms.py"
    gold = heredoc("/tmp/gold.patch", sympy_task.patch, "EOF_GOLD") + f"\ncd /testbed && git apply /tmp/gold.patch && {EXPORT}"
    wrong = f"cd /testbed && printf '\\n# looked at it\\n' >> {target} && {EXPORT}"
    broken = f"cd /testbed && printf '\\ndef broken(:\\n' >> {target} && {EXPORT}"
    test_edit = (f"cd /testbed && printf '\\n# tweak\\n' >> sympy/combinatorics/tests/test_homomorphisms.py && "
                 f"printf '\\n# looked\\n' >> {target} && {EXPORT}")
    scripted = ScriptedTokenPolicy(tok, [
        ("round0_fix", [gold, SUBMIT_FIX]),                   # passes the Oracle F2P node at Round 0: 1.5
        ("wrong", [wrong, SUBMIT_FIX, "ls"]),                 # usable, the selected test fails: 0.1
        ("broken", [broken, SUBMIT_FIX, "ls"]),               # terminal test cannot run: masked
        ("test_edit", [test_edit, SUBMIT_FIX, "ls"]),         # forbidden test modification: 0
    ])
    proto = load_protocol("cpu-train", values={
        "repair.round0_turns": 2, "repair.revision_rounds": 1, "repair.turns_per_round": 1,
        "repair_rl.max_response_tokens": scripted.max_turn_tokens, "grpo.rollouts_per_group": 4,
        "grpo.groups_per_step": 1, "repair_rl.global_batch_size": 4, "repair_rl.steps": 1})
    rows = [repair_row(sympy_task, proto)]
    episode = RepairEpisode(proto, official="needed")
    trainer, runner = make_trainer("repair", model, tok, rows, scripted.wrap(episode), "unused-out", protocol=proto,
                                   workers=2, save_strategy="no")
    captured = _capture(trainer)
    before = _snapshot(model)
    started = time.monotonic()
    trainer.train()
    wall = time.monotonic() - started

    got = {r.info.get("scripted_plan", f"aborted:{r.info.get('aborted')}"): (r, rw, m, a, i)
           for i, (r, rw, m, a) in enumerate(_rollouts(runner))}
    assert not [k for k in got if k.startswith("aborted")], list(got)
    fix, wrong_, broken_, edit = got["round0_fix"], got["wrong"], got["broken"], got["test_edit"]
    assert fix[0].info["final_reason"] == "round0_pass" and fix[0].info["official"]["resolved"] and fix[1] == 1.5
    assert fix[0].info["feedback"]["declared"] == ["test_homomorphism"]            # the one Oracle F2P node
    assert wrong_[1] == pytest.approx(0.1) and not wrong_[2] and wrong_[0].info["final_reason"] == "budget_exhausted"
    assert broken_[2] is True and broken_[0].breakdown.mask_reason.startswith("terminal_test_invalid")
    assert edit[1] == 0.0 and edit[0].breakdown.level.value == "forbidden_test_modification"
    assert "sympy/combinatorics/tests/test_homomorphisms.py" in edit[0].info["excluded_paths"]
    # all rounds of a rollout are ONE sample: Round 0, the feedback, the revision turn
    assert wrong_[0].sample.turns == 3 and wrong_[0].info["revision_rounds"] == 1

    # advantages: the Repair rule - the masked rollout's raw reward IS in the mean, then its advantage is 0
    adv = captured["advantages"].tolist()
    raw = [fix[1], wrong_[1], broken_[1], edit[1]]
    mean = statistics.fmean(raw)
    assert mean != pytest.approx(statistics.fmean([fix[1], wrong_[1], edit[1]]))     # the rules differ here
    for r in (fix, wrong_, edit):
        assert adv[r[4]] == pytest.approx(r[1] - mean)
    assert adv[broken_[4]] == 0.0 and _loss_tokens(captured, broken_[4])[0] == []

    trained, untrained = _loss_tokens(captured, wrong_[4])
    assert "<failing_test_output>" in tok.decode(untrained) and "<failing_test_output>" not in tok.decode(trained)
    assert "EOF_GOLD" not in tok.decode(trained) and "looked at it" in tok.decode(trained)
    assert any(not before[n].equal(p.detach()) for n, p in model.named_parameters())
    print(f"\n[repair-rl] 4 real episodes + step in {wall:.1f} s (rollouts {runner.step_stats['rollout_s']:.1f} s)")


def test_repair_grpo_on_generated_test_feedback(tiny_model, tiny_model_dir, sympy_task, tmp_path):
    """Table 6's "Generated tests" row: `train repair-rl --feedback-from <generation.jsonl>` freezes the qualified
    generated bundle (here the public-API test a scripted teacher wrote through the real generation stage and Base
    gate, not the Oracle F2P node) as the Repair rollouts' feedback test; Eq. 6 is scored against it, and the
    manifest names the source, the bundle and the instances left without one."""
    from execcritic.pipeline import stages
    from execcritic.pipeline.config import PipelineConfig
    from execcritic.results.store import load_run
    from execcritic.training.run import TrainRun, train
    from tests.paths import REPO

    _, tok = tiny_model
    target = "sympy/combinatorics/homomorphisms.py"
    gold = heredoc("/tmp/gold.patch", sympy_task.patch, "EOF_GOLD") + f"\ncd /testbed && git apply /tmp/gold.patch && {EXPORT}"
    wrong = f"cd /testbed && printf '\\n# looked at it\\n' >> {target} && {EXPORT}"
    scripted = ScriptedTokenPolicy(tok, [("round0_fix", [gold, SUBMIT_FIX]), ("wrong", [wrong, SUBMIT_FIX])])
    proto = load_protocol("cpu-train", values={
        "repair.round0_turns": 2, "repair.revision_rounds": 0, "grpo.rollouts_per_group": 2,
        "grpo.groups_per_step": 1, "repair_rl.global_batch_size": 2, "repair_rl.steps": 1,
        "repair_rl.max_response_tokens": scripted.max_turn_tokens})
    spec = f"scripted:{REPO / 'tests' / 'scripted_policies.py'}:public_test_teacher"
    cfg = PipelineConfig(out_dir=str(tmp_path / "tests-run"), test_sources=(spec,), protocol=proto)
    assert stages.generate_tests([sympy_task], cfg, show_progress=False).done == 1
    generated = str(cfg.paths["generation"])
    record = json.loads(Path(generated).read_text().splitlines()[0])
    assert record["qualified"] is True                                                 # the real Base gate
    digest = record["bundle"]["digest"]
    assert "test_dihedral_identity_homomorphism" in record["bundle"]["test_patch"]     # PUBLIC, not the Oracle's

    run = TrainRun(kind="repair-rl", preset="tiny-cpu", model=str(tiny_model_dir), run_id="generated-fb",
                   protocol=proto, tasks=[sympy_task], feedback_from=[generated], official="needed",
                   runs_root=tmp_path / "runs", results_root=tmp_path / "results", episode_wrapper=scripted.wrap)
    result = train(run)
    rollouts = [json.loads(line) for line in (tmp_path / "runs" / "generated-fb" / "rollouts.jsonl").open()]
    by_plan = {r["info"]["scripted_plan"]: r for r in rollouts}
    for r in rollouts:
        fb = r["info"]["feedback"]
        assert fb == {"source": "generated", "generator": f"model:{spec}", "bundle_digest": digest}
    assert by_plan["round0_fix"]["reward"] == 1.5 and by_plan["wrong"]["reward"] == pytest.approx(0.1)
    m = load_run("training", "generated-fb", root=tmp_path / "results").manifest
    assert m["feedback"] == {"source": "generated", "files": [generated], "generator": None,
                             "bundles": {sympy_task.instance_id: digest}, "no_qualified_bundle": []}
    assert result["steps"] == 1

    with pytest.raises(InputError, match="none of the 1 instances has a qualified generated bundle from model:x"):
        train(TrainRun(kind="repair-rl", preset="tiny-cpu", model=str(tiny_model_dir), run_id="none",
                       protocol=proto, tasks=[sympy_task], feedback_from=[generated], feedback_generator="model:x",
                       runs_root=tmp_path / "runs", results_root=tmp_path / "results"))
