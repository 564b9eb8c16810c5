"""Expected failures under the unittest/Django and SymPy runners, on real Verified tasks: the task's own
test patch with its F2P tests marked as expected failures (`@unittest.expectedFailure`, SymPy's `@XFAIL`).

Such a node ran, but its runner inverts the outcome, so alone it carries no verdict: the Base gate cannot
qualify a test that "fails" by passing, and no candidate can earn a PASS from it. Next to an ordinary node,
the ordinary node decides. unittest's expectedFailure is strict (Python counts an unexpected success as
unsuccessful); Django 3.2's runner still exits 0 then, which the harness refuses as an inconsistent exit.
The pytest cases (xfail strict / non-strict / imperative) run in test_execute.py on toolz and boltons.
"""

from __future__ import annotations

import re

import pytest

from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER
from execcritic.harness.execution import FailureKind, Verdict
from execcritic.sandbox.base import Limits
from tests.bundles import checkout_diff
from tests.sdist import load_sdist_tasks

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DJANGO, SYMPY = "django__django-14017", "sympy__sympy-24443"
MARK = {DJANGO: ("unittest.expectedFailure", "import unittest\n"),
        SYMPY: ("XFAIL", "from sympy.testing.pytest import XFAIL\n")}

NO_VERDICT = (False, None, FailureKind.EXPECTED_FAILURE_ONLY)
CASES = [
    # (instance, how many F2P tests get the mark, patch, expected (valid, verdict, kind))
    pytest.param(DJANGO, "all", "base", NO_VERDICT, id="django-all-marked-base"),
    pytest.param(DJANGO, "all", "gold", (False, None, FailureKind.INCONSISTENT_EXIT), id="django-all-marked-gold"),
    pytest.param(DJANGO, "one", "base", (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE),
                 id="django-one-marked-base"),
    pytest.param(SYMPY, "all", "base", NO_VERDICT, id="sympy-marked-base"),
    pytest.param(SYMPY, "all", "gold", NO_VERDICT, id="sympy-marked-gold"),
]


@pytest.fixture(scope="module")
def opened():
    from execcritic.harness.execute import base_reader
    from execcritic.harness.oracle.build import oracle_bundle
    from execcritic.tasks.environment import environment_for

    tasks = load_sdist_tasks([DJANGO, SYMPY])
    out = {}
    for iid, task in tasks.items():
        sandbox = environment_for(task).open_sandbox(limits=Limits.from_config(PAPER.harness))
        sandbox.reset()
        out[iid] = (task, sandbox, oracle_bundle(task, read_base=base_reader(sandbox)))
    yield out
    for _, sandbox, _ in out.values():
        sandbox.close()


def marked_bundle(task, oracle: TestBundle, names: list[str]) -> TestBundle:
    """The oracle bundle's command over the task's test patch with `names` marked as expected failures."""
    from execcritic.tasks.environment import environment_for

    decorator, import_line = MARK[task.instance_id]
    rel = re.search(r"^\+\+\+ b/(\S+)", task.test_patch, re.M).group(1)

    def mark(text: str) -> str:
        for name in names:
            text, n = re.subn(rf"^(\s*)def {name}\(", rf"\1@{decorator}\n\1def {name}(", text, count=1, flags=re.M)
            assert n == 1, f"{task.instance_id}: no `def {name}(` in {rel}"
        return import_line + text

    patch = checkout_diff(environment_for(task).checkout, {rel: mark}, after=task.test_patch)
    return TestBundle(patch, oracle.test_command, oracle.contract_text)


@pytest.mark.parametrize("instance_id,marked,patch,expected", CASES)
def test_expected_failures_carry_no_verdict(opened, instance_id, marked, patch, expected):
    from execcritic.harness.execute import execute

    task, sandbox, oracle = opened[instance_id]
    names = [n.split(" ")[0] for n in task.fail_to_pass]
    bundle = marked_bundle(task, oracle, names if marked == "all" else names[:1])
    ex = execute(task, bundle, task.patch if patch == "gold" else None, sandbox=sandbox, check_source_patch=False)
    assert (ex.valid, ex.verdict, ex.failure_kind) == expected, ex.diagnostic + ex.output_tail[-2000:]
    statuses = {n.node.split(" ")[0]: n.status for n in ex.nodes}
    if patch == "base":
        assert statuses[names[0]] == "XFAIL"        # recorded and logged alike (else: results_forged)
    elif instance_id == SYMPY:
        assert statuses[names[0]] == "XPASS"
