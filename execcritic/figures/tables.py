"""One view per artifact: the paper's reported values beside the measured ones, laid out as the paper lays out
each table, and rendered as Markdown and LaTeX.

A view is built from a loaded run (or None) and the reported-numbers frame; it never computes a number
of its own beyond the difference of two reported values (labeled as such). A condition without a
measured value shows "n/r" (not run here) and a numbered note that says why (figures.reasons); a value
measured with a stand-in model sits in its own row right below the paper's row, never in the paper's cell.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import pandas as pd

from execcritic.figures.reasons import not_run, reason_parts
from execcritic.results.schemas import ArtifactSchema, Contrast, order_key, paper_part, schema, stand_in_name
from execcritic.results.stats import CI_METHODS, ContrastPair, condition_values, contrast_pairs, is_null
from execcritic.results.store import Run

PRETTY = {"test_source": "Test source", "repair_agent": "Repair agent", "objective": "Training objective",
          "teacher": "SFT teacher", "stage": "Stage", "language": "Language", "training_feedback": "Training feedback",
          "panel": "Panel", "benchmark": "Benchmark", "feedback_source": "Feedback source",
          "checkpoint": "Checkpoint", "sft_trajectories": "SFT trajectories"}
TESTS = {"mcnemar_exact": "exact McNemar", "sign_flip_exact": "exact sign-flip", "sign_flip_mc": "sign-flip (MC)"}
TEST_SHORT = {"mcnemar_exact": "McNemar", "sign_flip_exact": "sign-flip", "sign_flip_mc": "sign-flip MC"}
REPORTED_KEYS = {"table1": "table1_test_agent_base_to_gold",
                 "table2": "table2_resolved_by_repair_agent_and_test_source",
                 "table3": "table3_repair_objective_ablation", "table4": "table4_sft_teacher_comparison",
                 "table5": "table5_cross_language_base_to_gold", "table6": "table6_repair_training_feedback_source",
                 "figure5": "figure5a_gpt56_feedback", "figure6": "figure6a_sft_data_scaling"}
DASH = "—"
NR = "n/r"
NR_MEANS = "n/r: not run here; the numbered note says why."
P_TEST = ("paired on the same instances; p: exact two-sided test (McNemar for one binary run, sign-flip "
          "permutation over instances otherwise).")
DELTA_NOT_MEASURED = "Δ not measured: it needs both conditions measured on the same instances"


def fmt(v: Any, digits: int = 1) -> str:
    """A percentage as shown in every table (the paper's one decimal)."""
    return DASH if is_null(v) else f"{float(v):.{digits}f}"


def fmt_ci(lo: Any, hi: Any, digits: int = 1) -> str:
    return DASH if is_null(lo) or is_null(hi) else f"[{fmt(lo, digits)}, {fmt(hi, digits)}]"


def signed(v: Any, digits: int = 1) -> str:
    return DASH if is_null(v) else f"{float(v):+.{digits}f}".replace("-", "−")


@dataclass
class ArtifactView:
    artifact: str
    schema: ArtifactSchema
    run: Run | None
    rows: pd.DataFrame          # condition columns, metric, reported, measured, ci_*, n_*, model, measured_note
    deltas: pd.DataFrame        # metric, vary, baseline, treatment, within, reported_delta, delta, ci_*, p_value, pair
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
                            "ci_low": math.nan, "ci_high": math.nan, "ci_method": "", "n_instances": None,
                            "n_runs": None, "n_invalid": None, "n_missing": None, "model": DASH, "measured_note": ""}
        return entries[key]

    for r in rep.to_dict("records"):
        e = entry(cond_of(sch, r), r["metric"])
        e.update(reported=r["value"], reported_source=r["source"], reported_note=r["note"])
    if run is not None and run.summary is not None:
        for r in run.summary.to_dict("records"):
            cond = {c: r[c] for c in cols}
            e = entry(cond, r["metric"])
            e.update(measured=r["value"], ci_low=r["ci_low"], ci_high=r["ci_high"], ci_method=r["ci_method"],
                     n_instances=int(r["n_instances"]), n_runs=int(r["n_runs"]), n_invalid=int(r["n_invalid"]),
                     n_missing=int(r["n_missing"]), model=_models(run, cond))
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


DELTA_KEYS = ["metric", "vary", "baseline", "treatment", "within"]


