"""Figures 5 and 6 as matplotlib Figures (Figure objects, never pyplot: no global state, no GUI backend), reported beside measured.

The builders return the Figure so tests can read bar heights and line data before anything is saved;
`save` writes PNG and PDF without timestamps or software tags, so the same inputs give the same bytes.
Every artist that carries a value has a gid `<kind>|<panel>|<condition...>` (kind: reported | measured |
interval); every measured value has a visible 95% interval (error bar with caps, drawn even when its width is
zero) whose method the figure's notes name, and a condition not run here shows "n/r" with a numbered note.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from execcritic.figures.reasons import not_run_curve, reason_parts
from execcritic.figures.tables import (
    ArtifactView,
    Notes,
    figure6_row,
    fmt,
    harness_change,
    interval_methods,
    measured_on,
    n_text,
    stand_in_names,
)
from execcritic.results.schemas import paper_part, stand_in_name
from execcritic.results.stats import is_null
from execcritic.results.store import Run, reward_bounds, training_curve, training_init

RC = {"font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
      "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8, "svg.hashsalt": "execcritic",
      "axes.spines.top": False, "axes.spines.right": False}
MIN_FONT = 8       # the smallest text of any figure, in points at its saved size: readable at 100% on a laptop
REPORTED_STYLE = {"facecolor": "#d9d9d9", "edgecolor": "#555555", "hatch": "///", "linewidth": 0.6}
REPORTED_COLOR = "#777777"
MEASURED_COLOR = "#1f5fa8"
STAND_IN_COLOR = "#d95f02"          # measured with another model in the paper's role (smoke, ci)
INIT_COLORS = {"base": MEASURED_COLOR, "sft": "#2a9d55"}
ERR = {"capsize": 4, "elinewidth": 1.0, "capthick": 1.0, "ecolor": "#222222", "zorder": 4}
QUALITATIVE = {"b": "paper (qualitative only, no numbers): RL from Base stays low and oscillates;\n"
                    "RL from SFT rises steadily (the paper's axis: about 0.15-0.75)",
               "c": "paper (qualitative only, no numbers): Repair training reward\n"
                    "increases overall (the paper's axis: about 0.2-0.8)"}


def _footnote_lines(lines: Sequence[str], width: int) -> list[str]:
    return [w for line in dict.fromkeys(lines) for w in textwrap.wrap(line, width)]


def _footnote(fig: Figure, lines: Sequence[str], width: int = 180) -> None:
    text = "\n".join(_footnote_lines(lines, width))
    if text:
        fig.text(0.01, 0.01, text, fontsize=MIN_FONT, va="bottom", ha="left", color="#333333")


def _layout(fig: Figure, *, axes_h: float, below_h: float, top_h: float, notes: int, **kw: float) -> None:
    """Size the figure so the axes keep their height whatever the number of footnote lines (inches)."""
    note_h = 0.15 * notes + (0.1 if notes else 0.0)
    total = axes_h + below_h + top_h + note_h
    fig.set_figheight(total)
    fig.subplots_adjust(bottom=(below_h + note_h) / total, top=1 - top_h / total, **kw)


def _wrap(s: str, width: int = 12) -> str:
    return "\n".join(textwrap.wrap(s, width)) or s


def frac(v: Any) -> str:
    """A fraction as the paper writes it (0.22, 0.622): up to three decimals, at least two."""
    s = f"{float(v):.3f}".rstrip("0")
    return s + "0" * max(0, 2 - len(s.split(".")[1]))


def _marks(numbers: Sequence[int]) -> str:
    return f"n/r$^{{{','.join(map(str, sorted(numbers)))}}}$" if numbers else "n/r"


def _nr(notes: Notes, note: str, stand_in_at: str) -> str:
    """'n/r' with the numbers of its reasons (the figure's notes list them)."""
    return _marks([notes.add(p) for p in reason_parts(note, stand_in_at=stand_in_at)])


def _interval(ax, x: float, r: dict[str, Any], gid: str, scale: float = 1.0) -> Any:
    """A measured value's 95% interval as an error bar with caps; None (and the value alone) where undefined."""
    if is_null(r["ci_low"]) or is_null(r["ci_high"]):
        return None
    v = r["measured"] * scale
    err = [[max(0.0, v - r["ci_low"] * scale)], [max(0.0, r["ci_high"] * scale - v)]]
    cont = ax.errorbar([x], [v], yerr=err, fmt="none", **ERR)
    for artist in (*cont.lines[1], *cont.lines[2]):
        artist.set_clip_on(False)
    cont.lines[2][0].set_gid(f"interval|{gid}")
    return cont


def _notes_lines(view: ArtifactView, notes: Notes, measured: Sequence[dict[str, Any]],
                 interval_shown: bool) -> list[str]:
    """The figure's notes: what the measured values are, how their intervals are made, and why n/r."""
    lines = []
    run = view.run
    if run is not None and measured and run.manifest.get("banner"):
        lines.append(f"Measured values: preset {run.preset}, run {run.run_id} (made at {run.made_at}), on "
                     f"{measured_on(run)}. "
                     f"{run.manifest['banner']}")
    if measured:
        n = n_text(measured) or "n (instances × runs) per value in paper_figures/" + view.artifact + ".md"
        lines.append(f"Error bars: 95% intervals, {interval_methods(view, [r['ci_method'] for r in measured])}; "
                     f"{n}." + ("" if interval_shown else " No interval is defined for these values."))
    if notes.texts:
        lines.append("n/r: not run here; " + " ".join(f"({k}) {t.replace('`', '')}." for k, t in notes.items()))
    return lines


def figure5(view: ArtifactView) -> Figure:
    """(a) GPT-5.6-sol Repair on Verified and Pro, (b) Qwen Repair on Verified: resolved % by feedback source.
    Each feedback source has the paper's bar (hatched gray), the measured bar of the paper's model (blue, or
    "n/r") and, where a stand-in played the role, the stand-in's bar (orange) right beside them."""
    rows = view.rows.to_dict("records")
    cols = list(view.schema.condition)
    notes = Notes()
    measured = [r for r in rows if not is_null(r["measured"])]
    drawn = {"reported": False, "own": False, "interval": None}
    stand_names: list[str] = []
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(12, 4.8))

        def slot_key(r: dict[str, Any]) -> tuple:
            return (r["panel"], r["benchmark"], paper_part(r["repair_agent"]), paper_part(r["feedback_source"]))

        slots = list(dict.fromkeys(slot_key(r) for r in rows))
        widths = [max(3.0, sum(1.0 for s in slots if s[0] == pn) + 0.6 * len({s[1] for s in slots if s[0] == pn}))
                  for pn in "ab"]
        axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": widths})
        for ax, panel in zip(axes, ("a", "b")):
            mine = [s for s in slots if s[0] == panel]
            benches = list(dict.fromkeys(s[1] for s in mine))
            x, ticks, labels = 0.0, [], []
            for bench in benches:
                start = x
                cluster = [s for s in mine if s[1] == bench]
                names = list(dict.fromkeys(n for r in rows if slot_key(r) in cluster and (n := stand_in_names(r, cols))))
                nbars = 2 + len(names)
                w = 0.8 / nbars
                for s in cluster:
                    here = [r for r in rows if slot_key(r) == s]
                    own = next((r for r in here if not stand_in_names(r, cols)), None)
                    ident = "|".join(str(v) for v in s)
                    pos = [x - 0.4 + w * (k + 0.5) for k in range(nbars)]
                    if own is not None and not is_null(own["reported"]):
                        (bar,) = ax.bar(pos[0], own["reported"], w, **REPORTED_STYLE)
                        bar.set_gid(f"reported|{ident}")
                        ax.text(pos[0], own["reported"] + 1, fmt(own["reported"]), ha="center", va="bottom",
                                fontsize=MIN_FONT)
                        drawn["reported"] = True
                    for k, r in [(1, own)] + [(2 + names.index(stand_in_names(r, cols)), r) for r in here
                                              if stand_in_names(r, cols)]:
                        if r is None:
                            continue
                        gid = "|".join(str(r[c]) for c in cols)
                        if is_null(r["measured"]):
                            ax.text(pos[k], 2, _nr(notes, r["measured_note"], "the orange bar beside it"),
                                    rotation=90, ha="center", va="bottom", fontsize=MIN_FONT, color="#555555")
                            continue
                        color = STAND_IN_COLOR if k >= 2 else MEASURED_COLOR
                        (bar,) = ax.bar(pos[k], r["measured"], w, color=color)
                        bar.set_gid(f"measured|{gid}")
                        ax.plot([pos[k]], [r["measured"]], marker="o", markersize=3.5, color=color,  # seen at 0
                                markeredgecolor="black", markeredgewidth=0.5, linestyle="none", zorder=5, clip_on=False)
                        cont = _interval(ax, pos[k], r, gid)
                        drawn["interval"] = drawn["interval"] or cont
                        top = r["ci_high"] if not is_null(r["ci_high"]) else r["measured"]
                        ax.text(pos[k], top + 1.5, fmt(r["measured"]), ha="center", va="bottom", fontsize=MIN_FONT,
                                color=color)
                        if k >= 2:
                            stand_names.append(names[k - 2])
                        else:
                            drawn["own"] = True
                    ticks.append(x)
                    labels.append(_wrap(str(s[3]), 10))
                    x += 1.0
                if len(benches) > 1:
                    ax.text((start + x - 1) / 2, -0.17, bench, transform=ax.get_xaxis_transform(), ha="center",
                            va="top", fontsize=MIN_FONT, fontweight="bold")
                x += 0.6
            ax.set_xticks(ticks, labels)
            ax.set_xlim(-0.7, max(x - 0.6 - 0.3, 0.8))
            ax.set_ylim(-4, 112)                    # below 0: a measured 0 stays visible above the axis
            ax.axhline(0, color="#555555", linewidth=0.6, zorder=1)
            ax.set_yticks(range(0, 101, 20))
            ax.set_ylabel("Resolved Rate (%)")
            agent = mine[0][2] if mine else ""
            where = "" if len(benches) > 1 else f", {benches[0]}" if benches else ""
            ax.set_title(f"({panel}) {agent} Repair agent{where}")
            ax.grid(axis="y", linewidth=0.3, alpha=0.6)
        handles: list[Any] = []
        if drawn["reported"]:
            handles.append(Patch(**REPORTED_STYLE, label="reported (paper)"))
        if drawn["own"]:
            handles.append(Patch(color=MEASURED_COLOR, label=f"measured (this suite), the paper's model: preset "
                                 f"{view.run.preset}"))
        for name in dict.fromkeys(stand_names):
            handles.append(Patch(color=STAND_IN_COLOR, label=f"measured with the stand-in {name} in the paper's "
                                 f"role (not the paper's model): preset {view.run.preset}"))
        if drawn["interval"] is not None:
            handles.append(drawn["interval"])
            drawn["interval"].set_label("95% interval (method in the notes)")
        fig.legend(handles=handles, loc="upper center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 1.0),
                   fontsize=MIN_FONT)
        lines = _notes_lines(view, notes, measured, drawn["interval"] is not None)
        width = 190
        _layout(fig, axes_h=3.2, below_h=0.85, top_h=0.45 + 0.15 * ((len(handles) + 1) // 2),
                notes=len(_footnote_lines(lines, width)), left=0.06, right=0.99, wspace=0.12)
        _footnote(fig, lines, width)
    return fig


def _curve_label(run: Run) -> str:
    """Legend text of a measured curve: its init in the paper's words, what run it is and its label."""
    what = str(run.manifest.get("label") or f"preset {run.preset}")
    change = harness_change(run)
    stale = "" if change is None else f"; judged by an earlier harness, {change[0]} (this code's: {change[1]})"
    return f"RL from {training_init(run.manifest).upper() if training_init(run.manifest) == 'sft' else 'Base'}, " \
           f"measured: {what} ({run.run_id}, made at {run.made_at}{stale})"


def _curve_panel(ax, runs: Sequence[Run], role: str, panel: str, xmax: int, ylim: tuple[float, float],
                 inits: Sequence[str], title: str, notes: Notes) -> tuple[int, int]:
    """A panel of Figure 6b/6c: each training run's per-step series (`training_curve`, the one source every
    curve of the suite reads): the mean reward over every offered rollout, filled where the step updated the
    policy and hollow where it did not, its 95% interval as a band inside the reward's range with n stated, and
    the kept groups' mean (what trained) as a second, labeled line; the paper's description beside it (it gives
    these curves only qualitatively), and for each of the paper's curves without a run here an n/r line.
    Returns the legend's size below the panel: (entries, text lines)."""
    mine = [r for r in runs if r.manifest.get("role") == role]
    untrained_any = False
    ns: list[int] = []
    bounds = [reward_bounds(r.manifest) for r in mine]
    for run in sorted(mine, key=lambda r: (training_init(r.manifest), r.run_id)):
        c = training_curve(run)
        init = training_init(run.manifest)
        color = INIT_COLORS.get(init, "#6a3d9a")
        (line,) = ax.plot(c["step"], c["reward"], linewidth=1.2, marker="o", markersize=4, color=color,
                          label=_curve_label(run), clip_on=False)
        line.set_gid(f"measured|{panel}|{init}|{run.run_id}")
        idle = c[~c["trained"]]
        if len(idle):
            untrained_any = True
            (pts,) = ax.plot(idle["step"], idle["reward"], linestyle="none", marker="o", markersize=6,
                             markerfacecolor="white", markeredgecolor=color, zorder=3, clip_on=False)
            pts.set_gid(f"measured-untrained|{panel}|{init}|{run.run_id}")
        (kept,) = ax.plot(c["step"], c["reward_kept"], linewidth=0.9, linestyle="--", marker="x", markersize=3.5,
                          color=color, alpha=0.7, clip_on=False,
                          label="the same run, mean over the kept groups only (what trained; DAPO keeps "
                                "groups whose rewards differ, so this is not the policy's reward)")
        kept.set_gid(f"measured-kept|{panel}|{init}|{run.run_id}")
        band = c.dropna(subset=["ci_low", "ci_high"])
        ns += [int(n) for n in band["n"]]
        ax.fill_between(band["step"], band["ci_low"], band["ci_high"], alpha=0.15, color=color, linewidth=0)
    have = {training_init(r.manifest) for r in mine}
    absent = []
    for init in inits:
        if init not in have:
            why = [*reason_parts(not_run_curve(role, init)),
                   f"no complete run with role {role}, init {init} under results/training/"]
            absent.append(f"RL from {'SFT' if init == 'sft' else 'Base'}, measured: "
                          f"{_marks([notes.add(p) for p in why])}")
    reported = ax.text(0.5, 0.97, QUALITATIVE[panel], transform=ax.transAxes, ha="center", va="top",
                       fontsize=8, color="#333333", style="italic")
    reported.set_gid(f"reported|{panel}|qualitative")
    if absent:
        t = ax.text(0.5, 0.86, "\n".join(absent), transform=ax.transAxes, ha="center", va="top", fontsize=8,
                    color="#555555")
        t.set_gid(f"absent|{panel}")
    if not mine:
        ax.set_xlim(0, xmax)
        ax.set_ylim(*ylim)
    else:
        lo, hi = min(b[0] for b in bounds), max(b[1] for b in bounds)
        ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.35 * (hi - lo))   # the reward's range, room above for the text
        ax.axhline(hi, color="#999999", linewidth=0.6, linestyle=":")
        ax.set_yticks([t for t in ax.get_yticks() if lo - 1e-9 <= t <= hi + 1e-9])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        handles = ax.get_legend_handles_labels()[0]
        if ns:
            handles.append(Patch(facecolor="#999999", alpha=0.3, label=f"band: 95% interval of the step's mean "
                                 f"(Hoeffding, within the reward's range; n = {min(ns)}-{max(ns)} rollouts per step)"))
        if untrained_any:
            handles.append(Line2D([], [], linestyle="none", marker="o", markersize=6, markerfacecolor="white",
                                  markeredgecolor="#555555", label="hollow: no optimizer update at this step "
                                  "(no group kept)"))
        for h in handles:
            h.set_label(textwrap.fill(h.get_label(), 50, break_on_hyphens=False))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(-0.05, -0.15), frameon=False, fontsize=8)
    ax.set_xlabel("Training step (GRPO)")
    ax.set_ylabel("Training reward (dotted: the maximum)" if mine else "Training reward")
    ax.set_title(title)
    ax.grid(linewidth=0.3, alpha=0.6)
    return _legend_size(ax)


