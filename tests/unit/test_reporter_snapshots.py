"""The guard's snapshots (reporter/inside/execcritic_reporter/guard.py): most checks find nothing changed and
take the identity-only path (`_unchanged`); these tests make sure that path cannot be talked into "nothing
changed" - by a value whose `__eq__` lies, a descriptor changed in place, or rebound builtins - and that a run
started ahead of time (`prewatch`, snapshots before the go) judges what changed before its first watch as a
cold run's first watch does: provenance checked, the runner's own configuration taken as baseline."""

from __future__ import annotations

import builtins
import functools
import sys
import types
import warnings
from pathlib import Path

import pytest

INSIDE = Path(__file__).resolve().parents[2] / "execcritic" / "harness" / "reporter" / "inside"


@pytest.fixture(scope="module")
def guard_module():
    sys.path.insert(0, str(INSIDE))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)    # the reporter's sealed calls, before sealing
            from execcritic_reporter import guard
    finally:
        sys.path.remove(str(INSIDE))
    return guard


def _candidate_function(workdir: str, name: str = "forged"):
    """A function whose code comes from a file the candidate changed (pkg/product.py in `workdir`)."""
    namespace: dict = {}
    exec(compile(f"def {name}(*args, **kwargs):\n    return True\n", f"{workdir}/pkg/product.py", "exec"), namespace)
    return namespace[name]


def _guard(guard_module, workdir="/nonexistent"):
    fired = []
    g = guard_module.Guard({"workdir": workdir, "changed": ["pkg/product.py"]},
                           tamper=lambda what, detail: fired.append((what, detail)))
    return g, fired


class _Liar:
    """Equal to everything (a value of the code under test may define `__eq__`)."""
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__

    def __call__(self):
        return True


def _ns_diff(g, ns, snap):
    return g._diff("runner_tampered", "runner", ns, snap)


def test_nothing_changed_is_nothing_and_runner_state_is_not_tampering(guard_module):
    g, _ = _guard(guard_module)
    def run():
        pass
    ns = {"run": run, "cache": {}}
    snap = guard_module._snapshot(ns)
    assert _ns_diff(g, ns, snap) == []
    ns["cache"] = {"filled": 1}                     # state, not behaviour
    assert _ns_diff(g, ns, snap) == []


def test_a_rebinding_whose_value_says_it_is_equal_is_still_a_change(guard_module):
    g, _ = _guard(guard_module)
    def run():
        pass
    ns = {"run": run}
    snap = guard_module._snapshot(ns)
    ns["run"] = _Liar()
    found = _ns_diff(g, ns, snap)
    assert found and "runner.run was rebound" in found[0][1], found


@pytest.mark.parametrize("change", ["property", "classmethod", "staticmethod", "partial"])
def test_a_descriptor_changed_in_place_is_a_change(guard_module, change):
    """Same object, same key: re-running a descriptor's `__init__` (or a partial's `__setstate__`) changes
    what it runs; the fast path compares what it runs, not only the object."""
    g, _ = _guard(guard_module)

    def original(*args):
        return False

    def forged(*args):
        return True

    values = {"property": property(original), "classmethod": classmethod(original),
              "staticmethod": staticmethod(original), "partial": functools.partial(original, 1)}
    cls = type("Report", (), {"passed": values[change]})
    snap = guard_module._snapshot(vars(cls))
    value = vars(cls)["passed"]
    if change == "partial":
        value.__setstate__((forged, (1,), None, None))
    else:
        value.__init__(forged)
    found = g._diff("runner_tampered", "Report", vars(cls), snap)
    assert found and "Report.passed was rebound" in found[0][1], found


def test_rebound_builtins_do_not_blind_the_checks(guard_module):
    g, _ = _guard(guard_module)
    module = types.ModuleType("fake_runner_for_snapshots")
    def run():
        pass
    module.run = run
    sys.modules[module.__name__] = module
    saved = builtins.all, builtins.len
    try:
        g.watch((module.__name__,))
        builtins.all = lambda iterable: True
        builtins.len = lambda obj: 0
        module.run = _candidate_function("/nonexistent")
        found = g.changes()
    finally:
        builtins.all, builtins.len = saved
        del sys.modules[module.__name__]
    kinds = {(what, detail.split(" was ")[0]) for what, detail in found}
    assert ("builtins_rebound", "builtins.all") in kinds and ("builtins_rebound", "builtins.len") in kinds, found
    assert ("runner_tampered", "fake_runner_for_snapshots.run") in kinds, found


def _runner_module(name):
    module = types.ModuleType(name)
    source = "class Report:\n    def passed(self):\n        return False\n\ndef call_and_report():\n    return 1\n"
    exec(compile(source, "/site-packages/fake_runner.py", "exec"), vars(module))   # outside the checkout
    module.Report.__module__ = name
    sys.modules[name] = module
    return module


@pytest.mark.parametrize("where", ["module", "class", "descriptor", "sys.modules"])
def test_a_run_started_ahead_checks_what_changed_before_its_first_watch(guard_module, tmp_path, where):
    """Snapshots taken before the go (`prewatch`); then the candidate's code (a conftest importing the product)
    tampers before the runner configures; the first watch after the go finds it by provenance, as a cold run's
    first watch would, and nothing is reported for an untouched runner."""
    workdir = str(tmp_path)
    g, fired = _guard(guard_module, workdir)
    name = "fake_runner_prewatch_" + where.replace(".", "_")
    module = _runner_module(name)
    try:
        g.prewatch((name,))
        forged = _candidate_function(workdir)
        if where == "module":
            module.call_and_report = forged
        elif where == "class":
            module.Report.passed = forged
        elif where == "descriptor":
            module.Report.outcome = property(lambda self: "failed")
            g.watch((name,))                             # (a cold run's baseline: the runner's own property)
            assert fired == []
            g.provisional = True
            vars(module.Report)["outcome"].__init__(forged)
        else:
            replacement = types.ModuleType(name)
            replacement.call_and_report = forged
            sys.modules[name] = replacement
        g.watch((name,))
    finally:
        del sys.modules[name]
    assert [what for what, _ in fired] == ["runner_tampered"], fired
    assert "pkg/product.py" in fired[0][1]


def test_a_run_started_ahead_takes_the_runners_own_configuration_as_baseline(guard_module, tmp_path):
    """pytest's `legacypath` adds properties to its classes while it configures: trusted code, taken as the
    baseline (a cold run snapshots after it); a change after the first watch is tampering, as in a cold run."""
    workdir = str(tmp_path)
    g, fired = _guard(guard_module, workdir)
    name = "fake_runner_baseline"
    module = _runner_module(name)
    try:
        g.prewatch((name,))
        module.Report.fspath = property(lambda self: "legacy")      # this test file: outside the checkout
        module.helper = lambda: None
        g.watch((name,))
        assert fired == [] and g.changes() == []
        module.Report.passed = _candidate_function(workdir)
        found = g.changes()
    finally:
        del sys.modules[name]
    assert [what for what, _ in found] == ["runner_tampered"], found
    assert "Report.passed was rebound" in found[0][1]
