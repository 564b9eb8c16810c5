"""Patch parsing and the two patch gates, on real SWE-bench Verified test patches and small diffs."""

from __future__ import annotations


import pytest

from tests.paths import VERIFIED, needs_rows

from execcritic.bundle import languages
from execcritic.bundle.added import added_tests
from execcritic.bundle.diff import parse_patch
from execcritic.bundle.gates import forbidden_for_source, is_test_path, source_patch_problems, test_patch_problems

DATA = VERIFIED


@pytest.fixture(scope="module")
def verified():
    from execcritic.tasks import load_tasks

    return load_tasks(str(DATA))


def diff(path: str, body: str = "+x = 1\n", header: str = "", old: str | None = None) -> str:
    old = path if old is None else old
    minus = "/dev/null" if old == "/dev/null" else f"a/{old}"
    n = sum(1 for ln in body.splitlines() if ln.startswith("+"))
    return f"diff --git a/{path} b/{path}\n{header}--- {minus}\n+++ b/{path}\n@@ -0,0 +1,{n} @@\n{body}"


def codes(problems) -> set[str]:
    return {p.code for p in problems}


# ---- parsing ---------------------------------------------------------------------------------------


@needs_rows
def test_every_verified_test_patch_parses_cleanly(verified):
    for task in verified:
        parsed = parse_patch(task.test_patch)
        assert parsed.files, task.instance_id
        assert not parsed.problems, (task.instance_id, parsed.problems)
        assert all(h.lines for f in parsed.files for h in f.hunks)


def test_parse_headers_modes_renames_and_binary():
    text = (
        "diff --git a/tests/old.py b/tests/new.py\nsimilarity index 90%\nrename from tests/old.py\n"
        "rename to tests/new.py\n"
        "diff --git a/tests/img.png b/tests/img.png\nnew file mode 100644\nindex 0000000..e69de29\n"
        "Binary files /dev/null and b/tests/img.png differ\n"
        "diff --git a/tests/run.sh b/tests/run.sh\nold mode 100644\nnew mode 100755\n"
    )
    files = parse_patch(text).files
    assert files[0].rename_from == "tests/old.py" and files[0].rename_to == "tests/new.py"
    assert files[1].binary and files[1].new_file
    assert (files[2].old_mode, files[2].new_mode) == ("100644", "100755")


def test_quoted_paths_and_plain_unified_diff():
    q = (
        'diff --git "a/tests/data/caf\\303\\251.txt" "b/tests/data/caf\\303\\251.txt"\n'
        '--- "a/tests/data/caf\\303\\251.txt"\n+++ "b/tests/data/caf\\303\\251.txt"\n@@ -1 +1 @@\n-a\n+b\n'
    )
    assert parse_patch(q).files[0].path == "tests/data/café.txt"
    plain = "--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1,1 +1,2 @@\n x = 1\n+y = 2\n"
    assert parse_patch(plain).paths == ["tests/test_x.py"]


def test_wrong_hunk_length_is_malformed():
    text = "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n"
    assert "patch.malformed" in codes(test_patch_problems(text))


# ---- test patch gate -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path,expected",
    [
        ("tests/test_x.py", True),
        ("sympy/core/tests/test_arit.py", True),
        ("testing/test_capture.py", True),
        ("testing/python/integration.py", True),
        ("tests/roots/test-ext/conf.py", True),
        ("astropy/io/fits/tests/data/test0.fits.txt", True),
        ("conftest.py", True),
        ("pkg/conftest.py", True),
        ("tests/unittest_lint.py", True),
        ("lib/matplotlib/tests/baseline_images/x.svg", True),
        ("tests/fixtures/data.json", True),
        ("src/test/resources/a.json", True),
        ("django/db/models/query.py", False),
        ("django/test/testcases.py", False),
        ("sympy/testing/runtests.py", False),
        ("sphinx/testing/util.py", False),
        ("setup.cfg", False),
        ("README.rst", False),
        ("requirements_test.txt", False),
        ("/etc/passwd", False),
        ("../x/tests/t.py", False),
    ],
)
def test_is_test_path(path, expected):
    assert is_test_path(path) is expected


