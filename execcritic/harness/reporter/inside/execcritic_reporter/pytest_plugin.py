"""PYTEST_DONT_REWRITE - the reporter's pytest side, imported while the interpreter starts and loaded by name (PYTEST_PLUGINS) while
pytest configures - before conftest files and test modules.

The call phase is recorded at the innermost point: for the duration of `pytest_runtest_call` the item's
test function is a recording proxy around the test function, registered with the core first (verified
against a compile of the file the node id names, under the name the node id names), so whatever plugin or
wrapper ends up calling it, the record comes from the function's own raw outcome (its exception, or none) and
the core computes the outcome. Setup and teardown are recorded from the raw outcome of their hooks (this
wrapper is outermost). Report objects, terminal lines and the exit status are the runner's business; the
harness compares them with these records. Only the run's outer session reports; sessions nested in the same
process (pytester) are ignored.

`"\\0audit"(...)` is `sys.audit(...)`, sealed into the code at boot (see __init__.seal).
"""
import os
import sys

import pytest

from execcritic_reporter import forget_modules as _forget_modules
from execcritic_reporter import recording as _recording  # the one sealed proxy, bound here

EVENT = "execcritic.reporter"
_OUTER = {}
_WATCH = ("pytest", "_pytest", "pluggy", "py", "unittest",
          "ast")                      # the assertion rewriter builds test code with it
_CRITICAL_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                   "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_runtest_logreport",
                   "pytest_pyfunc_call", "pytest_report_teststatus", "pytest_terminal_summary",
                   "pytest_sessionfinish", "pytest_collection_modifyitems", "pytest_collection_finish")


def install(config):
    """pytest loads this module as a plugin by name while it configures (before conftest files)."""
    _OUTER["env_plugins"] = os.environ.get("PYTEST_PLUGINS")
    names = [p for p in (_OUTER["env_plugins"] or "").split(",") if p.strip()]
    os.environ["PYTEST_PLUGINS"] = ",".join([__name__] + names)
    workdir = os.path.abspath(config.get("workdir", "/testbed")) + os.sep
    # pytest-dev/pytest: the runner is the product (decided now, before any code of the checkout has run)
    "\0audit"(EVENT, "product_runner", os.path.abspath(getattr(pytest, "__file__", "") or "").startswith(workdir))


def prepare(snapshots=True):
    """A run started ahead of time, before its go: import pytest's built-in plugins (pytest imports each
    of them first thing when it starts, before any conftest) and, with `snapshots`, snapshot the runner now,
    while nothing of the checkout has run (guard.prewatch); `pytest_configure` then redoes only what changed
    since. Without, `pytest_configure` takes them all, as in a cold run."""
    import importlib

    try:
        from _pytest.config import default_plugins
    except ImportError:
        default_plugins = ()
    for name in default_plugins:
        try:
            importlib.import_module("_pytest." + name)
        except Exception:       # (a plugin this pytest lists but cannot import: pytest will say so itself)
            pass
    if snapshots:
        "\0audit"(EVENT, "prewatch", _WATCH)


def _ours(config):
    return _OUTER.get("config") is config


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _forget_modules()                          # pytest has loaded this plugin by name: the names can go
    if "env_plugins" in _OUTER:
        # pytest read PYTEST_PLUGINS while it started; a pytest the tests start in a child process (pytester's
        # runpytest_subprocess) must not load this plugin: the child has no reporter
        before = _OUTER.pop("env_plugins")
        if before is None:
            os.environ.pop("PYTEST_PLUGINS", None)
        else:
            os.environ["PYTEST_PLUGINS"] = before
    if "config" in _OUTER:
        return
    box = []
    "\0audit"(EVENT, "adopt_session", box)     # refused (and tampering) if the candidate's code started it
    if not box:
        return
    _OUTER["config"] = config


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """The runner's snapshot is taken once every plugin has configured: pytest-mock wraps unittest.mock's
    assertions in its `pytest_configure` (a hook cannot wrap the historic `pytest_configure` to run after the rest).
    What the configure hooks bound is judged as the checkout's conftest files are: by provenance."""
    if _ours(session.config):
        "\0audit"(EVENT, "watch", _WATCH)


def pytest_collectreport(report):
    if "config" not in _OUTER or not report.failed:
        return
    text = str(getattr(report, "longrepr", "") or "")
    "\0audit"(EVENT, "collect_error", report.nodeid, text.strip().splitlines()[-1][:300] if text.strip() else "")


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_collection_modifyitems(session, config, items):
    yield
    if not _ours(config):
        return
    modules = {}                 # id -> (module, how many of the items are its)
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            modules[id(module)] = (module, modules.get(id(module), (None, 0))[1] + 1)
    for module, tests in modules.values():
        "\0audit"(EVENT, "watch_mapping", "test module %s" % module.__name__, vars(module), tests)
    "\0audit"(EVENT, "watch", _WATCH)        # modules loaded since configure (conftest-driven plugins)
    "\0audit"(EVENT, "watch_plugins", config.pluginmanager, _CRITICAL_HOOKS)


def _phase_outcome(excinfo):
    if excinfo is None:
        return "passed", None
    exc = excinfo[1]
    if isinstance(exc, pytest.skip.Exception):
        return "skipped", exc
    if isinstance(exc, pytest.xfail.Exception):
        return "xfailed", exc
    return "error", exc


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if not _ours(item.config):
        yield
        return
    result = yield
    outcome, exc = _phase_outcome(result.excinfo)
    "\0audit"(EVENT, "node", item.nodeid, "setup", outcome, exc, None)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    if not _ours(item.config):
        yield
        return
    result = yield
    outcome, exc = _phase_outcome(result.excinfo)
    "\0audit"(EVENT, "node", item.nodeid, "teardown", outcome, exc, None)
    "\0audit"(EVENT, "check", "teardown " + item.nodeid)


