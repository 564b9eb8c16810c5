"""Errors a user can act on. Each names the file, instance and field at fault when known."""

from __future__ import annotations


class ExecCriticError(Exception):
    """Base class for errors raised deliberately by execcritic."""


class InputError(ExecCriticError, ValueError):
    """Bad input: a dataset row, a bundle file, a config value. Says what to fix."""

    def __init__(self, message: str, *, file: str | None = None, instance: str | None = None,
                 field: str | None = None):
        self.message = message          # without the location suffix (for re-raising with another location)
        self.file = file
        self.instance = instance
        self.field = field
        where = ", ".join(f"{k}={v}" for k, v in (("file", file), ("instance", instance), ("field", field)) if v)
        super().__init__(f"{message} [{where}]" if where else message)


class SandboxError(ExecCriticError):
    """The sandbox itself failed (daemon gone, bwrap could not start, container vanished).

    Always operational: the executor turns it into `failure_kind=sandbox_error`, never a verdict.
    """


class EnvironmentMissing(ExecCriticError):
    """A required system component (interpreter, bwrap, docker engine, image) is not available."""