@pytest.mark.parametrize(
    "text,code",
    [
        ("", "patch.empty"),
        ("hello, this is not a diff\n", "patch.not_a_diff"),
        (diff("django/db/models/query.py"), "patch.source_edit"),
        (diff("tests/test_x.py", header="deleted file mode 100644\n"), "patch.deletion"),
        (
            "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
            "patch.deletion",
        ),
        (
            "diff --git a/tests/a.py b/tests/b.py\nsimilarity index 100%\nrename from tests/a.py\nrename to tests/b.py\n",
            "patch.rename",
        ),
        (diff("../outside/tests/test_x.py"), "patch.path_traversal"),
        (
            "diff --git a//etc/cron.d/x b//etc/cron.d/x\n--- a//etc/cron.d/x\n+++ b//etc/cron.d/x\n@@ -0,0 +1 @@\n+x\n",
            "patch.absolute_path",
        ),
        (diff(".git/hooks/pre-commit"), "patch.git_dir"),
        (diff("tests/.git/config"), "patch.git_dir"),
        (
            "diff --git a/tests/x.png b/tests/x.png\nnew file mode 100644\nBinary files /dev/null and b/tests/x.png differ\n",
            "patch.binary",
        ),
        (
            "diff --git a/tests/x.bin b/tests/x.bin\nnew file mode 100644\nGIT binary patch\nliteral 3\nKcmZ?wfB*mh0RR91\n",
            "patch.binary",
        ),
        (diff("tests/link.py", header="new file mode 120000\n", old="/dev/null"), "patch.symlink"),
        ("diff --git a/tests/t.py b/tests/t.py\nold mode 100644\nnew mode 100755\n", "patch.mode_change"),
        (diff("tests/sitecustomize.py", old="/dev/null"), "patch.startup_hook"),
        (diff("tests/evil.pth", old="/dev/null"), "patch.startup_hook"),
        (diff("tests/pytest.py", old="/dev/null"), "patch.shadows_runner"),
        (diff("tests/_pytest/__init__.py", old="/dev/null"), "patch.shadows_runner"),
        (diff("tests/test_x.py") + diff("tests/test_x.py"), "patch.duplicate_path"),
    ],
)
def test_test_patch_rejections(text, code):
    assert code in codes(test_patch_problems(text))


def test_huge_patch_is_rejected_without_parsing():
    body = "".join(f"+line {i} {'x' * 80}\n" for i in range(3000))
    problems = test_patch_problems(diff("tests/test_big.py", body), max_bytes=200_000)
    assert codes(problems) == {"patch.too_large"}


@needs_rows
def test_real_patches_mostly_pass_the_gate(verified):
    """Every Verified test patch passes, except the documented classes (see results/oracle_validation)."""
    rejected = {
        t.instance_id: codes(test_patch_problems(t.test_patch, language=t.language)) for t in verified
    }
    rejected = {k: v for k, v in rejected.items() if v}
    assert rejected == {
        "astropy__astropy-7336": {"patch.rename"},
        "django__django-14011": {"patch.source_edit"},  # django/test/testcases.py
        "sphinx-doc__sphinx-7910": {"patch.source_edit"},  # sphinx/testing/util.py
        "sympy__sympy-20916": {"patch.source_edit"},  # sympy/testing/quality_unicode.py
    }


# ---- source patch gate (Repair candidates) ----------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "conftest.py",
        "sympy/conftest.py",
        "pytest.ini",
        "tox.ini",
        "sitecustomize.py",
        "lib/usercustomize.py",
        "site-packages/evil.pth",
        "bin/test",
        "sympy/testing/runtests.py",
        "sympy/utilities/runtests.py",
        "tests/runtests.py",
        "tests/test_sqlite.py",
        "tests/queries/tests.py",
        "sympy/core/tests/test_arit.py",
    ],
)
def test_forbidden_for_source(path):
    assert forbidden_for_source(path)


@pytest.mark.parametrize(
    "path",
    [
        "django/db/models/query.py",
        "sympy/core/mod.py",
        "django/test/testcases.py",
        "setup.py",
        "src/_pytest/python.py",
        "README.rst",
    ],
)
def test_allowed_for_source(path):
    assert forbidden_for_source(path) is None


SETUP_CFG = "[metadata]\nname = x\nversion = 1\n\n[tool:pytest]\naddopts = -ra\nnorecursedirs = build\n"


def _cfg_patch(old_line: int, removed: str, added: str, ctx_before: list[str]) -> str:
    body = "".join(f" {c}\n" for c in ctx_before) + f"-{removed}\n+{added}\n"
    n_old = len(ctx_before) + 1
    start = old_line - len(ctx_before)
    return (
        f"diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n"
        f"@@ -{start},{n_old} +{start},{n_old} @@\n{body}"
    )


