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
    for version in ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13"):
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
                  path: tuple[Path, ...] = (), ffi: bool = False, runner: str = "unittest",
                  lines: dict[str, list[list[int]]] | None = None, ahead: bool = False):
    """`code` run in checkout `work` whose `files` are written first; `changed`: those the candidate changed (every
    line of them its own, unless `lines` gives a file's [first, last] ranges). `path`: directories put on sys.path
    after the checkout (a library's site-packages). `ffi`: the env's recipe says a library needs the real ctypes;
    `runner`: the reporter's runner hooks; `ahead`: the run is started ahead of time, and released with the facts
    of the candidate once it says it is ready (harness/prestart.py)."""
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(textwrap.dedent(text))
    lines = {rel: [[1, len(files[rel].splitlines()) + 1]] for rel in changed} | (lines or {})
    run_facts = {"changed": changed, "changed_lines": lines, "test_files": []}
    with tempfile.TemporaryDirectory() as tmp:
        channel = ReporterChannel(tmp, {"workdir": str(work), "runner": runner, "ffi": ffi,
                                        **({} if ahead else run_facts)}, prestart=ahead)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = ":".join(map(str, (INSIDE, work, *path)))
        # the host venv is shared by the parallel test workers: a candidate process writing its bytecode (pytest's
        # rewrite of a plugin) while another one runs is a pyc written during that run and loaded - planted, rightly
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update({k: v.replace(os.path.dirname(channel.sandbox_path), tmp) for k, v in channel.env.items()})
        with subprocess.Popen([python, "-c", textwrap.dedent(code)], cwd=work, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as p:
            if ahead:
                assert channel.ready(60), "the run started ahead never said it was ready"
                channel.go(run_facts)
            out, err = p.communicate(timeout=120)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err), channel.finish()


def test_a_signal_handler_from_the_candidates_code_is_tampering(tmp_path):
    proc, report = run_candidate(tmp_path / "repo", {
        "pkg/__init__.py": "import signal\nsignal.signal(signal.SIGUSR1, lambda *a: None)\n"}, ["pkg/__init__.py"],
        "import pkg")
    assert proc.returncode != 0 and "a signal handler from the code under test is not installed" in proc.stderr
    assert [t["what"] for t in report.tampers] == ["signal_handler"], report.tampers


def test_a_native_signal_handler_is_refused_whoever_installs_it(tmp_path):
    """issue 39: `list.insert` as a handler keeps every frame a signal interrupts - the reporter's hook's too;
    installed through a standard-library caller (`sched`) the candidate's line is not the caller."""
    proc, report = run_candidate(tmp_path / "repo", {
        "pkg/__init__.py": "import sched, signal\nframes = []\ns = sched.scheduler()\n"
                           "s.enter(0, 0, signal.signal, (signal.SIGUSR1, frames.insert))\ns.run()\n"},
        ["pkg/__init__.py"], "import pkg")
    assert proc.returncode != 0 and "not installed" in proc.stderr
    assert [t["what"] for t in report.tampers] == ["signal_handler"], report.tampers


# a changed file whose candidate lines are only `args` (Django's autoreload.py under the Gold of 13837: the fix is in
# get_child_arguments, and run_with_reloader installs `lambda *args: sys.exit(0)` on lines the product wrote)
RELOADER = ("import signal, sys\n\n\n"
            "def args():\n"
            "    return ['-m', 'pkg']\n\n\n"           # lines 4-5: the candidate's
            "def run_with_reloader(handler=None):\n"
            "    signal.signal(signal.SIGTERM, handler or (lambda *args: sys.exit(0)))\n"
            "    return args()\n")


def test_a_handler_on_the_products_lines_of_a_changed_file_is_not_the_candidates(tmp_path):
    """issue 42: every Gold run of Django 13837 and 14311 was refused as `signal_handler` - the rule took any
    function of a file the candidate changed, and any frame of it on the stack, for the candidate's. A function
    is the candidate's when the candidate wrote one of its own lines."""
    proc, report = run_candidate(tmp_path / "repo", {"pkg/reload.py": RELOADER}, ["pkg/reload.py"],
                                 "from pkg import reload\nassert reload.run_with_reloader() == ['-m', 'pkg']\n",
                                 lines={"pkg/reload.py": [[4, 5]]})
    assert proc.returncode == 0, proc.stderr
    assert report.tampers == [], report.tampers


@pytest.mark.parametrize("added", ["handler", "caller"])
def test_the_candidates_own_lines_in_a_changed_file_still_install_no_handler(added, tmp_path):
    """The same file with the candidate's lines being the handler it passes in, or the function that calls the
    product's installer: its frame is on the stack, or the handler is its code - refused and named."""
    extra = ("\n\ndef mine(*args):\n    return args\n\n\nrun_with_reloader(mine)\n" if added == "handler" else
             "\n\ndef mine():\n    return run_with_reloader()\n\n\nmine()\n")
    first = len(RELOADER.splitlines()) + 1
    proc, report = run_candidate(tmp_path / "repo", {"pkg/reload.py": RELOADER + extra}, ["pkg/reload.py"],
                                 "from pkg import reload\n",
                                 lines={"pkg/reload.py": [[first, first + len(extra.splitlines())]]})
    assert proc.returncode != 0 and "not installed" in proc.stderr, proc.stderr[-2000:]
    assert [t["what"] for t in report.tampers] == ["signal_handler"], report.tampers


