"""The exploring Test-agent teacher (execcritic/training/explorer.py) decides from what the agent is shown - never
from Gold - and reads real issues the way the transfer study needs; the evaluation's transfer metrics
(training/heldout.transfer_metrics) judge the files an episode changed."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from execcritic.agents.models.base import ModelResponse
from execcritic.tasks.model import Task
from execcritic.training import explorer
from execcritic.training.heldout import transfer_metrics
from tests.paths import VERIFIED, needs_rows

pytestmark = needs_rows


@pytest.fixture(scope="module")
def rows() -> dict[str, Task]:
    ids = {"sympy__sympy-24443", "django__django-14017", "sympy__sympy-13031", "psf__requests-5414",
           "pytest-dev__pytest-7571"}
    df = pd.read_parquet(VERIFIED)
    return {r["instance_id"]: Task.from_row(r) for r in df[df["instance_id"].isin(ids)].to_dict("records")}


def prompt(issue: str) -> list[dict]:
    return [{"role": "system", "content": "sys"},
            {"role": "user", "content": f"intro\n<original_issue>\n{issue}\n</original_issue>\nrest"}]


def observe(messages: list[dict], output: str) -> list[dict]:
    return [*messages, {"role": "assistant", "content": ""},
            {"role": "tool", "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>"}]


def commands(model) -> list[str]:
    return [json.loads(c["function"]["arguments"])["command"] for c in model.get("tool_calls") or []]


def test_the_issue_example_is_the_code_that_compiles(rows):
    # an IPython session inside a fence, its traceback dropped (sympy-24443)
    code = max(explorer.code_blocks(rows["sympy__sympy-24443"].problem_statement), key=len)
    assert "homomorphism(D3, D3, D3.generators, D3.generators)" in code and "ValueError" not in code
    # `In [n]:` lines outside any fence, the Out[] and traceback lines dropped (django-14017)
    code = max(explorer.code_blocks(rows["django__django-14017"].problem_statement), key=len)
    assert code.splitlines() == ["Exists(Product.objects.all()) & Q()", "Q() & Exists(Product.objects.all())"]
    # CRLF issue text (sympy-13031)
    assert "sy.Matrix.hstack(M1, M2, M3, M4).shape" in explorer.code_blocks(rows["sympy__sympy-13031"].problem_statement)[0]
    assert "hstack" in explorer.issue_names(rows["sympy__sympy-13031"].problem_statement)


def test_runner_and_test_file_come_from_the_observations():
    assert explorer.runner_of("AUTHORS\nbin/test\nsympy\n") == "bin/test"
    assert explorer.runner_of("django\ntests\ntests/runtests.py\n") == "tests/runtests.py"
    assert explorer.runner_of("src\ntesting\ntox.ini\n") == "pytest"
    msgs = prompt("`Exists` and ```\nQ() & Exists(Product.objects.all())\n```")
    msgs = observe(msgs, "django\ntests/runtests.py\ndjango/db/models/expressions.py")
    msgs = observe(msgs, "tests/expressions/tests.py:23\ntests/lookup/tests.py:5")   # sorted by count, as asked
    msgs = observe(msgs, "tests/expressions/tests.py\nimport datetime")
    (write,) = explorer.write(msgs)
    assert "cat /tmp/regression_test.py >> tests/expressions/tests.py" in write
    assert ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
            "expressions.tests.IssueRegressionTests.test_issue_regression") in write
    assert "class IssueRegressionTests(_IssueTestCase):" in write and "Q() & Exists(Product.objects.all())" in write


def test_a_test_file_beside_the_defining_module_is_preferred():
    msgs = observe(prompt("`homomorphism`"), "bin/test\nsympy/combinatorics/homomorphisms.py")
    msgs = observe(msgs, "sympy/combinatorics/tests/test_perm_groups.py:30\n"
                         "sympy/combinatorics/tests/test_homomorphisms.py:9\nsympy/core/tests/test_args.py:40")
    assert explorer._pick_test_file(msgs) == "sympy/combinatorics/tests/test_perm_groups.py"
    msgs = observe(prompt("`homomorphism`"), "bin/test\nsympy/combinatorics/homomorphisms.py")
    msgs = observe(msgs, "sympy/core/tests/test_args.py:40\nsympy/combinatorics/tests/test_homomorphisms.py:9")
    assert explorer._pick_test_file(msgs) == "sympy/combinatorics/tests/test_homomorphisms.py"


def test_a_star_import_of_the_example_goes_above_the_test():
    src = explorer.regression_test_source("from sympy.combinatorics import *\nD3 = DihedralGroup(3)", "bin/test")
    compile(src, "<test>", "exec")
    assert src.index("from sympy.combinatorics import *") < src.index("def test_issue_regression")


def test_explorer_reads_no_gold(rows):
    """Two tasks with the same issue and different Gold produce the same moves from the same observations, and no
    move carries a byte of Gold or of the official tests."""
    task = rows["sympy__sympy-24443"]
    poisoned = dataclasses.replace(task, patch="diff --git a/POISON_GOLD b/POISON_GOLD\n",
                                   test_patch="diff --git a/POISON_TEST b/POISON_TEST\n",
                                   fail_to_pass=("POISON_NODE",), pass_to_pass=("POISON_P2P",))
    outputs = ["bin/test\nsympy/combinatorics/homomorphisms.py",
               "sympy/combinatorics/tests/test_homomorphisms.py:9", "sympy/combinatorics/tests/test_homomorphisms.py"]
    seen = []
    for t in (task, poisoned):
        model = explorer.exploring_test_teacher(t)
        msgs = prompt(task.problem_statement)
        moves = []
        for out in [*outputs, "ok", "ok"]:
            res = model.query(msgs)
            assert isinstance(res, ModelResponse)
            moves.append(commands(res.message))
            msgs = observe(msgs, out)
        seen.append(moves)
    assert seen[0] == seen[1]
    flat = json.dumps(seen[1])
    assert "POISON" not in flat and task.test_patch[:200] not in flat
    assert "bin/test -C --verbose sympy/combinatorics/tests/test_homomorphisms.py -k test_issue_regression" in flat


def test_transfer_metrics_judge_the_changed_files(rows):
    task = rows["psf__requests-5414"]   # Gold and the official test change requests/models.py, tests/test_requests.py
    ok = {"turns": 5, "format_errors": 0, "touched": ["tests/test_requests.py"], "touched_dirs_at_base": ["tests"]}
    assert transfer_metrics(ok, task) == {"protocol_valid": 1.0, "files_in_repo": 1.0, "files_on_issue": 1.0}
    # another repository's file at the root: not the repository's, not the issue's; a format error
    bad = {"turns": 5, "format_errors": 1, "touched": ["sympy/tests/test_x.py"], "touched_dirs_at_base": []}
    assert transfer_metrics(bad, task) == {"protocol_valid": 0.0, "files_in_repo": 0.0, "files_on_issue": 0.0}
    # git's own files (the workspace's sanitizing gc packs objects) are not the episode's changes
    gc = {"turns": 6, "format_errors": 6, "touched": [".git/index", ".git/objects/pack/p.pack"],
          "touched_dirs_at_base": [".git", ".git/objects/pack"]}
    assert transfer_metrics(gc, task) == {"protocol_valid": 0.0, "files_in_repo": 0.0, "files_on_issue": 0.0}
    # nothing changed: not "in the repository"
    assert transfer_metrics({"turns": 2, "touched": [], "touched_dirs_at_base": []}, task)["files_in_repo"] == 0.0


TRAJECTORIES = Path(__file__).resolve().parents[2] / "results" / "learning_curve" / "transfer" / "teacher" / \
    "trajectories.jsonl.gz"


def test_the_committed_teacher_moves_replay_from_their_messages():
    """Every command of the transfer study's 45 teacher episodes is what the teacher computes from the messages
    before it: the trajectories the SFT learned from carry no move that the observation does not explain."""
    rows = [json.loads(x) for x in gzip.decompress(TRAJECTORIES.read_bytes()).decode().splitlines()]
    assert len(rows) == 45
    for row in rows:
        msgs = row["messages"]
        turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        assert len(turns) == len(explorer.MOVES), row["instance_id"]
        for move, i in zip(explorer.MOVES, turns):
            assert commands(msgs[i]) == move(msgs[:i]), (row["instance_id"], move.__name__)
