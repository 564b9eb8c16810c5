"""verified-git without network to the upstream: a local git repository the test builds (history, a tag, a
Base commit and a later one) is the mirror. Exercised for real: fetching one commit from the mirror, the cache
of environments and checkouts, an environment built from a SWE-bench-style spec (uv, bubblewrap, an editable
install whose product the checkouts need), qualification (resumable, flakiness by repetition, a dropped row
with its reason), the recipe it writes, the task set loaded from it and the official evaluator on it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from execcritic.config import PAPER
from execcritic.errors import EnvironmentMissing, InputError
from execcritic.evaluation.official import evaluate_official
from execcritic.evaluation.qualify_git import run_qualification
from execcritic.sandbox.base import Limits
from execcritic.tasks.envbuild import find_interpreter
from execcritic.tasks.environment import environment_for
from execcritic.tasks.git import build as git_build
from execcritic.tasks.git import load_verified_git
from execcritic.tasks.git.plan import plan_envs
from execcritic.tasks.git.recipe import load_recipe, parse_env
from execcritic.tasks.git.source import CommitUnavailable, SourceUnavailable, fetch_commit, has_commit
from execcritic.tasks.model import Task

pytestmark = [pytest.mark.integration]

REPO = "demo/calc"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
# the install asserts that its pip is held to the date cutoff (what the spec leaves open resolves as of the cutoff)
SPEC = {"python": PYTHON, "packages": "pytest",
        "install": 'python -m pip install --no-build-isolation -e . && test "$PIP_UPLOADED_PRIOR_TO" = 2100-01-01T00:00:00Z',
        "pre_install": ["sed -i 's/^# marker$/# marker: pre_install ran/' setup.cfg"], "test_cmd": "pytest -rA"}
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
# setup.py writes a file into the tree, as setuptools_scm's write_to does: every checkout needs it
SETUP_PY = ("from pathlib import Path\nfrom setuptools import setup\n"
            "Path(__file__).parent.joinpath('calc', '_version.py').write_text('version = \"0.1\"\\n')\n"
            "setup(name='calc', version='0.1', packages=['calc'])\n")
TESTS = "from calc import add, sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
NEW_TEST = "\n\ndef test_add():\n    assert add(2, 2) == 4\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT}, check=True, capture_output=True,
                          text=True).stdout.strip()


def write(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    return build_mirror(tmp_path_factory.mktemp("upstream"))


def build_mirror(where: Path) -> dict:
    """upstream history: initial (tagged v0.1.0) -> Base (add is wrong) -> fixed -> later (its test)."""
    repo = where / "calc"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, {"setup.py": SETUP_PY, "setup.cfg": "# marker\n", ".gitignore": "calc/_version.py\n*.egg-info/\n",
                 "calc/__init__.py": "from ._version import version\n\n\ndef add(a, b):\n    return a + b\n\n\n"
                                     "def sub(a, b):\n    return a - b\n",
                 "tests/test_calc.py": TESTS})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    git(repo, "tag", "v0.1.0")
    init = (repo / "calc/__init__.py").read_text()
    write(repo, {"calc/__init__.py": init.replace("return a + b", "return a - b")})
    git(repo, "commit", "-qam", "regression in add")
    base = git(repo, "rev-parse", "HEAD")
    write(repo, {"calc/__init__.py": init})
    gold = git(repo, "diff")
    git(repo, "commit", "-qam", "fix add")
    fixed = git(repo, "rev-parse", "HEAD")
    write(repo, {"calc/__init__.py": "# calc\n" + init})
    comment = git(repo, "diff")
    git(repo, "checkout", "-q", "--", ".")
    write(repo, {"tests/test_calc.py": TESTS + NEW_TEST})
    test_patch = git(repo, "diff")
    git(repo, "commit", "-qam", "test add")
    later = git(repo, "rev-parse", "HEAD")
    return {"path": repo, "base": base, "fixed": fixed, "later": later, "gold": gold + "\n", "test_patch": test_patch + "\n",
            "comment": comment + "\n"}


def two_releases(repo: Path, rel: str, first: str, second: str) -> str:
    """A repository whose `rel` reads `first`, then `second`: the first commit (what a pin names)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, {rel: first})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    pinned = git(repo, "rev-parse", "HEAD")
    write(repo, {rel: second})
    git(repo, "commit", "-qam", "v2")
    return pinned


