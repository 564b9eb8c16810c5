"""From Verified rows to `verified-git` environments: one per (repository, version), following SWE-bench's spec.

The setup commit is the rows' `environment_setup_commit` (SWE-bench builds each version's environment there).
Some are release-branch commits a mirror of the default branch lacks (Django's stable/3.x heads, scikit-learn's
0.2x branches), or commits a snapshot holds without all their files (astropy 5.1); then the newest Base commit of
that version the source serves whole stands in, and the env and each of its rows say so (`setup_note`).
The project version given to setuptools_scm is `git describe` of the setup commit in a local source with tags,
else `<version>.0`. What the spec leaves unpinned is resolved as of `DEFAULT_CUTOFF`, the publication of
SWE-bench Verified (its conda environments were built then), or as of the interpreter's end of life when that
is earlier (conda channels stopped building packages for it then: a Python 3.6 env got the Cython of 2021).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from execcritic.tasks.git.basereqs import base_requirements, read_build_requires, without_numpy
from execcritic.tasks.git.recipe import GitEnvRecipe, env_key
from execcritic.tasks.git.source import describe, has_commit, scm_version, source_for
from execcritic.tasks.model import Task

DEFAULT_CUTOFF = "2024-08-13T00:00:00Z"
# What setuptools writes for namespace_packages=['mpl_toolkits'] with the package root /testbed/lib
_NSPKG_LINE = ("import sys, types, os;p = os.path.join('/testbed/lib', *('mpl_toolkits',));importlib = "
               "__import__('importlib.util');__import__('importlib.machinery');m = sys.modules.setdefault("
               "'mpl_toolkits', importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec("
               "'mpl_toolkits', [os.path.dirname(p)])));m = m or sys.modules.setdefault('mpl_toolkits', "
               "types.ModuleType('mpl_toolkits'));mp = (m or []) and m.__dict__.setdefault('__path__',[]);"
               "(p not in mp) and mp.append(p)")
# Local adaptations a repository (or "repository version") needs here (recorded in each env: step -> why), run
# after the spec's pre_install.
ADAPTATIONS = {
    "pylint-dev/pylint": {
        "f=\"$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')/testbed.pth\"; "
        "[ -f \"$f\" ] || echo /testbed > \"$f\"":
            "pylint loads its checkers by file path (astroid's modpath_from_file), which needs the checkout on "
            "sys.path; setuptools >= 64 installs a flat-layout project editable through an import hook that puts "
            "nothing there, so every checker is skipped and each test that names a message fails (measured: "
            "pylint-dev__pylint-6386 on Gold, `No such message id or symbol 'c-extension-no-member'`). A .pth line "
            "puts /testbed on sys.path, as `setup.py develop` (SWE-bench's 2024 pip) does; written once, by the env "
            "build (each instance checkout runs pre_install again, with the venv read-only)",
    },
    "matplotlib/matplotlib 3.7": {
        "f=\"$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')/matplotlib-nspkg.pth\"; "
        "[ -f \"$f\" ] || printf '%s\\n' \"" + _NSPKG_LINE + "\" > \"$f\"":
            "every 3.7 Base declares namespace_packages=['mpl_toolkits'] and the setup commit 0849036f does not, so "
            "SWE-bench's install at each Base writes the nspkg .pth that makes `mpl_toolkits` from its spec, and "
            "the env installed at the setup commit had none: lib/mpl_toolkits/__init__.py then imports "
            "pkg_resources, whose DeprecationWarning matplotlib's warnings-as-errors turns into a collection "
            "error (measured: every Base run of 25287, 25311, 25332 failed to collect). The line is the one "
            "setuptools 68.1.2 (the spec's pin) writes for the 3.6 env",
    },
}
# Sources a repository's build downloads from outside the package index, fetched instead from a git source like
# the repositories themselves (`source_for`: $EXECCRITIC_GIT_SOURCES, else GitHub) at the release's commit, put where
# the build looks before it downloads, and copied built into every checkout of the env (recorded in each env):
# "repository" or "repository version" -> {path in the checkout: {repo, commit, prepare (a shell step run there, no
# network), why}}
def _vendored(path: str, repo: str, commit: str, why: str, prepare: str = "true") -> dict[str, dict[str, str]]:
    return {path: {"repo": repo, "commit": commit, "prepare": prepare, "why": why}}


_FREETYPE = _vendored(
    "build/freetype-2.6.1", "freetype/freetype", "8cabd919ca63f0e6c12e8405e8542a45d910fa62",   # tag VER-2-6-1
    "matplotlib builds and links FreeType 2.6.1 (LOCAL_FREETYPE_VERSION), downloaded from sourceforge "
    "or savannah, out of reach here; its image-comparison baselines are drawn with that FreeType. With "
    "Debian's FreeType 9 of 49 P2P image tests of matplotlib-26291 failed on Base and Gold alike "
    "(measured 2026-12-06). setupext builds whatever tree is at this path; a git tree has no configure "
    "script until autogen.sh makes it (autoconf, automake, libtool)", prepare="sh autogen.sh")
_QHULL = _vendored(
    "build/qhull-2020.2", "qhull/qhull", "613debeaea72ee66626dace9ba1a2eff11b5d37d",            # tag 2020.2
    "matplotlib >= 3.3 compiles Qhull 2020.2 (LOCAL_QHULL_VERSION) from qhull.org's tarball into its "
    "_qhull extension (SWE-bench's pre_install fetches the same tarball); out of reach here. setupext "
    "compiles src/libqhull_r of whatever tree is at this path. (Debian's libqhull, used before, needs "
    "mplsetup.cfg, which Bases of 3.4 older than its introduction do not read: every rebuild of such "
    "a row tried to download Qhull)")
_JQUERY_UI = _vendored(
    "lib/matplotlib/backends/web_backend/jquery-ui-1.12.1", "jquery/jquery-ui",
    "c6f1735249295bb37153861aa97e5b3e38d46b02",                                                # tag 1.12.1
    "matplotlib < 3.2's `setup.py develop` downloads jQuery UI 1.12.1 from jqueryui.com, out of reach "
    "here, unless this folder exists (the install failed: `Failed to download jquery-ui`). Only the "
    "WebAgg backend's pages read it, and they would find the release's sources, not the download's "
    "built bundle: the 3.0 and 3.1 rows test lib/matplotlib/tests/test_axes.py")
VENDORED = {"matplotlib/matplotlib": {**_FREETYPE, **_QHULL},
            **{f"matplotlib/matplotlib {v}": {**_FREETYPE, **_JQUERY_UI} for v in ("3.0", "3.1")}}
# Repositories whose envs also install what the versions' Bases require beyond the setup commit (basereqs.py):
# repository -> the measurement that asked for it
BASE_REQUIREMENTS = {
    "pytest-dev/pytest": "SWE-bench installs each row at its own Base; an env here is installed once at the version's "
                         "setup commit. Measured: pytest 5.4's setup commit 678c1a07 does not require wcwidth and "
                         "pytest-7205's Base does (ModuleNotFoundError at collection); the 4.6 and 5.0 envs lack "
                         "importlib-metadata the same way (pytest-5809: the reporter could not start)",
}
# Repositories whose envs also install what the Bases' builds ask for and the setup commit's does not (basereqs.py,
# `read_build_requires`): extensions are rebuilt in each checkout without network. Repository -> the measurement
BASE_BUILD_REQUIREMENTS = {
    "matplotlib/matplotlib": "the setup commits of 3.5-3.7 name no setup_requires (pyproject.toml's build-system "
                             "instead); Bases before that move ask setup.py for setuptools_scm_git_archive, which the "
                             "venv lacked: the rebuild of matplotlib-22719 (3.5) failed fetching it",
}
# Repositories whose envs also install what the Gold patches add to the install requirements (basereqs.py):
# SWE-bench's eval script installs the project again after applying the patch (with network), so a dependency the
# fix adds is there when its tests run; an image-free run has no network. Repository -> the measurement
GOLD_REQUIREMENTS = {
    "pylint-dev/pylint": "pylint-4661's Gold adds appdirs to setup.cfg and its F2P test imports it; the 2.10 env, "
                         "installed at a setup commit that had moved to platformdirs, lacks it: every Gold run "
                         "failed to collect (ModuleNotFoundError: No module named 'appdirs')",
}
# Repositories (or "repo version") whose tests need the real ctypes (the sandbox otherwise leaves an inert one:
# sandbox/confine.py), decided by measurement and recorded in each env (`ffi`: why), as verified-sdist's recipe
# does for seaborn. What it costs is in docs/failure_kinds.md ("What is not protected").
FFI = {
    "pydata/xarray": "scipy's _ccallback_c imports ctypes when it is imported (xarray's tests reach it through dask, "
                     "sparse and numba): with the inert ctypes every Base and Gold run fails to collect (measured: "
                     "pydata__xarray-3305, 3677, 3993 and 8 more, all refused as runner_tampered)",
    "pylint-dev/pylint": "dill, which pylint.lint.parallel imports (pylint >= 2.13; tests/conftest.py imports "
                         "pylint.lint), reads ctypes.pythonapi when it is imported: with the inert ctypes every Base "
                         "and Gold run fails to collect (measured: pylint-dev__pylint-7080, pytest exit code 4)",
    **{f"astropy/astropy {v}": "attrs 17.3.0 (SWE-bench's pin for pytest 3.3.1) reads ctypes.pythonapi when it is "
                                "imported: with the inert ctypes pytest does not start (measured: "
                                "astropy__astropy-7166)" for v in ("1.3", "3.1")},
    **{f"matplotlib/matplotlib {v}": "cairocffi (a test dependency in environment.yml from 3.4 on) imports cffi's "
                                      "_cffi_backend: with the foreign-function modules hidden, every run of a "
                                      "test that reaches it is refused (measured: matplotlib-23476, 3.5, refused "
                                      "as native_code)" for v in ("3.4", "3.5", "3.6", "3.7")},
    "mwaskom/seaborn": "scipy builds ctypes function types when it is imported (measured on verified-sdist's "
                       "seaborn env, whose recipe says ffi)",
    "scikit-learn/scikit-learn": "scipy's _ccallback_c imports ctypes when it is imported, and `import sklearn` "
                                 "imports scipy: with the inert ctypes every Base and Gold run fails to collect "
                                 "(measured: scikit-learn__scikit-learn-10297, 10844, 10908, all refused as "
                                 "runner_tampered)",
}
PYTHON_EOL = {"2.7": "2020-01-01T00:00:00Z", "3.5": "2020-09-13T00:00:00Z", "3.6": "2021-12-23T00:00:00Z",
              "3.7": "2023-06-27T00:00:00Z", "3.8": "2024-10-07T00:00:00Z"}


def env_cutoff(cutoff: str, python: str) -> str:
    """The date cutoff of an env on `python`: `cutoff`, or the interpreter's end of life if earlier."""
    eol = PYTHON_EOL.get(python)
    return eol if eol and eol < cutoff else cutoff


