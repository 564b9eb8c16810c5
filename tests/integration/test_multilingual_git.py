"""multilingual-git without network: local git repositories the test builds are the mirrors - a C project
with a Makefile whose `check` target prints automake's `PASS:`/`FAIL:` lines (graded by swebench's jq parser),
a C++ project with CMake and GoogleTest (graded by its googletest parser, run through ctest as fmt's rows
are), and a JavaScript project whose package-lock.json installs a dependency from a tarball it commits (`npm ci`
without the registry) and whose tests print TAP (graded by swebench's TAP parser, axios' rows'). Exercised for real: the checkout fetched from the mirror, the Base built by the row's eval_script build
steps under bubblewrap, qualification through the official evaluator (Base fails F2P, Gold passes, a patch that
cannot apply is invalid), the recipe, the task set loaded from it, a run that rebuilds only what its patch
touched, and a candidate that does not compile (never a PASS)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from execcritic.agents.workspace import commit_prepared_state, export_candidate
from execcritic.config import PAPER
from execcritic.evaluation.official import evaluate_local
from execcritic.evaluation.qualify_ml import run_ml_qualification
from execcritic.harness.execute import execute
from execcritic.harness.execution import FailureKind, Verdict
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.sandbox.base import Limits
from execcritic.sandbox.local import LocalSandbox
from execcritic.tasks import mlgit
from execcritic.tasks.environment import environment_for
from execcritic.tasks.git.source import configured_sources
from execcritic.tasks.mlgit import build as ml_build
from execcritic.tasks.mlgit import toolchain
from execcritic.tasks.mlgit.script import without_clean_steps
from execcritic.tasks.model import Task
from tests.allowed_skips import allowed
from tests.paths import MULTILINGUAL, needs_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
HEREDOC = "EOF_114329324912"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT}, check=True, capture_output=True,
                          text=True).stdout


def eval_script(base: str, test_files: list[str], test_patch: str, build: list[str], test_cmd: str) -> str:
    """An eval_script in SWE-bench Multilingual's form (the rows' own layout)."""
    files = " ".join(test_files)
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", "cd /testbed",
                      "git config --global --add safe.directory /testbed", "git status", "git show",
                      f"git -c core.fileMode=false diff {base}", f"git checkout {base} {files}",
                      f"git apply -v - <<'{HEREDOC}'", test_patch.rstrip("\n"), HEREDOC, *build,
                      ": '>>>>> Start Test Output'", f"({test_cmd}) | cat", ": '>>>>> End Test Output'",
                      f"git checkout {base} {files}", ""])


def make_row(tmp: Path, name: str, files: dict[str, str | bytes], bug: tuple[str, str, str], test_file: str,
             new_test: str, build: list[str], test_cmd: str, *, f2p: list[str], p2p: list[str],
             log_parser: str) -> tuple[Path, dict]:
    """A mirror with the Base (the bug in) and a row: Gold = the fix, test patch = `new_test` appended."""
    repo = tmp / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (repo / rel).write_bytes(text)
            continue
        (repo / rel).write_text(text)
        if rel.startswith("tests/") and "." not in Path(rel).name:
            (repo / rel).chmod(0o755)
    src, good, bad = bug
    (repo / src).write_text(files[src].replace(good, bad))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / src).write_text(files[src])
    gold = git(repo, "diff")
    git(repo, "checkout", "-q", "--", src)
    path = repo / test_file
    path.write_text(path.read_text() + new_test)
    test_patch = git(repo, "diff")
    git(repo, "checkout", "-q", "--", test_file)
    row = {"repo": f"fixture/{name}", "instance_id": f"fixture__{name}-1", "base_commit": base, "patch": gold,
           "test_patch": test_patch, "problem_statement": f"{name}: add is wrong", "hints_text": "",
           "created_at": "2024-01-01T00:00:00Z", "version": "1", "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p,
           "log_parser": log_parser, "eval_type": "pass_and_fail", "image": "",
           "eval_script": eval_script(base, [test_file], test_patch, build, test_cmd)}
    return repo, row


C_FILES = {
    "calc.c": "int add(int a, int b) { return a + b; }\nint sub(int a, int b) { return a - b; }\n",
    "main.c": "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nint add(int, int); int sub(int, int);\n"
              "int main(int c, char **v) { int a = atoi(v[2]), b = atoi(v[3]);\n"
              "  printf(\"%d\\n\", strcmp(v[1], \"add\") ? sub(a, b) : add(a, b)); return 0; }\n",
    # like jq's src/lexer.c: the build rewrites a file the repository tracks
    "GENERATED": "as committed\n",
    "Makefile": "TESTS = tests/subtest tests/addtest\ncalc: calc.o main.o\n\t$(CC) -o calc calc.o main.o\n"
                "\techo regenerated > GENERATED\n"
                "check: calc\n\t@rc=0; for t in $(TESTS); do if ./$$t >/dev/null 2>&1; then echo \"PASS: $$t\"; "
                "else echo \"FAIL: $$t\"; rc=1; fi; done; exit $$rc\nclean:\n\trm -f calc *.o\n",
    "tests/subtest": "#!/bin/sh\n[ \"$(./calc sub 5 3)\" = 2 ]\n",
    "tests/addtest": "#!/bin/sh\n[ \"$(./calc add 1 0)\" = 1 ]\n",
}
CPP_FILES = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(calc CXX)\nfind_package(GTest REQUIRED)\n"
                      "enable_testing()\nset(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)\n"
                      "add_library(calc calc.cc)\nadd_executable(calc-test test/calc-test.cc)\n"
                      "target_link_libraries(calc-test calc GTest::gtest GTest::gtest_main)\n"
                      "add_test(NAME calc-test COMMAND calc-test)\n",
    "calc.cc": "int add(int a, int b) { return a + b; }\nint sub(int a, int b) { return a - b; }\n",
    "test/calc-test.cc": "#include <gtest/gtest.h>\nint add(int, int); int sub(int, int);\n"
                         "TEST(CalcTest, Sub) { EXPECT_EQ(sub(5, 3), 2); }\n",
}

JS_LIB = {"package.json": '{"name": "tap-lite", "version": "1.0.0", "main": "index.js"}\n',
          "index.js": "let n = 0;\nmodule.exports = function test(name, fn) {\n  n += 1;\n"
                      "  try { fn(); console.log(`ok ${n} ${name}`); }\n"
                      "  catch (e) { console.log(`not ok ${n} ${name}`); process.exitCode = 1; }\n};\n"}
JS_FILES = {
    "package.json": '{"name": "calc-js", "version": "1.0.0", "private": true, "scripts": {"build": "node build.js"},\n'
                    ' "dependencies": {"tap-lite": "file:vendor/tap-lite-1.0.0.tgz"}}\n',
    ".gitignore": "node_modules/\ndist/\n",
    "src/calc.js": "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => a - b;\n",
    # the Base's build: the tests load dist/, as immutable-js' load its rollup bundle
    "build.js": "const fs = require('fs');\nfs.mkdirSync('dist', {recursive: true});\n"
                "fs.copyFileSync('src/calc.js', 'dist/calc.js');\n",
    "test/calc.test.js": "const test = require('tap-lite');\nconst calc = require('../dist/calc.js');\n"
                         "test('sub works', () => { if (calc.sub(5, 3) !== 2) throw new Error('sub'); });\n",
}


def js_files(tmp: Path) -> dict[str, str | bytes]:
    """JS_FILES with the dependency's tarball (`npm pack`) and the lockfile npm writes for it, both offline."""
    lib, proj = tmp / "tap-lite", tmp / "calc-js-lock"
    for d, files in ((lib, JS_LIB), (proj, {"package.json": JS_FILES["package.json"]})):
        d.mkdir()
        for rel, text in files.items():
            (d / rel).write_text(text)
    npm = {**os.environ, "npm_config_cache": str(tmp / "npm-cache"), "npm_config_update_notifier": "false"}
    (proj / "vendor").mkdir()
    subprocess.run(["npm", "pack", "--pack-destination", str(proj / "vendor")], cwd=lib, env=npm, check=True,
                   capture_output=True)
    subprocess.run(["npm", "install", "--package-lock-only", "--offline"], cwd=proj, env=npm, check=True,
                   capture_output=True)
    tgz = proj / "vendor" / "tap-lite-1.0.0.tgz"
    return {**JS_FILES, "package-lock.json": (proj / "package-lock.json").read_text(),
            "vendor/tap-lite-1.0.0.tgz": tgz.read_bytes()}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    missing = [p for tc in (("gcc", "make"), ("g++", "cmake", "libgtest-dev"))
               for p in toolchain.installed_versions(tc)[1]]
    if missing:
        pytest.skip(f"the fixtures' toolchains are not installed ({' '.join(missing)}; `make system-deps`)")
    tmp = tmp_path_factory.mktemp("ml-mirrors")
    c_repo, c_row = make_row(
        tmp, "calc-c", C_FILES, ("calc.c", "return a + b", "return a * b"), "tests/addtest",
        "[ \"$(./calc add 2 3)\" = 5 ]\n", ["make clean", "make"], "make check", f2p=["tests/addtest"],
        p2p=["tests/subtest"], log_parser="parse_log_jq")
    cpp_repo, cpp_row = make_row(
        tmp, "calc-cpp", CPP_FILES, ("calc.cc", "return a + b", "return a * b"), "test/calc-test.cc",
        "TEST(CalcTest, Add) { EXPECT_EQ(add(2, 3), 5); }\n",
        ["mkdir -p build", "cmake -B build -S .", "cmake --build build --parallel $(nproc) --target calc-test"],
        "ctest --test-dir build -V -R calc-test", f2p=["CalcTest.Add"], p2p=["CalcTest.Sub"],
        log_parser="parse_log_googletest")
    out = {"c": (c_repo, Task.from_row(c_row, source="fixture")),
           "cpp": (cpp_repo, Task.from_row(cpp_row, source="fixture"))}
    if toolchain.installed_versions(("nodejs",))[1] or not shutil.which("npm"):
        return out            # the JS case says what it misses
    js_repo, js_row = make_row(
        tmp, "calc-js", js_files(tmp), ("src/calc.js", "a + b", "a * b"), "test/calc.test.js",
        "test('add works', () => { if (calc.add(2, 3) !== 5) throw new Error('add'); });\n", ["npm run build"],
        "node test/calc.test.js", f2p=["add works"], p2p=["sub works"], log_parser="parse_log_tap")
    out["js"] = (js_repo, Task.from_row(js_row, source="fixture"))
    return out


