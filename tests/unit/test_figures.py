"""`execcritic figures`: content checks on the tables and figures built from SYNTHETIC fixture runs
(tests/synthetic_results.py) and from the repository's own results/: the paper's layouts, the paper's value
beside the measured one, reasons in numbered notes, stand-ins beside their paper counterparts, every interval
drawn and its method named, escaped LaTeX."""

from __future__ import annotations

import filecmp
import math
import re
from types import SimpleNamespace

import pandas as pd
import pytest
from typer.testing import CliRunner

from execcritic.cli import app
from execcritic.figures import build_all
from execcritic.figures.plots import figure5, figure6, frac
from execcritic.figures.tables import (
    LAYOUTS,
    NR,
    PRETTY,
    Grid,
    build_view,
    difference_table,
    fmt,
    fmt_ci,
    leaf_headers,
    measured_on,
    paper_table,
    signed,
    tex_escape,
    tex_text,
)
from execcritic.results import paper, stats
from execcritic.results.pins import read_pins
from execcritic.results.schemas import PAPER_ARTIFACTS, paper_part, schema, stand_in
from tests.synthetic_results import PRESET, REPO, ids, make_all, make_table1, resolve, writer

STAND = "tiny-stand-in"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    runs = make_all(root / "results")
    out = root / "paper_figures"
    res = CliRunner().invoke(app, ["figures", "--results", str(root / "results"), "--out", str(out), "--latest"])
    assert res.exit_code == 0, res.output
    return root, runs, out


@pytest.fixture(scope="module")
def stand_in_table2(tmp_path_factory):
    """A Table 2 run whose base Repair agent is a stand-in (as the smoke preset's), with one Base-35B source
    played by the stand-in too, and the paper's own trained agent on None (Round 0)."""
    root = tmp_path_factory.mktemp("standin")
    inst = ids(4)
    w = writer(root, "table2", inst)
    base = stand_in("base", STAND)
    for j, i in enumerate(inst):
        w.append(resolve(i, 0, j < 1, repair_agent=base, test_source="None (Round 0)"))
        w.append(resolve(i, 0, j < 3, repair_agent=base, test_source="Oracle F2P"))
        w.append(resolve(i, 0, False, repair_agent=base, test_source=stand_in("Base-35B", STAND)))
        w.append(resolve(i, 0, j < 2, repair_agent="trained", test_source="None (Round 0)"))
    return w.finalize()


def view_of(artifact, run):
    return build_view(artifact, run, paper.reported(), paper.reported_notes())


def cells(g: Grid) -> list[dict[str, object]]:
    """The body of a grid as {leaf header: Cell} rows (the leaf header joins the header levels with ' · ')."""
    heads = leaf_headers(g)
    return [dict(zip(heads, row)) for row in g.body]


def row_of(g: Grid, label: str) -> int:
    hits = [k for k, row in enumerate(g.body) if row[0].text == label]
    assert len(hits) == 1, (label, [r[0].text for r in g.body])
    return hits[0]


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


