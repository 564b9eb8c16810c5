"""Figures 5 and 6 as matplotlib Figures (Figure objects, never pyplot: no global state, no GUI backend), reported beside measured.

The builders return the Figure so tests can read bar heights and line data before anything is saved;
`save` writes PNG and PDF without timestamps or software tags, so the same inputs give the same bytes.
Every artist that carries a value has a gid `<kind>|<panel>|<condition...>` (kind: reported | measured).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from execcritic.figures.reasons import not_run_curve
from execcritic.figures.tables import ArtifactView
from execcritic.results.stats import is_null
from execcritic.results.store import Run

RC = {"font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
      "legend.fontsize": 7.5, "xtick.labelsize": 8, "ytick.labelsize": 8, "svg.hashsalt": "execcritic",
      "axes.spines.top": False, "axes.spines.right": False}
REPORTED_STYLE = {"facecolor": "#d9d9d9", "edgecolor": "#555555", "hatch": "///", "linewidth": 0.6}
MEASURED_COLOR = "#1f5fa8"
QUALITATIVE = {"b": "paper (qualitative only): reward stays low and oscillates from Base,\n"
                    "rises steadily from the SFT checkpoint (axis about 0.15-0.75)",
               "c": "paper (qualitative only): Repair training reward increases\noverall (axis about 0.2-0.8)"}


def _footnote(fig: Figure, lines: Sequence[str], width: int = 220) -> None:
    text = "\n".join(textwrap.fill(line, width) for line in dict.fromkeys(lines))
    if text:
        fig.text(0.01, 0.01, text, fontsize=6.5, va="bottom", ha="left", color="#333333")


def _measured_label(view: ArtifactView) -> str:
    run = view.run
    if run is None or view.rows["measured"].isna().all():
        return "measured (this suite): not run here"
    return f"measured (this suite): preset {run.preset}, n={len(run.instances)} x {run.runs} run(s), 95% CI"


def _wrap(s: str, width: int = 12) -> str:
    return "\n".join(textwrap.wrap(s, width)) or s


def figure5(view: ArtifactView) -> Figure:
    """(a) GPT-5.6-sol Repair on Verified and Pro, (b) Qwen Repair on Verified: resolved % by feedback
    source; hatched gray = reported by the paper, blue = measured here (with its CI)."""
    rows = view.rows.to_dict("records")
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(12, 4.8))
        axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [6, 4]})
        missing: list[tuple[str, str]] = []
        for ax, panel in zip(axes, ("a", "b")):
            prow = [r for r in rows if r["panel"] == panel]
            benches = list(dict.fromkeys(r["benchmark"] for r in prow))
            agent = prow[0]["repair_agent"] if prow else ""
            x, ticks, labels, w = 0.0, [], [], 0.38
            for bench in benches:
                start = x
                for r in (r for r in prow if r["benchmark"] == bench):
                    fs = r["feedback_source"]
                    ident = f"{panel}|{bench}|{agent}|{fs}"
                    if not is_null(r["reported"]):
                        (bar,) = ax.bar(x - w / 2, r["reported"], w, **REPORTED_STYLE)
                        bar.set_gid(f"reported|{ident}")
                        ax.text(x - w / 2, r["reported"] + 1, fmt1(r["reported"]), ha="center", va="bottom",
                                fontsize=6.5)
                    if not is_null(r["measured"]):
                        err = [[r["measured"] - r["ci_low"]], [r["ci_high"] - r["measured"]]]
                        (bar,) = ax.bar(x + w / 2, r["measured"], w, color=MEASURED_COLOR, yerr=err, capsize=2,
                                        error_kw={"linewidth": 0.8})
                        bar.set_gid(f"measured|{ident}")
                        ax.text(x + w / 2, r["ci_high"] + 1, fmt1(r["measured"]), ha="center", va="bottom",
                                fontsize=6.5, color=MEASURED_COLOR)
                    else:
                        ax.text(x + w / 2, 2, "not run here", rotation=90, ha="center", va="bottom", fontsize=6,
                                color="#777777")
                        missing.append((f"({panel}) {bench}: {fs}", r["measured_note"]))
                    ticks.append(x)
                    labels.append(_wrap(fs))
                    x += 1.0
                if len(benches) > 1:
                    ax.text((start + x - 1) / 2, -0.30, bench, transform=ax.get_xaxis_transform(), ha="center",
                            va="top", fontsize=8.5, fontweight="bold")
                x += 0.6
            ax.set_xticks(ticks, labels)
            ax.set_xlim(-0.8, x - 0.6 - 0.2)
            ax.set_ylim(0, 112)                     # headroom: value labels sit above bars and CI caps
            ax.set_yticks(range(0, 101, 20))
            ax.set_ylabel("Resolved (%)")
            where = "" if len(benches) > 1 else f", {benches[0]}" if benches else ""
            ax.set_title(f"({panel}) {agent} Repair agent{where}")
            ax.grid(axis="y", linewidth=0.3, alpha=0.6)
        handles = [Patch(**REPORTED_STYLE, label="reported (paper)"),
                   Patch(color=MEASURED_COLOR, label=_measured_label(view))]
        fig.legend(handles=handles, loc="upper center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 1.0))
        lines = _reason_lines(missing)
        fig.subplots_adjust(left=0.06, right=0.99, top=0.86, bottom=0.21 + 0.03 * len(lines), wspace=0.15)
        _footnote(fig, lines)
    return fig


def _reason_lines(missing: Sequence[tuple[str, str]]) -> list[str]:
    """One footnote line per reason: 'Not run here: <reason>. <conditions>' (conditions sharing a
    prefix such as '(a) SWE-bench Pro: ' are listed once under it)."""
    by_reason: dict[str, dict[str, list[str]]] = {}
    for cond, note in missing:
        reason = note.removeprefix("not run here: ")
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


def _curve_panel(ax, runs: Sequence[Run], role: str, panel: str, xmax: int, ylim: tuple[float, float],
                 inits: Sequence[str], title: str, missing: list[tuple[str, str]]) -> None:
    mine = [r for r in runs if r.manifest.get("role") == role]
    for run in sorted(mine, key=lambda r: (str(r.manifest.get("init")), r.run_id)):
        m = run.records.sort_values("step")
        init = str(run.manifest.get("init"))
        label = f"measured: init {init} ({run.preset}, {run.run_id})"
        (line,) = ax.plot(m["step"], m["reward_mean"], linewidth=1.2, label=label)
        line.set_gid(f"measured|{panel}|{init}|{run.run_id}")
        ax.fill_between(m["step"], m["reward_mean"] - m["reward_std"], m["reward_mean"] + m["reward_std"],
                        alpha=0.15, color=line.get_color(), linewidth=0)
    have = {str(r.manifest.get("init")) for r in mine}
    for init in inits:
        if init not in have:
            missing.append((f"({panel}) {role} RL from {init}", not_run_curve(role, init)))
    if not mine:
        ax.set_xlim(0, xmax)
        ax.set_ylim(*ylim)
        ax.text(0.5, 0.62, "measured: not run here", transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color="#777777")
        ax.text(0.5, 0.40, QUALITATIVE[panel], transform=ax.transAxes, ha="center", va="center", fontsize=7,
                color="#333333", style="italic")
    else:
        handles = ax.get_legend_handles_labels()[0]
        handles.append(Patch(facecolor="#999999", alpha=0.3, label="band: +/-1 sd across the step's rollouts"))
        ax.legend(handles=handles, loc="best", frameon=False, fontsize=6.5)
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
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, frameon=False, fontsize=6.5)
        _curve_panel(bx, training, "test", "b", 200, (0.15, 0.75), ("base", "sft"),
                     "(b) Test agent RL reward (from Base / SFT)", missing)
        _curve_panel(cx, training, "repair", "c", 100, (0.2, 0.8), ("base",), "(c) Repair agent RL reward",
                     missing)
        if view.run is None or view.rows["measured"].isna().all():
            ax.text(0.97, 0.03, "measured: not run here", transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=7, color="#777777")
        lines = _reason_lines(missing)
        fig.subplots_adjust(left=0.05, right=0.99, top=0.93, bottom=0.25 + 0.022 * len(lines), wspace=0.25)
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
