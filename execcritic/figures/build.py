"""`paper_figures/` from `results/` and the paper's reported numbers, deterministically.

For each paper artifact the latest complete run (or the one named in `runs`) is loaded through the
schema check (a malformed run stops the build with an InputError naming its file); an artifact without
a run is shown with its reported values and "not run here: <reason>". Output: <artifact>.md and .tex for
every table and figure, <figure>.png and .pdf for Figures 5 and 6, and README.md listing the sources.
Nothing in the output depends on the clock, so the same inputs rebuild byte-identical files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.errors import InputError
from execcritic.figures.tables import (
    ArtifactView,
    build_view,
    harness_change,
    md_table,
    to_latex,
    to_markdown,
)
from execcritic.files import atomic_write
from execcritic.results import paper
from execcritic.results.pins import pins_path, read_pins
from execcritic.results.schemas import PAPER_ARTIFACTS, stand_in_name
from execcritic.results.store import (
    FINISHED,
    Run,
    latest_run,
    list_runs,
    load_run,
    training_curve,
    training_init,
)


@dataclass
class BuildReport:
    out: Path
    files: list[Path] = field(default_factory=list)
    sources: dict[str, str | None] = field(default_factory=dict)     # artifact -> "artifact/run_id" or None
    training: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)                 # incomplete runs passed over

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "files": [str(f) for f in self.files], "sources": self.sources,
                "training": self.training, "skipped": self.skipped}


def _write(path: Path, text: str, report: BuildReport) -> None:
    atomic_write(path, text)
    report.files.append(path)


def select_runs(results: Path, runs: Mapping[str, str] | None, report: BuildReport, *, latest: bool = False
                ) -> dict[str, Run | None]:
    """The run shown for each paper artifact: the one named in `runs`, else the one pinned in
    `results/paper_runs.json` (results.pins), else - only with `latest` (exploration) - the latest complete one."""
    chosen: dict[str, Run | None] = {}
    pins = read_pins(results)["runs"]
    index = list_runs(root=results)
    for artifact in PAPER_ARTIFACTS:
        run_id = (runs or {}).get(artifact) or pins.get(artifact) or \
            (latest_run(artifact, root=results) if latest else None)
        if run_id and not (results / artifact / run_id / "manifest.json").is_file():
            raise InputError(f"{artifact} run {run_id!r} is pinned but not in the store", file=str(pins_path(results)),
                             field=f"runs.{artifact}")
        mine = index[index["artifact"] == artifact]
        report.skipped += [f"{artifact}/{r}" for r in mine[~mine["status"].isin(FINISHED)]["run_id"]]
        chosen[artifact] = load_run(artifact, run_id, root=results) if run_id else None
        report.sources[artifact] = f"{artifact}/{run_id}" if run_id else None
    return chosen


def training_runs(results: Path, report: BuildReport, *, latest: bool = False) -> list[Run]:
    """The pinned training runs (results.pins); with `latest`, the latest complete run per (role, init)
    (`training_init`: runs written before the init label existed count as `base` when they started from an
    embedded base model)."""
    chosen: dict[tuple[str, str, str], Run] = {}
    if latest:
        idx = list_runs("training", root=results)
        latest_of: dict[tuple[str, str], Run] = {}
        for run_id in idx[idx["status"] == "complete"]["run_id"]:
            run = load_run("training", run_id, root=results)
            latest_of[(str(run.manifest["role"]), training_init(run.manifest))] = run
        chosen = {(*k, r.run_id): r for k, r in latest_of.items()}
    else:
        for run_id in read_pins(results)["training"]:
            run = load_run("training", run_id, root=results)
            chosen[(str(run.manifest["role"]), training_init(run.manifest), run_id)] = run
    report.training = [f"training/{r.run_id} ({k[0]}, init {k[1]}{_made_by(r)})" for k, r in sorted(chosen.items())]
    return [chosen[k] for k in sorted(chosen)]


def _training_section(runs: list[Run]) -> str:
    head = "## Training curves (Figure 6b, 6c)\n"
    if not runs:
        return (head + "\nNo training run under `results/training/` (schema: `execcritic.results.schemas`, "
                "artifact `training`, one row per GRPO step in `metrics.jsonl`). The paper reports these curves "
                "only qualitatively, so there is no reported number to show.\n")
    header = ["Run", "Made", "What", "Role", "Init", "Steps (with an update)", "Reward (first -> last, max; summary.csv)",
              "Masked share (mean)", "Kept / dropped groups (mean)"]
    body = []
    for r in runs:
        c = training_curve(r)
        s = dict(zip(r.summary["metric"], r.summary["value"])) if r.summary is not None else {}
        reward = ("none (every rollout masked)" if c["reward"].isna().all() else
                  f"{s['reward_mean_first']:.3f} -> {s['reward_mean_last']:.3f} ({s['reward_mean_max']:.3f})")
        body.append([f"training/{r.run_id}", _made_by(r).removeprefix("; "),
                     str(r.manifest.get("label") or f"preset {r.preset}"),
                     str(r.manifest["role"]), training_init(r.manifest), f"{len(c)} ({int(c['trained'].sum())})",
                     reward,
                     f"{s.get('masked_share_mean', float('nan')):.3f}",
                     f"{s.get('kept_groups_mean', float('nan')):.1f} / {s.get('dropped_groups_mean', float('nan')):.1f}"])
    return (head + "\nMeasured (this suite); the paper reports these curves only qualitatively. *Reward*: each step's "
            "mean over every offered rollout with a reward (kept or dropped by DAPO), the series Figure 6 draws; "
            "a step without an update kept no group and trained nothing.\n\n" + md_table(header, body))


def build_all(results: str | Path = "results", out: str | Path = "paper_figures", *,
              reported_path: str | Path | None = None, runs: Mapping[str, str] | None = None,
              latest: bool = False) -> BuildReport:
    """Regenerate every table and figure from the runs `results/paper_runs.json` pins (`runs` overrides one
    artifact; `latest`: the latest complete runs instead, for exploring a store of one's own)."""
    from execcritic.figures.plots import figure5, figure6, save  # lazy: imports matplotlib

    results, out = Path(results), Path(out)
    reported_path = Path(reported_path) if reported_path else results / "paper" / "reported_numbers.json"
    rep = paper.reported(reported_path)
    notes = paper.reported_notes(reported_path)
    report = BuildReport(out)
    chosen = select_runs(results, runs, report, latest=latest)
    train = training_runs(results, report, latest=latest)
    views: dict[str, ArtifactView] = {a: build_view(a, chosen[a], rep, notes) for a in PAPER_ARTIFACTS}
    for artifact, view in views.items():
        extra: list[str] = []
        if artifact in ("figure5", "figure6"):
            extra.append(f"![{view.title}]({artifact}.png)\n")
        if artifact == "figure6":
            extra.append(_training_section(train))
        _write(out / f"{artifact}.md", to_markdown(view, extra), report)
        _write(out / f"{artifact}.tex", to_latex(view), report)
    fig5 = figure5(views["figure5"])
    report.files += save(fig5, out / "figure5")
    fig6 = figure6(views["figure6"], train)
    report.files += save(fig6, out / "figure6")
    _write(out / "README.md", _readme(report, views), report)
    return report


def _made_by(run: Run) -> str:
    """Which commit made the run, and whether the harness that judged it is still the code's."""
    change = harness_change(run)
    return f"; made at {run.made_at}" + ("" if change is None else
                                 f", harness {change[0]} - **the harness has changed since** (now {change[1]}): "
                                 "rerun to measure the current code")


def _readme(report: BuildReport, views: dict[str, ArtifactView]) -> str:
    header = ["Artifact", "Files", "Reported (paper)", "Measured (this suite)"]
    body = []
    for a, v in views.items():
        files = f"[{a}.md]({a}.md), [{a}.tex]({a}.tex)"
        if a in ("figure5", "figure6"):
            files += f", [{a}.png]({a}.png), [{a}.pdf]({a}.pdf)"
        n_rep = int(v.rows["reported"].notna().sum())
        src = report.sources.get(a)
        if src:
            n = int(v.rows["measured"].notna().sum())
            stand = int(sum(any(stand_in_name(r[c]) for c in v.schema.condition)
                            for r in v.rows[v.rows["measured"].notna()].to_dict("records")))
            measured = f"`{src}` (preset {v.run.preset}): {n} of {len(v.rows)} rows measured" + \
                (f", {stand} of them with a stand-in model (not the paper's)" if stand else "") + _made_by(v.run)
        else:
            measured = "not run here (no run under results/)"
        body.append([v.title, files, f"{n_rep} values", measured])
    text = ["# paper_figures\n", "<!-- generated by `execcritic figures` from results/; do not edit -->\n",
            ("Every table and figure of the paper, rebuilt from `results/` by `execcritic figures --results results "
            "--out paper_figures`, in the paper's own layout. *Paper* values are the paper's "
            "(`results/paper/reported_numbers.json`); *measured* values come from the named run's records, each with "
            "a 95% interval whose method (and n) the table or figure states. A value measured with a stand-in model "
            "sits in its own row (bar, point) beside the paper's, never in its place; a condition not run here shows "
            "n/r with a note that says why. Each `.tex` is a booktabs table: `\\usepackage{booktabs,array}`.\n"),
            md_table(header, body)]
    if report.training:
        text.append("Training runs (Figure 6b, 6c): " + ", ".join(f"`{t}`" for t in report.training) + "\n")
    if report.skipped:
        text.append("Incomplete runs passed over: " + ", ".join(f"`{s}`" for s in report.skipped) + "\n")
    return "\n".join(text)


__all__ = ["BuildReport", "build_all", "select_runs", "training_runs"]
