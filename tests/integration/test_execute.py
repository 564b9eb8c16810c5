"""The fail-closed executor on real projects (toolz, boltons) through real sandboxes.

Every outcome the harness distinguishes is produced for real - a real pytest run in bubblewrap (and,
in tests/docker/test_execute_docker.py, in a container): PASS, behavioral FAIL by assertion and by a
source-raised exception, collection error, missing dependency, node not collected, timeout, memory
exhaustion, an unapplicable patch, a forbidden source edit, and an exit status that lies.
"""

from __future__ import annotations

import dataclasses

import pytest

from execcritic.sandbox.base import Limits
from execcritic.config import PAPER, HarnessConfig
from execcritic.harness.execute import execute
from execcritic.harness.execution import FailureKind, Verdict
from tests.bundles import ScenarioKit, diff_after

pytestmark = [pytest.mark.integration, pytest.mark.slow]
COLD = dataclasses.replace(PAPER.harness, prestart_next_run=False)    # each run leaves its tree as it ran


_DOCKER = pytest.mark.docker
KITS = [pytest.param(("toolz", "local"), id="toolz-local"), pytest.param(("boltons", "local"), id="boltons-local"),
        pytest.param(("toolz", "docker"), id="toolz-docker", marks=_DOCKER),
        pytest.param(("boltons", "docker"), id="boltons-docker", marks=_DOCKER),
        # files through the Docker API only, as with a remote daemon (the others read the volumes from the host)
        pytest.param(("toolz", "docker-api"), id="toolz-docker-api-files", marks=_DOCKER)]


@pytest.fixture(scope="module", params=KITS)
def kit(request, demo_toolz, demo_boltons):
    project, backend = request.param
    demo = demo_toolz if project == "toolz" else demo_boltons
    if backend == "local":
        sandbox = demo.open_local(limits=Limits(memory_mb=512, pids=1024))
    else:
        from execcritic.sandbox.docker import DockerSandbox
        from execcritic.sandbox.images import build_task_image

        client = request.getfixturevalue("docker_client")
        base = request.getfixturevalue("base_image")
        image = build_task_image(client, demo.repo, f"execcritic/test-task:{project}-demo", base=base)
        sandbox = DockerSandbox(image, client=client, activate="", limits=Limits(memory_mb=512, pids=1024),
                                host_files=False if backend == "docker-api" else None)
    yield ScenarioKit(demo, sandbox)
    sandbox.close()


def test_official_bundle_fails_on_base_and_passes_on_gold(kit):
    bundle = kit.official_bundle()
    base = execute(kit.task, bundle, sandbox=kit.sandbox)
    assert (base.valid, base.verdict, base.failure_kind) == (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE), \
        base.diagnostic + base.output_tail
    assert base.isolated is True and base.backend == kit.sandbox.backend
    assert {n.outcome for n in base.nodes} == {"failed"}
    gold = execute(kit.task, bundle, kit.task.patch, sandbox=kit.sandbox, check_source_patch=False)
    assert (gold.valid, gold.verdict) == (True, Verdict.PASS), gold.diagnostic + gold.output_tail
    assert gold.exit_code == 0 and set(gold.phases) >= {"reset", "apply", "run", "parse"}


def test_source_raised_exception_is_a_behavioral_failure(kit):
    ex = execute(kit.task, kit.official_bundle(), kit.recursing_patch(), sandbox=kit.sandbox)
    assert ex.valid and ex.verdict is Verdict.FAIL, ex.diagnostic + ex.output_tail
    assert "RecursionError" in ex.output_tail


def test_collection_error_is_invalid(kit):
    ex = execute(kit.task, kit.bundle("def test_broken(:\n    pass\n", ["test_broken"]), sandbox=kit.sandbox)
    assert (ex.valid, ex.verdict, ex.failure_kind) == (False, None, FailureKind.COLLECTION_ERROR), ex.diagnostic


