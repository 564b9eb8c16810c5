"""The reporter's SymPy side: `bin/test` (sympy/testing/runtests.py, or sympy/utilities/runtests.py in old
releases), run by the harness with `--no-subprocess` and a recorded PYTHONHASHSEED so that the tests run in
this process.

SymPy's runner compiles each test file itself and `exec`s it into a fresh namespace, then calls the test
functions it finds there. When the runner module is imported, this hook gives it its own `exec` (the
module's global shadows the builtin): the real `exec`, then every test function of the namespace is
verified against a compile of the file made here and replaced by a recording wrapper (functools.wraps, so
the runner's name, source-file and `_slow` checks see the test itself). The record comes from the raw
outcome of the function the runner calls - what its reporter then prints or counts is checked against it.
"""
import builtins
import importlib.abc
import os
import sys
import types

from execcritic_reporter import recording as _recording  # the one sealed proxy, bound here

EVENT = "execcritic.reporter"
RUNNER_MODULES = ("sympy.testing.runtests", "sympy.utilities.runtests")
_WATCH = ("sympy.testing.runtests", "sympy.testing.pytest", "sympy.utilities.runtests", "sympy.utilities.pytest",
          "ast")      # (ast: the reporter parses test files with its classes)


def install(config):
    workdir = os.path.abspath(config.get("workdir", "/testbed")) + os.sep
    sys.meta_path.insert(0, _AfterImport(set(RUNNER_MODULES), lambda module: _patch(module, workdir)))


class _Proxy(importlib.abc.Loader):
    def __init__(self, loader, after):
        self._loader, self._after = loader, after

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `after(module)` right after one of `names` is imported (by whatever finder finds it)."""

    def __init__(self, names, after):
        self.names, self.after = names, after

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Proxy(spec.loader, self.after)
                return spec
        return None


def _patch(module, workdir):
    real_exec = builtins.exec

    def exec_(code, globs=None, locs=None):
        out = real_exec(code, globs, locs) if locs is not None else real_exec(code, globs)
        if isinstance(globs, dict) and isinstance(globs.get("__file__"), str):
            _instrument(globs, workdir)
        return out

    module.exec = exec_
    if hasattr(module, "exec_"):      # releases that ran py2/3 compatible `exec_(code, gl)`
        module.exec_ = exec_
    if isinstance(vars(module).get("inspect"), types.ModuleType):
        module.inspect = _inspect_that_sees_tests(module.inspect)
    "\0audit"(EVENT, "watch", _WATCH)


_PROXY_CODE = next(c for c in _recording.__code__.co_consts if isinstance(c, types.CodeType))


def _inspect_that_sees_tests(inspect):
    """The runner's `inspect`, answering `getsourcefile` of a recording proxy with its test's file. Releases before
    SymPy 1.1 (1b5cceb0, Nov 2016) keep a test only if `inspect.getsourcefile` of what the test file binds is that
    file, and a proxy's code is this reporter's: sympy-11618's runs collected 0 tests. Later releases follow
    `__wrapped__` first themselves; for them nothing changes."""
    shim = types.ModuleType(inspect.__name__)
    vars(shim).update(vars(inspect))
    real = inspect.getsourcefile

    def getsourcefile(obj):
        if getattr(obj, "__code__", None) is _PROXY_CODE:
            obj = obj.__wrapped__
        return real(obj)

    shim.getsourcefile = getsourcefile
    return shim


def _instrument(gl, workdir):
    path = os.path.abspath(gl["__file__"])
    rel = path[len(workdir):] if path.startswith(workdir) else path
    for name in list(gl):
        fn = gl[name]
        if not (name.startswith("test_") and callable(fn) and hasattr(fn, "__code__") or
                name.startswith("test_") and hasattr(fn, "__wrapped__")):
            continue
        node = "%s::%s" % (rel, name)
        box = []
        "\0audit"(EVENT, "register", box, node, fn, False, False, None, "sympy", name, path, None, {"key": name})
        gl[name] = _recording(box[0] if box else None, fn)
    "\0audit"(EVENT, "watch_mapping", "test module %s (instrumented)" % rel, gl)