@pytest.fixture(autouse=True)
def fixture_toolchains(monkeypatch):
    """The fixtures' repositories get toolchains of their own (the real table names only the Multilingual ones)."""
    monkeypatch.setitem(toolchain.TOOLCHAINS, "fixture/calc-c", toolchain.Toolchain("C", ("gcc", "make")))
    monkeypatch.setitem(toolchain.TOOLCHAINS, "fixture/calc-cpp",
                        toolchain.Toolchain("C++", ("g++", "cmake", "libgtest-dev")))
    monkeypatch.setitem(toolchain.TOOLCHAINS, "fixture/calc-js",
                        toolchain.Toolchain(toolchain.JS, ("nodejs",), install=toolchain.NPM_CI))


def row_of(rows, kind):
    if kind not in rows:
        pytest.skip("node and npm are not installed (`make system-deps`)")
    return rows[kind]


@pytest.mark.parametrize("kind", ["c", "cpp", "js"])
def test_a_fixture_row_qualifies_and_is_graded_by_the_official_evaluator(rows, kind, tmp_path):
    repo, task = row_of(rows, kind)
    root, results = tmp_path / "cache", tmp_path / "results"
    recipe = results / "recipe.json"
    summary = run_ml_qualification([task], results_dir=results, recipe_out=recipe, sources={task.repo: str(repo)},
                                   root=root, repeat=2, keep_checkouts=True, log=lambda m: None)
    assert summary["qualified"] == 1 and not summary["failures"], (results / "instances.jsonl").read_text()
    row = json.loads((results / "instances.jsonl").read_text())
    assert row["official_checks"] == {"empty": ["unresolved"] * 2, "gold": ["resolved"] * 2,
                                      "unapplicable": "invalid"}
    assert row["build_seconds"] > 0 and row["checkout_bytes"] > 0
    co = ml_build.checkout_dir(task.instance_id, root)
    if kind == "c":
        assert row["dropped_steps"] == {"make clean": without_clean_steps("make clean\n")[1]["make clean"]}
        record = json.loads(ml_build.checkout_record(co).read_text())
        assert record["restored_after_build"] == ["GENERATED"] and (co / "GENERATED").read_text() == "as committed\n"
    # the recipe loads as the task set, and the checkout holds the Base's build
    data = json.loads(recipe.read_text())
    assert data["task_set"] == "multilingual-git" and [i["instance_id"] for i in data["instances"]] == [
        task.instance_id]
    env = next(iter(data["envs"].values()))
    assert set(env["packages"]) == set(toolchain.TOOLCHAINS[task.repo].packages)
    assert (co / {"c": "calc", "cpp": "build/bin/calc-test", "js": "dist/calc.js"}[kind]).is_file()
    if kind == "js":
        # the dependency installed from the lockfile before the build, recorded; nothing left for a run to fetch
        record = json.loads(ml_build.checkout_record(co).read_text())
        assert record["install"]["command"] == "npm ci" and record["install_seconds"] > 0
        assert (co / "node_modules" / "tap-lite" / "index.js").is_file()
        assert row["official_checks"]["gold"] == ["resolved"] * 2