# Django's autoreload test (test_bytecode_conversion_to_source): compile a file, delete its source, import the .pyc
BARE_PYC = """
import os, py_compile, sys, tempfile
d = tempfile.mkdtemp()
src = os.path.join(d, "test_compiled.py")
with open(src, "w") as fh:
    fh.write("VALUE = 41 + 1\\n")
pyc = py_compile.compile(src, src + "c")
os.unlink(src)
{between}
sys.path.insert(0, d)
import test_compiled
print(test_compiled.VALUE)
"""


def test_a_bare_pyc_that_py_compile_wrote_this_run_loads(tmp_path):
    """issue 42: Django 14771's Base run was refused as `bytecode_planted` - the .pyc had no source beside it to be
    compared with. The source py_compile compiled for that path is remembered, and the bytecode matches it."""
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": ""}, [], BARE_PYC.format(between=""))
    assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr[-2000:]
    assert report.tampers == [], report.tampers


def test_a_bare_pyc_rewritten_after_py_compile_is_planted(tmp_path):
    """The same .pyc replaced before the import by other bytecode (here an honest compile of other source, so that
    the run stays alive to report): not what py_compile compiled - refused and named."""
    swap = ("import marshal\nwith open(pyc, 'rb') as fh:\n    head = fh.read(16)\n"
            "with open(pyc, 'wb') as fh:\n    fh.write(head + marshal.dumps(compile('VALUE = 7', src, 'exec')))\n")
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": ""}, [], BARE_PYC.format(between=swap))
    assert "42" not in proc.stdout and "7" not in proc.stdout, proc.stdout
    assert "bytecode_planted" in {t["what"] for t in report.tampers}, (report.tampers, proc.stderr[-2000:])


def test_the_interpreters_own_handlers_and_library_functions_stay_installable(tmp_path):
    proc, report = run_candidate(tmp_path / "repo", {"lib/handlers.py": "def on_usr1(signum, frame):\n    pass\n"}, [],
                                 "import signal, sys\nsys.path.insert(0, 'lib')\nimport handlers\n"
                                 "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
                                 "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
                                 "signal.signal(signal.SIGUSR2, handlers.on_usr1)\n")
    assert proc.returncode == 0, proc.stderr
    assert report.tampers == [], report.tampers


# fifth generation (issue 39): a library's dispatcher that calls back into what it is bound to
HOOKS_BOUND = {
    "subclass": "import bdb\n\nclass Stepper(bdb.Bdb):\n    def dispatch_call(self, frame, arg):\n"
                "        return None\n\nStepper().set_trace()\n",
    "instance dict": "import bdb\n\ndef mine(frame, arg):\n    return None\n\nb = bdb.Bdb()\n"
                     "b.dispatch_call = mine\nb.set_trace()\n",
    "dispatch table": "import profile, sys\n\ndef mine(self, frame, t):\n    return 0\n\np = profile.Profile()\n"
                      "p.dispatch = dict(p.dispatch, call=mine)\np.runcall(sorted, [2, 1])\n",
}


@pytest.mark.parametrize("how", list(HOOKS_BOUND))
def test_a_library_hook_bound_to_the_candidates_code_is_a_trace_hook(how, tmp_path):
    """`bdb.Bdb.trace_dispatch` is the standard library's function and `bdb.set_trace` a library caller, but the
    hooks it calls are the candidate's (the dispatch table of profile.Profile likewise): a trace function may move
    a frame's next line, the recording proxy's too (cheats.py: bdb-subclass-skips-the-test)."""
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": HOOKS_BOUND[how]}, ["pkg/__init__.py"],
                                 "import pkg\nimport sys\nsys.settrace(None)\n")
    assert "trace_hook" in {t["what"] for t in report.tampers}, (report.tampers, proc.stderr[-2000:])


def test_the_standard_library_debugger_and_profiler_of_library_code_are_not_tampering(tmp_path):
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": ""}, [],
                                 "import bdb, profile, sys\nb = bdb.Bdb()\nb.set_trace()\nx = 1\nb.set_continue()\n"
                                 "sys.settrace(None)\nprofile.Profile().runcall(sorted, [2, 1])\n")
    assert proc.returncode == 0, proc.stderr
    assert report.tampers == [], report.tampers


@pytest.mark.parametrize("hook", ["sys.excepthook", "sys.unraisablehook", "threading.excepthook"])
def test_an_exception_hook_from_the_candidates_code_is_named_and_a_librarys_is_not(hook, tmp_path):
    """The interpreter hands these hooks an exception and its traceback - the frames it left."""
    module, name = hook.split(".")
    code = f"import {module}\n\ndef mine(*args):\n    pass\n\n{module}.{name} = mine\n"
    proc, report = run_candidate(tmp_path / "repo", {"lib/tool.py": code}, [],
                                 "import sys\nsys.path.insert(0, 'lib')\nimport tool\n")
    assert proc.returncode == 0 and report.tampers == [], (report.tampers, proc.stderr[-2000:])
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": code}, ["pkg/__init__.py"], "import pkg\n")
    assert [t["what"] for t in report.tampers] == ["exception_hook"], (report.tampers, proc.stderr[-2000:])
    assert hook in report.tampers[0]["detail"]


def _python_312_or_later():
    return next((p.values[0] for p in _interpreters() if p.id in ("py3.12", "py3.13")), None)


