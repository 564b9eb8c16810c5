"""The results store, its schema check, the statistics and the reported numbers.

Runs are SYNTHETIC fixtures (tests/synthetic_results.py) written through the store API into tmp dirs."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from execcritic.errors import InputError
from execcritic.results import paper, stats
from execcritic.results.schemas import MANIFEST_KEYS, PAPER_ARTIFACTS, SCHEMAS, describe, schema
from execcritic.results.store import (
    INDEX_COLUMNS,
    latest_run,
    list_runs,
    load_run,
    new_run,
    rebuild_index,
    remove_run,
    training_curve,
    training_init,
)
from tests.paths import SHARED
from tests.synthetic_results import (
    PRESET,
    REPORTED,
    b2g,
    ids,
    make_table1,
    make_table2,
    make_training,
    resolve,
    writer,
)

# ---- statistics: known answers ------------------------------------------------------------------------


def test_mcnemar_exact_hand_computed():
    # b=1, c=9: 2 * (C(10,0) + C(10,1)) / 2^10 = 22/1024
    assert stats.mcnemar_exact(1, 9) == pytest.approx(22 / 1024, abs=0)
    assert stats.mcnemar_exact(9, 1) == stats.mcnemar_exact(1, 9)
    assert stats.mcnemar_exact(0, 5) == 2 / 32
    assert stats.mcnemar_exact(3, 3) == 1.0 and stats.mcnemar_exact(0, 0) == 1.0
    # b=2, c=8: 2 * (1 + 10 + 45) / 1024
    assert stats.mcnemar_exact(2, 8) == pytest.approx(112 / 1024)


@pytest.mark.parametrize(("b", "c", "ties"), [(1, 9, 5), (4, 4, 0), (0, 6, 3), (7, 2, 10), (12, 5, 1)])
def test_sign_flip_on_binary_pairs_is_mcnemar(b, c, ties):
    d = [1.0] * b + [-1.0] * c + [0.0] * ties
    p, test = stats.sign_flip_pvalue(d, scale=1)
    assert test == "sign_flip_exact"
    assert p == pytest.approx(stats.mcnemar_exact(b, c), rel=1e-12)


def test_sign_flip_exact_matches_brute_force_enumeration():
    rng = np.random.default_rng(7)
    for _ in range(5):
        d = rng.integers(-3, 4, size=9) / 3          # means over 3 runs
        obs = abs(d.sum())
        brute = np.mean([abs(np.dot(s, d)) >= obs - 1e-12 for s in itertools.product((-1, 1), repeat=d.size)])
        p, test = stats.sign_flip_pvalue(d, scale=3)
        assert test == "sign_flip_exact" and p == pytest.approx(brute, abs=1e-12)


def test_sign_flip_monte_carlo_fallback_is_seeded():
    d = [0.31, -0.12, 0.57, 0.2, 0.05]
    p1, t1 = stats.sign_flip_pvalue(d, seed=3)
    p2, _ = stats.sign_flip_pvalue(d, seed=3)
    assert t1 == "sign_flip_mc" and p1 == p2 and 0 < p1 <= 1


def test_bootstrap_is_deterministic_and_clusters_runs():
    m = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 0]], dtype=float)
    ci = stats.bootstrap_mean_ci(m, seed=1)
    assert ci == stats.bootstrap_mean_ci(m, seed=1)
    # runs of one instance move together: resampling rows of the matrix == resampling instance means
    assert ci == stats.bootstrap_mean_ci(m.mean(axis=1), seed=1)
    assert ci[0] <= m.mean() <= ci[1]
    assert stats.bootstrap_mean_ci(np.ones(8)) == (1.0, 1.0)
    assert all(math.isnan(x) for x in stats.bootstrap_mean_ci(np.zeros(0)))


def test_paired_delta_chooses_the_exact_test():
    a = np.array([1, 1, 1, 1, 0, 0, 1, 0], dtype=float)
    b = np.array([0, 0, 0, 1, 0, 0, 1, 1], dtype=float)
    d = stats.paired_delta(a, b)
    assert (d.delta, d.n_better, d.n_worse, d.test) == (2 / 8, 3, 1, "mcnemar_exact")
    assert d.p_value == stats.mcnemar_exact(3, 1)
    a3, b3 = np.repeat(a[:, None], 3, axis=1), np.repeat(b[:, None], 3, axis=1)
    a3[0, 2] = 0
    d3 = stats.paired_delta(a3, b3)
    assert d3.test == "sign_flip_exact" and d3.delta == pytest.approx((2 - 1 / 3) / 8)


def test_rate_intervals_fit_the_quantity_and_the_n():
    """Exact binomial for one run (0 of 2 is [0, 84.2]%, not [0, 0]), Wilson over instances for several runs,
    undefined over nothing. Reference values: Clopper & Pearson's tables / R's binom.test and prop.test."""
    lo, hi = stats.clopper_pearson(0, 2)
    assert lo == 0.0 and hi == pytest.approx(0.841886, abs=1e-6)
    assert stats.clopper_pearson(5, 10) == pytest.approx((0.187086, 0.812914), abs=1e-6)
    assert stats.clopper_pearson(48, 96) == pytest.approx((0.396178, 0.603822), abs=1e-6)
    assert stats.clopper_pearson(1, 1) == pytest.approx((0.025, 1.0), abs=1e-9)
    assert stats.wilson(0.5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert stats.rate_interval(np.array([[0.0], [0.0]]))[2] == "clopper_pearson"
    lo3, hi3, method = stats.rate_interval(np.array([[1, 0, 1], [0, 0, 0]], dtype=float))
    assert method == "wilson_instances" and lo3 < 1 / 3 < hi3
    assert all(map(math.isnan, stats.rate_interval(np.zeros((0, 1)))[:2]))
    assert stats.rate_interval(np.zeros((0, 1)))[2] == "undefined"
    for k in range(0, 11):                          # the interval always holds the estimate and stays in [0, 1]
        lo, hi = stats.clopper_pearson(k, 10)
        assert 0 <= lo <= k / 10 <= hi <= 1


def test_delta_intervals_are_never_zero_width_at_small_n():
    """Two instances both improved: the bootstrap said [100, 100] beside p = 0.5; Newcombe's paired score
    interval says [7.0, 100]. Several runs and few instances: no interval at all."""
    d = stats.paired_delta(np.array([1.0, 1.0]), np.array([0.0, 0.0]))
    assert d.ci_method == "newcombe_paired" and d.p_value == 0.5
    assert d.ci_low == pytest.approx(0.0700, abs=1e-3) and d.ci_high == 1.0
    lo, hi = stats.newcombe_paired(8, 5, 4, 21)        # holds the estimate, far narrower than [-1, 1]
    assert lo < (5 - 4) / 38 < hi and hi - lo < 0.5
    few = stats.paired_delta(np.ones((5, 3)), np.zeros((5, 3)))
    assert few.ci_method == "undefined" and math.isnan(few.ci_low)
    many = stats.paired_delta(np.ones((25, 3)), np.zeros((25, 3)))
    assert many.ci_method == "bootstrap_percentile" and many.ci_low == many.ci_high == 1.0


def test_resolved_rate_is_the_mean_over_runs_with_every_instance_counted():
    sch = schema("table2")
    inst = ["i0", "i1", "i2", "i3"]
    recs = [resolve(i, k, v, repair_agent="base", test_source="None (Round 0)")
            for k, row in enumerate([[1, 0, 0, 0], [1, 1, 0, 0]]) for i, v in zip(inst, row)]
    recs = [r for r in recs if not (r["instance_id"] == "i3" and r["run"] == 1)]       # one missing record
    recs[2] = {**recs[2], "resolved": False, "official_valid": False}                  # one invalid score
    df = pd.DataFrame(recs)
    s = stats.summarize(sch, df, inst, runs=2)
    per_run = [1 / 4, 2 / 4]                                                           # all-instance rates
    assert s.loc[0, "value"] == round(100 * np.mean(per_run), 4)
    assert (s.loc[0, "n_invalid"], s.loc[0, "n_missing"], s.loc[0, "n_instances"], s.loc[0, "n_runs"]) == (1, 1, 4, 2)


# ---- the store ----------------------------------------------------------------------------------------


def test_table1_run_roundtrip(tmp_path):
    run = make_table1(tmp_path)
    m = run.manifest
    for k in (*MANIFEST_KEYS, "git", "config", "harness_digest", "measuring_digest", "prompt_digests", "host", "sessions",
              "stats"):
        assert k in m, k
    assert (m["artifact"], m["preset"], m["status"], m["n_instances"], m["runs"]) == ("table1", PRESET, "complete", 10, 1)
    assert m["models"]["test"]["spec"] == "synthetic:fixture" and m["wall_s"] >= 0 and m["ended_at"]
    assert m["usage"]["source"] == "unknown" and m["usage"]["tokens_prompt"] is None
    assert len(run.records) == 30 and run.records["Q"].dtype == "int64" and run.records["base_valid"].dtype == "boolean"
    s = run.summary.set_index(["test_source", "metric"])["value"]
    assert s[("Qwen3.5-35B-A3B", "b2g_pct")] == 30.0
    assert s[("Qwen3.5-35B-A3B", "base_fail_pct")] == 40.0        # the invalid-Gold instance failed Base cleanly
    assert s[("Qwen3.5-35B-A3B + SFT", "b2g_pct")] == 60.0
    inv = run.summary.set_index(["test_source", "metric"])["n_invalid"]
    assert inv[("Qwen3.5-35B-A3B", "b2g_pct")] == 1
    d = run.deltas.iloc[0]
    assert (d["baseline"], d["treatment"], d["delta"], d["n_better"], d["n_worse"]) == (
        "Qwen3.5-35B-A3B", "Qwen3.5-35B-A3B + SFT", 30.0, 3, 0)
    assert d["p_value"] == pytest.approx(stats.mcnemar_exact(3, 0)) and d["test"] == "mcnemar_exact"
    # one row in the index
    idx = list_runs(root=tmp_path)
    assert list(idx.columns) == list(INDEX_COLUMNS)
    row = idx.iloc[0]
    assert (row["artifact"], row["run_id"], row["preset"], row["n_instances"], row["status"]) == (
        "table1", run.run_id, PRESET, 10, "complete")
    assert row["path"] == f"table1/{run.run_id}" and row["git_sha"] == (m["git"]["sha"] or "")
    assert latest_run("table1", root=tmp_path) == run.run_id and latest_run("table2", root=tmp_path) is None


def test_table2_aliases_denominators_and_runs(tmp_path):
    run = make_table2(tmp_path)
    assert set(run.records["test_source"]) == {"None (Round 0)", "Oracle F2P"}      # aliases canonicalized
    s = run.summary.set_index(["repair_agent", "test_source"])
    assert s.loc[("base", "None (Round 0)"), "value"] == round(100 * 2 / 6, 4)
    assert s.loc[("base", "Oracle F2P"), "value"] == round(100 * (2 + 2 / 3) / 6, 4)
    t = s.loc[("trained", "None (Round 0)")]
    assert (t["value"], t["n_invalid"], t["n_missing"]) == (50.0, 1, 1)
    assert set(run.deltas["vary"]) == {"test_source", "repair_agent"}


def test_resume_continues_a_run(tmp_path):
    inst = ids(3)
    w = writer(tmp_path, "table1", inst, run_id="resumable")
    assert w.append(b2g(inst[0], 1, test_source="Codex-5.3"))
    w.close()
    with pytest.raises(InputError, match="not complete") as e:
        load_run("table1", "resumable", root=tmp_path)
    assert e.value.field == "status"
    part = load_run("table1", "resumable", root=tmp_path, allow_incomplete=True)
    assert part.summary is None and len(part.records) == 1
    # a killed writer leaves a torn last line: reopening drops it
    with open(tmp_path / "table1" / "resumable" / "records.jsonl", "a") as fh:
        fh.write('{"instance_id": "synthetic__inst-001", "ru')
    w2 = writer(tmp_path, "table1", inst, run_id="resumable")
    assert w2.key(instance_id=inst[0], test_source="Codex-5.3", run=0) in w2
    assert not w2.append(b2g(inst[0], 1, test_source="Codex-5.3"))              # already there
    assert w2.extend(b2g(i, 0, test_source="Codex-5.3") for i in inst[1:]) == 2
    run = w2.finalize()
    assert len(run.records) == 3 and len(run.manifest["sessions"]) == 2
    assert run.summary.loc[run.summary["metric"] == "b2g_pct", "value"].item() == round(100 / 3, 4)
    with pytest.raises(InputError, match="preset"):
        new_run("table1", "other-preset", root=tmp_path, run_id="resumable", instances=inst)
    with pytest.raises(InputError, match="denominator"):
        new_run("table1", PRESET, root=tmp_path, run_id="resumable", instances=inst[:2])


def test_append_rejects_bad_records_naming_the_field(tmp_path):
    inst = ids(2)
    w = writer(tmp_path, "table1", inst)
    good = b2g(inst[0], 1, test_source="Codex-5.3")
    cases = [({k: v for k, v in good.items() if k != "gold_valid"}, "gold_valid", "lacks required column"),
             ({**good, "B": 2}, "B", "not of type binary"),
             ({**good, "qualified": "yes"}, "qualified", "not of type bool"),
             ({**good, "miss": "weird"}, "miss", "not one of"),
             ({**good, "model": None}, "model", "must not be null"),
             ({**good, "G": 0}, "q_is_b_times_g", "Q must equal B\\*G"),
             ({**good, "instance_id": "elsewhere"}, "instance_id", "outside the run's instances"),
             ({**good, "run": 1}, "run", "outside 0..0")]
    for rec, fld, msg in cases:
        with pytest.raises(InputError, match=msg) as e:
            w.append(rec)
        assert e.value.field == fld and "records.jsonl" in str(e.value)
    with pytest.raises(InputError, match="instance ids"):
        new_run("table2", PRESET, root=tmp_path)
    with pytest.raises(InputError, match="role"):
        new_run("training", PRESET, root=tmp_path, extra={"init": "sft"})
    with pytest.raises(InputError, match="unknown artifact"):
        new_run("table9", PRESET, root=tmp_path, instances=inst)


def _finalized_table2(tmp_path: Path):
    run = make_table2(tmp_path)
    return run, run.path


def _rewrite_jsonl(path: Path, edit) -> None:
    lines = path.read_text().splitlines()
    path.write_text("\n".join(edit(lines)) + "\n")


def test_malformed_manifest_is_rejected(tmp_path):
    run, path = _finalized_table2(tmp_path)
    m = json.loads((path / "manifest.json").read_text())
    del m["preset"]
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="manifest lacks 'preset'") as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.file.endswith("manifest.json") and e.value.field == "preset"
    m["preset"], m["artifact"] = PRESET, "table3"
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="artifact") as e:
        load_run("table2", run.run_id, root=tmp_path)
    (path / "manifest.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON") as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.file.endswith("manifest.json")


@pytest.mark.parametrize(("edit", "field", "msg"), [
    (lambda r: r.pop("resolved"), "resolved", "lacks required column 'resolved'"),
    (lambda r: r.update(official_valid="true"), "official_valid", "not of type bool"),
    (lambda r: r.update(resolved=True, official_valid=False), "resolved_needs_valid", "official_valid=true"),
    (lambda r: r.update(instance_id="not-in-manifest"), "instance_id", "not in manifest.instances"),
])
def test_malformed_records_are_rejected(tmp_path, edit, field, msg):
    run, path = _finalized_table2(tmp_path)

    def change(lines):
        first = json.loads(lines[0])
        edit(first)
        return [json.dumps(first)] + lines[1:]

    _rewrite_jsonl(path / "records.jsonl", change)
    with pytest.raises(InputError, match=msg) as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.file.endswith("records.jsonl") and e.value.field == field and "line 1" in str(e.value)


def test_duplicate_and_corrupt_records_are_rejected(tmp_path):
    run, path = _finalized_table2(tmp_path)
    _rewrite_jsonl(path / "records.jsonl", lambda lines: lines + [lines[0]])
    with pytest.raises(InputError, match="duplicate record") as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.file.endswith("records.jsonl")
    _rewrite_jsonl(path / "records.jsonl", lambda lines: lines[:-1] + ["{oops"])
    with pytest.raises(InputError, match="not valid JSON"):
        load_run("table2", run.run_id, root=tmp_path)


def test_summary_that_does_not_match_its_records_is_rejected(tmp_path):
    run, path = _finalized_table2(tmp_path)
    original = (path / "summary.csv").read_text()
    s = pd.read_csv(path / "summary.csv")
    s.loc[0, "value"] = 61.2                                   # a paper number pasted into a measured summary
    s.to_csv(path / "summary.csv", index=False)
    with pytest.raises(InputError, match="does not match") as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.file.endswith("summary.csv") and e.value.field == "value"
    s = pd.read_csv(path / "summary.csv").drop(index=1)
    s.loc[0, "value"] = pd.read_csv(pd.io.common.StringIO(original)).loc[0, "value"]
    s.to_csv(path / "summary.csv", index=False)
    with pytest.raises(InputError, match="has no row for") as e:
        load_run("table2", run.run_id, root=tmp_path)
    pd.read_csv(pd.io.common.StringIO(original)).drop(columns=["n_missing"]).to_csv(path / "summary.csv", index=False)
    with pytest.raises(InputError, match="lacks column 'n_missing'") as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.field == "n_missing"
    (path / "summary.csv").write_text(original)
    d = pd.read_csv(path / "deltas.csv")
    d.loc[0, "p_value"] = 0.001
    d.to_csv(path / "deltas.csv", index=False)
    with pytest.raises(InputError, match="p_value") as e:
        load_run("table2", run.run_id, root=tmp_path)
    assert e.value.file.endswith("deltas.csv")


def test_training_metrics_usage_tables_notebook_and_index(tmp_path):
    run = make_training(tmp_path, "test", "sft", steps=5)
    assert (run.path / "metrics.jsonl").is_file() and not (run.path / "records.jsonl").exists()
    assert list(run.records["step"]) == [0, 1, 2, 3, 4] and run.records["level_q"].dtype == "Int64"
    s = dict(zip(run.summary["metric"], run.summary["value"]))
    assert s["n_steps"] == 5 and s["reward_mean_last"] == pytest.approx(0.28) and s["masked_share_mean"] == 0.0625
    inst = ids(2)
    w = writer(tmp_path, "table5", inst, run_id="usage")
    w.append({**b2g(inst[0], 1, language="Rust", dataset="multilingual"), "tokens_prompt": 100, "cost_usd": 0.5})
    w.append({**b2g(inst[1], 0, language="Rust", dataset="multilingual"), "tokens_prompt": 50})
    w.write_table("per_repo.csv", pd.DataFrame({"repo": ["r"], "n": [2]}))
    nb = tmp_path / "nb.ipynb"
    nb.write_text('{"cells": []}')
    w.attach_notebook(nb)
    with pytest.raises(InputError):
        w.write_table("summary.csv", pd.DataFrame())
    r = w.finalize()
    assert r.manifest["usage"] == {"tokens_prompt": 150, "tokens_completion": None, "cost_usd": 0.5, "source": "records"}
    assert r.tables["per_repo"].to_dict("records") == [{"repo": "r", "n": 2}] and r.notebook is not None
    w2 = writer(tmp_path, "table5", inst, run_id="usage-explicit")
    w2.add_usage(tokens_prompt=10, tokens_completion=5)
    w2.add_usage(tokens_prompt=1, cost_usd=0.25)
    assert w2.finalize().manifest["usage"] == {"tokens_prompt": 11, "tokens_completion": 5, "cost_usd": 0.25,
                                               "source": "add_usage"}
    (tmp_path / "index.csv").unlink()
    assert set(rebuild_index(tmp_path)["run_id"]) == {"synthetic-test-sft", "usage", "usage-explicit"}
    remove_run("table5", "usage", root=tmp_path)
    assert set(list_runs("table5", root=tmp_path)["run_id"]) == {"usage-explicit"}


def test_schemas_are_complete_and_consistent():
    assert set(PAPER_ARTIFACTS) <= set(SCHEMAS) and "training" in SCHEMAS
    for name, sch in SCHEMAS.items():
        cols = [c.name for c in sch.columns]
        assert len(cols) == len(set(cols)), name
        assert all(c in cols for c in sch.condition) and all(m.outcome in cols for m in sch.metrics)
        for ct in sch.contrasts:
            assert ct.vary == "metric" or ct.vary in sch.condition
    d = describe()
    assert d["table2"]["condition"] == ["repair_agent", "test_source"]
    assert {"instance_id", "repair_agent", "test_source", "run", "resolved", "official_valid", "local_status",
            "final_reason", "round0_resolved"} <= {c["name"] for c in d["table2"]["columns"]}
    assert {"step", "reward_mean", "reward_std", "masked_share", "kept_groups", "dropped_groups", "level_"} <= {
        c["name"] for c in d["training"]["columns"]}


# ---- the reported numbers -------------------------------------------------------------------------------


def test_reported_numbers_are_a_verbatim_copy():
    shared = SHARED / "paper" / "reported_numbers.json"
    if not shared.is_file():
        pytest.skip(f"shared paper data not at {shared}")
    assert REPORTED.read_bytes() == shared.read_bytes()


def _leaves(d) -> int:
    if isinstance(d, dict):
        return sum(_leaves(v) for v in d.values())
    return int(isinstance(d, (int, float)) and not isinstance(d, bool))


def test_reported_frame_is_tidy_complete_and_labeled():
    df = paper.reported()
    assert set(df["kind"]) == {"reported"} and df.attrs["_source"].startswith("ExecCritic")
    raw = json.loads(REPORTED.read_text())
    numeric = _leaves({k: v for k, v in raw.items() if k != "_source"})
    assert len(df) == numeric                              # every number in the file, once
    get = df.set_index(["artifact", "condition", "metric"])["value"]
    assert get[("table1", "GPT-5.6-sol", "b2g_pct")] == 87.8
    assert get[("table2", "trained / RL-35B", "resolved_pct")] == 72.6
    assert get[("table3", "Full T2I / RL-35B", "round0_resolved_pct")] == 68.3
    assert get[("figure5", "a / SWE-bench Pro / GPT-5.6-sol / Oracle", "resolved_pct")] == 73.4
    assert get[("figure6", "sft / 1000", "b2g_pct")] == 27.0
    assert get[("table5", "Java", "b2g_pct")] == 2.4
    assert all(s.startswith("reported_numbers.json#") for s in df["source"])
    assert "qualitative" in paper.reported_notes()["figure6b_test_rl_reward_curves"]


def test_reported_loader_refuses_unknown_keys_and_a_missing_source(tmp_path):
    raw = json.loads(REPORTED.read_text())
    p = tmp_path / "r.json"
    p.write_text(json.dumps({**raw, "table7_new": {"rows": {"x": 1}}}))
    with pytest.raises(InputError, match="no parser") as e:
        paper.reported(p)
    assert e.value.field == "table7_new" and e.value.file == str(p)
    p.write_text(json.dumps({k: v for k, v in raw.items() if k != "_source"}))
    with pytest.raises(InputError, match="_source"):
        paper.reported(p)


# ---- training runs: init label, curve points, manifest check ---------------------------------------------


def test_training_init_label_and_legacy_model_facts():
    assert training_init({"init": "sft"}) == "sft"
    # runs written before the label: the model facts; an embedded base alias is the base model, never "sft"
    assert training_init({"init": {"spec": "smollm2", "path": "/x"}}) == "base"
    assert training_init({"init": {"spec": "tiny"}}) == "base"
    assert training_init({"init": {"spec": "/ckpt/final"}}) == "/ckpt/final"


def _legacy_and_new_training(tmp_path: Path):
    w = new_run("training", PRESET, root=tmp_path, runs=1, instances=[], run_id="curve-points",
                extra={"role": "test", "init": {"spec": "smollm2", "path": "/m"}})
    base = {"masked_share": 0.0, "kept_groups": 0, "dropped_groups": 1, "n_rollouts": 0, "episodes": 4}
    w.extend([
        # legacy rows: no kept group -> a 0.0 placeholder flagged undefined, the offered mean beside it
        {**base, "step": 0, "reward_mean": 0.0, "reward_std": 0.0, "reward_mean_undefined": True,
         "reward_mean_offered": -0.2},
        {**base, "step": 1, "reward_mean": 0.0, "reward_std": 0.0, "reward_mean_undefined": True,
         "reward_mean_offered": None, "masked_share": 1.0},
        # current rows: the kept mean (what trained) differs from the offered one (what the policy scored)
        {**base, "step": 2, "reward_mean": 0.35, "reward_std": 0.1, "reward_over": "kept", "kept_groups": 1,
         "reward_mean_offered": 0.1, "masked_share": 0.25, "optimizer_steps_skipped": 0},
        {**base, "step": 3, "reward_mean": -0.1, "reward_std": 0.05, "reward_over": "offered",
         "reward_mean_offered": -0.1, "episodes": 12, "optimizer_steps_skipped": 1},
        {**base, "step": 4, "reward_mean": 0.0, "reward_std": 0.0, "reward_over": "none", "masked_share": 1.0,
         "reward_mean_offered": None},
    ])
    return w.finalize()


def test_training_curve_points_are_the_offered_mean_with_a_valid_interval(tmp_path):
    """One series: the mean over every offered rollout with a reward, n of them, a 95% interval inside Eq. 5's
    range [-0.2, 1] that is not zero-width at n = 3-4, the kept mean beside it, and whether the step trained."""
    run = _legacy_and_new_training(tmp_path)
    c = training_curve(run)
    assert list(c["step"]) == [0, 1, 2, 3, 4]
    assert list(c["reward"].iloc[[0, 2, 3]]) == pytest.approx([-0.2, 0.1, -0.1])
    assert math.isnan(c["reward"].iloc[1]) and math.isnan(c["reward"].iloc[4])   # no reward: a gap, not 0.0
    assert list(c["n"]) == [4, 0, 3, 12, 0]
    assert list(c["trained"]) == [False, False, True, False, False]
    assert c["reward_kept"].iloc[2] == pytest.approx(0.35) and c["reward_kept"].isna().sum() == 4
    for _, p in c.dropna(subset=["reward"]).iterrows():
        assert -0.2 <= p["ci_low"] < p["reward"] + 1e-12 and p["reward"] - 1e-12 < p["ci_high"] <= 1.0
        assert p["ci_high"] - p["ci_low"] > 0.3 and p["ci_method"] == "hoeffding"
    # n = 12, mean -0.1 in [-0.2, 1]: half-width 1.2 * sqrt(ln(40) / 24) = 0.4705, hand-computed; clipped below
    assert (c["ci_low"].iloc[3], c["ci_high"].iloc[3]) == pytest.approx((-0.2, 0.3705), abs=1e-4)
    assert training_init(run.manifest) == "base"


def test_hoeffding_interval_is_never_zero_width_and_stays_in_range():
    """Four rollouts that all scored 1.0 still leave the mean uncertain; a percentile bootstrap says [1, 1]."""
    assert stats.hoeffding_mean_ci(1.0, 4, (0.0, 1.5)) == (0.0, 1.5)      # half-width 1.02, clipped to the range
    lo, hi = stats.hoeffding_mean_ci(1.0, 40, (0.0, 1.5))
    half = 1.5 * math.sqrt(math.log(40) / 80)                                 # 0.3221, inside the range
    assert (lo, hi) == pytest.approx((1.0 - half, 1.0 + half))
    assert stats.bootstrap_mean_ci(np.ones(4)) == (1.0, 1.0)
    for n in (1, 2, 5, 50, 5000):
        lo, hi = stats.hoeffding_mean_ci(0.5, n, (0.0, 1.0))
        assert 0.0 <= lo < 0.5 < hi <= 1.0
    assert all(math.isnan(v) for v in stats.hoeffding_mean_ci(0.5, 0, (0.0, 1.0)))


@pytest.mark.parametrize(("edit", "field"), [({"role": "critic"}, "role"), ({"init": 3}, "init"),
                                             ({"init": {"path": "/no/spec"}}, "init"), ({"init": ""}, "init")])
def test_a_training_manifest_with_a_bad_role_or_init_is_rejected(tmp_path, edit, field):
    run = make_training(tmp_path, "repair", "base", steps=2)
    path = run.path / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    with pytest.raises(InputError) as e:
        load_run("training", run.run_id, root=tmp_path)
    assert e.value.field == field and e.value.file == str(path)


def test_the_committed_training_runs_load_and_their_curves_are_their_metrics():
    """results/training/*: every run in the index loads through the schema check; its curve points are the
    metrics.jsonl values: the mean over every offered rollout with a reward."""
    root = Path(__file__).resolve().parents[2] / "results"
    idx = list_runs("training", root=root)
    for run_id in idx["run_id"]:
        run = load_run("training", run_id, root=root)
        rows = [json.loads(x) for x in (run.path / "metrics.jsonl").read_text().splitlines()]
        want = [r["reward_mean_offered"] for r in sorted(rows, key=lambda r: r["step"])]
        got = training_curve(run)
        assert list(got["step"]) == sorted(r["step"] for r in rows)
        assert list(got["reward"]) == pytest.approx([math.nan if w is None else w for w in want], nan_ok=True)
        assert run.manifest["role"] in ("test", "repair") and training_init(run.manifest)