def test_missing_dependency_is_invalid(kit):
    code = "import definitely_not_installed_pkg_xyz\n\ndef test_needs_it():\n    assert True\n"
    ex = execute(kit.task, kit.bundle(code, ["test_needs_it"], new_file=True), sandbox=kit.sandbox)
    assert (ex.valid, ex.failure_kind) == (False, FailureKind.MISSING_DEPENDENCY), ex.diagnostic
    assert ex.load_errors


def test_node_not_collected_is_invalid(kit):
    code = "def test_present():\n    assert True\n"
    ex = execute(kit.task, kit.bundle(code, ["test_present", "test_absent"], new_file=True), sandbox=kit.sandbox)
    assert (ex.valid, ex.failure_kind) == (False, FailureKind.NODE_NOT_COLLECTED), ex.diagnostic
    assert [n.status for n in ex.nodes if n.node.endswith("test_absent")] == [None]


def test_timeout_is_invalid_and_flagged_by_the_sandbox(kit):
    code = "import time\n\ndef test_slow():\n    time.sleep(60)\n"
    ex = execute(kit.task, kit.bundle(code, ["test_slow"], new_file=True), sandbox=kit.sandbox,
                 config=HarnessConfig(test_timeout_s=3))
    assert (ex.valid, ex.failure_kind, ex.timed_out) == (False, FailureKind.TIMEOUT, True), ex.diagnostic
    assert ex.phases["run"] < 30


def test_memory_exhaustion_is_invalid(kit):
    code = "def test_hog():\n    blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]\n    assert blocks\n"
    ex = execute(kit.task, kit.bundle(code, ["test_hog"], new_file=True), sandbox=kit.sandbox)
    assert (ex.valid, ex.failure_kind, ex.oom_killed) == (False, FailureKind.OUT_OF_MEMORY, True), \
        ex.diagnostic + ex.output_tail


def test_unapplicable_source_patch_is_invalid_with_diagnostic(kit):
    bad = kit.task.patch.replace("@@ -", "@@ -9", 1).replace(kit.demo.spec.buggy.strip(), "no such line", 1)
    ex = execute(kit.task, kit.official_bundle(), bad, sandbox=kit.sandbox)
    assert (ex.valid, ex.failure_kind) == (False, FailureKind.PATCH_APPLY_FAILED), ex.diagnostic
    assert "git apply" in ex.diagnostic


def test_forbidden_source_edit_never_runs(kit):
    sneaky = kit.conftest_patch("import pytest\n")
    ex = execute(kit.task, kit.official_bundle(), sneaky, sandbox=kit.sandbox)
    assert (ex.valid, ex.failure_kind) == (False, FailureKind.FORBIDDEN_SOURCE_EDIT), ex.diagnostic
    assert "run" not in ex.phases


def test_exit_status_that_lies_is_invalid(kit):
    """A hook that forces exit 0 after a failing node is not a PASS and not a FAIL."""
    code = ("import pytest\n\n@pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session, exitstatus):\n"
            "    session.exitstatus = 0\n")
    bundle = kit.official_bundle(extra_files={kit.test_dir + "/conftest.py": code})
    ex = execute(kit.task, bundle, sandbox=kit.sandbox)
    assert (ex.valid, ex.failure_kind, ex.exit_code) == (False, FailureKind.INCONSISTENT_EXIT, 0), \
        ex.diagnostic + ex.output_tail


