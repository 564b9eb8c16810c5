"""Where the shared, read-only inputs are: `$EXECCRITIC_SHARED`, else the nearest `shared/` next to the
checkout or one of its parents (dev and CI machines keep it at `../shared`). The Verified rows alone may also be
named by `$EXECCRITIC_VERIFIED` when it is a local file (what the CLI reads), so a checkout anywhere can test.

The SWE-bench parquet files and the paper live there; they are never copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def _find_verified() -> Path:
    shared = DATA / "verified_test.parquet"
    local = Path(os.environ.get("EXECCRITIC_VERIFIED", ""))
    return local if not shared.is_file() and local.is_file() else shared


VERIFIED = _find_verified()
MULTILINGUAL = DATA / "multilingual_test.parquet"
PAPER_TEXT = SHARED / "paper" / "execcritic-paper.txt"


def rows_missing() -> str | None:
    """Why the tests that read real rows cannot run here (the header's words), or None."""
    return None if VERIFIED.is_file() else rows_header()


def rows_header() -> str:
    """The line pytest prints first: where the SWE-bench rows come from, or how to give them."""
    if VERIFIED.is_file():
        return f"SWE-bench Verified rows: {VERIFIED}"
    return (f"SWE-bench Verified rows NOT FOUND (looked for {DATA / 'verified_test.parquet'}): the tests that run real "
            "rows skip (under CI=true, that fails the run); set EXECCRITIC_SHARED to the shared/ folder or "
            "EXECCRITIC_VERIFIED to a local verified_test.parquet")


# a test that reads the Verified rows skips, saying where they were looked for, when they are missing
# (under CI=true such a skip fails the run: tests/allowed_skips.py)
needs_rows = pytest.mark.skipif(rows_missing() is not None, reason=rows_header())
