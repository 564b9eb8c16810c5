"""Append-only JSONL records that survive kill -9 and resume idempotently.

Each finished unit of work (one generation episode, one Repair run, one official score) is one JSON
line with a `key`. A line is written with a single `write` on an O_APPEND descriptor and fsynced, so a
kill leaves at most one torn last line; loading ignores (and reports) a torn tail, and `repair_tail`
truncates it before new appends. Resuming = skipping keys already present; a key is never written twice.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from execcritic.errors import InputError


def unit_key(*parts: Any) -> str:
    return "/".join(str(p) for p in parts)


class RecordStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.torn_lines = self.repair_tail()
        self._keys = {r["key"] for r in self.load()}

    def repair_tail(self) -> int:
        """Truncate a torn last line (no trailing newline) left by a kill. Returns 1 if one was cut."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return 0
        with self.path.open("rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return 0
            cut = data.rfind(b"\n") + 1
            fh.truncate(cut)
            return 1

    def load(self) -> list[dict[str, Any]]:
        return list(self.iter())

    def iter(self) -> Iterator[dict[str, Any]]:
        return read_records(self.path)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self) -> set[str]:
        return set(self._keys)

    def append(self, record: dict[str, Any]) -> bool:
        """Write `record` (must carry `key`) unless its key is already present. Returns True if written."""
        key = record["key"]
        line = (json.dumps(record, default=str, sort_keys=True) + "\n").encode()
        with self._lock:
            if key in self._keys:
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as exc:       # (a full disk: name the file, as the error line must)
                raise OSError(exc.errno, exc.strerror, str(self.path)) from None
            finally:
                os.close(fd)
            self._keys.add(key)
        return True


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of `path` in order (none when it does not exist); a torn last line (a kill mid-write) is
    ignored; a damaged record is an InputError naming file and line."""
    if not path.exists():
        return
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                return  # torn tail, ignored
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _corrupt(path, lineno, f"({exc.msg}): not written by execcritic, or damaged") from None
            if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                raise _corrupt(path, lineno, f": a record is a JSON object with a \"key\", got {line.strip()[:60]!r}")
            yield record


def _corrupt(path: Path, lineno: int, what: str) -> InputError:
    return InputError(f"corrupt record at line {lineno} {what}; remove the line (the same command then redoes that "
                      "unit) or use another run directory", file=str(path), field=f"line {lineno}")


def check_records(*paths: str | Path) -> None:
    """Read every record of these files (those that exist) and raise the InputError a damaged one gives, naming
    file and line: a command checks its run directory before it writes anything there."""
    for path in paths:
        for _ in read_records(Path(path)):
            pass
