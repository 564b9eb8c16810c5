"""Two file primitives every writer of shared state uses: an atomic write (a reader, or a process killed
mid-write, sees the old file or the new one, never half of one) and an advisory lock (one writer at a time
across processes; readers that hold it shared never see a half-done swap)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Write `data` to `path` through a unique temporary file beside it and a rename (fsynced first)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:     # (a full disk: the write names no file, the error line must)
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> Path:
    return atomic_write(path, json.dumps(data, indent=indent, default=str) + "\n")


@contextlib.contextmanager
def locked(path: str | Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an advisory lock on `path` (created if missing): exclusive by default, shared for readers."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield


def hold_shared(path: str | Path):
    """An open file holding a shared lock on `path`, for an owner that keeps it as long as it uses what the
    lock guards and closes it when done (closing releases the lock)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a")
    fcntl.flock(fh, fcntl.LOCK_SH)
    return fh
