"""The fail-closed executor on real projects (toolz, boltons) through real sandboxes.

Every outcome the harness distinguishes is produced for real - a real pytest run in bubblewrap (and,
in tests/docker/test_execute_docker.py, in a container): PASS, behavioral FAIL by assertion and by a
source-raised exception, collection error, missing dependency, node not collected, timeout, memory
exhaustion, an unapplicable patch, a forbidden source edit, and an exit status that lies.
"""

from __future__ import annotations

import pytest

from execcritic.sandbox.base import Limits
from execcritic.config import HarnessConfig
from execcritic.harness.execute import execute
from execcritic.harness.execution import FailureKind, Verdict
from tests.bundles import ScenarioKit

pytestmark = [pytest.mark.integration, pytest.mark.slow]


_DOCKER = pytest.mark.docker
KITS = [pytest.param(("toolz", "local"), id="toolz-local"), pytest.param(("boltons", "local"), id="boltons-local"),
        pytest.param(("toolz", "docker"), id="toolz-docker", marks=_DOCKER),
        pytest.param(("boltons", "docker"), id="boltons-docker", marks=_DOCKER)]


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
        sandbox = DockerSandbox(image, client=client, activate="", limits=Limits(memory_mb=512, pids=1024))
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
