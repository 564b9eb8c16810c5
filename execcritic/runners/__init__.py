"""Runner registry: one module per test runner (see base.py for the interface)."""

from execcritic.runners.base import (Node, Outcome, Runner, Selection, Selector, all_runners, get_runner,
                                     register, runner_for_command, runner_for_task)

__all__ = ["Node", "Outcome", "Runner", "Selection", "Selector", "all_runners", "get_runner", "register",
           "runner_for_command", "runner_for_task"]
