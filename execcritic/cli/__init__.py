"""The `execcritic` command line. Each capability group lives in its own module (one Typer sub-app);
every command accepts `--json` for machine-readable output. Errors are handled once, here: one `error:`
line (JSON under `--json`), the exit code from `common.ExitCode`, a traceback only with `--debug`.

A command's module is imported when that command runs or shows its own help, never before: `execcritic --help`
and `--version` import no command (and so none of torch, pandas, matplotlib, nbformat, ...). `COMMANDS` lists
them with the one line the root's help shows; tests/unit/test_cli_startup.py checks each line against the
command's own help and the import list against `-X importtime`."""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import threading
import time

import typer
import typer.core
from typer._click import exceptions as click_exceptions  # typer 0.29 vendors click

from execcritic import __version__
from execcritic.cli.common import DEBUG_KEY, JSON_KEY, ExitCode, fail, report

# command -> (module of execcritic.cli that defines it, the line the root's --help shows for it)
COMMANDS = {
    "official": ("official", "Score a patch with SWE-bench's grading; did-not-run is INVALID, never 'unresolved'."),
    "audit": ("audit", "Run the unchanged bundle on a fresh Base and on Gold; report Base-to-Gold success (Q = B*G)."),
    "generate-tests": ("pipeline", "One Test-generation episode per (issue, Test source); Base-gate every bundle."),
    "repair": ("pipeline", "Repair runs (Round 0 + feedback-guided revision) reusing each qualified bundle."),
    "score": ("pipeline", "Fresh official evaluation of every terminal Repair patch."),
    "run": ("pipeline", "generate-tests -> repair -> score, resumable."),
    "figures": ("figures", ("Every table as Markdown + LaTeX, Figures 5 and 6 as PNG + PDF, from the runs "
                            "RESULTS/paper_runs.json pins; same inputs, same bytes.")),
    "reproduce": ("reproduce", ("Run the paper artifacts' notebooks (papermill) under a preset, resumably, then "
                                "paper_figures/.")),
    "tasks": ("tasks", ("Task sets: load, list and summarize SWE-bench-style rows; build the verified-sdist, "
                        "verified-git and multilingual-git environments; qualify verified-git and multilingual-git.")),
    "bundle": ("bundle", "Test bundles: validate (test.patch, test_command, test_contract.json)."),
    "serve": ("serve", "Model servers: vLLM / SGLang launch lines, the embedded CPU model."),
    "config": ("config", "The protocol's knobs (execcritic/config.py), profiles and overrides."),
    "candidates": ("candidates", ("Labeled candidate patches (Gold, Gold mutants, Repair-run patches), each labeled "
                                  "by a real official run.")),
    "train": ("train", ("SFT and GRPO on real episodes (TRL, CPU-testable); evaluate a trained checkpoint with the "
                        "pipeline.")),
}


def load_command(name: str):
    """The click command `name` (a group for a sub-app), built from its module: a module exposes `app` (a
    typer.Typer, mounted under `name`) or `register(app)` (top-level commands)."""
    module = importlib.import_module(f"execcritic.cli.{COMMANDS[name][0]}")
    if hasattr(module, "register"):
        holder = typer.Typer()
        module.register(holder)
        return typer.main.get_group(holder).commands[name]
    group = typer.main.get_group(module.app)
    group.name = name
    return group


class Root(typer.core.TyperGroup):
    """Every command runs inside this group's `invoke`: whatever escapes a command (or its option parsing)
    becomes one message and a documented exit code. Commands are loaded by name when they are used
    (`COMMANDS`); the root's own help lists them from the table without importing any."""

    _listing = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._loaded: dict = {}
        self.commands = dict.fromkeys(COMMANDS)   # (only its keys are read by click: "Did you mean ...?")

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name):
        if cmd_name not in COMMANDS:
            return None
        if self._listing:                      # the root's --help: the line from the table, nothing imported
            return typer.core.TyperCommand(cmd_name, short_help=COMMANDS[cmd_name][1])
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = load_command(cmd_name)
        return self._loaded[cmd_name]

    def format_help(self, ctx, formatter):
        self.rich_markup_mode = None           # click's plain layout: rendering with rich costs more than the rest
        self._listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            self._listing = False

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
    from execcritic.results.manifest import note_start  # lazy: git and digests, for a command that runs

    note_start()        # manifests name the code this command started with, even if HEAD moves while it runs


def main(argv: list[str] | None = None) -> None:
    """Errors before any command runs (an unknown command, a bad global option) get the same one line.

    SIGTERM is Ctrl-C: a scheduler's or a container's stop raises the same KeyboardInterrupt, so it gets the same
    one line, exit code 130, and the same cleanup (units cancelled, sandboxes and model servers stopped)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = None
    if threading.current_thread() is threading.main_thread():   # (signal handlers live in the main thread)
        previous = signal.signal(signal.SIGTERM, interrupt)
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
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    workers = sys.modules.get("execcritic.pipeline.workers")    # (imported only by a command that ran units)
    if code == ExitCode.INTERRUPTED and workers is not None:
        # A unit the interrupt cancelled whose thread is still blocked outside any sandbox (an HTTP call to a model
        # endpoint: up to its timeout and retries) would hold the exit, since Python joins every thread of a
        # ThreadPoolExecutor before it exits. Nothing of it is wanted (its unit is redone; pipeline/workers.py) and
        # every record written is already fsynced: run the exit handlers (the sandboxes' finalizers remove their
        # workspaces) and leave without that join.
        until = time.monotonic() + 0.5
        for t in workers.unit_threads_alive():
            t.join(max(0.0, until - time.monotonic()))
        if workers.unit_threads_alive():
            sys.stdout.flush()
            sys.stderr.flush()
            atexit._run_exitfuncs()
            os._exit(int(code))
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