def _deltas(sch: ArtifactSchema, rep: pd.DataFrame, run: Run | None) -> pd.DataFrame:
    """Measured paired deltas (deltas.csv) beside the difference of the two reported values; `pair` is the
    ContrastPair (which conditions and metrics the Δ compares)."""
    cols = list(sch.condition)
    recs = rep.to_dict("records")
    value = {(tuple(str(v) for v in cond_of(sch, r).values()), r["metric"]): r["value"] for r in recs}
    rep_conds = [dict(t) for t in dict.fromkeys(tuple(cond_of(sch, r).items()) for r in recs)]
    rep_conds = sorted(rep_conds, key=lambda c: _cond_key(sch, c))
    out: dict[tuple, dict[str, Any]] = {}
    for p in contrast_pairs(sch, rep_conds):
        a = value.get((tuple(str(p.treatment_cond[c]) for c in cols), p.treatment_metric))
        b = value.get((tuple(str(p.baseline_cond[c]) for c in cols), p.baseline_metric))
        if a is None or b is None:
            continue
        out[tuple(p.ids().values())] = {**p.ids(), "reported_delta": round(a - b, 4), "pair": p}
    measured = ({tuple(p.ids().values()): p for p in contrast_pairs(sch, condition_values(sch, run.records))}
                if run is not None and run.summary is not None else {})
    if run is not None and run.deltas is not None:
        for r in run.deltas.to_dict("records"):
            k = tuple(str(r[c]) for c in DELTA_KEYS)
            out.setdefault(k, {**{c: r[c] for c in DELTA_KEYS}, "reported_delta": math.nan,
                               "pair": measured.get(k)}).update(
                {c: r[c] for c in ("delta", "ci_low", "ci_high", "ci_method", "p_value", "test", "n_instances",
                                   "n_better", "n_worse")})
    rows = []
    for k, r in out.items():
        r.setdefault("delta", math.nan)
        r["measured_note"] = "" if k in measured else "not run here (see the rows above)"
        rows.append(r)
    return pd.DataFrame(rows, columns=[*DELTA_KEYS, "reported_delta", "delta", "ci_low", "ci_high", "ci_method",
                                       "p_value", "test", "n_instances", "n_better", "n_worse", "measured_note",
                                       "pair"])


# ---- the paper's layouts ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """How the paper lays out one artifact: which condition columns (or "metric") give the rows and which the
    column groups; every group cell holds the paper's value and the measured one side by side."""

    rows: tuple[str, ...]                       # () = a single row named `single_row`
    groups: tuple[str, ...]                     # one header level per column, outermost first
    row_header: str
    metrics: tuple[str, ...] = ()               # the metrics the paper shows (others: the detail table)
    labels: Mapping[str, Mapping[Any, str]] = field(default_factory=dict)   # display of values / metrics
    row_label: Callable[[Mapping[str, Any]], str] | None = None
    single_row: str = ""
    delta: Contrast | None = None               # a Δ (pp) beside every value, as the paper's Table 2
    value_header: str = ""                      # above the values when there is a Δ beside them
    breaks: tuple[Any, ...] = ()                # a rule after these row values (the paper's grouping)
    extra: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = ()   # label columns from the row
    pairs_as_rows: bool = False                 # paper / measured as sub-rows (a table of many columns)
    scale: float = 1.0                          # shown = stored % x scale (Figure 6a: the paper's fractions)
    digits: int = 1
    fixed: str = ""                             # what every cell holds fixed (said under the table)


def _cot(row: Mapping[str, Any]) -> str:
    m = re.search(r"\((no )?CoT\)$", str(row.get("teacher", "")))
    return DASH if not m else "No" if m.group(1) else "Yes"


def figure6_row(row: Mapping[str, Any]) -> str:
    """A Figure 6a condition in words (a table's row, a figure's n/r line)."""
    n, ck = int(row["sft_trajectories"]), row["checkpoint"]
    if ck == "teacher":
        return "Teacher (DeepSeek-V4-Flash)"
    if ck == "sft_rl":
        return f"RL from the {n / 1000:g}K SFT checkpoint"
    return "Base model (no SFT)" if n == 0 else f"SFT on {n / 1000:g}K trajectories"


_RESOLVED = {"round0_resolved_pct": "Round 0", "resolved_pct": "Final"}
LAYOUTS: dict[str, Layout] = {
    "table1": Layout(("test_source",), ("metric",), "Model", metrics=("b2g_pct",),
                     labels={"metric": {"b2g_pct": "Base→Gold (%)"}}),
    "table2": Layout(("test_source",), ("repair_agent",), "Test source", metrics=("resolved_pct",),
                     labels={"repair_agent": {"base": "Base Repair", "trained": "Trained Repair"}},
                     delta=Contrast("test_source", "None (Round 0)"), value_header="Resolved (%)",
                     breaks=("Oracle F2P",)),
    "table3": Layout(("objective",), ("metric",), "Training objective", labels={"metric": _RESOLVED},
                     fixed="Final: fixed RL-35B tests (the paper's Table 3)."),
    "table4": Layout(("teacher",), ("stage",), "SFT teacher",
                     labels={"teacher": {"GPT-5.6-sol (no CoT)": "GPT-5.6-sol",
                                         "DeepSeek-V4-Flash (CoT)": "DeepSeek-V4-Flash"},
                             "stage": {"sft": "SFT", "sft_rl": "SFT + RL"}},
                     extra=(("CoT", _cot),)),
    "table5": Layout((), ("language",), "", single_row="Success", pairs_as_rows=True),
    "table6": Layout(("training_feedback",), ("metric",), "Training feedback", labels={"metric": _RESOLVED},
                     fixed="Final: fixed RL-35B tests (the paper's Table 6)."),
    "figure5": Layout(("feedback_source",), ("panel", "repair_agent", "benchmark"), "Feedback source",
                      labels={"panel": {"a": "(a)", "b": "(b)"},
                              "repair_agent": {"GPT-5.6-sol": "GPT-5.6-sol Repair",
                                               "Qwen3.5-35B-A3B": "Qwen3.5-35B-A3B Repair"}}),
    "figure6": Layout(("checkpoint", "sft_trajectories"), ("metric",), "Test agent (Figure 6a)",
                      labels={"metric": {"b2g_pct": "Base→Gold (fraction)"}}, row_label=figure6_row,
                      scale=0.01, digits=3),
}


