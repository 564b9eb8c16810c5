"""Runs started ahead of time (harness/prestart.py) on a real project in the real local and Docker sandboxes: the next
`execute` of the same command finds its interpreter started on Base, releases it once the patches are
applied, and reaches the cold run's verdicts; nothing a run does reaches the run started after it; a sandbox
whose runner imports code of the checkout falls back to cold runs."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import pytest

from execcritic.config import PAPER
from execcritic.harness import prestart
from execcritic.harness.apply import TEST, apply_patch
from execcritic.harness.execute import execute
from execcritic.harness.instrument import candidate_facts
from execcritic.harness.reporter.channel import ReporterChannel
from execcritic.harness.execution import FailureKind, Verdict
from execcritic.sandbox.base import Limits
from execcritic.sandbox.local import LocalSandbox
from tests.bundles import ScenarioKit, diff_after

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLD = dataclasses.replace(PAPER.harness, prestart_next_run=False)


BACKENDS = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


def open_sandbox_on(request, backend: str, demo, repo=None):
    """`demo`'s checkout (or `repo`, a modified copy of it) in a sandbox of `backend`."""
    repo = repo or demo.repo
    if backend == "local":
        return LocalSandbox(repo, activate=demo.activate, binds=[demo.venv], limits=Limits(memory_mb=512, pids=1024))
    from execcritic.sandbox.docker import DockerSandbox
    from execcritic.sandbox.images import build_task_image

    client = request.getfixturevalue("docker_client")
    tag = f"execcritic/test-task:prestart-{abs(hash(str(repo))) % 10**8}"
    image = build_task_image(client, repo, tag, base=request.getfixturevalue("base_image"))
    return DockerSandbox(image, client=client, activate="", limits=Limits(memory_mb=512, pids=1024))


@pytest.fixture(scope="module", params=BACKENDS)
def kit(request, demo_toolz):
    sandbox = open_sandbox_on(request, request.param, demo_toolz)
    yield ScenarioKit(demo_toolz, sandbox)
    sandbox.close()


def _seed_in(command: str) -> int:
    return int(re.search(r"PYTHONHASHSEED=(\d+)", command).group(1))


def test_a_run_started_ahead_reaches_the_cold_runs_verdicts(kit):
    bundle = kit.official_bundle()
    sb = kit.sandbox
    prestart.discard(sb)
    runs = [execute(kit.task, bundle, sandbox=sb) for _ in range(2)]
    assert [r.extra["prestarted"] for r in runs] == [False, True]
    gold = execute(kit.task, bundle, kit.task.patch, sandbox=sb, check_source_patch=False)
    wrong = execute(kit.task, bundle, kit.comment_patch(), sandbox=sb)
    cold = [execute(kit.task, bundle, p, sandbox=sb, config=COLD, check_source_patch=False)
            for p in (None, kit.task.patch, kit.comment_patch())]
    for warm, ref in zip([runs[1], gold, wrong], cold):
        assert warm.extra["prestarted"] is True and ref.extra["prestarted"] is False
        assert (warm.valid, warm.verdict, warm.failure_kind) == (ref.valid, ref.verdict, ref.failure_kind), \
            warm.diagnostic + warm.output_tail
        assert [n.outcome for n in warm.nodes] == [n.outcome for n in ref.nodes]
        assert warm.extra["reporter"]["ended"] and not warm.extra["reporter"]["tampers"]
        # the seed it ran with is the one recorded (drawn when the run was started ahead)
        assert warm.extra["hashseed"] == _seed_in(warm.command)
        assert warm.phases["reset"] == 0.0 and "prestart" in warm.phases
    assert gold.verdict is Verdict.PASS and runs[1].verdict is Verdict.FAIL and wrong.verdict is Verdict.FAIL


