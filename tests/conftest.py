"""Shared fixtures. Real parts only: a real PyPI sdist committed as a git repo, a real private
dockerd, an image built with debootstrap. Docker fixtures skip (with the reason) only when
dockerd or debootstrap is not installed; everything they build is cached in the user cache dir."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.allowed_skips import is_allowed

TOOLZ_VERSION = "1.0.0"


# ---------------------------------------------------------------------------------------------
# A small real repository: the toolz sdist, committed, plus generated untracked-but-ignored files
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def toolz_sdist() -> Path:
    """toolz's sdist from PyPI (via pip), cached in <user cache>/execcritic/test-data."""
    from tests.demo_tasks import fetch_sdist

    return fetch_sdist("toolz", TOOLZ_VERSION)


GITIGNORE = """\
build/
*.egg-info/
__pycache__/
.pytest_cache/
*.sqlite3
toolz/_build_info.py
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def make_toolz_repo(sdist: Path, dest: Path) -> Path:
    """Extract the sdist into `dest`, commit it, then add what an install leaves behind: an
    untracked, ignored generated module and a build/ dir (plus the sdist's own egg-info)."""
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        prefix = tf.getmembers()[0].name.split("/")[0]
        tf.extractall(dest.parent / "_sdist", filter="data")
    for item in (dest.parent / "_sdist" / prefix).iterdir():
        shutil.move(str(item), dest / item.name)
    shutil.rmtree(dest.parent / "_sdist")
    (dest / ".gitignore").write_text(GITIGNORE)
    env = {**os.environ, **GIT_ENV}
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                ["git", "commit", "-q", "-m", f"toolz {TOOLZ_VERSION}"]):
        subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)
    (dest / "toolz" / "_build_info.py").write_text(f"version = {TOOLZ_VERSION!r}\nbuilt_by = 'install'\n")
    (dest / "build" / "lib" / "toolz").mkdir(parents=True)
    shutil.copy2(dest / "toolz" / "__init__.py", dest / "build" / "lib" / "toolz" / "__init__.py")
    return dest


@pytest.fixture(scope="session")
def toolz_repo(toolz_sdist, tmp_path_factory) -> Path:
    return make_toolz_repo(toolz_sdist, tmp_path_factory.mktemp("toolz") / "repo")


# ---------------------------------------------------------------------------------------------
# Docker: a private dockerd, the debootstrap base image, the toolz task image
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def private_dockerd():
    from execcritic.errors import EnvironmentMissing
    from execcritic.sandbox.dockerd import start_dockerd

    try:
        d = start_dockerd()
    except EnvironmentMissing as exc:
        pytest.skip(f"no Docker engine for these tests: {exc}")
    yield d
    d.stop()


@pytest.fixture(scope="session")
def docker_client(private_dockerd):
    return private_dockerd.client()


@pytest.fixture(scope="session")
def base_image(docker_client) -> str:
    from execcritic.errors import EnvironmentMissing
    from execcritic.sandbox.images import BASE_IMAGE, ensure_base_image, image_exists

    if not image_exists(docker_client, BASE_IMAGE) and shutil.which("debootstrap") is None \
            and not os.path.isfile("/usr/sbin/debootstrap"):
        pytest.skip("debootstrap is not installed (apt-get install -y debootstrap); "
                    "cannot build the test image")
    try:
        return ensure_base_image(docker_client)
    except EnvironmentMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def toolz_image(docker_client, base_image, toolz_repo) -> str:
    from execcritic.sandbox.images import build_task_image

    return build_task_image(docker_client, toolz_repo, "execcritic/test-task:toolz", base=base_image)


# ---------------------------------------------------------------------------------------------
# Tree fingerprints used by the sandbox tests (both backends run the same shell in the sandbox)
# ---------------------------------------------------------------------------------------------

# every entry under /testbed: path, type, mode, owner, size, mtime (ns), link target, content hash
TREE_LISTING = (
    r"cd /testbed && find . -printf '%P|%y|%m|%U|%G|%s|%T@|%l\n' | LC_ALL=C sort | "
    r"""while IFS= read -r l; do p=${l%%|*}; p=${p:-.}; """
    r"""if [ -f "$p" ] && [ ! -L "$p" ]; then echo "$l|$(sha256sum < "$p" | cut -c1-64)"; """
    r"""else echo "$l"; fi; done""")

