"""The runner registry: one visible list, in the order commands are matched.

`runner_for_command` asks each runner in this order whether it owns a command; the first wins (the
order is alphabetical by module and no two runners recognize the same program).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.runners.ant import AntRunner
from execcritic.runners.automake import AutomakeRunner
from execcritic.runners.base import Runner
from execcritic.runners.cargo import CargoRunner
from execcritic.runners.ctest import CTestRunner
from execcritic.runners.cucumber import CucumberRunner
from execcritic.runners.django import DjangoRunner
from execcritic.runners.doctest import DoctestRunner
from execcritic.runners.googletest import GoogleTestRunner
from execcritic.runners.gotest import GoTestRunner
from execcritic.runners.gradle import GradleRunner
from execcritic.runners.jest import JestRunner
from execcritic.runners.karma import KarmaRunner
from execcritic.runners.maven import MavenRunner
from execcritic.runners.micropython import MicroPythonRunner
from execcritic.runners.minitest import RubyUnitRunner
from execcritic.runners.mocha import MochaRunner
from execcritic.runners.phpunit import PhpUnitRunner
from execcritic.runners.pytest import PytestRunner
from execcritic.runners.qunit import QUnitRunner
from execcritic.runners.redis import RedisRunner
from execcritic.runners.rspec import RSpecRunner
from execcritic.runners.sympy import SympyRunner
from execcritic.runners.unittest import UnittestRunner
from execcritic.runners.vitest import VitestRunner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

RUNNERS: dict[str, Runner] = {r.name: r for r in (
    AntRunner(),
    AutomakeRunner(),
    CargoRunner(),
    CTestRunner(),
    CucumberRunner(),
    DjangoRunner(),
    DoctestRunner(),
    GoogleTestRunner(),
    GoTestRunner(),
    GradleRunner(),
    JestRunner(),
    KarmaRunner(),
    MavenRunner(),
    MicroPythonRunner(),
    RubyUnitRunner(),
    MochaRunner(),
    PhpUnitRunner(),
    PytestRunner(),
    QUnitRunner(),
    RedisRunner(),
    RSpecRunner(),
    SympyRunner(),
    UnittestRunner(),
    VitestRunner(),
)}


def all_runners() -> list[Runner]:
    return list(RUNNERS.values())


def get_runner(name: str) -> Runner:
    if name not in RUNNERS:
        raise KeyError(f"unknown runner {name!r}; known: {sorted(RUNNERS)}")
    return RUNNERS[name]


def runner_for_command(cmd: ParsedCommand) -> Runner | None:
    """The runner that owns this command, or None (an unrecognized program is not a selector)."""
    for runner in RUNNERS.values():
        if runner.recognizes(cmd):
            return runner
    return None


def runner_for_task(task: "Task") -> Runner | None:
    """The repository-native runner for a task, or None if no registered runner serves it."""
    for runner in RUNNERS.values():
        if runner.serves(task):
            return runner
    return None
