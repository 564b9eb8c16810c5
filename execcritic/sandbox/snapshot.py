"""Exact tree restore (host-side I/O, no sandbox knowledge): the reset behind the local backend."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from execcritic.errors import SandboxError

CLOCK_REALTIME_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)


def _key(st: os.stat_result) -> tuple:
    return (st.st_ino, st.st_ctime_ns, st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid, st.st_gid)


@dataclass
class RestoreStats:
    checked: int = 0
    removed: int = 0
    restored: int = 0
    dirs_fixed: int = 0
    seconds: float = 0.0


class TreeSnapshot:
    """Restore `work` to be identical to the pristine copy `base` (contents, modes, owners, mtimes,
    symlinks; new entries removed, missing ones copied back).

    Exactness rests on ctime: the kernel sets an inode's change time on every content or metadata
    change and no syscall lets a process set it. After recording, `record`/`restore` wait until the
    coarse real-time clock (which stamps ctimes) is past every recorded ctime, so a later change can
    never carry a recorded value. Hard links inside base are restored as separate files.
    """

    def __init__(self, base: Path, work: Path):
        self.base = Path(base)
        self.work = Path(work)
        self.entries: dict[str, tuple] = {}
        self._max_ctime = 0

    # -- recording ------------------------------------------------------------------------
    def record(self) -> None:
        self.entries = {}
        self._max_ctime = 0
        self._record_tree("")
        self._settle()

    def _record_one(self, rel: str) -> os.stat_result:
        st = os.lstat(self._w(rel))
        self.entries[rel] = _key(st)
        self._max_ctime = max(self._max_ctime, st.st_ctime_ns)
        return st

    def _record_tree(self, rel: str) -> None:
        st = self._record_one(rel)
        if not stat.S_ISDIR(st.st_mode):
            return
        stack = [rel]
        while stack:
            d = stack.pop()
            with os.scandir(self._w(d)) as it:
                for e in it:
                    r = f"{d}/{e.name}" if d else e.name
                    st = e.stat(follow_symlinks=False)
                    self.entries[r] = _key(st)
                    self._max_ctime = max(self._max_ctime, st.st_ctime_ns)
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(r)

    def _settle(self) -> None:
        """Wait until the clock that stamps ctimes has passed every recorded ctime (<= one tick)."""
        deadline = time.monotonic() + 1.0
        while True:
            try:
                now = time.clock_gettime_ns(CLOCK_REALTIME_COARSE)
            except OSError:
                now = time.time_ns() - 20_000_000
            if now > self._max_ctime or time.monotonic() > deadline:
                return
            time.sleep(0.001)

    # -- comparing --------------------------------------------------------------------------
    def changed(self) -> list[str]:
        """Paths (relative, files and links; directories only when one appears or disappears) that differ
        from the recorded state: added, changed (ctime/inode/mode/size/owner) or deleted. Read-only."""
        out: set[str] = set()
        seen: set[str] = {""}
        stack = [""]
        while stack:
            d = stack.pop()
            try:
                it = os.scandir(self._w(d))
            except OSError:
                continue
            with it:
                for e in it:
                    r = f"{d}/{e.name}" if d else e.name
                    st = e.stat(follow_symlinks=False)
                    rec = self.entries.get(r)
                    seen.add(r)
                    if rec is None:
                        out.add(r)
                        if stat.S_ISDIR(st.st_mode):
                            stack.append(r)
                        continue
                    if stat.S_ISDIR(st.st_mode) and stat.S_ISDIR(rec[2]):
                        stack.append(r)
                    elif _key(st) != rec:
                        out.add(r)
        out.update(r for r in self.entries if r not in seen and not _has_ancestor_in(r, out))
        return sorted(out)

    # -- restoring ------------------------------------------------------------------------
    def _w(self, rel: str) -> str:
        return os.path.join(self.work, rel) if rel else str(self.work)

    def _b(self, rel: str) -> str:
        return os.path.join(self.base, rel) if rel else str(self.base)

    def restore(self) -> RestoreStats:
        t0 = time.monotonic()
        stats = RestoreStats()
        fix_dirs: set[str] = set()       # dirs whose own metadata must be reset from base
        rerecord: set[str] = set()       # entries (subtrees) to record again after the restore
        seen: set[str] = set()
        root_st = os.lstat(self._w(""))
        seen.add("")
        stats.checked += 1
        if not stat.S_ISDIR(root_st.st_mode):
            raise SandboxError(f"sandbox working tree {self.work} is no longer a directory")
        if _key(root_st) != self.entries.get(""):
            fix_dirs.add("")
        stack = [""]
        while stack:
            d = stack.pop()
            try:
                it = os.scandir(self._w(d))
            except PermissionError:
                os.chmod(self._w(d), 0o700)
                it = os.scandir(self._w(d))
                fix_dirs.add(d)
            with it:
                for e in it:
                    r = f"{d}/{e.name}" if d else e.name
                    st = e.stat(follow_symlinks=False)
                    stats.checked += 1
                    rec = self.entries.get(r)
                    if rec is None:                               # new entry: remove
                        _remove(self._w(r))
                        stats.removed += 1
                        fix_dirs.add(d)
                        continue
                    seen.add(r)
                    if stat.S_ISDIR(st.st_mode) and stat.S_ISDIR(rec[2]):
                        if _key(st) != rec:
                            fix_dirs.add(r)
                        stack.append(r)
                    elif _key(st) != rec:                         # changed file/link/type: replace
                        _remove(self._w(r))
                        _copy_entry(self._b(r), self._w(r))
                        stats.restored += 1
                        rerecord.add(r)
                        fix_dirs.add(d)
                        if stat.S_ISDIR(rec[2]):                   # a dir replaced by something else
                            for sub in self._subtree(r):
                                seen.add(sub)
        missing = sorted(r for r in self.entries if r not in seen)
        copied: set[str] = set()
        for r in missing:
            parent = os.path.dirname(r)
            if _has_ancestor_in(r, copied):
                continue
            _copy_entry(self._b(r), self._w(r))
            stats.restored += 1
            rerecord.add(r)
            fix_dirs.add(parent)
            if os.path.isdir(self._b(r)) and not os.path.islink(self._b(r)):
                copied.add(r)
        for d in sorted(fix_dirs, key=lambda p: -p.count("/")):
            if d in copied or _has_ancestor_in(d, copied):
                continue
            _copy_meta(self._b(d), self._w(d))
            stats.dirs_fixed += 1
        for r in rerecord:
            self._forget_subtree(r)
            self._record_tree(r)
        for d in fix_dirs:
            if os.path.lexists(self._w(d)):
                self._record_one(d)
        self._settle()
        stats.seconds = time.monotonic() - t0
        return stats

    def _subtree(self, rel: str) -> list[str]:
        prefix = rel + "/"
        return [r for r in self.entries if r.startswith(prefix)]

    def _forget_subtree(self, rel: str) -> None:
        for r in self._subtree(rel):
            del self.entries[r]


def _has_ancestor_in(rel: str, dirs: set[str]) -> bool:
    if not dirs:
        return False
    p = os.path.dirname(rel)
    while p:
        if p in dirs:
            return True
        p = os.path.dirname(p)
    return False


def _remove(path: str) -> None:
    """Remove a file, link or whole directory; a directory the code under test made unreadable or
    unwritable (possible only when we are not root) is opened up and removed on a second try."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    try:
        shutil.rmtree(path)
    except PermissionError:
        for dirpath, dirnames, _files in os.walk(path):
            for d in dirnames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, d), 0o700, follow_symlinks=False)
        os.chmod(path, 0o700)
        shutil.rmtree(path)


def _copy_meta(src: str, dst: str) -> None:
    st = os.lstat(src)
    if os.geteuid() == 0:
        os.lchown(dst, st.st_uid, st.st_gid)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _copy_entry(src: str, dst: str) -> None:
    """Copy one entry of base (a file, a symlink, or a whole directory) to the working tree."""
    st = os.lstat(src)
    if stat.S_ISREG(st.st_mode):
        shutil.copy2(src, dst, follow_symlinks=False)
        if os.geteuid() == 0:
            os.lchown(dst, st.st_uid, st.st_gid)
            os.chmod(dst, stat.S_IMODE(st.st_mode))  # chown clears setuid bits
    elif stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        _copy_meta(src, dst)
    else:  # directories and special files: cp -a keeps owners, modes, times, xattrs, inner hard links
        proc = subprocess.run(["cp", "-a", "--no-target-directory", src, dst], capture_output=True)
        if proc.returncode != 0:
            raise SandboxError(f"restoring {dst} from {src} failed: {proc.stderr.decode(errors='replace')}")
