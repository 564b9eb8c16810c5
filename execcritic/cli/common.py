"""Shared CLI parts: the exit-code table every command follows, the one top-level error handler, the options
every command spells the same way, JSON output, progress that stays off stdout, and the protocol options."""

from __future__ import annotations

import errno
import functools
import inspect
import json
import os
import sys
import traceback
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from execcritic.errors import ExecCriticError, InputError

if TYPE_CHECKING:
    from rich.console import Console

# (rich, the config and the task loaders are imported where used: importing this module is part of every
# command's start-up, `--help` included)


class ExitCode(IntEnum):
    OK = 0
    NEGATIVE = 1
    USAGE = 2
    INVALID = 3
    UNITS_FAILED = 4
    INTERNAL = 70
    INTERRUPTED = 130


EXIT_MEANINGS = {  # one table for every command; README shows it
    ExitCode.OK: "done (`official`: resolved)",
    ExitCode.NEGATIVE: "it ran, and the answer is no: `official` valid but unresolved, a bundle invalid, a rate "
                       "below --min-rate, a verification that failed",
    ExitCode.USAGE: "bad input or setup: one line names the flag, file, field or instance and what is valid; "
                    "nothing already computed is lost",
    ExitCode.INVALID: "`official`: the evaluation did not run validly (patch did not apply, tests not collected, "
                      "timeout...)",
    ExitCode.UNITS_FAILED: "some units of work errored: they are listed (instance, stage, error, where the record "
                           "is); the others' records are kept; the same command retries them",
    ExitCode.INTERNAL: "a bug in execcritic: `execcritic --debug ...` shows the traceback",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C): finished records are kept; the same command continues",
}

JSON_KEY, DEBUG_KEY = "execcritic.json", "execcritic.debug"


def _remember_json(ctx: typer.Context, value: bool) -> bool:
    ctx.meta[JSON_KEY] = bool(value)
    return value


JSON_OPTION = typer.Option(False, "--json", metavar="", callback=_remember_json,
                           help="print only JSON on stdout (progress and logs go to stderr, and are off)")
NO_PROGRESS = typer.Option(False, "--no-progress", metavar="",
                           help="no progress display (off anyway when stdout is not a terminal, or with --json)")


def _check_limit(value: str | None) -> int | None:
    if value is None or value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise typer.BadParameter(f"expected a whole number >= 1, or 'all', got {value!r}")
    return n


def choice(*names: str):
    """An option callback: the value must be one of `names`."""
    def check(value: str | None) -> str | None:
        if value is not None and value not in names:
            raise typer.BadParameter(f"expected one of {', '.join(names)}, got {value!r}")
        return value
    return check


def choices(*names: str):
    """An option callback for a repeatable option: every value must be one of `names`."""
    def check(values: list[str] | None) -> list[str] | None:
        for value in values or ():
            choice(*names)(value)
        return values
    return check


DATASET_HELP = ("task set: verified-sdist, verified-git, multilingual-git, a parquet/JSONL file, a Hugging Face id, "
                "or an alias (verified, lite, multilingual; `verified` reads $EXECCRITIC_VERIFIED when set)")
DATASET = typer.Option("verified-sdist", "--dataset", "-d", help=DATASET_HELP)
DATASET_REQUIRED = typer.Option(..., "--dataset", "-d", help=DATASET_HELP)
INSTANCES = typer.Option(None, "--instance", "-i", help="instance id (repeatable); default: every task")
LIMIT = typer.Option("all", "--limit", metavar="N|all", callback=_check_limit,
                     help="the first N selected tasks (N >= 1), or all of them")
WORKERS = typer.Option(1, "--workers", "-w", min=1, max=1024, help="units of work in parallel")
BACKEND = typer.Option(None, "--backend", metavar="local|docker", callback=choice("local", "docker"),
                       help="sandbox backend (default: the task's own: local for verified-sdist and verified-git, "
                            "docker otherwise)")
EXECUTOR = typer.Option("threads", "--executor", metavar="threads|ray", callback=choice("threads", "ray"),
                        help="where units run: threads here, or a Ray cluster")
SPLIT = typer.Option("test", "--split", help="split, for Hugging Face datasets")