def test_a_run_started_ahead_is_used_only_by_the_same_command_in_the_untouched_sandbox(kit):
    bundle = kit.official_bundle()
    sb = kit.sandbox
    execute(kit.task, bundle, sandbox=sb)
    assert prestart.wait_ready(sb, 60)
    prestart.waiting_in(sb).run("true", timeout=30)       # anything done meanwhile where the run waits
    assert execute(kit.task, bundle, sandbox=sb).extra["prestarted"] is False
    names = [n.split("::")[-1] for n in kit.task.fail_to_pass]
    other = kit.bundle("def test_other():\n    assert True\n", ["test_other"], new_file=True)
    ran = execute(kit.task, other, sandbox=sb)            # another command
    assert ran.extra["prestarted"] is False and ran.verdict is Verdict.PASS, ran.diagnostic
    assert execute(kit.task, other, sandbox=sb).extra["prestarted"] is True
    seeded = execute(kit.task, other, sandbox=sb, hashseed=12345)     # a seed asked for: that seed, cold
    assert seeded.extra["prestarted"] is False and seeded.extra["hashseed"] == 12345
    assert names and execute(kit.task, bundle, sandbox=sb, config=COLD).extra["prestarted"] is False
    assert prestart.claim(sb) is None                     # the cold run ended what it did not use


def test_nothing_a_run_does_reaches_the_run_started_after_it(kit):
    """A candidate plants modules the next interpreter would import before any test code (a shadowing
    `iniconfig` on PYTHONPATH, which pytest imports while it loads; one in /tmp) and leaves a process
    behind: the next run is started only after the sandbox was reset and emptied, and Base still FAILs."""
    bundle = kit.official_bundle()
    sb = kit.sandbox
    plant = ("\nimport os as _os, subprocess as _sp\n"
             "for _d in ('/testbed', '/tmp'):\n"
             "    with open(_os.path.join(_d, 'iniconfig.py'), 'w') as _f:\n"
             "        _f.write('raise SystemExit(0)\\n')\n"
             "_sp.Popen(['sleep', '600'])\n")
    spec = kit.demo.spec
    poison = diff_after(kit.demo.repo, lambda w: (w / spec.source_file).write_text(
        (w / spec.source_file).read_text() + plant))
    ran = execute(kit.task, bundle, poison, sandbox=sb)
    assert ran.verdict is not Verdict.PASS, ran.diagnostic + ran.output_tail
    assert prestart.wait_ready(sb, 60)
    for planted in ("/testbed/iniconfig.py", "/tmp/iniconfig.py"):
        with pytest.raises(FileNotFoundError):
            prestart.waiting_in(sb).read_file(planted)
    after = execute(kit.task, bundle, sandbox=sb)
    assert after.extra["prestarted"] is True
    assert (after.valid, after.verdict, after.failure_kind) == (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE), \
        after.diagnostic + after.output_tail


def test_a_runner_that_imports_the_checkout_is_never_started_ahead(request, demo_toolz, tmp_path):
    """pytest imports `iniconfig` while it loads; here the Base ships its own copy on PYTHONPATH (as a task
    whose product is a dependency of pytest would, or pytest-dev/pytest itself). A run started ahead would
    hold the Base's copy while the patches may change it: its reporter says so and exits, the harness runs
    the same execution cold, says why, and starts nothing ahead in that sandbox again."""
    import iniconfig as _probe  # noqa: F401  (the venv's copy, to ship in the checkout)

    venv_copy = next(demo_toolz.venv.glob("lib/python*/site-packages/iniconfig"))
    repo = tmp_path / "repo"
    shutil.copytree(demo_toolz.repo, repo, symlinks=True)
    shutil.copytree(venv_copy, repo / "iniconfig")
    # (local only: the Docker test image puts nothing of the checkout on sys.path before pytest loads)
    with open_sandbox_on(request, "local", demo_toolz, repo) as sb:
        kit = ScenarioKit(demo_toolz, sb)
        bundle = kit.official_bundle()
        first = execute(kit.task, bundle, sandbox=sb)
        assert first.verdict is Verdict.FAIL and first.extra["prestarted"] is False, first.diagnostic
        second = execute(kit.task, bundle, sandbox=sb)
        assert (second.valid, second.verdict) == (True, Verdict.FAIL), second.diagnostic + second.output_tail
        assert second.extra["prestarted"] is False, (second.extra, second.output_tail)
        assert any(m.startswith("iniconfig") for m in second.extra["prestart_stale"]), second.extra
        third = execute(kit.task, bundle, sandbox=sb)
        assert third.extra["prestarted"] is False and "prestart_stale" not in third.extra
        assert prestart.claim(sb) is None


