"""The "not run here: <reason>" registry lives in `execcritic.results.reasons` (one layer down, so the
experiments that decide what cannot run and the figures that show it read the same words). Here: how a
table or figure cuts a reason into the footnotes it shows (one numbered note per distinct part)."""

from __future__ import annotations

import re

from execcritic.results.reasons import CURVES, REASONS, not_run, not_run_curve, reason_ids

PREFIX = "not run here: "
_OPEN, _CLOSE = "([{", ")]}"
_STAND_IN_POINTER = re.compile(r'^measured here with a stand-in instead: row ".*"$')


def reason_parts(note: str, *, stand_in_at: str = "the stand-in row below it") -> list[str]:
    """The separate reasons of a "not run here: a; b" note, each a footnote of its own (so two cells that share
    one reason share its number). A pointer to the stand-in row ('measured here with a stand-in instead: row
    "..."') becomes `stand_in_at`: a paper layout shows that row beside the cell, not by its full label."""
    text = note.removeprefix(PREFIX).strip()
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "`\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == ";" and depth == 0 and text[i + 1:i + 2] == " ":
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    out = []
    for p in (p.strip() for p in parts):
        if _STAND_IN_POINTER.match(p):
            p = f"measured here with a stand-in instead ({stand_in_at})"
        if p and p not in out:
            out.append(p)
    return out


__all__ = ["CURVES", "PREFIX", "REASONS", "not_run", "not_run_curve", "reason_ids", "reason_parts"]
