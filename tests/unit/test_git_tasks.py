"""verified-git's pure parts: git sources named by the user, setuptools_scm's version from `git describe`, the
editable install, the recipe's validation (errors name the file, the env or instance, and the field), and the
committed recipe against the Verified rows."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from execcritic.errors import InputError
from execcritic.evaluation.qualify_git import summarize, table_markdown, with_setup_deviation
from execcritic.tasks.envbuild import bwrap_available, bwrap_prefix
from execcritic.tasks.git.build import install_command, install_requirements
from execcritic.tasks.git.plan import _NSPKG_LINE, plan_envs
from execcritic.tasks.git.recipe import RECIPE_PATH, load_recipe, parse_recipe
from execcritic.tasks.git.source import DEFAULT_TEMPLATE, fetch_url, parse_sources, scm_version, source_for
from execcritic.tasks.model import Task
from tests.paths import VERIFIED, rows_missing

ENV = {"repo": "demo/calc", "version": "0.1", "python": "3.11", "spec": {"install": "pip install -e .",
       "test_cmd": "pytest -rA"}, "setup_commit": "a" * 40, "project_version": "0.1.0",
       "exclude_newer": "2024-08-13T00:00:00Z", "requirements": [], "lock": ["pytest==8.3.4"]}
RECIPE = {"schema": 1, "task_set": "verified-git", "envs": {"calc-0.1": ENV},
          "instances": [{"instance_id": "demo__calc-1", "repo": "demo/calc", "version": "0.1", "env": "calc-0.1"}]}


def test_sources_per_repo_template_and_default(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECCRITIC_GIT_SOURCES", "django/django=/m/django,/m/{owner}+{name}/repo")
    assert source_for("django/django") == "/m/django"
    assert source_for("sympy/sympy") == "/m/sympy+sympy/repo"
    assert source_for("a/b", {}) == DEFAULT_TEMPLATE.format(repo="a/b") == "https://github.com/a/b.git"
    assert parse_sources(["x/y=https://example.org/y.git"]) == {"x/y": "https://example.org/y.git"}
    for bad in ("x/y=", "not-a-source", "{repo},{name}"):
        with pytest.raises(InputError, match="--git-source|template"):
            parse_sources(bad)
    assert fetch_url(str(tmp_path)) == tmp_path.resolve().as_uri()          # --depth needs file://
    assert fetch_url("https://github.com/a/b.git") == "https://github.com/a/b.git"


def test_scm_version_follows_setuptools_scm():
    assert scm_version("6.0.0-180-g634cde950", "x") == "6.0.1.dev180+g634cde950"
    assert scm_version("v0.12.0-0-gabc1234", "x") == "0.12.0"
    assert scm_version(None, "3.0.0") == "3.0.0"                             # a shallow checkout has no tags
    assert scm_version("astropy-1.3-5-gabc", "1.3.0") == "1.3.0"


def test_install_is_editable_so_checkouts_import_from_themselves():
    assert install_command({"install": "python setup.py install"}) == "python -m pip install -e ."
    assert install_command({"install": "python -m pip install ."}) == "python -m pip install -e ."
    assert install_command({"install": "python -m pip install -e .[test]"}) == "python -m pip install -e .[test]"


@pytest.mark.parametrize("edit, field", [
    (lambda r: r["envs"]["calc-0.1"].update(setup_commit="main"), "setup_commit"),
    (lambda r: r["envs"]["calc-0.1"].update(python="3"), "python"),
    (lambda r: r["envs"]["calc-0.1"].pop("lock"), "lock"),
    (lambda r: r["instances"][0].update(env="nope"), "env"),
    (lambda r: r["instances"][0].update(version="0.2"), "env"),
    (lambda r: r.update(task_set="verified-sdist"), "task_set"),
    (lambda r: r["instances"][0].update(source=["a", "b"]), "source"),
])
def test_recipe_validation_names_the_field(edit, field):
    data = copy.deepcopy(RECIPE)
    edit(data)
    with pytest.raises(InputError) as exc:
        parse_recipe(data, path="r.json")
    assert exc.value.field == field and exc.value.file == "r.json"


def test_recipe_roundtrip_and_listing(tmp_path):
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(RECIPE))
    rec = load_recipe(path)
    assert rec.listing() == [{"instance_id": "demo__calc-1", "repo": "demo/calc", "release": "0.1",
                              "python": "3.11", "env": "calc-0.1"}]
    with pytest.raises(InputError, match="not in the verified-git recipe"):
        rec.instance("other")


def test_committed_recipe_names_real_rows_at_their_base_commits():
    if not RECIPE_PATH.exists():
        pytest.skip("no committed verified-git recipe yet")
    if why := rows_missing():
        pytest.skip(why)
    from execcritic.tasks import load_tasks

    rows = {t.instance_id: t for t in load_tasks(str(VERIFIED))}
    rec = load_recipe()
    for inst in rec.instances:
        env = rec.envs[inst.env]
        assert (rows[inst.instance_id].repo, rows[inst.instance_id].version) == (env.repo, env.version)
        assert env.lock, f"{inst.env}: no lock"
        assert inst.source, f"{inst.instance_id}: the recipe names no git source for its Base"


def test_sources_fill_names_the_serving_source_only_where_a_row_recorded_none(tmp_path):
    """experiments/verified_git_sources.py --fill: a row that recorded the source it was fetched from keeps it; a
    row without one gets the source that serves its Base whole, marked as checked after; an unserved row gets none."""
    from experiments.verified_git_sources import fill

    path = tmp_path / "instances.jsonl"
    rows = [{"instance_id": "a__b-1", "repo": "a/b", "source": "/mirrors/a"},
            {"instance_id": "a__b-2", "repo": "a/b"}, {"instance_id": "a__b-3", "repo": "a/b"},
            {"instance_id": "c__d-1", "repo": "c/d"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    repos = {"a/b": {"source": "github.com/x/b", "per_row": {"a__b-1": {"base": True}, "a__b-2": {"base": True},
                                                            "a__b-3": {"base": False}}}}
    assert fill(path, repos, "2026-12-07") == (1, 1)
    got = {r["instance_id"]: r for r in map(json.loads, path.read_text().splitlines())}
    assert got["a__b-1"]["source"] == "/mirrors/a" and "source_checked" not in got["a__b-1"]
    assert (got["a__b-2"]["source"], got["a__b-2"]["source_checked"]) == ("github.com/x/b", "2026-12-07")
    assert "source" not in got["a__b-3"] and "source" not in got["c__d-1"]


def test_the_smoke_git_preset_names_qualified_verified_git_instances():
    from execcritic.experiments.presets import load_preset

    preset = load_preset("smoke-git")
    assert preset.dataset == "verified-git" and preset.build_envs
    if not RECIPE_PATH.exists():
        pytest.skip("no committed verified-git recipe yet")
    rec = load_recipe()
    for iid in preset.instances:
        rec.instance(iid)                       # InputError naming the instance when it did not qualify


def test_build_steps_see_a_tool_of_a_clone_under_tmp():
    """The build sandbox mounts a fresh /tmp, which hid `.venv/bin/uv` of a clone living under /tmp (the
    verified-git env build then failed with 'No such file'); `readable` mounts such a tool back, read-only."""
    if not bwrap_available():
        pytest.fail("bubblewrap is a system dependency of the suite (scripts/system-deps.sh)")
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        tool = Path(d) / "clone" / ".venv" / "bin" / "tool"
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\necho seen\n")
        os.chmod(tool, 0o755)
        hidden = subprocess.run(bwrap_prefix(None, []) + [str(tool)], capture_output=True, text=True, check=False)
        assert hidden.returncode != 0
        seen = subprocess.run(bwrap_prefix(None, [], readable=[tool]) + [str(tool)], capture_output=True, text=True, check=False)
        assert (seen.returncode, seen.stdout) == (0, "seen\n"), seen.stderr
        write = subprocess.run(bwrap_prefix(None, [], readable=[tool]) + ["sh", "-c", f"echo x > {tool}"],
                               capture_output=True, text=True, check=False)
        assert write.returncode != 0 and "Read-only" in write.stderr and tool.read_text().endswith("seen\n")


def test_ffi_is_recorded_per_environment_and_reaches_the_sandbox(tmp_path):
    """An env whose tests need the real ctypes says why (`ffi`); its tasks' sandboxes leave the foreign-function
    modules visible; the env's digest (what decides a rebuild) does not change with it."""
    import dataclasses

    from execcritic.tasks.environment import git_environment
    from execcritic.tasks.git import git_task
    from execcritic.tasks.git.plan import FFI
    from execcritic.tasks.git.recipe import digest
    from execcritic.tasks.model import Task

    assert "scipy" in FFI["pydata/xarray"] and "django/django" not in FFI and "sympy/sympy" not in FFI
    data = copy.deepcopy(RECIPE)
    data["envs"]["calc-0.1"]["ffi"] = "scipy imports ctypes"
    env = parse_recipe(data).envs["calc-0.1"]
    plain = parse_recipe(RECIPE).envs["calc-0.1"]
    assert env.ffi == "scipy imports ctypes" and env.to_dict()["ffi"] == env.ffi and "ffi" not in plain.to_dict()
    assert digest(env.digest_payload()) == digest(plain.digest_payload())
    row = Task(instance_id="demo__calc-1", repo="demo/calc", base_commit="b" * 40, patch="", test_patch="",
               problem_statement="", fail_to_pass=("t.py::test_a",), pass_to_pass=(), version="0.1")
    assert git_environment(git_task(row, env), tmp_path).ffi is True
    assert git_environment(git_task(row, plain), tmp_path).ffi is False
    assert dataclasses.replace(env, ffi="").to_dict() == plain.to_dict()


