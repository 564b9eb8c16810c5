"""The vocabulary every runner speaks: test nodes, command-line selectors, and what an outcome means.

A floor below the runners (and below validation and the oracle builder), so that binding rules, the
classifier and the bundle model can name nodes without importing any runner.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

from execcritic.bundle.problems import Problem

SelectorLevel = Literal["node", "file", "class", "directory", "suite", "pattern", "unknown"]


@dataclass(frozen=True)
class Node:
    """One exact test node, as its runner names it.

    `path` is the file (pytest, sympy, go package dir, jest spec file...) or dotted module label
    (Django, unittest, Java class); `scope` the enclosing classes / describe blocks; `name` the
    test function, method or case; `param` a parametrization id. A node parsed from a contract may be
    partial (only `name`): binding then matches on the qualifiers it does give.
    """

    runner: str
    name: str
    path: str | None = None
    scope: tuple[str, ...] = ()
    param: str | None = None
    text: str = ""                     # the string it was parsed from, for messages

    def __str__(self) -> str:
        return self.text or self.name


@dataclass(frozen=True)
class Selector:
    """One explicit item on the command line that selects tests."""

    text: str
    level: SelectorLevel
    node: Node | None = None           # set iff level == "node"
    note: str = ""


@dataclass
class Selection:
    selectors: list[Selector] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)   # runner-specific (broad flags, bad options)

    @property
    def nodes(self) -> list[Node]:
        return [s.node for s in self.selectors if s.level == "node" and s.node is not None]

    @property
    def broad(self) -> list[Selector]:
        return [s for s in self.selectors if s.level != "node"]


class Outcome(str, enum.Enum):
    """What a runner's per-node status means to the fail-closed classifier."""

    PASSED = "passed"          # the node ran and passed
    FAILED = "failed"          # the node ran and failed behaviorally (assertion / source-raised exception)
    ERRORED = "errored"        # the node did not run its body cleanly for operational reasons (setup error)
    NOT_RUN = "not_run"        # skipped / deselected / not executed
    # Expected-failure nodes (pytest `xfail`, unittest `expectedFailure`, SymPy `@XFAIL`) ran, but the runner
    # inverts their meaning: a failure is what their author expected, a pass is a surprise the runner does
    # not count (non-strict). Neither is evidence about the issue, so they are neutral: they must run, and
    # carry no verdict. A strict unexpected pass is a failure by the runner's own rule (FAILED).
    EXPECTED_FAILURE = "expected_failure"
    UNEXPECTED_PASS = "unexpected_pass"

    @property
    def neutral(self) -> bool:
        return self in (Outcome.EXPECTED_FAILURE, Outcome.UNEXPECTED_PASS)