def test_setup_cfg_sections_with_base_reader():
    read = {"setup.cfg": SETUP_CFG}.get
    meta = _cfg_patch(3, "version = 1", "version = 2", ["[metadata]", "name = x"])
    assert source_patch_problems(meta, read_base=read) == []
    runner = _cfg_patch(6, "addopts = -ra", "addopts = -ra -p evil", ["[tool:pytest]"])
    assert "patch.forbidden_path" in codes(source_patch_problems(runner, read_base=read))


def test_setup_cfg_without_base_fails_closed_unless_the_hunk_shows_the_section():
    meta = _cfg_patch(3, "version = 1", "version = 2", ["[metadata]", "name = x"])
    assert source_patch_problems(meta) == []  # section header visible in the hunk
    blind = _cfg_patch(7, "norecursedirs = build", "norecursedirs = x", [])
    assert "patch.forbidden_path" in codes(source_patch_problems(blind))


def test_pyproject_pytest_section_added_is_forbidden():
    text = (
        "diff --git a/pyproject.toml b/pyproject.toml\n--- a/pyproject.toml\n+++ b/pyproject.toml\n"
        "@@ -1,1 +1,3 @@\n [project]\n+[tool.pytest.ini_options]\n+addopts = '-p evil'\n"
    )
    assert "patch.forbidden_path" in codes(
        source_patch_problems(text, read_base={"pyproject.toml": "[project]\n"}.get)
    )


@needs_rows
def test_every_verified_gold_patch_is_an_acceptable_source_patch(verified):
    bad = {t.instance_id: codes(source_patch_problems(t.patch, repo=t.repo, language=t.language)) for t in verified}
    assert {k: v for k, v in bad.items() if v} == {}


@needs_rows
def test_every_verified_test_patch_is_a_forbidden_source_patch(verified):
    for t in verified:
        assert source_patch_problems(t.test_patch), t.instance_id


# ---- added tests ---------------------------------------------------------------------------------------


def test_added_tests_skip_pytester_sources_and_nested_functions():
    text = diff(
        "testing/test_x.py",
        (
            "+def test_real(testdir):\n"
            "+    testdir.makepyfile(\n"
            '+        """\n'
            "+        def test_in_string():\n"
            "+            pass\n"
            '+        """\n'
            "+    )\n"
            "+    def test_nested():\n"
            "+        pass\n"
            "+class TestK:\n"
            "+    def test_method(self):\n"
            "+        pass\n"
        ),
        old="/dev/null",
    )
    got = [(t.scope, t.name) for t in added_tests(text)]
    assert got == [((), "test_real"), (("TestK",), "test_method")]


def test_hunk_starting_inside_a_string_is_recognized():
    # pytest-dev__pytest-6202: the hunk begins in the middle of a makepyfile("""...""") string
    text = (
        "diff --git a/testing/test_c.py b/testing/test_c.py\n--- a/testing/test_c.py\n+++ b/testing/test_c.py\n"
        "@@ -693,5 +695,7 @@ def testmethod_one(self):\n"
        "                     pass\n"
        " \n"
        "             class TestY(TestX):\n"
        "-                pass\n"
        "+                def testmethod_two(self, arg0):\n"
        "+                    pass\n"
        '         """\n'
        "         )\n"
    )
    assert added_tests(text) == []


def test_moved_or_resigned_defs_are_not_new():
    text = (
        "diff --git a/tests/test_m.py b/tests/test_m.py\n--- a/tests/test_m.py\n+++ b/tests/test_m.py\n"
        "@@ -1,2 +1,2 @@\n-def test_a(x):\n+def test_a(x, y):\n     pass\n"
    )
    assert added_tests(text) == []


def test_method_added_without_visible_class_is_uncertain():
    text = (
        "diff --git a/tests/queries/tests.py b/tests/queries/tests.py\n--- a/tests/queries/tests.py\n"
        "+++ b/tests/queries/tests.py\n@@ -10,3 +10,6 @@ def test_old(self):\n"
        "         self.assertTrue(True)\n \n+    def test_new(self):\n+        pass\n+\n     def test_next(self):\n"
    )
    (t,) = added_tests(text)
    assert t.name == "test_new" and not t.scope_certain and set(t.hints) == {"test_old", "test_next"}


@needs_rows
def test_languages_dispatch_is_stable():
    assert "python" in languages.languages()
    assert languages.module_for_path("a/b.py").LANGUAGE == "python"
    assert languages.module_for_path("a/b.json") is None
    assert languages.is_test_path("tests/data/x.json") and not languages.is_test_path("data/x.json")
