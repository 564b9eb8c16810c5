"""The Python runners: selection, node parsing, binding, exact commands, and per-node results read from
real runner output (a real pytest run here; real Django 3.2-4.2 / unittest / SymPy 1.14 logs in
tests/data/logs)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.paths import VERIFIED, needs_rows

from execcritic.bundle.command import parse_command
from execcritic.bundle.nodes import Outcome
from execcritic.runners.registry import get_runner, runner_for_command

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
DATA = VERIFIED

pytest_runner = get_runner("pytest")
django = get_runner("django")
sympy = get_runner("sympy")
unittest_runner = get_runner("unittest")


def levels(runner, text):
    sel = runner.selection(parse_command(text))
    return [(s.text, s.level) for s in sel.selectors], [p.code for p in sel.problems]


# ---- which runner owns a command ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,name",
    [
        ("pytest -rA tests/t.py::test_a", "pytest"),
        ("python -m pytest tests/t.py::test_a", "pytest"),
        ("python3.9 -X dev -m pytest tests/t.py::test_a", "pytest"),
        ("tox --current-env -epy39 -v -- tests/t.py::test_a", "pytest"),
        ("./tests/runtests.py --verbosity 2 a.tests.C.test_x", "django"),
        ("cd /testbed/tests && python runtests.py a.tests.C.test_x -v 2", "django"),
        ("python tests/runtests.py a.tests.C.test_x", "django"),
        ("bin/test sympy/core/tests/test_arit.py -k test_Mod", "sympy"),
        ("python bin/test sympy/core/tests/test_arit.py -k test_Mod", "sympy"),
        ("cd bin && ./test sympy/core/tests/test_arit.py -k test_Mod", "sympy"),
        ("python -m unittest tests.test_x.C.test_a", "unittest"),
    ],
)
def test_runner_for_command(text, name):
    runner = runner_for_command(parse_command(text))
    assert runner is not None and runner.name == name


@pytest.mark.parametrize(
    "text",
    ["python -c 'import sys; sys.exit(0)'", "python tests/t.py", "tox -e py39", "runtests.py a.b.C.test_x"],
)
def test_unrecognized(text):
    assert runner_for_command(parse_command(text)) is None


# ---- pytest selection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("pytest tests/t.py::test_a", [("tests/t.py::test_a", "node")]),
        ("pytest 'tests/t.py::TestK::test_a[x-1]'", [("tests/t.py::TestK::test_a[x-1]", "node")]),
        ("pytest tests/t.py::TestK", [("tests/t.py::TestK", "class")]),
        ("pytest tests/t.py", [("tests/t.py", "file")]),
        ("pytest tests/", [("tests/", "directory")]),
        ("pytest .", [(".", "suite")]),
        ("pytest -rA", [("(no test arguments)", "suite")]),
        ("pytest 'tests/test_*.py'", [("tests/test_*.py", "pattern")]),
        ("pytest tests/t.py -k test_a", [("tests/t.py", "file"), ("-k test_a", "pattern")]),
        ("pytest tests/t.py::test_a -k 'not slow'", [("tests/t.py::test_a", "node")]),  # -k only narrows
        ("pytest -m slow tests/t.py::test_a", [("tests/t.py::test_a", "node")]),
        ("pytest --deselect tests/t.py::test_b tests/t.py::test_a", [("tests/t.py::test_a", "node")]),
        (
            "pytest -o console_output_style=classic --tb=no -vv tests/t.py::test_a",
            [("tests/t.py::test_a", "node")],
        ),
        ("tox --current-env -epy39 -v -- tests/t.py::test_a", [("tests/t.py::test_a", "node")]),
        ("pytest -p no:cacheprovider tests/t.py::test_a", [("tests/t.py::test_a", "node")]),
    ],
)
def test_pytest_selection(text, expected):
    got, problems = levels(pytest_runner, text)
    assert got == expected and problems == []


@pytest.mark.parametrize(
    "text,code",
    [
        ("pytest --co tests/t.py::test_a", "runner.runs_nothing"),
        ("pytest --collect-only tests/t.py::test_a", "runner.runs_nothing"),
        ("pytest --setup-only tests/t.py::test_a", "runner.runs_nothing"),
        ("pytest --fixtures tests/t.py::test_a", "runner.runs_nothing"),
        ("pytest --lf tests/t.py::test_a", "runner.state_dependent"),
        ("pytest --sw tests/t.py::test_a", "runner.state_dependent"),
        ("pytest -p evil_plugin tests/t.py::test_a", "runner.config_override"),
        ("pytest -c other.ini tests/t.py::test_a", "runner.config_override"),
        ("pytest --rootdir=/ tests/t.py::test_a", "runner.config_override"),
        ("pytest -o python_functions=check_* tests/t.py::test_a", "runner.config_override"),
        ("pytest -o addopts=--co tests/t.py::test_a", "runner.config_override"),
        ("pytest --pyargs pkg.tests.test_x", "runner.pyargs"),
        ("pytest --basetemp=. tests/t.py::test_a", "runner.basetemp"),
        ("pytest --pdb tests/t.py::test_a", "runner.interactive"),
        ("tox -- tests/t.py::test_a", "runner.bad_option"),
    ],
)
def test_pytest_rejected_options(text, code):
    _got, problems = levels(pytest_runner, text)
    assert code in problems


def test_pytest_cd_makes_paths_repository_relative():
    sel = pytest_runner.selection(parse_command("cd /testbed/lib && pytest matplotlib/tests/t.py::test_a"))
    assert sel.nodes[0].path == "lib/matplotlib/tests/t.py"


@pytest.mark.parametrize(
    "text,name,path,scope,param",
    [
        ("tests/t.py::test_a", "test_a", "tests/t.py", (), None),
        ("tests/t.py::TestK::TestInner::test_a[1-2]", "test_a", "tests/t.py", ("TestK", "TestInner"), "1-2"),
        ("test_a", "test_a", None, (), None),
        ("TestK::test_a", "test_a", None, ("TestK",), None),
        ("TestK.test_a", "test_a", None, ("TestK",), None),
        (
            "tests/test_markup.py::test_inline[verify-:kbd:`-`-<p><kbd",
            "test_inline",
            "tests/test_markup.py",
            (),
            "verify-:kbd:`-`-<p><kbd",
        ),
        ("tests/t.py::test_p[a::b]", "test_p", "tests/t.py", (), "a::b"),
    ],
)
def test_pytest_parse_node(text, name, path, scope, param):
    n = pytest_runner.parse_node(text)
    assert (n.name, n.path, n.scope, n.param) == (name, path, scope, param)


def test_pytest_binding_rules():
    sel = pytest_runner.parse_node
    assert pytest_runner.binds(sel("tests/t.py::TestK::test_a"), sel("test_a"))
    assert pytest_runner.binds(sel("tests/t.py::TestK::test_a"), sel("TestK::test_a"))
    assert not pytest_runner.binds(sel("tests/t.py::test_a"), sel("TestK::test_a"))  # module-level != method
    assert pytest_runner.binds(
        sel("tests/t.py::test_a"), sel("tests/t.py::test_a[1]")
    )  # function binds params
    assert not pytest_runner.binds(sel("tests/t.py::test_a[2]"), sel("tests/t.py::test_a[1]"))
    assert not pytest_runner.binds(
        sel("tests/t.py::test_a[1]"), sel("tests/t.py::test_a")
    )  # one param != all
    assert pytest_runner.binds(sel("tests/t.py::test_a[a b c]"), sel("tests/t.py::test_a[a"))  # truncated id
    assert not pytest_runner.binds(sel("other/t.py::test_a"), sel("tests/t.py::test_a"))
    assert pytest_runner.binds(sel("tests/t.py::test_a"), sel("t.py::test_a"))  # relative to tests/


def test_pytest_expected_failure_lines_keep_their_reason_out_of_the_id():
    """`-rA` writes `XFAIL <id> - <reason>`; the reason is not part of the id, but an ` - ` inside a
    parameter id is."""
    log = ("XFAIL tests/t.py::test_known - known bug\n"
           "XFAIL tests/t.py::test_p[a - b] - why\n"
           "PASSED tests/t.py::test_q[c - d]\n")
    results = pytest_runner.parse_results(log)
    sel = pytest_runner.parse_node
    assert pytest_runner.result_for(sel("tests/t.py::test_known"), results) == "XFAIL"
    assert pytest_runner.result_for(sel("test_known"), results) == "XFAIL"
    assert pytest_runner.result_for(sel("tests/t.py::test_p[a - b]"), results) == "XFAIL"
    assert pytest_runner.result_for(sel("tests/t.py::test_q[c - d]"), results) == "PASSED"
    assert pytest_runner.result_for(sel("tests/t.py::test_p[a]"), results) is None


def test_pytest_build_command_round_trips_and_drops_truncated_params():
    nodes = [
        pytest_runner.parse_node(t)
        for t in (
            "tests/test_markup.py::test_inline[verify-:kbd:`Alt+^`-<p><kbd",
            "tests/test_markup.py::test_inline[verify-:kbd:`-`-<p><kbd",
            "tests/t.py::TestK::test_b[x y]",
        )
    ]
    cmd = pytest_runner.build_command(nodes)
    assert cmd == "pytest -rA tests/test_markup.py::test_inline 'tests/t.py::TestK::test_b[x y]'"
    parsed = parse_command(cmd)
    assert parsed.ok
    sel = pytest_runner.selection(parsed)
    assert not sel.broad and not sel.problems
    for n in nodes:
        assert any(pytest_runner.binds(s, n) for s in sel.nodes)


def test_pytest_observed_command_adds_rA_without_changing_selection():
    for text in (
        "pytest tests/t.py::test_a",
        "python -m pytest -q tests/t.py::test_a",
        "tox --current-env -epy39 -v -- tests/t.py::test_a",
    ):
        cmd = parse_command(text)
        obs = pytest_runner.observed_command(cmd)
        assert "-rA" in obs.argv
        assert [s.text for s in pytest_runner.selection(obs).selectors] == [
            s.text for s in pytest_runner.selection(cmd).selectors
        ]
    same = parse_command("pytest -rA tests/t.py::test_a")
    assert pytest_runner.observed_command(same) == same


# ---- a real pytest run ---------------------------------------------------------------------------

REAL_TESTS = textwrap.dedent("""
    import pytest

    def test_pass():
        assert 1 + 1 == 2

    def test_fail():
        assert 1 + 1 == 3

    def _recurse(n):
        return _recurse(n + 1)

    def test_recursion():
        _recurse(0)

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture setup failed")

    def test_setup_error(broken):
        pass

    @pytest.mark.parametrize("v", ["a b", "c[d]"])
    def test_param(v):
        assert v != "c[d]"

    class TestK:
        def test_method(self):
            pass

    @pytest.mark.skip(reason="not here")
    def test_skipped():
        pass
