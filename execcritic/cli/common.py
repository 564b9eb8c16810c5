"""Shared CLI helpers: JSON output, error reporting."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from execcritic.errors import ExecCriticError

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def fail(exc: Exception, as_json: bool = False, code: int = 2) -> None:
    """Report a user-facing error and exit with `code`."""
    message = str(exc)
    if as_json:
        emit_json({"error": type(exc).__name__, "message": message})
    else:
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def guarded(as_json: bool):
    """Context manager: turn ExecCriticError into a clean message + exit code 2."""
    class _Guard:
        def __enter__(self):
            return self

        def __exit__(self, exc_type, exc, tb):
            if exc is not None and isinstance(exc, ExecCriticError):
                fail(exc, as_json)
            return False

    return _Guard()
