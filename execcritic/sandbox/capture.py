"""Bounded capture of a command's output (pure; shared by both backends)."""

from __future__ import annotations

from execcritic.sandbox.base import MAX_OUTPUT_BYTES


class OutputCapture:
    """Bounded capture of a byte stream: keeps the first and last `cap // 2` bytes.

    Why head and tail: the head holds collection/setup errors, the tail holds the runner's summary
    and per-node results; the middle of a huge log is what we can afford to drop.
    """

    def __init__(self, cap: int = MAX_OUTPUT_BYTES):
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        half = self.cap // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * (self.cap - half):
                del self.tail[:len(self.tail) - (self.cap - half)]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        keep_tail = self.cap - self.cap // 2
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        tail = bytes(self.tail[-keep_tail:]) if keep_tail else b""
        dropped = self.total - len(self.head) - len(tail)
        marker = f"\n[... {dropped} bytes of output truncated by the sandbox ...]\n".encode()
        return (bytes(self.head) + marker + tail).decode("utf-8", "replace")
