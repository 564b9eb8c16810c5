"""The committed smoke reproduction: one complete CPU smoke run per paper artifact under results/,
labeled as such, with its executed notebook; paper_figures/ is exactly what `execcritic figures` rebuilds
from it; the figures' bars and the tables' cells are the runs' summary values and the paper's."""

from __future__ import annotations

import filecmp
import json

import nbformat
import pandas as pd
import pytest

from execcritic.figures import build_all
from execcritic.figures.notebook import figure, shown_runs, view
from execcritic.figures.tables import LAYOUTS, NR, PRETTY, fmt, leaf_headers, paper_table
from execcritic.results import paper
from execcritic.results.schemas import PAPER_ARTIFACTS, schema, stand_in_name
from execcritic.results.store import FINISHED
from tests.synthetic_results import REPO
from tests.unit.test_figures import _find, md_tables

RESULTS, FIGURES = REPO / "results", REPO / "paper_figures"


@pytest.fixture(scope="module")
def runs():
    got = shown_runs(RESULTS, PAPER_ARTIFACTS)
    missing = [a for a, r in got.items() if r is None]
    assert not missing, f"results/paper_runs.json pins no committed run of {missing} (run `make run`)"
    return got


def test_one_labeled_smoke_run_per_artifact(runs):
    sessions = {r.run_id for r in runs.values()}
    assert len(sessions) == 1, sessions                     # one reproduce session made them all
    for a, run in runs.items():
        m = run.manifest
        assert run.manifest["status"] in FINISHED and run.preset == "smoke" and "not a reproduction of the paper's numbers" in m["banner"]
        assert not m["git"]["dirty"], f"{a}: made from uncommitted code"
        for b in m["models"].values():                  # the embedded model, or a checkpoint trained from it here
            assert b["stand_in"] and (b["spec"] == "local" or b["name"].endswith("trained on CPU")), (a, b)
        assert run.notebook is not None
        nb = nbformat.read(run.notebook, as_version=4)
        assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
        for col in schema(a).condition:
            for v in run.records[col].dropna().astype(str):
                assert stand_in_name(v) or v in ("None (Round 0)", "Oracle F2P", "Baseline", "Oracle", "b",
                                                 "SWE-bench Verified", "sft", "sft_rl") or v.isdigit(), (a, col, v)


def _pinned(runs) -> dict[str, dict]:
    """Every pinned run's manifest: the artifacts' and the training runs Figure 6 draws."""
    from execcritic.results.pins import read_pins

    out = {f"{a}/{r.run_id}": r.manifest for a, r in runs.items()}
    for run_id in read_pins(RESULTS)["training"]:
        out[f"training/{run_id}"] = json.loads((RESULTS / "training" / run_id / "manifest.json").read_text())
    return out


def test_the_committed_runs_were_judged_by_this_harness(runs):
    """Results made at HEAD: every pinned run - each artifact's and each training run of Figure 6's curves -
    carries the harness digest of the code here. A change to bundle/, runners/, harness/ or sandbox/ must come with
    results made by it (`make run`, and `execcritic reproduce --train` where it moves a training run)."""
    from execcritic.results.manifest import harness_digest

    now = harness_digest()
    stale = {k: m.get("harness_digest") for k, m in _pinned(runs).items() if m.get("harness_digest") != now}
    assert not stale, f"made by another harness than this code's ({now}): {stale}; rerun `make run`"


def test_the_pinned_runs_were_made_by_this_measuring_code(runs):
    """issue 45: a pinned run - an artifact's or a training run Figure 6 draws - names the code that measured it:
    every file of the packages that decide a number (`MEASURING`: harness, sandbox, runners, bundle, evaluation,
    agents, pipeline, rewards, prompts, experiments, training), and it is HEAD's. A change to any of them must come
    with the smoke session made again (`execcritic reproduce --train`, which remakes the training runs too)."""
    from execcritic.results.manifest import MEASURING, measuring_digest

    now = measuring_digest()
    pinned = _pinned(runs)
    assert any(k.startswith("training/") for k in pinned), "Figure 6 pins no training run"
    stale = {k: m.get("measuring_digest") for k, m in pinned.items() if m.get("measuring_digest") != now}
    assert not stale, (f"made by other code of {', '.join(MEASURING)} than HEAD's ({now}): {stale}; "
                       "rerun `execcritic reproduce --train`")


def test_the_trained_rows_are_measured(runs):
    """issue 45: the smoke session trained its stand-ins, so Tables 3, 4 and 6 and Figure 6 hold rows measured with
    a checkpoint trained on CPU (named as such), not `not run here` for want of training."""
    for a in ("table3", "table4", "table6", "figure6"):
        bindings = runs[a].manifest["models"]
        trained = {role: b for role, b in bindings.items() if b["spec"].startswith("hf:")}
        assert trained, (a, "no trained role")
        for b in trained.values():
            assert b["stand_in"] and b["name"].endswith("trained on CPU"), (a, b)
        why = " ".join((runs[a].manifest.get("not_run") or {}).values())
        assert "CPU training is opt-in" not in why, (a, why)


