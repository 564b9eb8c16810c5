"""The `execcritic` command line. Each capability group lives in its own module (one Typer sub-app);
every command accepts `--json` for machine-readable output. Errors are handled once, here: one `error:`
line (JSON under `--json`), the exit code from `common.ExitCode`, a traceback only with `--debug`."""

from __future__ import annotations

import importlib
import sys

import typer
import typer.core
from typer._click import exceptions as click_exceptions  # typer 0.29 vendors click

from execcritic import __version__
from execcritic.cli.common import DEBUG_KEY, JSON_KEY, ExitCode, fail, report
from execcritic.results.manifest import note_start


class Root(typer.core.TyperGroup):
    """Every command runs inside this group's `invoke`: whatever escapes a command (or its option parsing)
    becomes one message and a documented exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (typer.Exit, SystemExit):
            raise
        except click_exceptions.UsageError as exc:
            _usage(exc, ctx.meta.get(JSON_KEY, False))
        except BaseException as exc:  # noqa: BLE001 - the one top-level handler
            raise typer.Exit(report(exc, as_json=ctx.meta.get(JSON_KEY, False), debug=ctx.meta.get(DEBUG_KEY, False)))


def _flag_help(cls) -> None:
    """`--help` is a flag: shown without the `<bool>` typer 0.29 gives every bool option that names no metavar."""
    original = cls.get_help_option

    def get_help_option(self, ctx):
        option = original(self, ctx)
        if option is not None:
            option.metavar = ""
        return option

    cls.get_help_option = get_help_option


for _cls in (typer.core.TyperCommand, typer.core.TyperGroup):
    _flag_help(_cls)


def _usage(exc, as_json: bool) -> None:
    message = exc.format_message()
    if "unexpected extra argument" in message:
        message += " (the task set is given with --dataset/-d)"
    command = exc.ctx.command_path if getattr(exc, "ctx", None) else "execcritic"
    fail(click_exceptions.UsageError(f"{message} (see `{command} --help`)"), as_json)


app = typer.Typer(cls=Root, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="ExecCritic: fail-closed test-then-repair for SWE-bench-style tasks.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"execcritic {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", metavar="", is_eager=True, callback=_version,
                                       help="print the version and exit"),
          debug: bool = typer.Option(False, "--debug", metavar="",
                                     help="print the traceback of an error (also EXECCRITIC_DEBUG=1)")) -> None:
    """ExecCritic: fail-closed test-then-repair for SWE-bench-style tasks. Exit codes: 0 done (official:
    resolved), 1 the answer is no (official: unresolved; bundle invalid), 2 bad input or setup, 3 official:
    invalid (did not run), 4 some units errored (listed; rerun retries them), 70 a bug, 130 interrupted."""
    ctx.meta[DEBUG_KEY] = debug


# name -> module exposing `app` (a typer.Typer) or `register(app)`
_GROUPS = ["tasks", "bundle", "official", "audit", "pipeline", "serve", "config", "figures", "reproduce",
           "candidates", "train"]


def _mount() -> None:
    for name in _GROUPS:
        mod = importlib.import_module(f"execcritic.cli.{name}")
        if hasattr(mod, "register"):
            mod.register(app)
        else:
            app.add_typer(mod.app, name=name)


_mount()


def main(argv: list[str] | None = None) -> None:
    """Errors before any command runs (an unknown command, a bad global option) get the same one line."""
    note_start()        # manifests name the code this command started with, even if HEAD moves while it runs
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="execcritic", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except click_exceptions.UsageError as exc:
        try:
            _usage(exc, "--json" in (argv if argv is not None else sys.argv))
        except typer.Exit as done:
            code = done.exit_code
    except typer.Abort:
        code = report(KeyboardInterrupt(), as_json=False, debug=False)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
