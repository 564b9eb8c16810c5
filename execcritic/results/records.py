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
        if not self.path.exists():
            return
        with self.path.open() as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    return  # torn tail, ignored
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{self.path}:{lineno}: corrupt record ({exc.msg})") from exc

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
            finally:
                os.close(fd)
            self._keys.add(key)
        return True