@pytest.mark.parametrize("mine", [True, False], ids=["candidate", "library"])
def test_a_sys_monitoring_callback_from_the_candidates_code_is_a_trace_hook(mine, tmp_path):
    """Python 3.12+: `sys.monitoring` calls a callback at every line or call it asks for, without sys.settrace."""
    python = _python_312_or_later()
    assert python, "a CPython 3.12 or 3.13 is needed (pyenv install 3.13)"
    code = ("import sys\nm = sys.monitoring\nm.use_tool_id(3, 'x')\n"
            "m.register_callback(3, m.events.PY_START, lambda code, offset: None)\n"
            "m.register_callback(3, m.events.PY_START, None)\nm.free_tool_id(3)\n")
    files = {"pkg/__init__.py": code} if mine else {"lib/tool.py": code}
    proc, report = run_candidate(tmp_path / "repo", files, list(files) if mine else [],
                                 "import pkg" if mine else "import sys\nsys.path.insert(0, 'lib')\nimport tool\n",
                                 python=python)
    assert proc.returncode == 0, proc.stderr
    assert [t["what"] for t in report.tampers] == (["trace_hook"] if mine else []), report.tampers


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
    site = _site(tmp_path, {"npstyle.py": RENAMER})
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


# Hypothesis's internal.reflection.impersonate, as its `defines_strategy` wrappers use it
IMPERSONATOR = {"hyp/__init__.py": "", "hyp/reflection.py": """
    def impersonate(target):
        def accept(f):
            f.__code__ = f.__code__.replace(co_filename=target.__code__.co_filename,
                                            co_firstlineno=target.__code__.co_firstlineno)
            f.__name__ = target.__name__
            return f
        return accept
""", "hyp/utils.py": """
    from hyp.reflection import impersonate

    def defines_strategy(strategy):
        @impersonate(strategy)
        def accept(*args, **kwargs):
            return ("lazy", strategy(*args, **kwargs))
        return accept

    def proxies(target):
        scope = {}
        exec("def accept(f):\\n    def proxy(*a):\\n        return f(*a)\\n    return proxy\\n", scope)
        return lambda f: impersonate(target)(scope["accept"](f))
""", "hyp/core.py": """
    from hyp.utils import defines_strategy

    from hyp.utils import proxies

    @defines_strategy
    def integers(lo, hi):
        return list(range(lo, hi))

    def _floats(lo):
        return float(lo)

    @proxies(_floats)
    def floats(lo):
        return _floats(lo)
"""}


def _site(tmp_path, files):
    site = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(textwrap.dedent(text))
    return site


def test_a_library_relabelling_its_functions_to_another_of_its_files_is_not_a_code_swap(tmp_path):
    """Hypothesis gives each strategy function the file name and first line of the function it stands for, in
    another of its own files: astropy 4.3's Base runs were refused as code_swap (74 renames) until a library's
    relabelling of library code to another library file was told apart."""
    site = _site(tmp_path, IMPERSONATOR)
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": """
        from hyp.core import integers, floats

        assert integers(0, 2) == ("lazy", [0, 1]) and integers.__code__.co_filename.endswith("core.py")
        assert floats(1) == 1.0 and floats.__code__.co_filename.endswith("core.py")
        """}, [], "import pkg", path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and not report.tampers, report.summary()


@pytest.mark.parametrize("target", ["the candidate's function", "code the candidate compiled", "to a checkout file"])
def test_the_library_relabelling_the_candidates_code_or_to_a_checkout_file_is_a_code_swap(target, tmp_path):
    """The same library call is a code swap when what it relabels is the candidate's code (it would then pass
    as the library's) or when the new name is a file of the checkout."""
    site = _site(tmp_path, IMPERSONATOR)
    if target == "the candidate's function":
        code = """
            import hyp.core
            from hyp.reflection import impersonate

            def forged(*args, **kwargs):
                return None

            impersonate(hyp.core.integers)(forged)
            """
    elif target == "code the candidate compiled":
        code = """
            import hyp.core
            from hyp.reflection import impersonate

            scope = {}
            exec("def forged(*args, **kwargs):\\n    return None\\n", scope)
            impersonate(hyp.core.integers)(scope["forged"])
            """
    else:
        code = """
            import hyp.core, pkg.base
            from hyp.reflection import impersonate

            impersonate(pkg.base.target)(hyp.core.integers)
            """
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": code, "pkg/base.py": "def target():\n    pass\n"},
                                 ["pkg/__init__.py"], "import pkg", path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert "code_swap" in {t["what"] for t in report.tampers}, report.tampers


# llvmlite's ExecutionEngine reads the object code numba's JIT made, as xarray's tests reach it
JIT_READER = {"jitlib.py": """
    import ctypes

    _buf = ctypes.create_string_buffer(b"object code")

    def object_code():
        return ctypes.string_at(ctypes.addressof(_buf), 11)

    def read(address, size):
        return ctypes.string_at(address, size)
"""}


@pytest.mark.parametrize("python", _interpreters())
def test_a_librarys_own_memory_read_in_an_ffi_env_is_not_tampering(python, tmp_path):
    """In an env whose recipe says ffi (xarray: scipy needs the real ctypes), llvmlite reads the object code of
    numba's JIT with ctypes.string_at: xarray 0.12's Base and Gold runs were refused as memory_access."""
    site = _site(tmp_path, JIT_READER)
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": """
        import jitlib

        def compiled():
            return jitlib.object_code()

        assert compiled() == b"object code"
        """}, [], "import pkg", python=python, path=(site,), ffi=True)
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and not report.tampers, report.summary()


@pytest.mark.parametrize("how", ["ctypes directly", "through the library", "through the library, later"])
def test_a_memory_read_the_candidate_drives_is_memory_access_even_in_an_ffi_env(how, tmp_path):
    """The library's exemption is for its own reads: the candidate's line reading memory - itself, through the
    library, or in the library's code that the candidate's line called - is memory_access."""
    site = _site(tmp_path, JIT_READER)
    code = {"ctypes directly": "import ctypes\nctypes.string_at(id(object()), 8)\n",
            "through the library": "import jitlib\njitlib.read(id(object()), 8)\n",
            "through the library, later": "import jitlib\n\ndef later():\n    return jitlib.read(id(object()), 8)\n"
                                          "\n\nlater()\n"}[how]
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": code}, ["pkg/__init__.py"], "import pkg",
                                 path=(site,), ffi=True)
    assert proc.returncode == 0, proc.stderr
    assert "memory_access" in {t["what"] for t in report.tampers}, report.tampers


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


# pytest-mock's plugin, as it wraps unittest.mock's assertions when it configures (`mock_traceback_monkeypatch`)
MOCK_PLUGIN = {"mockish.py": """
    import unittest.mock

    def wrap_assert_not_called(*args, **kwargs):
        return _original(*args, **kwargs)

    def pytest_configure(config):
        global _original
        _original = unittest.mock.NonCallableMock.assert_not_called
        unittest.mock.NonCallableMock.assert_not_called = wrap_assert_not_called
