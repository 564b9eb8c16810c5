"""The reporter's pytest side, loaded by name (PYTEST_PLUGINS) while pytest configures - before conftest
files and test modules.

The call phase is recorded at the innermost point: for the duration of `pytest_runtest_call` the item's
test function is a recording proxy around the verified test function, so whatever plugin or wrapper ends up
calling it, the record comes from the function's own raw outcome (its exception, or none). Setup and
teardown are recorded from the raw outcome of their hooks (this wrapper is outermost). Report objects,
terminal lines and the exit status are the runner's business; the harness compares them with these records.
Only the run's outer session reports; sessions nested in the same process (pytester) are ignored.
"""
import functools
import inspect
import os

import pytest

from execcritic_reporter import guard as guardmod
from execcritic_reporter import reporter

_OUTER = {}
_WATCH = ("pytest", "_pytest", "pluggy", "py", "execcritic_reporter", "unittest")
_CRITICAL_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                   "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_runtest_logreport",
                   "pytest_pyfunc_call", "pytest_report_teststatus", "pytest_terminal_summary",
                   "pytest_sessionfinish", "pytest_collection_modifyitems")


def _ours(config):
    return reporter() is not None and _OUTER.get("config") is config


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    rep = reporter()
    if rep is None or "config" in _OUTER:
        return
    _OUTER["config"] = config
    work = os.path.abspath(rep.workdir) + os.sep
    rep.guard.product_runner = os.path.abspath(getattr(pytest, "__file__", "") or "").startswith(work)
    rep.guard.watch(_WATCH)


def pytest_plugin_registered(plugin, manager):
    state = _OUTER.get("hooks")
    if state is not None and reporter() is not None and manager is _OUTER["config"].pluginmanager:
        reporter().tamper("plugin_registered", "a plugin was registered during the run: %s"
                          % guardmod._name(plugin))


def pytest_collectreport(report):
    rep = reporter()
    if rep is None or "config" not in _OUTER or not report.failed:
        return
    text = str(getattr(report, "longrepr", "") or "")
    rep.emit("collect_error", {"node": report.nodeid, "exc": text.strip().splitlines()[-1][:300] if text.strip()
                               else ""})


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_collection_modifyitems(session, config, items):
    yield
    if not _ours(config):
        return
    rep = reporter()
    seen = set()
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and id(module) not in seen:
            seen.add(id(module))
            rep.guard.watch_mapping("test module %s" % module.__name__, vars(module))
    rep.guard.watch(_WATCH)        # modules loaded since configure (conftest-driven plugins)
    pm = config.pluginmanager
    _OUTER["plugins"] = {id(p) for p in pm.get_plugins()}
    _OUTER["hooks"] = {name: [id(i) for i in getattr(pm.hook, name).get_hookimpls()]
                       for name in _CRITICAL_HOOKS if hasattr(pm.hook, name)}


def _check(rep, where):
    rep.check(where)
    config = _OUTER.get("config")
    hooks = _OUTER.get("hooks")
    if config is None or hooks is None:
        return
    pm = config.pluginmanager
    for name, before in hooks.items():
        now = [id(i) for i in getattr(pm.hook, name).get_hookimpls()]
        if now != before:
            rep.guard._report_once(("hook", name), "runner_tampered",
                                   "the implementations of %s changed during the run" % name)
    if {id(p) for p in pm.get_plugins()} - _OUTER["plugins"]:
        rep.guard._report_once(("plugins",), "runner_tampered", "a plugin was registered during the run")


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
    rep = reporter()
    _check(rep, "setup " + item.nodeid)
    result = yield
    outcome, exc = _phase_outcome(result.excinfo)
    rep.node(item.nodeid, "setup", outcome, exc)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    if not _ours(item.config):
        yield
        return
    rep = reporter()
    result = yield
    outcome, exc = _phase_outcome(result.excinfo)
    rep.node(item.nodeid, "teardown", outcome, exc)
    _check(rep, "teardown " + item.nodeid)


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


def _call_outcome(exc, xfail):
    marked, strict, raises = xfail
    if exc is None:
        if marked:
            return "failed" if strict else "xpassed"
        return "passed"
    if isinstance(exc, pytest.skip.Exception):
        return "skipped"
    if isinstance(exc, pytest.xfail.Exception):
        return "xfailed"
    if isinstance(exc, (KeyboardInterrupt, SystemExit)) or type(exc).__name__ == "Exit":
        return "error"
    if marked and (raises is None or isinstance(exc, raises)):
        return "xfailed"
    return "failed"