def test_a_check_after_a_dirty_run_sees_the_same_tree(kit):
    """Reset-before-grade: a run that scribbles over the tree cannot influence the next check."""
    code = ("import pathlib\n\ndef test_vandal():\n"
            f"    pathlib.Path('{kit.demo.spec.source_file}').write_text('raise SystemExit(3)\\n')\n"
            "    pathlib.Path('junk.txt').write_text('x')\n")
    first = execute(kit.task, kit.official_bundle(), kit.task.patch, sandbox=kit.sandbox, check_source_patch=False)
    vandal = execute(kit.task, kit.bundle(code, ["test_vandal"], new_file=True), sandbox=kit.sandbox)
    assert vandal.valid and vandal.verdict is Verdict.PASS
    again = execute(kit.task, kit.official_bundle(), kit.task.patch, sandbox=kit.sandbox, check_source_patch=False)
    assert (first.verdict, again.verdict) == (Verdict.PASS, Verdict.PASS)
    assert [n.status for n in first.nodes] == [n.status for n in again.nodes]


def test_plain_subprocess_mode_says_not_isolated(demo_toolz):
    kit = ScenarioKit(demo_toolz, demo_toolz.open_local(isolated=False))
    try:
        ex = execute(kit.task, kit.official_bundle(), sandbox=kit.sandbox)
        assert ex.valid and ex.verdict is Verdict.FAIL
        assert ex.isolated is False
    finally:
        kit.sandbox.close()


XFAIL_CASES = [
    # (test code, bound nodes, expected (valid, verdict, failure kind))
    pytest.param("import pytest\n\n@pytest.mark.xfail(reason='known bug')\ndef test_known():\n    assert False\n",
                 ["test_known"], (False, None, FailureKind.EXPECTED_FAILURE_ONLY), id="xfail-alone"),
    pytest.param("import pytest\n\ndef test_known():\n    pytest.xfail('known bug')\n",
                 ["test_known"], (False, None, FailureKind.EXPECTED_FAILURE_ONLY), id="imperative-xfail"),
    pytest.param("import pytest\n\n@pytest.mark.xfail(reason='known bug')\ndef test_known():\n    assert True\n",
                 ["test_known"], (False, None, FailureKind.EXPECTED_FAILURE_ONLY), id="xpass-non-strict"),
    pytest.param("import pytest\n\n@pytest.mark.xfail(strict=True)\ndef test_known():\n    assert True\n",
                 ["test_known"], (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE), id="xpass-strict-fails"),
    pytest.param("import pytest\n\n@pytest.mark.xfail\ndef test_known():\n    assert False\n\n"
                 "def test_real():\n    assert 1 == 2\n",
                 ["test_known", "test_real"], (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE),
                 id="xfail-next-to-a-failure"),
    pytest.param("import pytest\n\n@pytest.mark.xfail\ndef test_known():\n    assert False\n\n"
                 "def test_real():\n    assert 1 == 1\n",
                 ["test_known", "test_real"], (True, Verdict.PASS, FailureKind.PASSED), id="xfail-next-to-a-pass"),
]


@pytest.mark.parametrize("code,nodes,expected", XFAIL_CASES)
def test_expected_failures_carry_no_verdict(kit, code, nodes, expected):
    """An expected failure ran, but the runner inverts its outcome: alone it is no verdict either way (a
    Base gate 'fail' it cannot give, a PASS it cannot earn); next to ordinary nodes it is neutral."""
    ex = execute(kit.task, kit.bundle(code, nodes, new_file=True), sandbox=kit.sandbox)
    assert (ex.valid, ex.verdict, ex.failure_kind) == expected, ex.diagnostic + ex.output_tail
    if expected[2] is FailureKind.PASSED:
        assert "1 expected-failure node(s) ran and are neutral" in ex.diagnostic