def test_tables_have_the_papers_layouts():
    """Rows and columns as the paper has them, each value column split into the paper's and the measured."""
    g = {a: paper_table(view_of(a, None)) for a in PAPER_ARTIFACTS}
    t2 = leaf_headers(g["table2"])
    assert t2 == ["Test source"] + [f"{agent} Repair · {what} · {who}" for agent in ("Base", "Trained")
                                    for what in ("Resolved (%)", "Δ (pp)") for who in ("Paper", "Measured")]
    assert [r[0].text for r in g["table2"].body] == ["None (Round 0)", "GPT-5.6-sol", "Oracle F2P", "Base-35B",
                                                     "RL-35B"]
    assert g["table2"].rules == [3]                          # the paper's rule between references and Qwen tests
    assert leaf_headers(g["table5"]) == ["", "Python", "Rust", "C++", "C", "Java"]
    assert [r[0].text for r in g["table5"].body] == ["Success, paper", "measured"]
    assert [c.text for c in g["table5"].body[0][1:]] == ["62.2", "66.7", "58.3", "26.1", "2.4"]
    t4 = cells(g["table4"])
    assert leaf_headers(g["table4"]) == ["SFT teacher", "CoT", "SFT · Paper", "SFT · Measured", "SFT + RL · Paper",
                                         "SFT + RL · Measured"]
    assert [(r["SFT teacher"].text, r["CoT"].text, r["SFT · Paper"].text, r["SFT + RL · Paper"].text) for r in t4] == [
        ("GPT-5.6-sol", "No", "35.4", "36.2"), ("DeepSeek-V4-Flash", "Yes", "39.6", "62.2")]
    assert leaf_headers(g["table3"]) == ["Training objective", "Round 0 · Paper", "Round 0 · Measured",
                                         "Final · Paper", "Final · Measured"]
    assert [r[0].text for r in g["table3"].body] == ["Standard (no T2I)", "T2I, no direct bonus", "Full T2I"]
    assert leaf_headers(g["table1"]) == ["Model", "Base→Gold (%) · Paper", "Base→Gold (%) · Measured"]
    f6 = cells(g["figure6"])
    assert [r["Base→Gold (fraction) · Paper"].text for r in f6] == ["0.220", "0.270", "0.350", "0.390", "0.390",
                                                                   "0.622", "0.734"]


def test_table2_paper_deltas_and_the_between_teacher_and_objective_gaps():
    """Table 2's Δ columns; the gaps the paper states in its text for Tables 3 and 4 are in their differences."""
    t2 = cells(paper_table(view_of("table2", None)))
    base = {r["Test source"].text: (r["Base Repair · Δ (pp) · Paper"].text, r["Trained Repair · Δ (pp) · Paper"].text)
            for r in t2}
    assert base == {"None (Round 0)": ("—", "—"), "GPT-5.6-sol": ("+4.1", "+5.2"), "Oracle F2P": ("+8.2", "+9.3"),
                    "Base-35B": ("−3.9", "−3.7"), "RL-35B": ("+2.9", "+4.3")}

    def diffs(artifact):
        return {r[0].text: r[1].text for r in difference_table(view_of(artifact, None)).body}
    t4 = diffs("table4")
    assert t4["DeepSeek-V4-Flash (CoT) − GPT-5.6-sol (no CoT): SFT"] == "+4.2"
    assert t4["DeepSeek-V4-Flash (CoT) − GPT-5.6-sol (no CoT): SFT + RL"] == "+26.0"
    t3 = diffs("table3")
    assert t3["Full T2I − T2I, no direct bonus: Round 0"] == "+1.9"
    assert t3["Full T2I − T2I, no direct bonus: Final"] == "+1.2"
    assert t3["Full T2I − Standard (no T2I): Final"] == "+2.3"
    assert t3["Final − Round 0: Full T2I"] == "+4.3"


@pytest.mark.parametrize("artifact", ["table1", "table2", "figure5", "figure6"])
def test_measured_cells_are_the_summary_csv_and_paper_cells_the_paper(built, artifact):
    _, runs, _ = built
    run, lay = runs[artifact], LAYOUTS[artifact]
    sch = schema(artifact)
    v = view_of(artifact, run)
    g = paper_table(v)
    summary = pd.read_csv(run.path / "summary.csv", dtype={c: str for c in sch.condition if c != "sft_trajectories"})
    seen = 0
    flat = [c for row in g.body for c in row]
    for s in summary.to_dict("records"):
        if lay.metrics and s["metric"] not in lay.metrics:
            continue
        want = (fmt(s["value"] * lay.scale, lay.digits), fmt_ci(s["ci_low"] * lay.scale, s["ci_high"] * lay.scale,
                                                                 lay.digits))
        assert any((c.text, c.sub[:1]) == (want[0], (want[1],)) for c in flat), (s, want)
        seen += 1
    assert seen > 0
    for r in paper.reported().query("artifact == @artifact").to_dict("records"):
        assert fmt(r["value"] * lay.scale, lay.digits) in [c.text for c in flat]
    # the detail table under it: every measured row in full, the counts, the model spec, the interval method
    detail = next(t for t in md_tables((built[2] / f"{artifact}.md").read_text()) if "Interval method" in t[0])
    for s in summary.to_dict("records"):
        row = _find(detail, **{PRETTY[c]: str(s[c]) for c in sch.condition}, Metric=sch.metric(s["metric"]).label)
        assert (row["Measured"], row["Measured 95% CI"]) == (fmt(s["value"]), fmt_ci(s["ci_low"], s["ci_high"]))
        assert row["Invalid / missing"] == f"{s['n_invalid']} / {s['n_missing']}"
        assert "synthetic:fixture" in row["Model (measured)"] and row["Interval method"] == s["ci_method"]


