"""The learning-curve study's statistics (experiments/training/learning_curve.py): the declared checkpoint test finds
a real difference and none where there is none, counts aborted episodes nowhere, refuses episodes that are not the
declared design, and the remake check tells an equal run from a different one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from execcritic.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.training import learning_curve as lc


def _recs(values: dict[str, list[float | None]]) -> list[dict]:
    return [{"instance_id": i, "aborted": v is None, "reward": v} for i, vs in values.items() for v in vs]


def test_checkpoint_test_finds_a_rise_and_its_ci_excludes_zero():
    before = _recs({"a": [0.1] * 5 + [1.5] * 5, "b": [1.5] * 6 + [0.1] * 4})
    after = _recs({"a": [1.5] * 9 + [0.1], "b": [1.5] * 10})
    t = lc.checkpoint_test(before, after, "reward", n_boot=2000, n_perm=2000)
    assert t["delta"] == pytest.approx(((1.36 - 0.8) + (1.5 - 0.94)) / 2)
    assert t["ci_low"] > 0 and t["p_value"] < 0.05
    assert t["after"]["mean"] == pytest.approx((1.36 + 1.5) / 2) and t["after"]["ci_low"] <= t["after"]["mean"]
    assert t["before"]["ci_low"] <= t["before"]["mean"] <= t["before"]["ci_high"] < t["after"]["ci_high"]
    assert t["per_instance"]["a"] == {"before": pytest.approx(0.8), "after": pytest.approx(1.36), "n_before": 10,
                                      "n_after": 10}


def test_checkpoint_test_no_difference_has_a_ci_around_zero():
    same = {"a": [0.1, 1.5] * 5, "b": [0.0, 0.1] * 5}
    t = lc.checkpoint_test(_recs(same), _recs(same), "reward", n_boot=2000, n_perm=2000)
    assert t["delta"] == 0 and t["ci_low"] < 0 < t["ci_high"] and t["p_value"] == 1.0


def test_checkpoint_test_counts_aborted_episodes_nowhere():
    before = _recs({"a": [0.0, 0.0, None]})
    after = _recs({"a": [1.5, None, None]})
    t = lc.checkpoint_test(before, after, "reward", n_boot=200, n_perm=200)
    assert t["per_instance"]["a"]["n_before"] == 2 and t["per_instance"]["a"]["n_after"] == 1
    assert t["aborted"] == {"before": 1, "after": 2}
    assert lc.checkpoint_test(_recs({"a": [None]}), after, "reward")["delta"] is None


def _write_eval(path: Path, seeds: list[int], per_instance: int) -> None:
    recs = _recs({"a": [0.1] * per_instance, "b": [1.5] * per_instance})
    for r in recs:
        r.update(resolved=0.0, usable_patch=1.0, level="x")
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    Path(f"{path}.summary.json").write_text(json.dumps({"manifest": {"seeds": seeds, "git": {"sha": "0" * 40}},
                                                        "summary": {}}))


def test_confirm_refuses_episodes_that_are_not_the_declared_design(tmp_path):
    d = lc.CHECKPOINT_TEST
    assert lc.confirm(tmp_path, d["agent"]) is None          # nothing evaluated yet: no test, no verdict
    _write_eval(lc.confirm_path(tmp_path, d["agent"], d["from"]), [d["seed"]], d["episodes"])
    _write_eval(lc.confirm_path(tmp_path, d["agent"], d["to"]), [d["seed"] + 1], d["episodes"])
    with pytest.raises(InputError, match="not checkpoint test confirm.s"):
        lc.confirm(tmp_path, d["agent"])
    _write_eval(lc.confirm_path(tmp_path, d["agent"], d["to"]), [d["seed"]], d["episodes"] - 1)
    with pytest.raises(InputError, match="episodes per instance"):
        lc.confirm(tmp_path, d["agent"])
    _write_eval(lc.confirm_path(tmp_path, d["agent"], d["to"]), [d["seed"]], d["episodes"])
    ct = lc.confirm(tmp_path, d["agent"])       # the declared design, but no remake check: no verdict
    assert ct["tests"][0]["delta"] == 0 and ct["verdict"].startswith("no verdict")


def _run(rewards, kept, grad):
    return SimpleNamespace(manifest={"run_id": "r", "git": {"sha": "1" * 40}, "created_at": "t",
                                     "harness_digest": "h"},
                           records=pd.DataFrame({"step": range(len(rewards)), "reward_mean": rewards,
                                                 "kept_groups": kept, "dropped_groups": [0] * len(rewards),
                                                 "grad_norm": grad}))


def test_remake_check_tells_equal_runs_from_different_ones():
    pinned = _run([0.1, 0.4], [1, 1], [0.1, None])
    assert lc.remake_check(pinned, _run([0.1, 0.4], [1, 1], [0.10002, None]))["equal"]
    assert lc.remake_check(pinned, _run([0.1, 0.4], [1, 1], [0.10002, None]))["max_abs_grad_norm_diff"] == \
        pytest.approx(2e-5)
    assert not lc.remake_check(pinned, _run([0.1, 0.5], [1, 1], [0.1, None]))["equal"]
    assert not lc.remake_check(pinned, _run([0.1, 0.4], [1, 0], [0.1, None]))["equal"]
    assert not lc.remake_check(pinned, _run([0.1], [1], [0.1]))["equal"]


def test_each_declared_checkpoint_test_reads_only_its_own_episodes(tmp_path):
    """The powered replication's verdict rests on its own episodes: the first test's files do not make it one."""
    first, second = lc.CHECKPOINT_TESTS["confirm"], lc.CHECKPOINT_TESTS["confirm2"]
    assert (second["seed"], second["episodes"]) != (first["seed"], first["episodes"])
    for ck in (first["from"], first["to"]):
        _write_eval(lc.confirm_path(tmp_path, first["agent"], ck, "confirm"), [first["seed"]], first["episodes"])
    assert lc.confirm(tmp_path, first["agent"], "confirm") is not None
    assert lc.confirm(tmp_path, second["agent"], "confirm2") is None
    _write_eval(lc.confirm_path(tmp_path, second["agent"], second["from"], "confirm2"), [first["seed"]], second["episodes"])
    _write_eval(lc.confirm_path(tmp_path, second["agent"], second["to"], "confirm2"), [second["seed"]], second["episodes"])
    with pytest.raises(InputError, match="not checkpoint test confirm2's"):
        lc.confirm(tmp_path, second["agent"], "confirm2")


def test_the_held_out_checkpoint_test_reads_held_out_episodes_and_says_so(tmp_path):
    d = lc.CHECKPOINT_TESTS["confirm-heldout"]
    assert d["split"] == "heldout" and d["seed"] not in {t["seed"] for n, t in lc.CHECKPOINT_TESTS.items() if n != d["name"]}
    paths = [lc.confirm_path(tmp_path, d["agent"], ck, d["name"]) for ck in (d["from"], d["to"])]
    assert [p.name for p in paths] == ["repair-sft-n2-heldout-confirm-heldout.jsonl", "repair-grpo-heldout-confirm-heldout.jsonl"]
    for p in paths:
        _write_eval(p, [d["seed"]], d["episodes"])
    (tmp_path / "repair-remake-check.json").write_text(json.dumps({"check": {"equal": True}}))
    ct = lc.confirm(tmp_path, d["agent"], d["name"])
    assert ct["verdict"].startswith("not shown") and ct["levels"]["before"] == {"x": 2 * d["episodes"]}
    assert any("held-out instances" in line for line in lc._checkpoint_test_lines(ct))


def _rollout(step: int, group, k: int, iid: str, kept: bool, reward: float) -> dict:
    return {"step": step, "group": group, "rollout": k, "instance_id": iid, "kept": kept, "reward": reward}


def test_rollouts_keep_every_dropped_group_and_the_last_write_of_a_resumed_step(tmp_path):
    """Two dropped groups of one instance (group None) are both the step's rollouts; a step written again by a
    resumed run counts once, as written last. Keying by (step, group, rollout, instance) lost the second group."""
    import gzip

    step0 = [_rollout(0, 0, k, "a", True, float(k)) for k in range(2)]
    step1 = ([_rollout(1, None, k, "a", False, 0.0) for k in range(2)]
             + [_rollout(1, None, k, "a", False, 1.0) for k in range(2)])
    redo1 = [_rollout(1, 0, k, "b", True, 0.5) for k in range(4)]
    path = tmp_path / "r.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in [*step0, *step1])
    got = lc.rollouts(path, {0: 2, 1: 4})
    assert len(got) == 6 and sorted(r["reward"] for r in got if r["step"] == 1) == [0.0, 0.0, 1.0, 1.0]
    with gzip.open(path, "at") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in redo1)
    assert [r["instance_id"] for r in lc.rollouts(path, {0: 2, 1: 4}) if r["step"] == 1] == ["b"] * 4
    with pytest.raises(InputError, match="step 1 has 8 rollout records where metrics.jsonl counts 9"):
        lc.rollouts(path, {0: 2, 1: 9})


def test_checkpoint_summaries_have_intervals_at_two_instances():
    """heldout.summarize: two instances that agree (all 0, or all 1.5) still get an interval, inside the range."""
    from execcritic.training.heldout import summarize

    recs = [{"instance_id": i, "aborted": False, "usable_patch": 1.0, "resolved": 1.0, "reward": 1.5}
            for i in ("a", "b") for _ in range(2)]
    s = summarize(recs, "repair", ["a", "b"])
    for m in ("usable_patch", "resolved", "reward"):
        assert s[m]["ci_high"] - s[m]["ci_low"] > 0.2, (m, s[m])
    assert s["reward"]["ci_high"] == 1.5 and s["reward"]["ci_method"] == "hoeffding"
    assert s["resolved"]["ci_high"] == pytest.approx(1.0) and s["resolved"]["ci_method"] == "wilson_instances"


def test_no_committed_interval_is_zero_width_at_small_n():
    """Every interval the committed results print over 5 or fewer units (instances, or a step's rollouts) has width:
    the paper tables' summary.csv, the training curves, and the learning-curve study's checkpoint evaluations."""
    from execcritic.results.store import load_run, training_curve

    root = Path(__file__).resolve().parents[2] / "results"
    bad = []
    for path in root.glob("*/*/summary.csv"):
        df = pd.read_csv(path)
        if {"ci_low", "ci_high", "n_instances"} <= set(df.columns):
            small = df[(df["n_instances"] <= 5) & df["ci_low"].notna()]
            bad += [f"{path}: {r['metric']}" for _, r in small.iterrows() if r["ci_low"] == r["ci_high"]]
    for run in (root / "training").iterdir():
        if run.is_dir():
            c = training_curve(load_run("training", run.name, root=root)).dropna(subset=["ci_low"])
            bad += [f"training/{run.name} step {s}" for s, lo, hi in zip(c["step"], c["ci_low"], c["ci_high"])
                    if lo == hi]
    for path in (root / "learning_curve").glob("*/summary.json"):
        study, summary = path.parent, json.loads(path.read_text())
        if "test" in summary:      # the transfer study (experiments/training/transfer.py): its paired table
            bad += [f"{study.name} {r['subset']} {r['metric']}" for r in summary["test"]["table"]
                    if 0 < r["n"] <= 5 and r["ci_low"] == r["ci_high"]]
            continue
        for agent, a in summary.get("result", summary)["agents"].items():
            for key, e in a["evals"].items():
                bad += [f"{study.name} {agent} {key} {m}" for m, v in e.items() if isinstance(v, dict)
                        and v.get("value") is not None and e["n_instances"] <= 5 and v["ci_low"] == v["ci_high"]]
    assert not bad, bad


def test_an_evaluation_manifest_records_the_temperature_it_sampled_at():
    """A preset that sets the rollout temperature (cpu-curve: 0.8) is what the manifest says, not the paper's 1.0."""
    from execcritic.config import PAPER, apply_overrides
    from execcritic.training.heldout import sampling_record

    assert sampling_record("repair")["temperature"] == PAPER.grpo.rollout_temperature == 1.0
    cpu = apply_overrides(PAPER, {"grpo.rollout_temperature": 0.8})
    assert sampling_record("repair", cpu)["temperature"] == 0.8 and sampling_record("test", cpu)["top_k"] == -1
    root = Path(__file__).resolve().parents[2] / "results" / "learning_curve"
    for path in root.glob("*/eval/*.summary.json"):
        m = json.loads(path.read_text())["manifest"]
        assert m["sampling"]["temperature"] == m["config"]["grpo"]["rollout_temperature"], path