""")


def _run_pytest(root: Path, nodes) -> tuple[str, int]:
    cmd = pytest_runner.observed_command(parse_command(pytest_runner.build_command(nodes)))
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *cmd.argv[1:]]
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr, proc.returncode


@pytest.fixture(scope="module")
def real_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    (root / "tests").mkdir()
    (root / "tests" / "test_real.py").write_text(REAL_TESTS)
    (root / "tests" / "test_broken.py").write_text(
        "import not_a_module_anywhere\n\ndef test_x():\n    pass\n"
    )
    return root


@pytest.fixture(scope="module")
def real_pytest_run(real_repo):
    nodes = [
        pytest_runner.parse_node(f"tests/test_real.py::{n}")
        for n in (
            "test_pass",
            "test_fail",
            "test_recursion",
            "test_setup_error",
            "test_param",
            "TestK::test_method",
            "test_skipped",
        )
    ]
    log, rc = _run_pytest(real_repo, nodes)
    return nodes, log, rc


@pytest.mark.parametrize("parser", [None, "parse_log_pytest", "parse_log_pytest_options"])
def test_real_pytest_results(real_pytest_run, parser):
    nodes, log, rc = real_pytest_run
    assert rc == 1
    results = pytest_runner.parse_results(log, parser)
    status = {str(n): pytest_runner.result_for(n, results) for n in nodes}
    assert status["tests/test_real.py::test_pass"] == "PASSED"
    assert status["tests/test_real.py::test_fail"] == "FAILED"
    assert status["tests/test_real.py::test_recursion"] == "FAILED"  # an exception in the body
    assert status["tests/test_real.py::test_setup_error"] == "ERROR"  # fixture error: not the body
    assert status["tests/test_real.py::test_param"] == "FAILED"  # aggregated over params
    assert status["tests/test_real.py::TestK::test_method"] == "PASSED"
    assert status["tests/test_real.py::test_skipped"] is None  # `-rA` names skips by line
    assert pytest_runner.outcome("ERROR") is Outcome.ERRORED
    assert pytest_runner.outcome("FAILED") is Outcome.FAILED
    assert pytest_runner.load_errors(results, log) == []
    one = pytest_runner.parse_node("tests/test_real.py::test_param[a b]")  # also under truncating parsers
    assert pytest_runner.result_for(one, results) == "PASSED"


def test_real_pytest_collection_error_runs_nothing(real_repo):
    nodes = [
        pytest_runner.parse_node("tests/test_real.py::test_pass"),
        pytest_runner.parse_node("tests/test_broken.py::test_x"),
    ]
    log, rc = _run_pytest(real_repo, nodes)
    assert rc != 0 and rc != 1  # a usage/collection error, not a test failure
    results = pytest_runner.parse_results(log)
    assert pytest_runner.result_for(nodes[1], results) is None
    assert any("tests/test_broken.py" in e for e in pytest_runner.load_errors(results, log))


# ---- Django ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 queries.tests.Queries1Tests.test_x",
            [("queries.tests.Queries1Tests.test_x", "node")],
        ),
        ("./tests/runtests.py queries.tests.Queries1Tests", [("queries.tests.Queries1Tests", "class")]),
        ("./tests/runtests.py queries.tests", [("queries.tests", "file")]),
        ("./tests/runtests.py utils_tests.test_html", [("utils_tests.test_html", "file")]),  # test_* module
        ("./tests/runtests.py queries", [("queries", "directory")]),
        ("./tests/runtests.py queries/", [("queries/", "directory")]),
        ("./tests/runtests.py --settings=test_sqlite", [("(no labels)", "suite")]),
        (
            "./tests/runtests.py queries.tests -k test_x",
            [("queries.tests", "file"), ("-k test_x", "pattern")],
        ),
        ("./tests/runtests.py -k test_x queries.tests.Q.test_x", [("queries.tests.Q.test_x", "node")]),
        (
            "cd /testbed/tests && python runtests.py queries.tests.Q.test_x -v 2",
            [("queries.tests.Q.test_x", "node")],
        ),
    ],
)
def test_django_selection(text, expected):
    got, problems = levels(django, text)
    assert got == expected and problems == []


@pytest.mark.parametrize(
    "text,code",
    [
        ("./tests/runtests.py --bisect queries.tests.Q.test_x", "runner.forbidden_option"),
        ("./tests/runtests.py --pair queries.tests.Q.test_x", "runner.forbidden_option"),
        ("./tests/runtests.py --pdb queries.tests.Q.test_x", "runner.forbidden_option"),
        ("./tests/runtests.py --frobnicate queries.tests.Q.test_x", "runner.unknown_option"),
        ("./tests/runtests.py --settings=../evil queries.tests.Q.test_x", "runner.bad_option"),
    ],
)
def test_django_rejected_options(text, code):
    _got, problems = levels(django, text)
    assert code in problems


@pytest.mark.parametrize(
    "text,path,scope,name",
    [
        ("test_x (queries.tests.Queries1Tests)", "queries.tests", ("Queries1Tests",), "test_x"),
        ("test_x (queries.tests.Queries1Tests.test_x)", "queries.tests", ("Queries1Tests",), "test_x"),
        ("queries.tests.Queries1Tests.test_x", "queries.tests", ("Queries1Tests",), "test_x"),
        ("Queries1Tests.test_x", None, ("Queries1Tests",), "test_x"),
        ("test_x", None, (), "test_x"),
        ("tests/queries/tests.py::Queries1Tests::test_x", "queries.tests", ("Queries1Tests",), "test_x"),
    ],
)
def test_django_parse_node(text, path, scope, name):
    n = django.parse_node(text)
    assert (n.path, n.scope, n.name) == (path, scope, name)


def test_django_docstring_name_binds_nothing():
    doc = django.parse_node("Named URLs should be reversible")
    sel = django.selection(
        parse_command("./tests/runtests.py auth_tests.test_views.AuthViewNamedURLTests.test_named_urls")
    )
    assert not any(django.binds(s, doc) for s in sel.nodes)


def test_django_build_and_observe():
    nodes = [django.parse_node("test_x (queries.tests.Q)"), django.parse_node("test_y (a.tests.B.test_y)")]
    cmd = django.build_command(nodes)
    assert (
        cmd
        == "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 queries.tests.Q.test_x a.tests.B.test_y"
    )
    obs = django.observed_command(parse_command("./tests/runtests.py -v 0 queries.tests.Q.test_x"))
    assert obs.argv == ("./tests/runtests.py", "--verbosity", "2", "queries.tests.Q.test_x")
    with pytest.raises(ValueError):
        django.build_command([django.parse_node("test_x")])


def test_django_real_log_results():
    """tests/data/logs/django42_runtests_verbosity2.txt: a real run of Django 4.2's runtests.py (see README)."""
    log = (LOGS / "django42_runtests_verbosity2.txt").read_text()
    results = django.parse_results(log)
    docstring_test = django.parse_node(
        "test_fixture_dirs_with_default_fixture_path (fixtures_regress.tests.TestFixtures)"
    )
    assert django.result_for(docstring_test, results) == "PASSED"  # printed under its docstring
    assert (
        django.result_for(django.parse_node("xor_lookups.tests.XorLookupsTests.test_filter"), results)
        == "PASSED"
    )
    missing = django.parse_node("test_nope (xor_lookups.tests.XorLookupsTests)")
    assert django.result_for(missing, results) is None  # a load error, not a result
    assert django.result_for(django.parse_node("test_nope"), results) is None
    assert any("_FailedTest" in e for e in django.load_errors(results, log))
    assert django.outcome("ERROR") is Outcome.FAILED  # exception in the test body


