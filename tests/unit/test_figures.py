"""`execcritic figures`: content checks on the tables and figures built from SYNTHETIC fixture runs
(tests/synthetic_results.py) and from the repository's own results/ (no artifact runs yet)."""

from __future__ import annotations

import filecmp

import pandas as pd
import pytest
from typer.testing import CliRunner

from execcritic.cli import app
from execcritic.figures import build_all
from execcritic.results.pins import read_pins
from execcritic.figures.plots import figure5, figure6
from execcritic.figures.tables import PRETTY, build_view, fmt, fmt_ci
from execcritic.results import paper
from execcritic.results.schemas import PAPER_ARTIFACTS, schema
from execcritic.results.store import list_runs
from tests.synthetic_results import PRESET, REPO, make_all, make_table1


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    runs = make_all(root / "results")
    out = root / "paper_figures"
    res = CliRunner().invoke(app, ["figures", "--results", str(root / "results"), "--out", str(out), "--latest"])
    assert res.exit_code == 0, res.output
    return root, runs, out


def md_tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table in `text` as a list of {header: cell} rows."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            header = _cells(lines[i])
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(dict(zip(header, _cells(lines[i]))))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in line.strip()[2:-2].split(" | ")]


def _find(rows: list[dict[str, str]], **match: str) -> dict[str, str]:
    hits = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(hits) == 1, (match, hits)
    return hits[0]


def test_every_output_is_written(built):
    _, _, out = built
    for a in PAPER_ARTIFACTS:
        assert (out / f"{a}.md").is_file() and (out / f"{a}.tex").is_file()
    for f in ("figure5", "figure6"):
        assert (out / f"{f}.png").stat().st_size > 10_000 and (out / f"{f}.pdf").read_bytes().startswith(b"%PDF")
    assert (out / "README.md").is_file()


@pytest.mark.parametrize("artifact", ["table1", "table2", "figure5", "figure6"])
def test_table_cells_equal_the_summary_csv(built, artifact):
    _, runs, out = built
    run = runs[artifact]
    sch = schema(artifact)
    main = md_tables((out / f"{artifact}.md").read_text())[0]
    summary = pd.read_csv(run.path / "summary.csv", dtype={c: str for c in sch.condition if c != "sft_trajectories"})
    rep = paper.reported().query("artifact == @artifact").set_index(["condition", "metric"])["value"]
    assert len(summary) > 0
    for s in summary.to_dict("records"):
        cond = {PRETTY[c]: str(s[c]) for c in sch.condition}
        row = _find(main, **cond, Metric=sch.metric(s["metric"]).label)
        assert row["Measured"] == fmt(s["value"])
        assert row["Measured 95% CI"] == fmt_ci(s["ci_low"], s["ci_high"])
        assert row["n (instances x runs)"] == f"{s['n_instances']} x {s['n_runs']}"
        assert row["Invalid / missing"] == f"{s['n_invalid']} / {s['n_missing']}"
        assert row["Preset"] == PRESET and "synthetic:fixture" in row["Model (measured)"]
        key = (sch.condition_label(s), s["metric"])
        if key in rep.index:
            assert row["Reported (paper)"].split(" ")[0] == fmt(rep[key])
        else:
            assert row["Reported (paper)"] == "— (not in the paper)"
    # every reported value is in the table, in the Reported column
    for (cond, metric), value in rep.items():
        fields = dict(zip(sch.condition, cond.split(" / ")))
        row = _find(main, **{PRETTY[c]: v for c, v in fields.items()}, Metric=sch.metric(metric).label)
        assert row["Reported (paper)"].split(" ")[0] == fmt(value)
        if row["Measured"].startswith("not run here: "):
            assert row["Measured 95% CI"] == "—"