CHEATS_AT_CONFTEST_TIME = {      # (graded without the static screen, which refuses both first)
    # a runner function rebound: every report of the call phase says passed
    "runner_function": ("import importlib\n_r = importlib.import_module('_pytest.runner')\n_orig = _r.call_and_report\n"
                        "def _forged(*args, **kwargs):\n    report = _orig(*args, **kwargs)\n"
                        "    report.outcome = 'passed'\n    return report\n_r.call_and_report = _forged\n"),
    # a runner class given a property that shadows its base's
    "runner_class": ("import importlib\n_rep = importlib.import_module('_pytest.reports')\n"
                     "_rep.TestReport.passed = property(lambda self: True)\n"),
}


@pytest.mark.parametrize("idle", [True, False], ids=["idle-before", "back-to-back"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cheat", sorted(CHEATS_AT_CONFTEST_TIME))
def test_tampering_while_pytest_loads_conftest_files_is_caught_in_a_run_started_ahead(request, demo_toolz, tmp_path,
                                                                                      cheat, backend, idle):
    """A run started ahead snapshots the runner before its go; a Base whose conftest imports the product runs
    the candidate's code after that and before pytest configures, where a cold run takes its first snapshot.
    The first watch after the go judges what changed since as the cold run's first watch does."""
    repo = tmp_path / "repo"
    shutil.copytree(demo_toolz.repo, repo, symlinks=True)
    spec = demo_toolz.spec
    module = spec.source_file[:-3].replace("/", ".")
    (repo / "conftest.py").write_text(f"import {module}  # noqa: F401  (the product, imported by the Base)\n")
    code = "\n" + CHEATS_AT_CONFTEST_TIME[cheat]
    candidate = diff_after(demo_toolz.repo, lambda w: (w / spec.source_file).write_text(
        (w / spec.source_file).read_text().replace(spec.buggy, spec.correct) + code))
    with open_sandbox_on(request, backend, demo_toolz, repo) as sb:
        kit = ScenarioKit(demo_toolz, sb)
        bundle = kit.official_bundle()
        base = execute(kit.task, bundle, sandbox=sb)
        assert (base.valid, base.verdict) == (True, Verdict.FAIL), base.diagnostic + base.output_tail
        warm_base = execute(kit.task, bundle, sandbox=sb)       # no false alarm with a conftest either
        assert warm_base.extra["prestarted"] is True and not warm_base.extra["reporter"]["tampers"]
        assert (warm_base.valid, warm_base.verdict) == (True, Verdict.FAIL), warm_base.diagnostic
        if idle:             # the run started ahead takes the runner's snapshots while it waits (and rebases)
            assert prestart.wait_ready(sb, 60)
        # the runtime's answer (the AST screen refuses these candidates before they run: import_module of
        # the runner is computed access)
        warm = execute(kit.task, bundle, candidate, sandbox=sb, check_source_patch=False)
        cold = execute(kit.task, bundle, candidate, sandbox=sb, config=COLD, check_source_patch=False)
    if idle:
        assert warm.extra["reporter"]["snapshots_ahead"] is True, warm.extra["reporter"]
    assert warm.extra.get("prestarted") is True, (warm.diagnostic, warm.extra)
    assert cold.extra.get("prestarted") is False, (cold.diagnostic, cold.extra)
    for ran in (warm, cold):
        assert (ran.valid, ran.failure_kind) == (False, FailureKind.RUNNER_TAMPERED), ran.diagnostic + ran.output_tail
        assert any(spec.source_file in t for t in map(str, ran.extra["reporter"]["tampers"])), ran.extra["reporter"]


def test_an_audit_record_says_how_each_run_ran(tmp_path):
    """A Gold audit row keeps each run's hash seed (a flaky run can be rerun with it) and whether it was started
    ahead of time: on a requests task Base starts the Gold run, which is released prestarted."""
    from execcritic.pipeline.audit import AuditConfig, audit_unit
    from tests.sdist import load_sdist_tasks

    task = load_sdist_tasks(["psf__requests-5414"])["psf__requests-5414"]
    row = audit_unit((task, AuditConfig(out=str(tmp_path / "audit.jsonl"))))
    assert row["Q"] == 1, row
    assert isinstance(row["base"]["hashseed"], int) and isinstance(row["gold"]["hashseed"], int)
    assert (row["base"]["prestarted"], row["gold"]["prestarted"]) == (False, True), row


@pytest.mark.parametrize("released", ["before-it-is-ready", "after-it-is-ready"])
def test_a_run_released_before_it_is_ready_takes_its_snapshots_as_a_cold_run(kit, released):
    """Checks back to back: the go is there before the run started ahead got to its snapshots. It has no idle
    time to use, so it skips them and takes them at configure as a cold run does (one snapshot, not a
    snapshot and a rebase); with idle time it takes them while it waits. Same verdict either way."""
    bundle = kit.official_bundle()
    sb = kit.sandbox
    prestart.discard(sb)
    cold = execute(kit.task, bundle, sandbox=sb, config=COLD)
    assert (cold.valid, cold.verdict) == (True, Verdict.FAIL), cold.diagnostic
    sb.reset()
    assert apply_patch(sb, bundle.test_patch, name="test", ladder=TEST, timeout=60).applied
    facts = {"workdir": sb.workdir, "runner": "pytest", **candidate_facts(None, bundle.test_patch)}
    channel = ReporterChannel(sb.channel_dir, {"workdir": sb.workdir, "runner": "pytest"}, prestart=True)
    if released == "before-it-is-ready":
        channel.go(facts)                      # sent with the key and the boot facts: there at once
    spawned = sb.spawn(cold.command, env=channel.env, reporter=True)
    if released == "after-it-is-ready":
        assert channel.ready(60)
        channel.go(facts)
    result = spawned.wait(120)
    report = channel.finish()
    assert report.problem is None and report.ended and not report.tampers, (report.summary(), result.output[-2000:])
    assert report.snapshots_ahead is (released == "after-it-is-ready")
    assert report.nodes and {r.phases.get("call") for r in report.nodes.values()} == {"failed"}, report.summary()


@pytest.mark.only_for(kit=["local"])        # an overlay working copy has a twin; a container has none
def test_checks_one_after_another_alternate_between_the_sandbox_and_its_twin(kit):
    """Back to back (Base then Gold, twice), each check finds its interpreter started during the check before
    it, in the other box, with the cold runs' verdicts, and leaves the caller's sandbox at Base whichever box it
    ran in. The interpreter waiting there was started in the background (the lowest CPU priority), and runs its
    tests at the normal priority after its go."""
    sb = kit.sandbox
    prestart.discard(sb)
    assert sb.twin() is not None
    bundle = kit.official_bundle()
    runs = []
    for p in (None, kit.task.patch) * 2:
        runs.append(execute(kit.task, bundle, p, sandbox=sb, check_source_patch=False))
        assert sb.changed_paths() == [], runs[-1].extra.get("box")
    assert [r.extra["prestarted"] for r in runs] == [False, True, True, True]
    assert [r.extra.get("box") for r in runs] == [None, "twin", None, "twin"]
    assert [(r.valid, r.verdict) for r in runs] == [(True, Verdict.FAIL), (True, Verdict.PASS)] * 2, \
        [r.diagnostic for r in runs]
    waiting = prestart._held[sb].spawned._started.cgroup.members()
    assert waiting and {os.getpriority(os.PRIO_PROCESS, pid) for pid in waiting} == {19}
    nice = kit.bundle("import os\n\ndef test_priority():\n    assert os.nice(0) == 0\n", ["test_priority"],
                      new_file=True)
    twice = [execute(kit.task, nice, sandbox=sb) for _ in range(3)]
    assert [(r.valid, r.verdict, r.extra["prestarted"]) for r in twice] == \
        [(True, Verdict.PASS, False), (True, Verdict.PASS, True), (True, Verdict.PASS, True)], \
        [r.output_tail for r in twice]


HIDING_MODULE = ("import sys\n"
                 "open('/tmp/ran-before-the-go', 'w').close()\n"
                 "del sys.modules[__name__]     # gone from sys.modules: the importer fails, and swallows it\n")


@pytest.mark.only_for(kit=["local"])   # the Docker test image puts nothing of the checkout on sys.path before pytest
def test_code_of_the_checkout_that_runs_before_the_go_and_hides_is_still_stale(kit):
    """The patches are applied while the run started ahead waits: a module the reporter's early imports reach
    (pytest's junitxml imports `xml`; PYTHONPATH has the checkout) runs the candidate's code before the go,
    then deletes itself from sys.modules. The run is stale all the same: the reporter counts the checkout's
    code that ran (audit `exec` events), not only the modules left behind."""
    bundle = kit.official_bundle()
    sb = kit.sandbox
    prestart.discard(sb)
    cold = execute(kit.task, bundle, sandbox=sb, config=COLD)
    candidate = diff_after(kit.demo.repo,
                           lambda w: (w / "xml").mkdir() or (w / "xml/__init__.py").write_text(HIDING_MODULE))
    sb.reset()
    for name, patch in (("source", candidate), ("test", bundle.test_patch)):
        assert apply_patch(sb, patch, name=name, ladder=TEST, timeout=60).applied
    channel = ReporterChannel(sb.channel_dir, {"workdir": sb.workdir, "runner": "pytest"}, prestart=True)
    spawned = sb.spawn(cold.command, env=channel.env, reporter=True)
    assert channel.ready(60)
    channel.go({"workdir": sb.workdir, "runner": "pytest", **candidate_facts(candidate, bundle.test_patch)})
    result = spawned.wait(120)
    report = channel.finish()
    assert sb.read_file("/tmp/ran-before-the-go") == b""       # it did run before the go
    assert result.exit_code == 75 and "xml/__init__.py" in report.stale, (report.summary(), report.stale)


@pytest.mark.only_for(kit=["local"])        # writes into the tree by its host path (the local backend's)
def test_bytecode_written_into_the_tree_while_the_patches_are_applied_starts_the_run_again_cold(kit):
    """On pytest-dev the interpreter started ahead imports the runner from the checkout and can write that
    bytecode into the tree while the patches are applied (measured: 2 of 13 pytest-dev Gold runs of an audit
    came out tree_mismatch). The harness wrote it, not the patches: the run starts again, cold, on a restored
    Base, and says why. Any other undeclared file is still tree_mismatch."""
    bundle = kit.official_bundle()
    sb = kit.sandbox
    prestart.discard(sb)
    package = Path(kit.demo.spec.source_file).parent
    for name, want in (("__pycache__/early.cpython-311.pyc", None), ("early.txt", FailureKind.TREE_MISMATCH)):
        execute(kit.task, bundle, sandbox=sb)                      # offers the next run, started ahead
        assert prestart.wait_ready(sb, 60)
        planted = prestart.waiting_in(sb)._roots()["/testbed"] / package / name   # as the waiting interpreter would
        planted.parent.mkdir(exist_ok=True)
        planted.write_bytes(b"\0")
        gold = execute(kit.task, bundle, kit.task.patch, sandbox=sb, check_source_patch=False)
        if want is None:
            assert (gold.valid, gold.verdict) == (True, Verdict.PASS), gold.diagnostic + gold.output_tail
            assert f"{package}/{name}" in gold.extra["prestart_stale"] and gold.extra["prestarted"] is False
        else:
            assert (gold.valid, gold.failure_kind) == (False, want) and name in gold.diagnostic, gold.diagnostic
    sb.reset()