class Notes:
    """Numbered notes under a table: the same text always gets the same number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1

    def items(self) -> list[tuple[int, str]]:
        return list(enumerate(self.texts, 1))


@dataclass
class Cell:
    text: str = ""
    notes: tuple[int, ...] = ()
    sub: tuple[str, ...] = ()          # further lines under the value (its interval, p), smaller in LaTeX
    indent: bool = False               # a sub-row's label (stand-in, measured)


@dataclass
class Grid:
    """A table ready to render: header levels (text, span) top first, the last with one entry per column."""

    header: list[list[tuple[str, int]]]
    align: str                         # per column: l (label), r (number), w (wrapping text)
    body: list[list[Cell]]
    rules: list[int] = field(default_factory=list)      # body rows a midrule goes before
    legend: list[str] = field(default_factory=list)     # unnumbered notes (what the values are, intervals, n)
    notes: Notes = field(default_factory=Notes)


def _label(lay: Layout, col: str, value: Any, sch: ArtifactSchema) -> str:
    if col == "metric":
        return lay.labels.get("metric", {}).get(value, sch.metric(value).label)
    return lay.labels.get(col, {}).get(value, str(value))


def _stand_ins(sch: ArtifactSchema, e: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((c, n) for c in sch.condition if (n := stand_in_name(e[c])))


def stand_in_names(e: Mapping[str, Any], cols: Sequence[str]) -> str | None:
    """The stand-in model(s) that played a condition, or None for the paper's own."""
    names = list(dict.fromkeys(n for c in cols if (n := stand_in_name(e[c]))))
    return ", ".join(names) if names else None


def _key(e: Mapping[str, Any], cols: Sequence[str]) -> tuple:
    return tuple(e["metric"] if c == "metric" else paper_part(e[c]) for c in cols)


def _sort(sch: ArtifactSchema, cols: Sequence[str], keys: Sequence[tuple]) -> list[tuple]:
    metric_order = [m.name for m in sch.metrics]

    def k(key: tuple) -> tuple:
        return tuple((metric_order.index(v), 0, 0, "") if c == "metric" else order_key(tuple(sch.order.get(c, ())), v)
                     for c, v in zip(cols, key))
    return sorted(dict.fromkeys(keys), key=k)


def interval_methods(view: ArtifactView, methods: Sequence[Any]) -> str:
    """The interval methods of the values a table or figure shows, each named once (stats.CI_METHODS)."""
    st = (view.run.manifest.get("stats") or {}) if view.run is not None else {}
    used = [m for m in dict.fromkeys(methods) if isinstance(m, str) and m]
    return "; ".join(CI_METHODS.get(m, m) + (f" ({st.get('n_boot')} resamples, seed {st.get('seed')})"
                                            if m == "bootstrap_percentile" else "") for m in used)