def test_known_cells_literally(built):
    _, _, out = built
    t1 = md_tables((out / "table1.md").read_text())[0]
    base = _find(t1, **{"Test source": "Qwen3.5-35B-A3B"}, Metric="Base-to-Gold %")
    assert (base["Reported (paper)"], base["Measured"], base["Invalid / missing"]) == ("22.2", "30.0", "1 / 0")
    t2 = md_tables((out / "table2.md").read_text())[0]
    tr = _find(t2, **{"Repair agent": "trained", "Test source": "None (Round 0)"})
    assert (tr["Reported (paper)"], tr["Measured"], tr["n (instances x runs)"], tr["Invalid / missing"]) == (
        "68.3", "50.0", "6 x 3", "1 / 1")
    f6 = md_tables((out / "figure6.md").read_text())[0]
    assert _find(f6, Checkpoint="sft", **{"SFT trajectories": "1000"})["Reported (paper)"] == "27.0 (approx.)"


def test_delta_cells_equal_the_deltas_csv(built):
    _, runs, out = built
    for artifact in ("table1", "table2"):
        deltas = runs[artifact].deltas
        table = md_tables((out / f"{artifact}.md").read_text())[1]
        for d in deltas.to_dict("records"):
            row = _find(table, Comparison=f"{d['treatment']} vs {d['baseline']}", Within=d["within"])
            assert row["Measured Δ (pp)"] == f"{d['delta']:+.1f}"
            assert row["Measured 95% CI"] == fmt_ci(d["ci_low"], d["ci_high"])
            assert row["p (test)"].startswith(f"{d['p_value']:.3g} (")
            assert row["Better / worse"] == f"{d['n_better']} / {d['n_worse']}"
    t1 = md_tables((out / "table1.md").read_text())[1]
    sft = _find(t1, Comparison="Qwen3.5-35B-A3B + SFT vs Qwen3.5-35B-A3B", Within="all")
    assert sft["Reported Δ (paper values, pp)"] == "+17.4" and sft["p (test)"] == "0.25 (exact McNemar)"


def test_artifacts_without_a_run_say_why(built):
    _, _, out = built
    for artifact in ("table3", "table4", "table5", "table6"):
        text = (out / f"{artifact}.md").read_text()
        assert "**Measured (this suite)**: none" in text
        rows = md_tables(text)[0]
        assert rows and all(r["Measured"].startswith("not run here: ") for r in rows)
        assert all(r["Reported (paper)"][0].isdigit() for r in rows)
    t5 = md_tables((out / "table5.md").read_text())[0]
    assert "Multilingual official images need a container registry" in _find(t5, Language="Rust")["Measured"]
    f5 = md_tables((out / "figure5.md").read_text())[0]
    pro = _find(f5, Panel="a", Benchmark="SWE-bench Pro", **{"Feedback source": "Oracle"})
    assert "SWE-bench Pro data not available offline" in pro["Measured"]


def test_latex_is_labeled_and_escaped(built):
    _, _, out = built
    tex = (out / "table1.tex").read_text()
    assert "Reported (paper)" in tex and r"Base-to-Gold \%" in tex and "87.8" in tex
    assert r"\begin{tabular}" in tex and "synthetic-fixture" in tex


def test_figure5_bar_heights_are_the_measured_and_reported_values(built):
    _, runs, _ = built
    rep = paper.reported()
    view = build_view("figure5", runs["figure5"], rep)
    fig = figure5(view)
    bars = {p.get_gid(): p.get_height() for ax in fig.axes for p in ax.patches if p.get_gid()}
    measured = {k: v for k, v in bars.items() if k.startswith("measured|")}
    summary = runs["figure5"].summary
    assert len(measured) == len(summary) == 3
    for s in summary.to_dict("records"):
        gid = f"measured|{s['panel']}|{s['benchmark']}|{s['repair_agent']}|{s['feedback_source']}"
        assert measured[gid] == pytest.approx(s["value"])
    for r in rep.query("artifact == 'figure5'").to_dict("records"):
        gid = f"reported|{r['panel']}|{r['benchmark']}|{r['repair_agent']}|{r['feedback_source']}"
        assert bars[gid] == pytest.approx(r["value"])
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert legend[0] == "reported (paper)" and legend[1].startswith(f"measured (this suite): preset {PRESET}, n=5")


