"""The CPU transfer study (issue 44): does SFT on trajectories that explore as an agent must carry to instances the
policy never saw?

Teacher: the exploring Test-agent teacher (`execcritic/training/explorer.py`, a scripted stand-in that reads only
what the agent is shown). Policy: SmolLM2-135M-Instruct (a stand-in for Qwen3.5-35B-A3B). Profile: cpu-transfer.

DECLARED (committed before the teacher, the SFT or any evaluation episode ran; `DECLARED_AT` and the commit that
adds this file are the record):
- Instances (`instances()`): verified-sdist's kept rows, sorted per repository, shuffled with `SEED`; held-out first:
  5 SymPy, 4 Django, 1 requests (repositories the policy trains on) and 4 pytest, 1 seaborn (repositories it never
  sees); the training pool next: 14 SymPy, 14 Django and the 2 other requests rows.
- The teacher runs once on every training-pool instance and on every held-out instance (its own rates, measured
  first). SFT data: its training-pool trajectories admitted by the paper's rule (a clean Base failure), at most
  `MAX_SFT` in the pool's order. If fewer than 10 instances or 3 repositories are admitted, the study stops there
  and says so.
- Evaluation: the base model and the SFT checkpoint, `EPISODES` episode per held-out instance (seed `EVAL_SEED`),
  with the cpu-transfer profile's sampling (temperature 0.8).
- PRIMARY statistic: the paired difference SFT - base in `valid_submission` (a submission the harness accepts as a
  bundle: it passed validation and reached the Base gate) over the 15 held-out instances; exact McNemar p-value and
  Newcombe's paired 95% interval (`results.stats.paired_delta`). Decision rule: the effect is shown when the
  interval's lower bound is > 0; otherwise it is not shown, and that is the result.
- SECONDARY (reported with the same method, deciding nothing): `protocol_valid`, `files_in_repo`, `files_on_issue`,
  `base_gate`, `b2g`; and the primary on the same-repository (10) and other-repository (5) held-out subsets.

AMENDMENT 1 (`AMENDED_AT`; committed after the teacher ran and before the SFT ran or any episode of an SFT
checkpoint; 2 of the 15 base-model held-out episodes were recorded by then, both without an accepted submission):
the teacher qualified 7 of the 30 training-pool instances (4 SymPy, 1 Django, 2 requests), so under the stop rule
above the study ends there - that result is reported (`summary.json`: `original_rule`). What this teacher
demonstrates is exploring and the protocol, not a Base failure (its B2G is measured and reported), and the primary
statistic is an accepted submission; so the SFT admits the trajectories whose bundle the harness accepted and ran on
Base (`sft.admission = submitted`, 30 of 30), all of them (`MAX_SFT` = 30), for 2 epochs (60 optimizer steps at
batch 1; the profile's 4 would double the CPU time). Instances, evaluation, primary statistic, CI and decision rule
are unchanged. The SFT on the 7 qualified trajectories is not run.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from execcritic.agents.loop import SUBMIT_MARKER
from execcritic.bundle.diff import parse_patch
from execcritic.results import stats
from execcritic.results.manifest import build_manifest, write_result
from execcritic.tasks import load_tasks
from execcritic.training import explorer
from execcritic.training.datasets import read_jsonl
from execcritic.training.heldout import on_issue, transfer_metrics

REPO = Path(__file__).resolve().parents[2]
DECLARED_AT = "2026-12-06T14:22Z"
SEED = 44
EVAL_SEED = 4400
EPISODES = 1
MAX_SFT = 30             # amendment 1 (was 12)
SFT_ADMISSION = "submitted"   # amendment 1 (was the paper's `qualified`)
SFT_EPOCHS = 2.0              # amendment 1 (was the profile's 4)
AMENDED_AT = "2026-12-06T14:37Z"
ORIGINAL_RULE = {"admission": "qualified", "max_sft": 12, "min_instances": 10, "min_repositories": 3}
PRIMARY = "valid_submission"
SECONDARY = ("protocol_valid", "files_in_repo", "files_on_issue", "base_gate", "b2g")
#: repository -> (held-out, training pool) counts
SPLIT = {"sympy/sympy": (5, 14), "django/django": (4, 14), "psf/requests": (1, 2), "pytest-dev/pytest": (4, 0),
         "mwaskom/seaborn": (1, 0)}
TRAINED_REPOS = ("sympy/sympy", "django/django", "psf/requests")


def instances(recipe: Path = REPO / "results" / "verified_sdist" / "instances.jsonl") -> dict[str, list[str]]:
    """{"heldout": [...], "train": [...]}: the declared selection from verified-sdist's kept rows."""
    kept: dict[str, list[str]] = defaultdict(list)
    for line in recipe.read_text().splitlines():
        r = json.loads(line)
        if r["kept"]:
            kept[r["repo"]].append(r["instance_id"])
    out: dict[str, list[str]] = {"heldout": [], "train": []}
    for repo, (n_held, n_train) in SPLIT.items():
        ids = sorted(kept[repo])
        random.Random(f"{SEED}/{repo}").shuffle(ids)
        if len(ids) < n_held + n_train:
            raise SystemExit(f"{repo}: {len(ids)} kept rows, the declaration needs {n_held + n_train}")
        out["heldout"] += ids[:n_held]
        out["train"] += ids[n_held:n_held + n_train]
    return out


