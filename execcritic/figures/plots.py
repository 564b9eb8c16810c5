"""Figures 5 and 6 as matplotlib Figures (Figure objects, never pyplot: no global state, no GUI backend), reported beside measured.

The builders return the Figure so tests can read bar heights and line data before anything is saved;
`save` writes PNG and PDF without timestamps or software tags, so the same inputs give the same bytes.
Every artist that carries a value has a gid `<kind>|<panel>|<condition...>` (kind: reported | measured).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from execcritic.figures.reasons import not_run_curve
from execcritic.figures.tables import ArtifactView
from execcritic.results.schemas import paper_part, stand_in_name
from execcritic.results.stats import is_null
from execcritic.results.store import Run, training_curve, training_init

RC = {"font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
      "legend.fontsize": 7.5, "xtick.labelsize": 8, "ytick.labelsize": 8, "svg.hashsalt": "execcritic",
      "axes.spines.top": False, "axes.spines.right": False}
REPORTED_STYLE = {"facecolor": "#d9d9d9", "edgecolor": "#555555", "hatch": "///", "linewidth": 0.6}
MEASURED_COLOR = "#1f5fa8"
STAND_IN_COLOR = "#d95f02"          # measured with another model in the paper's role (smoke, ci)
QUALITATIVE = {"b": "reported (paper, qualitative only): reward stays low\nand oscillates from Base, rises steadily\n"
                    "from the SFT checkpoint (axis about 0.15-0.75)",
               "c": "reported (paper, qualitative only): Repair training\nreward increases overall (axis about 0.2-0.8)"}


def _footnote_lines(lines: Sequence[str], width: int) -> list[str]:
    return [w for line in dict.fromkeys(lines) for w in textwrap.wrap(line, width)]


def _footnote(fig: Figure, lines: Sequence[str], width: int = 220) -> None:
    text = "\n".join(_footnote_lines(lines, width))
    if text:
        fig.text(0.01, 0.01, text, fontsize=6.5, va="bottom", ha="left", color="#333333")


def _layout(fig: Figure, *, axes_h: float, below_h: float, top_h: float, notes: int, **kw: float) -> None:
    """Size the figure so the axes keep their height whatever the number of footnote lines (inches)."""
    note_h = 0.12 * notes + (0.1 if notes else 0.0)
    total = axes_h + below_h + top_h + note_h
    fig.set_figheight(total)
    fig.subplots_adjust(bottom=(below_h + note_h) / total, top=1 - top_h / total, **kw)


def _measured_label(view: ArtifactView) -> str:
    run = view.run
    if run is None or view.rows["measured"].isna().all():
        return "measured (this suite): not run here"
    return f"measured (this suite): preset {run.preset}, n={len(run.instances)} x {run.runs} run(s), 95% CI"


def _stand_in(row: dict[str, Any], cols: Sequence[str]) -> str | None:
    names = list(dict.fromkeys(n for c in cols if (n := stand_in_name(row[c]))))
    return ", ".join(names) if names else None


def _wrap(s: str, width: int = 12) -> str:
    return "\n".join(textwrap.wrap(s, width)) or s


def figure5(view: ArtifactView) -> Figure:
    """(a) GPT-5.6-sol Repair on Verified and Pro, (b) Qwen Repair on Verified: resolved % by feedback
    source; hatched gray = reported by the paper, blue = measured here (with its CI), orange = measured
    with a stand-in model in the role (its own group, never beside the paper's bar)."""
    rows = view.rows.to_dict("records")
    cols = list(view.schema.condition)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(12, 4.8))
        slots = [sum(r["panel"] == pn for r in rows)
                 + 0.6 * len({(r["benchmark"], r["repair_agent"]) for r in rows if r["panel"] == pn}) for pn in "ab"]
        axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [max(v, 3.0) for v in slots]})
        missing: list[tuple[str, str]] = []
        stand_names: list[str] = []
        for ax, panel in zip(axes, ("a", "b")):
            prow = [r for r in rows if r["panel"] == panel]
            benches = list(dict.fromkeys(r["benchmark"] for r in prow))
            agent = next((r["repair_agent"] for r in prow if not stand_in_name(r["repair_agent"])),
                         paper_part(prow[0]["repair_agent"]) if prow else "")
            clusters = list(dict.fromkeys((r["benchmark"], r["repair_agent"]) for r in prow))
            x, ticks, labels, w = 0.0, [], [], 0.38
            for bench, cagent in clusters:
                start = x
                standin = stand_in_name(cagent) or next(
                    (n for r in prow if (r["benchmark"], r["repair_agent"]) == (bench, cagent)
                     and (n := _stand_in(r, cols))), None)
                for r in (r for r in prow if (r["benchmark"], r["repair_agent"]) == (bench, cagent)):
                    fs = r["feedback_source"]
                    ident = f"{panel}|{bench}|{r['repair_agent']}|{fs}"
                    who = _stand_in(r, cols)
                    if not is_null(r["reported"]):
                        (bar,) = ax.bar(x - w / 2, r["reported"], w, **REPORTED_STYLE)
                        bar.set_gid(f"reported|{ident}")
                        ax.text(x - w / 2, r["reported"] + 1, fmt1(r["reported"]), ha="center", va="bottom",
                                fontsize=6.5)
                    mx = x if who else x + w / 2
                    color = STAND_IN_COLOR if who else MEASURED_COLOR
                    if not is_null(r["measured"]):
                        err = [[r["measured"] - r["ci_low"]], [r["ci_high"] - r["measured"]]]
                        (bar,) = ax.bar(mx, r["measured"], w, color=color, yerr=err, capsize=2,
                                        error_kw={"linewidth": 0.8})
                        bar.set_gid(f"measured|{ident}")
                        ax.text(mx, r["ci_high"] + 1, fmt1(r["measured"]), ha="center", va="bottom",
                                fontsize=6.5, color=color)
                        if r["measured"] == 0:          # a measured zero stays visible (a bar of height 0 is not)
                            ax.plot([mx - w / 2, mx + w / 2], [0, 0], color=color, linewidth=3, clip_on=False,
                                    solid_capstyle="butt")
                        if who:
                            stand_names += who.split(", ")
                    else:
                        ax.text(mx, 2, "not run here", rotation=90, ha="center", va="bottom", fontsize=6,
                                color="#777777")
                        missing.append((f"({panel}) {bench}: {paper_part(fs)}", r["measured_note"]))
                    ticks.append(x)
                    labels.append(_wrap(str(paper_part(fs)), 10))
                    x += 1.0
                group = []
                if len(benches) > 1:
                    group.append(bench)
                if standin:
                    group.append(f"stand-in: {standin}")
                elif len(clusters) > len(benches):
                    group.append(f"paper: {paper_part(cagent)}")
                if group:
                    ax.text((start + x - 1) / 2, -0.17, _wrap(" - ".join(group), 40), transform=ax.get_xaxis_transform(),
                            ha="center", va="top", fontsize=7.5, fontweight="bold",
                            color=STAND_IN_COLOR if standin else "black")
                x += 0.6
            ax.set_xticks(ticks, labels)
            ax.set_xlim(-0.8, max(x - 0.6 - 0.2, 0.8))
            ax.set_ylim(0, 112)                     # headroom: value labels sit above bars and CI caps
            ax.set_yticks(range(0, 101, 20))
            ax.set_ylabel("Resolved (%)")
            where = "" if len(benches) > 1 else f", {benches[0]}" if benches else ""
            ax.set_title(f"({panel}) {paper_part(agent)} Repair agent{where}")
            ax.grid(axis="y", linewidth=0.3, alpha=0.6)
        handles = [Patch(**REPORTED_STYLE, label="reported (paper)"),
                   Patch(color=MEASURED_COLOR, label=_measured_label(view))]
        if stand_names:
            own = any(not is_null(r["measured"]) and not _stand_in(r, cols) for r in rows)
            handles[1] = Patch(color=MEASURED_COLOR, label=(
                _measured_label(view) + ", the paper's model" if own else "measured, the paper's model: not run here"))
            handles.append(Patch(color=STAND_IN_COLOR, label=(
                f"measured with a stand-in in the paper's role, not the paper's model "
                f"({'; '.join(dict.fromkeys(stand_names))}): preset {view.run.preset}, n={len(view.run.instances)} x "
                f"{view.run.runs} run(s), 95% CI")))
        fig.legend(handles=handles, loc="upper center", ncol=2 if len(handles) == 2 else 1, frameon=False,
                   bbox_to_anchor=(0.5, 1.0), fontsize=7)
        lines = _banner(view) + _reason_lines(missing)
        width = 230
        _layout(fig, axes_h=3.2, below_h=0.85, top_h=0.45 + 0.15 * len(handles), notes=len(_footnote_lines(lines, width)),
                left=0.06, right=0.99, wspace=0.12)
        _footnote(fig, lines, width)
    return fig