"""}
def pytest_main(plugin: str | None = "mockish", flag: str = "-q") -> str:
    """A pytest run of test_x.py, with `plugin` (a module on the path) loaded when given."""
    load = f"'-p', '{plugin}', " if plugin else ""
    return f"import sys, pytest\nsys.exit(pytest.main(['{flag}', '-p', 'no:cacheprovider', {load}'test_x.py']))"


PYTEST_MAIN = pytest_main()
TEST_X = "from unittest import mock\n\ndef test_x():\n    mock.Mock().assert_not_called()\n"


def test_a_plugin_that_wraps_the_runner_when_it_configures_is_not_tampering(tmp_path):
    """pytest-mock wraps unittest.mock's assertions in its `pytest_configure`, after the reporter's first
    snapshot: every astropy 4.3 run (pytest-astropy brings pytest-mock) was refused as runner_tampered."""
    site = _site(tmp_path, MOCK_PLUGIN)
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": TEST_X}, [], PYTEST_MAIN, path=(site,),
                                 runner="pytest")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report.problem is None and not report.tampers, report.summary()


def test_the_candidates_conftest_wrapping_the_runner_when_it_configures_is_tampering(tmp_path):
    """The same wrap from the candidate's conftest: its function is not the runner's own code."""
    site = _site(tmp_path, MOCK_PLUGIN)
    conftest = MOCK_PLUGIN["mockish.py"].replace("return _original(*args, **kwargs)", "return None")
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": TEST_X, "conftest.py": conftest}, ["conftest.py"],
                                 pytest_main(None), path=(site,), runner="pytest")
    assert "runner_tampered" in {t["what"] for t in report.tampers}, (report.tampers, proc.stdout)


# pytest-rerunfailures' core: a failed test runs again (setup, call, teardown) and its last round is reported
RERUN_PLUGIN = {"rerunner.py": """
    from _pytest.runner import runtestprotocol

    def pytest_runtest_protocol(item, nextitem):
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for attempt in range(3):
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            if not any(r.failed for r in reports):
                break
        for r in reports:
            item.ihook.pytest_runtest_logreport(report=r)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True
"""}
RERUN_TESTS = ("CALLS = []\n\n\ndef test_flaky():\n    CALLS.append(1)\n    assert len(CALLS) == 2\n\n\n"
               "def test_fails():\n    assert False\n\n\ndef test_ok():\n    assert True\n")


def test_a_rerun_by_a_plugin_of_the_env_counts_its_last_round(tmp_path):
    """matplotlib marks its network tests flaky and pytest-rerunfailures reruns them: every Gold run of
    matplotlib-20488 was refused as double_call. A node run again after its teardown by a library's plugin is a
    new round, and the last round is its outcome, as in the runner's log."""
    site = _site(tmp_path, RERUN_PLUGIN)
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": RERUN_TESTS}, [],
                                 pytest_main("rerunner"), path=(site,), runner="pytest")
    assert proc.returncode == 1 and "1 failed, 2 passed" in proc.stdout, proc.stdout + proc.stderr
    assert report.problem is None and not report.tampers, report.summary()
    status = {n.rpartition("::")[2]: r.status for n, r in report.nodes.items()}
    assert status == {"test_flaky": "PASSED", "test_fails": "FAILED", "test_ok": "PASSED"}
    assert {n.rpartition("::")[2]: r.round for n, r in report.nodes.items()} == \
        {"test_flaky": 2, "test_fails": 3, "test_ok": 1}


def test_the_candidates_code_running_a_test_again_is_a_double_call(tmp_path):
    """The same rerun from the candidate's conftest: running a failed test until it passes is not the
    candidate's to do."""
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": RERUN_TESTS, "conftest.py": RERUN_PLUGIN[
        "rerunner.py"]}, ["conftest.py"], pytest_main(None), runner="pytest")
    assert "double_call" in {t["what"] for t in report.tampers}, (report.tampers, proc.stdout)


def test_a_string_xfail_condition_is_evaluated_in_the_tests_module_in_the_call_phase(tmp_path):
    """astropy-8872: `@pytest.mark.xfail('MATPLOTLIB_LT_15')`, false, is evaluated again in the call phase over
    `item.obj.__globals__` - the recording proxy's, where the name is not defined. The plain run passed the
    test, the instrumented one failed it, and every Base and Gold run was invalid as results_disagree."""
    tests = ("import pytest\n\nOLD = False\n\n\n@pytest.mark.xfail('OLD')\ndef test_plot():\n    assert True\n")
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": tests}, [],
                                 pytest_main(None, "-rA"), runner="pytest")
    assert "PASSED test_x.py::test_plot" in proc.stdout, proc.stdout + proc.stderr
    assert report.problem is None and not report.tampers, report.summary()
    assert [r.status for r in report.nodes.values()] == ["PASSED"]