def test_a_base_without_the_lockfile_its_install_reads_is_dropped_with_that_reason(rows, tmp_path):
    """`npm ci` needs package-lock.json: a Base without one is not installed some other way (no unpinned
    `npm install`); the row is dropped at its checkout, saying so."""
    repo, task = row_of(rows, "js")
    git(repo, "checkout", "-q", "-b", "no-lock", task.base_commit)
    git(repo, "rm", "-q", "package-lock.json")
    git(repo, "commit", "-q", "-m", "no lockfile")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    lockless = dataclasses.replace(task, instance_id="fixture__calc-js-2", base_commit=base,
                                   eval_script=task.eval_script.replace(task.base_commit, base))
    results = tmp_path / "results"
    run_ml_qualification([lockless], results_dir=results, recipe_out=None, sources={task.repo: str(repo)},
                         root=tmp_path / "cache", repeat=1, log=lambda m: None)
    row = json.loads((results / "instances.jsonl").read_text())
    assert not row["kept"] and row["stage"] == "checkout" and "no package-lock.json" in row["reason"], row


def test_a_run_rebuilds_only_what_its_patch_touched_and_a_patch_that_does_not_compile_is_no_pass(rows, tmp_path,
                                                                                                 monkeypatch):
    repo, row = rows["cpp"]
    monkeypatch.setenv("EXECCRITIC_CACHE", str(tmp_path / "cache"))
    env = toolchain.native_env(row.repo)
    task = mlgit.ml_task(row, env)
    co = ml_build.prepare_checkout(task, env, source=str(repo))
    assert not co.reused and ml_build.prepare_checkout(task, env, source=str(repo)).reused
    tenv = environment_for(task)
    assert tenv.kind == "local" and tenv.venv is None
    gold = evaluate_local(task, task.patch, tenv, harness=PAPER.harness, log_dir=tmp_path / "gold")
    assert gold.valid and gold.resolved, gold.error
    log = (tmp_path / "gold" / "test_output.txt").read_text()
    # calc.cc (the patch) and the test file (the test patch) are compiled again; GoogleTest's targets are not
    compiled = [ln for ln in log.splitlines() if "Building CXX object" in ln]
    assert compiled and all("calc.cc" in ln or "calc-test.cc" in ln for ln in compiled), compiled
    broken = task.patch.replace("return a + b;", "return a + ;")
    res = evaluate_local(task, broken, tenv, harness=PAPER.harness)
    assert not res.resolved and res.status_map.get("CalcTest.Add") != "PASSED", res