def _classify(runner, declared, log_name, exit_code):
    from execcritic.harness.classify import classify
    from execcritic.sandbox.base import CommandResult

    log = (LOGS / log_name).read_text()
    nodes = [runner.parse_node(n) for n in declared]
    return classify(runner, nodes, CommandResult(exit_code, log, False, False, 1.0))


def test_django_py311_subtests_real_log():
    """django__django-16642 on Base (Django 4.2b1, Python 3.11): the test prints `(module.Class.test_x)` ids,
    two subtests fail and the test itself prints no status: the declared node FAILED behaviorally."""
    log = (LOGS / "django42b1_py311_subtests_base.txt").read_text()
    results = django.parse_results(log)
    node = django.parse_node("test_compressed_response (responses.test_fileresponse.FileResponseTests)")
    sub = (
        "test_compressed_response (responses.test_fileresponse.FileResponseTests.test_compressed_response)"
        " (ext='.tar.Z')"
    )
    assert results[sub] == "FAILED"
    assert django.result_for(node, results) == "FAILED"
    assert (
        django.result_for(django.parse_node("responses.test_fileresponse.FileResponseTests.test_x"), results)
        is None
    )
    c = _classify(django, [node.text], "django42b1_py311_subtests_base.txt", 1)
    assert c.valid and c.verdict.value == "FAIL" and c.failure_kind.value == "behavioral_failure"
    gold = _classify(django, [node.text], "django42b1_py311_subtests_gold.txt", 0)
    assert gold.valid and gold.verdict.value == "PASS"
    # the Python >= 3.11 id form binds too
    assert (
        django.result_for(
            django.parse_node(
                "test_compressed_response (responses.test_fileresponse.FileResponseTests.test_compressed_response)"
            ),
            results,
        )
        == "FAILED"
    )