def _legend_size(ax) -> tuple[int, int]:
    """(entries, text lines) of the axes' legend: what the space below the panel must hold."""
    legend = ax.get_legend()
    texts = [t.get_text() for t in legend.get_texts()] if legend is not None else []
    return len(texts), sum(t.count("\n") + 1 for t in texts)


def figure6(view: ArtifactView, training: Sequence[Run]) -> Figure:
    """(a) Test-agent Base-to-Gold (fractions, as the paper) vs SFT data size: SFT checkpoints as a solid line,
    the teacher as a dashed line (the paper's caption), RL from the 5K checkpoint as a star with an arrow;
    (b) Test RL reward from Base and from SFT; (c) Repair RL reward. Paper values are its approximations."""
    rows = view.rows.to_dict("records")
    notes = Notes()
    measured = [r for r in rows if not is_null(r["measured"])]
    intervals: list[Any] = []                  # the error bars drawn (the first one is the legend's sample)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(13, 5.4))
        ax, bx, cx = fig.subplots(1, 3)
        dodge = {"reported": 0.0, "measured": 0.0, "stand-in": 220.0}   # a stand-in sits just right of the paper's
        kinds = [("reported", REPORTED_COLOR, [r for r in rows if not is_null(r["reported"])
                                               and not stand_in_name(r["checkpoint"])], "paper"),
                 ("measured", MEASURED_COLOR, [r for r in measured if not stand_in_name(r["checkpoint"])],
                  "measured")]
        for name in dict.fromkeys(stand_in_name(r["checkpoint"]) for r in measured if stand_in_name(r["checkpoint"])):
            kinds.append(("stand-in", STAND_IN_COLOR, [r for r in measured if stand_in_name(r["checkpoint"]) == name],
                          f"measured with the stand-in {name} (not the paper's model)"))
        for kind, color, mine, who in kinds:
            col = "reported" if kind == "reported" else "measured"
            dx = dodge[kind]
            sft = sorted((r for r in mine if paper_part(r["checkpoint"]) == "sft"), key=lambda r: r["sft_trajectories"])
            if sft:
                xs = [r["sft_trajectories"] + dx for r in sft]
                ys = [r[col] / 100 for r in sft]
                (line,) = ax.plot(xs, ys, color=color, linestyle="-", marker="o" if kind != "stand-in" else "s",
                                  markersize=4, label=f"Off-policy SFT, {who}" + (" (approx.)" if kind == "reported"
                                                                                  else ""), clip_on=False, zorder=3)
                line.set_gid(f"{kind if kind != 'stand-in' else 'measured'}|a|{sft[0]['checkpoint']}")
                for r, xv, yv in zip(sft, xs, ys):
                    if kind != "reported":
                        intervals.append(_interval(ax, xv, r, f"a|{r['checkpoint']}|{r['sft_trajectories']}", 0.01))
                    ax.annotate(frac(yv), (xv, yv), textcoords="offset points", xytext=(5, -9 if kind == "reported"
                                                                                        else 3),
                                fontsize=MIN_FONT, color=color)
            for r in mine:
                ck, v = paper_part(r["checkpoint"]), r[col] / 100
                gid = f"{kind if kind != 'stand-in' else 'measured'}|a|{r['checkpoint']}"
                if ck == "teacher":
                    line = ax.axhline(v, color=color, linestyle="--", linewidth=1.1,
                                      label=f"DeepSeek-V4-Flash teacher, {who}")
                    line.set_gid(gid)
                    ax.annotate(frac(v), (10000, v), textcoords="offset points", xytext=(-2, 3), ha="right",
                                fontsize=MIN_FONT, color=color)
                    if kind != "reported":
                        intervals.append(_interval(ax, 10000 + dx, r, f"a|{r['checkpoint']}", 0.01))
                if ck == "sft_rl":
                    x0 = r["sft_trajectories"] + dx
                    (pt,) = ax.plot([x0], [v], marker="*", markersize=11, color=color, linestyle="none",
                                    label=f"On-policy RL from the {r['sft_trajectories'] / 1000:g}K SFT checkpoint, "
                                          f"{who}", clip_on=False, zorder=4)
                    pt.set_gid(f"{gid}|{r['sft_trajectories']}")
                    base = next((s[col] / 100 for s in sft if s["sft_trajectories"] == r["sft_trajectories"]), None)
                    if base is not None and abs(v - base) > 0.04:
                        ax.annotate("", xy=(x0, v - 0.02 * (1 if v > base else -1)),
                                    xytext=(x0, base + 0.02 * (1 if v > base else -1)),
                                    arrowprops={"arrowstyle": "->", "color": color, "linewidth": 0.9})
                    ax.annotate(frac(v), (x0, v), textcoords="offset points", xytext=(8, -3), fontsize=MIN_FONT,
                                color=color)
                    if kind != "reported":
                        intervals.append(_interval(ax, x0, r, f"a|{r['checkpoint']}|{r['sft_trajectories']}", 0.01))
        nr_labels = []
        for r in rows:
            if is_null(r["measured"]) and not stand_in_name(r["checkpoint"]):
                nr_labels.append(f"{figure6_row(r)}: {_nr(notes, r['measured_note'], 'the orange point beside it')}")
        if nr_labels:
            t = ax.text(0.99, 0.99, "measured, the paper's models:\n" + "\n".join(nr_labels), transform=ax.transAxes,
                        ha="right", va="top", fontsize=MIN_FONT, color="#555555")
            t.set_gid("absent|a")
        ax.set_xlabel("Off-policy samples (SFT teacher trajectories)")
        ax.set_ylabel("Base-to-Gold success (fraction)")
        ax.set_ylim(-0.04, 1.45)    # below 0: a measured 0 stays visible; above 1: room for the n/r lines
        ax.axhline(0, color="#555555", linewidth=0.6, zorder=1)
        ax.set_yticks([0.0, 0.15, 0.30, 0.45, 0.60, 0.75, 0.90])
        ax.set_xticks([0, 1000, 3000, 5000, 10000], ["0k", "1k", "3k", "5k", "10k"])
        ax.set_xlim(-500, 10800)
        ax.set_title("(a) Test agent: Base-to-Gold vs SFT data")
        ax.grid(linewidth=0.3, alpha=0.6)
        handles = ax.get_legend_handles_labels()[0]
        drawn = [c for c in intervals if c is not None]
        if drawn:
            drawn[0].set_label("95% interval (method in the notes)")
            handles.append(drawn[0])
        for h in handles:
            h.set_label(textwrap.fill(h.get_label(), 50, break_on_hyphens=False))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(-0.12, -0.15), ncol=1, frameon=False,
                  fontsize=MIN_FONT)
        sizes = [_legend_size(ax),
                 _curve_panel(bx, training, "test", "b", 200, (0.15, 0.75), ("base", "sft"),
                              "(b) Test agent RL reward (from Base / from SFT)", notes),
                 _curve_panel(cx, training, "repair", "c", 100, (0.2, 0.8), ("base",), "(c) Repair agent RL reward",
                              notes)]
        # below the axes: the x label, then the tallest legend (8 pt lines, a gap between entries)
        below = max(0.55 + 0.14 * lines + 0.06 * entries for entries, lines in sizes)
        lines = _notes_lines(view, notes, measured, bool(drawn))
        _layout(fig, axes_h=3.6, below_h=max(2.2, below), top_h=0.35, notes=len(_footnote_lines(lines, 195)),
                left=0.05, right=0.99, wspace=0.25)
        _footnote(fig, lines, width=195)
    return fig


def save(fig: Figure, stem: Path) -> list[Path]:
    """PNG (150 dpi) and PDF without creation dates or software tags: identical inputs, identical bytes."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    with matplotlib.rc_context(RC):
        fig.savefig(png, dpi=150, metadata={"Software": None})
        fig.savefig(pdf, metadata={"CreationDate": None, "Creator": None, "Producer": None})
    return [png, pdf]


__all__ = ["figure5", "figure6", "frac", "save"]