def n_text(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """'n = 2 instances × 1 run' when every measured value has that n; None when they differ (each cell says)."""
    ns = {(int(r["n_instances"]), int(r["n_runs"])) for r in rows}
    if len(ns) != 1:
        return None
    i, k = ns.pop()
    return f"n = {i} instance{'s' * (i != 1)} × {k} run{'s' * (k != 1)}"


def _legend(view: ArtifactView, measured: Sequence[Mapping[str, Any]], lay: Layout,
            deltas: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the Paper and Measured columns are, the interval method and n - under every table."""
    unit = "fractions" if lay.scale != 1 else "percent"
    out = [(f"Paper: the values the paper reports ({unit}; `results/paper/reported_numbers.json`), never measured "
            "here.")]
    run = view.run
    if run is None:
        out.append(f"Measured: no run of {view.artifact} is shown, so there is no measured value or interval.")
    elif not measured:
        out.append(f"Measured: run `{view.artifact}/{run.run_id}` (preset {run.preset}) measured none of these "
                   "conditions, so there is no measured value, n or interval here.")
    else:
        n = n_text(measured)
        inv = sum(int(r["n_invalid"]) for r in measured)
        miss = sum(int(r["n_missing"]) for r in measured)
        methods = interval_methods(view, [r["ci_method"] for r in [*measured, *deltas]])
        out.append(f"Measured: run `{view.artifact}/{run.run_id}`, preset {run.preset}"
                   + (f", {n} for every measured value" if n else "; n (instances × runs) under each value")
                   + f". 95% intervals in brackets: {methods or 'none'}. Invalid or missing "
                   f"scores count as failures ({inv} invalid, {miss} missing here).")
        if deltas:
            out.append(f"Δ: {P_TEST}")
        out += shared_checkpoints(run.manifest)
    if lay.fixed:
        out.append(lay.fixed)
    return out


def shared_checkpoints(manifest: Mapping[str, Any]) -> list[str]:
    """Roles the run measured with one and the same trained checkpoint (the registry reuses a checkpoint whose
    recipe is the same: at a CPU profile without revision rounds, Table 3's standard and no-bonus objectives are one
    recipe) - said under the table, so two rows are not read as two trainings."""
    by: dict[str, list[str]] = {}
    for role, b in sorted((manifest.get("models") or {}).items()):
        if str(b.get("spec", "")).startswith("hf:"):
            by.setdefault(b["spec"], []).append(role)
    return [f"Same checkpoint: {', '.join(roles)} were measured with one trained checkpoint "
            f"({PurePath(spec[3:]).parent.name}): their training recipes are identical at this run's training "
            "profile, so their rows are one training, not several." for spec, roles in by.items() if len(roles) > 1]


def _value_cells(e: Mapping[str, Any] | None, lay: Layout, notes: Notes, *, paper: bool, per_cell_n: bool,
                 stand_in_at: str) -> tuple[Cell, Cell]:
    """(paper, measured) cells of one entry; a stand-in entry (paper=False) has no paper cell."""
    if e is None:
        return Cell(), Cell()
    scaled = {k: e[k] * lay.scale if not is_null(e[k]) else e[k] for k in ("reported", "measured", "ci_low", "ci_high")}
    if not paper:
        pc = Cell()
    elif is_null(e["reported"]):
        pc = Cell(DASH)
    else:
        pc = Cell(fmt(scaled["reported"], lay.digits), (notes.add(e["reported_note"]),) if e["reported_note"] else ())
    if is_null(e["measured"]):
        mc = Cell(NR, tuple(notes.add(p) for p in reason_parts(e["measured_note"], stand_in_at=stand_in_at)))
    else:
        sub = [fmt_ci(scaled["ci_low"], scaled["ci_high"], lay.digits) if not is_null(e["ci_low"]) else
               "no interval"]
        if per_cell_n:
            sub.append(f"n = {int(e['n_instances'])} × {int(e['n_runs'])}")
        mc = Cell(fmt(scaled["measured"], lay.digits), sub=tuple(sub))
    return pc, mc


def _delta_row(view: ArtifactView, ct: Contrast, cond: Mapping[str, Any], metric: str) -> dict[str, Any] | None:
    for r in view.deltas.to_dict("records"):
        p = r["pair"]
        if (p is not None and p.vary == ct.vary and p.baseline == str(ct.baseline) and p.metric == metric
                and p.treatment_cond == dict(cond)):
            return r
    return None


def _delta_cells(view: ArtifactView, e: Mapping[str, Any] | None, lay: Layout, notes: Notes, *,
                 paper: bool) -> tuple[Cell, Cell]:
    """(paper Δ, measured Δ) of one entry against the layout's baseline (the paper's Table 2: vs None)."""
    ct = lay.delta
    if e is None or ct is None:
        return Cell(), Cell()
    cond = {c: e[c] for c in view.schema.condition}
    if paper_part(cond[ct.vary]) == ct.baseline:
        return Cell(DASH if paper else ""), Cell(DASH)
    r = _delta_row(view, ct, cond, e["metric"])
    pc = Cell() if not paper else Cell(signed(r["reported_delta"]) if r is not None else DASH)
    if r is None or is_null(r["delta"]):
        return pc, Cell(NR, (notes.add(DELTA_NOT_MEASURED),))
    return pc, Cell(signed(r["delta"]), sub=(_signed_ci(r), f"p = {r['p_value']:.3g}"))


def _signed_ci(r: Mapping[str, Any]) -> str:
    return "no interval" if is_null(r["ci_low"]) else fmt_ci(r["ci_low"], r["ci_high"]).replace("-", "−")


def _role(sch: ArtifactSchema, lay: Layout, e: Mapping[str, Any], col: str) -> str:
    """The paper's role a stand-in played: 'Repair agent: base', or the row's own name ('Base model (no SFT)')."""
    if col in lay.rows and lay.row_label:
        return lay.row_label({c: paper_part(e[c]) for c in lay.rows})
    return f"{PRETTY.get(col, col)}: {paper_part(e[col])}"


def _stand_in_note(sch: ArtifactSchema, lay: Layout, entries: Sequence[Mapping[str, Any]]) -> str:
    names = list(dict.fromkeys(n for e in entries for _, n in _stand_ins(sch, e)))
    roles = list(dict.fromkeys(_role(sch, lay, e, c) for e in entries for c, _ in _stand_ins(sch, e)))
    return (f"Stand-in: measured with {', '.join(names)} playing the paper's model ({'; '.join(roles)}); not the "
            "paper's model, so not a measurement of the paper's condition, whose value is in the row above.")


def paper_table(view: ArtifactView) -> Grid:
    """The artifact's table in the paper's layout (LAYOUTS): the paper's value and the measured one (with its
    interval) side by side in every cell; stand-in measurements in their own row right below the paper's."""
    sch, lay = view.schema, LAYOUTS[view.artifact]
    notes = Notes()
    entries = [e for e in view.rows.to_dict("records") if not lay.metrics or e["metric"] in lay.metrics]
    measured = [e for e in entries if not is_null(e["measured"])]
    per_cell_n = bool(measured) and n_text(measured) is None
    row_keys = _sort(sch, lay.rows, [_key(e, lay.rows) for e in entries])
    group_keys = _sort(sch, lay.groups, [_key(e, lay.groups) for e in entries])
    cell: dict[tuple, dict[str, Any]] = {(_key(e, lay.rows), _stand_ins(sch, e), _key(e, lay.groups)): e
                                         for e in entries}
    stand_at = "the stand-in row below it" if not lay.pairs_as_rows else "the stand-in row below"

    def row_name(rk: tuple) -> str:
        if not lay.rows:
            return lay.single_row
        f = dict(zip(lay.rows, rk))
        return lay.row_label(f) if lay.row_label else ", ".join(_label(lay, c, v, sch) for c, v in f.items())

    # header: one level per group column (equal neighbours merged), then the paper / measured pair
    per_group = 1 if lay.pairs_as_rows else (4 if lay.delta else 2)
    lead = [lay.row_header] + [name for name, _ in lay.extra]
    header: list[list[tuple[str, int]]] = []
    for i, col in enumerate(lay.groups):
        level: list[tuple[str, int]] = [("", len(lead))]
        for gk in group_keys:
            text = _label(lay, col, gk[i], sch)
            prev = group_keys[group_keys.index(gk) - 1] if group_keys.index(gk) else None
            if prev is not None and prev[:i + 1] == gk[:i + 1]:
                level[-1] = (level[-1][0], level[-1][1] + per_group)
            else:
                level.append((text, per_group))
        header.append(level)
    if not lay.pairs_as_rows:
        if lay.delta:
            header.append([("", len(lead))] + [(t, 2) for _ in group_keys for t in (lay.value_header, "Δ (pp)")])
        header.append([(t, 1) for t in lead] + [(t, 1) for _ in group_keys for t in
                                                  ("Paper", "Measured") * (2 if lay.delta else 1)])
    else:
        header[-1] = [(t, 1) for t in lead] + header[-1][1:]
    align = "l" * len(lead) + "r" * (len(group_keys) * per_group)

    body: list[list[Cell]] = []
    rules: list[int] = []
    for rk in row_keys:
        fields = dict(zip(lay.rows, rk))
        in_paper = any(not is_null(e["reported"]) for (r, s, _), e in cell.items() if r == rk and not s)
        label = Cell(row_name(rk), () if in_paper else (notes.add("Not a condition of the paper: measured here "
                                                                  "only."),))
        extras = [Cell(fn(fields)) for _, fn in lay.extra]
        subs = sorted({s for (r, s, _) in cell if r == rk and s})
        paper_cells = [_value_cells(cell.get((rk, (), gk)), lay, notes, paper=True, per_cell_n=per_cell_n,
                                    stand_in_at=stand_at) for gk in group_keys]
        stand_rows = []
        for s in subs:
            mine = [cell[(rk, s, gk)] for gk in group_keys if (rk, s, gk) in cell]
            stand_rows.append((Cell("stand-in", (notes.add(_stand_in_note(sch, lay, mine)),), indent=True),
                               [_value_cells(cell.get((rk, s, gk)), lay, notes, paper=False, per_cell_n=per_cell_n,
                                             stand_in_at=stand_at) for gk in group_keys],
                               [_delta_cells(view, cell.get((rk, s, gk)), lay, notes, paper=False)
                                for gk in group_keys]))
        if lay.pairs_as_rows:
            body.append([Cell(f"{label.text}, paper", label.notes)] + extras + [p for p, _ in paper_cells])
            body.append([Cell("measured", indent=True)] + [Cell() for _ in extras] + [m for _, m in paper_cells])
            for lab, vals, _ in stand_rows:
                body.append([lab] + [Cell() for _ in extras] + [m for _, m in vals])
        else:
            deltas = [_delta_cells(view, cell.get((rk, (), gk)), lay, notes, paper=True) for gk in group_keys]
            body.append([label] + extras + [c for (p, m), (dp, dm) in zip(paper_cells, deltas)
                                            for c in ((p, m, dp, dm) if lay.delta else (p, m))])
            for lab, vals, ds in stand_rows:
                body.append([lab] + [Cell() for _ in extras] + [c for (p, m), (dp, dm) in zip(vals, ds)
                                                                for c in ((p, m, dp, dm) if lay.delta else (p, m))])
        if lay.rows and rk[0] in lay.breaks and rk != row_keys[-1]:
            rules.append(len(body))
    shown_deltas = [r for r in view.deltas.to_dict("records") if lay.delta and not is_null(r["delta"])
                    and r["vary"] == lay.delta.vary and r["baseline"] == str(lay.delta.baseline)]
    legend = _legend(view, measured, lay, shown_deltas)
    if any(c.text == NR for row in body for c in row):
        legend.append(NR_MEANS)
    return Grid(header, align, body, rules, legend, notes)


