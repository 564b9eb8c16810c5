"""Training data: Gold mutants on real SWE-bench Verified patches (applied with `git apply` to a synthetic
pre-image and checked line by line against their recomputed hunk headers), Test-agent SFT admission and
conversion, and the Repair RL set."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from execcritic.agents.loop import SUBMIT_MARKER as SUBMIT
from execcritic.agents.loop import Trajectory
from execcritic.agents.models.base import BASH_TOOL
from execcritic.errors import InputError
from execcritic.training import (
    build_repair_rl_set,
    build_sft_set,
    gold_mutants,
    load_trajectory,
    oracle_f2p_node,
    repair_rl_row,
    repair_rl_row_generated,
    sft_admission,
    sft_example,
    sft_messages,
)
from tests.paths import REPO, VERIFIED, needs_rows

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(scope="module")
def verified_rows() -> list[dict]:
    import pandas as pd

    return pd.read_parquet(VERIFIED).to_dict("records")


# ---- checking a patch against a synthetic pre-image --------------------------------------------------


def preimage(gold: str) -> dict[str, list[str]]:
    """Per file, a Base stand-in on which Gold applies exactly: every line a Gold hunk shows on its old side
    at its old line number, unique filler lines between hunks, nothing after the last hunk (git anchors a
    hunk with short trailing context at the end of the file)."""
    from unidiff import PatchSet

    files: dict[str, list[str]] = {}
    for pf in PatchSet(gold):
        if pf.is_added_file:
            continue
        known: dict[int, str] = {}
        for hunk in pf:
            for line in hunk:
                if line.source_line_no is not None:
                    known[line.source_line_no] = line.value
        last = max(known) if known else 0
        files[pf.source_file[2:]] = [known.get(n, f"filler {pf.path} {n}\n") for n in range(1, last + 1)]
    return files


def apply_and_check(patch: str, pre: dict[str, list[str]], workdir: Path) -> dict[str, list[str]]:
    """Apply `patch` with `git apply` to a fresh copy of `pre`, then check every hunk line against the
    headers: context/removed lines sit at their old line numbers in the pre-image, context/added lines at
    their new line numbers in the post-image. Returns the post-image of every file (the patch's and the
    untouched ones); raises AssertionError otherwise."""
    from unidiff import PatchSet

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    for path, lines in pre.items():
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).write_text("".join(lines))
    proc = subprocess.run(["git", "apply", "--verbose", "-"], check=False, input=patch, text=True,
                          cwd=workdir, capture_output=True)
    assert proc.returncode == 0, f"git apply failed: {proc.stderr[-800:]}"
    post: dict[str, list[str]] = {}
    for pf in PatchSet(patch):  # also raises on a hunk whose header counts disagree with its body
        if pf.is_removed_file:
            assert not (workdir / pf.path).exists()
            continue
        target = workdir / pf.target_file[2:]
        post[pf.target_file[2:]] = target.read_text().splitlines(keepends=True)
        old = pre.get(pf.source_file[2:], [])
        for hunk in pf:
            for line in hunk:
                if line.source_line_no is not None:
                    assert old[line.source_line_no - 1] == line.value, (pf.path, "old", line.source_line_no)
                if line.target_line_no is not None:
                    new = post[pf.target_file[2:]]
                    assert new[line.target_line_no - 1] == line.value, (pf.path, "new", line.target_line_no)
    return {str(f.relative_to(workdir)): f.read_text().splitlines(keepends=True)
            for f in sorted(workdir.rglob("*")) if f.is_file()}


def _sample(rows: list[dict]) -> list[dict]:
    """20 rows across the whole file (every 25th) plus the one Gold patch that adds a file."""
    picked = rows[::25]
    picked += [r for r in rows if "new file mode" in r["patch"] and r not in picked][:1]
    return picked


@needs_rows
@needs_git
def test_gold_mutants_apply_and_match_their_headers_on_real_verified_rows(verified_rows, tmp_path):
    kinds: dict[str, int] = {}
    for row in _sample(verified_rows):
        gold = row["patch"]
        pre = preimage(gold)
        gold_post = apply_and_check(gold, pre, tmp_path / "gold")  # the stand-in Base is faithful to Gold
        mutants = gold_mutants(gold, max_per_kind=3)
        assert len({m.patch for m in mutants}) == len(mutants), row["instance_id"]
        for m in mutants:
            kinds[m.kind] = kinds.get(m.kind, 0) + 1
            assert m.patch != gold and m.description
            assert m.kind in ("drop_hunk", "invert_condition", "off_by_one")
            post = apply_and_check(m.patch, pre, tmp_path / "mutant")
            changed = {p for p in set(post) | set(gold_post) if post.get(p) != gold_post.get(p)}
            assert changed, (row["instance_id"], m.description)  # never Gold's behaviour by construction
            if m.kind == "drop_hunk":
                # exactly the described Gold hunk is undone: its new-side region of Gold's post-image
                # (by Gold's own header) holds its old-side lines again, everything else is Gold's
                (path,) = changed
                which = re.match(r"drop hunk (\d+)/\d+ of (\S+)", m.description)
                assert which and which.group(2) == path, m.description
                hunk = _gold_hunk(gold, path, int(which.group(1)) - 1)
                expected = list(gold_post.get(path, []))
                start = hunk.target_start - 1 if hunk.target_length else hunk.target_start
                expected[start:start + hunk.target_length] = [ln.value for ln in hunk if not ln.is_added]
                assert post.get(path, []) == expected, m.description  # a dropped new file: absent
            else:
                (path,) = changed
                a, b = gold_post[path], post[path]
                assert len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1, m.description
    assert all(kinds.get(k, 0) >= 5 for k in ("drop_hunk", "invert_condition", "off_by_one")), kinds


def _gold_hunk(patch: str, path: str, index: int):
    from unidiff import PatchSet

    (pf,) = [pf for pf in PatchSet(patch) if pf.path == path]
    return list(pf)[index]


@needs_git
def test_the_checker_rejects_a_wrong_new_start(tmp_path):
    """Negative control: a mutant whose second hunk keeps Gold's new-side start after the first hunk is
    dropped is caught by the line-number check even though `git apply` itself accepts it."""
    gold = two_hunks()
    dropped = gold_mutants(gold)[0]
    assert dropped.kind == "drop_hunk" and "@@ -20,3 +20,3 @@" in dropped.patch
    stale = dropped.patch.replace("@@ -20,3 +20,3 @@", "@@ -20,3 +22,3 @@")
    with pytest.raises(AssertionError, match="new"):
        apply_and_check(stale, preimage(gold), tmp_path / "w")
    wrong_count = dropped.patch.replace("@@ -20,3 +20,3 @@", "@@ -20,3 +20,4 @@")
    with pytest.raises(Exception):  # noqa: B017 - unidiff or git apply, either must refuse it
        apply_and_check(wrong_count, preimage(gold), tmp_path / "w")


# ---- mutant rules on small diffs ---------------------------------------------------------------------


def two_hunks() -> str:
    return ("diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
            "@@ -2,3 +2,5 @@ def f(x):\n a = 1\n+b = 2\n+c = 3\n d = 4\n k = 0\n"
            "@@ -20,3 +22,3 @@ def g(y):\n e = 5\n-if y == 0:\n+if y > 10:\n h = 6\n")


def added(mutant) -> list[str]:
    return [ln[1:] for ln in mutant.patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def test_drop_hunk_recomputes_later_new_starts():
    ms = [m for m in gold_mutants(two_hunks()) if m.kind == "drop_hunk"]
    assert len(ms) == 2
    assert "@@ -20,3 +20,3 @@ def g(y):" in ms[0].patch and "@@ -2," not in ms[0].patch
    assert "@@ -2,3 +2,5 @@ def f(x):" in ms[1].patch and "@@ -20" not in ms[1].patch


def test_single_hunk_gold_has_no_drop_mutant_and_new_file_header_is_kept():
    new_file = ("diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n"
                "+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+if a != b:\n+    n = 3\n")
    ms = gold_mutants(new_file)
    assert {m.kind for m in ms} == {"invert_condition", "off_by_one"}
    assert all("@@ -0,0 +1,2 @@" in m.patch for m in ms)
    assert ["if a == b:", "    n = 3"] in [added(m) for m in ms]
    off = [added(m) for m in ms if m.kind == "off_by_one"]
    assert off == [["if a != b:", "    n = 4"], ["if a != b:", "    n = 2"]]


@pytest.mark.parametrize("line, inverted", [
    ("if x == 1:", "if x != 1:"),
    ("if x < y:", "if x >= y:"),
    ("while x >= y:", "while x < y:"),
    ("elif a and b:", "elif a or b:"),
    ("if not done:", "if done:"),
    ("if x is not None:", "if x is None:"),
    ("assert flag is True", "assert flag is False"),
    ("if ready:", "if not (ready):"),
    ("if s == 'a==b':", "if s != 'a==b':"),
    ("y = a if a > b else b", "y = a if a <= b else b"),
    ('if key in "a == b":', 'if not (key in "a == b"):'),   # the only `==` is inside a string
    ("if ready:  # x == y", "if not (ready):  # x == y"),   # ... or inside a comment
])
def test_invert_condition_python(line, inverted):
    gold = f"--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-pass\n+{line}\n"
    inv = [m for m in gold_mutants(gold) if m.kind == "invert_condition"]
    assert [added(m) for m in inv] == [[inverted]]


@pytest.mark.parametrize("path, line", [
    ("m.py", "x = compute(a == b)"),          # not a condition line
    ("m.py", "# if x == 1: commented out"),
    ("m.py", "msg = 'if x == 1'"),
    ("README.rst", "if x == 1 then"),          # not a code file
    ("m.rs", "if let Some(v) = map.get::<String>(k) {"),  # generics, not comparisons
])
def test_no_inversion_outside_code_conditions(path, line):
    gold = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-pass\n+{line}\n"
    assert not [m for m in gold_mutants(gold) if m.kind == "invert_condition"]


def test_invert_condition_c_like():
    gold = "--- a/s.c\n+++ b/s.c\n@@ -1 +1,2 @@\n-x;\n+if (!ready && n > 0) {\n+} else if (a == b) {\n"
    assert [added(m) for m in gold_mutants(gold) if m.kind == "invert_condition"] == [
        ["if (ready && n > 0) {", "} else if (a == b) {"], ["if (!ready && n > 0) {", "} else if (a != b) {"]]


@pytest.mark.parametrize("line, expected", [
    ("x = items[1:]", ["x = items[2:]", "x = items[0:]"]),
    ("mode = 0o644", []),                      # octal: left alone
    ("ratio = 1.5", []),
    ("name = 'v2'", []),
    ("n = 0  # 7 tries", ["n = 1  # 7 tries"]),  # no -1 of 0; the comment is not code
    ("call(a, 10, 20)", ["call(a, 11, 20)", "call(a, 9, 20)"]),  # first literal only
    ('x = "3" + 4', ['x = "3" + 5', 'x = "3" + 3']),           # the literal inside the string is not code
])
def test_off_by_one(line, expected):
    gold = f"--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-pass\n+{line}\n"
    assert [added(m)[0] for m in gold_mutants(gold) if m.kind == "off_by_one"] == expected


def test_docstring_lines_are_not_code():
    gold = ('--- a/m.py\n+++ b/m.py\n@@ -1 +1,6 @@\n-pass\n+def f():\n+    """Return 2 items if x == 1.\n'
            '+    >>> f()[0]\n+    """\n+    if x == 1:\n+        return [3]\n')
    got = [(m.kind, m.description) for m in gold_mutants(gold)]
    assert got == [("invert_condition", "invert condition `==` -> `!=` in m.py (added line 5)"),
                   ("off_by_one", "off by one 1 -> 2 in m.py (added line 5)"),
                   ("off_by_one", "off by one 1 -> 0 in m.py (added line 5)"),
                   ("off_by_one", "off by one 3 -> 4 in m.py (added line 6)"),
                   ("off_by_one", "off by one 3 -> 2 in m.py (added line 6)")]


