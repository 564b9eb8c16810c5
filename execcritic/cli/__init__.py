"""The `execcritic` command line. Each capability group lives in its own module (one Typer sub-app);
every command accepts `--json` for machine-readable output."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ExecCritic: fail-closed test-then-repair for SWE-bench-style tasks.")

# name -> module exposing `app` (a typer.Typer) or `register(app)`
_GROUPS = ["tasks", "bundle", "official", "audit", "pipeline", "serve", "config", "figures", "reproduce",
           "candidates", "train"]


def _mount() -> None:
    for name in _GROUPS:
        try:
            mod = importlib.import_module(f"execcritic.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"execcritic.cli.{name}":
                continue  # group not built yet
            raise
        if hasattr(mod, "register"):
            mod.register(app)
        else:
            app.add_typer(mod.app, name=name)


_mount()


def main() -> None:
    app()