def _paper_ids(pair: ContrastPair) -> tuple:
    """A comparison's identity with every stand-in label replaced by the paper's condition it plays."""
    return (pair.metric, pair.vary, tuple((k, paper_part(v)) for k, v in pair.baseline_cond.items()),
            tuple((k, paper_part(v)) for k, v in pair.treatment_cond.items()))


def _value_text(lay: Layout, sch: ArtifactSchema, col: str, value: Any, stand: list[str]) -> str:
    """A condition value in a comparison, marked when a stand-in played it (its name goes to `stand`): a column
    header's label ("Base Repair"), a row's value in full (the teacher with its CoT)."""
    text = _label(lay, col, paper_part(value), sch) if col in lay.groups else str(paper_part(value))
    if (name := stand_in_name(value)):
        stand.append(name)
        text += " (stand-in)"
    return text


def comparison(view: ArtifactView, pair: ContrastPair, notes: Notes) -> Cell:
    """'Full T2I − T2I, no direct bonus: Round 0': treatment minus baseline, then what both hold fixed; a note
    names the stand-in model where one played a condition."""
    sch, lay = view.schema, LAYOUTS[view.artifact]
    stand: list[str] = []
    fixed = [c for c in sch.condition if c != pair.vary and len({paper_part(v) for v in view.rows[c]}) > 1]
    if pair.vary == "metric":
        head = f"{_label(lay, 'metric', pair.treatment_metric, sch)} − {_label(lay, 'metric', pair.baseline_metric, sch)}"
    else:
        head = (f"{_value_text(lay, sch, pair.vary, pair.treatment_cond[pair.vary], stand)} − "
                f"{_value_text(lay, sch, pair.vary, pair.baseline_cond[pair.vary], stand)}")
    within = [_value_text(lay, sch, c, pair.treatment_cond[c], stand) for c in fixed]
    if pair.vary != "metric" and len(lay.metrics or sch.metrics) > 1:            # the metric, where a table has two
        within.append(_label(lay, "metric", pair.metric, sch))
    marks = tuple(notes.add(f"Stand-in: measured with {n} playing the paper's model; not a measurement of the "
                            "paper's condition.") for n in dict.fromkeys(stand))
    return Cell(head + (f": {', '.join(within)}" if within else ""), marks)