def run_dir_option(value: Path | None) -> Path | None:
    """`--out` names a run directory of its own: '' (which is '.') would make the current directory one."""
    if value is None:
        return value
    if Path(value).is_symlink() and not Path(value).exists():
        raise typer.BadParameter(f"{str(value)!r} is a symbolic link that does not resolve (a loop, or its target "
                                 "is gone)")
    if str(value).strip() in ("", ".") or Path(value).resolve() == Path.cwd().resolve():
        raise typer.BadParameter(f"{str(value)!r} is the current directory; name a run directory of its own "
                                 "(e.g. runs/my-run)")
    return value


def progress_on(as_json: bool, no_progress: bool = False) -> bool:
    """Progress is for a person at a terminal: off with --json, --no-progress, or when stdout is not a tty."""
    return not (as_json or no_progress) and sys.stdout.isatty()


def stderr_console() -> Console:
    from rich.console import Console  # lazy: rich, off the start-up path

    return Console(stderr=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def fail(exc: Exception, as_json: bool = False, code: int = ExitCode.USAGE) -> None:
    """Report a user-facing error and exit with `code`."""
    _say(type(exc).__name__, str(exc), as_json)
    raise typer.Exit(code)


def _say(kind: str, message: str, as_json: bool) -> None:
    message = " ".join(message.split()) if "\n" not in message.strip() else message.strip()
    if as_json:
        emit_json({"error": kind, "message": message})
    else:
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)


def describe(exc: BaseException) -> tuple[ExitCode, str]:
    """The exit code and one message for an exception that reached the top: input and setup errors (ours, and
    the OS's, decoding, YAML, parquet) name what is at fault; anything else is a bug."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED, "interrupted: finished records are kept; run the same command again to continue"
    if isinstance(exc, ExecCriticError):
        return ExitCode.USAGE, str(exc)
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc)
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f)
        hint = {errno.ENOSPC: " (free some disk space; finished records are kept)",
                errno.EACCES: " (choose a writable location, e.g. another --out)",
                errno.EROFS: " (choose a writable location, e.g. another --out)"}.get(exc.errno or 0, "")
        if hint and _in_cache(exc.filename):
            hint = (f" (the suite's cache: set $EXECCRITIC_CACHE, and $EXECCRITIC_IMAGE_CACHE for images, to a "
                    f"{'roomier' if exc.errno == errno.ENOSPC else 'writable'} directory)")
        if isinstance(exc, FileExistsError) and exc.filename and Path(exc.filename).is_symlink():
            hint = " (a symbolic link that does not resolve: a loop, or its target is gone)"
        return ExitCode.USAGE, f"{what}{': ' + where if where else ''}{hint}"
    if isinstance(exc, UnicodeDecodeError):
        return ExitCode.USAGE, f"a file that must be UTF-8 text is not ({exc.reason} at byte {exc.start})"
    kind = f"{type(exc).__module__}.{type(exc).__name__}"
    if kind.startswith(("yaml.", "pyarrow.")) or isinstance(exc, json.JSONDecodeError):
        return ExitCode.USAGE, f"could not read a {kind.split('.')[0]} input: {exc}"
    return ExitCode.INTERNAL, (f"internal error: {type(exc).__name__}: {exc} - a bug in execcritic; "
                               "run again with `execcritic --debug ...` for the traceback and report it")


def _in_cache(path: Any) -> bool:
    """Is `path` in the suite's cache (task environments, checkouts, images), or a directory it is made in?"""
    if not path:
        return False
    import platformdirs  # lazy: only an OS error's hint reads it

    roots = [os.environ.get("EXECCRITIC_CACHE"), os.environ.get("EXECCRITIC_IMAGE_CACHE"),
             platformdirs.user_cache_dir("execcritic")]
    full = os.path.abspath(os.fsdecode(path)) + os.sep
    roots = [os.path.abspath(os.path.expanduser(r)) + os.sep for r in roots if r]
    return any(full.startswith(r) or r.startswith(full) for r in roots)     # in it, or on the way to it


def report(exc: BaseException, *, as_json: bool, debug: bool) -> ExitCode:
    code, message = describe(exc)
    if debug or os.environ.get("EXECCRITIC_DEBUG") == "1":
        traceback.print_exception(exc, file=sys.stderr)
    _say(type(exc).__name__, message, as_json)
    return code