def test_paper_figures_are_rebuilt_from_results(tmp_path):
    build_all(RESULTS, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(p.name for p in FIGURES.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(FIGURES, tmp_path, names, shallow=False)
    assert mismatch == [] and errors == [], f"paper_figures/ is stale; run `execcritic figures`: {mismatch}"


@pytest.mark.parametrize("artifact", PAPER_ARTIFACTS)
def test_table_cells_are_the_summary_and_the_paper(runs, artifact):
    """In the paper's layout: every measured value (here all by a stand-in) sits in a stand-in row with an empty
    paper cell, its paper row shows the paper's value beside n/r; the detail table lists it in full."""
    run, lay = runs[artifact], LAYOUTS[artifact]
    sch = schema(artifact)
    g = paper_table(view(run))
    text = (FIGURES / f"{artifact}.md").read_text()
    detail = next((t for t in md_tables(text) if "Interval method" in t[0]), [])
    for s in run.summary.to_dict("records"):
        if not lay.metrics or s["metric"] in lay.metrics:
            value = fmt(s["value"] * lay.scale, lay.digits)
            hits = [row for row in g.body if row[0].text == "stand-in" and any(c.text == value for c in row[1:])]
            assert hits, (artifact, s)
        row = _find(detail, **{PRETTY[c]: str(s[c]) for c in sch.condition}, Metric=sch.metric(s["metric"]).label)
        assert row["Measured"] == fmt(s["value"]) and row["Interval method"] == s["ci_method"]
    heads = leaf_headers(g)
    for row in g.body:
        if row[0].text == "stand-in":                  # a stand-in row never holds a paper value
            assert all(c.text == "" for h, c in zip(heads, row) if h.endswith("Paper")), heads
    flat = [c for row in g.body for c in row]
    for r in paper.reported().query("artifact == @artifact").to_dict("records"):
        assert fmt(r["value"] * lay.scale, lay.digits) in [c.text for c in flat]
    assert all(c.notes for c in flat if c.text == NR)
    assert "CPU smoke run of the pipeline" in text


def test_figure5_bars_are_the_committed_values(runs):
    run = runs["figure5"]
    fig = figure(run)
    bars = {p.get_gid(): p.get_height() for ax in fig.axes for p in ax.patches if p.get_gid()}
    summary = pd.read_csv(run.path / "summary.csv")
    measured = {k: v for k, v in bars.items() if k.startswith("measured|")}
    assert len(measured) == len(summary) > 0
    for s in summary.to_dict("records"):
        key = f"measured|{s['panel']}|{s['benchmark']}|{s['repair_agent']}|{s['feedback_source']}"
        assert measured[key] == pytest.approx(s["value"])
    for r in paper.reported().query("artifact == 'figure5'").to_dict("records"):
        key = f"reported|{r['panel']}|{r['benchmark']}|{r['repair_agent']}|{r['feedback_source']}"
        assert bars[key] == pytest.approx(r["value"])
    legend = " ".join(t.get_text() for leg in fig.legends for t in leg.get_texts())
    assert "reported (paper)" in legend and "stand-in" in legend and "preset smoke" in legend


def test_figure6_points_are_the_committed_values(runs):
    run = runs["figure6"]
    lines = {ln.get_gid(): ln for ax in figure(run).axes for ln in ax.get_lines() if ln.get_gid()}
    for s in run.summary.query("metric == 'b2g_pct'").to_dict("records"):          # the paper's fractions
        # a series of SFT points is named by its first checkpoint, the RL star by its checkpoint and data size
        drawn = [ln for gid, ln in lines.items() if gid.startswith(f"measured|a|{s['checkpoint']}")
                 or (gid.startswith("measured|a|") and s["checkpoint"].startswith("sft ") and
                     any(abs(x - s["sft_trajectories"]) <= 220 for x in ln.get_xdata()))]
        assert any(any(y == pytest.approx(s["value"] / 100) for y in ln.get_ydata()) for ln in drawn), s
    assert list(lines["reported|a|sft"].get_ydata()) == pytest.approx([0.22, 0.27, 0.35, 0.39, 0.39])


def test_every_unmeasured_paper_condition_says_why(runs):
    for run in runs.values():
        v = view(run)
        for r in v.rows.to_dict("records"):
            if pd.isna(r["measured"]):
                assert r["measured_note"].startswith("not run here: ") and len(r["measured_note"]) > 20
