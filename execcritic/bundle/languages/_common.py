"""Helpers every language module shares: what a test directory is, and which test names are new."""

from __future__ import annotations

# Directory names that mark a test tree in the ecosystems we serve. A data file (non-code) under one
# of these is part of the tests.
TEST_DIR_NAMES = frozenset(
    {
        "test",
        "tests",
        "testing",
        "testcases",
        "test_data",
        "testdata",
        "test-data",
        "__tests__",
        "__test__",
        "spec",
        "specs",
        "fixtures",
        "fixture",
        "__fixtures__",
        "__snapshots__",
        "snapshots",
        "unittests",
        "unit_tests",
        "unit-tests",
        "regress",
        "regression",
        "it",
        "e2e",
        "baseline",
        "baselines",
        "test_files",
        "testfiles",
        "resources",
        "mock_data",
    }
)
# 'resources' and 'baseline(s)' only count *inside* a test tree (src/test/resources in Maven)
_ONLY_NESTED = frozenset({"resources", "it", "baseline", "baselines", "mock_data", "regress", "regression"})


def under_test_dir(path: str) -> bool:
    """True if some directory component of `path` marks a test tree (`tests/`, `__tests__/`, ...)."""
    parts = [p.lower() for p in path.split("/")[:-1]]
    for i, part in enumerate(parts):
        if part in TEST_DIR_NAMES and (
            part not in _ONLY_NESTED or any(q in TEST_DIR_NAMES and q not in _ONLY_NESTED for q in parts[:i])
        ):
            return True
        if (
            part.startswith("test_")
            or part.endswith("_test")
            or part.endswith("_tests")
            or part.startswith("tests_")
            or part.endswith("-tests")
        ):
            return True
    return False


def new_names(names, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    """Test names `names(lines)` finds on added lines and not on removed ones (a moved or edited test
    is not new), first occurrence order, without duplicates."""
    removed = set(names(removed_lines))
    return list(dict.fromkeys(n for n in names(added_lines) if n not in removed))
