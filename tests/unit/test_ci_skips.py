"""Under CI=true a skip must be on tests/allowed_skips.py's list, or the run fails; `only_for` deselects the
parametrizations a test does not apply to instead of skipping them (the hooks of tests/conftest.py, run on a
small test file by pytest itself)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TESTS = '''
import pytest
from tests.allowed_skips import allowed

def test_missing_tool():
    pytest.skip("frobnicator not installed")

def test_registry_image():
    pytest.skip(allowed("official-image", "sweb.eval.x86_64.demo is not in the engine"))

@pytest.fixture(params=["local", "docker"])
def backend(request):
    return request.param

@pytest.mark.only_for(backend=["local"])
def test_local_only(backend):
    assert backend == "local"
'''


@pytest.fixture
def suite(pytester):
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems, pytest_runtest_makereport\n")
    pytester.makeini("[pytest]\nmarkers =\n    only_for: collect only for some fixture values\n")
    pytester.makepyfile(test_suite=TESTS)
    return pytester


def test_under_ci_an_unlisted_skip_fails_and_a_listed_one_skips(suite, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest("-rA")
    result.assert_outcomes(failed=1, skipped=1, passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*not on tests/allowed_skips.py's list*frobnicator not installed*"])


def test_outside_ci_skips_stay_skips(suite, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    suite.runpytest().assert_outcomes(skipped=2, passed=1, deselected=1)


def test_an_unknown_allow_key_is_an_error():
    from tests.allowed_skips import allowed

    with pytest.raises(KeyError):
        allowed("no-such-reason", "x")
