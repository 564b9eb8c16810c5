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


def check_size(what: str, size: int, limit: int, **where: str | None) -> None:
    """Refuse `what` (`size` bytes or characters) over `limit` (execcritic/limits.py), naming it and where it is
    (`file`, `instance`, `field`)."""
    if size > limit:
        raise InputError(f"{what} is {_mib(size)}, over the limit of {_mib(limit)} (execcritic/limits.py); no "
                         "SWE-bench task needs one this large", **where)


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"