@pytest.mark.parametrize("kind", ["c", "cpp"])
def test_a_check_builds_the_patched_tree_before_its_tests_and_a_build_that_fails_is_no_verdict(rows, kind, tmp_path,
                                                                                               monkeypatch):
    """The execute path (the Base gate, CHECK, the Gold audit): the Oracle bundle fails on Base and passes on
    Gold because the row's build steps rebuild the patched tree first; a candidate that does not compile gets
    `build_failed`, never a verdict."""
    repo, row = rows[kind]
    monkeypatch.setenv("EXECCRITIC_CACHE", str(tmp_path / "cache"))
    env = toolchain.native_env(row.repo)
    task = mlgit.ml_task(row, env)
    ml_build.prepare_checkout(task, env, source=str(repo))
    bundle = oracle_bundle(task)
    broken = "\n".join(ln.replace(";", "", 1) if ln.startswith("+") and not ln.startswith("+++") else ln
                        for ln in task.patch.splitlines()) + "\n"
    with environment_for(task).open_sandbox(limits=Limits.from_config(PAPER.harness)) as sb:
        base = execute(task, bundle, None, sandbox=sb, check_source_patch=False)
        gold = execute(task, bundle, task.patch, sandbox=sb, check_source_patch=False)
        bad = execute(task, bundle, broken, sandbox=sb, check_source_patch=False)
    assert (base.valid, base.verdict) == (True, Verdict.FAIL), base.diagnostic
    assert (gold.valid, gold.verdict) == (True, Verdict.PASS), gold.diagnostic
    assert "build" in gold.phases
    assert (bad.valid, bad.verdict, bad.failure_kind) == (False, None, FailureKind.BUILD_FAILED), bad.diagnostic


