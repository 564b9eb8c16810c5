"""The reporter inside real interpreters, without a sandbox: a Python process started with the reporter's
directory on PYTHONPATH and a channel socket, the stream read after it exits. Covers what the sandboxed
runs exercise only incidentally: every interpreter the suite's environments use boots and exits cleanly
(Python 3.9 once crashed at exit), forged events from outside the reporter's sealed code are refused, a forked
child cannot write to the stream, an early `os._exit` leaves the stream incomplete, and the signal guard keeps
the standard library's signal semantics (enum handlers restored by unittest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from execcritic.harness.reporter.channel import ReporterChannel

pytestmark = [pytest.mark.integration]

INSIDE = Path(__file__).resolve().parents[2] / "execcritic" / "harness" / "reporter" / "inside"


def _works(exe: str) -> bool:
    try:
        return subprocess.run([exe, "-c", "import sys; sys.exit(sys.version_info < (3, 8))"],
                              capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


def _interpreters() -> list:
    """This interpreter and every CPython 3.8+ found on PATH or under pyenv (the versions task envs use)."""
    found = {sys.executable: f"{sys.version_info[0]}.{sys.version_info[1]}"}
    root = Path.home() / ".pyenv" / "versions"
    for version in ("3.8", "3.9", "3.10", "3.11", "3.12"):
        candidates = [shutil.which(f"python{version}")]
        candidates += [str(p) for p in sorted(root.glob(f"{version}.*/bin/python"))] if root.is_dir() else []
        exe = next((c for c in candidates if c and _works(c)), None)
        if exe and version not in found.values():
            found[exe] = version
    return [pytest.param(exe, id=f"py{v}") for exe, v in found.items()]


def run_reported(python: str, code: str, *, runner: str = "unittest", workdir: Path | None = None):
    with tempfile.TemporaryDirectory() as tmp:
        work = workdir or Path(tmp)
        script = Path(tmp) / "script.py"
        script.write_text(textwrap.dedent(code))
        channel = ReporterChannel(tmp, {"workdir": str(work), "runner": runner, "changed": [],
                                        "changed_lines": {}, "test_files": []})
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(INSIDE)
        env.update({k: v.replace(os.path.dirname(channel.sandbox_path), tmp) for k, v in channel.env.items()})
        proc = subprocess.run([python, str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        return proc, channel.finish()


@pytest.mark.parametrize("python", _interpreters())
def test_boots_and_ends_cleanly(python):
    proc, report = run_reported(python, "print('hello')\n")
    assert (proc.returncode, proc.stdout.strip()) == (0, "hello"), proc.stderr
    assert report.problem is None and report.started and report.ended and not report.tampers, report.summary()


@pytest.mark.parametrize("python", _interpreters())
def test_events_raised_outside_the_reporter_are_refused(python):
    proc, report = run_reported(python, """
        import sys
        for token in range(1, 5):
            sys.audit("execcritic.reporter", "call_returned", token, None, None, None)
        sys.audit("execcritic.reporter", "node", "x::test", "setup", "passed", None, None)
    """)
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and not report.nodes
    assert {t["what"] for t in report.tampers} == {"forged_event"}, report.tampers


@pytest.mark.parametrize("python", _interpreters())
def test_a_forked_child_cannot_write_to_the_stream(python):
    proc, report = run_reported(python, """
        import os, stat
        pid = os.fork()
        if pid == 0:
            for fd in range(3, 64):
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        os.write(fd, b'{"kind": "end"}\\tforged\\n')
                except OSError:
                    pass
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and report.ended, report.summary()


@pytest.mark.parametrize("python", _interpreters())
def test_an_early_exit_leaves_the_stream_incomplete(python):
    proc, report = run_reported(python, "import os\nos._exit(0)\n")
    assert proc.returncode == 0
    assert report.problem and report.problem[0] == "incomplete", report.summary()


@pytest.mark.parametrize("python", _interpreters())
def test_the_signal_guard_keeps_the_standard_library_semantics(python):
    proc, report = run_reported(python, """
        import signal, unittest
        signal.signal(signal.SIGINT, signal.SIG_IGN)      # as under a shell's background job
        unittest.installHandler()
        unittest.removeHandler()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        signal.signal(signal.SIGUSR1, lambda *a: None)
    """)
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and not report.tampers, report.summary()


