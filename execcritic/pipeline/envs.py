"""Which environment a pipeline unit runs a task in.

A row may name its own prepared local environment (`local_environment: {checkout, venv, activation}`),
as the demo tasks and users' own prepared checkouts do; otherwise the task's own environment
(`verified-sdist` build or official Docker image) from `execcritic.tasks.environment`."""

from __future__ import annotations

from pathlib import Path

from execcritic.tasks.environment import TaskEnvironment, environment_for
from execcritic.tasks.model import Task


def task_environment(task: Task, backend: str | None = None) -> TaskEnvironment:
    local = (task.extra or {}).get("local_environment")
    if local and backend in (None, "local"):
        return TaskEnvironment(kind="local", checkout=Path(local["checkout"]),
                               venv=Path(local["venv"]) if local.get("venv") else None,
                               activation=local.get("activation", ""), base_commit=task.base_commit)
    return environment_for(task, backend=backend)