def test_figure6_lines_are_the_measured_values(built):
    _, runs, _ = built
    rep = paper.reported()
    view = build_view("figure6", runs["figure6"], rep)
    training = [runs["train_repair"], runs["train_test_base"], runs["train_test_sft"]]
    fig = figure6(view, training)
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}
    sft = runs["figure6"].summary.query("checkpoint == 'sft' and metric == 'b2g_pct'").sort_values("sft_trajectories")
    assert list(lines["measured|a|sft"].get_ydata()) == pytest.approx(list(sft["value"]))
    assert list(lines["measured|a|sft"].get_xdata()) == list(sft["sft_trajectories"])
    assert lines["measured|a|sft_rl|5000"].get_ydata()[0] == pytest.approx(80.0)
    assert lines["reported|a|sft_rl|5000"].get_ydata()[0] == pytest.approx(62.2)
    assert list(lines["reported|a|sft"].get_ydata()) == pytest.approx([22.0, 27.0, 35.0, 39.0, 39.0])
    for run in training:
        ln = lines[f"measured|{'b' if run.manifest['role'] == 'test' else 'c'}|{run.manifest['init']}|{run.run_id}"]
        assert list(ln.get_ydata()) == pytest.approx(list(run.records.sort_values("step")["reward_mean"]))


def test_same_inputs_give_byte_identical_outputs(built, tmp_path):
    root, _, out = built
    again = build_all(root / "results", tmp_path / "again", latest=True)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in (tmp_path / "again").iterdir())
    match, mismatch, errors = filecmp.cmpfiles(out, tmp_path / "again", names, shallow=False)
    assert mismatch == [] and errors == [] and len(match) == len(again.files)
    assert b"Software" not in (out / "figure5.png").read_bytes()[:4096]
    assert b"CreationDate" not in (out / "figure5.pdf").read_bytes()


def test_a_pinned_run_is_shown_and_a_malformed_run_stops_the_build(tmp_path):
    results = tmp_path / "results"
    first, second = make_table1(results), make_table1(results)
    assert first.run_id != second.run_id
    runner = CliRunner()
    res = runner.invoke(app, ["figures", "--results", str(results), "--out", str(tmp_path / "o"),
                              "--reported", str(REPO / "results" / "paper" / "reported_numbers.json"),
                              "--run", f"table1={first.run_id}"])
    assert res.exit_code == 0, res.output
    assert f"table1/{first.run_id}" in (tmp_path / "o" / "table1.md").read_text()
    s = pd.read_csv(second.path / "summary.csv")
    s.loc[0, "value"] = 99.0
    s.to_csv(second.path / "summary.csv", index=False)
    res = runner.invoke(app, ["figures", "--results", str(results), "--out", str(tmp_path / "o2"),
                              "--reported", str(REPO / "results" / "paper" / "reported_numbers.json")])
    assert res.exit_code == 0 and "table1/" not in (tmp_path / "o2" / "table1.md").read_text()  # nothing pinned
    res = runner.invoke(app, ["figures", "--results", str(results), "--out", str(tmp_path / "o2"), "--latest",
                              "--reported", str(REPO / "results" / "paper" / "reported_numbers.json")])
    assert res.exit_code == 2
    assert "summary.csv" in res.output and "field=value" in res.output
    res = runner.invoke(app, ["figures", "--results", str(results), "--run", "table1"])
    assert res.exit_code == 2 and "ARTIFACT=RUN_ID" in res.output
    res = runner.invoke(app, ["figures", "--results", str(results), "--out", str(tmp_path / "o3"), "--reported",
                              str(REPO / "results" / "paper" / "reported_numbers.json"),
                              "--run", f"table1={first.run_id}", "--pin"])
    assert res.exit_code == 0 and read_pins(results)["runs"] == {"table1": first.run_id}


