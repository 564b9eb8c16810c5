"""Which SWE-bench Verified rows a git source can serve: for each repository, how many of its rows' base commits and
environment-setup commits the source holds (`git cat-file -e`), and so how many rows it serves in full.

Why: verified-git fetches each row's exact commits from a source the user names; where the upstream repository is
too large to mirror (Django's snapshot is refused on this machine), a fork with the same history serves the same
commits (a commit hash names its content). A row needs both its base and its version's setup commit.

  EXECCRITIC_VERIFIED=... PYTHONPATH=. python experiments/verified_git_sources.py \\
      --source django/django=/work/.mirror/apprent1c3+django/repo --out results/verified_git/sources.json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from execcritic.errors import InputError
from execcritic.results.manifest import build_manifest, note_start, write_result


def has_commit(git_dir: str, sha: str) -> bool:
    return subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{sha}^{{commit}}"],
                          capture_output=True, check=False).returncode == 0


def served(rows: pd.DataFrame, git_dir: str) -> dict:
    """What `git_dir` holds of `rows` (one repository's Verified rows)."""
    base = {c: has_commit(git_dir, c) for c in set(rows["base_commit"])}
    setup = {c: has_commit(git_dir, c) for c in set(rows["environment_setup_commit"])}
    ok = [base[b] and setup[s] for b, s in zip(rows["base_commit"], rows["environment_setup_commit"])]
    return {"rows": len(rows), "base_commits_held": sum(base.values()), "base_commits": len(base),
            "setup_commits_held": sum(setup.values()), "setup_commits": len(setup), "rows_served": sum(ok),
            "versions_without_setup_commit": sorted({v for v, s in zip(rows["version"], rows["environment_setup_commit"])
                                                     if not setup[s]})}


def main(argv: list[str] | None = None) -> int:
    note_start()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", action="append", required=True, metavar="OWNER/NAME=GIT_DIR",
                    help="a repository and the git directory to check (a fork's mirror); repeatable")
    ap.add_argument("--label", action="append", default=[], metavar="OWNER/NAME=WHAT",
                    help="what the source is (e.g. the fork's name), per repository")
    ap.add_argument("--out", default="results/verified_git/sources.json")
    args = ap.parse_args(argv)
    dataset = os.environ.get("EXECCRITIC_VERIFIED")
    if not dataset or not Path(dataset).is_file():
        raise InputError("set EXECCRITIC_VERIFIED to SWE-bench Verified's test parquet", field="EXECCRITIC_VERIFIED")
    df = pd.read_parquet(dataset)
    labels = dict(x.split("=", 1) for x in args.label)
    out = {}
    for spec in args.source:
        repo, _, git_dir = spec.partition("=")
        rows = df[df["repo"] == repo]
        if rows.empty or not Path(git_dir).is_dir():
            raise InputError(f"{spec}: no Verified row of {repo!r}, or no git directory there", field="--source")
        out[repo] = {"source": labels.get(repo, git_dir), **served(rows, git_dir)}
        print(f"{repo}: {out[repo]['rows_served']} of {out[repo]['rows']} rows served by {out[repo]['source']}",
              file=sys.stderr)
    write_result(Path(args.out), {"repositories": out},
                 build_manifest(command=sys.argv, datasets=[{"source": dataset, "rows": len(df)}],
                                extra={"artifact": "verified-git-sources"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