FAILING_CALL = {"callfail.py": """
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        if item.name == "test_plot":
            raise RuntimeError("the plugin fails the call phase")
        yield
"""}


def test_a_call_phase_that_a_plugin_fails_before_the_test_function_runs_is_failed_as_the_runner_says(tmp_path):
    """The runner reports FAILED; the record said not run (SKIPPED), and the run was invalid as results_disagree.
    A failure is never a way to a pass, whoever raises it."""
    site = _site(tmp_path, FAILING_CALL)
    tests = "def test_plot():\n    assert True\n\n\ndef test_ok():\n    assert True\n"
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": tests}, [],
                                 pytest_main("callfail", "-rA"), path=(site,),
                                 runner="pytest")
    assert "FAILED test_x.py::test_plot" in proc.stdout, proc.stdout + proc.stderr
    assert report.problem is None and not report.tampers, report.summary()
    assert {n.rpartition("::")[2]: r.status for n, r in report.nodes.items()} == {"test_plot": "FAILED",
                                                                                  "test_ok": "PASSED"}


# Per-test checks compare every watched namespace in one pass (guard `_flat_unchanged`): after tests that pass and
# change only what pytest changes every test (`_VOLATILE`), one test changes the runner in a way each case names
LATE_TAMPER = {
    "rebound": "import _pytest.runner\n_pytest.runner.check_interactive_exception = lambda *a: False",
    "added": "import _pytest.runner\n_pytest.runner.not_there_before = lambda *a: False",
    "descriptor": "import _pytest.nodes\nfor k, v in vars(_pytest.nodes.Node).items():\n"
                  "    if isinstance(v, property):\n        v.__init__(lambda self: None)\n        break",
    "module": "import sys, types\nsys.modules['_pytest.runner'] = types.ModuleType('_pytest.runner')",
    "nothing": "pass",
}


@pytest.mark.parametrize("case", sorted(LATE_TAMPER))
def test_a_runner_change_after_many_clean_checks_is_seen(tmp_path, case):
    tests = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n\n" for i in range(6))
    late = "\n".join("    " + line for line in LATE_TAMPER[case].splitlines())
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": tests + f"def test_late():\n{late}\n"},
                                 ["test_x.py"], pytest_main(None), runner="pytest")
    seen = {t["what"] for t in report.tampers}
    if case == "nothing":
        assert proc.returncode == 0 and report.problem is None and not seen, report.summary()
    else:
        assert "runner_tampered" in seen, (report.tampers, proc.stdout[-2000:])


# pandas' chained-assignment check, as seaborn's plotting code reaches it (`DataFrame._check_setitem_copy`)
PANDASLIKE = {"pandas/__init__.py": "", "pandas/core/__init__.py": "", "pandas/core/generic.py": """
    import gc

    class NDFrame:
        def _check_setitem_copy(self):
            if not gc.get_referents(self):
                return "dissolved"
            return "kept"

        def referents(self):
            return gc.get_referents(self)
"""}


@pytest.mark.parametrize("who", ["a Base test", "the candidate's line"])
def test_a_librarys_own_walk_of_the_collector_is_not_introspection(who, tmp_path):
    """pandas asks the collector whether a copy's parent has referents, and the answer stays inside that check:
    seaborn 3187's Base run was refused as `introspection`. Whoever calls the check, it is pandas' own."""
    site = _site(tmp_path, PANDASLIKE)
    code = "from pandas.core.generic import NDFrame\n\nassert NDFrame()._check_setitem_copy() in ('dissolved', 'kept')\n"
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": code},
                                 ["pkg/__init__.py"] if who == "the candidate's line" else [], "import pkg",
                                 path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert report.problem is None and not report.tampers, report.summary()