def eval_script(base: str, test_patch: str) -> str:
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate",
                      "conda activate testbed", "cd /testbed", f"git checkout {base} tests/test_calc.py",
                      "git apply -v - <<'EOF_114329324912'", test_patch.rstrip("\n"), "EOF_114329324912",
                      ": '>>>>> Start Test Output'", "pytest -rA tests/test_calc.py", ": '>>>>> End Test Output'",
                      f"git checkout {base} tests/test_calc.py", ""])


def row(mirror, iid: str = "demo__calc-1", base: str | None = None) -> Task:
    base = base or mirror["base"]
    return Task(instance_id=iid, repo=REPO, base_commit=base, patch=mirror["gold"], test_patch=mirror["test_patch"],
                problem_statement="add subtracts", fail_to_pass=("tests/test_calc.py::test_add",),
                pass_to_pass=("tests/test_calc.py::test_sub",), created_at="2024-01-01T00:00:00Z", version="0.1",
                environment_setup_commit="0" * 40, eval_script=eval_script(base, mirror["test_patch"]),
                log_parser="parse_log_pytest", eval_type="pass_and_fail", dataset="tests")


def needs_sandbox():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    try:
        find_interpreter(PYTHON)
    except EnvironmentMissing as exc:
        pytest.skip(f"no CPython {PYTHON} for the fixture's env: {exc}")


def test_fetch_from_the_mirror_holds_exactly_the_base(mirror, tmp_path):
    dest = tmp_path / "co"
    fetch_commit(str(mirror["path"]), mirror["base"], dest)
    assert git(dest, "rev-parse", "HEAD") == mirror["base"]
    assert git(dest, "rev-list", "--count", "HEAD") == "1"                 # shallow: no history before Base
    assert git(dest, "branch", "--show-current") == "base" and git(dest, "remote") == ""
    assert subprocess.run(["git", "cat-file", "-e", mirror["later"]], cwd=dest).returncode != 0   # no route to Gold
    assert not (dest / ".git" / "FETCH_HEAD").exists()
    with pytest.raises(CommitUnavailable, match="does not have commit"):
        fetch_commit(str(mirror["path"]), "1" * 40, tmp_path / "missing")
    with pytest.raises(InputError, match="neither a URL nor an existing local path"):
        fetch_commit(str(tmp_path / "nowhere"), mirror["base"], tmp_path / "x")
    # a source that is not a repository at all (as a corrupt or unreachable one): the source's fault, named
    with pytest.raises(SourceUnavailable, match="could not serve commit") as exc:
        fetch_commit((tmp_path / "nowhere.git").as_uri(), mirror["base"], tmp_path / "y")
    assert not isinstance(exc.value, CommitUnavailable)


def test_submodules_come_at_the_recorded_commit_from_their_own_source(tmp_path, monkeypatch):
    """astropy < 4 builds from its `astropy_helpers` submodule: the checkout gets it at the commit the Base
    records (not the helper's newest), from the source configured for the helper's repository."""
    pinned = two_releases(tmp_path / "mirrors" / "demo+helpers" / "repo", "helpers.py", "VERSION = 1\n", "VERSION = 2\n")
    app = tmp_path / "mirrors" / "demo+app" / "repo"
    app.mkdir(parents=True)
    git(app, "init", "-q", "-b", "main")
    write(app, {".gitmodules": '[submodule "helpers"]\n\tpath = vendor/helpers\n'
                               "\turl = https://github.com/demo/helpers.git\n", "app.py": "x = 1\n"})
    git(app, "add", "-A")
    git(app, "update-index", "--add", "--cacheinfo", f"160000,{pinned},vendor/helpers")   # the gitlink
    git(app, "commit", "-q", "-m", "app with helpers at v1")
    base = git(app, "rev-parse", "HEAD")
    monkeypatch.setenv("EXECCRITIC_GIT_SOURCES", str(tmp_path / "mirrors" / "{owner}+{name}" / "repo"))
    dest = tmp_path / "co"
    fetch_commit(str(app), base, dest)
    assert (dest / "vendor" / "helpers" / "helpers.py").read_text() == "VERSION = 1\n"
    assert git(dest / "vendor" / "helpers", "rev-parse", "HEAD") == pinned
    assert git(dest, "status", "--porcelain") == ""                          # the Base, clean
    monkeypatch.setenv("EXECCRITIC_GIT_SOURCES", str(tmp_path / "nowhere" / "{name}"))
    with pytest.raises(InputError, match="neither a URL nor an existing local path"):
        fetch_commit(str(app), base, tmp_path / "co2")


