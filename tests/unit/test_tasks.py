"""Task rows: loading real SWE-bench data, the paper's benchmark statistics, errors that name the fault."""

from __future__ import annotations

import json

import pytest

from execcritic.errors import InputError
from execcritic.tasks import load_tasks
from execcritic.tasks.model import Task
from execcritic.tasks.stats import task_stats
from tests.paths import MULTILINGUAL, VERIFIED, needs_rows

needs_multilingual = pytest.mark.skipif(not MULTILINGUAL.exists(),
                                        reason=f"SWE-bench Multilingual parquet not found at {MULTILINGUAL}")


@needs_rows
def test_verified_statistics_match_the_paper():
    s = task_stats(load_tasks(str(VERIFIED)))
    assert (s["tasks"], s["repos"]) == (500, 12)
    assert s["fail_to_pass"]["median"] == 1 and s["fail_to_pass"]["mean"] == 3.03
    assert s["dataset"]["sha256"].startswith("9cf3c8d4") and s["languages"] == {"python": 500}


@needs_multilingual
def test_multilingual_rows_load_with_array_lists():
    # one official row (tokio-rs__axum-1730) has an empty FAIL_TO_PASS: loading names it...
    with pytest.raises(InputError, match=r"instance=tokio-rs__axum-1730, field=FAIL_TO_PASS"):
        load_tasks(str(MULTILINGUAL))
    # ...or leaves it out and says so
    ts = load_tasks(str(MULTILINGUAL), on_error="skip")
    assert len(ts) == 299 and [i for i, _ in ts.skipped] == ["tokio-rs__axum-1730"]
    assert {t.language for t in ts} >= {"rust", "go", "java", "javascript", "php", "ruby", "c", "cpp"}
    assert ts.manifest()["skipped_rows"][0][0] == "tokio-rs__axum-1730"


def _row(**over):
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "patch": "diff", "test_patch": "diff",
           "problem_statement": "issue", "FAIL_TO_PASS": '["t::a"]', "PASS_TO_PASS": "[]"}
    row.update(over)
    return row


def test_bad_rows_name_the_instance_and_field(tmp_path):
    with pytest.raises(InputError, match=r"instance=o__r-1, field=FAIL_TO_PASS"):
        Task.from_row(_row(FAIL_TO_PASS="not json"), source="x.jsonl")
    with pytest.raises(InputError, match=r"field=repo"):
        Task.from_row(_row(repo="norepo"))
    with pytest.raises(InputError, match=r"field=patch"):
        Task.from_row(_row(patch=""))
    with pytest.raises(InputError, match=r"FAIL_TO_PASS is empty"):
        Task.from_row(_row(FAIL_TO_PASS="[]"))
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + json.dumps(_row()) + "\n")
    with pytest.raises(InputError, match=r"duplicate instance_id.*instance=o__r-1"):
        load_tasks(str(path))
    path.write_text(json.dumps(_row()) + "\n{broken\n")
    with pytest.raises(InputError, match=r"line 2 is not JSON"):
        load_tasks(str(path))
    with pytest.raises(InputError, match=r"not a hub dataset id"):
        load_tasks("no-such-file-or-alias")


def test_rows_round_trip_and_the_view_hides_gold():
    t = Task.from_row(_row(FAIL_TO_PASS=["t::a", "t::b"]))
    assert t.fail_to_pass == ("t::a", "t::b")
    again = Task.from_row(t.to_row())
    assert again == t
    view = t.view()
    assert (view.instance_id, view.problem_statement, view.language) == (t.instance_id, t.problem_statement, "python")
