"""A Multilingual row's eval_script, read as the specification of its build (pure functions).

The script resets the test files, applies the test patch, builds, and runs the test command between the
Start/End markers. Its build steps (after the test patch, before the Start marker) are run once at the Base
when the checkout is prepared, so the checkout holds the Base's build; every run then rebuilds only what its
patches touched. The one change to the row's script is that its clean steps (`CLEAN_STEPS`) are dropped: a
clean would throw that build away and make every check a full build (redis: minutes). The steps dropped are
recorded in each task (`dropped_steps`) with why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

START = ">>>>> Start Test Output"      # swebench's marker (evaluation/official.py reads the same)
CLEAN_STEPS = {
    "make clean": "removes the Base's build the checkout holds; make rebuilds what a patch touched",
    "make distclean": "removes the Base's build (and its dependencies') the checkout holds; make rebuilds what a "
                      "patch touched",
}
_HEREDOC = re.compile(r"<<'(\w+)'\s*$")


def build_steps(eval_script: str) -> list[str]:
    """The lines after the (last) test-patch here-document and before the Start marker, clean steps left out."""
    lines = eval_script.splitlines()
    start = next((i for i, ln in enumerate(lines) if START in ln), None)
    if start is None:
        raise ValueError("the eval_script has no Start Test Output marker")
    first, end_of = 0, None
    for i, ln in enumerate(lines[:start]):
        if end_of is not None:
            if ln == end_of:
                end_of, first = None, i + 1
            continue
        m = _HEREDOC.search(ln)
        if m:
            end_of = m.group(1)
    if first == 0:
        raise ValueError("the eval_script applies no test patch before its Start marker")
    return [ln for ln in lines[first:start] if ln.strip() and ln.strip() not in CLEAN_STEPS]


def _rewrite(eval_script: str, table: Mapping[str, str | None]) -> tuple[str, list[str]]:
    """(the eval_script with each step line in `table` replaced by its value, or dropped where it is None, [the
    steps it had, in script order])."""
    out, found = [], []
    for ln in eval_script.splitlines():
        step = ln.strip()
        if step in table:
            found.append(step)
            if table[step] is None:
                continue
            ln = table[step]
        out.append(ln)
    return "\n".join(out) + ("\n" if eval_script.endswith("\n") else ""), found


def without_clean_steps(eval_script: str) -> tuple[str, dict[str, str]]:
    """(the eval_script without its clean steps, {dropped step: why})."""
    script, found = _rewrite(eval_script, dict.fromkeys(CLEAN_STEPS))
    return script, {step: CLEAN_STEPS[step] for step in found}


def with_replaced_steps(eval_script: str, replace: Mapping[str, tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """(the eval_script with each step line in `replace` ({step: (replacement, why)}) replaced, {step: why} of those
    it had)."""
    script, found = _rewrite(eval_script, {step: new for step, (new, _why) in replace.items()})
    return script, {step: f"run as `{replace[step][0]}`: {replace[step][1]}" for step in found}