def test_plan_follows_the_spec_and_stands_in_for_a_missing_setup_commit(mirror):
    src = {REPO: str(mirror["path"])}
    assert has_commit(src[REPO], mirror["base"]) and not has_commit(src[REPO], "0" * 40)
    plan = plan_envs([row(mirror)], {REPO: {"0.1": SPEC}}, sources=src)
    (env,) = plan.envs.values()
    assert env.setup_commit == mirror["base"] and "not in" in env.setup_note     # the newest Base of the version
    assert env.python == PYTHON and env.spec == SPEC
    prefix, _, abbrev = env.project_version.partition("+g")                     # git describe of the tag
    assert prefix == "0.1.1.dev1" and mirror["base"].startswith(abbrev)
    other = plan_envs([row(mirror)], {}, sources=src)
    assert other.unplanned == {"demo__calc-1": "swebench 4.1.0 has no spec for demo/calc 0.1"}


def test_a_commit_whose_files_a_snapshot_left_out_is_not_served_and_the_newest_whole_base_stands_in(mirror, tmp_path):
    """astropy 5.1's setup commit and three of its Bases are in this machine's mirror without one large file (a
    snapshot's size cut): the commit exists, no fetch of it succeeds. The plan reads that before it builds."""
    src = tmp_path / "calc"
    shutil.copytree(mirror["path"], src)
    write(src, {"data/big.dat": "a large table\n"})
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "large file")
    partial = git(src, "rev-parse", "HEAD")
    blob = git(src, "rev-parse", "HEAD:data/big.dat")
    (src / ".git" / "objects" / blob[:2] / blob[2:]).unlink()                # what the snapshot left out
    assert has_commit(str(src), mirror["base"]) is True and has_commit(str(src), partial) is False
    with pytest.raises(SourceUnavailable, match="could not serve commit"):
        fetch_commit(str(src), partial, tmp_path / "co")
    whole = dataclasses.replace(row(mirror), environment_setup_commit=partial)
    newer = dataclasses.replace(row(mirror, "demo__calc-2", base=partial), created_at="2024-02-01T00:00:00Z",
                    environment_setup_commit=partial)
    (env,) = plan_envs([whole, newer], {REPO: {"0.1": SPEC}}, sources={REPO: str(src)}).envs.values()
    assert env.setup_commit == mirror["base"]                                  # not the newer, partial Base
    assert f"{partial} is not in {src} whole" in env.setup_note