@pytest.mark.parametrize("how", ["the collector directly", "another function of the library", "a look-alike file"])
def test_any_other_walk_of_the_collector_is_introspection(how, tmp_path):
    """The exemption names one library function whose answer stays inside it: the collector walked directly,
    by another function of the same file (whose answer reaches the caller), or by a function of that name in a
    file that is not pandas' is `introspection`, from a Base test as from the candidate."""
    site = _site(tmp_path, {**PANDASLIKE, "notpandas/core/generic.py": PANDASLIKE["pandas/core/generic.py"]})
    code = {"the collector directly": "import gc\ngc.get_referents(object())\n",
            "another function of the library": "from pandas.core.generic import NDFrame\nNDFrame().referents()\n",
            "a look-alike file": "from notpandas.core.generic import NDFrame\nNDFrame()._check_setitem_copy()\n"}[how]
    proc, report = run_candidate(tmp_path / "repo", {"pkg/__init__.py": code}, [], "import pkg", path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert "introspection" in {t["what"] for t in report.tampers}, report.tampers


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_test_raising_systemexit_is_recorded_as_its_runner_reports_it(runner, tmp_path):
    """pylint 6386's test hits argparse's exit on Base: pytest reports a test raising SystemExit as FAILED,
    unittest as an ERROR. The harness-owned record says the same, so the two agree (the run was refused as
    `results_forged` when the record said ERROR under pytest)."""
    from execcritic.harness.classify import agree
    from execcritic.runners.pytest import PytestRunner
    from execcritic.runners.unittest import UnittestRunner

    test = ("import sys\n\ndef test_exits():\n    sys.exit(2)\n" if runner == "pytest" else
            "import sys, unittest\n\nclass T(unittest.TestCase):\n    def test_exits(self):\n        sys.exit(2)\n")
    main = ("import sys, pytest\nsys.exit(pytest.main(['-rA', '-p', 'no:cacheprovider', 'test_x.py']))"
            if runner == "pytest" else "import unittest\nunittest.main(module=None, argv=['x', '-v', 'test_x'])")
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": test}, [], main, runner=runner)
    assert report.problem is None and not report.tampers, report.summary()
    parser = PytestRunner() if runner == "pytest" else UnittestRunner()
    logged = parser.parse_results(proc.stdout + proc.stderr)
    (key, recorded), = report.status_map().items()
    want = "FAILED" if runner == "pytest" else "ERROR"
    assert recorded == want and logged.get(key) == want, (recorded, logged, proc.stdout[-2000:], proc.stderr[-2000:])
    assert agree(parser, recorded, logged.get(key))


def test_a_library_tracing_inside_a_test_is_not_tampering_and_tracing_the_recording_proxy_is(tmp_path):
    """Hypothesis's explain phase traces the code a failing test runs (sys.settrace inside the call): new frames
    only, so the recording proxy's frame is never traced - not tampering. A debugger started inside the test marks
    every frame up the stack, the proxy's too, and then its lines can be moved (cheats.py: pdb-scripted-jump):
    `trace_hook`, and the test's record stands as recorded."""
    lib = {"lib/tracer.py": "import sys\n\ndef traced(fn):\n    seen = []\n"
                            "    def t(frame, event, arg):\n        seen.append(event)\n        return t\n"
                            "    sys.settrace(t)\n    try:\n        return fn()\n    finally:\n"
                            "        sys.settrace(None)\n",
           "lib/stepper.py": "import bdb\n\ndef debug():\n    b = bdb.Bdb()\n    b.set_trace()\n    b.set_continue()\n"}
    main = ("import sys\nsys.path.insert(0, 'lib')\nimport pytest\n"
            "sys.exit(pytest.main(['-rA', '-p', 'no:cacheprovider', 'test_x.py']))")
    quiet = "import tracer\n\ndef test_traced():\n    assert tracer.traced(lambda: sum([1, 2])) == 3\n"
    proc, report = run_candidate(tmp_path / "repo", {**lib, "test_x.py": quiet}, [], main, runner="pytest")
    assert proc.returncode == 0 and report.problem is None and not report.tampers, (report.summary(), proc.stdout[-2000:])
    loud = "import stepper\n\ndef test_debugged():\n    stepper.debug()\n"
    proc, report = run_candidate(tmp_path / "repo", {"test_x.py": loud}, [], main, runner="pytest")
    assert "trace_hook" in {t["what"] for t in report.tampers}, (report.summary(), proc.stdout[-2000:])


# the runner pins of Python 3.6 task environments: astropy 1.3's, and scikit-learn 0.20-0.22's (the spec's unpinned
# pytest resolves to 6.2.5 there, whose classes - some loaded after the boot, some nested - get methods from attrs)
PY36_RUNNERS = {"pytest 3.3": ["pytest==3.3.1", "pluggy==0.6.0", "attrs==17.3.0"],
                "pytest 6.2": ["pytest==6.2.5", "pluggy==1.0.0", "attrs==21.2.0", "py==1.11.0"]}


@pytest.fixture(scope="module", params=sorted(PY36_RUNNERS))
def pytest_py36(request, tmp_path_factory):
    """A Python 3.6 venv with one of PY36_RUNNERS's pins, from PyPI."""
    from execcritic.tasks.envbuild import uv_binary

    exe = next((str(p / "bin" / "python3") for p in sorted((Path.home() / ".pyenv" / "versions").glob("3.6.*"))),
               shutil.which("python3.6"))
    if not exe:
        pytest.skip("no local CPython 3.6 (astropy 1.3's and scikit-learn 0.20's interpreter)")
    venv = tmp_path_factory.mktemp("pytest_py36") / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "-p", exe, str(venv)], check=True, timeout=300)
    # (copies, not links to uv's cache: linking the same files into another venv - a parallel worker's - moves their
    # ctime, and a library file changed after the go is the run's own code)
    subprocess.run([uv_binary(), "pip", "install", "-q", "--link-mode", "copy", "-p", str(venv / "bin" / "python"),
                    *PY36_RUNNERS[request.param]], check=True, timeout=600)
    # what setuptools' `-nspkg.pth` of a namespace package does at start-up (matplotlib 3.0's mpl_toolkits): makes a
    # module of the checkout from its spec without running it - here for the directory $NSPKG_DIR names
    (next(venv.glob("lib/python3.6/site-packages")) / "zz_nspkg_demo.pth").write_text(
        "import os, sys, importlib.util, importlib.machinery; p = os.environ.get('NSPKG_DIR'); p and "
        "sys.modules.setdefault('nsdemo', importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec("
        "'nsdemo', [p])))\n")
    return str(venv / "bin" / "python")


MARKER_SWAP = """
    import _pytest.fixtures

    scope = {}
    exec(compile("def __init__(self, scope, params=None, autouse=False, ids=None, name=None):\\n"
                 "    object.__setattr__(self, 'scope', 'session')\\n", "<attrs generated init 0f0f>", "exec"), scope)
    _pytest.fixtures.FixtureFunctionMarker.__init__ = scope["__init__"]
"""