# a dirty run: tracked edits, deletions, new untracked files, ignored caches and a database,
# deleted generated build output (ignored, untracked), mode/mtime/type changes, a rename, a fifo,
# a symlink out of the tree, an in-place truncation, writes to /tmp and HOME
DIRTY_RUN = r"""
set -e
echo '# edited' >> toolz/itertoolz.py
rm setup.py
echo new > NEW_UNTRACKED.txt
mkdir -p .pytest_cache/v/cache newdir/sub
echo '{}' > .pytest_cache/v/cache/lastfailed && touch newdir/sub/f
printf 'SQLite format 3\0' > results.sqlite3
rm toolz/_build_info.py
rm -rf build
chmod 700 toolz
touch -d '2001-01-01' toolz/curried/__init__.py
mv tlz tlz_renamed
ln -s /etc/passwd link_out
mkfifo a_fifo
: > AUTHORS.md
mkdir -p toolz/__pycache__ && echo stale > toolz/__pycache__/itertoolz.cpython-311.pyc
echo x > /tmp/left_in_tmp
echo x > "$HOME/left_in_home"
chmod 777 .
"""


def tree_diff(before: str, after: str, limit: int = 40) -> str:
    """The lines that differ between two TREE_LISTING outputs (for assertion messages)."""
    import difflib

    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after",
                                      lineterm="", n=0))
    return "\n".join(lines[:limit])


pytest_plugins = ["tests.plugins.demo"]


def check_write_files(clean) -> None:
    """Several files in one write (one put_archive in Docker), a missing directory created, mtimes as given."""
    clean.write_files([("/testbed/w/a.py", b"A = 1\n", 0o644, 1_000_000_000),
                       ("/testbed/w/__pycache__/a.tag.pyc", b"\0pyc", 0o600, None)])
    r = clean.run("cd /testbed/w && stat -c '%n %a %Y' a.py __pycache__/a.tag.pyc", timeout=10)
    lines = r.output.splitlines()
    assert lines[0] == "a.py 644 1000000000", r.output
    name, mode, mtime = lines[1].split()
    assert (name, mode) == ("__pycache__/a.tag.pyc", "600") and int(mtime) > 1_700_000_000, r.output
    assert clean.read_file("/testbed/w/__pycache__/a.tag.pyc") == b"\0pyc"


def pytest_report_header(config):
    """Where the real rows come from (or that they are missing): the first thing to check when tests skip."""
    from tests.paths import rows_header

    return rows_header()


# ---------------------------------------------------------------------------------------------
# Parallel workers (`make test` runs pytest-xdist with --dist loadgroup): tests that share one instance of a machine-
# wide resource run on one worker. The private dockerd is one daemon per machine (a second worker would attach to it
# and the first one's teardown would stop it under the second); Ray clusters of two workers would share /tmp/ray.
# A module whose module-scoped fixture is expensive declares its own group (`pytestmark`).
# ---------------------------------------------------------------------------------------------

WORKER_GROUPS = {"private_dockerd": "docker", "local_ray": "ray", "ray_head": "ray"}


def worker_group(item) -> str | None:
    """The xdist group a test must run in, from the resources it uses (None: any worker)."""
    if item.get_closest_marker("docker"):
        return "docker"
    return next((WORKER_GROUPS[f] for f in item.fixturenames if f in WORKER_GROUPS), None)


# ---------------------------------------------------------------------------------------------
# A fresh machine runs what a warm one runs: under CI=true a skip must be on tests/allowed_skips.py's list,
# and a test marked `only_for(fixture=[values])` is not collected for the other values of that fixture
# (a parametrization that does not apply is not a skip to explain)
# ---------------------------------------------------------------------------------------------

@pytest.hookimpl(tryfirst=True)     # before xdist's own hook, which reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    """Drop the parametrizations `only_for` excludes; put each kept test in its worker group."""
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("only_for")
        params = getattr(getattr(item, "callspec", None), "params", {})
        if mark and any(name in params and params[name] not in values for name, values in mark.kwargs.items()):
            drop.append(item)
        else:
            keep.append(item)
            group = worker_group(item)
            if group and not item.get_closest_marker("xdist_group"):
                item.add_marker(pytest.mark.xdist_group(group))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not is_allowed(reason):
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true for a reason that is not on tests/allowed_skips.py's list "
                           f"(build or install what the test needs, or add the reason there with why no command "
                           f"here can provide it): {reason}")
