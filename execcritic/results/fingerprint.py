"""What made a run directory's records, so that resuming never mixes settings.

A run directory (`run --out`, `audit --out`, a candidates run) keeps `fingerprint.json`: the dataset hash,
the model specs, the digests of the protocol sections its stages read, the harness code digest, the backend.
Resuming skips every unit whose record exists, so a rerun with other settings would silently reuse records
made by the old ones and then describe them with the new ones. `check_fingerprint` refuses that, listing
what differs; a key only one side has (a later stage's model, say) is added, not compared.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from execcritic.config import ProtocolConfig
from execcritic.errors import InputError
from execcritic.files import atomic_write_json, locked

FILE = "fingerprint.json"
OWNER = ".owner"               # held (flock) by the one process that writes the run directory
_HELD: dict[Path, int] = {}    # run directories this process owns -> nesting depth
_FOR_PROCESS = contextlib.ExitStack()   # `claim`ed directories: released when the process ends


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
            _compare(path, _read(path, option), fingerprint, directory, option)
        return path
    with locked(directory / f".{FILE}.lock"):
        old = _read(path, option) if path.is_file() else {}
        _compare(path, old, fingerprint, directory, option)
        atomic_write_json(path, {**old, **fingerprint})
    return path


def _read(path: Path, option: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"the run directory's {FILE} is damaged ({exc}); it says what made the records beside it: "
                         f"restore it, or give another {option} for a new run", file=str(path), field=option) from None
    if not isinstance(data, dict):
        raise InputError(f"the run directory's {FILE} is not a JSON object; restore it, or give another {option}",
                         file=str(path), field=option)
    return data


@contextlib.contextmanager
def owned(directory: str | Path, *, option: str = "--out") -> Iterator[Path]:
    """This process owns run directory `directory` while the block runs: a second process that opens it gets an
    InputError naming the holder (pid, host, start, command) instead of both writing every record twice and
    counting them twice. The lock is the kernel's (flock on `.owner`): a holder that dies releases it. Re-entrant
    within one process."""
    directory = Path(directory)
    if directory.is_symlink() and not directory.exists():
        raise InputError(f"{option} {directory} is a symbolic link that does not resolve (a loop, or its target is "
                         "gone)", file=str(directory), field=option)
    directory.mkdir(parents=True, exist_ok=True)      # (an OSError names the path: the error line says which)
    key = directory.resolve(strict=True)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield directory
        finally:
            _HELD[key] -= 1
        return
    fd = os.open(key / OWNER, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        os.close(fd)
        try:
            who = json.loads(holder)
            who = (f"pid {who.get('pid')} on {who.get('host')} since {who.get('started')} "
                   f"({who.get('command', '')[:120]})")
        except (ValueError, AttributeError):
            who = "another process"
        raise InputError(f"{directory} is in use by {who}: one run directory has one writer; wait for it to end, "
                         f"or use another {option}", file=str(key / OWNER), field=option) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   "command": " ".join(sys.argv)[:500]}) + "\n").encode(), 0)
        _HELD[key] = 1
        yield directory
    finally:
        _HELD.pop(key, None)
        os.close(fd)                     # (releases the lock; the file stays: it says who wrote last)


def _compare(path: Path, old: dict[str, Any], new: dict[str, Any], directory: Path, option: str) -> None:
    differs = {k: (old[k], v) for k, v in new.items() if k in old and old[k] != v}
    if differs:
        shown = "; ".join(f"{k}: {a!r} then, {b!r} now" for k, (a, b) in sorted(differs.items()))
        raise InputError(f"{directory} holds records made with other settings ({shown}); resuming would reuse "
                         f"them as if made by this command: give another {option} for a new run, or the "
                         "recorded settings to continue it", file=str(path), field=option)


def claim(directory: str | Path, *, option: str = "--out") -> Path:
    """`owned(directory)` until this process ends (a command's run directory: the command is the process)."""
    return _FOR_PROCESS.enter_context(owned(directory, option=option))

