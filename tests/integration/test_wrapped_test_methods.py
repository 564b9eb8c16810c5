"""Test methods a trusted wrapper runs: Django runs every `async def` test through asgiref's `AsyncToSync`
(`SimpleTestCase._setup_and_call`), so the reporter meets an `AsyncToSync` object where a test function was
registered. It must follow the wrapper to the coroutine function it holds and check that against the test file
(measured: the Base runs of django__django-13810, -16136 and -16256 were refused as runner_tampered, "is
AsyncToSync, not a function", before it did). A real Verified task, django__django-14017 (Django 4.0), with a
bundle that adds an async test of the issue's behaviour; the candidate's own wrapper stays refused.
"""

from __future__ import annotations

import json

import pytest

from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER
from execcritic.harness.execution import FailureKind, Verdict
from execcritic.sandbox.base import Limits
from tests.bundles import checkout_diff
from tests.sdist import load_sdist_tasks

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DJANGO = "django__django-14017"
MODULE = "expressions/test_async_combine.py"
NODE = "test_q_and_exists (expressions.test_async_combine.AsyncCombineTests)"
TEST = '''\
from django.db.models import Exists, OuterRef, Q
from django.test import SimpleTestCase

from .models import Company


class AsyncCombineTests(SimpleTestCase):
    async def test_q_and_exists(self):
        is_poc = Company.objects.filter(point_of_contact=OuterRef("pk"))   # a lazy queryset: no database
        self.assertIsNotNone(Q() & Exists(is_poc))          # Base: TypeError
'''


@pytest.fixture(scope="module")
def opened():
    from execcritic.tasks.environment import environment_for

    task = load_sdist_tasks([DJANGO])[DJANGO]
    sandbox = environment_for(task).open_sandbox(limits=Limits.from_config(PAPER.harness))
    sandbox.reset()
    yield task, sandbox
    sandbox.close()


def bundle(task) -> TestBundle:
    from execcritic.tasks.environment import environment_for

    patch = checkout_diff(environment_for(task).checkout, {f"tests/{MODULE}": lambda _old: TEST})
    command = ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
               "expressions.test_async_combine.AsyncCombineTests.test_q_and_exists")
    contract = {"entrypoint": "Q() & Exists(...) in an async test method",
                "trigger": "combining an empty Q with an Exists expression (the issue of django__django-14017)",
                "expected_output": "Base raises TypeError; with the fix the result is a Q",
                "issue_evidence": ["SWE-bench instance django__django-14017 (django/django)"],
                "alternative_hypotheses": ["not assessed: a harness test, not an agent's bundle"],
                "non_assertions": ["no database access: the queryset is never evaluated"],
                "test_nodes": [NODE]}
    return TestBundle(patch, command, json.dumps(contract, indent=2))


@pytest.mark.parametrize("patch,expected", [
    pytest.param("base", (True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE), id="base-fails"),
    pytest.param("gold", (True, Verdict.PASS, FailureKind.PASSED), id="gold-passes"),
])
def test_an_async_test_method_run_through_asgiref_is_checked_not_refused(opened, patch, expected):
    from execcritic.harness.execute import execute

    task, sandbox = opened
    ex = execute(task, bundle(task), task.patch if patch == "gold" else None, sandbox=sandbox,
                 check_source_patch=False)
    assert (ex.valid, ex.verdict, ex.failure_kind) == expected, ex.diagnostic + ex.output_tail[-2000:]
    assert [n.node for n in ex.nodes] == [NODE]