def test_a_vendored_source_is_fetched_prepared_built_by_the_install_and_copied_into_each_checkout(
        mirror, tmp_path, monkeypatch):
    """matplotlib builds FreeType 2.6.1 from `build/freetype-2.6.1` when that tree is there, else downloads it from
    hosts out of reach here: the env fetches it from the configured source of its repository at the recipe's
    commit, runs its `prepare` step there, and every checkout gets the tree the install left (built)."""
    needs_sandbox()
    pinned = two_releases(tmp_path / "mirrors" / "demo+lib" / "repo", "lib.c", "int lib(void) { return 1; }\n",
                          "int lib(void) { return 2; }\n")
    monkeypatch.setenv("EXECCRITIC_GIT_SOURCES", str(tmp_path / "mirrors" / "{owner}+{name}" / "repo"))
    vendored = {"build/lib-1": {"repo": "demo/lib", "commit": pinned, "prepare": "echo configured > configure.out",
                                "why": "the fixture's download"}}
    # the install builds what it finds there, as matplotlib's setupext does
    spec = {**SPEC, "install": "test -f build/lib-1/configure.out && cp build/lib-1/lib.c build/lib-1/built.c && "
                               "python -m pip install --no-build-isolation -e ."}
    (env,) = plan_envs([row(mirror)], {REPO: {"0.1": spec}}, sources={REPO: str(mirror["path"])},
                       cutoff="2100-01-01T00:00:00Z").envs.values()
    env = dataclasses.replace(env, vendored=vendored)
    again = parse_env(env.key, env.to_dict(), path="recipe.json")
    assert again.vendored == vendored and again.digest_payload() == env.digest_payload()
    with pytest.raises(InputError, match=r"vendored\['build/lib-1'\]\.commit must be a 40-hex"):
        parse_env(env.key, {**env.to_dict(), "vendored": {"build/lib-1": {**vendored["build/lib-1"], "commit": "v1"}}},
                  path="recipe.json")
    root = tmp_path / "cache"
    built, _ = git_build.build_env(env, source=str(mirror["path"]), root=root, resolve=True)
    tree = built.setup / "build" / "lib-1"
    assert (tree / "lib.c").read_text() == "int lib(void) { return 1; }\n"          # the recipe's commit
    assert (tree / "configure.out").is_file() and (tree / "built.c").is_file()
    co = git_build.prepare_checkout("demo__calc-1", mirror["base"], built, env, source=str(mirror["path"]), root=root)
    copied = co.path / "build" / "lib-1"
    assert (copied / "built.c").is_file() and not (copied / ".git").exists()


