"""The reporter's unittest side (Django's runtests.py and `python -m unittest`), installed at interpreter start.

`unittest.TestCase.run` is wrapped before any code of the repository is imported. For each test it runs, the
wrapper verifies the test method against a compile of the file that defines it, then gives that one test case
instance recording wrappers (instance attributes, so nothing else changes) for its test method, `setUp`,
`tearDown` and `subTest`: the records come from the raw outcome of the test's own code, before unittest's
result machinery - or a runner that rewrote it - sees it.
"""
import contextlib
import functools
import os
import sys

from execcritic_reporter import guard as guardmod

_WATCH = ("unittest", "execcritic_reporter")


def install(rep):
    import unittest.case  # noqa: F401 - the standard library's, imported before any repository code

    case = sys.modules["unittest.case"]
    original = case.TestCase.run

    def run(self, result=None):
        return _run(rep, original, self, result)

    run.__qualname__ = "TestCase.run"
    case.TestCase.run = run
    rep.guard.watch(_WATCH)          # baseline taken here: nothing from the checkout has run yet
    rep._first_run = True


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


def instrument(rep, test, node, extra):
    """Give one TestCase instance its recording wrappers; returns the function that removes them."""
    name = test._testMethodName
    fn = getattr(test, name)
    problem = guardmod.check_test_callable(fn, name, _defining_file(type(test), name), rep.guard)
    if problem:
        rep.tamper("test_code", "%s: %s" % (node, problem))
    expecting = bool(getattr(fn, "__unittest_expecting_failure__", False))
    sub_failures = []
    skip_exc = _skip_exceptions()

    @functools.wraps(fn)
    def test_method(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except skip_exc as exc:
            rep.node(node, "call", "skipped", exc, **extra)
            raise
        except BaseException as exc:
            rep.node(node, "call", "xfailed" if expecting else "failed", exc, xfail=expecting, strict=True, **extra)
            raise
        if sub_failures:
            rep.node(node, "call", "xfailed" if expecting else "failed", None, xfail=expecting, strict=True,
                     subtests_failed=len(sub_failures), **extra)
        else:
            rep.node(node, "call", "failed" if expecting else "passed", None, xfail=expecting, strict=True,
                     note="unexpected success" if expecting else "", **extra)
        return result

    def phase(attr, label):
        original = getattr(test, attr)

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            try:
                out = original(*args, **kwargs)
            except skip_exc as exc:
                rep.node(node, label, "skipped", exc, **extra)
                raise
            except BaseException as exc:
                rep.node(node, label, "error", exc, **extra)
                raise
            rep.node(node, label, "passed", None, **extra)
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
                rep.node(node, "subtest", "failed", exc, params=repr((args, kwargs))[:200], **extra)
                raise

    added = {name: test_method, "setUp": phase("setUp", "setup"), "tearDown": phase("tearDown", "teardown"),
             "subTest": sub_test}
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


def _run(rep, original, test, result):
    if getattr(rep, "_first_run", False):
        rep._first_run = False
        if rep.runner == "django":
            rep.guard.watch(("django.test",))   # the product's own test framework: provenance checked now
    node, desc = node_ids(test)
    rep.check("run " + node)
    remove = None
    try:
        remove = instrument(rep, test, node, {"desc": desc})
    except Exception as exc:  # never break the run: say so; the harness refuses a verdict
        rep.tamper("reporter_error", "%s: could not prepare the call record: %r" % (node, exc))
    try:
        return original(test, result)
    finally:
        if remove is not None:
            remove()
        rep.check("after " + node)