def test_known_cells_literally(built):
    _, runs, _ = built
    t1 = cells(paper_table(view_of("table1", runs["table1"])))
    base = next(r for r in t1 if r["Model"].text == "Qwen3.5-35B-A3B")
    assert (base["Base→Gold (%) · Paper"].text, base["Base→Gold (%) · Measured"].text,
            base["Base→Gold (%) · Measured"].sub) == ("22.2", "30.0", ("[6.7, 65.2]",))
    assert [r["Model"].text for r in t1][-1] == "synthetic-only source"          # measured only: last, noted
    t2 = paper_table(view_of("table2", runs["table2"]))
    tr = cells(t2)[row_of(t2, "None (Round 0)")]
    assert (tr["Trained Repair · Resolved (%) · Paper"].text, tr["Trained Repair · Resolved (%) · Measured"].text) == (
        "68.3", "50.0")
    assert "n (instances × runs) under each value" not in " ".join(t2.legend)       # one n for the whole table
    assert any("n = 6 instances × 3 runs for every measured value" in x for x in t2.legend)


def test_table2_measured_delta_is_the_deltas_csv_with_interval_and_exact_p(built):
    _, runs, _ = built
    run = runs["table2"]
    d = run.deltas.query("vary == 'test_source' and treatment == 'Oracle F2P'").iloc[0]
    g = paper_table(view_of("table2", run))
    cell = cells(g)[row_of(g, "Oracle F2P")]["Base Repair · Δ (pp) · Measured"]
    assert d["ci_method"] == "undefined"               # 6 instances x 3 runs: too few for the bootstrap
    assert cell.text == signed(d["delta"]) and cell.sub == ("no interval", f"p = {d['p_value']:.3g}")
    assert any("Δ: paired on the same instances; p: exact two-sided test" in x for x in g.legend)
    assert any("no interval: zero instances, or too few for the bootstrap" in x for x in g.legend)
    diff = difference_table(view_of("table2", run))
    trained = next(r for r in diff.body if r[0].text == "Trained Repair − Base Repair: None (Round 0)")
    dd = run.deltas.query("vary == 'repair_agent'").iloc[0]
    assert trained[2].text == signed(dd["delta"]) and trained[3].text == f"{dd['p_value']:.3g}"


def test_reasons_are_numbered_notes_and_identical_reasons_share_one(built):
    """No reason sits in a cell: a cell says n/r and carries note numbers; one text, one number."""
    for artifact in PAPER_ARTIFACTS:
        g = paper_table(view_of(artifact, None))
        for row in g.body:
            for c in row:
                assert len(c.text) <= 40, (artifact, c.text)
                if c.text == NR:
                    assert c.notes and all(1 <= n <= len(g.notes.texts) for n in c.notes)
        assert len(set(g.notes.texts)) == len(g.notes.texts)
    t3 = paper_table(view_of("table3", None))
    marks = [c.notes for row in t3.body for c in row if c.text == NR]
    assert len(marks) == 6 and len({n for m in marks for n in m}) == len(t3.notes.texts)
    assert t3.legend[-1].startswith("n/r: not run here")
    text = (built[2] / "table3.md").read_text()
    assert "n/r<sup>" in text and "not run here" not in md_tables(text)[0][0]["Round 0 · Measured"]