@pytest.mark.slow
def test_own_prefix_survives_tox_current_envs_symlink(tmp_path):
    """tox-current-env starts tests through `.tox/<env>/bin/python`, a symlink to the env's interpreter. A venv
    started that way is the bare base interpreter (CPython looks for pyvenv.cfg beside the symlink): sphinx >= 3.4
    found no pytest. The env made its own prefix comes up with its own packages; a spec that uses
    `--current-env` asks for one, and the digest then says so."""
    from execcritic.tasks.envbuild import StepLog, check_own_prefix, find_interpreter, make_own_prefix

    interp = find_interpreter("3.9")
    venv = tmp_path / "venv"
    subprocess.run([str(interp), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / "python3.9" / "site-packages"
    (site / "marker_pkg.py").write_text("VALUE = 1\n")
    tox = tmp_path / "checkout" / ".tox" / "py39" / "bin"
    tox.mkdir(parents=True)
    (tox / "python").symlink_to(venv / "bin" / "python")
    probe = [str(tox / "python"), "-c", "import sys, marker_pkg; print(sys.prefix)"]
    before = subprocess.run(probe, capture_output=True, text=True, check=False)
    assert before.returncode != 0 and "No module named 'marker_pkg'" in before.stderr   # the defect, measured

    make_own_prefix(venv, interp)
    after = subprocess.run(probe, capture_output=True, text=True, check=False)
    assert (after.returncode, after.stdout.strip()) == (0, str(venv)), after.stderr
    direct = subprocess.run([str(venv / "bin" / "python"), "-c", "import marker_pkg, sys; print(sys.prefix)"],
                            capture_output=True, text=True, check=True)
    assert direct.stdout.strip() == str(venv) and not (venv / "pyvenv.cfg").exists()
    assert not (venv / "lib" / "python3.9" / "site-packages").is_symlink()     # the env's own, not the base's
    dynload = venv / "lib" / "python3.9" / "lib-dynload"    # real files: the sandbox hides some of them
    assert not dynload.is_symlink() and not any(p.is_symlink() for p in dynload.iterdir())
    (site / "pip").mkdir()                      # the build's check imports pip, which a real env has
    (site / "pip" / "__init__.py").write_text("")
    if bwrap_available():
        check_own_prefix(StepLog(), bwrap_prefix(None, [], mapped=[(tmp_path, tmp_path)]), tmp_path, venv)
    # the copied binary loads the base's libpython: with no pyvenv.cfg left, the env record names the base the
    # sandbox must bind
    from execcritic.tasks.environment import own_prefix_base

    (tmp_path / "env.json").write_text(json.dumps({"own_prefix": True, "interpreter": str(interp)}))
    assert own_prefix_base(str(tmp_path)) == [interp.resolve().parent.parent]
    (tmp_path / "env.json").write_text(json.dumps({"own_prefix": False, "interpreter": str(interp)}))
    assert own_prefix_base(str(tmp_path)) == [] == own_prefix_base(None)

    data = copy.deepcopy(RECIPE)
    spec = data["envs"]["calc-0.1"].setdefault("spec", {})
    plain = parse_recipe(RECIPE).envs["calc-0.1"]
    spec["test_cmd"] = "tox --current-env -epy39 -v --"
    tox_env = parse_recipe(data).envs["calc-0.1"]
    assert tox_env.own_prefix and not plain.own_prefix
    assert tox_env.digest_payload()["own_prefix"] is True and "own_prefix" not in plain.digest_payload()


def test_a_scratch_results_dir_never_rewrites_the_committed_recipe(tmp_path, monkeypatch):
    """qualify-git on one row into a scratch dir rewrote the committed recipe with that row's env alone (measured:
    recipe.json lost 4,862 lines); only the committed results dir writes the committed recipe."""
    from execcritic.cli.tasks import git_recipe_out
    monkeypatch.chdir(RECIPE_PATH.parents[3])
    assert git_recipe_out(Path("results/verified_git")) == RECIPE_PATH
    assert git_recipe_out(tmp_path / "vg") == tmp_path / "vg" / "recipe.json"
    assert git_recipe_out(tmp_path / "vg", tmp_path / "r.json") == tmp_path / "r.json"


def _wheel(where: Path, name: str, version: str, requires: tuple[str, ...] = (), broken: bool = False) -> None:
    """A pure-Python wheel (or, `broken`, an sdist whose build fails) in a local find-links dir."""
    import zipfile
    if broken:
        import tarfile
        src = where / f"{name}-{version}"
        src.mkdir()
        (src / "setup.py").write_text("raise SystemExit('this package does not build')\n")
        with tarfile.open(where / f"{name}-{version}.tar.gz", "w:gz") as tar:
            tar.add(src, arcname=src.name)
        return
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n", f"{dist}/METADATA": meta,
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(where / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)


def _offline_venv(tmp_path: Path, links: Path):
    """A venv and `install(reqs, what=...)`: `uv_install` into it from the find-links dir `links` alone."""
    from execcritic.tasks.envbuild import StepLog, uv_binary, uv_install
    uv = uv_binary()
    subprocess.run([uv, "venv", "--no-project", "-q", "--python", sys.executable, str(tmp_path / "venv")], check=True)
    py = str(tmp_path / "venv" / "bin" / "python")
    env = {**os.environ, "UV_OFFLINE": "1", "UV_FIND_LINKS": str(links), "UV_CACHE_DIR": str(tmp_path / "cache")}
    return py, lambda reqs, what: uv_install(StepLog(), [uv], py, reqs, "2100-01-01T00:00:00Z", env, None, what=what)


def test_a_package_installed_alone_cannot_move_an_earlier_pin(tmp_path):
    """When a pinned set fails as a whole (one member does not build), its members go in one by one; a later one
    then pulls the newest of an unpinned dependency over an earlier pin (astropy 1.3: exceptiongroup's trio needs
    attrs >= 19.2 over SWE-bench's attrs==17.3.0, and pytest 3.3.1 no longer imports). The members that installed
    go in again together, and the pin holds."""
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "ecx_pinned", "1.0")
    _wheel(links, "ecx_pinned", "2.0")
    _wheel(links, "ecx_helper", "1.0", ("ecx_pinned",))
    _wheel(links, "ecx_helper", "2.0", ("ecx_pinned>=2",))
    _wheel(links, "ecx_later", "1.0", ("ecx_helper",))
    _wheel(links, "ecx_nobuild", "1.0", broken=True)
    py, install = _offline_venv(tmp_path, links)
    skipped = install(["ecx_pinned==1.0", "ecx_later==1.0", "ecx_nobuild==1.0"], what="pip_packages")
    assert set(skipped) == {"ecx_nobuild==1.0"}, skipped
    out = subprocess.run([py, "-c", "import ecx_pinned, ecx_helper; print(ecx_pinned.VERSION, ecx_helper.VERSION)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1.0", "1.0"], out


def test_a_pin_with_no_wheel_that_does_not_build_takes_the_first_later_patch_release_with_one(tmp_path):
    """scikit-learn 1.3's spec pins numpy 1.19.2 and scipy 1.5.2 on CPython 3.9: conda had builds, PyPI has no such
    wheel, and the sources do not build here. The first later release of the same minor version that has a wheel
    goes in instead (scipy 1.5.3 has none either: 1.5.4), recorded; a pin with no such release is left out."""
    links = tmp_path / "links"
    links.mkdir()
    for version, broken in (("1.5.2", True), ("1.5.3", True), ("1.5.4", False), ("1.5.5", False), ("1.6.0", False)):
        _wheel(links, "ecx_old", version, broken=broken)
    _wheel(links, "ecx_gone", "2.0.0", broken=True)
    _wheel(links, "ecx_fine", "1.0")
    py, install = _offline_venv(tmp_path, links)
    skipped = install(["ecx_old==1.5.2", "ecx_gone==2.0.0", "ecx_fine==1.0"], what="packages")
    assert set(skipped) == {"substituted: ecx_old==1.5.2", "ecx_gone==2.0.0"}, skipped
    assert skipped["substituted: ecx_old==1.5.2"].startswith("ecx-old==1.5.4 instead"), skipped    # (as uv names it)
    out = subprocess.run([py, "-c", "import ecx_old, ecx_fine; print(ecx_old.VERSION, ecx_fine.VERSION)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1.5.4", "1.0"], out


class ScriptedSteps:
    """A scripted stand-in for StepLog (control flow only, no subprocess): records each step, and fails the project
    install as pip >= 25.3 does on a setuptools<64 project (no PEP 660 hook) until a pip with the legacy
    `setup.py develop` fallback has been installed. The real run is measured in results/verified_git (pylint 2.15's
    env record lists these steps)."""

    def __init__(self, failure: str):
        self.steps, self.failure, self.legacy_pip = [], failure, False

    def run(self, cmd, *, what, env=None, cwd=None, timeout=3600, log=None):
        from execcritic.tasks.envbuild import LEGACY_EDITABLE_PIP, BuildError
        self.steps.append({"what": what, "cmd": list(cmd), "env": dict(env or {})})
        if LEGACY_EDITABLE_PIP in cmd:
            self.legacy_pip = True
        if what.startswith("install") and not self.legacy_pip:
            raise BuildError(f"{what} failed (exit 1): pip install -e .\n{self.failure}")
        return ""


@pytest.mark.parametrize("failure", ["no editable hook", "no --no-use-pep517", "isolated build, no pyproject.toml",
                                     "isolated build, pyproject.toml", "other"])
def test_a_project_without_an_editable_hook_installs_by_setup_py_develop(tmp_path, failure):
    """pylint 2.15 pins setuptools~=62.6 (no PEP 660 hook), and scikit-learn 1.3's spec installs with
    `--no-use-pep517`, and astropy 3.1 has no pyproject.toml (its isolated build lacked the jinja2 setup.py asks
    for). SWE-bench's 2024 pip installed them by `setup.py develop`; pip 25.3 dropped that fallback and the option.
    The build installs the last pip that has them (held to the env's date cutoff) and runs the install again, and
    says so in the env record; any other install failure still fails (a project with pyproject.toml too)."""
    from execcritic.tasks.envbuild import (
        ISOLATED_EDITABLE_FAILED,
        LEGACY_DEVELOP_SETUPTOOLS,
        LEGACY_EDITABLE_PIP,
        NO_EDITABLE_HOOK,
        NO_LEGACY_OPTION,
        BuildError,
        VenvPlan,
        build_venv,
    )
    hook_missing = failure not in ("other", "isolated build, pyproject.toml")
    (tmp_path / "staging" / "checkout").mkdir(parents=True)
    if failure == "isolated build, pyproject.toml":
        (tmp_path / "staging" / "checkout" / "pyproject.toml").write_text("[build-system]\n")
    failure = {"no editable hook": f"ERROR: Project file:///testbed uses a build backend that is {NO_EDITABLE_HOOK}, "
                                   "so it cannot be installed in editable mode.",
               "no --no-use-pep517": f"ERROR: {NO_LEGACY_OPTION}",
               "other": "ERROR: No matching distribution found for x"}.get(
        failure, f"ModuleNotFoundError: No module named 'jinja2'\nERROR: {ISOLATED_EDITABLE_FAILED} astropy")
    plan = VenvPlan(python=f"{sys.version_info.major}.{sys.version_info.minor}",
                    spec={"install": "python -m pip install -e ."}, requirements=(), version="2.15.0",
                    exclude_newer="2024-08-13T00:00:00Z")
    steps = ScriptedSteps(failure)
    if not hook_missing:
        with pytest.raises(BuildError, match="No matching distribution|jinja2"):
            build_venv(plan, steps, staging=tmp_path / "staging", final=tmp_path / "final", resolve=False)
        assert not any(LEGACY_EDITABLE_PIP in s["cmd"] for s in steps.steps)
        return
    res = build_venv(plan, steps, staging=tmp_path / "staging", final=tmp_path / "final", resolve=False)
    whats = [s["what"] for s in steps.steps]
    assert whats[-3:] == ["install", f"pip with the legacy editable install ({LEGACY_EDITABLE_PIP})",
                          "install (legacy editable)"], whats
    pip_step = steps.steps[-2]["cmd"]
    assert pip_step[pip_step.index("--exclude-newer") + 1] == "2024-08-13T00:00:00Z"
    assert steps.steps[-1]["cmd"] == steps.steps[-3]["cmd"]
    assert "PIP_UPLOADED_PRIOR_TO" not in steps.steps[-1]["env"]
    assert "setup.py develop" in res.skipped["install: editable"]
    # its isolated build holds setuptools below 80, whose `develop` is `pip install -e . --use-pep517` again (the
    # requests envs stopped building on a fresh cache); pip hands PIP_CONSTRAINT to the build isolation too
    constraint = Path(steps.steps[-1]["env"]["PIP_CONSTRAINT"])
    assert constraint == tmp_path / "final" / "legacy-constraints.txt" and "PIP_CONSTRAINT" not in steps.steps[-3]["env"]
    assert (tmp_path / "staging" / constraint.name).read_text().split() == [LEGACY_DEVELOP_SETUPTOOLS] == ["setuptools<80"]
    # a resolving build first installs what the legacy install would resolve, held to the date cutoff (astropy 3.1's
    # `.[test]` brought 2025's pyparsing through that pip)
    steps = ScriptedSteps(failure)
    plan = dataclasses.replace(plan, legacy_requirements=lambda co: ["pyparsing"], lock=())
    (tmp_path / "staging2").mkdir()                     # as build_beside makes it before the build
    res = build_venv(plan, steps, staging=tmp_path / "staging2", final=tmp_path / "final2", resolve=True)
    (first,) = [s for s in steps.steps if "before its legacy run" in s["what"]]
    assert first["cmd"][first["cmd"].index("--exclude-newer") + 1] == "2024-08-13T00:00:00Z" and "pyparsing" in \
        first["cmd"]
    whats = [s["what"] for s in steps.steps]
    assert whats.index(first["what"]) < whats.index("install (legacy editable)")
    assert "installed first, held to the date cutoff" in res.skipped["install: editable"]


def test_the_legacy_install_gets_the_projects_and_its_named_extras_requirements(tmp_path):
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    numpy>=1.13\n\n"
                                        "[options.extras_require]\ntest =\n    pytest-astropy\n    skyfield\n"
                                        "docs =\n    sphinx\n")
    assert install_requirements(tmp_path, "python -m pip install -e .[test] --verbose") == \
        ["numpy>=1.13", "pytest-astropy", "skyfield"]
    assert install_requirements(tmp_path, "python -m pip install -e .") == ["numpy>=1.13"]
    (tmp_path / "setup.cfg").unlink()
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["attrs"]\n[project.optional-dependencies]\n'
                                             'test = ["pytest"]\ndev = ["ruff"]\n')
    assert install_requirements(tmp_path, "pip install -e .[test,dev]") == ["attrs", "pytest", "ruff"]


def test_uv_binary_is_its_real_path_so_the_sandbox_can_bind_it(tmp_path, monkeypatch):
    """bwrap cannot make a bind target under a symlink: a venv that is a symlink to another (a git worktree's
    `.venv -> ../main/.venv`) failed every env build with `Can't mkdir parents for <worktree>/.venv/bin/uv`."""
    import uv

    from execcritic.tasks.envbuild import uv_binary
    real = tmp_path / "main-venv" / "bin"
    real.mkdir(parents=True)
    (real / "uv").write_text("")
    (tmp_path / "worktree").mkdir()
    (tmp_path / "worktree" / ".venv").symlink_to(tmp_path / "main-venv")
    monkeypatch.setattr(uv, "find_uv_bin", lambda: str(tmp_path / "worktree" / ".venv" / "bin" / "uv"))
    assert uv_binary() == str(real / "uv")


# ---- what the Bases require beyond the setup commit (basereqs.py) ---------------------------------------------

SETUP_PY = '''
from setuptools import setup

INSTALL_REQUIRES = [
    "py>=1.5.0",
    'pathlib2>=2.2.0;python_version<"3.6"',
    'colorama;sys_platform=="win32"',
    "importlib-metadata>=0.12",
{extra}]

setup(name="p", install_requires=INSTALL_REQUIRES)
'''


def test_install_requires_are_read_from_each_metadata_file_with_markers_for_the_env():
    from execcritic.tasks.git.basereqs import applicable, read_install_requires

    reqs = read_install_requires({"setup.py": SETUP_PY.format(extra='    "wcwidth",\n'),
                                  "setup.cfg": "[options]\ninstall_requires =\n    attrs>=19\n    # note\n",
                                  "pyproject.toml": '[project]\ndependencies = ["tomli; python_version < \'3.11\'"]\n'})
    assert reqs == ["py>=1.5.0", 'pathlib2>=2.2.0;python_version<"3.6"', 'colorama;sys_platform=="win32"',
                    "importlib-metadata>=0.12", "wcwidth", "attrs>=19", "tomli; python_version < '3.11'"]
    assert applicable(reqs, "3.9") == {"py": "py>=1.5.0", "importlib-metadata": "importlib-metadata>=0.12",
                                       "wcwidth": "wcwidth", "attrs": "attrs>=19", "tomli": "tomli"}
    assert "tomli" not in applicable(reqs, "3.11") and "pathlib2" in applicable(reqs, "3.5")


def test_a_rebuild_in_the_checkout_gets_what_building_asks_for_numpy_left_to_the_spec(tmp_path):
    """Extensions are rebuilt in each checkout without build isolation and without network, so the venv needs the
    build's requirements: pyproject.toml's build-system and setup.py's setup_requires (matplotlib 3.4 asks for
    setuptools_scm_git_archive there; every rebuild failed fetching it)."""
    from execcritic.tasks.git.build import build_requirements

    assert build_requirements(tmp_path) == []
    (tmp_path / "setup.py").write_text('from setuptools import setup\nsetup(name="m", setup_requires=[\n'
                                       '    "certifi>=2020.06.20", "numpy>=1.17", "setuptools_scm_git_archive"])\n')
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["oldest-supported-numpy", '
                                             '"certifi>=2020.06.20", "setuptools_scm>=7"]\n')
    assert build_requirements(tmp_path) == ["certifi>=2020.06.20", "setuptools_scm>=7", "setuptools_scm_git_archive"]
    # astropy 3.1 (measured): setup.py adds cython and jinja2 to a list it reads from setup.cfg, only when it builds;
    # without them in the venv every rebuild fetched cython with no network and failed
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "setup.py").write_text("setup_requires = read_configuration('setup.cfg')['options']['setup_requires']\n"
                                       "if not os.path.exists('PKG-INFO'):\n"
                                       "    setup_requires.extend(['cython>=0.29.13', 'jinja2>=2.7'])\n"
                                       "setup_requires += ['extension-helpers']\nother.extend(['x'])\n"
                                       "setup(setup_requires=setup_requires)\n")
    assert sorted(build_requirements(tmp_path)) == ["cython>=0.29.13", "extension-helpers", "jinja2>=2.7"]


