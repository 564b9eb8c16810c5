"""Base-source stand-ins for the oracle check when no checkout exists (offline, no GitHub).

Resolving a docstring-named Django test or the class of an added method needs the Base source. The real
harness passes a reader over the Base checkout. Offline the oracle check can use *outlines* of release
archives near Base: per file, the test definitions (classes, name, docstring first line) and nothing
else. `experiments/oracle_validation.py` makes them from PyPI archives and records which archive each
came from.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from execcritic.bundle.diff import BaseReader
from execcritic.bundle.languages import python as py

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task


def outline_of(text: str) -> dict:
    """The test outline of a Python file, line numbers kept: `defs` [[classes], name, docstring first
    line or None, line, indent] for every test definition, and `blocks` [indent, "class"|"def", name,
    line] for every class and every unindented def (what decides which class encloses a line)."""
    lines = text.splitlines()
    defs = []
    for d in py.scan_test_defs(lines):
        if d.certain:
            defs.append(
                [list(d.scope), d.name, py.docstring_first_line(lines, d.index), d.index + 1, d.indent]
            )
    blocks = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)class\s+(\w+)", line) or re.match(r"^()(?:async\s+)?def\s+(\w+)", line)
        if m:
            kind = "class" if line.lstrip().startswith("class") else "def"
            blocks.append([len(m.group(1).expandtabs(8)), kind, m.group(2), i + 1])
    return {"defs": defs, "blocks": blocks}


def render_outline(outline: dict) -> str:
    """Python text with the outline's classes and test definitions at their original line numbers
    (blank lines elsewhere), so that line-based lookups read it like the file itself."""
    quote = '"' * 3
    placed: dict[int, str] = {}
    for indent, kind, name, line in outline.get("blocks", []):
        placed[line] = " " * indent + (f"class {name}:" if kind == "class" else f"def {name}():")
    for _scope, name, doc, line, indent in outline.get("defs", []):
        pad = " " * indent
        placed[line] = pad + f"def {name}({'self' if indent else ''}):"
        body = pad + "    " + (quote + doc.replace(quote, "'" * 3) + quote if doc else "pass")
        placed.setdefault(line + 1, body)
    if not placed:
        return ""
    return "\n".join(placed.get(n, "") for n in range(1, max(placed) + 1)) + "\n"


def outline_reader(outlines: dict, task: "Task") -> BaseReader | None:
    """A BaseReader over the outlines recorded for the task's (repo, version), or None."""
    entry = outlines.get("sources", outlines).get(f"{task.repo}@{task.version}")
    if not entry:
        return None
    files = entry.get("files", {})

    def read(path: str) -> str | None:
        entries = files.get(path)
        return render_outline(entries) if entries is not None else None

    read.exact_lines = False  # type: ignore[attr-defined]  # a release's lines are not Base's
    return read