def difference_table(view: ArtifactView) -> Grid | None:
    """The paired differences the paper states in its text (and the measured ones), those not in the main
    table: paper Δ (the difference of its two values) beside the measured Δ with its interval and exact p."""
    lay = LAYOUTS[view.artifact]
    rows = [r for r in view.deltas.to_dict("records") if r["pair"] is not None and not (
        lay.delta and r["vary"] == lay.delta.vary and r["baseline"] == str(lay.delta.baseline))]
    if not rows:
        return None
    # a stand-in's Δ right below the paper's Δ of the same comparison (measured-only ones stay last)
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(_paper_ids(r["pair"]), i)
    rows = [r for _, r in sorted(enumerate(rows), key=lambda t: (first[_paper_ids(t[1]["pair"])], t[0]))]
    notes = Notes()
    body = []
    for r in rows:
        label = comparison(view, r["pair"], notes)
        paper = Cell(signed(r["reported_delta"]))
        if is_null(r["delta"]):
            body.append([label, paper, Cell(NR, (notes.add(DELTA_NOT_MEASURED),)), Cell(DASH), Cell(DASH)])
            continue
        body.append([label, paper, Cell(signed(r["delta"]), sub=(_signed_ci(r),)),
                     Cell(f"{r['p_value']:.3g}", sub=(TEST_SHORT.get(r["test"], r["test"]),)),
                     Cell(str(int(r["n_instances"])), sub=(f"{int(r['n_better'])} / {int(r['n_worse'])}",))])
    shown = [r["ci_method"] for r in rows if not is_null(r["delta"])]
    legend = [("Δ in percentage points. Paper: the difference of the paper's two reported values (the paper gives "
               "no interval).")]
    if shown:
        legend.append(f"Measured: 95% interval in brackets: {interval_methods(view, shown)}; {P_TEST} "
                      "n: instances, with how many were better / worse under it.")
    if any(c.text == NR for row in body for c in row):
        legend.append(NR_MEANS)
    header = [[("Comparison", 1), ("Paper Δ", 1), ("Measured Δ", 1), ("p", 1), ("n", 1)]]
    return Grid(header, "wrrrr", body, [], legend, notes)


def detail_rows(view: ArtifactView) -> tuple[list[str], list[list[str]]]:
    """The measured rows only, in full: the condition as recorded (stand-in labels included), the model specs,
    invalid / missing counts and the interval method (the paper's values are in the table above)."""
    header, body = table_rows(view)
    drop = {"Reported (paper)", "Preset"}
    keep = [j for j, h in enumerate(header) if h not in drop]
    rows = [([body[i][j] for j in keep] + [str(r["ci_method"])])
            for i, r in enumerate(view.rows.to_dict("records")) if not is_null(r["measured"])]
    return [header[j] for j in keep] + ["Interval method"], rows


# ---- the long form (notebooks): one row per condition x metric ------------------------------------------

def _provenance(view: ArtifactView) -> list[str]:
    run = view.run
    lines = [(f"**Reported (paper)**: {view.reported_metric or view.title}. Source: `results/paper/"
             f"reported_numbers.json` (`{REPORTED_KEYS.get(view.artifact, '')}`), transcribed from the paper; "
             "values in the *Paper* columns are the paper's and are never measured here.")]
    if run is None:
        lines.append(f"**Measured (this suite)**: none. There is no run of `{view.artifact}` shown; each "
                     "condition's note says what it would take.")
        return lines
    m = run.manifest
    git = m.get("git") or {}
    sha = (git.get("sha") or "unknown")[:12] + (" (dirty)" if git.get("dirty") else "")
    if m.get("banner"):
        lines.append(f"**This run, preset `{run.preset}`**: {m['banner']}")
    lines.append(f"**Measured (this suite)**: run `{view.artifact}/{run.run_id}`, preset `{run.preset}`, on "
                 f"{measured_on(run)}: {len(run.instances)} instances x {run.runs} run(s), git `{sha}`, created "
                 f"{m.get('created_at')}. "
                 f"Command: `{m.get('command')}`.")
    return lines


VERIFIED_ROWS = 500     # SWE-bench Verified's test split


def harness_change(run: Run) -> tuple[str, str] | None:
    """(the harness digest that judged the run, this code's) when they differ; None when the run is this code's."""
    from execcritic.results.manifest import harness_digest  # lazy: hashes the harness sources

    made, now = run.manifest.get("harness_digest"), harness_digest()
    return None if made == now else (str(made), now)


