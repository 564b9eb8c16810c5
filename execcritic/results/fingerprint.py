"""What made a run directory's records, so that resuming never mixes settings.

A run directory (`run --out`, `audit --out`, a candidates run) keeps `fingerprint.json`: the dataset hash,
the model specs, the digests of the protocol sections its stages read, the harness code digest, the backend.
Resuming skips every unit whose record exists, so a rerun with other settings would silently reuse records
made by the old ones and then describe them with the new ones. `check_fingerprint` refuses that, listing
what differs; a key only one side has (a later stage's model, say) is added, not compared.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.files import atomic_write_json, locked

FILE = "fingerprint.json"


def section_digests(protocol: ProtocolConfig, sections: tuple[str, ...], *, ignore: tuple[str, ...] = ()
                    ) -> dict[str, str]:
    """`{"protocol.repair": <digest>, ...}` for the sections a stage reads; `ignore` lists knobs that do not
    change how a record is made (e.g. `repair.runs_per_source`: more runs add records, they change none)."""
    data = protocol.to_dict()
    out = {}
    for name in sections:
        values = {k: v for k, v in data[name].items() if f"{name}.{k}" not in ignore}
        out[f"protocol.{name}"] = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
    return out


def check_fingerprint(directory: str | Path, fingerprint: dict[str, Any], *, option: str = "--out",
                      record: bool = True) -> Path:
    """Refuse (InputError naming `option`) if records in `directory` were made with different values; else
    record `fingerprint` there (`record=False`: only check, e.g. before the rest of the input is validated, so
    that a run refused for another reason leaves nothing behind). Returns the fingerprint file."""
    directory = Path(directory)
    path = directory / FILE
    if not record:
        if path.is_file():
            _compare(path, json.loads(path.read_text()), fingerprint, directory, option)
        return path
    with locked(directory / f".{FILE}.lock"):
        old = json.loads(path.read_text()) if path.is_file() else {}
        _compare(path, old, fingerprint, directory, option)
        atomic_write_json(path, {**old, **fingerprint})
    return path


def _compare(path: Path, old: dict[str, Any], new: dict[str, Any], directory: Path, option: str) -> None:
    differs = {k: (old[k], v) for k, v in new.items() if k in old and old[k] != v}
    if differs:
        shown = "; ".join(f"{k}: {a!r} then, {b!r} now" for k, (a, b) in sorted(differs.items()))
        raise InputError(f"{directory} holds records made with other settings ({shown}); resuming would reuse "
                         f"them as if made by this command: give another {option} for a new run, or the "
                         "recorded settings to continue it", file=str(path), field=option)