def test_a_stand_in_sits_in_its_own_row_below_its_paper_row(stand_in_table2):
    g = paper_table(view_of("table2", stand_in_table2))
    labels = [r[0].text for r in g.body]
    assert labels == ["None (Round 0)", "stand-in", "GPT-5.6-sol", "Oracle F2P", "stand-in", "Base-35B", "stand-in",
                      "RL-35B"]
    rows = cells(g)
    paper_row, stand_row = rows[0], rows[1]
    assert paper_row["Base Repair · Resolved (%) · Paper"].text == "61.2"
    assert paper_row["Base Repair · Resolved (%) · Measured"].text == NR            # not the stand-in's value
    assert stand_row["Base Repair · Resolved (%) · Paper"].text == ""              # never the paper's value
    assert stand_row["Base Repair · Resolved (%) · Measured"].text == "25.0"
    assert paper_row["Trained Repair · Resolved (%) · Measured"].text == "50.0"     # the paper's own model
    note = g.notes.texts[stand_row["Test source"].notes[0] - 1]
    assert STAND in note and "not the paper's model" in note and "Repair agent: base" in note
    b35 = g.notes.texts[rows[6]["Test source"].notes[0] - 1]
    assert "Test source: Base-35B" in b35
    assert rows[4]["Base Repair · Δ (pp) · Measured"].text == "+50.0"              # Oracle vs None, stand-in
    assert rows[4]["Base Repair · Δ (pp) · Paper"].text == ""
    reason = [g.notes.texts[n - 1] for n in paper_row["Base Repair · Resolved (%) · Measured"].notes]
    assert reason and all("stand-in" not in r or "row below" in r for r in reason)


def test_the_repository_results_build_with_every_paper_value(tmp_path):
    results = REPO / "results"
    report = build_all(results, tmp_path / "pf")
    for artifact in PAPER_ARTIFACTS:
        lay = LAYOUTS[artifact]
        g = paper_table(view_of(artifact, None))
        flat = [c.text for row in g.body for c in row]
        for r in paper.reported().query("artifact == @artifact").to_dict("records"):
            assert fmt(r["value"] * lay.scale, lay.digits) in flat
        assert report.sources[artifact] is None or report.sources[artifact].startswith(f"{artifact}/")
    assert (tmp_path / "pf" / "figure5.png").is_file() and (tmp_path / "pf" / "figure6.pdf").is_file()


def test_latex_is_escaped_for_any_font_encoding(built):
    assert tex_escape('a<b> `c` "q" x_y 50% #1 {z} ~^ |Δ × —') == (
        r"a\textless{}b\textgreater{} \`{}c\`{} \textquotedblleft{}q\textquotedblright{} x\_y 50\% \#1 \{z\} "
        r"\textasciitilde{}\textasciicircum{} \textbar{}$\Delta$ $\times$ ---")
    assert tex_text("run `execcritic train sft (5K)` first") == r"run \texttt{execcritic train sft (5K)} first"
    for tex in sorted(built[2].glob("*.tex")) + sorted((REPO / "paper_figures").glob("*.tex")):
        body = "\n".join(line for line in tex.read_text().splitlines()
                         if not line.startswith(("%", r"\begin{tabular}")))     # comments; column specs use >{}
        bare = re.sub(r"\$[^$]*\$", "", body)               # math is allowed its < and >
        for ch in ("<", ">", "`", '"', "|"):
            assert ch not in bare.replace(r"\`{}", ""), (tex.name, ch)
        assert "[U+" not in body and all(ord(c) < 128 for c in body), tex.name
        assert r"\toprule" in body and r"\footnotesize" in body
        assert "p{4.2cm}" not in body