def measured_on(run: Run) -> str:
    """The task sets a run measured, as a caption says them: a measured row under a "SWE-bench Verified" caption
    came from a subset (verified-sdist: the rows whose environments build here from sdists)."""
    names = sorted({str(d.get("source", "")).split(":", 1)[0] for d in run.manifest.get("datasets") or []
                    if d.get("source")})
    parts = []
    for name in names:
        if name in SUBSETS:
            module, of, which = SUBSETS[name]
            n = len(importlib.import_module(module).load_recipe().instances)
            parts.append(f"{name} ({n} of {of} instances, {which})")
        else:
            parts.append(name)
    return ", ".join(parts) or "an unrecorded task set"


#: the suite's image-free task sets, each a subset of a SWE-bench split: (module with its recipe, of what, which rows)
SUBSETS = {
    "verified-sdist": ("execcritic.tasks.sdist.recipe", f"SWE-bench Verified's {VERIFIED_ROWS}",
                       "those whose environments build here from sdists"),
    "verified-git": ("execcritic.tasks.git.recipe", f"SWE-bench Verified's {VERIFIED_ROWS}",
                     "each at its own base commit, those qualified here"),
    "multilingual-git": ("execcritic.tasks.mlgit", "SWE-bench Multilingual's 300",
                         "the C and C++ rows qualified here, each at its own base commit"),
}


def table_rows(view: ArtifactView) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the long table (notebooks; the detail table of paper_figures/)."""
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
        body.append([comp, str(r["within"]), label, signed(r["reported_delta"]),
                     signed(r["delta"]) if has else r["measured_note"],
                     fmt_ci(r["ci_low"], r["ci_high"]) if has else DASH,
                     f"{r['p_value']:.3g} ({TESTS.get(r['test'], r['test'])})" if has else DASH,
                     str(int(r["n_instances"])) if has else DASH,
                     f"{int(r['n_better'])} / {int(r['n_worse'])}" if has else DASH])
    return header, body


# ---- Markdown ------------------------------------------------------------------------------------------

def _md_text(s: str) -> str:
    """Text for Markdown outside code spans: `<x>` would be read as an HTML tag and vanish."""
    parts = str(s).split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def _sup(notes: Sequence[int]) -> str:
    return f"<sup>{','.join(map(str, notes))}</sup>" if notes else ""


def md_cell(c: Cell) -> str:
    """A cell on one line: the value, its note marks, then its interval in brackets and the rest in parentheses."""
    return (("↳ " if c.indent else "") + _md_text(c.text) + _sup(sorted(c.notes))
            + "".join(f" {_md_text(s)}" if s.startswith("[") else f" ({_md_text(s)})" for s in c.sub))


def leaf_headers(g: Grid) -> list[str]:
    """One header per column: its header levels joined (Markdown has a single header row)."""
    out = []
    for j in range(len(g.align)):
        parts = []
        for level in g.header:
            at = 0
            for text, span in level:
                if at <= j < at + span and text:
                    parts.append(text)
                at += span
        out.append(" · ".join(dict.fromkeys(parts)))
    return out


def grid_markdown(g: Grid) -> str:
    lines = [md_table(leaf_headers(g), [[md_cell(c) for c in row] for row in g.body])]
    lines += [_md_text(t) + "\n" for t in g.legend]
    lines += [f"- {_sup([n])} {_md_text(t)}" for n, t in g.notes.items()]
    return "\n".join(lines) + ("\n" if g.notes.texts else "")


def to_markdown(view: ArtifactView, extra_sections: Sequence[str] = ()) -> str:
    parts = [f"# {view.title}\n", "<!-- generated by `execcritic figures` from results/; do not edit -->\n"]
    parts += [f"{line}\n" for line in _provenance(view)]
    parts.append(grid_markdown(paper_table(view)))
    diff = difference_table(view)
    if diff is not None:
        parts.append("## Paired differences (percentage points)\n")
        parts.append(grid_markdown(diff))
    header, body = detail_rows(view)
    if body:
        parts.append("## Measured values in detail\n")
        parts.append(md_table(header, body))
    parts += list(extra_sections)
    parts += [f"{n}\n" for n in view.notes]
    return "\n".join(parts)


# ---- LaTeX ----------------------------------------------------------------------------------------------

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
        ">": r"\textgreater{}", "|": r"\textbar{}", "`": r"\`{}", "Δ": r"$\Delta$", "—": "---", "–": "--",
        "×": r"$\times$", "−": r"$-$", "→": r"$\rightarrow$", "≤": r"$\le$", "≥": r"$\ge$", "±": r"$\pm$",
        "·": r"$\cdot$", "…": r"\dots{}", "’": "'", "↳": ""}
#: what a document that \input{}s a generated table needs in its preamble
TEX_PACKAGES = ("booktabs", "array")


def tex_escape(s: str) -> str:
    """Text for LaTeX in any font encoding (OT1 included: a bare `<` would print as ¡): every special and
    every non-ASCII character spelled out; straight double quotes become opening / closing quotes."""
    out, quote = [], False
    for ch in str(s):
        if ch == '"':
            out.append(r"\textquotedblright{}" if quote else r"\textquotedblleft{}")
            quote = not quote
        elif ch in _TEX:
            out.append(_TEX[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append(f"[U+{ord(ch):04X}]")     # visible, and found by the LaTeX test
    return "".join(out)


def tex_text(s: str) -> str:
    """Prose for LaTeX: `code` spans in typewriter type, the rest escaped."""
    parts = str(s).split("`")
    if len(parts) % 2 == 0:                     # an unpaired backtick: escape it like any other character
        return tex_escape(s)
    return "".join(r"\texttt{" + tex_escape(p) + "}" if i % 2 else tex_escape(p) for i, p in enumerate(parts))


def _tex_cell(c: Cell, align: str) -> str:
    text = (r"\quad " if c.indent else "") + tex_text(c.text) + (
        r"\textsuperscript{" + ",".join(map(str, sorted(c.notes))) + "}" if c.notes else "")
    if not c.sub:
        return text
    a = "l" if align != "r" else "r"
    return (r"\begin{tabular}[t]{@{}" + a + "@{}}" + text + "".join(
        r"\\{\scriptsize " + tex_text(s) + "}" for s in c.sub) + r"\end{tabular}")


#: lines (each row with its interval lines, then the legend and notes) above which a table is set smaller and closer
#: (\\scriptsize, rows at 0.9) so it still fits one page: Table 2 with its trained stand-in rows (42 lines) ran 49 pt
#: past the page at \\footnotesize; the other tables have at most 24
LONG_TABLE_LINES = 36


def grid_latex(g: Grid, caption: str, label: str, *, wrap: str = r"0.4\linewidth") -> str:
    """A booktabs table that fits the text width: \\footnotesize values (\\scriptsize for a long one), each interval
    on a line of its own under its value, and the notes in a paragraph under the table (not in the cells)."""
    spec = "".join({"l": "l", "r": "r", "w": r">{\raggedright\arraybackslash}p{" + wrap + "}"}[a] for a in g.align)
    height = sum(1 + max((len(c.sub) for c in row), default=0) for row in g.body) + len(g.legend) + len(g.notes.texts)
    size = r"\scriptsize\renewcommand{\arraystretch}{0.9}" if height > LONG_TABLE_LINES else r"\footnotesize"
    lines = [r"\begin{table}[t]", r"\centering", f"\\caption{{{tex_text(caption)}}}", f"\\label{{{label}}}",
             size, r"\setlength{\tabcolsep}{4pt}", f"\\begin{{tabular}}{{{spec}}}", r"\toprule"]
    for i, level in enumerate(g.header):
        cells, rules, at = [], [], 1
        last = i == len(g.header) - 1
        for text, span in level:
            t = tex_text(text)
            cells.append(t if span == 1 else f"\\multicolumn{{{span}}}{{c}}{{{t}}}")
            if text and not last:
                rules.append(f"\\cmidrule(lr){{{at}-{at + span - 1}}}")
            at += span
        lines.append(" & ".join(cells) + r" \\")
        if rules:
            lines.append("".join(rules))
    lines.append(r"\midrule")
    for k, row in enumerate(g.body):
        if k in g.rules:
            lines.append(r"\midrule")
        lines.append(" & ".join(_tex_cell(c, a) for c, a in zip(row, g.align)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if g.legend or g.notes.texts:
        lines += [r"\par\smallskip", r"\begin{minipage}{\linewidth}\scriptsize\raggedright"]
        lines += [tex_text(t) + r"\par" for t in g.legend]
        lines += [r"\textsuperscript{" + str(n) + r"}\," + tex_text(t) + r"\par" for n, t in g.notes.items()]
        lines.append(r"\end{minipage}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def caption(view: ArtifactView, what: str) -> str:
    """'Resolved rates (%) ... (the paper's Table 2): <what>' - LaTeX numbers the table itself."""
    m = re.match(r"^((?:Table|Figure) \d+): (.*)$", view.title)
    return f"{m.group(2)} (the paper's {m.group(1)}): {what}" if m else f"{view.title}: {what}"