# ---- analysis (after the runs; nothing above changes) ------------------------------------------------------

OUT = REPO / "results" / "learning_curve" / "transfer"


def _repo(instance_id: str) -> str:
    owner, rest = instance_id.split("__", 1)
    return f"{owner}/{rest.rsplit('-', 1)[0]}"


def submitted_patch(messages: list[dict[str, Any]]) -> str:
    """The patch the last command printed after the submission marker (what the episode submitted)."""
    outputs = explorer.tool_outputs(messages)
    text = outputs[-1] if outputs else ""
    return text.split(SUBMIT_MARKER, 1)[1].lstrip("\n") if SUBMIT_MARKER in text else ""


def teacher_rates(out: Path = OUT) -> dict[str, Any]:
    """The teacher's own rates per split: a bundle the harness accepted (reached the Base gate), qualified (a clean
    Base failure: the SFT admission), B2G (Q = B x G from the Gold audit), a changed file in a directory the official
    fix or tests change."""
    rates: dict[str, Any] = {}
    tasks = {t.instance_id: t for t in load_tasks("verified-sdist",
                                                   instance_ids=[i for ids in instances().values() for i in ids])}
    submitted = {(r["split"], r["instance_id"]): submitted_patch(r["messages"]) for r in (json.loads(x) for x in
                 gzip.decompress((out / "teacher" / "trajectories.jsonl.gz").read_bytes()).decode().splitlines())}
    for split in ("train", "heldout"):
        gen = [json.loads(x) for x in (out / "teacher" / f"{split}.generation.jsonl").read_text().splitlines() if x]
        audit = {r["instance_id"]: r for r in read_jsonl(out / "teacher" / f"{split}.audit.jsonl")}
        rows = []
        for r in gen:
            t = tasks[r["instance_id"]]
            paths = parse_patch(submitted[(split, r["instance_id"])]).paths
            a = audit.get(r["instance_id"]) or {}
            rows.append({"instance_id": r["instance_id"], "repo": _repo(r["instance_id"]),
                         "valid_submission": float(any(x.get("stage") == "base_gate" for x in r.get("attempts", []))),
                         "qualified": float(r["qualified"] is True), "b2g": float(bool(a.get("Q"))),
                         "files_on_issue": float(on_issue(paths, t))})
        per = {}
        for m in ("valid_submission", "qualified", "b2g", "files_on_issue"):
            k, n = int(sum(x[m] for x in rows)), len(rows)
            lo, hi = stats.clopper_pearson(k, n)
            per[m] = {"k": k, "n": n, "value": k / n if n else None, "ci_low": lo, "ci_high": hi,
                      "ci_method": "clopper_pearson"}
        rates[split] = {"rates": per, "instances": rows}
    return rates


