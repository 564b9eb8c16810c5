"""Runner-aware binding: one module per test runner (see base.py for the interface, registry.py for
the list)."""

from execcritic.runners.base import Runner
from execcritic.runners.registry import RUNNERS, all_runners, get_runner, runner_for_command, runner_for_task

__all__ = ["RUNNERS", "Runner", "all_runners", "get_runner", "runner_for_command", "runner_for_task"]