def _banner(view: ArtifactView) -> list[str]:
    """What the measured values are (the run's preset banner), first in the footnote."""
    run = view.run
    if run is None or view.rows["measured"].isna().all() or not run.manifest.get("banner"):
        return []
    return [f"Measured values: preset {run.preset}, run {run.run_id}. {run.manifest['banner']}"]


def _short(note: str) -> str:
    """A reason as a figure footnote says it: without the table's pointer to the stand-in row."""
    reason = re.sub(r" \(needs `[^`]*`\)", "", note.removeprefix("not run here: "))
    if "; measured here with a stand-in instead" in reason:
        reason = reason.split("; measured here with a stand-in instead")[0] + "; measured with a stand-in instead (orange)"
    return reason


def _reason_lines(missing: Sequence[tuple[str, str]]) -> list[str]:
    """One footnote line per reason: 'Not run here: <reason>. <conditions>' (conditions sharing a
    prefix such as '(a) SWE-bench Pro: ' are listed once under it)."""
    by_reason: dict[str, dict[str, list[str]]] = {}
    for cond, note in missing:
        reason = _short(note)
        head, _, tail = cond.partition(": ")
        by_reason.setdefault(reason, {}).setdefault(head, []).append(tail)
    out = []
    for reason, groups in by_reason.items():
        conds = "; ".join(f"{h}: {', '.join(t for t in tails if t)}" if any(tails) else h
                          for h, tails in groups.items())
        out.append(f"Not run here: {reason}. [{conds}]")
    return out