def outcomes(out: Path, checkpoint: str, tasks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """instance -> its (single, declared) held-out episode record for `checkpoint` (every `test-<checkpoint>-heldout*`
    file: the episodes may run in several processes), the transfer metrics recomputed from the episode's recorded
    facts by `heldout.transfer_metrics` (episodes recorded before the `.git/` filter stored a wrong value)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((out / "eval").glob(f"test-{checkpoint}-heldout*.jsonl")):
        for r in read_jsonl(path):
            if r["k"] != 0:
                continue
            if r["instance_id"] in found:
                raise SystemExit(f"{path}: a second episode 0 of {r['instance_id']} for {checkpoint}")
            if not r["aborted"]:
                r.update(transfer_metrics({**r["info"], "turns": r["turns"]}, tasks[r["instance_id"]]))
            found[r["instance_id"]] = r
    return found


def held_out_test(out: Path = OUT) -> dict[str, Any]:
    """The declared test: paired SFT - base per metric over the held-out instances (all; same / other repositories).
    An aborted episode (operational, not 0) leaves its instance out of that metric's pairs, counted."""
    ids = instances()["heldout"]
    tasks = {t.instance_id: t for t in load_tasks("verified-sdist", instance_ids=ids)}
    base, sft = outcomes(out, "base", tasks), outcomes(out, "sft", tasks)
    subsets = {"all": ids, "same_repository": [i for i in ids if _repo(i) in TRAINED_REPOS],
               "other_repository": [i for i in ids if _repo(i) not in TRAINED_REPOS]}
    table = []
    for subset, members in subsets.items():
        for metric in (PRIMARY, *SECONDARY):
            pairs = [(sft[i][metric], base[i][metric]) for i in members
                     if i in sft and i in base and sft[i][metric] is not None and base[i][metric] is not None]
            x = np.array([p[0] for p in pairs], dtype=float)
            y = np.array([p[1] for p in pairs], dtype=float)
            d = stats.paired_delta(x, y)
            row = {"subset": subset, "metric": metric, "declared": "primary" if metric == PRIMARY and subset == "all"
                   else "secondary", "base": float(y.mean()) if y.size else None,
                   "sft": float(x.mean()) if x.size else None, "n": d.n_instances,
                   "n_left_out": len(members) - len(pairs), "delta": d.delta, "ci_low": d.ci_low,
                   "ci_high": d.ci_high, "ci_method": d.ci_method, "p_value": d.p_value, "test": d.test,
                   "better": d.n_better, "worse": d.n_worse}
            if row["declared"] == "primary":
                row["shown"] = bool(d.ci_low > 0)
            table.append(row)
    return {"table": table, "primary": next(r for r in table if r["declared"] == "primary")}


def conclusion(summary: dict[str, Any]) -> str:
    """The study's result in words, from the numbers (nothing typed by hand)."""
    t = summary["teacher"]
    tr, ho = t["train"]["rates"], t["heldout"]["rates"]
    p = summary["test"]["primary"]
    rows = {(r["subset"], r["metric"]): r for r in summary["test"]["table"]}

    def d(subset: str, metric: str) -> str:
        r = rows[(subset, metric)]
        if not r["n"]:
            return "no pair of scored episodes"
        ci = "" if r["ci_method"] == "undefined" else f" [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"
        return f"{r['base']:.2f} -> {r['sft']:.2f} ({r['delta']:+.2f}{ci}, n = {r['n']})"

    def moved(metric: str, subset: str = "all") -> str:
        """'rose' / 'fell' when the paired interval excludes 0 and the exact p is below 0.05, else 'did not move
        detectably' (post hoc wording of secondary measures; the primary's rule is its own)."""
        r = rows[(subset, metric)]
        if not r["n"] or r["ci_method"] == "undefined":
            return "cannot be judged"
        if r["p_value"] >= 0.05:      # at small n Newcombe's interval may exclude 0 while the exact p does not
            return "did not move detectably"
        return "rose" if r["ci_low"] > 0 else "fell" if r["ci_high"] < 0 else "did not move detectably"

    rule = summary["original_rule"]
    verdict = ("the declared effect is shown" if p["shown"] else
               "the declared effect is not shown (the interval's lower bound is not above 0)")
    carried = [name for metric, name in (("protocol_valid", "well-formed tool calls"),
                                         ("files_in_repo", "changes inside the repository's own directories"),
                                         ("files_on_issue", "changes where the issue's fix or tests are"),
                                         ("base_gate", "tests that fail cleanly on Base"), ("b2g", "Base-to-Gold tests"))
               if moved(metric) == "rose"]
    return (
        f"**What this study shows, and what it does not.** The exploring teacher (a scripted stand-in that reads only "
        f"the issue and its own command outputs, never Gold) qualified a test on {tr['qualified']['k']} of "
        f"{tr['qualified']['n']} training-pool instances and {ho['qualified']['k']} of {ho['qualified']['n']} held-out "
        f"ones, Base-to-Gold {tr['b2g']['k']}/{tr['b2g']['n']} and {ho['b2g']['k']}/{ho['b2g']['n']}: it demonstrates "
        f"exploring and the protocol, rarely a test that separates Base from Gold. Under the rule declared first "
        f"(SFT on its qualified trajectories, at least {rule['min_instances']} instances from "
        f"{rule['min_repositories']} repositories) {rule['outcome']}: {rule['qualified']} qualified; amendment 1, "
        f"declared before the SFT and before any episode of its checkpoint, trained on every submission the harness "
        f"ran ({summary['sft']['trajectories']} trajectories, {', '.join(summary['sft']['repos'])}). On {p['n']} "
        f"held-out instances (one episode each) the declared primary, a submission the harness accepts, went "
        f"{d('all', PRIMARY)}, exact McNemar p = {p['p_value']:.3g}: {verdict}. Secondary, deciding nothing: every "
        f"turn a well-formed tool call {d('all', 'protocol_valid')}; every changed file inside the repository's own "
        f"directories {d('all', 'files_in_repo')}; a changed file where the issue's fix or tests are "
        f"{d('all', 'files_on_issue')}; Base gate {d('all', 'base_gate')}; B2G {d('all', 'b2g')}; on the "
        f"repositories it never trained on (pytest, seaborn) the primary went {d('other_repository', PRIMARY)}. "
        + (f"What carried to instances the policy never saw: {'; '.join(carried)} (secondary measures: interval above "
           f"0 and exact p < 0.05). " if carried else "No measure rose on the held-out instances. ")
        + ("A submission the harness accepts carried as well (the declared effect)" if p["shown"] else
           "A submission the harness accepts did not carry (the declared effect)")
        + (", and neither did a test that fails cleanly on Base." if moved("base_gate") != "rose" else
           "; tests that fail cleanly on Base did."))


def archive_trajectories(out: Path = OUT) -> None:
    """The teacher's trajectories (the SFT data, and what `test_the_committed_teacher_moves_replay_from_their_messages`
    replays) into `teacher/trajectories.jsonl.gz` beside its records; kept as committed when the runs are gone."""
    rows = []
    for split in ("train", "heldout"):
        for line in (out / "teacher" / f"{split}.generation.jsonl").read_text().splitlines():
            r = json.loads(line)
            path = REPO / r["trajectory"]
            if not path.is_file():
                return
            rows.append({"split": split, "instance_id": r["instance_id"], "trajectory": r["trajectory"],
                         "messages": json.loads(path.read_text())["messages"]})
    with gzip.GzipFile(out / "teacher" / "trajectories.jsonl.gz", "wb", mtime=0) as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows).encode())


