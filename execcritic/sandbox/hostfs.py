"""A sandbox's writable directories read and written from the host, as the code inside would see them.

Both backends keep the tree, /tmp and HOME in host directories (the local workspace; Docker volumes, when the
daemon is local). Reading and writing them directly saves a process (local) or an archive transfer (Docker,
40-80 ms each) per file. The code under test may have left symlinks, FIFOs or devices there: paths resolve
the way the sandbox would resolve them, and anything that leaves the mapped directories is refused
(`Outside`; the Docker backend then asks the container), so a link in the tree never makes the harness read
or write a host file; only regular files are read, and nothing blocks on a FIFO.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Mapping


class Outside(PermissionError):
    """The path resolves outside the directories mapped to the host."""


def _map(spath: str, roots: Mapping[str, Path]) -> Path | None:
    for root, host in roots.items():
        if spath == root:
            return host
        if spath.startswith(root + "/"):
            return host / spath[len(root) + 1:]
    return None


def resolve(path: str, roots: Mapping[str, Path], *, follow_last: bool = True) -> Path:
    """The host path of sandbox path `path`, following symlinks as the sandbox would; `Outside` when that
    leaves `roots` (sandbox dir -> host dir)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"sandbox path must be absolute (got {path!r})")
    where = ", ".join(roots)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    cur: list[str] = []
    hops = 0
    while parts:
        name = parts.pop(0)
        if name == "..":
            if cur:
                cur.pop()
            continue
        cur.append(name)
        host = _map("/" + "/".join(cur), roots)
        if host is None:
            if any(r.startswith("/" + "/".join(cur) + "/") for r in roots):
                continue                 # a parent of a mapped dir (/.execcritic of /.execcritic/io)
            raise Outside(f"{path}: only paths under {where} are accessible from outside the sandbox")
        if (parts or follow_last) and os.path.islink(host):
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, f"too many symlinks resolving {path}")
            target = os.readlink(host)
            cur.pop()
            base = [] if target.startswith("/") else list(cur)
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            cur = base
    spath = "/" + "/".join(cur)
    host = _map(spath, roots)
    if host is None:
        raise Outside(f"{path} resolves to {spath}, outside {where}")
    return host


def read(path: str, roots: Mapping[str, Path]) -> bytes:
    """The bytes of the regular file at sandbox path `path`; FileNotFoundError for anything else."""
    host = resolve(path, roots)
    try:
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise FileNotFoundError(errno.ENOENT, f"no file at {path} in the sandbox", path) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileNotFoundError(errno.ENOENT, f"no file at {path} in the sandbox", path) from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError(errno.ENOENT, f"{path} is not a regular file in the sandbox", path)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write(path: str, data: bytes, mode: int, mtime: int | None, roots: Mapping[str, Path]) -> None:
    """Write a regular file at sandbox path `path` (missing parent dirs are made, 0755); whatever else was
    there (a FIFO, a device) is replaced, never opened."""
    host = resolve(path, roots)
    if not host.parent.is_dir():
        parent = path.rstrip("/").rsplit("/", 1)[0]
        parts = [p for p in parent.split("/") if p]
        for i in range(1, len(parts) + 1):
            try:
                sub = resolve("/" + "/".join(parts[:i]), roots)
            except Outside:
                continue
            if not sub.is_dir():
                sub.mkdir(mode=0o755)
        host = resolve(parent, roots) / host.name
    try:
        old = os.lstat(host)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode) and not stat.S_ISDIR(old.st_mode):
        os.unlink(host)                  # a FIFO, socket or device: replaced, as an archive upload would
    fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{path} is not a regular file in the sandbox", path)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        if mtime is not None:
            os.utime(fd, (mtime, mtime))
    finally:
        os.close(fd)


def changed_since(tree: Path, snap: Path, t_ns: int) -> list[str]:
    """Paths of `tree` that differ from its snapshot `snap` since the restore at `t_ns` (ns since the epoch):
    entries whose ctime moved past it that are files, links, new, or directories that were not one, and
    snapshot entries a changed directory lost. The same answer as the Docker backend's in-container listing (`CHANGED_SCRIPT`)."""
    out: set[str] = set()

    def look(rel: str, st: os.stat_result) -> None:
        if st.st_ctime_ns <= t_ns:
            return
        if not stat.S_ISDIR(st.st_mode):
            out.add(rel)
            return
        base = snap / rel if rel != "." else snap
        if not base.is_dir() or base.is_symlink():      # new, or was a file or a link
            out.add(rel)
        try:
            lost = os.listdir(base)
        except OSError:
            return
        for c in lost:
            crel = c if rel == "." else f"{rel}/{c}"
            if not os.path.lexists(os.path.join(tree, crel)):
                out.add(crel)

    look(".", os.lstat(tree))
    stack = [("", str(tree))]
    while stack:
        rel_dir, full_dir = stack.pop()
        with os.scandir(full_dir) as it:
            for e in it:
                rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                look(rel, st)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((rel, e.path))
    return sorted(out)