def test_django_shared_docstring_real_log():
    """django__django-15987 on Base (Django 4.1): two tests print the same docstring line; SWE-bench's map
    keeps one status for both (the last, `ok`), the per-node results come from the real ids."""
    log = (LOGS / "django41_py39_shared_docstring_base.txt").read_text()
    results = django.parse_results(log)
    assert (
        results["settings.FIXTURE_DIRS cannot contain a default fixtures directory"] == "PASSED"
    )  # collapsed
    pathlib_test = (
        "test_fixture_dirs_with_default_fixture_path_as_pathlib (fixtures_regress.tests.TestFixtures)"
    )
    str_test = "test_fixture_dirs_with_default_fixture_path (fixtures_regress.tests.TestFixtures)"
    assert django.result_for(django.parse_node(pathlib_test), results) == "FAILED"
    assert django.result_for(django.parse_node(str_test), results) == "PASSED"
    c = _classify(django, [pathlib_test, str_test], "django41_py39_shared_docstring_base.txt", 1)
    assert c.valid and c.verdict.value == "FAIL"
    assert [n.status for n in c.nodes] == ["FAILED", "PASSED"]


def test_django_skipped_declared_node_stays_invalid():
    """django__django-14007 on Base (Django 3.2a1, SQLite): the added `test_auto_field_subclass_bulk_create`
    is skipped (`can_return_rows_from_bulk_insert`); a declared node that did not run gives no verdict,
    even though the other declared node failed."""
    declared = [
        "test_auto_field_subclass_create (custom_pk.tests.CustomPKTests)",
        "test_auto_field_subclass_bulk_create (custom_pk.tests.CustomPKTests)",
    ]
    c = _classify(django, declared, "django32a1_py38_skipped_node_base.txt", 1)
    assert not c.valid and c.verdict is None and c.failure_kind.value == "node_not_run"
    assert [n.status for n in c.nodes] == ["FAILED", "SKIPPED"]


