"""Table 5's per-language figures from committed measurements: the harness's own validity - how often the official
bundle (the row's own test patch and the exact command for its FAIL_TO_PASS tests) fails on Base and passes on
Gold through the harness (`execcritic audit --test-source oracle`) - and, beside it, a Test agent stand-in's Base
gate and Base-to-Gold on the same rows (`execcritic generate-tests`, then `audit` of what it qualified). A language
whose Oracle bundles do not reach Base-to-Gold cannot measure a Test agent's either. Each row names the commit and
harness that measured it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from execcritic.results.stats import clopper_pearson
from execcritic.tasks.mlgit.toolchain import TOOLCHAINS


@dataclass(frozen=True)
class Source:
    records: str          # under the results root: an audit's records, or a generation run's generation.jsonl
    test_source: str      # what wrote the tests
    task_set: str
    rows: str             # what the rows are, for the reader
    audit: str = ""       # for a generation run: the audit of its qualified bundles (absent: none qualified)


SOURCES = (
    Source("audit/audit_oracle.jsonl", "Oracle (the row's own test patch)", "verified-sdist",
           "SWE-bench Verified (96-task subset)"),
    Source("multilingual_git/audit/audit_oracle.jsonl", "Oracle (the row's own test patch)", "multilingual-git",
           "SWE-bench Multilingual's C and C++ rows at exact base commits"),
    Source("multilingual_git/audit_js/audit_oracle.jsonl", "Oracle (the row's own test patch)", "multilingual-git",
           "SWE-bench Multilingual's JavaScript/TypeScript rows (axios, immutable-js, vuejs/core) at exact base "
           "commits"),
    Source("multilingual_git/test_agent_standin/generation.jsonl",
           "[stand-in: SmolLM2-135M-Instruct, untrained, smoke budgets]", "multilingual-git",
           "SWE-bench Multilingual's C and C++ rows at exact base commits",
           audit="multilingual_git/test_agent_standin/audit"),
    Source("multilingual_git/test_agent_standin_js/generation.jsonl",
           "[stand-in: SmolLM2-135M-Instruct, untrained, smoke budgets]", "multilingual-git",
           "SWE-bench Multilingual's JavaScript/TypeScript rows at exact base commits (one per repository)",
           audit="multilingual_git/test_agent_standin_js/audit"),
)
_LANGUAGE = {repo.replace("/", "__"): tc.language for repo, tc in TOOLCHAINS.items()}


def language_of(instance_id: str) -> str:
    """Table 5's language of a row: the multilingual-git repositories' toolchain language, else Python."""
    return _LANGUAGE.get(instance_id.rpartition("-")[0], "Python")


def _pct(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" if n else "-"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _made(summary: Path) -> str:
    if not summary.is_file():
        return "?"
    m = json.loads(summary.read_text()).get("manifest", {})
    return f"{m.get('git', {}).get('sha', '?')[:7]}, harness {str(m.get('harness_digest', '?'))[:8]}"


def _outcomes(root: Path, src: Source) -> tuple[dict[str, tuple[int, int]], str] | None:
    """{instance: (Base gate passed, Base-to-Gold)} and who made it; None when the records are missing."""
    path = root / src.records
    if not path.is_file():
        return None
    if not src.audit:                                  # an audit: B and Q per instance
        return ({r["instance_id"]: (int(r.get("B") == 1), int(r.get("Q") == 1)) for r in _jsonl(path)},
                _made(path.with_name(path.name.replace(".jsonl", ".summary.json"))))
    audited: dict[str, int] = {}                       # a generation run: qualified = passed the Base gate
    for f in sorted((root / src.audit).glob("audit_*.jsonl")) if (root / src.audit).is_dir() else ():
        audited.update({r["instance_id"]: int(r.get("Q") == 1) for r in _jsonl(f)})
    out = {}
    for r in _jsonl(path):
        gated = int(bool(r.get("qualified")))
        out[r["instance_id"]] = (gated, gated and audited.get(r["instance_id"], 0))
    return out, _made(path.with_name("summary.json"))


def harness_validity(results: str | Path = "results", sources: tuple[Source, ...] = SOURCES) -> pd.DataFrame:
    """One row per (source, language): Base gate and Base-to-Gold, % with the exact 95% interval over the rows."""
    rows = []
    for src in sources:
        got = _outcomes(Path(results), src)
        if got is None:
            rows.append({"language": "-", "Test source": src.test_source, "task set": src.task_set, "rows": src.rows,
                         "n": 0, "Base gate %": "-", "Base-to-Gold %": "-",
                         "made at": f"not measured ({src.records} is missing)"})
            continue
        outcomes, made = got
        by: dict[str, list[tuple[int, int]]] = {}
        for iid, o in outcomes.items():
            by.setdefault(language_of(iid), []).append(o)
        for lang in sorted(by):
            os_ = by[lang]
            rows.append({"language": lang, "Test source": src.test_source, "task set": src.task_set,
                         "rows": src.rows, "n": len(os_), "Base gate %": _pct(sum(b for b, _ in os_), len(os_)),
                         "Base-to-Gold %": _pct(sum(q for _, q in os_), len(os_)), "made at": made})
    return pd.DataFrame(rows)
