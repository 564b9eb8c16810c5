"""What a notebook (and `execcritic reproduce`'s summary) shows for one run: the paper's reported values
beside the measured ones as pandas DataFrames, the run's banner, and Figures 5/6 as matplotlib Figures.
The cells are exactly those of `paper_figures/<artifact>.md` (same view, same formatting)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from execcritic.figures import validity
from execcritic.figures.build import BuildReport, training_runs
from execcritic.figures.plots import figure5, figure6
from execcritic.figures.tables import ArtifactView, build_view, delta_rows, fmt, table_rows
from execcritic.results import paper
from execcritic.results.pins import read_pins
from execcritic.results.schemas import paper_part, stand_in_name
from execcritic.results.stats import CURVE_COLUMNS, is_null
from execcritic.results.store import Run, load_run, training_curve, training_init


def view(run: Run | None, artifact: str | None = None, *, reported_path: str | Path | None = None) -> ArtifactView:
    """The run's view: one row per condition x metric, reported and measured side by side."""
    artifact = artifact or (run.artifact if run is not None else None)
    if artifact is None:
        raise ValueError("view() needs a run or an artifact name")
    return build_view(artifact, run, paper.reported(reported_path), paper.reported_notes(reported_path))


def banner(run: Run) -> str:
    """Markdown that says what this run is (preset, what it is not, models, n) before any number."""
    m = run.manifest
    sha = ((m.get("git") or {}).get("sha") or "unknown")[:12]
    lines = [f"**{run.artifact} / {run.run_id}** - preset `{run.preset}`: {m.get('banner') or m.get('title') or ''}",
             (f"{len(run.instances)} instances x {run.runs} run(s); status {m.get('status')}; git `{sha}`; "
              f"pipeline units: {m.get('units') or 'n/a'}; this run's own sessions took {m.get('wall_s', 0):.0f} s.")]
    for role, b in sorted((m.get("models") or {}).items()):
        if isinstance(b, dict):
            who = (f"played by the stand-in **{b.get('name')}**, not the paper's model" if b.get("stand_in")
                   else f"{b.get('name')}")
            lines.append(f"* `{role}`: `{b.get('spec')}` - {who}")
    dev = m.get("deviations_from_paper") or {}
    if dev:
        lines.append("Protocol deviations (recorded): " + ", ".join(f"`{k}` {v['paper']} -> {v['used']}"
                                                                    for k, v in dev.items()))
    lines.append("Values in *Reported (paper)* are the paper's; *Measured* values come from this run's records. "
                 "Rows labeled `[stand-in: ...]` were played by another model than the paper's and are not "
                 "measurements of the paper's condition.")
    return "\n\n".join(lines)


def table(run: Run | None, artifact: str | None = None) -> pd.DataFrame:
    """The artifact's table: condition columns, metric, Reported (paper), Measured, 95% CI, n, invalid /
    missing, preset, model - as in paper_figures/<artifact>.md."""
    header, body = table_rows(view(run, artifact))
    return pd.DataFrame(body, columns=header)


def deltas(run: Run | None, artifact: str | None = None) -> pd.DataFrame:
    """Paired differences: the paper's reported Δ beside the measured Δ with its CI and exact p-value."""
    header, body = delta_rows(view(run, artifact))
    return pd.DataFrame(body, columns=header)


def curve_runs(run: Run | None, results: str | Path | None = None) -> list[Run]:
    """The training runs Figure 6b/6c draws for this run: the GRPO runs its own notebook launched or reused (the
    manifest's `training_curves`, written with train=True), else the pinned ones (results.pins) under `results`."""
    root = Path(results) if results else (run.path.parents[1] if run is not None else Path("results"))
    own = (run.manifest.get("training_curves") or {}) if run is not None else {}
    mine = [load_run("training", rid, root=root) for rid in dict.fromkeys(own.values())
            if (root / "training" / rid / "manifest.json").is_file()]
    if mine:
        return mine
    return training_runs(root, BuildReport(root)) if (root / "index.csv").is_file() else []