def test_django_runner_crash_before_any_test_is_no_results():
    """django__django-15525, the F2P node alone (Django 4.0.3): the runner dies in database setup."""
    c = _classify(
        django,
        ["test_natural_key_dependencies (fixtures_regress.tests.NaturalKeyFixtureOnOtherDatabaseTests)"],
        "django403_py39_other_database_only_base.txt",
        1,
    )
    assert not c.valid and c.failure_kind.value == "no_results"


def test_verbose_results_line_forms():
    from execcritic.runners.django import verbose_results

    log = (
        "test_a (app.tests.C) ... ok\n"
        "test_b (app.tests.C) ... printed by the test\n"
        "more output\n"
        "ok\n"
        "test_c (app.tests.C.test_c)\n"
        "Shared doc line. ... skipped 'no db'\n"
        "test_d (app.tests.C) ... expected failure\n"
        "test_e (app.tests.C) ... unexpected success\n"
        "test_f (app.tests.C) ... \n"
        "  test_f (app.tests.C.test_f) [msg] (i=1) ... ERROR\n"
        "test_g (app.tests.C) ... ERROR\n"
        "\n"
        "ERROR: test_g (app.tests.C)\n"
        "FAIL: test_h (app.tests.C) (i=2)\n"
    )
    got = verbose_results(log)
    assert got == {
        "test_a (app.tests.C)": "PASSED",
        "test_b (app.tests.C)": "PASSED",
        "test_c (app.tests.C.test_c)": "SKIPPED",
        "test_d (app.tests.C)": "XFAIL",
        "test_e (app.tests.C)": "FAILED",
        "test_f (app.tests.C.test_f) [msg] (i=1)": "ERROR",
        "test_g (app.tests.C)": "ERROR",
        "test_h (app.tests.C) (i=2)": "FAILED",
    }
    results = django.parse_results(log)
    assert django.result_for(django.parse_node("app.tests.C.test_f"), results) == "ERROR"
    assert django.result_for(django.parse_node("app.tests.C.test_h"), results) == "FAILED"
    assert django.result_for(django.parse_node("app.tests.C.test_c"), results) == "SKIPPED"