def _xfail(item):
    """(marked, strict, raises) from the item's xfail marks, evaluated as pytest does."""
    try:
        from _pytest.skipping import evaluate_xfail_marks  # pytest >= 6
    except ImportError:
        ev = getattr(item, "_evalxfail", None)  # pytest < 6 (set by the skipping plugin's setup)
        if ev is not None and ev.istrue():
            strict = ev.get("strict", item.config.getini("xfail_strict"))
            return True, bool(strict), ev.get("raises")
        return False, False, None
    xf = evaluate_xfail_marks(item)
    if xf is None:
        return False, False, None
    return True, bool(xf.strict), xf.raises


def _rewrite_compiler(item):
    """The compiler pytest used for the item's module: its assertion rewriter, or plain compile."""
    module = getattr(item, "module", None)
    loader = getattr(module, "__loader__", None)
    if type(loader).__name__ != "AssertionRewritingHook":
        return None
    config = item.config
    key = ("rewrite", id(config))
    cached = _OUTER.get(key)
    if cached is not None:
        return cached
    from _pytest.assertion import rewrite

    def compiler(tree, source, path):
        try:
            rewrite.rewrite_asserts(tree, source, path, config)
        except TypeError:                       # pytest < 5.4: rewrite_asserts(mod, module_path, config)
            try:                                # (a py.path there, as pytest passes it: its warnings read it)
                import py
                module_path = py.path.local(path)
            except ImportError:
                module_path = path
            rewrite.rewrite_asserts(tree, module_path, config)
        return compile(tree, path, "exec", dont_inherit=True)

    _OUTER[key] = compiler
    return compiler


def _node_target(item):
    """(file, function name) as the node id names them - never the item's own attributes, which code that
    reaches the item could point at another test. The file is the one defining the function (a test method
    may be inherited from a class in another module)."""
    # a parameter id may hold "::" itself (an IPv6 URL): split what precedes it
    parts = [p for p in item.nodeid.split("[", 1)[0].split("::") if p != "()"]
    rootdir = str(getattr(item.config, "rootpath", None) or item.config.rootdir)
    path = os.path.abspath(os.path.join(rootdir, parts[0]))
    name = parts[-1].split("[")[0]
    module = next((m for m in list(sys.modules.values()) if isinstance(getattr(m, "__file__", None), str)
                   and os.path.abspath(m.__file__) == path), None)
    scope = module
    for part in parts[1:-1]:
        scope = vars(scope).get(part) if scope is not None else None
    if isinstance(scope, type):
        for klass in scope.__mro__:
            if name in vars(klass):
                owner = sys.modules.get(klass.__module__)
                if isinstance(getattr(owner, "__file__", None), str):
                    return os.path.abspath(owner.__file__), name
                break
    return path, name


def _register(item, fn, name, path, xfail, label, compiler=None):
    box = []
    "\0audit"(EVENT, "register", box, item.nodeid, fn, xfail[0], xfail[1], xfail[2], label, name, path, compiler,
              None)
    return box[0] if box else None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    if not _ours(item.config):
        yield
        return
    node = item.nodeid
    restore = None
    testcase = getattr(item, "_testcase", None)
    try:
        path, name = _node_target(item)
        if testcase is not None and hasattr(testcase, "_testMethodName"):          # unittest.TestCase item
            fn = getattr(testcase, testcase._testMethodName)
            xfail = (bool(getattr(fn, "__unittest_expecting_failure__", False)), True, None)
            # the module is still pytest's to compile (its asserts rewritten), whatever runs its tests
            token = _register(item, fn, name, path, xfail, "unittest", _rewrite_compiler(item))
            proxy = _recording(token, fn)
            # pytest >= 6 sets the instance attribute to `item.obj` right before calling the case: both
            setattr(testcase, testcase._testMethodName, proxy)
            obj = item.__dict__.get("_obj")
            if obj is not None:
                _set_obj(item, proxy)

            def restore():
                testcase.__dict__.pop(testcase._testMethodName, None)
                if obj is not None:
                    _set_obj(item, obj)
        elif hasattr(item, "obj") and callable(getattr(item, "obj", None)) and hasattr(item, "_fixtureinfo"):
            fn = item.obj
            token = _register(item, fn, name, path, _xfail(item), "pytest", _rewrite_compiler(item))
            _set_obj(item, _recording(token, fn))

            def restore():
                _set_obj(item, fn)
    except Exception as exc:           # never break the run: say so and record what happens anyway
        "\0audit"(EVENT, "tamper", "reporter_error", "%s: could not prepare the call record: %r" % (node, exc))
    result = yield
    if restore is not None:
        restore()
    outcome, exc = _phase_outcome(result.excinfo)
    # items without a test function (doctests): the hook's outcome; otherwise "not run" if the proxy was bypassed
    "\0audit"(EVENT, "not_called", node, exc, outcome, restore is not None)


def _set_obj(item, value):
    try:
        item.obj = value
    except AttributeError:              # pytest 3.x: `obj` has no setter
        item._obj = value


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_sessionfinish(session, exitstatus):
    yield
    if _ours(session.config):
        "\0audit"(EVENT, "session_end", int(getattr(session, "exitstatus", exitstatus)))