def fmt1(v: Any) -> str:
    return f"{float(v):.1f}"


def _curve_label(run: Run) -> str:
    """Legend text of a measured curve: what run it is (its own label, e.g. 'CPU smoke run (...)') and its init."""
    what = str(run.manifest.get("label") or f"preset {run.preset}")
    return f"measured, {what}: from {training_init(run.manifest)} ({run.run_id})"


def _curve_panel(ax, runs: Sequence[Run], role: str, panel: str, xmax: int, ylim: tuple[float, float],
                 inits: Sequence[str], title: str, missing: list[tuple[str, str]]) -> None:
    """A panel of Figure 6b/6c: each training run's mean reward per GRPO step (`training_curve`: over the kept
    rollouts; a step without a kept group shows the offered rollouts' reward as a hollow marker), +/-1 sd band,
    and the paper's reported description beside them (the paper gives these curves only qualitatively)."""
    mine = [r for r in runs if r.manifest.get("role") == role]
    offered_any = banded = False
    for run in sorted(mine, key=lambda r: (training_init(r.manifest), r.run_id)):
        c = training_curve(run)
        init = training_init(run.manifest)
        (line,) = ax.plot(c["step"], c["reward"], linewidth=1.2, marker="o", markersize=4,
                          label=_curve_label(run))
        line.set_gid(f"measured|{panel}|{init}|{run.run_id}")
        color = line.get_color()
        hollow = c[c["over"] == "offered"]
        if len(hollow):
            offered_any = True
            (pts,) = ax.plot(hollow["step"], hollow["reward"], linestyle="none", marker="o", markersize=6,
                             markerfacecolor="white", markeredgecolor=color, zorder=3)
            pts.set_gid(f"measured-offered|{panel}|{init}|{run.run_id}")
        band = c.dropna(subset=["reward", "reward_sd"])
        if len(band):
            banded = True
            ax.fill_between(band["step"], band["reward"] - band["reward_sd"], band["reward"] + band["reward_sd"],
                            alpha=0.15, color=color, linewidth=0)
    have = {training_init(r.manifest) for r in mine}
    for init in inits:
        if init not in have:
            missing.append((f"({panel}) {role} RL from {init}", f"{not_run_curve(role, init)} (no complete run with "
                            f"role {role}, init {init} under results/training/)"))
    reported = ax.text(0.5, 0.40 if not mine else 0.97, QUALITATIVE[panel], transform=ax.transAxes, ha="center", va="center" if not mine else "top",
                       fontsize=7 if not mine else 6.5, color="#333333", style="italic")
    reported.set_gid(f"reported|{panel}|qualitative")
    if not mine:
        ax.set_xlim(0, xmax)
        ax.set_ylim(*ylim)
        ax.text(0.5, 0.62, "measured: not run here", transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color="#777777")
    else:
        values = [v for r in mine for v in training_curve(r)["reward"].dropna()]
        lo, hi = min([ylim[0], *values]) - 0.1, max([ylim[1], *values]) + 0.1
        ax.set_ylim(lo, hi + 0.45 * (hi - lo))    # the paper's axis range, the measured points, and room above
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        handles = ax.get_legend_handles_labels()[0]
        if banded:
            handles.append(Patch(facecolor="#999999", alpha=0.3, label="band: +/-1 sd across the step's rollouts"))
        if offered_any:
            handles.append(Line2D([], [], linestyle="none", marker="o", markersize=6, markerfacecolor="white",
                                  markeredgecolor="#555555", label="hollow: no group kept; mean of the offered "
                                  "rollouts (trained nothing)"))
        for h in handles:
            h.set_label(textwrap.fill(h.get_label(), 62))
        ax.legend(handles=handles, loc="center", frameon=False, fontsize=6.0)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean training reward")
    ax.set_title(title)
    ax.grid(linewidth=0.3, alpha=0.6)