@pytest.mark.parametrize("ahead", [False, True], ids=["cold", "started-ahead"])
@pytest.mark.parametrize("conftest", [None, "the candidate's attrs-like __init__"])
def test_pytest_on_python_3_6_runs_clean_and_a_swapped_attrs_init_is_tampering(pytest_py36, conftest, ahead,
                                                                              tmp_path):
    """Python 3.6 has no audit hooks: pytest's classes get methods from attrs, compiled from a string, and pluggy 0.6
    has no `get_hookimpls`. Every astropy 1.3 run was refused (`runner_tampered`, then `reporter_error`), and every
    scikit-learn 0.20-0.22 run too (`unicodedata.UCD`, a type with no namespace on 3.6, broke the boot's walk;
    then the attrs methods of `_pytest.skipping`, imported after the boot, and of the nested
    `Config.InvocationParams`). Now a run is clean, its SystemExit test FAILED and its markers' tests as pytest
    says - and an `__init__` of that kind that the candidate's conftest compiles and binds on the runner's class
    is still tampering. The same in a run started ahead of time, which snapshots the runner before its go (matplotlib
    3.0's runs on Python 3.7 were refused there: pytest's dataclass methods)."""
    files = {"test_x.py": "import sys\nimport pytest\n\ndef test_ok():\n    assert 1 + 1 == 2\n\n"
                          "def test_exits():\n    sys.exit(2)\n\n@pytest.mark.skipif(False, reason='no')\n"
                          "def test_not_skipped():\n    pass\n\n@pytest.mark.xfail(reason='known')\n"
                          "def test_known():\n    assert 0\n"}
    if conftest:
        files["conftest.py"] = MARKER_SWAP
    main = "import sys, pytest\nsys.exit(pytest.main(['-rA', '-p', 'no:cacheprovider', 'test_x.py']))"
    proc, report = run_candidate(tmp_path / "repo", files, ["conftest.py"] if conftest else [], main,
                                 python=pytest_py36, runner="pytest", ahead=ahead)
    if conftest:
        # (on pytest 6.2 the candidate's __init__ can also be on the stack when the session starts: nested_session,
        # seen under CI's load - refused either way)
        assert {"runner_tampered", "nested_session"} & {t["what"] for t in report.tampers}, \
            (report.tampers, proc.stdout[-2000:])
        return
    assert report.problem is None and not report.tampers, (report.summary(), proc.stdout[-2000:], proc.stderr[-2000:])
    assert report.status_map() == {"test_x.py::test_ok": "PASSED", "test_x.py::test_exits": "FAILED",
                                   "test_x.py::test_not_skipped": "PASSED", "test_x.py::test_known": "XFAIL"}


# SymPy's runner before 1.1 (sympy/utilities/runtests.py until 1b5cceb0): it `exec_`s a test file into a namespace and
# keeps the `test_` functions whose `inspect.getsourcefile` is that file - a recording proxy's is the reporter's
OLD_SYMPY = {"sympy/__init__.py": "", "sympy/utilities/__init__.py": "", "sympy/utilities/runtests.py": """
    import inspect
    import sys

    def exec_(code, gl):
        exec(code, gl)

    def test_file(filename):
        gl = {"__file__": filename}
        exec_(compile(open(filename).read(), filename, "exec"), gl)
        funcs = [gl[f] for f in gl if f.startswith("test_") and inspect.isfunction(gl[f]) and
                 inspect.getsourcefile(gl[f]) == filename]
        failed = False
        for f in sorted(funcs, key=lambda x: inspect.getsourcelines(x)[1]):
            try:
                f()
                print(f.__name__, "ok")
            except AssertionError:
                print(f.__name__, "F")
                failed = True
        print("tests finished: %d" % len(funcs))
        sys.exit(1 if failed else 0)
    """, "sympy/tests/test_x.py": """
    def test_right():
        assert 1 + 1 == 2

    def test_wrong():
        assert 1 + 1 == 3
    """}


def test_sympy_before_1_1_keeps_the_tests_its_file_defines(tmp_path):
    """sympy-11618 (SymPy 1.0): every run said `tests finished: 0 passed` - the old runner dropped each test whose
    recording proxy it found. Its `inspect` now answers for a proxy with the test's file: both tests run and are
    recorded as they ended."""
    main = ("import os, sys\nfrom sympy.utilities import runtests\n"
            "runtests.test_file(os.path.abspath('sympy/tests/test_x.py'))")
    proc, report = run_candidate(tmp_path / "repo", OLD_SYMPY, [], main, runner="sympy")
    assert "tests finished: 2" in proc.stdout, (proc.stdout, proc.stderr[-2000:])
    assert report.problem is None and not report.tampers, (report.summary(), proc.stderr[-2000:])
    assert report.status_map() == {"test_right": "PASSED", "test_wrong": "FAILED"}     # (SymPy's names: the key)


def test_a_module_of_the_checkout_made_at_start_up_but_never_run_trusts_the_runners_code_still(pytest_py36, tmp_path,
                                                                                            monkeypatch):
    """Python 3.6/3.7: code compiled at run time is trusted at the boot's end only if no code of the checkout has run.
    matplotlib 3.0's namespace-package .pth makes `mpl_toolkits` (a module of the checkout) from its spec at start-up
    without running it, and every run was refused for pytest's dataclass methods (runner_tampered)."""
    monkeypatch.setenv("NSPKG_DIR", str(tmp_path / "repo"))
    files = {"nsdemo/__init__.py": "raise SystemExit('never run')\n", "test_x.py": "def test_ok():\n    assert True\n"}
    main = "import sys, nsdemo, pytest\nsys.exit(pytest.main(['-rA', '-p', 'no:cacheprovider', 'test_x.py']))"
    proc, report = run_candidate(tmp_path / "repo", files, [], main, python=pytest_py36, runner="pytest")
    assert report.problem is None and not report.tampers, (report.summary(), proc.stdout[-2000:], proc.stderr[-2000:])
    assert report.status_map() == {"test_x.py::test_ok": "PASSED"}