def test_a_submodule_dirtied_by_the_build_is_not_a_change_of_the_workspace(tmp_path):
    """jq's build writes into its oniguruma submodule: the agent workspace must neither fail to record the prepared
    Base (`git commit` finds nothing to commit) nor export a `Subproject commit ...-dirty` hunk in a patch."""
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "lib.c").write_text("int x;\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "sub")
    top = tmp_path / "top"
    top.mkdir()
    git(top, "init", "-q", "-b", "base")
    (top / "main.c").write_text("int main(void) { return 0; }\n")
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "modules/sub")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "base")
    (top / "modules" / "sub" / "lib.o").write_text("built\n")          # a build product inside the submodule
    with LocalSandbox(top, limits=Limits.from_config(PAPER.harness)) as sb:
        assert commit_prepared_state(sb) == []
        sb.write_file("/testbed/main.c", "int main(void) { return 1; }\n")
        patch = export_candidate(sb).patch
    assert "main.c" in patch and "Subproject" not in patch and "modules/sub" not in patch


def test_a_package_manager_the_registry_cannot_serve_leaves_the_row_undecided(rows, tmp_path, monkeypatch):
    """A row whose package.json names pnpm installs that pnpm from the npm registry first. When this machine cannot
    get it (here: a registry that refuses connections) that is the machine's reach, not the row's: the row stays
    undecided with the reason (exit 4 on the CLI), never dropped or judged with another pnpm."""
    repo, task = row_of(rows, "js")
    monkeypatch.setitem(toolchain.TOOLCHAINS, task.repo, toolchain.Toolchain(
        toolchain.JS, ("nodejs",), install=toolchain.DepsInstall("pnpm install --frozen-lockfile", "pnpm",
                                                                "package-lock.json")))
    git(repo, "checkout", "-q", "-b", "pnpm", task.base_commit)
    pkg = json.loads((repo / "package.json").read_text())
    (repo / "package.json").write_text(json.dumps({**pkg, "packageManager": "pnpm@9.10.0"}))
    git(repo, "commit", "-q", "-am", "names pnpm")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    named = dataclasses.replace(task, instance_id="fixture__calc-js-3", base_commit=base,
                                eval_script=task.eval_script.replace(task.base_commit, base))
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    results = tmp_path / "results"
    summary = run_ml_qualification([named], results_dir=results, recipe_out=None, sources={task.repo: str(repo)},
                                   root=tmp_path / "cache", repeat=1, log=lambda m: None)
    assert summary["decided"] == 0 and not (results / "instances.jsonl").exists()
    (failure,) = summary["failures"]
    assert failure["stage"] == "toolchain" and "pnpm@9.10.0" in failure["error"], failure
    assert not ml_build.tool_dir("pnpm", "9.10.0", tmp_path / "cache").exists()