# ---- SymPy -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            "bin/test -C --verbose sympy/core/tests/test_arit.py -k test_Mod test_Mul",
            [("test_Mod", "node"), ("test_Mul", "node")],
        ),
        ("bin/test sympy/core/tests/test_arit.py", [("sympy/core/tests/test_arit.py", "file")]),
        ("bin/test sympy/core", [("sympy/core", "directory")]),
        ("bin/test test_arit.py -k test_Mod", [("test_arit.py", "pattern"), ("test_Mod", "node")]),
        ("bin/test sympy/core/tests/test_arit.py -k Mod", [("Mod", "pattern")]),
        ("bin/test -k test_Mod", [("(no paths)", "suite"), ("test_Mod", "node")]),
        ("bin/test", [("(no arguments)", "suite")]),
        (
            "bin/test 'sympy/core/tests/test_*.py' -k test_Mod",
            [("sympy/core/tests/test_*.py", "pattern"), ("test_Mod", "node")],
        ),
        (
            "bin/test sympy/core/tests/test_arit.py::test_Mod",
            [("sympy/core/tests/test_arit.py::test_Mod", "unknown")],
        ),
    ],
)
def test_sympy_selection(text, expected):
    got, problems = levels(sympy, text)
    assert got == expected and problems == []


def test_sympy_rejected_options():
    assert "runner.forbidden_option" in levels(sympy, "bin/test --split 1/2 a/tests/test_b.py -k test_x")[1]
    assert "runner.unknown_option" in levels(sympy, "bin/test --lf a/tests/test_b.py -k test_x")[1]


