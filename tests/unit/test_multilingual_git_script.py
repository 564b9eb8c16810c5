"""multilingual-git's reading of the rows' eval_scripts (pure), on the real SWE-bench Multilingual rows."""

from __future__ import annotations

import pytest

from execcritic.tasks import mlgit
from execcritic.tasks.mlgit import toolchain
from execcritic.tasks.mlgit.script import build_steps, without_clean_steps
from tests.paths import MULTILINGUAL, needs_rows


@needs_rows
def test_build_steps_are_read_from_every_c_and_cpp_multilingual_row():
    """The section between the test patch and the Start marker, clean steps left out, on the real rows."""
    rows = mlgit.multilingual_rows(str(MULTILINGUAL))
    native = [t for t in rows if t.repo in toolchain.TOOLCHAINS]
    assert len(native) == 42
    steps = {t.repo: build_steps(t.eval_script) for t in native}
    assert steps["redis/redis"] == ["make"] and steps["jqlang/jq"][-1] == "make -j$(nproc)"
    assert steps["fmtlib/fmt"][:2] == ["mkdir -p build", "cmake -B build -S ."]
    for t in native:
        script, dropped = without_clean_steps(t.eval_script)
        assert set(dropped) <= {"make clean", "make distclean"} and "make distclean\n" not in script


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