def test_mutants_are_deterministic_deduplicated_and_capped():
    gold = ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,4 @@\n-a\n-b\n+if x == 1:\n+    y = 1\n+if x == 1:\n"
            "+    y = 1\n@@ -10 +12 @@\n-c\n+z = 3\n")
    first, second = gold_mutants(gold), gold_mutants(gold)
    assert first == second
    assert len({m.patch for m in first}) == len(first)
    # the duplicated added lines give distinct mutants (they edit different lines), not duplicates
    assert sum(m.kind == "invert_condition" for m in first) == 2
    capped = gold_mutants(gold, max_per_kind=1)
    assert sorted(m.kind for m in capped) == ["drop_hunk", "invert_condition", "off_by_one"]


def test_malformed_gold_is_an_input_error():
    with pytest.raises(InputError, match="wrong number of lines"):
        gold_mutants("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n+b\n")
    with pytest.raises(InputError, match="empty"):
        gold_mutants("")


# ---- SFT ---------------------------------------------------------------------------------------------


def teacher_trajectory(path: Path) -> Path:
    """A tools-mode Test-agent trajectory written by the real `Trajectory` class."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}
    submit = {"id": "call_2", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": f"echo {SUBMIT}"})}}
    t = Trajectory(meta={"agent": "test", "instance_id": "demo__demo-1",
                         "model": {"class": "OpenAIChatModel", "model": "deepseek-v4-flash"}},
                   messages=[
                       {"role": "system", "content": "You are a maintainer."},
                       {"role": "user", "content": "<original_issue>bug</original_issue>"},
                       {"role": "assistant", "content": "<think>look around first</think>Listing.",
                        "tool_calls": [call], "reasoning_content": "the repo layout matters"},
                       {"role": "tool", "tool_call_id": "call_1", "content": "<returncode>0</returncode>"},
                       {"role": "assistant", "content": "<think>ready</think>", "tool_calls": [submit]},
                       {"role": "tool", "tool_call_id": "call_2", "content": SUBMIT},
                       {"role": "user", "content": "TEST-PATCH SUBMISSION QUALIFIED"},
                   ])
    return t.save(path)


def record(traj: Path, **kw) -> dict:
    return {"instance_id": "demo__demo-1", "source": "model:deepseek-v4-flash-0731", "qualified": True,
            "exit_status": "qualified", "trajectory": str(traj), **kw}


def test_sft_admission_is_base_gate_only():
    ok = {"qualified": True, "exit_status": "qualified", "trajectory": "t.json"}
    assert sft_admission(ok) == (True, "qualified")
    # a Gold audit failure never filters (§4.1)
    assert sft_admission({"qualified": True, "exit_status": "qualified", "trajectory": "t.json",
                          "gold_pass": False, "audit": {"G": 0, "Q": 0}})[0]
    assert sft_admission({"qualified": False, "exit_status": "submissions_exhausted"}) == (
        False, "not_qualified:submissions_exhausted")
    assert sft_admission({"qualified": True, "exit_status": "qualified"}) == (False, "no_trajectory")
    with pytest.raises(InputError, match="contradicts"):
        sft_admission({"qualified": True, "exit_status": "turns_exhausted"})
    with pytest.raises(InputError) as err:
        sft_admission({"exit_status": "qualified"}, "gen.jsonl:3")
    assert err.value.field == "qualified" and err.value.file == "gen.jsonl:3"


def test_repair_sft_admission_is_the_local_gate_only():
    from execcritic.training.datasets import repair_sft_admission

    assert repair_sft_admission({"local_status": "pass", "trajectory": "t.json"}) == (True, "passed")
    # the official verdict never filters; a failing or unchecked terminal patch is not admitted
    assert repair_sft_admission({"local_status": "hard_fail", "final_reason": "budget_exhausted",
                                 "trajectory": "t.json"}) == (False, "not_passed:budget_exhausted")
    assert repair_sft_admission({"local_status": "pass"}) == (False, "no_trajectory")
    with pytest.raises(InputError) as err:
        repair_sft_admission({}, "repair.jsonl:2")
    assert err.value.field == "local_status" and err.value.file == "repair.jsonl:2"


def test_sft_example_with_and_without_reasoning(tmp_path):
    path = teacher_trajectory(tmp_path / "t.json")
    traj = load_trajectory(path)
    visible = sft_example(record(path), traj, reasoning_visible=True)
    hidden = sft_example(record(path), traj, reasoning_visible=False)
    assert visible["tools"] == [BASH_TOOL] and visible["teacher"] == "deepseek-v4-flash-0731"
    assert (visible["reasoning_visible"], hidden["reasoning_visible"]) == (True, False)
    vm, hm = visible["messages"], hidden["messages"]
    # the trailing controller message is dropped
    assert [m["role"] for m in vm] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert vm[2]["content"].startswith("<think>look around first</think>")
    assert vm[2]["reasoning_content"] == "the repo layout matters"
    assert vm[2]["tool_calls"][0]["function"]["arguments"] == {"command": "ls"}
    assert hm[2]["content"] == "Listing." and "reasoning_content" not in hm[2]
    assert hm[4]["content"] == ""
    assert "think" not in json.dumps(hm)


def test_sft_example_renders_with_the_qwen35_training_template(tmp_path):
    """The row is what TRL's SFTTrainer hands to the chat template: render it with the template TRL ships."""
    pytest.importorskip("trl")
    import trl
    from transformers.utils.chat_template_utils import render_jinja_template

    template = (Path(trl.__file__).parent / "chat_templates" / "qwen3_5_think_training.jinja").read_text()
    path = teacher_trajectory(tmp_path / "t.json")
    row = sft_example(record(path), load_trajectory(path), reasoning_visible=True)
    text = render_jinja_template([row["messages"]], tools=row["tools"], chat_template=template)[0][0]
    assert "<parameter=command>\nls\n</parameter>" in text and "the repo layout matters" in text
    hidden = sft_example(record(path), load_trajectory(path), reasoning_visible=False)
    text = render_jinja_template([hidden["messages"]], tools=hidden["tools"], chat_template=template)[0][0]
    assert "look around first" not in text and "the repo layout matters" not in text


