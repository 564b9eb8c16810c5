"""Where the shared, read-only inputs are: `../shared` next to the checkout (or $EXECCRITIC_SHARED).

The SWE-bench parquet files and the paper live there on every dev and CI machine; they are never
copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EXECCRITIC_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data" / "swebench"
VERIFIED = DATA / "verified_test.parquet"
MULTILINGUAL = DATA / "multilingual_test.parquet"
PAPER_TEXT = SHARED / "paper" / "execcritic-paper.txt"
