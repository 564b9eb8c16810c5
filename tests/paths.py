"""Where the shared, read-only inputs are: `$EXECCRITIC_SHARED`, else the nearest `shared/` next to the
checkout or one of its parents (dev and CI machines keep it at `../shared`).

The SWE-bench parquet files and the paper live there; they are never copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _find_shared() -> Path:
    if os.environ.get("EXECCRITIC_SHARED"):
        return Path(os.environ["EXECCRITIC_SHARED"])
    for parent in REPO.parents:
        candidate = parent / "shared"
        if (candidate / "data" / "swebench").is_dir():
            return candidate
    return REPO.parent / "shared"


SHARED = _find_shared()
DATA = SHARED / "data" / "swebench"
VERIFIED = DATA / "verified_test.parquet"
MULTILINGUAL = DATA / "multilingual_test.parquet"
PAPER_TEXT = SHARED / "paper" / "execcritic-paper.txt"
