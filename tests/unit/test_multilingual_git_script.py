"""multilingual-git's reading of the rows' eval_scripts (pure), on the real SWE-bench Multilingual rows."""

from __future__ import annotations

import json

import pytest

from execcritic.tasks import mlgit
from execcritic.tasks.mlgit import toolchain
from execcritic.tasks.mlgit.script import build_steps, without_clean_steps
from execcritic.tasks.model import Task
from tests.paths import MULTILINGUAL, needs_rows

EVAL = "cd /testbed\ngit apply -v - <<'EOF_1'\ndiff\nEOF_1\n: '>>>>> Start Test Output'\npnpm run test\n"


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


def test_the_package_manager_is_the_exact_version_the_base_names(tmp_path):
    """vuejs/core's rows name pnpm 9.7.0, 9.9.0 and 9.10.0 in package.json (`packageManager`, corepack's field,
    with or without its hash); that version installs and runs their scripts. A range or another manager is refused
    by name, never replaced by whatever pnpm is at hand."""
    from execcritic.tasks.envbuild import BuildError
    from execcritic.tasks.mlgit.build import package_manager

    pnpm = toolchain.TOOLCHAINS["vuejs/core"].install
    for field, want in (("pnpm@9.10.0", ("pnpm", "9.10.0")), ("pnpm@9.7.0+sha512.dc09430", ("pnpm", "9.7.0"))):
        (tmp_path / "package.json").write_text(json.dumps({"packageManager": field}))
        assert package_manager(tmp_path, pnpm) == want
    assert package_manager(tmp_path, toolchain.TOOLCHAINS["axios/axios"].install) is None    # npm: node's own
    for field in ("pnpm@^9", "yarn@4.1.0", None):
        (tmp_path / "package.json").write_text(json.dumps({"packageManager": field} if field else {}))
        with pytest.raises(BuildError, match="packageManager"):
            package_manager(tmp_path, pnpm)


def test_a_checkout_installed_with_pnpm_runs_with_that_pnpm_bound_and_first_on_path(tmp_path):
    """The row's test command calls `pnpm`: the sandbox binds the cached install read-only and puts its bin first;
    a checkout installed with npm gets neither."""
    from execcritic.sandbox.local import DEFAULT_PATH
    from execcritic.tasks.environment import native_environment
    from execcritic.tasks.mlgit import build as ml_build

    env = toolchain.NativeEnv("core-x", "vuejs/core", toolchain.JS)
    for iid, install, tools in (("vuejs__core-1", {"package_manager": "pnpm@9.10.0"}, True),
                                ("axios__axios-1", {"command": "npm ci"}, False)):
        co = ml_build.checkout_dir(iid, tmp_path)
        ml_build.checkout_record(co).parent.mkdir(parents=True)
        ml_build.checkout_record(co).write_text(json.dumps({"install": install}))
        task = mlgit.ml_task(Task(instance_id=iid, repo="vuejs/core", base_commit="0" * 40, patch="", test_patch="",
                                  problem_statement="", fail_to_pass=(), pass_to_pass=(), eval_script=EVAL), env)
        tenv = native_environment(task, tmp_path)
        if tools:
            tool = ml_build.tool_dir("pnpm", "9.10.0", tmp_path)
            assert tenv.tools == (tool,)
            assert tenv.env["PATH"] == f"{tool}/node_modules/.bin:{DEFAULT_PATH}"
        else:
            assert tenv.tools == () and "PATH" not in tenv.env


@needs_rows
def test_the_committed_table_names_every_multilingual_repository_with_its_rows_or_its_blocker():
    """issue 43: per repository, either qualified rows or the exact blocker, in the same table - the qualification's
    table.md (the repositories with a toolchain here) and its second part from the committed blocker measurements
    (every other repository of SWE-bench Multilingual)."""
    from pathlib import Path

    table = (Path(__file__).resolve().parents[2] / "results" / "multilingual_git" / "table.md").read_text()
    first, _, second = table.partition("## The other SWE-bench Multilingual repositories")
    repos = {t.repo for t in mlgit.multilingual_rows(str(MULTILINGUAL))}
    ran = {r for r in repos if f"| {r} |" in first}
    blocked = {r for r in repos if f"| {r} |" in second}
    assert ran == set(toolchain.TOOLCHAINS) and not ran & blocked
    assert ran | blocked == repos, sorted(repos - ran - blocked)


def test_the_blocked_repositories_part_skips_those_run_here_and_escapes_the_table(tmp_path):
    from execcritic.evaluation.qualify_ml import blocked_repos_markdown

    assert blocked_repos_markdown(tmp_path, set()) == ""
    (tmp_path / "blockers_other.json").write_text(json.dumps({"per_repo": {
        "a/js": {"language": "JavaScript/TypeScript", "rows": 2, "blocker": "runs"},
        "b/go": {"language": "Go", "rows": 3, "blocker": "go.mod | toolchain\nline two"}}}))
    out = blocked_repos_markdown(tmp_path, {"a/js"})
    assert "a/js" not in out and "| b/go | Go | 3 | go.mod \\| toolchain line two (`blockers_other.json`) |" in out