@pytest.mark.parametrize("mutate, fld", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(messages={}), "messages"),
    (lambda d: d["messages"][2].update(role="robot"), "messages[2].role"),
    (lambda d: d["messages"][2]["tool_calls"][0]["function"].update(arguments="{not json"),
     "messages[2].tool_calls[0].function.arguments"),
    (lambda d: d["messages"][3].update(tool_call_id="call_9"), "messages[3].tool_call_id"),
])
def test_malformed_trajectory_names_file_and_field(tmp_path, mutate, fld):
    path = teacher_trajectory(tmp_path / "t.json")
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load_trajectory(path)
    assert err.value.file == str(path) and err.value.field == fld


def test_not_json_trajectory_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{")
    with pytest.raises(InputError, match="not JSON") as err:
        load_trajectory(path)
    assert err.value.file == str(path)


def test_build_sft_set_admits_qualified_only_and_respects_limit(tmp_path):
    traj = teacher_trajectory(tmp_path / "trajectories" / "a.json")
    lines = [record(Path("trajectories/a.json")),
             {"instance_id": "x", "source": "model:m", "qualified": False, "exit_status": "turns_exhausted",
              "trajectory": "trajectories/a.json"},
             {"instance_id": "y", "source": "oracle", "qualified": True, "exit_status": "qualified"},
             record(traj, instance_id="demo__demo-2", gold_pass=False)]
    gen = tmp_path / "generation.jsonl"
    gen.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    built = build_sft_set(gen, reasoning_visible=False, trajectory_root=tmp_path)
    assert [r["instance_id"] for r in built.rows] == ["demo__demo-1", "demo__demo-2"]
    assert built.stats() == {"admitted": 2, "rejected": {"no_trajectory": 1, "not_qualified": 1}}
    assert len(build_sft_set(gen, reasoning_visible=False, trajectory_root=tmp_path, limit=1).rows) == 1
    gen.write_text(gen.read_text() + "{oops\n")
    with pytest.raises(InputError) as err:
        build_sft_set(gen, reasoning_visible=False, trajectory_root=tmp_path)
    assert err.value.field == "line 5"


def test_submitted_admission_takes_every_bundle_the_base_gate_ran(tmp_path):
    """sft.admission = submitted (the transfer study's exploring teacher): a bundle the Base gate ran, qualified or
    not, is admitted; one refused before the gate (validation) or never submitted is not."""
    traj = teacher_trajectory(tmp_path / "trajectories" / "a.json")
    gated = [{"stage": "base_gate", "qualified": False}]
    lines = [record(traj, qualified=False, exit_status="submissions_exhausted", attempts=gated),
             record(traj, instance_id="demo__demo-2", attempts=[{"stage": "base_gate", "qualified": True}]),
             record(traj, instance_id="demo__demo-3", qualified=False, exit_status="submissions_exhausted",
                    attempts=[{"stage": "validation"}]),
             record(traj, instance_id="demo__demo-4", qualified=False, exit_status="turns_exhausted", attempts=[])]
    gen = tmp_path / "generation.jsonl"
    gen.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    built = build_sft_set(gen, reasoning_visible=False, trajectory_root=tmp_path, admission="submitted")
    assert [r["instance_id"] for r in built.rows] == ["demo__demo-1", "demo__demo-2"]
    assert built.stats()["rejected"] == {"not_submitted": 2}
    # the paper's rule on the same records: the qualified one only
    paper = build_sft_set(gen, reasoning_visible=False, trajectory_root=tmp_path)
    assert [r["instance_id"] for r in paper.rows] == ["demo__demo-2"]


def test_real_pipeline_trajectory_converts():
    """A trajectory the pipeline wrote with a real model (text mode) loads and converts."""
    paths = sorted((REPO / "results" / "pipeline").glob("*/trajectories/test/*.json"))
    if not paths:
        pytest.skip("no committed Test-agent trajectory")
    msgs = sft_messages(load_trajectory(paths[0]), reasoning_visible=False, source=str(paths[0]))
    assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "assistant"


# ---- Repair RL ---------------------------------------------------------------------------------------


def _row(f2p, **kw) -> dict:
    base = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "patch": "GOLD", "test_patch": "TP",
            "problem_statement": "issue", "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": "[]"}
    return {**base, **kw}