def test_sympy_overmatch_is_substring_and_case_insensitive():
    cmd = parse_command("bin/test sympy/core/tests/test_arit.py -k test_Mod")
    known = {"sympy/core/tests/test_arit.py": {"test_Mod", "test_Mod_Pow", "test_mod_pow", "test_Mul"}}
    assert sympy.overmatches(cmd, known) == {"test_Mod": ["test_Mod_Pow", "test_mod_pow"]}


def test_sympy_real_log_confirms_substring_semantics():
    """tests/data/logs/sympy114_runtests_k_test_Mod.txt: `-k test_Mod` on test_arit.py really ran five
    tests, `test_mod_pow` (other case) and the last one (printed next to `[OK]`) included."""
    log = (LOGS / "sympy114_runtests_k_test_Mod.txt").read_text()
    results = sympy.parse_results(log)
    assert set(results) == {
        "test_mod_pow",
        "test_Mod",
        "test_Mod_Pow",
        "test_Mod_is_integer",
        "test_Mod_is_nonposneg",
    }
    assert sympy.result_for(sympy.parse_node("test_Mod_is_nonposneg"), results) == "PASSED"


def test_sympy_failure_statuses():
    # bin/test's verbose reporter format (sympy/testing/runtests.py: entering_test, test_fail, test_exception)
    log = (
        "sympy/core/tests/test_x.py[3] \ntest_a ok\ntest_b F\ntest_c E                       [FAIL]\n\n"
        "________________________________ sympy/core/tests/test_x.py:test_b ________________________________\n"
    )
    results = sympy.parse_results(log)
    assert results["test_a"] == "PASSED" and results["test_b"] == "FAILED" and results["test_c"] == "ERROR"
    assert sympy.outcome("ERROR") is Outcome.FAILED
    assert sympy.load_errors(
        {}, "sympy/core/tests/test_y.py[?]   Failed to import                [FAIL]"
    ) == ["failed to import sympy/core/tests/test_y.py"]


def test_sympy_build_and_observe():
    nodes = [
        sympy.parse_node("sympy/core/tests/test_arit.py::test_Mod"),
        sympy.parse_node("sympy/core/tests/test_arit.py:test_Mul"),
    ]
    cmd = sympy.build_command(nodes)
    assert cmd == (
        "PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning bin/test -C --verbose "
        "sympy/core/tests/test_arit.py -k test_Mod test_Mul"
    )
    sel = sympy.selection(parse_command(cmd))
    assert not sel.broad and [s.text for s in sel.selectors] == ["test_Mod", "test_Mul"]
    obs = sympy.observed_command(parse_command("bin/test a/tests/test_b.py -k test_x"))
    assert obs.argv[:2] == ("bin/test", "--verbose")
    with pytest.raises(ValueError):
        sympy.build_command([sympy.parse_node("test_Mod")])


