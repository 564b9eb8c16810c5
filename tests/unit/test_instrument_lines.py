"""The candidate's lines as the guard is told them (harness/instrument.py `added_lines`): found in the file as
applied, not at the hunk header's number - a patch applies with an offset where the checkout is not the tree it
was written against (verified-sdist's release trees)."""

from __future__ import annotations

import pandas as pd

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
    """The measured case: the Gold's hunk says line 43; in Django 3.2a1's tree `_combine` is 30 lines lower."""
    gold = pd.read_parquet(DATA / "verified_test.parquet").set_index("instance_id").loc["django__django-14017", "patch"]
    tree = ["# filler"] * 30 + ["    def _combine(self, other, conn):",
                                "        if not(isinstance(other, Q) or getattr(other, 'conditional', False) is True):",
                                "            raise TypeError(other)", "", "        # If the other Q() is empty, ignore "
                                "it and just use `self`."]
    applied = "\n".join(["x"] * 40 + ["        super().__init__(children=[*args, *sorted(kwargs.items())], "
                                      "connector=_connector, negated=_negated)", ""] + tree[30:]) + "\n"
    got = added_lines(gold, {"django/db/models/query_utils.py": applied}.get)
    assert got == {"django/db/models/query_utils.py": [[44, 44]]}, got