def test_a_fork_bomb_hits_the_process_limit_not_a_verdict(kit):
    if kit.sandbox.describe().get("pids_detection", "none") == "none":
        pytest.skip("this sandbox has no pids cgroup to read (rlimit fallback): the limit holds but cannot be "
                    "attributed")
    code = ("import subprocess\n\ndef test_fork_many():\n    procs = []\n    try:\n"
            "        for _ in range(4000):\n            procs.append(subprocess.Popen(['sleep', '30']))\n"
            "    finally:\n        for p in procs:\n            p.kill()\n            p.wait()\n")
    ex = execute(kit.task, kit.bundle(code, ["test_fork_many"], new_file=True), sandbox=kit.sandbox)
    assert (ex.valid, ex.verdict, ex.failure_kind) == (False, None, FailureKind.PROCESS_LIMIT), \
        ex.diagnostic + ex.output_tail
    after = execute(kit.task, kit.official_bundle(), sandbox=kit.sandbox)     # the limit is per run
    assert (after.valid, after.verdict) == (True, Verdict.FAIL), after.diagnostic


def test_a_run_cannot_change_what_the_next_run_imports(kit):
    """Bytecode planted by one run (an unchecked-hash pyc: the interpreter never compares it with the source)
    is gone before the next: the next check imports the tree's source, not the plant."""
    source = kit.demo.spec.source_file
    code = ("import importlib.util, pathlib, py_compile, tempfile\n\ndef test_plant():\n"
            f"    pyc = pathlib.Path(importlib.util.cache_from_source({source!r}))\n"
            "    pyc.parent.mkdir(exist_ok=True)\n"
            "    evil = pathlib.Path(tempfile.mkdtemp()) / 'evil.py'\n"
            "    evil.write_text('raise SystemExit(3)\\n')\n"
            "    py_compile.compile(str(evil), cfile=str(pyc),\n"
            "                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n")
    planted = execute(kit.task, kit.bundle(code, ["test_plant"], new_file=True), sandbox=kit.sandbox)
    assert planted.valid and planted.verdict is Verdict.PASS, planted.diagnostic + planted.output_tail
    base = execute(kit.task, kit.official_bundle(), sandbox=kit.sandbox)
    assert (base.valid, base.verdict, base.failure_kind) == (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE), \
        base.diagnostic + base.output_tail
    gold = execute(kit.task, kit.official_bundle(), kit.task.patch, sandbox=kit.sandbox, check_source_patch=False)
    assert (gold.valid, gold.verdict) == (True, Verdict.PASS), gold.diagnostic + gold.output_tail


@pytest.mark.only_for(kit=[("boltons", "local"), ("boltons", "docker")])    # toolz has no conftest to compile
def test_rewritten_test_modules_are_served_and_a_run_cannot_poison_them(kit):
    """pytest's rewrite of the bundle's test module is compiled by a clean Base run and served by the harness
    to later runs (pytest then reads it instead of rewriting: the served pyc keeps the pinned mtime). A
    candidate that overwrites the served pyc with forged test code changes its own run at most: the next run
    gets the harness's copy, and Base still FAILs, Gold still PASSes. (Runs cold: the test reads the tree a
    run left, which a run started ahead for the next one would have reset.)"""
    from execcritic.harness import rewrite_cache

    bundle = kit.official_bundle()
    test_file = kit.demo.spec.test_file
    for _ in range(2):
        base = execute(kit.task, bundle, sandbox=kit.sandbox, config=COLD)
        assert (base.valid, base.verdict) == (True, Verdict.FAIL), base.diagnostic + base.output_tail
    assert test_file in base.extra["rewrite_cache"]["served"]
    pycache = f"{kit.test_dir}/__pycache__"
    root = kit.sandbox.workdir
    listing = kit.sandbox.run(f"cd {root} && stat -c '%Y %n' {pycache}/*-pytest-*.pyc", timeout=30).output.split()
    assert set(listing[::2]) == {str(rewrite_cache.MTIME)}, listing      # served and read, none rewritten
    served = {rel: kit.sandbox.read_file(f"{root}/{rel}") for rel in listing[1::2]}
    cache = dict(rewrite_cache._CACHES[kit.sandbox])

    names = [n.split("::")[-1] for n in kit.task.fail_to_pass]
    forged = "".join(f"def {n}():\n    pass\n" for n in names)
    forge = ("\nimport glob as _glob, marshal as _marshal\n"
             f"for _p in _glob.glob({pycache + '/*-pytest-*.pyc'!r}):\n"
             "    with open(_p, 'rb') as _f:\n        _head = _f.read(16)\n"
             "    with open(_p, 'wb') as _f:\n"
             f"        _f.write(_head + _marshal.dumps(compile({forged!r}, 'forged', 'exec')))\n")
    poison = diff_after(kit.demo.repo, lambda w: (w / kit.demo.spec.source_file).write_text(
        (w / kit.demo.spec.source_file).read_text() + forge))
    # the runtime's answer: the AST screen refuses this candidate first (it builds code and writes bytecode)
    ran = execute(kit.task, bundle, poison, sandbox=kit.sandbox, config=COLD, check_source_patch=False)
    assert ran.verdict is not Verdict.PASS, ran.diagnostic + ran.output_tail
    for pyc_rel, pyc in served.items():
        planted = kit.sandbox.read_file(f"{kit.sandbox.workdir}/{pyc_rel}")
        assert planted != pyc, f"the candidate did not overwrite the served {pyc_rel}"
    assert rewrite_cache._CACHES[kit.sandbox] == cache          # a candidate's run is never captured
    after = execute(kit.task, bundle, sandbox=kit.sandbox, config=COLD)
    assert (after.valid, after.verdict) == (True, Verdict.FAIL), after.diagnostic + after.output_tail
    assert after.extra["rewrite_cache"]["served"] == base.extra["rewrite_cache"]["served"]
    gold = execute(kit.task, bundle, kit.task.patch, sandbox=kit.sandbox, check_source_patch=False, config=COLD)
    assert (gold.valid, gold.verdict) == (True, Verdict.PASS), gold.diagnostic + gold.output_tail


