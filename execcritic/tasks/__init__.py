"""Tasks: typed SWE-bench-style rows, loaders, statistics, and the suite's own task sets."""

from execcritic.tasks.load import HUB_ALIASES, TaskSet, load_tasks, register_task_set
from execcritic.tasks.model import Task

__all__ = ["HUB_ALIASES", "Task", "TaskSet", "load_tasks", "register_task_set"]
