"""Language-specific test-patch rules, dispatched by file extension (one module per language).

Why: "tests only" (SPEC §2.1) and "every added test is declared" mean different things in each
language (pytest `def test_x`, Rust `#[test] fn x`, Go `func TestX(t *testing.T)`, JUnit `@Test`...).
The patch module stays language-neutral and asks this package.

The interface of a language module `execcritic/bundle/languages/<name>.py` (module-level names; list the
module in `_MODULES` below):

    LANGUAGE: str                      # e.g. "python", "rust"; Task.language uses the same names
    EXTENSIONS: tuple[str, ...]        # source-file suffixes it owns, lower case, e.g. (".py", ".pyi")
    def is_test_path(path: str) -> bool
        # `path` is repository-relative, '/'-separated, no leading './'. True if a file with this
        # suffix at this path is test code (a test file, a test helper/fixture module) rather than
        # product source.
    def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]
        # The names of tests the hunk lines of one file ADD (as the runner would name them; bare
        # names are fine, e.g. "test_xor" or "TestParse"). `added_lines`/`removed_lines` are the
        # '+'/'-' lines of that file's diff with the marker stripped, in patch order. A test whose
        # definition line appears in both lists (moved or re-indented) is not new.
    # optional:
    def added_test_nodes(path: str, hunks: list[tuple[str, list[str]]]) -> list[DefInfo-like]
        # Like added_tests, with what the hunks show of the enclosing scope. `hunks` is
        # [(hunk header section text, hunk lines with their ' '/'+'/'-' markers)]. Each result has
        # `.name`, `.scope` (tuple of enclosing classes/describe blocks), `.certain` (the whole
        # scope is visible), `.siblings` (other test names of the same block, used to look the scope
        # up in a dataset's ids) and `.section`. `languages.python.DefInfo` is such a class. When
        # present, the patch module uses it instead of added_tests.
    def forbidden_for_source(path: str) -> str | None
        # Why a Repair *source* patch may not touch this file (runner config of this ecosystem),
        # beyond the common rules; None if it may.
    def test_support_path(path: str) -> bool
        # True for non-test-code files that a test patch may add/change in this language ecosystem
        # (snapshots, golden files, testdata/). The package already allows data files under test
        # directories; use this for anything else.

Files whose suffix no module claims (data, fixtures, snapshots) are judged by `is_test_data_path`:
allowed only under a test directory. When two modules claim a suffix (`.h`: c and cpp), the caller's
`language` (the task's) breaks the tie.
"""

from __future__ import annotations

import posixpath
from types import ModuleType

from execcritic.bundle.languages import c, cpp, go, java, javascript, php, python, ruby, rust
from execcritic.bundle.languages._common import TEST_DIR_NAMES, new_names, under_test_dir

# The language modules, listed (a new language is one module plus one entry here).
_MODULES: dict[str, ModuleType] = {m.LANGUAGE: m for m in (c, cpp, go, java, javascript, php, python, ruby, rust)}


def _load() -> dict[str, ModuleType]:
    return _MODULES


def languages() -> list[str]:
    return sorted(_load())


def module_for_language(language: str) -> ModuleType | None:
    return _load().get(language)


def _suffix(path: str) -> str:
    base = posixpath.basename(path).lower()
    dot = base.rfind(".")
    return base[dot:] if dot > 0 else ""


def module_for_path(path: str, language: str | None = None) -> ModuleType | None:
    """The language module that owns this file's suffix; `language` breaks ties (and wins if it owns
    the suffix). None for data files and unknown suffixes."""
    suffix = _suffix(path)
    if not suffix:
        return None
    mods = _load()
    if language and language in mods and suffix in getattr(mods[language], "EXTENSIONS", ()):
        return mods[language]
    owners = [m for m in mods.values() if suffix in getattr(m, "EXTENSIONS", ())]
    return owners[0] if owners else None


def is_test_data_path(path: str) -> bool:
    """A file no language module claims (data, fixture, snapshot): a test file only under a test dir."""
    return under_test_dir(path)


def is_test_path(path: str, language: str | None = None) -> bool:
    """May a *test* patch add or change this file? Code files ask their language module; other files
    are test data only under a test directory."""
    mod = module_for_path(path, language)
    if mod is not None:
        if mod.is_test_path(path):
            return True
        support = getattr(mod, "test_support_path", None)
        if support and support(path):
            return True
        # code in another language than the repository's (the Python fixtures a Rust linter's tests
        # read) is never run as the repository's source: it is test data, under a test directory
        foreign = language is not None and language in _load() and mod is not _load()[language]
        return foreign and is_test_data_path(path)
    for m in _load().values():
        support = getattr(m, "test_support_path", None)
        if support and support(path):
            return True
    return is_test_data_path(path)


def added_tests(
    path: str, added_lines: list[str], removed_lines: list[str], language: str | None = None
) -> list[str]:
    """Names of the tests one file's diff adds; [] for files no language module claims."""
    mod = module_for_path(path, language)
    if mod is None:
        return []
    return list(mod.added_tests(path, added_lines, removed_lines))


__all__ = [
    "TEST_DIR_NAMES",
    "added_tests",
    "is_test_data_path",
    "is_test_path",
    "languages",
    "module_for_language",
    "module_for_path",
    "new_names",
    "under_test_dir",
]