def test_the_repository_results_build_with_reported_values_only(tmp_path):
    results = REPO / "results"
    report = build_all(results, tmp_path / "pf")
    have = set(list_runs(root=results)["artifact"])
    rep = paper.reported()
    for artifact in PAPER_ARTIFACTS:
        if artifact in have:
            continue                     # once real runs are committed, the synthetic tests cover the content
        assert report.sources[artifact] is None
        rows = md_tables((tmp_path / "pf" / f"{artifact}.md").read_text())[0]
        assert all(r["Measured"].startswith("not run here: ") for r in rows)
        reported_cells = sorted(float(r["Reported (paper)"].split(" ")[0]) for r in rows)
        assert reported_cells == sorted(rep.query("artifact == @artifact")["value"].round(1))
    assert (tmp_path / "pf" / "figure5.png").is_file() and (tmp_path / "pf" / "figure6.pdf").is_file()
    assert not (results / "index.csv").exists() or have     # building never writes into results/


def _curve_artists(fig):
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}
    texts = {t.get_gid(): t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid()}
    return lines, texts


def test_figure6_curves_of_the_committed_training_runs_are_their_metrics(tmp_path):
    """Panels (b) and (c) from results/training/: each line's points are the run's metrics.jsonl (the offered
    rollouts' mean where no group was kept, drawn hollow), labeled with the run's own label (CPU smoke), and
    the paper's curve beside it as reported (qualitative only: the paper gives no numbers)."""
    import json

    from execcritic.figures.build import BuildReport, training_runs
    from execcritic.results.store import training_init

    results = REPO / "results"
    runs = training_runs(results, BuildReport(results))
    if not runs:
        pytest.skip("no training run committed under results/training/")
    from execcritic.figures.notebook import training_curves

    view = build_view("figure6", None, paper.reported())
    fig = figure6(view, runs)
    table = training_curves(results=results)                 # the notebook's table of the same points
    lines, texts = _curve_artists(fig)
    assert texts["reported|b|qualitative"].startswith("reported (paper, qualitative only)")
    assert texts["reported|c|qualitative"].startswith("reported (paper, qualitative only)")
    for run in runs:
        panel = "b" if run.manifest["role"] == "test" else "c"
        rows = sorted((json.loads(x) for x in (run.path / "metrics.jsonl").read_text().splitlines()),
                      key=lambda r: r["step"])
        offered = [r for r in rows if r.get("reward_mean_undefined") or r.get("reward_over") == "offered"]
        want = [r["reward_mean_offered"] if r.get("reward_mean_undefined") else r["reward_mean"] for r in rows]
        key = f"{panel}|{training_init(run.manifest)}|{run.run_id}"
        line = lines[f"measured|{key}"]
        assert list(line.get_xdata()) == [r["step"] for r in rows]
        assert list(line.get_ydata()) == pytest.approx(want)
        mine = table[table["run"] == f"training/{run.run_id}"]
        assert list(mine["reward"]) == pytest.approx(want) and list(mine["step"]) == [r["step"] for r in rows]
        assert list(mine["optimizer_s"]) == pytest.approx([r["optimizer_s"] for r in rows])
        if offered:
            hollow = lines[f"measured-offered|{key}"]
            assert list(hollow.get_xdata()) == [r["step"] for r in offered]
            assert hollow.get_markerfacecolor() == "white"
        label = " ".join(line.get_label().split())          # the legend wraps long labels
        assert label.startswith("measured, ") and str(run.manifest.get("label") or run.preset) in label
        if "smoke" in run.run_id:
            assert "CPU smoke" in label


def test_figure6_names_each_missing_curve_and_draws_no_number_for_it(built):
    _, runs, _ = built
    view = build_view("figure6", runs["figure6"], paper.reported())
    fig = figure6(view, [runs["train_repair"]])          # panel (b) has no run
    lines, texts = _curve_artists(fig)
    assert not [g for g in lines if g.startswith("measured|b|")]
    assert texts["reported|b|qualitative"].startswith("reported (paper, qualitative only)")
    foot = fig.texts[-1].get_text().replace("\n", " ")
    assert "(b) test RL from base" in foot and "(b) test RL from sft" in foot
    assert "no complete run with role test, init sft under results/training/" in foot