@dataclass
class Plan:
    envs: dict[str, GitEnvRecipe] = field(default_factory=dict)
    env_of: dict[str, str] = field(default_factory=dict)          # instance id -> env key
    unplanned: dict[str, str] = field(default_factory=dict)       # instance id -> why it has no env


def _of(table: Mapping, repo: str, version: str, default):
    """A table's entry for "repository version", else for the repository (ADAPTATIONS, VENDORED, FFI)."""
    return table.get(f"{repo} {version}", table.get(repo, default))


def plan_envs(tasks: Sequence[Task], specs: Mapping[str, Mapping[str, dict]], *,
              sources: Mapping[str, str] | None = None, cutoff: str = DEFAULT_CUTOFF) -> Plan:
    """The env of each row (specs: swebench 4.1.0's {repo: {version: spec}}). Give every row of a version (the
    whole Verified set), not a selection: the stand-in setup commit is the newest of them."""
    plan = Plan()
    groups: dict[tuple[str, str], list[Task]] = {}
    for t in tasks:
        groups.setdefault((t.repo, t.version), []).append(t)
    for (repo, version), rows in sorted(groups.items()):
        spec = specs.get(repo, {}).get(version)
        if spec is None:
            for t in rows:
                plan.unplanned[t.instance_id] = f"swebench 4.1.0 has no spec for {repo} {version}"
            continue
        source = source_for(repo, sources)
        setups = sorted({t.environment_setup_commit for t in rows if t.environment_setup_commit})
        setup, note = (setups[0] if len(setups) == 1 else ""), ""
        if len(setups) > 1:
            note = f"rows name {len(setups)} environment_setup_commits; the newest Base commit is used"
        if setup and has_commit(source, setup) is False:
            note = f"environment_setup_commit {setup} is not in {source} whole; the newest Base commit of " \
                   f"{version} that it holds whole is used"
            setup = ""
        if not setup:
            servable = [t for t in rows if has_commit(source, t.base_commit) is not False] or rows
            setup = max(servable, key=lambda t: (t.created_at, t.instance_id)).base_commit
            note = note or "rows name no environment_setup_commit; the newest Base commit is used"
        key = env_key(repo, version, spec["python"], spec)
        bases = [(t.instance_id, t.base_commit) for t in rows]
        golds = {t.instance_id: t.patch for t in rows} if repo in GOLD_REQUIREMENTS else None
        extra = base_requirements(source, setup, bases, spec["python"], known=spec.get("pip_packages") or (),
                                  golds=golds) if repo in BASE_REQUIREMENTS or golds else {}
        if repo in BASE_BUILD_REQUIREMENTS and extra is not None:
            built = base_requirements(source, setup, bases, spec["python"], read=read_build_requires)
            extra = None if built is None else {**extra, **{r: built[r] for r in without_numpy(built)}}
        if extra is None:
            note = (note + "; " if note else "") + f"the Bases' install requirements were not read: {source} is " \
                "not a local repository holding every Base (give one with EXECCRITIC_GIT_SOURCES)"
            extra = {}
        plan.envs[key] = GitEnvRecipe(
            key=key, repo=repo, version=version, python=spec["python"], spec=dict(spec), setup_commit=setup,
            project_version=scm_version(describe(source, setup), f"{version}.0"),
            exclude_newer=env_cutoff(cutoff, spec["python"]),
            adaptations=dict(_of(ADAPTATIONS, repo, version, {})),
            base_requirements=extra, vendored=_of(VENDORED, repo, version, {}),
            ffi=_of(FFI, repo, version, ""), setup_note=note)
        for t in rows:
            plan.env_of[t.instance_id] = key
    return plan
