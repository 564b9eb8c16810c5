"""Shared CLI helpers: JSON output, error reporting."""

from __future__ import annotations

import functools
import inspect
import json
import sys
from typing import Any, List, Optional

import typer

from execcritic.config import knobs, load_protocol
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


def protocol_options(fn):
    """Give a Typer command the protocol's options, generated from `execcritic.config`: `-c PROFILE|FILE.yaml`,
    `--set KEY=VALUE` (any knob, repeatable) and one option per knob that declares a `cli` name (`--runs`,
    `--turns-per-round`...). The command receives the resulting `protocol: ProtocolConfig`; nothing else in
    the CLI names a protocol number."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name != "protocol"]
    kw = inspect.Parameter.KEYWORD_ONLY
    extra = [
        inspect.Parameter("config_", kw, annotation=Optional[str], default=typer.Option(
            None, "-c", "--config", help="protocol profile (paper, smoke, ...) or a YAML file; deviations are "
                                         "recorded")),
        inspect.Parameter("set_", kw, annotation=Optional[List[str]], default=typer.Option(
            None, "--set", help="KEY=VALUE for any knob (`execcritic config show` lists them); repeatable")),
    ]
    aliases: dict[str, str] = {}
    for k in knobs():
        if k.cli:
            name = "knob__" + k.key.replace(".", "__")
            aliases[name] = k.key
            extra.append(inspect.Parameter(name, kw, annotation=Optional[k.type], default=typer.Option(
                None, k.cli, help=f"{k.help} (paper: {k.default}; sets {k.key})")))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        config, sets = kwargs.pop("config_", None), kwargs.pop("set_", None) or []
        values = {aliases[n]: v for n in aliases if (v := kwargs.pop(n, None)) is not None}
        try:
            protocol = load_protocol(config, sets, values)
        except ExecCriticError as exc:
            fail(exc, kwargs.get("as_json", False))
        return fn(*args, protocol=protocol, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params + extra)  # type: ignore[attr-defined]
    return wrapper