def to_latex(view: ArtifactView) -> str:
    out = ["% generated by `execcritic figures` from results/; do not edit",
           "% preamble: " + "".join(f"\\usepackage{{{p}}}" for p in TEX_PACKAGES)]
    out += ["% " + line.replace("\n", " ").replace("**", "").replace("`", "") for line in _provenance(view)]
    measured = f" on {measured_on(view.run)}" if view.run is not None else ""
    out.append(grid_latex(paper_table(view), caption(view, f"the paper's values beside this suite's measurements"
                                                            f"{measured}"),
                          f"tab:{view.artifact}-reproduction"))
    diff = difference_table(view)
    if diff is not None:
        out.append(grid_latex(diff, caption(view, "paired differences"), f"tab:{view.artifact}-deltas"))
    return "\n".join(out)


__all__ = [
    "LAYOUTS",
    "TEX_PACKAGES",
    "ArtifactView",
    "Cell",
    "Grid",
    "Layout",
    "Notes",
    "build_view",
    "caption",
    "harness_change",
    "measured_on",
    "comparison",
    "delta_rows",
    "detail_rows",
    "difference_table",
    "figure6_row",
    "fmt",
    "fmt_ci",
    "grid_latex",
    "grid_markdown",
    "interval_methods",
    "leaf_headers",
    "md_cell",
    "md_table",
    "n_text",
    "paper_table",
    "signed",
    "stand_in_names",
    "table_rows",
    "tex_escape",
    "tex_text",
    "to_latex",
    "to_markdown",
]
