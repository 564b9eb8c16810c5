"""The harness's own validity figure per language (Table 5's notebook): how often the official bundle - the row's
own test patch and the exact command for its FAIL_TO_PASS tests - fails on Base and passes on Gold through the
harness (`execcritic audit --test-source oracle`). A language whose Oracle bundles do not reach Base-to-Gold cannot
measure a Test agent's either; the rate is read from the committed audits, each with the commit that made it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from execcritic.results.stats import clopper_pearson
from execcritic.tasks.mlgit.toolchain import TOOLCHAINS

# (audit records, task set, label) of the committed audits; a missing file is a row that says so
AUDITS = (("audit/audit_oracle.jsonl", "verified-sdist", "SWE-bench Verified (96-task subset)"),
          ("multilingual_git/audit/audit_oracle.jsonl", "multilingual-git",
           "SWE-bench Multilingual, C and C++ rows at exact base commits"))
_LANGUAGE = {repo.replace("/", "__"): tc.language for repo, tc in TOOLCHAINS.items()}


def language_of(instance_id: str) -> str:
    """Table 5's language of a row: the multilingual-git repositories' toolchain language, else Python."""
    return _LANGUAGE.get(instance_id.rpartition("-")[0], "Python")


def _pct(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" if n else "-"


def harness_validity(results: str | Path = "results", audits: Iterable[tuple[str, str, str]] = AUDITS
                     ) -> pd.DataFrame:
    """One row per (task set, language): the Oracle bundles' Base gate and Base-to-Gold, % with the exact 95%
    interval over the audited rows, and the commit and harness that measured them."""
    rows = []
    for rel, task_set, label in audits:
        path = Path(results) / rel
        if not path.is_file():
            rows.append({"language": "-", "task set": task_set, "rows": label, "n": 0, "Base gate %": "-",
                         "Base-to-Gold %": "-", "made at": f"not measured ({rel} is missing)"})
            continue
        records = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
        summary = path.with_name(path.name.replace(".jsonl", ".summary.json"))
        made = "?"
        if summary.is_file():
            m = json.loads(summary.read_text()).get("manifest", {})
            made = f"{m.get('git', {}).get('sha', '?')[:7]}, harness {str(m.get('harness_digest', '?'))[:8]}"
        by: dict[str, list[dict]] = {}
        for r in records:
            by.setdefault(language_of(r["instance_id"]), []).append(r)
        for lang in sorted(by):
            rs = by[lang]
            b = sum(1 for r in rs if r.get("B") == 1)
            q = sum(1 for r in rs if r.get("Q") == 1)
            rows.append({"language": lang, "task set": task_set, "rows": label, "n": len(rs),
                         "Base gate %": _pct(b, len(rs)), "Base-to-Gold %": _pct(q, len(rs)), "made at": made})
    return pd.DataFrame(rows)
