"""multilingual-git's reading of the rows' eval_scripts (pure), on the real SWE-bench Multilingual rows."""

from __future__ import annotations

import pytest

from execcritic.tasks import mlgit
from execcritic.tasks.mlgit import toolchain
from execcritic.tasks.mlgit.script import build_steps, without_clean_steps
from tests.paths import MULTILINGUAL, needs_rows


@needs_rows
def test_build_steps_are_read_from_every_multilingual_row_with_a_toolchain():
    """The section between the test patch and the Start marker, clean steps left out, on the real rows: the 42 C/C++
    rows and the 13 JavaScript/TypeScript rows of axios, immutable-js and vuejs/core."""
    rows = mlgit.multilingual_rows(str(MULTILINGUAL))
    native = [t for t in rows if t.repo in toolchain.TOOLCHAINS]
    by_language = {}
    for t in native:
        by_language.setdefault(toolchain.TOOLCHAINS[t.repo].language, []).append(t)
    assert {k: len(v) for k, v in by_language.items()} == {"C": 30, "C++": 12, toolchain.JS: 13}
    steps = {t.repo: build_steps(t.eval_script) for t in native}
    assert steps["redis/redis"] == ["make"] and steps["jqlang/jq"][-1] == "make -j$(nproc)"
    assert steps["fmtlib/fmt"][:2] == ["mkdir -p build", "cmake -B build -S ."]
    assert steps["immutable-js/immutable-js"] == ["npm run build"] and steps["axios/axios"] == []
    for t in native:
        script, dropped = without_clean_steps(t.eval_script)
        assert set(dropped) <= {"make clean", "make distclean"} and "make distclean\n" not in script


@needs_rows
def test_a_step_the_toolchain_runs_otherwise_is_replaced_in_the_script_and_the_build_and_recorded():
    """immutable-js' `npm run build` ends in a size report against bundlephobia.com (network): the task runs every
    other build:* script instead - in its eval_script (the official evaluator's) and its build steps (execute's) -
    and says so; a C row is unchanged."""
    rows = mlgit.multilingual_rows(str(MULTILINGUAL))
    env = toolchain.NativeEnv("e", "immutable-js/immutable-js", toolchain.JS)
    task = mlgit.ml_task(rows.get("immutable-js__immutable-js-2006"), env)
    (new, _why), = toolchain.TOOLCHAINS["immutable-js/immutable-js"].replace_steps.values()
    assert task.extra["build_steps"] == [new] and "build:stats" in new
    assert "\nnpm run build\n" not in task.eval_script and f"\n{new}\n" in task.eval_script
    assert "bundlephobia" in task.extra["multilingual_git"]["replaced_steps"]["npm run build"]
    c = mlgit.ml_task(rows.get("jqlang__jq-2839"), toolchain.NativeEnv("j", "jqlang/jq", "C"))
    assert "replaced_steps" not in c.extra["multilingual_git"]


def test_a_script_without_a_test_patch_or_a_start_marker_has_no_build_section():
    with pytest.raises(ValueError, match="Start"):
        build_steps("cd /testbed\nmake\n")
    with pytest.raises(ValueError, match="test patch"):
        build_steps("make\n: '>>>>> Start Test Output'\nmake check\n")


def test_a_missing_toolchain_package_is_named(monkeypatch):
    monkeypatch.setitem(toolchain.TOOLCHAINS, "fixture/none", toolchain.Toolchain("C", ("no-such-package-xyz",)))
    with pytest.raises(Exception, match="no-such-package-xyz"):
        toolchain.native_env("fixture/none")


@needs_rows
def test_a_test_section_that_only_removes_new_test_files_is_found():
    """21 Multilingual rows (valkey-io__valkey-790, babel, lombok, ...) reset their test files with `rm -f` alone
    (every test file is new): the local eval script starts there, keeps the test patch and the final reset."""
    from execcritic.evaluation.official import local_eval_script

    task = mlgit.multilingual_rows(str(MULTILINGUAL)).get("valkey-io__valkey-790")
    script = local_eval_script(task, base_commit=task.base_commit).splitlines()
    assert script[2] == "rm -f tests/unit/cluster/cluster-shards.tcl"
    assert script[3].startswith("git apply -v - <<'") and script[-1] == "rm -f tests/unit/cluster/cluster-shards.tcl"
