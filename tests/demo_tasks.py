"""Two small real tasks built from real PyPI projects, for harness and agent tests.

Each is a released sdist (toolz 1.0.0, boltons 24.1.0: real code, real test suites) with one real bug
re-introduced in a library function, committed as the only commit (the Base; no history that could
leak the fix). Gold is the diff that restores the released code; the official test patch adds a
regression test next to the project's own tests. Everything is deterministic and cached; the
environment is a venv with a pinned pytest, used through the real `local` (bubblewrap) sandbox or
baked into a Docker image with the repository at /testbed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from execcritic.files import locked
from execcritic.tasks.envbuild import find_interpreter
from execcritic.tasks.model import Task

PYTEST_PIN = "pytest==8.3.4"
GIT_ENV = {"GIT_AUTHOR_NAME": "execcritic", "GIT_AUTHOR_EMAIL": "demo@execcritic.invalid",
           "GIT_COMMITTER_NAME": "execcritic", "GIT_COMMITTER_EMAIL": "demo@execcritic.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def cache_root() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("execcritic")) / "test-data"


def cache_lock(name: str):
    """`<test-data>/.<name>.lock`, held: the parallel test workers (xdist) build a cached item once, one at a time."""
    return locked(cache_root() / f".{name}.lock")


def fetch_sdist(name: str, version: str) -> Path:
    dest = cache_root()
    path = dest / f"{name}-{version}.tar.gz"
    with cache_lock(path.name):
        if not path.is_file():
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                   "--no-build-isolation", f"{name}=={version}", "-d", str(dest)],
                                  capture_output=True, text=True)
            if proc.returncode != 0 or not path.is_file():
                raise RuntimeError(f"could not download {name}=={version} into {dest}: {proc.stderr[-1500:]}")
    return path


def pytest_venv(python: str = "") -> Path:
    """A venv with a pinned pytest, built once and cached: this interpreter's version, or CPython `python`
    ('3.13', found as task environments find theirs)."""
    exe = sys.executable
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if python and python != version:
        exe, version = str(find_interpreter(python)), python
    venv = cache_root() / f"venv-py{version.replace('.', '')}-{PYTEST_PIN.replace('==', '-')}"
    with cache_lock(venv.name):
        if not (venv / ".complete").exists():
            if venv.exists():
                shutil.rmtree(venv)
            subprocess.run([exe, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", PYTEST_PIN], check=True)
            (venv / ".complete").write_text("ok\n")
    return venv


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout


@dataclass(frozen=True)
class DemoSpec:
    name: str
    version: str
    repo: str
    source_file: str           # the file whose bug is re-introduced
    correct: str               # released code
    buggy: str                 # Base code
    recursing: str             # a candidate line that makes the function recurse forever
    test_file: str
    test_code: str             # appended to test_file by the official test patch
    f2p: tuple[str, ...]
    p2p: tuple[str, ...]
    issue: str


TOOLZ = DemoSpec(
    name="toolz", version="1.0.0", repo="pytoolz/toolz",
    source_file="toolz/itertoolz.py",
    correct="        d[item] += 1\n",
    buggy="        d[item] = 1\n",
    recursing="        return frequencies(seq)\n",
    test_file="toolz/tests/test_itertoolz.py",
    test_code=("\n\ndef test_frequencies_counts_repeats():\n"
               "    assert frequencies(['a', 'b', 'a', 'a']) == {'a': 3, 'b': 1}\n"),
    f2p=("toolz/tests/test_itertoolz.py::test_frequencies_counts_repeats",
         "toolz/tests/test_itertoolz.py::test_frequencies"),
    p2p=("toolz/tests/test_itertoolz.py::test_groupby", "toolz/tests/test_itertoolz.py::test_unique"),
    issue=("frequencies() counts every value only once\n\n`toolz.frequencies(['a', 'b', 'a'])` returns "
           "`{'a': 1, 'b': 1}`; it should count occurrences: `{'a': 2, 'b': 1}`."),
)

BOLTONS = DemoSpec(
    name="boltons", version="24.1.0", repo="mahmoud/boltons",
    source_file="boltons/iterutils.py",
    correct="    return next(filter(key, iterable), default)\n",
    buggy="    return next(filter(key, iterable), None)\n",
    recursing="    return first(iterable, default=default, key=key)\n",
    test_file="tests/test_iterutils.py",
    test_code=("\n\ndef test_first_returns_default():\n"
               "    from boltons.iterutils import first\n"
               "    assert first([0, None, ''], default='ohai') == 'ohai'\n"),
    f2p=("tests/test_iterutils.py::test_first_returns_default",),
    p2p=("tests/test_iterutils.py::test_chunked_bytes",),
    issue=("iterutils.first() ignores `default`\n\n`first([0, None], default='x')` returns None although the "
           "documentation says it returns the optional default when no element is truthy."),
)


@dataclass
class DemoTask:
    spec: DemoSpec
    repo: Path                 # prepared Base checkout (single commit)
    venv: Path
    task: Task

    @property
    def activate(self) -> str:
        # the project is importable from the checkout, as an editable install would make it
        return f"source {self.venv}/bin/activate && export PYTHONPATH=/testbed"

    def task_row(self, suffix: str = "demo-1") -> dict:
        """A dataset row for this task under another instance id, naming its local environment."""
        row = self.task.to_row()
        row["instance_id"] = f"{self.spec.name}__{suffix}"
        row["local_environment"] = {"checkout": str(self.repo), "venv": str(self.venv),
                                    "activation": self.activate}
        return row

    def open_local(self, **kw):
        from execcritic.sandbox.local import LocalSandbox

        return LocalSandbox(self.repo, activate=self.activate, binds=[self.venv], **kw)


def eval_script(base: str, test_file: str, test_patch: str) -> str:
    """An eval script in the shape of SWE-bench Verified's (reset test files, apply the test patch,
    run the test files between the markers, reset again)."""
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", "cd /testbed", "export PYTHONPATH=/testbed",
        "git config --global --add safe.directory /testbed", "git status",
        f"git checkout {base} {test_file}",
        "git apply -v - <<'EOF_114329324912'", test_patch.rstrip("\n"), "EOF_114329324912",
        ": '>>>>> Start Test Output'", f"python3 -m pytest -rA {test_file}", ": '>>>>> End Test Output'",
        f"git checkout {base} {test_file}", ""])


def build_demo(spec: DemoSpec, dest: Path) -> DemoTask:
    """Unpack, re-introduce the bug, commit the Base, and derive Gold and the official test patch."""
    sdist = fetch_sdist(spec.name, spec.version)
    repo = dest / f"{spec.name}-repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        tf.extractall(dest / "_x", filter="data")
    top = next((dest / "_x").iterdir())
    for item in top.iterdir():
        shutil.move(str(item), repo / item.name)
    shutil.rmtree(dest / "_x")
    src = repo / spec.source_file
    text = src.read_text()
    assert text.count(spec.correct) == 1, f"{spec.name}: the released line is not unique in {spec.source_file}"
    src.write_text(text.replace(spec.correct, spec.buggy))
    (repo / ".gitignore").write_text("__pycache__/\n*.egg-info/\n.pytest_cache/\nbuild/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"{spec.name} {spec.version} (Base)")
    base = _git(repo, "rev-parse", "HEAD").strip()
    src.write_text(text)
    gold = _git(repo, "diff", "--no-color")
    _git(repo, "checkout", "-q", "--", ".")
    tf_path = repo / spec.test_file
    original = tf_path.read_text()
    tf_path.write_text(original + spec.test_code)
    test_patch = _git(repo, "diff", "--no-color")
    _git(repo, "checkout", "-q", "--", ".")
    task = Task(instance_id=f"{spec.name}__demo-1", repo=spec.repo, base_commit=base, patch=gold,
                test_patch=test_patch, problem_statement=spec.issue, fail_to_pass=spec.f2p,
                pass_to_pass=spec.p2p, version=spec.version, log_parser="parse_log_pytest",
                eval_script=eval_script(base, spec.test_file, test_patch), eval_type="pass_and_fail",
                dataset="tests/demo_tasks.py")
    return DemoTask(spec, repo, pytest_venv(), task)