def _recording(rep, node, fn, xfail, label):
    @functools.wraps(fn)
    def run_test(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            rep.node(node, "call", _call_outcome(exc, xfail), exc, xfail=xfail[0], strict=xfail[1], via=label)
            raise
        if inspect.isawaitable(result) or hasattr(result, "__aiter__"):
            rep.node(node, "call", "not_run", None, via=label, note="coroutine: no async runner")
        else:
            rep.node(node, "call", _call_outcome(None, xfail), None, xfail=xfail[0], strict=xfail[1], via=label)
        return result
    return run_test


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

    def compiler(source, path):
        import ast

        tree = ast.parse(source, filename=path)
        try:
            rewrite.rewrite_asserts(tree, source, path, config)
        except TypeError:                       # pytest < 5.4: rewrite_asserts(mod, module_path, config)
            rewrite.rewrite_asserts(tree, path, config)
        return compile(tree, path, "exec", dont_inherit=True)

    _OUTER[key] = compiler
    return compiler


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    if not _ours(item.config):
        yield
        return
    rep = reporter()
    _check(rep, "call " + item.nodeid)
    node = item.nodeid
    restore = None
    testcase = getattr(item, "_testcase", None)
    try:
        if testcase is not None and hasattr(testcase, "_testMethodName"):          # unittest.TestCase item
            name = testcase._testMethodName
            fn = getattr(testcase, name)
            problem = guardmod.check_test_callable(fn, name, _defining_file(type(testcase), name), rep.guard)
            if problem:
                rep.tamper("test_code", "%s: %s" % (node, problem))
            xfail = (bool(getattr(fn, "__unittest_expecting_failure__", False)), True, None)
            setattr(testcase, name, _recording(rep, node, fn, xfail, "unittest"))
            restore = lambda: testcase.__dict__.pop(name, None)                       # noqa: E731
        elif hasattr(item, "obj") and callable(getattr(item, "obj", None)) and hasattr(item, "_fixtureinfo"):
            fn = item.obj
            name = getattr(item, "originalname", None) or item.name.split("[")[0]
            module = getattr(item, "module", None)
            path = getattr(module, "__file__", None) or str(getattr(item, "fspath", ""))
            problem = guardmod.check_test_callable(fn, name, os.path.abspath(path), rep.guard,
                                                   compiler=_rewrite_compiler(item))
            if problem:
                rep.tamper("test_code", "%s: %s" % (node, problem))
            _set_obj(item, _recording(rep, node, fn, _xfail(item), "pytest"))

            def restore():
                _set_obj(item, fn)
        else:                                                                         # doctests and others
            restore = None
    except Exception as exc:           # never break the run: say so and record what happens anyway
        rep.tamper("reporter_error", "%s: could not prepare the call record: %r" % (node, exc))
    result = yield
    if restore is not None:
        restore()
    if (node, "call") not in rep.seen:
        outcome, exc = _phase_outcome(result.excinfo)
        if restore is not None:         # the test function was never called through its proxy
            rep.node(node, "call", "not_run", exc, via="hook", note="the test function was not called")
            if outcome == "passed":
                rep.tamper("call_bypassed", "%s reported a pass without its test function running" % node)
        else:                           # items without a test function (doctests): the hook's outcome
            rep.node(node, "call", "failed" if outcome == "error" else outcome, exc, via="hook")
    _check(rep, "after call " + node)


def _set_obj(item, value):
    try:
        item.obj = value
    except AttributeError:              # pytest 3.x: `obj` has no setter
        item._obj = value


def _defining_file(cls, name):
    for klass in getattr(cls, "__mro__", ()):
        if name in vars(klass):
            module = __import__("sys").modules.get(klass.__module__)
            return os.path.abspath(getattr(module, "__file__", "") or "")
    return ""


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_sessionfinish(session, exitstatus):
    yield
    if _ours(session.config):
        rep = reporter()
        _check(rep, "session end")
        rep.emit("session_end", {"exitstatus": int(getattr(session, "exitstatus", exitstatus))})
