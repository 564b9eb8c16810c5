"""One place per knob (execcritic/config.py): every field is documented, read somewhere in the package,
reachable from the command line, and every deviation a user makes shows up in the manifest."""

from __future__ import annotations

import ast
import dataclasses
from functools import lru_cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from execcritic.cli import app
from execcritic.cli.pipeline import SECTIONS
from execcritic.config import PAPER, PROFILES_DIR, ProtocolConfig, apply_overrides, knobs, load_protocol
from execcritic.errors import InputError
from execcritic.results.manifest import build_manifest

PACKAGE = Path(__file__).resolve().parents[2] / "execcritic"


@lru_cache(maxsize=None)
def _attribute_reads() -> dict[str, set[str]]:
    """attr name -> files (outside config.py) that read `<something>.<attr>`."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                out.setdefault(node.attr, set()).add(str(path.relative_to(PACKAGE)))
    return out


def test_every_knob_has_help_and_a_paper_default():
    for k in knobs():
        assert k.help.strip(), f"{k.key} has no help text"
        section, name = k.key.split(".")
        assert getattr(getattr(PAPER, section), name) == k.default


@pytest.mark.parametrize("knob", knobs(), ids=lambda k: k.key)
def test_every_knob_is_read_somewhere(knob):
    """A declared knob nobody reads is a claim without a check (e.g. a memory limit no path applies)."""
    name = knob.key.split(".", 1)[1]
    readers = _attribute_reads().get(name, set())
    assert readers, f"{knob.key} is declared in execcritic/config.py but no module reads `.{name}`"


def test_cli_aliases_are_unique_and_name_fields():
    aliases = [k.cli for k in knobs() if k.cli]
    assert len(aliases) == len(set(aliases))
    assert all(a.startswith("--") for a in aliases)


READS = {**SECTIONS, "audit": ("harness", "workspace", "repair"), "official": ("harness",)}


@pytest.mark.parametrize("command", sorted(READS))
def test_protocol_commands_offer_the_aliases_of_what_they_read_and_only_those(command):
    """A command shows only the options it reads: `official` has no `--runs`, `repair` has no `--test-turns`."""
    out = CliRunner().invoke(app, [command, "--help"], terminal_width=200).output
    for k in knobs():
        if k.cli:
            reads = k.key.split(".")[0] in READS[command]
            assert (k.cli in out) == reads, f"`execcritic {command}` {'lacks' if reads else 'shows'} {k.cli}"
    assert "--set" in out and "--config" in out


def test_set_refuses_a_knob_the_command_does_not_read():
    bad = CliRunner().invoke(app, ["official", "--set", "repair.turns_per_round=3", "--patch", "gold"])
    assert bad.exit_code == 2 and "would ignore this one" in bad.output


def test_a_cli_override_reaches_the_config_and_the_manifest():
    result = CliRunner().invoke(app, ["config", "show", "--json", "--runs", "1", "--set",
                                      "repair.turns_per_round=30", "-c", "smoke"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    dev = data["deviations"]
    assert dev["repair.runs_per_source"] == {"paper": 3, "used": 1}
    assert dev["repair.turns_per_round"] == {"paper": 40, "used": 30}        # --set wins over the profile
    assert dev["repair.round0_turns"] == {"paper": 200, "used": 4}            # from the smoke profile
    cfg = load_protocol("smoke", ["repair.turns_per_round=30"], {"repair.runs_per_source": 1})
    manifest = build_manifest(config=cfg, command="test")
    assert manifest["deviations_from_paper"] == {k: v for k, v in dev.items()}
    # a choice the paper leaves open is recorded in every manifest, even at its default
    assert dev["repair_reward.masked_raw_reward"] == {"paper": "unstated", "used": "lower_bound"}


def test_profiles_are_valid():
    for path in PROFILES_DIR.glob("*.yaml"):
        cfg = load_protocol(path.stem)
        assert isinstance(cfg, ProtocolConfig)
    assert load_protocol("paper") == PAPER
    assert load_protocol("smoke").deviations()


def test_bad_overrides_name_the_key():
    with pytest.raises(InputError, match="repair.turns_per_round"):
        apply_overrides(PAPER, {"repair.turns_per_round": "many"})
    with pytest.raises(InputError, match="unknown config key 'repair.turns'"):
        apply_overrides(PAPER, {"repair.turns": 3})
    with pytest.raises(InputError, match="unknown profile"):
        load_protocol("no-such-profile")
    with pytest.raises(InputError, match="KEY=VALUE"):
        load_protocol(sets=["repair.turns_per_round"])
    bad = CliRunner().invoke(app, ["config", "show", "--set", "harness.nope=1"])
    assert bad.exit_code == 2 and "unknown config key" in bad.output


# defaults equal to a knob's value by coincidence, with why they are not that knob
COINCIDENCES = {("agents/models/local_server.py", "ensure_smollm2_checkpoint"):
                "1800 s for the one-time GGUF conversion of the CPU model, not the official evaluator's limit"}


def test_no_protocol_number_is_restated_as_a_signature_default():
    """The numbers the paper fixes appear once, in config.py: no function signature repeats them. Small
    numbers (counts like 3 or 5, timeouts under 1000 s) occur everywhere for other reasons; the distinctive
    ones (character caps, token budgets, long timeouts) are the ones that get copied."""
    watched = {k.default for k in knobs() if isinstance(k.default, (int, float)) and not isinstance(k.default, bool)
               and k.default >= 1000}
    bad = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                    if isinstance(default, ast.Constant) and default.value in watched and \
                            not isinstance(default.value, bool) and \
                            (str(path.relative_to(PACKAGE)), node.name) not in COINCIDENCES:
                        bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}(... = {default.value})")
    assert not bad, "protocol numbers restated as defaults (read them from execcritic.config):\n" + "\n".join(bad)


def test_deviations_cover_every_section():
    changed = {}
    for section in dataclasses.fields(ProtocolConfig):
        f = dataclasses.fields(section.default_factory())[0]  # type: ignore[misc]
        value = getattr(getattr(PAPER, section.name), f.name)
        changed[f"{section.name}.{f.name}"] = (not value) if isinstance(value, bool) else value + 1
    cfg = apply_overrides(PAPER, changed)
    assert set(cfg.deviations()) == set(changed)


@pytest.mark.parametrize("command", ["generate-tests", "repair", "score", "run"])
def test_pipeline_commands_parse_every_option_type(command, tmp_path):
    """Options reach the command's own input checks, whatever typer version parses them: `generate-tests` and
    `score` borrow a signature, whose string annotations a newer typer could not resolve (an internal error)."""
    result = CliRunner().invoke(app, [command, "-d", "no-such-dataset", "--instance", "a", "--instance", "b",
                                      "--out", str(tmp_path / "run"), "--workers", "1"])
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "no-such-dataset" in result.output


def test_every_numeric_knob_has_a_lower_and_an_upper_bound():
    """A count of 10^11 turns or a timeout of a year is a typo, not a protocol: refused where it is given."""
    loose = [k.key for k in knobs() if k.type in (int, float) and not (
        {"ge", "gt"} & dict(k.bounds).keys() and {"le", "lt"} & dict(k.bounds).keys())]
    assert loose == []
    with pytest.raises(InputError, match=r"repair.round0_turns must be an int >= 1 and <= 100000"):
        load_protocol(sets=["repair.round0_turns=100000000000"])