# matplotlib's `check_figures_equal`: the test runs inside a closure of the checkout's own testing module, which
# holds the test function (no `__wrapped__`), with a signature of its own for pytest's fixtures
FIGURES = {"pkg/__init__.py": "", "pkg/testing.py": """
    import inspect

    def check_equal():
        def decorator(func):
            def wrapper(*args, **kwargs):
                seen = []
                func(*args, seen=seen, **kwargs)
                assert seen == [1], seen
            params = [p for p in inspect.signature(func).parameters.values() if p.name != "seen"]
            wrapper.__signature__ = inspect.Signature(params)
            return wrapper
        return decorator
    """, "test_x.py": """
    from pkg.testing import check_equal

    @check_equal()
    def test_x(seen):
        seen.append(1)
    """}
PYTEST_X = "import sys, pytest\nsys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_x.py']))"


@pytest.mark.parametrize("changed", [[], ["pkg/testing.py"]], ids=["the Base's decorator", "the candidate's"])
def test_a_test_run_by_a_closure_of_the_checkouts_unchanged_code_is_the_test(changed, tmp_path):
    """A wrapper that holds the test in its closure (no `__wrapped__`) runs the test when the wrapper's code is
    trusted - a file of the checkout the candidate did not change: every matplotlib test decorated with
    `check_figures_equal` was refused as runner_tampered. The same wrapper in a file the candidate changed is
    not the test the file defines."""
    proc, report = run_candidate(tmp_path / "repo", FIGURES, changed, PYTEST_X, runner="pytest")
    if changed:
        assert "test_code" in {t["what"] for t in report.tampers}, (report.tampers, proc.stdout)
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert report.problem is None and not report.tampers, report.summary()
        assert {n.node: n.phases.get("call") for n in report.nodes.values()} == {"test_x.py::test_x": "passed"}


# Django's serializers tests (tests/serializers/tests.py `register_tests`): test methods made at import as partials of
# a function the test file defines - the file defines no function by the test's name
GENERATED = {"test_gen.py": """
import unittest
from functools import partialmethod


def check_format(self, fmt):
    self.assertIn(fmt, ("json", "xml"))


class T(unittest.TestCase):
    pass


for _fmt in ("json", "xml"):
    setattr(T, "test_%s_format" % _fmt, partialmethod(check_format, _fmt))
"""}
UNITTEST_GEN = "import unittest\nunittest.main(module=None, argv=['x', '-v', 'test_gen'])"


def test_a_test_made_as_a_partial_of_the_files_function_is_that_function(tmp_path):
    """issue 42: every run of Django 12209 was refused as `test_code` ("test_data.py defines no function
    test_json_serializer"). A partial of a function the file defines, bound to data, runs that function as written."""
    proc, report = run_candidate(tmp_path / "repo", GENERATED, [], UNITTEST_GEN)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report.problem is None and not report.tampers, report.summary()
    assert sorted(n.phases.get("call") for n in report.nodes.values()) == ["passed", "passed"], report.summary()


@pytest.mark.parametrize("how", ["another function", "a bound callable"])
def test_a_generated_test_of_other_code_is_not_the_files(how, tmp_path):
    """The same registration over a function the file does not define as compiled (its code swapped for the
    candidate's), or with the candidate's function bound as an argument: not the test the file defines."""
    files = dict(GENERATED, **{"pkg/__init__.py": "def passes(*args):\n    return None\n"})
    if how == "another function":
        files["test_gen.py"] += "\nimport pkg\ncheck_format.__code__ = pkg.passes.__code__\n"
    else:
        files["test_gen.py"] = files["test_gen.py"].replace("partialmethod(check_format, _fmt)",
                                                            "partialmethod(check_format, pkg.passes)")
        files["test_gen.py"] = "import pkg\n" + files["test_gen.py"]
    proc, report = run_candidate(tmp_path / "repo", files, ["pkg/__init__.py"], UNITTEST_GEN)
    assert {"test_code", "code_swap"} & {t["what"] for t in report.tampers}, (report.tampers, proc.stderr[-2000:])


# Django's BaseDatabaseCreation.mark_expected_failures_and_skips (15252's tests call it): product code that rebinds a
# test module's function to unittest.skip(reason)(that function)
MARKS = {"skip": "import unittest\n\ndef mark(module, name):\n"
                 "    setattr(module, name, unittest.skip('db')(getattr(module, name)))\n",
         "other wrapper": "import functools\n\ndef mark(module, name):\n    fn = getattr(module, name)\n"
                          "    setattr(module, name, functools.wraps(fn)(lambda *a, **k: None))\n"}
MARKED = {"test_marks.py": """
import sys, unittest
import pkg


def data_test_function():
    pass


class T(unittest.TestCase):
    def test_a_marks(self):
        pkg.mark(sys.modules[__name__], "data_test_function")

    def test_b_after(self):
        pass
"""}


@pytest.mark.parametrize("how", list(MARKS))
def test_a_test_module_function_skipped_in_place_is_no_rebinding(how, tmp_path):
    """issue 42: every Base run of Django 15252 was `test_module_rebound`. A module function rebound to unittest's
    skip wrapper of itself can only be skipped, never pass: no rebinding. Any other wrapper (here one that runs
    nothing) is still named."""
    files = dict(MARKED, **{"pkg/__init__.py": MARKS[how]})
    proc, report = run_candidate(tmp_path / "repo", files, [],
                                 "import unittest\nunittest.main(module=None, argv=['x', '-v', 'test_marks'])")
    if how == "skip":
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert report.problem is None and not report.tampers, report.summary()
    else:
        assert "test_module_rebound" in {t["what"] for t in report.tampers}, (report.tampers, proc.stderr[-2000:])
