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

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Outcome, Selection
from execcritic.swebench_compat import parser_for

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

class Runner(ABC):
    name: ClassVar[str]
    language: ClassVar[str]
    log_parser: ClassVar[str]          # key in swebench's PARSER_REGISTRY used by parse_results()
    # which hook of the harness-owned reporter (harness/reporter/inside/) instruments this runner's process;
    # None: results come from the log alone (the multilingual runners)
    reporter: ClassVar[str | None] = None

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

    def in_process_command(self, cmd: ParsedCommand) -> ParsedCommand:
        """The command with the options that keep every test in the one process the reporter instruments
        (no worker processes). Must not change which nodes are selected."""
        return cmd

    def launched_command(self, cmd: ParsedCommand, set_env: dict[str, str],
                         pass_env: Sequence[str]) -> ParsedCommand | None:
        """For a command whose launcher starts the tests' interpreter with an environment of its own making
        (tox), the command that sets `set_env` and passes `pass_env` in that interpreter only, the launcher's
        own process left as it is; None when the command's environment reaches the tests unchanged."""
        return None

    def parse_results(self, log: str) -> dict[str, str]:
        """Per-test statuses from the run's output, keyed as the runner prints test ids."""
        return parser_for(self.log_parser)(log)

    @abstractmethod
    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        """The status of `node` in `results`, or None if the node is absent (did not run)."""

    def outcome(self, status: str) -> Outcome:
        """Map a raw status (swebench TestStatus value) to its meaning. Runners override when the
        runner family gives ERROR a behavioral meaning (unittest: an exception in the test body)."""
        return {"PASSED": Outcome.PASSED, "XFAIL": Outcome.EXPECTED_FAILURE, "XPASS": Outcome.UNEXPECTED_PASS,
                "FAILED": Outcome.FAILED, "ERROR": Outcome.ERRORED, "SKIPPED": Outcome.NOT_RUN}.get(status,
                                                                                                 Outcome.ERRORED)

    def load_errors(self, results: dict[str, str], log: str) -> list[str]:
        """Result entries that are not tests but failed loads (pytest `ERROR path.py` collection
        errors, unittest `_FailedTest` entries). Each is a short description."""
        return []


def _same_path(a: str, b: str) -> bool:
    a, b = a.strip("/").removeprefix("./"), b.strip("/").removeprefix("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)
