"""`execcritic config show`: every protocol knob, its value, the paper's value, help and source."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from execcritic.cli.common import JSON_OPTION, emit_json, protocol_options
from execcritic.config import ProtocolConfig, knobs, manifest_deviations

app = typer.Typer(no_args_is_help=True, help="The protocol's knobs (execcritic/config.py), profiles and overrides.")


@app.command("show")
@protocol_options
def show(as_json: bool = JSON_OPTION, *, protocol: ProtocolConfig) -> None:
    """Print every knob with the value in effect (after -c/--set/flags) and the paper's default."""
    values = protocol.to_dict()
    rows = []
    for k in knobs():
        section, name = k.key.split(".", 1)
        rows.append({"key": k.key, "value": values[section][name], "paper": k.default, "cli": k.cli,
                     "help": k.help, "source": k.source, "unstated": k.unstated})
    if as_json:
        emit_json({"knobs": rows, "deviations": manifest_deviations(protocol),
                   "digest": protocol.digest()})
        return
    table = Table(title=f"protocol (digest {protocol.digest()}; {len(protocol.deviations())} deviation(s))")
    for col in ("key", "value", "paper", "cli", "help"):
        table.add_column(col, overflow="fold")
    for r in rows:
        mark = "" if r["value"] == r["paper"] else "[bold yellow]"
        paper = f"unstated (ours: {r['paper']})" if r["unstated"] else str(r["paper"])
        table.add_row(r["key"], f"{mark}{r['value']}", paper, r["cli"], r["help"])
    Console().print(table)
