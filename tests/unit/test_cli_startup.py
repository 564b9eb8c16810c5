"""The command line starts at once: `execcritic --help` and `--version` import no command, and `import
execcritic.cli` imports none of the heavy libraries (each command imports what it uses when it runs). Checked by
what the interpreter reports it imported (`-X importtime`), never by a wall-clock threshold; the times themselves
are measured by tests/perf/startup.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from execcritic.cli import COMMANDS, app, load_command

HEAVY = ("torch", "transformers", "trl", "ray", "pandas", "pyarrow", "matplotlib", "nbformat", "jsonschema", "docker",
         "datasets", "numpy", "papermill", "swebench", "openai", "rich")


def imported_by(*argv: str) -> set[str]:
    """Top-level names of every module a fresh interpreter imported to run `python -X importtime -m/-c ...`:
    `imported_by("execcritic.cli")` imports the module, `imported_by("-m", "execcritic.cli", "--help")` runs it."""
    args = ["-c", f"import {argv[0]}"] if len(argv) == 1 else list(argv)
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def test_importing_the_cli_imports_no_heavy_library():
    modules = imported_by("execcritic.cli")
    assert {m.split(".")[0] for m in modules} & set(HEAVY) == set()
    assert not any(m.startswith("execcritic.cli.") and m != "execcritic.cli.common" for m in modules), \
        "a command module was imported with the root"


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_command_and_no_heavy_library(flag):
    modules = imported_by("-m", "execcritic.cli", flag)
    assert {m.split(".")[0] for m in modules} & set(HEAVY) == set(), flag
    assert not any(m.startswith("execcritic.cli.") and m not in ("execcritic.cli.common", "execcritic.cli.__main__")
                   for m in modules), flag


def test_the_root_help_lists_every_command_with_its_own_first_line():
    out = CliRunner().invoke(app, ["--help"], terminal_width=400).output
    for name, (_, line) in COMMANDS.items():
        command = load_command(name)
        own = " ".join((command.short_help or command.help or "").split())
        assert own.startswith(line), f"{name}: the table says {line!r}, the command's help is {own!r}"
        assert name in out


def test_a_command_is_loaded_when_it_runs_and_a_typo_is_named():
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0 and '"knobs"' in result.output
    typo = subprocess.run([sys.executable, "-m", "execcritic.cli", "offical"], capture_output=True, text=True,
                          check=False)
    assert typo.returncode == 2 and "Did you mean 'official'" in typo.stderr