def test_figure5_bars_intervals_and_legend(built):
    _, runs, _ = built
    rep = paper.reported()
    run = runs["figure5"]
    fig = figure5(view_of("figure5", run))
    bars = {p.get_gid(): p for ax in fig.axes for p in ax.patches if p.get_gid()}
    measured = {k: v for k, v in bars.items() if k.startswith("measured|")}
    intervals = {ln.get_gid(): ln for ax in fig.axes for c in ax.collections for ln in [c] if c.get_gid()}
    assert len(measured) == len(run.summary) == 3
    for s in run.summary.to_dict("records"):
        gid = f"{s['panel']}|{s['benchmark']}|{s['repair_agent']}|{s['feedback_source']}"
        assert measured[f"measured|{gid}"].get_height() == pytest.approx(s["value"])
        seg = intervals[f"interval|{gid}"].get_segments()[0]
        assert [y for _, y in seg] == pytest.approx([s["ci_low"], s["ci_high"]])
    for r in rep.query("artifact == 'figure5'").to_dict("records"):
        gid = f"reported|{r['panel']}|{r['benchmark']}|{r['repair_agent']}|{r['feedback_source']}"
        assert bars[gid].get_height() == pytest.approx(r["value"])
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert legend[0] == "reported (paper)" and legend[1].startswith(f"measured (this suite), the paper's model: "
                                                                    f"preset {PRESET}")
    assert not any("stand-in" in x for x in legend)          # nothing drawn with a stand-in: no entry for it
    foot = fig.texts[-1].get_text().replace("\n", " ")
    assert "Error bars: 95% intervals, exact binomial (Clopper-Pearson)" in foot and "n = 5 instances × 1 run" in foot


def test_a_zero_width_interval_is_still_drawn_with_caps(built):
    """[x, x] (e.g. every run resolved) is an interval too: its caps are drawn where the bar ends."""
    _, runs, _ = built
    v = view_of("figure5", runs["figure5"])
    measured = v.rows["measured"].notna()
    v.rows.loc[measured, "ci_low"] = v.rows.loc[measured, "measured"]
    v.rows.loc[measured, "ci_high"] = v.rows.loc[measured, "measured"]
    fig = figure5(v)
    caps = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_marker() == "_"]
    assert len(caps) == 2 * int(measured.sum()) and all(ln.get_markersize() > 0 and ln.get_visible() for ln in caps)
    tops = sorted(float(ln.get_ydata()[0]) for ln in caps)
    assert tops == pytest.approx(sorted(2 * list(v.rows.loc[measured, "measured"])))


def test_figure6a_uses_the_papers_styles_and_fractions(built):
    _, runs, _ = built
    run = runs["figure6"]
    fig = figure6(view_of("figure6", run), [])
    ax = fig.axes[0]
    lines = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    assert lines["reported|a|sft"].get_linestyle() == "-" and lines["reported|a|teacher"].get_linestyle() == "--"
    assert lines["measured|a|sft"].get_linestyle() == "-" and lines["measured|a|teacher"].get_linestyle() == "--"
    assert list(lines["reported|a|sft"].get_ydata()) == pytest.approx([0.22, 0.27, 0.35, 0.39, 0.39])
    sft = run.summary.query("checkpoint == 'sft' and metric == 'b2g_pct'").sort_values("sft_trajectories")
    assert list(lines["measured|a|sft"].get_ydata()) == pytest.approx(list(sft["value"] / 100))
    assert lines["measured|a|sft_rl|5000"].get_ydata()[0] == pytest.approx(0.80)
    assert lines["reported|a|sft_rl|5000"].get_ydata()[0] == pytest.approx(0.622)
    assert ax.get_ylim()[0] < 0 <= min(sft["value"] / 100)             # a measured 0 sits above the axis
    assert {t.get_text() for t in ax.get_xticklabels()} == {"0k", "1k", "3k", "5k", "10k"}
    assert [frac(x) for x in (0.22, 0.622, 0.0, 0.5)] == ["0.22", "0.622", "0.00", "0.50"]
    gids = {c.get_gid() for c in ax.collections if c.get_gid()}
    assert {f"interval|a|sft|{n}" for n in sft["sft_trajectories"]} <= gids    # every measured point: an interval


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


def _curve_artists(fig):
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}
    texts = {t.get_gid(): t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid()}
    return lines, texts


