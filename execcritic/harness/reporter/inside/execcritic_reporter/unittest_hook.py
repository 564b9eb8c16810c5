"""The reporter's unittest side (Django's runtests.py and `python -m unittest`), installed at interpreter start.

`unittest.TestCase.run` is wrapped before any code of the repository is imported. For each test it runs, the
wrapper registers the test method with the core (verified against a compile of the file that defines it; the
test class's assert and fail methods checked for provenance), then gives that one test case instance
recording wrappers (instance attributes, so nothing else changes) for its test method, `setUp`, `tearDown`
and `subTest`: the records come from the raw outcome of the test's own code, before unittest's result
machinery - or a runner that rewrote it - sees it.

`"\\0audit"(...)` is `sys.audit(...)`, sealed into the code at boot (see __init__.seal).
"""
import contextlib
import functools
import os
import sys

from execcritic_reporter import recording as _recording  # the one sealed proxy, bound here

EVENT = "execcritic.reporter"
_WATCH = ("unittest", "ast")     # (ast: the reporter parses test files with its classes)
_STATE = {"first": True, "modules": set()}


def install(config):
    import unittest.case  # noqa: F401 - the standard library's, imported before any repository code

    case = sys.modules["unittest.case"]
    original = case.TestCase.run
    runner = config.get("runner", "")

    def run(self, result=None):
        return _run(runner, original, self, result)

    run.__qualname__ = "TestCase.run"
    case.TestCase.run = run
    "\0audit"(EVENT, "watch", _WATCH)       # baseline taken here: nothing from the checkout has run yet


def _defining_file(cls, name):
    for klass in getattr(cls, "__mro__", ()):
        if name in vars(klass):
            module = sys.modules.get(klass.__module__)
            return os.path.abspath(getattr(module, "__file__", "") or "")
    return ""


def node_ids(test):
    """(id, description): `module.Class.method` and unittest's `str(test)` (what Django's log prints)."""
    try:
        desc = str(test)
    except Exception:
        desc = test.id()
    return test.id(), desc


def instrument(test, node, extra):
    """Give one TestCase instance its recording wrappers; returns the function that removes them."""
    name = test._testMethodName
    fn = getattr(test, name)
    expecting = bool(getattr(fn, "__unittest_expecting_failure__", False))
    box = []
    "\0audit"(EVENT, "register", box, node, fn, expecting, True, None, "unittest", name,
              _defining_file(type(test), name), None, extra)
    "\0audit"(EVENT, "check_case", type(test), node)
    sub_failures = []
    skip_exc = _skip_exceptions()

    def phase(attr, label):
        original = getattr(test, attr)

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            try:
                out = original(*args, **kwargs)
            except skip_exc as exc:
                "\0audit"(EVENT, "node", node, label, "skipped", exc, extra)
                raise
            except BaseException as exc:
                "\0audit"(EVENT, "node", node, label, "error", exc, extra)
                raise
            "\0audit"(EVENT, "node", node, label, "passed", None, extra)
            return out
        return wrapped

    original_subtest = test.subTest

    @contextlib.contextmanager
    def sub_test(*args, **kwargs):
        with original_subtest(*args, **kwargs):
            try:
                yield
            except skip_exc:
                raise
            except BaseException as exc:        # seen before unittest's subTest context swallows it
                sub_failures.append(exc)
                "\0audit"(EVENT, "node", node, "subtest", "failed", exc,
                          dict(extra, params=repr((args, kwargs))[:200]))
                raise

    added = {name: _recording(box[0] if box else None, fn, {"subtests_failed": sub_failures}),
             "setUp": phase("setUp", "setup"), "tearDown": phase("tearDown", "teardown"), "subTest": sub_test}
    for attr, value in added.items():
        setattr(test, attr, value)

    def remove():
        for attr in added:
            test.__dict__.pop(attr, None)
    return remove


def _skip_exceptions():
    import unittest

    out = [unittest.SkipTest]
    skipped = sys.modules.get("_pytest.outcomes")
    if skipped is not None and hasattr(skipped, "Skipped"):
        out.append(skipped.Skipped)
    return tuple(out)


def _run(runner, original, test, result):
    if _STATE["first"]:
        _STATE["first"] = False
        if runner == "django":
            "\0audit"(EVENT, "watch", ("django.test",))   # the product's own test framework: provenance now
    node, desc = node_ids(test)
    module = sys.modules.get(type(test).__module__)
    if module is not None and module.__name__ not in _STATE["modules"]:
        _STATE["modules"].add(module.__name__)
        "\0audit"(EVENT, "watch_mapping", "test module %s" % module.__name__, vars(module))
    remove = None
    try:
        remove = instrument(test, node, {"desc": desc})
    except Exception as exc:  # never break the run: say so; the harness refuses a verdict
        "\0audit"(EVENT, "tamper", "reporter_error", "%s: could not prepare the call record: %r" % (node, exc))
    try:
        return original(test, result)
    finally:
        if remove is not None:
            remove()
        "\0audit"(EVENT, "check", "after " + node)