def test_the_package_manager_a_row_names_installs_builds_and_runs_its_tests(rows, tmp_path, monkeypatch):
    """vuejs/core's shape: the Base's package.json names its package manager, whose commands are the row's install,
    build step and test command. The one in the cache (here a stand-in `fakepm` put there first, over npm: the npm
    registry is not needed to test the route) is on PATH for all three and bound read-only into the sandbox; the
    row qualifies, and its checkout records the manager."""
    row_of(rows, "js")                        # node and npm are here
    monkeypatch.setitem(toolchain.TOOLCHAINS, "fixture/calc-pm", toolchain.Toolchain(
        toolchain.JS, ("nodejs",), install=toolchain.DepsInstall("fakepm install", "fakepm", "package-lock.json"),
        procfs=toolchain.NODE_PROCFS))
    root = tmp_path / "cache"
    tool = ml_build.tool_dir("fakepm", "1.0.0", root)
    (tool / "node_modules" / ".bin").mkdir(parents=True)
    fake = tool / "node_modules" / ".bin" / "fakepm"
    fake.write_text('#!/bin/sh\necho "fakepm $*" >&2\n[ "$1" = install ] && exec npm ci\nexec npm "$@"\n')
    fake.chmod(0o755)
    (tool / "tool.json").write_text(json.dumps({"name": "fakepm", "version": "1.0.0"}))
    files = {k: v for k, v in js_files(tmp_path).items()}
    pkg = json.loads(files["package.json"])
    pkg["packageManager"] = "fakepm@1.0.0"
    pkg["scripts"]["test"] = "node test/calc.test.js"
    files["package.json"] = json.dumps(pkg)
    pm_repo, row = make_row(
        tmp_path, "calc-pm", files, ("src/calc.js", "a + b", "a * b"), "test/calc.test.js",
        "test('add works', () => { if (calc.add(2, 3) !== 5) throw new Error('add'); });\n", ["fakepm run build"],
        "fakepm run test", f2p=["add works"], p2p=["sub works"], log_parser="parse_log_tap")
    pm_task = Task.from_row(row, source="fixture")
    results = tmp_path / "results"
    summary = run_ml_qualification([pm_task], results_dir=results, recipe_out=None, sources={pm_task.repo: str(pm_repo)},
                                   root=root, repeat=1, keep_checkouts=True, log=lambda m: None)
    assert summary["qualified"] == 1, (results / "instances.jsonl").read_text()
    co = ml_build.checkout_dir(pm_task.instance_id, root)
    record = json.loads(ml_build.checkout_record(co).read_text())
    assert record["install"]["package_manager"] == "fakepm@1.0.0" and (co / "dist" / "calc.js").is_file()
    tenv = environment_for(mlgit.ml_task(pm_task, toolchain.native_env(pm_task.repo)), root=root)
    assert tenv.tools == (tool,) and tenv.procfs


# One qualified row per JS/TS repository and a C++ one, each its language's route (npm ci + mocha, npm ci + a build +
# jest, pnpm at the row's version + vitest; CMake + GoogleTest).
REAL_ROWS = ("axios__axios-5892", "immutable-js__immutable-js-2006", "vuejs__core-11915", "fmtlib__fmt-3248")


@needs_rows
@pytest.mark.parametrize("iid", REAL_ROWS)
def test_a_real_qualified_row_resolves_on_gold_and_not_on_an_empty_patch(iid, tmp_path):
    """The committed recipe's row, built from the git source $EXECCRITIC_GIT_SOURCES names (the user's cache: a
    built checkout is reused), graded by the image-free official evaluator as qualify-ml graded it."""
    task = mlgit.load_multilingual_git(instance_ids=[iid], dataset=str(MULTILINGUAL)).tasks[0]
    sources = configured_sources()
    if task.repo not in sources:
        pytest.skip(allowed("git-mirror", f"$EXECCRITIC_GIT_SOURCES names no source for {task.repo}"))
    ml_build.prepare_checkout(task, source=sources[task.repo])
    env = environment_for(task)
    gold = evaluate_local(task, task.patch, env, harness=PAPER.harness, log_dir=tmp_path / "gold")
    empty = evaluate_local(task, "", env, harness=PAPER.harness, log_dir=tmp_path / "empty")
    assert gold.valid and gold.resolved, gold.error
    assert empty.valid and not empty.resolved, empty.error