def test_figure6_curves_of_the_committed_training_runs_are_their_metrics_and_summary(tmp_path):
    """Panels (b) and (c) from results/training/: each line's points are the run's metrics.jsonl (the mean over
    every offered rollout; a step without an update drawn hollow; the kept groups' mean a second line), labeled
    with the run's own label (CPU smoke), the paper's curves beside them as reported (qualitative only), and
    summary.csv's first/last/max are the same points."""
    import json

    from execcritic.figures.build import BuildReport, training_runs
    from execcritic.figures.notebook import training_curves
    from execcritic.results.store import training_init

    results = REPO / "results"
    runs = training_runs(results, BuildReport(results))
    shown = (REPO / "paper_figures" / "figure6.md").read_text()
    if not runs:                # nothing committed: the committed figure must say so, not draw old curves
        assert "No training run under `results/training/`" in shown
        fig = figure6(view_of("figure6", None), runs)
        assert not [g for g in _curve_artists(fig)[0] if g.startswith("measured|")]
        return
    fig = figure6(view_of("figure6", None), runs)
    table = training_curves(results=results)                 # the notebook's table of the same points
    lines, texts = _curve_artists(fig)
    assert texts["reported|b|qualitative"].startswith("paper (qualitative only")
    assert "RL from Base" in texts["reported|b|qualitative"] and "RL from SFT" in texts["reported|b|qualitative"]
    assert texts["reported|c|qualitative"].startswith("paper (qualitative only")
    for run in runs:
        panel = "b" if run.manifest["role"] == "test" else "c"
        rows = sorted((json.loads(x) for x in (run.path / "metrics.jsonl").read_text().splitlines()),
                      key=lambda r: r["step"])
        idle = [r for r in rows if not r["kept_groups"] or r.get("optimizer_steps_skipped")]
        want = [r["reward_mean_offered"] for r in rows]
        key = f"{panel}|{training_init(run.manifest)}|{run.run_id}"
        line = lines[f"measured|{key}"]
        assert list(line.get_xdata()) == [r["step"] for r in rows]
        assert list(line.get_ydata()) == pytest.approx(want)
        mine = table[table["run"] == f"training/{run.run_id}"]
        assert list(mine["reward"]) == pytest.approx(want) and list(mine["step"]) == [r["step"] for r in rows]
        assert list(mine["optimizer_s"]) == pytest.approx([r["optimizer_s"] for r in rows])
        s = dict(zip(run.summary["metric"], run.summary["value"]))
        assert (s["reward_mean_first"], s["reward_mean_last"], s["reward_mean_max"]) == pytest.approx(
            (want[0], want[-1], max(want)), abs=0.5 * 10 ** -stats.DECIMALS)     # summary.csv rounds
        row = _find(md_tables(shown)[-1], Run=f"training/{run.run_id}")
        assert row["Reward (first -> last, max; summary.csv)"] == (
            f"{want[0]:.3f} -> {want[-1]:.3f} ({max(want):.3f})")
        if idle:
            hollow = lines[f"measured-untrained|{key}"]
            assert list(hollow.get_xdata()) == [r["step"] for r in idle]
            assert hollow.get_markerfacecolor() == "white"
        kept = lines[f"measured-kept|{key}"]
        assert [y for y in kept.get_ydata() if not math.isnan(y)] == pytest.approx(
            [r["reward_mean"] for r in rows if r.get("reward_over", "kept") == "kept"])
        label = " ".join(line.get_label().split())          # the legend wraps long labels
        assert label.startswith("RL from ") and ", measured: " in label
        assert str(run.manifest.get("label") or run.preset) in label
        if "smoke" in run.run_id:
            assert "CPU smoke" in label