def test_the_env_gets_what_a_base_requires_and_its_setup_commit_does_not(tmp_path):
    """pytest 5.4 (measured): the setup commit does not require wcwidth, the Bases of 7205 and 7236 do; a
    requirement the spec's packages name is not added again."""
    from execcritic.tasks.git.basereqs import base_requirements, read_build_requires, without_numpy
    from execcritic.tasks.git.source import git_env

    repo = tmp_path / "src"
    repo.mkdir()

    def commit(extra: str, setup_py: str | None = None) -> str:
        (repo / "setup.py").write_text(SETUP_PY.format(extra=extra) if setup_py is None else setup_py)
        for args in (["add", "-A"], ["commit", "-q", "-m", "c", "--allow-empty"]):
            subprocess.run(["git", "-C", str(repo), *args], check=True, env={**git_env(), "GIT_AUTHOR_NAME": "t",
                           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    setup = commit("")
    a = commit('    "wcwidth",\n    "attrs>=17.4.0",\n')
    b = commit('    "wcwidth",\n    \'six;python_version<"3.0"\',\n')
    got = base_requirements(str(repo), setup, [("r-a", a), ("r-b", b)], "3.9", known=["attrs==23.1.0"])
    assert got == {"wcwidth": "required by the Base of r-a, r-b"}
    assert base_requirements(str(repo), setup, [("r-s", setup)], "3.9") == {}
    # not read from a source that is not local (or lacks a Base): None, and the plan says so in the env's note
    assert base_requirements("https://github.com/pytest-dev/pytest.git", setup, [("r-a", a)], "3.9") is None
    assert base_requirements(str(repo), setup, [("r-x", "0" * 40)], "3.9") is None
    # pylint-4661: the Gold patch adds appdirs to setup.py, and SWE-bench's eval script installs the project again
    # after the patch - with golds, what a Gold patch adds is required too (a patch that does not apply adds nothing)
    gold = ("diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n@@ -8,2 +8,3 @@\n"
            '     "importlib-metadata>=0.12",\n+    "appdirs>=1.4.0",\n ]\n')
    golds = {"r-s": gold, "r-x": "diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-no\n+x\n"}
    got = base_requirements(str(repo), setup, [("r-a", a), ("r-s", setup)], "3.9", known=["attrs"], golds=golds)
    assert got == {"appdirs>=1.4.0": "required by the Gold patch of r-s", "wcwidth": "required by the Base of r-a"}
    # matplotlib 3.5: the setup commit builds from pyproject.toml, a Base's setup.py asks for
    # setuptools_scm_git_archive - what the Bases' builds ask for, for the rebuild in each checkout
    (repo / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools_scm>=7", "oldest-supported-numpy"]\n')
    old = commit("", 'from setuptools import setup\nsetup(setup_requires=["setuptools_scm>=4", '
                     '"setuptools_scm_git_archive", "numpy>=1.17"])\n')
    newer = commit("", "from setuptools import setup\nsetup()\n")
    got = base_requirements(str(repo), newer, [("r-old", old), ("r-new", newer)], "3.9", read=read_build_requires)
    assert without_numpy(got) == ["setuptools_scm_git_archive"] and got["setuptools_scm_git_archive"] == \
        "required by the Base of r-old"


def test_base_requirements_reach_the_env_digest_only_where_there_are_some():
    from dataclasses import replace

    env = next(iter(load_recipe().envs.values()))
    assert "base_requirements" not in env.digest_payload()
    more = replace(env, base_requirements={"wcwidth": "required by the Base of x"})
    assert more.resolve_payload()["base_requirements"] == ["wcwidth"]
    assert parse_recipe({"schema": 1, "task_set": "verified-git", "envs": {env.key: more.to_dict()},
                         "instances": []}).envs[env.key] == more


def test_a_stand_in_setup_commit_is_a_deviation_of_every_row_run_in_its_env():
    """scikit-learn 0.20-0.22 and astropy 5.1 are installed at a Base, not at the setup commit their rows name
    (the source cannot serve it whole): each row says so, and the table counts the qualified ones."""
    envs = {"calc-0.1": {"recipe": {**ENV, "setup_note": "environment_setup_commit 0000 is not in src whole"}},
            "calc-0.2": {"recipe": ENV}}
    rows = {f"demo__calc-{i}": {"instance_id": f"demo__calc-{i}", "repo": "demo/calc", "env": env, "kept": True}
            for i, env in ((1, "calc-0.1"), (2, "calc-0.2"), (3, None))}
    marked = {k: with_setup_deviation(r, envs) for k, r in rows.items()}
    assert marked["demo__calc-1"]["setup_deviation"].endswith("not in src whole")
    assert marked["demo__calc-1"]["setup_commit"] == "a" * 40
    assert "setup_deviation" not in marked["demo__calc-2"] and marked["demo__calc-3"] == rows["demo__calc-3"]
    own = {**rows["demo__calc-1"], "setup_deviation": "recorded when decided", "setup_commit": "b" * 40}
    assert with_setup_deviation(own, envs) == own
    table = table_markdown(summarize(marked, envs, []))
    assert "stand-in for the rows' environment_setup_commit" in table and "demo/calc 1." in table
    assert "stand-in" not in table_markdown(summarize(rows, envs, []))


def test_matplotlib_3_7_envs_get_the_nspkg_pth_each_base_install_writes(tmp_path):
    """Every 3.7 Base declares namespace_packages=['mpl_toolkits'] and the setup commit does not: the env gets
    the .pth setuptools writes at such a Base (the same line as in the 3.6 env), once, and only 3.7 gets it."""
    row = Task(instance_id="matplotlib__matplotlib-1", repo="matplotlib/matplotlib", base_commit="b" * 40,
               patch="", test_patch="", problem_statement="", fail_to_pass=(), pass_to_pass=(), version="3.7",
               environment_setup_commit="a" * 40)
    spec = {"python": "3.11", "install": "python -m pip install -e .", "test_cmd": "pytest -rA"}
    src = {"matplotlib/matplotlib": "https://example.invalid/matplotlib.git"}
    (env,) = plan_envs([row], {"matplotlib/matplotlib": {"3.7": spec}}, sources=src).envs.values()
    (step,) = env.adaptations
    (older,) = plan_envs([replace(row, version="3.6")], {"matplotlib/matplotlib": {"3.6": spec}},
                         sources=src).envs.values()
    assert not older.adaptations
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    environ = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    for _ in range(2):                                      # the env build, then an instance's pre_install
        subprocess.run(["bash", "-c", step], env=environ, check=True)
    (pth,) = venv.glob("lib/python*/site-packages/matplotlib-nspkg.pth")
    assert pth.read_text() == _NSPKG_LINE + "\n"
    assert "namespace_packages" in next(iter(env.adaptations.values()))
