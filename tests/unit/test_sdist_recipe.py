"""verified-sdist: the committed recipe loads and validates; listing builds nothing; the pure parts
(release rule, local eval script, grading + fail-closed checks, qualification decision) behave.

Uses the real Verified rows from ../shared (never copied into the repo)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from execcritic.errors import InputError
from execcritic.evaluation.official import GIT_APPLY_CMDS, OfficialResult, grade_log, local_eval_script
from execcritic.tasks.sdist.recipe import RECIPE_PATH, load_recipe, parse_recipe
from execcritic.tasks.sdist.select import Release, releases_before, releases_from_json
from tests.paths import VERIFIED, needs_rows



@pytest.fixture(scope="module")
def verified_rows():
    from execcritic.tasks import load_tasks

    return load_tasks(str(VERIFIED))


# ---- the committed recipe ------------------------------------------------------------------------

def test_committed_recipe_meets_the_target():
    recipe = load_recipe()
    repos = {i.repo for i in recipe.instances}
    assert len(recipe.instances) >= 40, len(recipe.instances)
    assert len(repos) >= 4, repos
    for inst in recipe.instances:
        env = recipe.envs[inst.env]
        assert env.repo == inst.repo
        assert env.lock, f"{inst.env} has no lock"
        assert len(env.release.sha256) == 64
        assert env.release.filename.startswith(env.release.project) or \
            env.release.filename.lower().startswith(env.release.project.lower())
        assert env.spec["test_cmd"] and env.spec["install"]
        for node, why in inst.p2p_excluded.items():
            assert node and why


@needs_rows
def test_recipe_instances_exist_in_verified(verified_rows):
    recipe = load_recipe()
    for inst in recipe.instances:
        row = verified_rows.get(inst.instance_id)
        assert row.repo == inst.repo and row.version == inst.version
        assert set(inst.p2p_excluded) <= set(row.pass_to_pass)


def test_recipe_validation_names_the_field(tmp_path):
    data = json.loads(RECIPE_PATH.read_text())
    key = next(iter(data["envs"]))
    bad = json.loads(json.dumps(data))
    bad["envs"][key]["release"]["sha256"] = "xyz"
    with pytest.raises(InputError, match="release.sha256") as exc:
        parse_recipe(bad, path="r.json")
    assert f"env:{key}" in str(exc.value)
    bad = json.loads(json.dumps(data))
    bad["instances"][0]["env"] = "nope"
    with pytest.raises(InputError, match="env 'nope' is not defined"):
        parse_recipe(bad, path="r.json")
    bad = json.loads(json.dumps(data))
    bad["instances"].append(dict(bad["instances"][0]))
    with pytest.raises(InputError, match="duplicate"):
        parse_recipe(bad, path="r.json")


def test_cli_list_json_builds_nothing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from execcritic.cli import app

    monkeypatch.setenv("EXECCRITIC_CACHE", str(tmp_path / "cache"))
    out = CliRunner().invoke(app, ["tasks", "list", "--dataset", "verified-sdist", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert len(rows) == len(load_recipe().instances)
    assert {"instance_id", "repo", "release"} <= set(rows[0])
    assert not (tmp_path / "cache").exists()
    bad = CliRunner().invoke(app, ["tasks", "list", "-d", "nope", "--json"])
    assert bad.exit_code == 2 and "verified-sdist" in bad.stdout


@needs_rows
def test_load_verified_sdist_rebases_rows(monkeypatch):
    monkeypatch.setenv("EXECCRITIC_VERIFIED", str(VERIFIED))
    from execcritic.tasks import load_tasks

    recipe = load_recipe()
    inst = next((i for i in recipe.instances if i.p2p_excluded), recipe.instances[0])
    ts = load_tasks("verified-sdist", instance_ids=[inst.instance_id])
    task = ts.get(inst.instance_id)
    env = recipe.envs[inst.env]
    info = task.extra["verified_sdist"]
    assert task.base_commit == env.base_commit == info["base_commit"]
    assert info["upstream_base_commit"] != env.base_commit
    assert info["upstream_base_commit"] not in task.eval_script
    assert not set(inst.p2p_excluded) & set(task.pass_to_pass)
    from execcritic.tasks.environment import environment_for

    te = environment_for(task)
    assert te.kind == "local" and te.base_commit == env.base_commit
    assert str(te.venv).endswith(f"{inst.env}/venv")


# ---- release selection ---------------------------------------------------------------------------

def _pypi(releases):
    return {"releases": {v: [{"packagetype": "sdist", "filename": f"p-{v}.tar.gz",
                              "url": f"../../p-{v}.tar.gz", "upload_time_iso_8601": t,
                              "digests": {"sha256": "0" * 64}, "size": 1}]
                         for v, t in releases}}


def test_release_rule_takes_latest_before_issue_including_prereleases():
    rels = releases_from_json("p", _pypi([("1.0", "2020-01-01T00:00:00Z"), ("1.1a1", "2020-06-01T00:00:00Z"),
                                          ("1.1", "2020-09-01T00:00:00Z"),
                                          ("0.9.9", "2020-07-01T00:00:00Z")]))
    assert rels[0].url.startswith("https://pypi.org/")  # relative mirror URLs are resolved
    picked = releases_before(rels, "2020-08-15T12:00:00Z", 3)
    assert [r.version for r in picked] == ["1.1a1", "1.0", "0.9.9"]  # highest version first
    by_upload = releases_before(rels, "2020-08-15T12:00:00Z", 3, order="upload")
    assert [r.version for r in by_upload] == ["0.9.9", "1.1a1", "1.0"]
    assert releases_before(rels, "2019-01-01T00:00:00Z") == []


def test_era_cutoff_not_before_the_interpreter():
    from execcritic.tasks.sdist.build import era_cutoff

    assert era_cutoff("2014-10-06T09:44:44Z", "3.9") == "2020-10-05T00:00:00Z"
    assert era_cutoff("2022-08-30T17:33:21Z", "3.9") == "2022-08-30T17:33:21Z"


def test_swebench_apply_commands_match():
    src = Path(__import__("swebench").__file__).parent / "harness" / "run_evaluation.py"
    text = src.read_text()
    for cmd in GIT_APPLY_CMDS:
        assert f'"{cmd}"' in text


# ---- local eval script and grading ---------------------------------------------------------------

@needs_rows
def test_local_eval_script_keeps_the_test_section(verified_rows):
    task = verified_rows.get("django__django-11099")
    script = local_eval_script(task, base_commit="f" * 40)
    assert "conda" not in script and "pip install" not in script and "locale-gen" not in script
    assert "export LANG=en_US.UTF-8" in script
    assert f"git checkout {'f' * 40} tests/auth_tests/test_validators.py" in script
    assert task.base_commit not in script
    assert ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
            "auth_tests.test_validators") in script
    assert "|| { echo '>>>>> Test Patch Apply Failed'; exit 97; }" in script
    i, j = script.index("SWEBENCH_TEST_EXIT_CODE=$?"), script.index(": '>>>>> End Test Output'")
    assert i < j < script.index('echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"')


def _pytest_log(lines: list[str], exit_code: int) -> str:
    body = "\n".join(lines)
    return (f"+ : '>>>>> Start Test Output'\n+ pytest -rA testing/test_x.py\n{body}\n"
            f"+ SWEBENCH_TEST_EXIT_CODE={exit_code}\n+ : '>>>>> End Test Output'\n"
            f">>>>> Test Exit Code: {exit_code}\n")


@needs_rows
def test_grading_uses_swebench_and_fails_closed(verified_rows):
    task = verified_rows.get("pytest-dev__pytest-7490")
    f2p, p2p = list(task.fail_to_pass), list(task.pass_to_pass)[:3]
    all_pass = [f"PASSED {n}" for n in f2p + p2p]
    r = grade_log(task, _pytest_log(all_pass, 0), patch="x", p2p=p2p)
    assert r.valid and r.resolved and r.f2p_pass == f2p
    log = _pytest_log([f"FAILED {n}" for n in f2p] + [f"PASSED {n}" for n in p2p], 1)
    r = grade_log(task, log, patch="", p2p=p2p)
    assert r.valid and not r.resolved and sorted(r.f2p_fail) == sorted(f2p)
    # a targeted node without a result: swebench says "unresolved", we say "did not run"
    r = grade_log(task, _pytest_log([f"PASSED {n}" for n in f2p + p2p[:-1]], 0), patch="x", p2p=p2p)
    assert not r.valid and not r.resolved and r.missing == [p2p[-1]]
    # a collection error of the test file under evaluation
    log = _pytest_log(["ERROR testing/test_skipping.py - ImportError: x"], 2)
    r = grade_log(task, log, patch="x", p2p=p2p)
    assert not r.valid and "produced no result" in r.error
    # no markers at all (the run never reached the tests)
    r = grade_log(task, "bash: pytest: command not found\n", patch="x", p2p=p2p)
    assert not r.valid and "no valid test results" in r.error
    r = grade_log(task, _pytest_log(all_pass, 0), patch="x", p2p=p2p, timed_out=True)
    assert not r.valid and "timed out" in r.error
    with pytest.raises(ValueError):
        OfficialResult("x", resolved=True, valid=False, patch_applied=True)


def _django_log(lines: list[str], exit_code: int) -> str:
    body = "\n".join(lines)
    return (f"+ : '>>>>> Start Test Output'\n+ ./tests/runtests.py --verbosity 2 aggregation.tests\n{body}\n"
            f"+ SWEBENCH_TEST_EXIT_CODE={exit_code}\n+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: {exit_code}\n")


@needs_rows
def test_a_result_lost_beside_an_outright_failure_leaves_the_run_decided(verified_rows):
    """django-11603 on Base, as measured here: test_distinct_on_aggregate's subTests fail, so its line gets no
    status and test_empty_aggregate's joins it - swebench's parser sees no result for test_empty_aggregate. The
    run is unresolved whatever that test did (the other F2P errors outright), so it is a valid unresolved run
    and the instance qualifies, the node named; with no outright failure, a lost result still makes it invalid."""
    from execcritic.evaluation.qualify import decide

    task = verified_rows.get("django__django-11603")
    (distinct, empty), p2p = task.fail_to_pass, list(task.pass_to_pass)
    ok = [f"{n} ... ok" for n in p2p]
    base_lines = ok + [f"{distinct} ... {empty} ... ok", "", "=" * 70, f"ERROR: {distinct} (aggregate='Avg')",
                       "-" * 70, "Traceback (most recent call last):", "TypeError: Avg does not allow distinct.", "",
                       "-" * 70, "Ran 60 tests in 0.164s", "", "FAILED (errors=2)"]
    base = grade_log(task, _django_log(base_lines, 1), patch="", p2p=p2p)
    assert base.valid and not base.resolved and base.missing == [] and base.unreported == [empty]
    gold = grade_log(task, _django_log(ok + [f"{distinct} ... ok", f"{empty} ... ok"], 0), patch="x", p2p=p2p)
    assert gold.valid and gold.resolved and gold.unreported == []
    d = decide(task, base, gold)
    assert d.kept and d.f2p_unreported_on_base == [empty], d
    # the same lost result with nothing failing outright: the run did not reach a verdict
    lost = grade_log(task, _django_log(ok + [f"{distinct} ... {empty} ... ok"], 0), patch="x", p2p=p2p)
    assert (lost.valid, lost.missing, lost.unreported) == (False, [distinct, empty], [])
    assert not decide(task, lost, gold).kept


# ---- qualification decision ----------------------------------------------------------------------

def _run(status: dict[str, str]) -> OfficialResult:
    return OfficialResult("i", resolved=False, valid=True, patch_applied=True, status_map=status)


@needs_rows
def test_decide_keeps_excludes_and_drops(verified_rows):
    import dataclasses

    from execcritic.evaluation.qualify import decide

    task = verified_rows.get("pytest-dev__pytest-7490")
    task = dataclasses.replace(task, pass_to_pass=task.pass_to_pass[:40])
    f2p, p2p = list(task.fail_to_pass), list(task.pass_to_pass)
    base = {**{n: "FAILED" for n in f2p}, **{n: "PASSED" for n in p2p}}
    gold = {n: "PASSED" for n in f2p + p2p}
    assert decide(task, _run(base), _run(gold)).kept
    # one P2P absent on both runs (not in this release): kept, excluded with the reason
    b2, g2 = dict(base), dict(gold)
    del b2[p2p[0]], g2[p2p[0]]
    d = decide(task, _run(b2), _run(g2))
    assert d.kept and p2p[0] in d.p2p_excluded and "no result" in d.p2p_excluded[p2p[0]]
    # F2P passing on Base: the release already has the fix
    d = decide(task, _run({**base, f2p[0]: "PASSED"}), _run(gold))
    assert not d.kept and "passes on Base" in d.reason
    # pytest ERROR on Base is a setup error, not a valid fail
    d = decide(task, _run({**base, f2p[0]: "ERROR"}), _run(gold))
    assert not d.kept and "errors outside the test body" in d.reason
    # Gold breaks a P2P that passed on Base
    d = decide(task, _run(base), _run({**gold, p2p[1]: "FAILED"}))
    assert not d.kept and d.reason.startswith("P2P")
    # too many P2P that cannot run here
    g3 = {k: v for k, v in gold.items() if k not in p2p[:10]}
    d = decide(task, _run(base), _run(g3))
    assert not d.kept and "cannot run here" in d.reason


def test_sympy_bin_test_overlay_is_shipped():
    from execcritic.tasks.sdist.build import overlay_files

    files = overlay_files("sympy")
    assert "bin/test" in files and os.access(files["bin/test"], os.X_OK)
    src = files["bin/test"].read_text()
    compile(src, "bin/test", "exec")
    assert "sympy.test(" in src and '"-C"' in src


def test_release_to_dict_roundtrip():
    r = Release("p", "1.0", "2020-01-01T00:00:00Z", "p-1.0.tar.gz", "https://x/p-1.0.tar.gz", "0" * 64, 3)
    assert Release(**r.to_dict()) == r