def run_candidate(work: Path, files: dict[str, str], changed: list[str], code: str, *, python: str = sys.executable,
                  path: tuple[Path, ...] = ()):
    """`code` run in checkout `work` whose `files` are written first; `changed`: those the candidate changed (every
    line of them its own). `path`: directories put on sys.path after the checkout (a library's site-packages)."""
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(textwrap.dedent(text))
    lines = {rel: [[1, len(files[rel].splitlines()) + 1]] for rel in changed}
    with tempfile.TemporaryDirectory() as tmp:
        channel = ReporterChannel(tmp, {"workdir": str(work), "runner": "unittest", "changed": changed,
                                        "changed_lines": lines, "test_files": []})
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = ":".join(map(str, (INSIDE, work, *path)))
        env.update({k: v.replace(os.path.dirname(channel.sandbox_path), tmp) for k, v in channel.env.items()})
        proc = subprocess.run([python, "-c", textwrap.dedent(code)], cwd=work, env=env, capture_output=True,
                              text=True, timeout=120)
        return proc, channel.finish()


def test_a_signal_handler_from_the_candidates_code_is_tampering(tmp_path):
    proc, report = run_candidate(tmp_path / "repo", {
        "pkg/__init__.py": "import signal\nsignal.signal(signal.SIGUSR1, lambda *a: None)\n"}, ["pkg/__init__.py"],
        "import pkg")
    assert proc.returncode == 0, proc.stderr
    assert [t["what"] for t in report.tampers] == ["signal_handler"], report.tampers


# numpy 1.22-1.24's overrides.array_function_dispatch, as it renames each wrapper it makes
RENAMER = """
    import functools

    def dispatch(implementation):
        @functools.wraps(implementation)
        def public_api(*args, **kwargs):
            return implementation(*args, **kwargs)
        public_api.__code__ = public_api.__code__.replace(
            co_name=implementation.__name__, co_filename="<__array_function__ internals>")
        return public_api
"""


@pytest.mark.parametrize("python", _interpreters())
def test_a_library_renaming_its_own_wrappers_is_not_a_code_swap(python, tmp_path):
    """numpy 1.22-1.24 renames the code of each function it wraps at import: every Django 4.0 run that imported
    numpy was refused as code_swap (313 renames) until a library's rename of its own code was told apart."""
    site = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    (site / "npstyle.py").parent.mkdir(parents=True)
    (site / "npstyle.py").write_text(textwrap.dedent(RENAMER))
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": """
        import npstyle

        @npstyle.dispatch
        def empty_like(a):
            return [0] * len(a)

        assert empty_like([1, 2]) == [0, 0] and empty_like.__code__.co_name == "empty_like"
        """}, [], "import pkg", python=python, path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and not report.tampers, report.summary()


@pytest.mark.parametrize("where", ["candidate", "checkout"])
def test_the_same_rename_from_the_checkout_is_a_code_swap(where, tmp_path):
    """The rename is library code renaming its own functions; the same code in the checkout (changed by the
    candidate or not: the library's exemption is for read-only site-packages) is a code swap."""
    proc, report = run_candidate(tmp_path / "repo", {"pkg/renamer.py": RENAMER, "pkg/__init__.py": """
        from pkg import renamer

        @renamer.dispatch
        def empty_like(a):
            return [0] * len(a)
        """}, ["pkg/renamer.py", "pkg/__init__.py"] if where == "candidate" else [], "import pkg")
    assert proc.returncode == 0, proc.stderr
    assert "code_swap" in {t["what"] for t in report.tampers}, report.tampers


def test_a_code_swap_that_changes_only_the_file_name_is_a_code_swap(tmp_path):
    """Code equality ignores co_filename, and the file name is what says whose code a function is: the
    candidate's no-op renamed to the standard library's unittest would pass as trusted (a flags-only swap was
    accepted without comparing file names)."""
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": """
        import unittest.case

        def noop(self, *args, **kwargs):
            return None

        noop.__code__ = noop.__code__.replace(co_filename=unittest.case.__file__)
        unittest.case.TestCase.assertCountEqual = noop
        """}, ["pkg/__init__.py"], "import pkg")
    assert proc.returncode == 0, proc.stderr
    assert "code_swap" in {t["what"] for t in report.tampers}, report.tampers
