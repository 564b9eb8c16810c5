"""Which SWE-bench Verified rows a git source can serve: for each repository, how many of its rows' base commits and
environment-setup commits the source holds whole (the commit and every object of its tree: `tasks.git.source.
has_commit`, the check qualify-git itself makes), and per row which source serves its Base.

Why: verified-git fetches each row's exact commits from a source the user names; where the upstream repository is
too large to mirror (Django's snapshot is refused on this machine), a fork with the same history serves the same
commits (a commit hash names its content). A row needs its base commit whole; a version whose setup commit no source
serves whole has its env installed at a stand-in (the newest Base the source serves whole: `setup_deviation`).

`--fill INSTANCES.jsonl` writes each decided row's serving source into qualify-git's `instances.jsonl` where the row
did not record the source it was fetched from (rows qualified before sources were recorded), marked `source_checked`
with this run's date, so the recipe names a source for every row; a row that recorded its source keeps it.

  EXECCRITIC_VERIFIED=... PYTHONPATH=. python experiments/verified_git_sources.py \\
      --source django/django=/work/.mirror/apprent1c3+django/repo --label django/django=github.com/apprent1c3/django \\
      --out results/verified_git/sources.json [--fill results/verified_git/instances.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from execcritic.errors import InputError
from execcritic.files import atomic_write
from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.tasks.git.source import has_commit


def served(rows: pd.DataFrame, git_dir: str) -> dict:
    """What `git_dir` serves whole of `rows` (one repository's Verified rows)."""
    base = {c: has_commit(git_dir, c) is True for c in set(rows["base_commit"])}
    setup = {c: has_commit(git_dir, c) is True for c in set(rows["environment_setup_commit"])}
    per_row = {i: {"base": base[b], "setup": setup[s]}
               for i, b, s in zip(rows["instance_id"], rows["base_commit"], rows["environment_setup_commit"])}
    return {"rows": len(rows), "base_commits_held": sum(base.values()), "base_commits": len(base),
            "setup_commits_held": sum(setup.values()), "setup_commits": len(setup),
            "rows_served": sum(r["base"] and r["setup"] for r in per_row.values()),
            "rows_base_served": sum(r["base"] for r in per_row.values()),
            "versions_without_setup_commit": sorted({v for v, s in zip(rows["version"], rows["environment_setup_commit"])
                                                     if not setup[s]}),
            "per_row": per_row}


def fill(instances: Path, repositories: dict, checked: str) -> tuple[int, int]:
    """Name the serving source of every decided row of `instances` that recorded none. Returns (filled, kept)."""
    lines = [json.loads(x) for x in instances.read_text().splitlines() if x.strip()]
    filled = kept = 0
    for r in lines:
        if r.get("source"):
            kept += 1
            continue
        repo = repositories.get(r["repo"])
        if repo and repo["per_row"].get(r["instance_id"], {}).get("base"):
            r["source"], r["source_checked"] = repo["source"], checked
            filled += 1
    atomic_write(instances, "".join(json.dumps(r) + "\n" for r in lines))   # qualify-git's resumable state
    return filled, kept


def main(argv: list[str] | None = None) -> int:
    note_start()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", action="append", required=True, metavar="OWNER/NAME=GIT_DIR",
                    help="a repository and the git directory to check (a fork's mirror); repeatable")
    ap.add_argument("--label", action="append", default=[], metavar="OWNER/NAME=WHAT",
                    help="what the source is (e.g. the fork's name), per repository")
    ap.add_argument("--out", default="results/verified_git/sources.json")
    ap.add_argument("--fill", type=Path, metavar="INSTANCES_JSONL",
                    help="name the serving source of each row there that recorded none (qualify-git's instances.jsonl)")
    args = ap.parse_args(argv)
    dataset = os.environ.get("EXECCRITIC_VERIFIED")
    if not dataset or not Path(dataset).is_file():
        raise InputError("set EXECCRITIC_VERIFIED to SWE-bench Verified's test parquet", field="EXECCRITIC_VERIFIED")
    if args.fill is not None and not args.fill.is_file():
        raise InputError(f"{args.fill} is not a file (qualify-git's instances.jsonl)", field="--fill")
    df = pd.read_parquet(dataset)
    labels = dict(x.split("=", 1) for x in args.label)
    out = {}
    for spec in args.source:
        repo, _, git_dir = spec.partition("=")
        rows = df[df["repo"] == repo]
        if rows.empty or not Path(git_dir).is_dir():
            raise InputError(f"{spec}: no Verified row of {repo!r}, or no git directory there", field="--source")
        out[repo] = {"source": labels.get(repo, git_dir), **served(rows, git_dir)}
        print(f"{repo}: {out[repo]['rows_base_served']} of {out[repo]['rows']} Bases served whole by "
              f"{out[repo]['source']} ({out[repo]['rows_served']} with their setup commit)", file=sys.stderr)
    checked = time.strftime("%Y-%m-%d", time.gmtime())
    extra: dict = {"artifact": "verified-git-sources"}
    if args.fill is not None:
        filled, kept = fill(args.fill, out, checked)
        extra["filled"] = {"instances": str(args.fill), "rows_filled": filled, "rows_recorded": kept}
        print(f"{args.fill}: {filled} rows named by this check, {kept} kept the source they recorded", file=sys.stderr)
    write_result(Path(args.out), {"checked": checked, "repositories": out},
                 build_manifest(command=sys.argv, datasets=[{"source": dataset, "rows": len(df)}], extra=extra))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
