"""The candidate's lines as the guard is told them (harness/instrument.py `added_lines`): found in the file as
applied, not at the hunk header's number - a patch applies with an offset where the checkout is not the tree it
was written against (verified-sdist's release trees)."""

from __future__ import annotations

import pandas as pd

from execcritic.bundle.diff import parse_patch
from execcritic.harness.instrument import added_lines, candidate_facts
from tests.paths import DATA

PATCH = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -2,3 +2,4 @@\n a = 1\n b = 2\n+c = 3\n d = 4\n"
         "@@ -10,2 +11,3 @@\n x = 1\n+y = 2\n z = 3\n")


def test_the_header_numbers_when_the_file_is_not_read():
    assert added_lines(PATCH) == {"m.py": [[4, 4], [12, 12]]}


def test_hunks_are_found_where_they_applied():
    applied = "\n".join(["# one", "# two", "# three", "", "a = 1", "b = 2", "c = 3", "d = 4"] + ["pass"] * 5
                        + ["x = 1", "y = 2", "z = 3"]) + "\n"
    assert added_lines(PATCH, {"m.py": applied}.get) == {"m.py": [[7, 7], [15, 15]]}


def test_a_hunk_not_found_leaves_the_whole_file_the_candidates():
    assert added_lines(PATCH, {"m.py": "something else\n"}.get) == {"m.py": None}
    assert candidate_facts(PATCH, None, {"m.py": "something else\n"}.get)["changed_lines"] == {}


def test_django_14017_gold_in_the_release_tree():
    """The measured case: the Gold's hunk says line 40; in Django 3.2a1's tree (verified-sdist) the same lines
    stand 30 lines lower, below a metaclass whose `__subclasscheck__` the header's numbers would name."""
    gold = pd.read_parquet(DATA / "verified_test.parquet").set_index("instance_id").loc["django__django-14017", "patch"]
    hunk = parse_patch(gold).files[0].hunks[0]
    new_side = [ln[1:] for ln in hunk.lines if ln[:1] in (" ", "+")]
    applied = "\n".join(["# release-tree line"] * (hunk.new_start + 29) + new_side) + "\n"
    first_added = next(i for i, ln in enumerate(hunk.lines) if ln.startswith("+"))
    want = hunk.new_start + 30 + sum(ln[:1] == " " for ln in hunk.lines[:first_added])
    assert added_lines(gold)["django/db/models/query_utils.py"] == [[want - 30, want - 30]]
    assert added_lines(gold, {"django/db/models/query_utils.py": applied}.get) == {
        "django/db/models/query_utils.py": [[want, want]]}