@pytest.mark.slow
def test_sympy_real_run_substring_semantics(tmp_path):
    """Run SymPy's own runner (sympy.testing.runtests.test, what bin/test calls) on its test_arit.py."""
    pytest.importorskip("sympy")
    script = (
        "import sys\nfrom sympy.testing.runtests import test\n"
        "sys.exit(0 if test('sympy/core/tests/test_arit.py', kw=['test_Mod'], verbose=True, colors=False, "
        "subprocess=False) else 1)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    results = sympy.parse_results(proc.stdout)
    assert {"test_Mod", "test_Mod_Pow", "test_mod_pow"} <= set(results)


# ---- unittest -------------------------------------------------------------------------------------


def test_unittest_selection_and_build():
    got, problems = levels(unittest_runner, "python -m unittest -v tests.test_x.TestK.test_a")
    assert got == [("tests.test_x.TestK.test_a", "node")] and problems == []
    assert levels(unittest_runner, "python -m unittest tests.test_x.TestK")[0][0][1] == "class"
    assert levels(unittest_runner, "python -m unittest tests.test_x")[0][0][1] == "file"
    assert levels(unittest_runner, "python -m unittest discover -s tests")[0][0][1] == "suite"
    assert levels(unittest_runner, "python -m unittest")[0][0][1] == "suite"
    node = unittest_runner.parse_node("test_a (tests.test_x.TestK)")
    cmd = unittest_runner.build_command([node])
    assert cmd == "python -m unittest -v tests.test_x.TestK.test_a"
    assert unittest_runner.outcome("ERROR") is Outcome.FAILED


def test_unittest_real_run(tmp_path):
    (tmp_path / "test_u.py").write_text(
        textwrap.dedent('''
        import unittest
        class TestK(unittest.TestCase):
            def test_ok(self):
                pass
            def test_boom(self):
                """Raises in the body."""
                raise RecursionError("deep")
    ''')
    )
    nodes = [
        unittest_runner.parse_node("test_u.TestK.test_ok"),
        unittest_runner.parse_node("test_u.TestK.test_boom"),
    ]
    cmd = parse_command(unittest_runner.build_command(nodes))
    proc = subprocess.run(
        [sys.executable, *cmd.argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    results = unittest_runner.parse_results(proc.stdout + proc.stderr)
    assert unittest_runner.result_for(nodes[0], results) == "PASSED"
    assert unittest_runner.result_for(nodes[1], results) == "ERROR"
    assert unittest_runner.outcome("ERROR") is Outcome.FAILED


@pytest.mark.parametrize("log_name", ["unittest_py38_subtests.txt", "unittest_py311_subtests.txt"])
def test_unittest_subtests_real_logs(log_name):
    """Real `python -m unittest -v` output (CPython 3.8 and 3.11, see README): a failing subtest fails its
    test; two tests share a docstring line (SWE-bench's map keys them by it)."""
    log = (LOGS / log_name).read_text()
    results = unittest_runner.parse_results(log)
    get = lambda label: unittest_runner.result_for(unittest_runner.parse_node(label), results)
    assert get("test_sub.SubTests.test_params") == "FAILED"
    assert get("test_sub.SubTests.test_plain") == "FAILED"
    assert get("test_sub.SubTests.test_ok") == "PASSED"
    assert get("test_sub.SubTests.test_absent") is None
    nodes = ["test_sub.SubTests.test_params", "test_sub.SubTests.test_plain", "test_sub.SubTests.test_ok"]
    c = _classify(unittest_runner, nodes, log_name, 1)
    assert c.valid and c.verdict.value == "FAIL"
    c = _classify(unittest_runner, ["test_sub.SubTests.test_ok"], log_name, 1)
    assert not c.valid and c.failure_kind.value == "inconsistent_exit"  # the others failed: exit 1


# ---- serves: every Verified row has its runner ------------------------------------------------------


@needs_rows
def test_every_verified_task_has_a_python_runner():
    from execcritic.runners.registry import runner_for_task
    from execcritic.tasks import load_tasks

    names = {runner_for_task(t).name for t in load_tasks(str(DATA))}
    assert names == {"pytest", "django", "sympy"}


def test_tox_hands_the_reporter_variables_to_pytest_only():
    """tox makes pytest's environment from its config: the reporter's variables go in as `[testenv]` overrides,
    and tox's own interpreter (no PYTHONPATH of the reporter) starts no second reporter on the channel.
    Measured for real on sphinx-doc__sphinx-7440/7454 (qualified at their base commits, tox 4.16)."""
    import shlex

    from execcritic.harness.instrument import instrumented_command

    argv = shlex.split(instrumented_command(pytest_runner, parse_command("tox --current-env -epy39 -v -- t.py::test_a"), 7))
    assert argv[0] == "tox" and argv[argv.index("--"):] == ["--", "t.py::test_a"]
    assert {"testenv.set_env+=PYTHONPATH=/.execcritic/reporter", "testenv.set_env+=PYTHONHASHSEED=7",
            "testenv.pass_env+=EXECCRITIC_REPORT"} <= set(argv)
    plain = shlex.split(instrumented_command(pytest_runner, parse_command("pytest t.py::test_a"), 7))
    assert plain[:2] == ["PYTHONPATH=/.execcritic/reporter${PYTHONPATH:+:$PYTHONPATH}", "PYTHONHASHSEED=7"]