def figure6(view: ArtifactView, training: Sequence[Run]) -> Figure:
    """(a) Test-agent Base-to-Gold vs SFT data size (teacher line, RL-from-5K point), (b) Test RL reward
    from Base and from SFT, (c) Repair RL reward. Reported values are the paper's approximations."""
    rows = view.rows.to_dict("records")
    missing: list[tuple[str, str]] = []
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(13, 5.4))
        ax, bx, cx = fig.subplots(1, 3)
        for kind, color, style in (("reported", "#888888", "--"), ("measured", MEASURED_COLOR, "-")):
            sft = sorted((r for r in rows if r["checkpoint"] == "sft" and not is_null(r[kind])),
                         key=lambda r: r["sft_trajectories"])
            xs, ys = [r["sft_trajectories"] for r in sft], [r[kind] for r in sft]
            if sft:
                lab = "SFT checkpoints, reported (paper, approx.)" if kind == "reported" else "SFT checkpoints, measured (95% CI)"
                if kind == "measured":
                    err = [[r["measured"] - r["ci_low"] for r in sft], [r["ci_high"] - r["measured"] for r in sft]]
                    cont = ax.errorbar(xs, ys, yerr=err, color=color, linestyle=style, marker="o", markersize=4,
                                       capsize=2, linewidth=1.2, label=lab)
                    cont.lines[0].set_gid("measured|a|sft")
                else:
                    (line,) = ax.plot(xs, ys, color=color, linestyle=style, marker="o", markersize=4, label=lab)
                    line.set_gid("reported|a|sft")
                for xv, yv in zip(xs, ys):
                    off, ha = ((4, -10), "left") if kind == "reported" else ((-5, 4), "right")
                    ax.annotate(fmt1(yv), (xv, yv), textcoords="offset points", xytext=off, ha=ha, fontsize=6,
                                color=color)
            for r in rows:
                if is_null(r[kind]):
                    continue
                if r["checkpoint"] == "teacher":
                    line = ax.axhline(r[kind], color=color, linestyle=":", linewidth=1.0,
                                      label=f"teacher, {kind}" + (" (paper)" if kind == "reported" else ""))
                    line.set_gid(f"{kind}|a|teacher")
                    ax.annotate(fmt1(r[kind]), (10000, r[kind]), textcoords="offset points", xytext=(-2, 3),
                                ha="right", fontsize=6, color=color)
                if r["checkpoint"] == "sft_rl":
                    (pt,) = ax.plot([r["sft_trajectories"]], [r[kind]], marker="*", markersize=10, color=color,
                                    linestyle="none", label=f"RL from the SFT checkpoint, {kind}")
                    pt.set_gid(f"{kind}|a|sft_rl|{r['sft_trajectories']}")
                    base = next((s[kind] for s in sft if s["sft_trajectories"] == r["sft_trajectories"]), None)
                    if base is not None:
                        ax.annotate("", xy=(r["sft_trajectories"], r[kind] - 1.5), xytext=(r["sft_trajectories"], base + 1.5),
                                    arrowprops={"arrowstyle": "->", "color": color, "linewidth": 0.8})
                    ax.annotate(fmt1(r[kind]), (r["sft_trajectories"], r[kind]), textcoords="offset points",
                                xytext=(7, -3), fontsize=6, color=color)
        stand = [r for r in rows if stand_in_name(r["checkpoint"]) and not is_null(r["measured"])]
        for name in dict.fromkeys(stand_in_name(r["checkpoint"]) for r in stand):
            mine = sorted((r for r in stand if stand_in_name(r["checkpoint"]) == name),
                          key=lambda r: (paper_part(r["checkpoint"]), r["sft_trajectories"]))
            run = view.run
            lab = (f"measured with a stand-in, not the paper's model ({name}): preset {run.preset}, "
                   f"n={len(run.instances)}, 95% CI")
            for ck in dict.fromkeys(paper_part(r["checkpoint"]) for r in mine):
                pts = [r for r in mine if paper_part(r["checkpoint"]) == ck]
                xs, ys = [r["sft_trajectories"] for r in pts], [r["measured"] for r in pts]
                err = [[r["measured"] - r["ci_low"] for r in pts], [r["ci_high"] - r["measured"] for r in pts]]
                marker = {"sft": "s", "sft_rl": "*", "teacher": "D"}.get(ck, "s")
                cont = ax.errorbar(xs, ys, yerr=err, color=STAND_IN_COLOR, linestyle="-" if len(pts) > 1 else "none",
                                   marker=marker, markersize=5, capsize=2, linewidth=1.0, label=lab)
                for artist in cont.lines[0:1] + tuple(cont.lines[1]) + tuple(cont.lines[2]):
                    artist.set_clip_on(False)            # a point at 0 % sits on the axis, drawn whole
                lab = None
                cont.lines[0].set_gid(f"measured|a|{pts[0]['checkpoint']}")
                for xv, yv in zip(xs, ys):
                    ax.annotate(fmt1(yv), (xv, yv), textcoords="offset points", xytext=(6, 2), fontsize=6,
                                color=STAND_IN_COLOR)
        for r in rows:
            if is_null(r["measured"]):
                n = r["sft_trajectories"]
                label = {"sft": f"SFT on {n:,}" if n else "base model (no SFT)", "sft_rl": f"RL from SFT on {n:,}",
                         "teacher": "teacher"}[r["checkpoint"]]
                missing.append((f"(a) {label}", r["measured_note"]))
        ax.set_xlabel("SFT teacher trajectories")
        ax.set_ylabel("Base-to-Gold success (%)")
        ax.set_ylim(0, 108)
        ax.set_yticks(range(0, 101, 20))
        ax.set_xlim(-500, 10500)
        ax.set_title("(a) Test agent: Base-to-Gold vs SFT data")
        ax.grid(linewidth=0.3, alpha=0.6)
        ax.legend(loc="upper left", bbox_to_anchor=(-0.12, -0.15), ncol=1, frameon=False, fontsize=6.5)
        _curve_panel(bx, training, "test", "b", 200, (0.15, 0.75), ("base", "sft"),
                     "(b) Test agent RL reward (from Base / SFT)", missing)
        _curve_panel(cx, training, "repair", "c", 100, (0.2, 0.8), ("base",), "(c) Repair agent RL reward",
                     missing)
        own = [r for r in rows if not is_null(r["measured"]) and not stand_in_name(r["checkpoint"])]
        if not own:
            ax.text(0.97, 0.03, "measured, the paper's models: not run here" if stand else "measured: not run here", transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=7, color="#777777")
        lines = _banner(view) + _reason_lines(missing)
        _layout(fig, axes_h=3.6, below_h=1.25, top_h=0.35, notes=len(_footnote_lines(lines, 240)), left=0.05,
                right=0.99, wspace=0.25)
        _footnote(fig, lines, width=240)
    return fig


def save(fig: Figure, stem: Path) -> list[Path]:
    """PNG (150 dpi) and PDF without creation dates or software tags: identical inputs, identical bytes."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    with matplotlib.rc_context(RC):
        fig.savefig(png, dpi=150, metadata={"Software": None})
        fig.savefig(pdf, metadata={"CreationDate": None, "Creator": None, "Producer": None})
    return [png, pdf]


__all__ = ["figure5", "figure6", "save"]