def test_figure6b_draws_both_inits_and_names_the_missing_one(built):
    _, runs, _ = built
    fig = figure6(view_of("figure6", runs["figure6"]), [runs["train_repair"], runs["train_test_base"]])
    lines, texts = _curve_artists(fig)
    assert [g for g in lines if g.startswith("measured|b|base|")] and not [g for g in lines if
                                                                          g.startswith("measured|b|sft|")]
    assert texts["absent|b"].startswith("RL from SFT, measured: n/r")
    foot = fig.texts[-1].get_text().replace("\n", " ")
    assert "no complete run with role test, init sft under results/training/" in foot
    fig = figure6(view_of("figure6", runs["figure6"]), [runs["train_test_base"], runs["train_test_sft"]])
    lines, texts = _curve_artists(fig)
    b = {g.split("|")[2] for g in lines if g.startswith("measured|b|")}
    assert b == {"base", "sft"} and "absent|b" not in texts
    assert lines[f"measured|b|sft|{runs['train_test_sft'].run_id}"].get_label().startswith("RL from SFT")
    assert "absent|c" in texts                         # no repair run given: panel (c) says so


def test_paper_values_are_never_stand_in_values(stand_in_table2):
    """The paper-part of a stand-in row is the paper's condition; the paper's number is never in its cell."""
    v = view_of("table2", stand_in_table2)
    for r in v.rows.to_dict("records"):
        if paper_part(r["repair_agent"]) != r["repair_agent"]:
            assert pd.isna(r["reported"])


def test_no_figure_text_is_smaller_than_eight_points():
    """Figures 5 and 6 of the pinned runs, as `execcritic figures` draws them: every visible text (ticks, legends,
    notes, annotations) is at least MIN_FONT = 8 pt at the saved size, readable at 100% on a laptop screen."""
    from matplotlib.text import Text

    from execcritic.figures.build import BuildReport, training_runs
    from execcritic.figures.plots import MIN_FONT
    from execcritic.results.store import load_run

    results = REPO / "results"
    pins = read_pins(results)["runs"]
    figs = {"figure5": figure5(view_of("figure5", load_run("figure5", pins["figure5"], root=results))),
            "figure6": figure6(view_of("figure6", load_run("figure6", pins["figure6"], root=results)),
                               training_runs(results, BuildReport(results)))}
    assert MIN_FONT >= 8
    for name, fig in figs.items():
        fig.canvas.draw()          # tick labels exist once drawn
        small = [(t.get_text()[:40], t.get_fontsize()) for t in fig.findobj(Text)
                 if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_FONT]
        assert not small, (name, small)


@pytest.mark.parametrize("source, says", [
    ("verified-sdist:rows.parquet", "of SWE-bench Verified's 500 instances, those whose environments build here"),
    ("verified-git:rows.parquet", "of SWE-bench Verified's 500 instances, each at its own base commit"),
    ("multilingual-git:rows.parquet", "of SWE-bench Multilingual's 300 instances, the C and C++ rows qualified here"),
])
def test_a_caption_names_the_subset_of_the_split_it_measured(source, says):
    """A measured row under a "SWE-bench Verified" caption says which of the suite's subsets it came from and
    how many rows that subset holds (read from the task set's recipe, not typed)."""
    said = measured_on(SimpleNamespace(manifest={"datasets": [{"source": source}]}))
    name = source.split(":")[0]
    assert said.startswith(f"{name} (") and says in said
    assert int(said.split("(")[1].split()[0]) > 0


def test_roles_measured_with_one_checkpoint_are_said_to_be_one_training():
    """Table 3's standard and no-bonus objectives are one recipe at a CPU profile without revision rounds: the
    registry trains it once, and the table says so instead of showing two rows as two trainings."""
    from execcritic.figures.tables import shared_checkpoints

    ck = {"spec": "hf:/r/runs/train/ckpt-ff2b/final"}
    got = shared_checkpoints({"models": {"repair_t2i_no_bonus": ck, "repair_standard": ck, "repair_base": {"spec": "local"},
                                         "repair_trained": {"spec": "hf:/r/runs/train/ckpt-94a9/final"}}})
    assert got == [("Same checkpoint: repair_standard, repair_t2i_no_bonus were measured with one trained checkpoint "
                    "(ckpt-ff2b): their training recipes are identical at this run's training profile, so their rows "
                    "are one training, not several.")]
    assert shared_checkpoints({"models": {"a": {"spec": "local"}, "b": {"spec": "local"}}}) == []