def analyze(out: Path = OUT) -> dict[str, Any]:
    archive_trajectories(out)
    sft_manifest = json.loads((REPO / "results" / "sft" / "transfer-sft-test" / "manifest.json").read_text())
    teacher = teacher_rates(out)
    qualified = [x for x in teacher["train"]["instances"] if x["qualified"]]
    n_q, repos_q = len(qualified), sorted({x["repo"] for x in qualified})
    stops = n_q < ORIGINAL_RULE["min_instances"] or len(repos_q) < ORIGINAL_RULE["min_repositories"]
    admitted = sft_manifest["instances"]          # what the SFT run admitted (`sft.admission`), as it recorded it
    summary: dict[str, Any] = {
        "declared_at": DECLARED_AT, "amended_at": AMENDED_AT,
        "declaration": "experiments/training/transfer.py (module docstring and constants)",
        "original_rule": {**ORIGINAL_RULE, "qualified": n_q, "repositories": repos_q,
                          "outcome": "the study stops here" if stops else "the study goes on"},
        "instances": instances(), "teacher": teacher,
        "sft": {"trajectories": len(admitted), "instances": admitted, "repos": sorted({_repo(i) for i in admitted}),
                "run": "results/sft/transfer-sft-test", "made_at": sft_manifest["git"]["sha"]},
        "test": held_out_test(out)}
    summary["conclusion"] = conclusion(summary)
    timings = out / "timings.jsonl"
    summary["timings"] = [json.loads(x) for x in timings.read_text().splitlines() if x.strip()] if timings.is_file() else []
    plot(summary, out / "transfer.png")
    summary["figures"] = ["transfer.png"]
    manifest = build_manifest(command=sys.argv, datasets=[{"task_set": "verified-sdist"}],
                              seeds=[SEED, EVAL_SEED], extra={"artifact": "transfer-study"})
    write_result(out / "summary.json", summary, manifest)
    (out / "tables.md").write_text(tables(summary))
    return summary


