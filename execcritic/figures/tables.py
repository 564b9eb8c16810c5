"""One view per artifact: the paper's reported values beside the measured ones, and their rendering as
Markdown and LaTeX.

A view is built from a loaded run (or None) and the reported-numbers frame; it never computes a number
of its own beyond the difference of two reported values (labeled as such). A condition without a
measured value says "not run here: <reason>" (figures.reasons).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from execcritic.figures.reasons import not_run
from execcritic.results.schemas import ArtifactSchema, order_key, paper_part, schema
from execcritic.results.stats import CI_METHODS, condition_values, contrast_pairs, is_null
from execcritic.results.store import Run

PRETTY = {"test_source": "Test source", "repair_agent": "Repair agent", "objective": "Training objective",
          "teacher": "SFT teacher", "stage": "Stage", "language": "Language", "training_feedback": "Training feedback",
          "panel": "Panel", "benchmark": "Benchmark", "feedback_source": "Feedback source",
          "checkpoint": "Checkpoint", "sft_trajectories": "SFT trajectories"}
TESTS = {"mcnemar_exact": "exact McNemar", "sign_flip_exact": "exact sign-flip", "sign_flip_mc": "sign-flip (MC)"}
REPORTED_KEYS = {"table1": "table1_test_agent_base_to_gold",
                 "table2": "table2_resolved_by_repair_agent_and_test_source",
                 "table3": "table3_repair_objective_ablation", "table4": "table4_sft_teacher_comparison",
                 "table5": "table5_cross_language_base_to_gold", "table6": "table6_repair_training_feedback_source",
                 "figure5": "figure5a_gpt56_feedback", "figure6": "figure6a_sft_data_scaling"}
DASH = "—"


def fmt(v: Any, digits: int = 1) -> str:
    """A percentage as shown in every table (the paper's one decimal)."""
    return DASH if is_null(v) else f"{float(v):.{digits}f}"


def fmt_ci(lo: Any, hi: Any) -> str:
    return DASH if is_null(lo) or is_null(hi) else f"[{fmt(lo)}, {fmt(hi)}]"


@dataclass
class ArtifactView:
    artifact: str
    schema: ArtifactSchema
    run: Run | None
    rows: pd.DataFrame          # condition columns, metric, reported, measured, ci_low, ci_high, n_*, model, measured_note
    deltas: pd.DataFrame        # metric, vary, baseline, treatment, within, reported_delta, delta, ci_*, p_value, test, n_*
    reported_metric: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.schema.title


def _models(run: Run, cond: dict[str, Any]) -> str:
    recs = run.records
    for c, v in cond.items():
        recs = recs[recs[c] == v]
    parts = []
    for col, label in (("model", "test"), ("test_model", "test"), ("repair_model", "repair")):
        if col in recs and recs[col].notna().any():
            vals = sorted({str(x) for x in recs[col].dropna()})
            parts.append(f"{label}: {', '.join(vals)}")
    return "; ".join(parts) or DASH


def cond_of(sch: ArtifactSchema, r: dict[str, Any]) -> dict[str, Any]:
    """A row's condition columns, typed as the schema says (the wide reported frame holds ints as floats)."""
    return {c: int(r[c]) if sch.column(c).dtype == "int" else r[c] for c in sch.condition}


def _cond_key(sch: ArtifactSchema, cond: dict[str, Any]) -> tuple:
    return tuple(order_key(tuple(sch.order.get(c, ())), cond[c]) for c in sch.condition)


def build_view(artifact: str, run: Run | None, reported: pd.DataFrame, notes: dict[str, str] | None = None) -> ArtifactView:
    """Reported and measured values of one artifact, row by row (condition x metric), in the paper's order."""
    sch = schema(artifact)
    cols = list(sch.condition)
    rep = reported[reported["artifact"] == artifact]
    metric_order = [m.name for m in sch.metrics]
    entries: dict[tuple, dict[str, Any]] = {}

    def entry(cond: dict[str, Any], metric: str) -> dict[str, Any]:
        key = (tuple(str(cond[c]) for c in cols), metric)
        if key not in entries:
            entries[key] = {**cond, "metric": metric, "metric_label": sch.metric(metric).label,
                            "reported": math.nan, "reported_source": "", "reported_note": "", "measured": math.nan,
                            "ci_low": math.nan, "ci_high": math.nan, "n_instances": None, "n_runs": None,
                            "n_invalid": None, "n_missing": None, "model": DASH, "measured_note": ""}
        return entries[key]

    for r in rep.to_dict("records"):
        e = entry(cond_of(sch, r), r["metric"])
        e.update(reported=r["value"], reported_source=r["source"], reported_note=r["note"])
    if run is not None and run.summary is not None:
        for r in run.summary.to_dict("records"):
            cond = {c: r[c] for c in cols}
            e = entry(cond, r["metric"])
            e.update(measured=r["value"], ci_low=r["ci_low"], ci_high=r["ci_high"], n_instances=int(r["n_instances"]),
                     n_runs=int(r["n_runs"]), n_invalid=int(r["n_invalid"]), n_missing=int(r["n_missing"]),
                     model=_models(run, cond))
    # a run may say why it left a paper condition out (its preset binds no model to that role, the
    # training entry point is missing...); otherwise the registry's general reason
    why = dict((run.manifest.get("not_run") or {}) if run is not None else {})
    for e in entries.values():
        if is_null(e["measured"]):
            fields = {c: e[c] for c in cols}
            own = why.get(sch.condition_label(fields))
            e["measured_note"] = f"not run here: {own}" if own else not_run(fields)
        elif is_null(e["reported"]):
            base = {c: paper_part(e[c]) for c in cols}
            ref = entries.get((tuple(str(base[c]) for c in cols), e["metric"]))
            if base != {c: e[c] for c in cols} and ref is not None and not is_null(ref["reported"]):
                e["reported_note"] = (f"stand-in row; the paper reports {fmt(ref['reported'])} for "
                                      f"{sch.condition_label(base)} with its own model")
            else:
                e["reported_note"] = "not in the paper"
    ordered = sorted(entries.values(), key=lambda e: (_cond_key(sch, e), metric_order.index(e["metric"])))
    rows = pd.DataFrame(ordered)
    return ArtifactView(artifact, sch, run, rows, _deltas(sch, rep, run), notes=[],
                        reported_metric=(notes or {}).get(REPORTED_KEYS.get(artifact, ""), ""))


def _deltas(sch: ArtifactSchema, rep: pd.DataFrame, run: Run | None) -> pd.DataFrame:
    """Measured paired deltas (deltas.csv) beside the difference of the two reported values."""
    cols = list(sch.condition)
    recs = rep.to_dict("records")
    value = {(tuple(str(v) for v in cond_of(sch, r).values()), r["metric"]): r["value"] for r in recs}
    rep_conds = [dict(t) for t in dict.fromkeys(tuple(cond_of(sch, r).items()) for r in recs)]
    rep_conds = sorted(rep_conds, key=lambda c: _cond_key(sch, c))
    keys = ["metric", "vary", "baseline", "treatment", "within"]
    out: dict[tuple, dict[str, Any]] = {}
    for p in contrast_pairs(sch, rep_conds):
        a = value.get((tuple(str(p.treatment_cond[c]) for c in cols), p.treatment_metric))
        b = value.get((tuple(str(p.baseline_cond[c]) for c in cols), p.baseline_metric))
        if a is None or b is None:
            continue
        out[tuple(p.ids().values())] = {**p.ids(), "reported_delta": round(a - b, 4)}
    if run is not None and run.deltas is not None:
        for r in run.deltas.to_dict("records"):
            k = tuple(str(r[c]) for c in keys)
            out.setdefault(k, {**{c: r[c] for c in keys}, "reported_delta": math.nan}).update(
                {c: r[c] for c in ("delta", "ci_low", "ci_high", "p_value", "test", "n_instances", "n_better",
                                   "n_worse")})
    if run is not None and run.summary is not None:
        measured_pairs = {tuple(p.ids().values())
                          for p in contrast_pairs(sch, condition_values(sch, run.records))}
    else:
        measured_pairs = set()
    rows = []
    for k, r in out.items():
        r.setdefault("delta", math.nan)
        r["measured_note"] = "" if k in measured_pairs else "not run here (see the rows above)"
        rows.append(r)
    return pd.DataFrame(rows, columns=[*keys, "reported_delta", "delta", "ci_low", "ci_high", "p_value", "test",
                                       "n_instances", "n_better", "n_worse", "measured_note"])


# ---- rendering -----------------------------------------------------------------------------------------

def _provenance(view: ArtifactView) -> list[str]:
    run = view.run
    lines = [(f"**Reported (paper)**: {view.reported_metric or view.title}. Source: `results/paper/"
             f"reported_numbers.json` (`{REPORTED_KEYS.get(view.artifact, '')}`), transcribed from the paper; "
             "values in the *Reported* columns are the paper's and are never measured here.")]
    if run is None:
        lines.append(f"**Measured (this suite)**: none. There is no complete run of `{view.artifact}` under "
                     "`results/`; each row says what it would take.")
        return lines
    m = run.manifest
    git = m.get("git") or {}
    sha = (git.get("sha") or "unknown")[:12] + (" (dirty)" if git.get("dirty") else "")
    st = m.get("stats") or {}
    if m.get("banner"):
        lines.append(f"**This run, preset `{run.preset}`**: {m['banner']}")
    lines.append(f"**Measured (this suite)**: run `{view.artifact}/{run.run_id}`, preset `{run.preset}`, "
                 f"{len(run.instances)} instances x {run.runs} run(s), git `{sha}`, created {m.get('created_at')}. "
                 f"Command: `{m.get('command')}`.")
    used = sorted(set(run.summary["ci_method"]) | set(run.deltas["ci_method"] if run.deltas is not None else ())) \
        if run.summary is not None and "ci_method" in run.summary else []
    methods = "; ".join(f"{CI_METHODS[m]}" + (f" ({st.get('n_boot')} resamples, seed {st.get('seed')})"
                                              if m == "bootstrap_percentile" else "") for m in used)
    lines.append(f"95% intervals: {methods or 'none'}. Every instance is in the denominator; invalid and missing "
                 "scores count as failures and are also listed.")
    return lines


def table_rows(view: ArtifactView) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the main table (shared by Markdown and LaTeX)."""
    cols = list(view.schema.condition)
    header = [PRETTY.get(c, c) for c in cols] + ["Metric", "Reported (paper)", "Measured", "Measured 95% CI",
                                                 "n (instances x runs)", "Invalid / missing", "Preset",
                                                 "Model (measured)"]
    body = []
    for r in view.rows.to_dict("records"):
        measured = r["measured_note"] if is_null(r["measured"]) else fmt(r["measured"])
        reported = fmt(r["reported"]) if not is_null(r["reported"]) else f"{DASH} ({r['reported_note']})"
        if not is_null(r["reported"]) and r["reported_note"]:
            reported += " (approx.)"
        has = not is_null(r["measured"])
        body.append([str(r[c]) for c in cols] + [
            r["metric_label"], reported, measured, fmt_ci(r["ci_low"], r["ci_high"]) if has else DASH,
            f"{int(r['n_instances'])} x {int(r['n_runs'])}" if has else DASH,
            f"{int(r['n_invalid'])} / {int(r['n_missing'])}" if has else DASH,
            view.run.preset if has and view.run else DASH, r["model"] if has else DASH])
    return header, body


def delta_rows(view: ArtifactView) -> tuple[list[str], list[list[str]]]:
    header = ["Comparison", "Within", "Metric", "Reported Δ (paper values, pp)", "Measured Δ (pp)",
              "Measured 95% CI", "p (test)", "n", "Better / worse"]
    body = []
    for r in view.deltas.to_dict("records"):
        has = not is_null(r["delta"])
        label = view.schema.metric(r["metric"]).label
        comp = (f"{r['treatment']} vs {r['baseline']}" if r["vary"] != "metric" else
                f"{view.schema.metric(r['treatment']).label} vs {view.schema.metric(r['baseline']).label}")
        body.append([comp, str(r["within"]), label, _signed(r["reported_delta"]),
                     _signed(r["delta"]) if has else r["measured_note"],
                     fmt_ci(r["ci_low"], r["ci_high"]) if has else DASH,
                     f"{r['p_value']:.3g} ({TESTS.get(r['test'], r['test'])})" if has else DASH,
                     str(int(r["n_instances"])) if has else DASH,
                     f"{int(r['n_better'])} / {int(r['n_worse'])}" if has else DASH])
    return header, body


def _signed(v: Any) -> str:
    return DASH if is_null(v) else f"{float(v):+.1f}"


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def to_markdown(view: ArtifactView, extra_sections: Sequence[str] = ()) -> str:
    parts = [f"# {view.title}\n", "<!-- generated by `execcritic figures` from results/; do not edit -->\n"]
    parts += [f"{line}\n" for line in _provenance(view)]
    parts.append(md_table(*table_rows(view)))
    if not view.deltas.empty:
        parts.append("## Paired differences (percentage points)\n")
        parts.append("Measured Δ: paired on the same instances, with the interval named above; p-value exact "
                     "(McNemar for one binary run, sign-flip permutation over instances otherwise). Reported Δ: "
                     "the difference of the two reported values (the paper reports no interval).\n")
        parts.append(md_table(*delta_rows(view)))
    parts += list(extra_sections)
    parts += [f"{n}\n" for n in view.notes]
    return "\n".join(parts)


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "Δ": r"$\Delta$", "—": "---",
        "×": r"$\times$"}


def tex_escape(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(s))


WRAP = {"Measured": "p{4.2cm}", "Model (measured)": "p{2.8cm}", "Measured Δ (pp)": "p{3cm}"}


def tex_table(header: Sequence[str], body: Sequence[Sequence[str]], caption: str, label: str) -> str:
    """A plain tabular (no packages needed); the columns that hold reasons or model specs wrap."""
    spec = "".join(WRAP.get(h, "l") for h in header)
    lines = [r"\begin{table}[t]", r"\centering", r"\scriptsize", f"\\caption{{{tex_escape(caption)}}}",
             f"\\label{{{label}}}", f"\\begin{{tabular}}{{{spec}}}", r"\hline",
             " & ".join(tex_escape(h) for h in header) + r" \\", r"\hline"]
    lines += [" & ".join(tex_escape(c) for c in row) + r" \\" for row in body]
    lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_latex(view: ArtifactView) -> str:
    out = ["% generated by `execcritic figures` from results/; do not edit"]
    out += ["% " + line.replace("\n", " ").replace("**", "").replace("`", "") for line in _provenance(view)]
    out.append(tex_table(*table_rows(view), caption=f"{view.title} (reported: the paper; measured: this suite)",
                         label=f"tab:{view.artifact}-reproduction"))
    if not view.deltas.empty:
        out.append(tex_table(*delta_rows(view), caption=f"{view.title}: paired differences (pp)",
                             label=f"tab:{view.artifact}-deltas"))
    return "\n".join(out)


__all__ = ["ArtifactView", "build_view", "delta_rows", "fmt", "fmt_ci", "md_table", "table_rows", "tex_escape",
           "to_latex", "to_markdown"]
