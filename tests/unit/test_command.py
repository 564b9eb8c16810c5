"""`test_command` parsing: one line, one runner invocation; the two forms the paper uses are allowed."""

from __future__ import annotations

import pytest

from execcritic.bundle.command import parse_command


def codes(text: str) -> set[str]:
    return {p.code for p in parse_command(text).problems}


@pytest.mark.parametrize(
    "text",
    [
        "pytest -rA tests/test_x.py::test_a",
        "cd /testbed/tests && python runtests.py queries.tests.Queries1Tests.test_xor_with_multiple_identical_q -v 2",
        "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose sympy/core/tests/test_arit.py -k test_Mod",
        "pytest 'tests/test_markup.py::test_inline[verify-:kbd:`-`-<p><kbd]'",  # quoted backticks/brackets/<
        'pytest "tests/test_x.py::test_a[a|b]"',  # operators inside double quotes
        "cd tests && ./runtests.py --settings=test_sqlite basic.tests.ModelTest.test_x",
        "pytest -rA tests/test_x.py::test_a\n",  # one trailing newline is fine
    ],
)
def test_accepted(text):
    cmd = parse_command(text)
    assert cmd.ok, cmd.problems


@pytest.mark.parametrize(
    "text,code",
    [
        ("pytest tests/test_x.py::test_a || true", "command.chaining"),
        ("pytest tests/test_x.py::test_a; exit 0", "command.chaining"),
        ("pytest tests/test_x.py::test_a && echo ok", "command.chaining"),
        ("pytest $(cat nodes.txt)", "command.substitution"),
        ("pytest `cat nodes.txt`", "command.substitution"),
        ('pytest "$(cat nodes.txt)"', "command.substitution"),
        ("pytest $NODES", "command.expansion"),
        ("pytest tests/test_x.py::test_a > /dev/null", "command.redirection"),
        ("pytest tests/test_x.py::test_a < input", "command.redirection"),
        ("pytest tests/test_x.py::test_a | tee log", "command.pipe"),
        ("pytest tests/test_x.py::test_a &", "command.background"),
        ("(pytest tests/test_x.py::test_a)", "command.subshell"),
        ("pytest tests/test_x.py::test_a # comment", "command.comment"),
        ("pytest tests/test_x.py::test_a\npytest tests/test_y.py::test_b", "command.multiline"),
        ("", "command.empty"),
        ("   \n", "command.empty"),
        ("pytest 'tests/test_x.py::test_a", "command.unbalanced_quotes"),
        ("PYTEST_ADDOPTS=--co pytest tests/test_x.py::test_a", "command.forbidden_env"),
        ("PYTHONPATH=tests/fake pytest tests/test_x.py::test_a", "command.forbidden_env"),
        ("LD_PRELOAD=/tmp/x.so pytest tests/test_x.py::test_a", "command.forbidden_env"),
        ("bash -c 'pytest tests/test_x.py::test_a'", "command.wrapper"),
        ("env pytest tests/test_x.py::test_a", "command.wrapper"),
        ("true", "command.wrapper"),
        ("timeout 10 pytest tests/test_x.py::test_a", "command.wrapper"),
        ("FOO=1", "command.no_program"),
        ("cd /tmp && pytest tests/test_x.py::test_a", "command.cd"),
        ("cd ../.. && pytest tests/test_x.py::test_a", "command.cd"),
        ("cd ~ && pytest tests/test_x.py::test_a", "command.cd"),
        ("pytest " + "tests/test_x.py::test_a " * 400, "command.too_long"),
    ],
)
def test_rejected(text, code):
    assert code in codes(text)


def test_cd_and_env_are_parsed():
    cmd = parse_command("cd /testbed/tests && PYTHONWARNINGS='ignore' python runtests.py a.b.C.test_x")
    assert cmd.cd == "/testbed/tests" and cmd.cwd_in_repo() == "tests"
    assert cmd.env == (("PYTHONWARNINGS", "ignore"),)
    assert cmd.argv == ("python", "runtests.py", "a.b.C.test_x")


def test_render_round_trips():
    cmd = parse_command("cd tests && A='x y' pytest 'a.py::t[1 2]'")
    again = parse_command(cmd.render())
    assert again.ok and again.argv == cmd.argv and again.env == cmd.env and again.cd == cmd.cd


def test_every_problem_is_reported_once():
    cmd = parse_command("pytest a || true || false; exit 0")
    assert [p.code for p in cmd.problems].count("command.chaining") == 1