@pytest.mark.only_for(kit=[("boltons", "local"), ("boltons", "docker")])    # toolz has no conftest to compile
def test_what_one_bundles_run_writes_is_never_served_to_another_bundle(kit):
    """A bundle whose test overwrites the conftest's compiled module during its clean Base run (the run the cache
    is filled from: here the sandbox's first) poisons only its own cache: another bundle's runs get the conftest
    compiled by their own clean run, and keep their verdicts."""
    from execcritic.harness import rewrite_cache

    code = ("import glob, marshal\n\ndef test_poison():\n"
            "    for p in glob.glob('**/__pycache__/conftest.*-pytest-*.pyc', recursive=True):\n"
            "        with open(p, 'rb') as f:\n            head = f.read(16)\n"
            "        with open(p, 'wb') as f:\n"
            "            f.write(head + marshal.dumps(compile('raise SystemExit(7)', '<forged>', 'exec')))\n")
    hostile = kit.bundle(code, ["test_poison"], new_file=True)
    rewrite_cache.clear(kit.sandbox)
    ran = execute(kit.task, hostile, sandbox=kit.sandbox, config=COLD)
    assert (ran.valid, ran.verdict) == (True, Verdict.PASS), ran.diagnostic + ran.output_tail
    poisoned = [src for src in ran.extra["rewrite_cache"]["captured"] if src.endswith("conftest.py")]
    assert poisoned, f"{kit.demo.spec.name}: no conftest was compiled"
    official = kit.official_bundle()
    for _ in range(2):                           # the first fills the official bundle's cache, the second uses it
        after = execute(kit.task, official, sandbox=kit.sandbox, config=COLD)
        assert (after.valid, after.verdict) == (True, Verdict.FAIL), after.diagnostic + after.output_tail
    assert set(poisoned) <= set(after.extra["rewrite_cache"]["served"])
    caches = rewrite_cache._CACHES[kit.sandbox]
    mine, theirs = caches[ran.test_patch_sha256], caches[after.test_patch_sha256]
    assert all(mine[k] != theirs[k] for k in mine if k[0] in poisoned)      # the forged one stayed with its bundle
