"""Runner-aware binding: one small module per test runner, behind one interface.

A runner knows three things about its own command line and output:
  (a) which exact nodes a command selects, and whether it selects anything broader (file, class,
      directory, suite, or a pattern that can match more than the named nodes);
  (b) how to build the exact-selection command for a node list;
  (c) how to read per-node results from its output (swebench's log parser where one fits) and what
      each status means for the fail-closed classifier.
The harness never guesses from substrings of a log; it asks the runner.
"""

from __future__ import annotations

import enum
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.problems import Problem

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

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


class Runner(ABC):
    name: ClassVar[str]
    language: ClassVar[str]
    log_parser: ClassVar[str]          # key in swebench's PARSER_REGISTRY used by parse_results()

    def serves(self, task: "Task") -> bool:
        """True if this runner is the repository-native runner for the task (by repo / log_parser).
        Used to build the official (oracle) bundle's exact command."""
        return False

    # ---- (a) selection -----------------------------------------------------------------------
    @abstractmethod
    def recognizes(self, cmd: ParsedCommand) -> bool:
        """True if this runner owns the command (by program and arguments)."""

    @abstractmethod
    def selection(self, cmd: ParsedCommand) -> Selection:
        """Every selector on the command line, each classified by level, plus runner problems."""

    @abstractmethod
    def parse_node(self, text: str) -> Node:
        """A contract `test_nodes` entry or a FAIL_TO_PASS id -> Node (possibly partial)."""

    def binds(self, selected: Node, declared: Node) -> bool:
        """Does the exact node on the command line bind the declared node?

        Names must be equal; every qualifier the declared node gives must agree.
        """
        if selected.name != declared.name:
            return False
        if declared.param is not None and selected.param != declared.param:
            return False
        if declared.path and selected.path and not _same_path(selected.path, declared.path):
            return False
        if declared.scope and selected.scope and tuple(declared.scope) != tuple(selected.scope):
            return False
        return True

    # ---- (b) exact-selection command -----------------------------------------------------------
    @abstractmethod
    def build_command(self, nodes: Sequence[Node], *, task: "Task | None" = None) -> str:
        """A one-line command that selects exactly these nodes and passes this runner's selection()."""

    # ---- (c) per-node results --------------------------------------------------------------------
    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """The command with the reporter flags this runner needs for per-node parsing (e.g. pytest -rA).

        Must not change which nodes are selected.
        """
        return cmd

    def parse_results(self, log: str) -> dict[str, str]:
        """Per-test statuses from the run's output, keyed as the runner prints test ids."""
        from execcritic.evaluation.swebench_compat import parser_for

        return parser_for(self.log_parser)(log)

    @abstractmethod
    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        """The status of `node` in `results`, or None if the node is absent (did not run)."""

    def outcome(self, status: str) -> Outcome:
        """Map a raw status (swebench TestStatus value) to its meaning. Runners override when the
        runner family gives ERROR a behavioral meaning (unittest: an exception in the test body)."""
        return {"PASSED": Outcome.PASSED, "XFAIL": Outcome.PASSED, "FAILED": Outcome.FAILED,
                "ERROR": Outcome.ERRORED, "SKIPPED": Outcome.NOT_RUN}.get(status, Outcome.ERRORED)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        """Result entries that are not tests but failed loads (pytest `ERROR path.py` collection
        errors, unittest `_FailedTest` entries). Each is a short description."""
        return []


def _same_path(a: str, b: str) -> bool:
    a, b = a.strip("/").removeprefix("./"), b.strip("/").removeprefix("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


# ---- registry ------------------------------------------------------------------------------------

_REGISTRY: dict[str, Runner] = {}


def register(runner_cls: type[Runner]) -> type[Runner]:
    _REGISTRY[runner_cls.name] = runner_cls()
    return runner_cls


def all_runners() -> list[Runner]:
    _load_builtin_runners()
    return list(_REGISTRY.values())


def get_runner(name: str) -> Runner:
    _load_builtin_runners()
    if name not in _REGISTRY:
        raise KeyError(f"unknown runner {name!r}; known: {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def runner_for_command(cmd: ParsedCommand) -> Runner | None:
    """The runner that owns this command, or None (an unrecognized program is not a selector)."""
    for runner in all_runners():
        if runner.recognizes(cmd):
            return runner
    return None


def runner_for_task(task: "Task") -> Runner | None:
    """The repository-native runner for a task, or None if no registered runner serves it."""
    for runner in all_runners():
        if runner.serves(task):
            return runner
    return None


_LOADED = False
_LOAD_LOCK = threading.Lock()


def _load_builtin_runners() -> None:
    """Import every runner module once (they register themselves). Thread-safe: pipeline workers
    may ask for runners concurrently, and a half-filled registry would make a runner look missing."""
    global _LOADED
    if _LOADED:
        return
    with _LOAD_LOCK:
        if _LOADED:
            return
        import importlib
        import pkgutil

        import execcritic.runners as pkg

        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name not in ("base",):
                importlib.import_module(f"execcritic.runners.{info.name}")
        _LOADED = True
