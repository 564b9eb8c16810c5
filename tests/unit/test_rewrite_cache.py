"""harness/rewrite_cache.py: which runs may be served pytest's rewritten test modules (the runs themselves:
tests/integration/test_execute.py)."""

from execcritic.harness.rewrite_cache import serves


def test_the_rewrite_cache_serves_no_run_that_changes_the_rewriter_or_pytest_config():
    """A run whose patches touch pytest itself (a pytest-dev Gold patch of the assertion rewriter) or its
    configuration rewrites its test modules as pytest would: nothing compiled by Base is served to it."""
    tests = ["testing/test_assertrewrite.py"]
    assert serves({"src/foo/core.py", *tests}, tests)
    for path in ("src/_pytest/assertion/rewrite.py", "src/pytest/__init__.py", "conftest.py", "tests/conftest.py",
                 "setup.cfg", "tox.ini", "pytest.ini", "pyproject.toml", "vendor/pluggy/hooks.py"):
        assert not serves({path, *tests}, tests), path