def test_oracle_f2p_node_is_the_first_selectable_entry():
    assert oracle_f2p_node(_row(["t.py::test_b", "t.py::test_a"])) == "t.py::test_b"
    assert oracle_f2p_node(_row(["t.py::test_x[select", "t.py::test_y[a-b]"])) == "t.py::test_y[a-b]"
    with pytest.raises(InputError):
        oracle_f2p_node(_row(["t.py::test_x[select"]))


@needs_rows
def test_repair_rl_set_on_verified_is_deterministic_and_gold_free(verified_rows):
    rows = verified_rows
    a, b = build_repair_rl_set(rows), build_repair_rl_set(list(reversed(rows)))

    def truncated(name: str) -> bool:
        return name.count("[") != name.count("]") or name.count("(") != name.count(")")

    skipped = [r["instance_id"] for r in rows if all(truncated(n) for n in json.loads(r["FAIL_TO_PASS"]))]
    assert a.skipped == {"no_selectable_f2p": len(skipped)} and len(skipped) < 5
    kept = [r for r in rows if r["instance_id"] not in skipped]
    assert [r["instance_id"] for r in a.rows] == [r["instance_id"] for r in kept]
    by_id = {r["instance_id"]: r for r in b.rows}
    for src, row in zip(kept, a.rows):
        assert row == by_id[row["instance_id"]]  # a function of the row alone
        (node,) = row["feedback"]["test_nodes"]
        f2p = json.loads(src["FAIL_TO_PASS"])
        assert node == next(n for n in f2p if not truncated(n))
        assert "patch" not in row["verifier"] and src["patch"] not in json.dumps(row)
        assert row["problem_statement"] == src["problem_statement"]
        assert row["verifier"]["test_patch"] == src["test_patch"]