def protocol_options(*sections: str):
    """Give a Typer command the protocol's options for the config `sections` it reads (all when none is
    named), generated from `execcritic.config`: `-c PROFILE|FILE.yaml`, `--set KEY=VALUE` (knobs of those
    sections; another section's key is refused: the command would ignore it) and one option per knob that
    declares a `cli` name (`--runs`, `--turns-per-round`...). The command receives the resulting
    `protocol: ProtocolConfig`; nothing else in the CLI names a protocol number."""
    from execcritic.config import apply_overrides, knobs, load_protocol  # lazy: start-up (--help)

    def decorate(fn):
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.name != "protocol"]
        kw = inspect.Parameter.KEYWORD_ONLY
        mine = [k for k in knobs() if not sections or k.key.split(".")[0] in sections]
        extra = [
            inspect.Parameter("config_", kw, annotation=Optional[str], default=typer.Option(
                None, "-c", "--config", help="protocol profile (paper, smoke, ...) or a YAML file; deviations are "
                                             "recorded")),
            inspect.Parameter("set_", kw, annotation=Optional[List[str]], default=typer.Option(
                None, "--set", help="KEY=VALUE for a knob this command reads"
                                    + (f" ({', '.join(s + '.*' for s in sections)})" if sections else "")
                                    + "; `execcritic config show` lists them; repeatable")),
        ]
        aliases: dict[str, str] = {}
        flags: dict[str, str] = {}
        for k in mine:
            if k.cli:
                name = "knob__" + k.key.replace(".", "__")
                aliases[name] = k.key
                flags[k.key] = k.cli
                extra.append(inspect.Parameter(name, kw, annotation=Optional[k.type], default=typer.Option(
                    None, k.cli, help=f"{k.help} (paper: {k.default}; sets {k.key}; {k.valid()})")))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            config, sets = kwargs.pop("config_", None), kwargs.pop("set_", None) or []
            values = {aliases[n]: v for n in aliases if (v := kwargs.pop(n, None)) is not None}
            if sections:
                for item in sets:
                    key = item.partition("=")[0].strip()
                    if "." in key and key.split(".")[0] not in sections:
                        raise InputError(f"--set {key}: this command reads only {', '.join(s + '.*' for s in sections)}"
                                         " knobs, so it would ignore this one", field="--set")
            protocol = load_protocol(config, sets)
            for key, value in values.items():
                protocol = apply_overrides(protocol, {key: value}, where=flags[key])
            return fn(*args, protocol=protocol, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params + extra)  # type: ignore[attr-defined]
        return wrapper

    if len(sections) == 1 and callable(sections[0]):  # used bare: @protocol_options
        fn, sections = sections[0], ()
        return decorate(fn)
    return decorate


def load_selected(dataset: str, instances: list[str] | None, limit: int | None, split: str = "test"):
    """(tasks, task set): the task set, the named instances (each must exist), the first `limit` of them; an
    empty selection is an error, never a run over nothing."""
    from execcritic.tasks import load_tasks  # lazy: start-up (--help)

    ts = load_tasks(dataset, split=split, instance_ids=instances or None)
    tasks = list(ts)[:limit] if limit else list(ts)
    if not tasks:
        raise InputError(f"no tasks selected from {ts.source}", field="--dataset")
    return tasks, ts


def unit_failures(summaries, console: Console | None = None, *, as_json: bool = False) -> ExitCode:
    """Print the table of errored units of `summaries` (RunSummary objects or their dicts) and whether the run
    stopped;
    ExitCode.UNITS_FAILED when any unit errored or was left unstarted, else OK."""
    summaries = [s.to_dict() if hasattr(s, "to_dict") else s for s in summaries]
    failures = [f for s in summaries for f in s.get("failures", ())]
    stopped = [s["stopped"] for s in summaries if s.get("stopped")]
    not_started = sum(s.get("not_started", 0) for s in summaries)
    if not (failures or stopped or not_started):
        return ExitCode.OK
    if not as_json:
        from rich.table import Table  # lazy: rich, off the start-up path

        console = console or stderr_console()
        table = Table(title=f"{len(failures)} unit(s) errored - their instances have no record; the same command "
                            "retries them", title_justify="left")
        for col in ("unit", "stage", "error", "full record"):
            table.add_column(col, overflow="fold")
        for f in failures[:50]:
            table.add_row(f["key"], f["stage"], f["error"], f["record"])
        if len(failures) > 50:
            table.add_row(f"... and {len(failures) - 50} more", "", "", failures[50]["record"])
        console.print(table)
        for why in stopped:
            console.print(f"[bold red]stopped:[/] {why}; {not_started} unit(s) not started (the same command "
                          "continues with them)")
    return ExitCode.UNITS_FAILED