def figure(run: Run | None, artifact: str | None = None, *, results: str | Path | None = None) -> Figure:
    """Figure 5 or 6 for this run (Figure 6 adds its training runs: `curve_runs`)."""
    v = view(run, artifact)
    if v.artifact == "figure5":
        return figure5(v)
    if v.artifact == "figure6":
        return figure6(v, curve_runs(run, results))
    raise ValueError(f"{v.artifact} is a table, not a figure")


def harness_validity(run: Run | None = None, *, results: str | Path | None = None) -> pd.DataFrame:
    """Table 5's harness validity per language (`figures/validity.py`): the committed Oracle-bundle audits under
    `results`, else under the run's results root when it has them, else under ./results."""
    if results is None:
        results = Path("results")
        if run is not None and any((run.path.parents[1] / s.records).is_file() for s in validity.SOURCES):
            results = run.path.parents[1]
    return validity.harness_validity(results)


#: per-step columns shown beside the curve points when a run has them (costs: `results/training/README.md`)
CURVE_EXTRA = ("kept_groups", "dropped_groups", "masked_share", "episodes", "rollout_s", "optimizer_s", "wall_s",
               "peak_rss_mb")


def training_curves(run: Run | None = None, *, results: str | Path | None = None) -> pd.DataFrame:
    """Figure 6b/6c's points as a table: one row per training run x GRPO step (`training_curve`: the mean reward
    over every offered rollout, n, its 95% interval, the kept mean, whether the step trained), with the run's label (e.g. CPU smoke run) and its measured per-step costs."""
    runs = curve_runs(run, results)
    frames = []
    for r in runs:
        c = training_curve(r)
        extra = r.records.sort_values("step").reset_index(drop=True)
        for col in CURVE_EXTRA:
            if col in extra.columns:
                c[col] = extra[col].to_numpy()
        c.insert(0, "init", training_init(r.manifest))
        c.insert(0, "role", r.manifest["role"])
        c.insert(0, "label", str(r.manifest.get("label") or f"preset {r.preset}"))
        c.insert(0, "run", f"training/{r.run_id}")
        frames.append(c)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["run", "label", "role", "init", *CURVE_COLUMNS])


def png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (a notebook shows them with IPython.display.Image)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def measured_rows(run: Run) -> list[dict[str, Any]]:
    """Every measured row of a run with the paper's value beside it: for a paper condition its own
    reported value; for a stand-in row (`stand_in` names the model) the value the paper reports for the
    condition it stands in for - a different model, which `reported_for` says."""
    v = view(run)
    cols = list(v.schema.condition)
    rep = {(tuple(str(r[c]) for c in cols), r["metric"]): r["reported"] for r in v.rows.to_dict("records")
           if not is_null(r["reported"])}
    out = []
    for r in v.rows.to_dict("records"):
        if is_null(r["measured"]):
            continue
        base = tuple(str(paper_part(r[c])) for c in cols)
        reported = r["reported"] if not is_null(r["reported"]) else rep.get((base, r["metric"]))
        stand = list(dict.fromkeys(n for c in cols if (n := stand_in_name(r[c]))))
        out.append({"artifact": run.artifact, "condition": " / ".join(base), "stand_in": ", ".join(stand),
                    "metric": r["metric_label"], "measured": fmt(r["measured"]),
                    "ci": f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
                    "n": f"{int(r['n_instances'])} x {int(r['n_runs'])}", "preset": run.preset,
                    "reported": fmt(reported) if reported is not None and not is_null(reported) else "—",
                    "reported_for": ("not in the paper" if reported is None or is_null(reported) else
                                     "the paper's own model (not the stand-in)" if stand else "the same condition")})
    return out


def shown_runs(results: str | Path, artifacts: Sequence[str]) -> dict[str, Run | None]:
    """The run of each artifact that paper_figures/ shows: the one `results/paper_runs.json` pins (None where
    none is pinned)."""
    pins = read_pins(results)["runs"]
    return {a: load_run(a, pins[a], root=results) if a in pins else None for a in artifacts}


__all__ = [
    "CURVE_EXTRA",
    "banner",
    "curve_runs",
    "deltas",
    "figure",
    "measured_rows",
    "png",
    "shown_runs",
    "table",
    "training_curves",
    "view",
]