@pytest.mark.slow
def test_qualification_builds_caches_qualifies_and_resumes(mirror, tmp_path):
    needs_sandbox()
    root, results, recipe = tmp_path / "cache", tmp_path / "results", tmp_path / "recipe.json"
    src = {REPO: str(mirror["path"])}
    good = row(mirror)
    passing = dataclasses.replace(row(mirror, "demo__calc-2", base=mirror["fixed"]), patch=mirror["comment"])
    specs = {"specs": {REPO: {"0.1": SPEC}}, "reqs_paths": {}}
    # rows the source cannot serve: a Base it lacks (its env builds from the other rows' newest Base), and a version
    # whose only row's Base (so its env's setup commit) it lacks - undecided, never dropped or recorded
    unserved = dataclasses.replace(row(mirror, "demo__calc-3", base="1" * 40), created_at="2023-01-01T00:00:00Z")
    orphan = dataclasses.replace(row(mirror, "demo__calc-4", base="2" * 40), version="0.2")
    specs = {"specs": {REPO: {"0.1": SPEC, "0.2": SPEC}}, "reqs_paths": {}}
    everything = [good, passing, unserved, orphan]
    kw = dict(results_dir=results, recipe_out=recipe, sources=src, root=root, repeat=2, specs=specs,
              all_rows=everything, progress=False, log=lambda m: None, cutoff="2100-01-01T00:00:00Z")
    summary = run_qualification(everything, keep_checkouts=True, **kw)
    assert [(f["key"], f["stage"]) for f in summary["failures"]] == [("demo__calc-3", "fetch base commit"),
                                                                      ("demo__calc-4", "fetch setup commit")]
    assert all("does not have commit" in f["error"] for f in summary["failures"])
    rows = {r["instance_id"]: r for r in map(json.loads, (results / "instances.jsonl").read_text().splitlines())}
    assert sorted(rows) == ["demo__calc-1", "demo__calc-2"]
    assert rows["demo__calc-1"]["kept"], rows["demo__calc-1"]["reason"]
    assert rows["demo__calc-1"]["runs"] == 2 and rows["demo__calc-1"]["flaky_nodes"] == {}
    assert rows["demo__calc-1"]["official_checks"] == {"empty": ["unresolved"] * 2, "gold": ["resolved"] * 2,
                                                       "unapplicable": "invalid"}
    assert not rows["demo__calc-2"]["kept"] and "passes on Base" in rows["demo__calc-2"]["reason"]
    assert summary["qualified"] == 1 and summary["per_repo"][REPO]["dropped"] == {"F2P passes on Base": 1}

    # the environment: built once from the spec, its install product recorded; the checkouts get it
    (key,) = json.loads((results / "envs.json").read_text())
    built = git_build.load_built(key, root)
    assert built.record["products"] == ["calc/_version.py"] and built.record["setup_commit"] == mirror["fixed"]  # newest Base
    co = git_build.checkout_dir("demo__calc-1", root)
    assert (co / "calc/_version.py").is_file() and "pre_install ran" in (co / "setup.cfg").read_text()
    assert git(co, "status", "--porcelain", "--untracked-files=all") == "M setup.cfg"   # as SWE-bench's images

    # resumable: a second run decides nothing again
    again = run_qualification(everything, keep_checkouts=True, **kw)
    assert again["decided"] == 2 and (results / "instances.jsonl").read_text().count("\n") == 2
    assert [f["key"] for f in again["failures"]] == ["demo__calc-3", "demo__calc-4"]     # tried again, not remembered

    # the recipe loads as the verified-git task set, and everything is reused from the cache
    rec = load_recipe(recipe)
    assert [i.instance_id for i in rec.instances] == ["demo__calc-1"]
    assert rows["demo__calc-1"]["source"] == rec.instances[0].source == src[REPO]     # where the Base came from
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text(json.dumps(good.to_row()) + "\n")
    (task,) = load_verified_git(dataset=str(rows_file), recipe_path=str(recipe))
    made = git_build.ensure([task], sources=src, recipe=rec, root=root)
    assert made["built"] == [] and made["envs"] == [key]
    env = environment_for(task, root=root)
    assert env.checkout == co and env.meta["task_set"] == "verified-git"

    # the official evaluator on it follows swebench's grading: Gold resolved, empty unresolved, junk invalid
    gold = evaluate_official(task, task.patch, env)
    empty = evaluate_official(task, "", env)
    junk = evaluate_official(task, "--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n", env)
    assert gold.valid and gold.resolved, gold.error
    assert empty.valid and not empty.resolved, empty.error
    assert not junk.valid and not junk.resolved and "does not apply" in junk.error

    # a pruned checkout fails loudly, naming the command that builds it; `ensure` fetches it again
    assert git_build.prune_checkout("demo__calc-1", root) and not co.exists()
    with pytest.raises(EnvironmentMissing, match="execcritic tasks build-git"):
        env.open_sandbox(limits=Limits.from_config(PAPER.harness))
    assert git_build.ensure([task], sources=src, recipe=rec, root=root)["built"] == ["demo__calc-1"]


def test_a_build_sees_a_cache_that_lives_under_tmp_read_only(monkeypatch):
    """A build runs under bubblewrap with a fresh /tmp; a cache under /tmp (`EXECCRITIC_CACHE=/tmp/...`) was hidden
    by it ("python: command not found" in pylint-4970's setup step). It is bound read-only over the fresh /tmp."""
    import tempfile

    from execcritic.tasks.envbuild import bwrap_prefix

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    with tempfile.TemporaryDirectory(prefix="execcritic-cache-", dir="/tmp") as cache:
        bindir = Path(cache) / "verified-git" / "envs" / "some-env" / "venv" / "bin"
        bindir.mkdir(parents=True)
        # the real interpreter: the test process's venv may itself live under /tmp (a clone in /tmp), which the
        # sandbox hides - only the cache is bound there
        (bindir / "python").symlink_to(os.path.realpath(sys.executable))
        monkeypatch.setenv("EXECCRITIC_CACHE", cache)
        script = (f"{bindir}/python -c 'print(6 * 7)' && "
                  f"(touch {cache}/written 2>/dev/null && echo writable || echo read-only)")
        out = subprocess.run(bwrap_prefix(None, [], network=False) + ["bash", "-c", script], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["42", "read-only"]
        assert not (Path(cache) / "written").exists()