def test_generated_variant_uses_the_qualified_bundle():
    bundle = {"test_patch": "diff", "test_command": "pytest t.py::test_x", "test_contract": "{}",
              "digest": "d1"}
    recs = [{"instance_id": "o__r-1", "source": "model:rl-35b", "qualified": True, "exit_status": "qualified",
             "bundle": bundle},
            {"instance_id": "o__r-2", "source": "model:rl-35b", "qualified": False,
             "exit_status": "submissions_exhausted", "bundle": None}]
    rows = [_row(["t.py::test_x"]), _row(["t.py::test_y"], instance_id="o__r-2")]
    built = build_repair_rl_set(rows, feedback="generated", generation_records=recs)
    assert [r["instance_id"] for r in built.rows] == ["o__r-1"]
    assert built.skipped == {"no_qualified_bundle": 1}
    fb = built.rows[0]["feedback"]
    assert fb["source"] == "generated" and fb["generator"] == "model:rl-35b" and fb["bundle_digest"] == "d1"
    assert fb["bundle"]["test_command"] == "pytest t.py::test_x"
    two = recs + [dict(recs[0], source="model:x")]
    with pytest.raises(InputError, match="two qualified"):
        build_repair_rl_set(rows, feedback="generated", generation_records=two)
    only_x = build_repair_rl_set(rows, feedback="generated", generation_records=two, generator="model:x")
    assert len(only_x.rows) == 1
    with pytest.raises(InputError) as err:
        repair_rl_row_generated(rows[0], recs[1] | {"instance_id": "o__r-1"})
    assert err.value.field == "qualified"
    assert repair_rl_row(rows[0])["feedback"] == {"source": "oracle_f2p", "test_nodes": ["t.py::test_x"]}