def tables(summary: dict[str, Any]) -> str:
    lines = ["# CPU transfer study (issue 44): SmolLM2-135M stand-in, exploring-teacher SFT", "",
             summary["conclusion"], "",
             (f"Declared at {summary['declared_at']} and amended at {summary['amended_at']} (before the SFT and any "
             f"episode of its checkpoint) in {summary['declaration']}."), "",
             "## Teacher (scripted stand-in), its own rates", "",
             "| split | n | accepted submission | qualified (SFT admission) | B2G | changed file on the issue |",
             "|---|---|---|---|---|---|"]
    for split in ("train", "heldout"):
        r = summary["teacher"][split]["rates"]
        cell = [f"{r[m]['k']}/{r[m]['n']} [{r[m]['ci_low']:.2f}, {r[m]['ci_high']:.2f}]"
                for m in ("valid_submission", "qualified", "b2g", "files_on_issue")]
        lines.append(f"| {split} | {r['qualified']['n']} | " + " | ".join(cell) + " |")
    lines += ["", "Intervals: exact (Clopper-Pearson) 95%.", "",
              "## Held-out: SFT checkpoint vs base model (one episode per instance)", "",
              "| subset | metric | declared | base | SFT | delta [95% CI] | p (test) | n (left out) |",
              "|---|---|---|---|---|---|---|---|"]
    for r in summary["test"]["table"]:
        if not r["n"]:
            lines.append(f"| {r['subset']} | {r['metric']} | {r['declared']} | - | - | - | - | 0 ({r['n_left_out']}) |")
            continue
        ci = "undefined" if r["ci_method"] == "undefined" else f"[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"
        shown = f" ({'shown' if r['shown'] else 'not shown'})" if "shown" in r else ""
        lines.append(f"| {r['subset']} | {r['metric']} | {r['declared']}{shown} | {r['base']:.2f} | {r['sft']:.2f} | "
                     f"{r['delta']:+.2f} {ci} | {r['p_value']:.3g} ({r['test']}) | {r['n']} ({r['n_left_out']}) |")
    lines += ["", ("Intervals: Newcombe's paired score interval (one binary episode per instance); p: exact McNemar. At "
              "small n the two can disagree (an interval above 0 with p >= 0.05); the paragraph above counts a "
              "secondary change only when both say so."), ""]
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib  # lazy: only the analysis draws
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    rows = [r for r in summary["test"]["table"] if r["subset"] == "all"]
    fig, ax = plt.subplots(figsize=(8.5, 4.8), dpi=150)
    width = 0.38
    for j, (ck, colour) in enumerate((("base", "#9e9e9e"), ("sft", "#1f77b4"))):
        for i, r in enumerate(rows):
            v, n = r[ck], r["n"]
            lo, hi = stats.wilson(v, n) if n else (np.nan, np.nan)
            ax.bar(i + (j - 0.5) * width, v, width, color=colour, label=("base model" if ck == "base" else
                   "after SFT on the exploring teacher") if i == 0 else None)
            ax.errorbar(i + (j - 0.5) * width, v, yerr=[[v - lo], [hi - v]], color="black", capsize=3, lw=1)
    teacher = summary["teacher"]["heldout"]["rates"]
    as_teacher = {"valid_submission": "valid_submission", "base_gate": "qualified", "b2g": "b2g",
                  "files_on_issue": "files_on_issue"}
    for i, r in enumerate(rows):
        if r["metric"] in as_teacher:
            ax.plot(i, teacher[as_teacher[r["metric"]]]["value"], marker="D", color="black", ms=6, ls="none",
                    label="the scripted teacher on the same instances" if i == 0 else None)
        for j, ck in enumerate(("base", "sft")):
            if r[ck] is not None:
                ax.text(i + (j - 0.5) * width, 1.05, f"{round(r[ck] * r['n'])}/{r['n']}", ha="center", fontsize=8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([("PRIMARY\n" if r["declared"] == "primary" else "") + r["metric"].replace("_", " ")
                        for r in rows], fontsize=8)
    ax.set_ylabel("share of held-out instances (rate)", fontsize=9)
    ax.set_ylim(0, 1.13)
    p = summary["test"]["primary"]
    ax.set_title(f"SmolLM2-135M stand-in on {p['n']} held-out instances (1 episode each)", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=3, frameon=False)
    ax.tick_params(labelsize=8)
    fig.text(0.01, 0.01, f"Declared primary (accepted submission): {p['delta']:+.2f} [{p['ci_low']:+.2f}, "
             f"{p['ci_high']:+.2f}] (Newcombe 95%), McNemar p = {p['p_value']:.3g}: "
             f"{'shown' if p['shown'] else 'not shown'}. Bars: 95% Wilson intervals.", fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--analyze"]:
        s = analyze()
        print(s["conclusion"])
    else:
        split = instances()
        half = (len(split["heldout"]) + 1) // 2       # heldout-a / heldout-b: the list in two halves, run at once
        split["heldout-a"], split["heldout-b"] = split["heldout"][:half], split["heldout"][half:]
        if sys.argv[1:2] in (["train"], ["heldout"], ["heldout-a"], ["heldout-b"]):
            print(" ".join(split[sys.argv[1]]))
        else:
            print(json.dumps(split, indent=1))
