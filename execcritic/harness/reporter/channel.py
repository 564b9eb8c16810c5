"""The harness end of the reporter's channel: one unix socket per run, in a directory the sandbox sees at
`CHANNEL_MOUNT` (read-only) while the listening end stays outside the sandbox.

The first process to connect is the run's first Python process (nothing of the code under test runs before
its interpreter imports `sitecustomize`). It receives the per-run key and the run's facts; the socket path is
unlinked at once, so nothing can connect again, and every record is read as it is written, into memory. The
stream is interpreted only in `finish()`, after the sandbox has killed the process tree: a record can never
be rewritten or withdrawn once sent, and a process that outlives the run holds a socket nobody reads.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any

from execcritic.harness.reporter.stream import ReporterReport, parse_stream
from execcritic.sandbox.confine import CHANNEL_FD

INSIDE_DIR = Path(__file__).resolve().parent / "inside"      # bound read-only at REPORTER_MOUNT
REPORTER_MOUNT = "/.execcritic/reporter"
CHANNEL_MOUNT = "/.execcritic/chan"
ENV_SOCKET = "EXECCRITIC_REPORT"
MAX_STREAM_BYTES = 64 * 1024 * 1024


def sandbox_facts(sandbox: Any) -> dict[str, Any]:
    """What the reporter is told about where it runs: the working tree, and whether the sandbox leaves the
    foreign-function interface visible (a recipe's `ffi`: the guard then lets the real ctypes load)."""
    return {"workdir": sandbox.workdir, "ffi": bool(getattr(sandbox, "ffi", False))}


class ReporterChannel:
    """`facts`: what the reporter is told at connection. `prestart=True`: the run is started ahead of time;
    the reporter imports its runner, records that it is ready (`ready()`) and waits for `go(facts)`, the
    facts of the run (the patches are applied by then)."""

    def __init__(self, host_dir: str | Path, facts: dict[str, Any], *, prestart: bool = False):
        self.key = secrets.token_bytes(32)
        name = f"r-{secrets.token_hex(8)}.sock"
        self.host_path = Path(host_dir) / name
        self.sandbox_path = f"{CHANNEL_MOUNT}/{name}"
        facts = {**facts, "channel_fd": CHANNEL_FD, **({"prestart": True} if prestart else {})}
        self._facts = (json.dumps(facts) + "\n").encode()
        self._go_line: bytes | None = None
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._prestart = prestart
        self._data = bytearray()
        self._overflow = False
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.host_path))
        os.chmod(self.host_path, 0o666)
        self._server.listen(1)
        self._server.settimeout(0.05)
        self._thread = threading.Thread(target=self._serve, name="execcritic-reporter-channel", daemon=True)
        self._thread.start()

    @property
    def env(self) -> dict[str, str]:
        return {ENV_SOCKET: self.sandbox_path}

    def _serve(self) -> None:
        conn = None
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._server.accept()
                    break
                except socket.timeout:
                    continue
                except OSError:
                    return             # closed meanwhile (`close()`: nobody will read this run)
        finally:
            self._close_listener()
        if conn is None:
            return
        self._connected.set()
        with conn:
            try:
                with self._lock:
                    conn.sendall(self.key + self._facts + (self._go_line or b""))
                    self._conn = conn
                conn.settimeout(0.2)
                while True:
                    try:
                        chunk = conn.recv(1 << 16)
                    except socket.timeout:
                        if self._stop.is_set() and self._drained_at and time.monotonic() > self._drained_at:
                            return
                        continue
                    if not chunk:
                        self._eof = True
                        return
                    if len(self._data) + len(chunk) > MAX_STREAM_BYTES:
                        self._overflow = True
                        continue
                    self._data += chunk
                    if self._prestart and not self._ready.is_set() and \
                            b'"kind": "ready"' in self._data[-len(chunk) - 16:]:
                        self._ready.set()
            except OSError:
                return
            finally:
                with self._lock:
                    self._conn = None

    def ready(self, timeout: float) -> bool:
        """Has the run started ahead of time said it is ready (its runner imported)?"""
        return self._ready.wait(timeout)

    def go(self, facts: dict[str, Any]) -> None:
        """Release a run started ahead of time with the facts of this run."""
        line = (json.dumps(facts) + "\n").encode()
        with self._lock:
            if self._go_line is not None:
                raise RuntimeError("this run was already released")
            self._go_line = line
            if self._conn is not None:
                try:
                    self._conn.sendall(line)
                except OSError:
                    pass               # the process is gone: finish() says what the stream holds

    _drained_at: float | None = None
    _eof = False

    def _close_listener(self) -> None:
        try:
            self._server.close()
        finally:
            try:
                self.host_path.unlink()
            except FileNotFoundError:
                pass

    def finish(self, wait_s: float = 5.0) -> ReporterReport:
        """Call after the sandbox ended the run and killed its processes. Reads to end-of-stream (every
        holder of the socket is gone) - or says the stream did not end."""
        self._drained_at = time.monotonic() + wait_s
        self._stop.set()
        self._thread.join(wait_s + 1.0)
        if self._connected.is_set() and not self._eof:
            return ReporterReport(problem=("incomplete", "the reporter's stream did not end after the run: a "
                                                         "process of the run still holds it"))
        return parse_stream(bytes(self._data), self.key, overflow=self._overflow)

    def close(self) -> None:
        self._stop.set()
        self._close_listener()
