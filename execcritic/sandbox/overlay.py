"""Working copies as overlay mounts (host-side I/O, no sandbox knowledge): the pristine checkout is the read-only
lower layer, a fresh directory the upper one, so a sandbox opens with no copy and resets by remounting on a new
empty upper layer. Why: copying the checkout was most of what an official evaluation cost on a large repository
(Django's 130 MB, once per sandbox, 0.6-0.75 s each on a memory file system), and reset and changed-paths walked
the whole tree where the upper layer holds exactly what a run changed.

Only where this process may mount (root with CAP_SYS_ADMIN: `available`); elsewhere the local backend copies
(`TreeSnapshot`). The lower layer is never written through the mount (overlayfs copies up), and the options fix
the behaviours that would make the upper layer hard to read: no redirected directories (a renamed lower
directory is copied, as on a plain file system), no metadata-only copy-up, no index.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from execcritic.errors import SandboxError
from execcritic.sandbox.snapshot import RestoreStats, _copy_meta

OPTIONS = "redirect_dir=off,index=off,metacopy=off,xino=off"
OPAQUE = "trusted.overlay.opaque"
MNT_DETACH = 2
_UNSAFE = (",", ":", "\\", "\n")
_available: dict[str, str] = {}


@functools.cache
def _libc():
    import ctypes  # lazy: the harness's own mount calls, never imported where tested code runs

    lib = ctypes.CDLL(None, use_errno=True)
    lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return lib, ctypes


def mount(lower: Path, upper: Path, work: Path, target: Path) -> None:
    """Mount an overlay of `lower` (read-only) and `upper` at `target`; SandboxError naming the cause otherwise."""
    bad = [str(p) for p in (lower, upper, work) if any(c in str(p) for c in _UNSAFE)]
    if bad:
        raise SandboxError(f"cannot overlay {bad[0]}: a path with ',', ':' or '\\' cannot be a layer")
    lib, ctypes = _libc()
    opts = f"lowerdir={lower},upperdir={upper},workdir={work},{OPTIONS}".encode()
    if lib.mount(b"overlay", str(target).encode(), b"overlay", 0, opts) != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"mounting the working copy of {lower} at {target} failed: {os.strerror(err)}")


def unmount(target: Path | str) -> None:
    """Detach the mount at `target` (lazily: a process still holding a file keeps only its own view)."""
    lib, ctypes = _libc()
    if lib.umount2(str(target).encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"unmounting the working copy at {target} failed: {os.strerror(err)}")


def mounts_under(path: Path | str) -> list[str]:
    """The mount points at or under `path` (this process's mount table), deepest first."""
    root = os.path.realpath(path)
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4].encode().decode("unicode_escape")   # octal escapes for spaces and such
            if point == root or point.startswith(root.rstrip("/") + "/"):
                found.append(point)
    return sorted(set(found), key=lambda p: -p.count("/"))


def unmount_under(path: Path | str) -> None:
    """Detach every mount at or under `path` (best effort: the finalizers and the sweep of a killed run's trees)."""
    for point in mounts_under(path):
        with contextlib.suppress(SandboxError):
            unmount(point)


def available(parent: str | None) -> str | None:
    """None when an overlay can be mounted with its upper layer under `parent` (None: the temporary directory);
    else why not. Probed once per directory and process with a real mount."""
    key = parent or tempfile.gettempdir()
    if key not in _available:
        _available[key] = _probe(key)
    return _available[key] or None


def _probe(parent: str) -> str:
    if os.geteuid() != 0:
        return "this process is not root (an overlay mount needs CAP_SYS_ADMIN)"
    d = Path(tempfile.mkdtemp(prefix="execcritic-overlay-probe-", dir=parent))
    try:
        for sub in ("lower", "upper", "work", "merged"):
            (d / sub).mkdir()
        (d / "lower" / "f").write_text("x")
        mount(d / "lower", d / "upper", d / "work", d / "merged")
        try:
            (d / "merged" / "f").unlink()
            ok = (d / "upper" / "f").exists() and (d / "lower" / "f").exists()
        finally:
            unmount(d / "merged")
        return "" if ok else "the overlay mount did not keep its lower layer"
    except (SandboxError, OSError) as exc:
        return str(exc)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _opaque(path: str) -> bool:
    try:
        return os.getxattr(path, OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


class OverlayTree:
    """`work` as an overlay of `base` with an upper layer under `scratch` (same interface as `TreeSnapshot`:
    `record`, `changed`, `restore`). `record` mounts; `restore` remounts on a new empty upper layer, removing
    the old one after. (The sandbox's finalizer unmounts: `local._cleanup`.)"""

    def __init__(self, base: Path, work: Path, scratch: Path):
        self.base, self.work, self.scratch = Path(base), Path(work), Path(scratch)
        self._layer: Path | None = None
        self._n = 0

    @property
    def upper(self) -> Path:
        if self._layer is None:
            raise SandboxError(f"the working copy at {self.work} is not mounted")
        return self._layer / "upper"

    def record(self) -> None:
        self.work.mkdir(exist_ok=True)
        self._layer = self._mount_new()

    def _mount_new(self) -> Path:
        self._n += 1
        layer = self.scratch / f"layer{self._n}"
        (layer / "upper").mkdir(parents=True)
        (layer / "work").mkdir()
        _copy_meta(str(self.base), str(layer / "upper"))     # the merged root shows the upper root's metadata
        mount(self.base, layer / "upper", layer / "work", self.work)
        return layer

    def changed(self) -> list[str]:
        """What differs from `base`, in `TreeSnapshot.changed`'s terms: every file or link the upper layer holds
        (written, created, or only opened for writing: copied up), each deleted entry (a whiteout, or missing
        under a directory that replaced the base's), directories only when one appears or disappears."""
        out: list[str] = []
        self._walk("", False, out)
        return sorted(out)

    def _walk(self, rel: str, hidden: bool, out: list[str]) -> None:
        names = set()
        with os.scandir(os.path.join(self.upper, rel)) as it:
            for e in it:
                r = f"{rel}/{e.name}" if rel else e.name
                names.add(e.name)
                st = e.stat(follow_symlinks=False)
                low = _lstat(os.path.join(self.base, r))
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:        # whiteout: deleted
                    if low is not None:
                        out.append(r)
                elif stat.S_ISDIR(st.st_mode):
                    if low is None or not stat.S_ISDIR(low.st_mode):
                        out.append(r)
                    self._walk(r, hidden or _opaque(e.path), out)
                else:
                    out.append(r)
        if hidden:          # an opaque directory shows only its upper layer: the base's other entries are gone
            with contextlib.suppress(OSError), os.scandir(os.path.join(self.base, rel)) as it:
                out.extend(f"{rel}/{e.name}" if rel else e.name for e in it if e.name not in names)

    def restore(self) -> RestoreStats:
        t0 = time.monotonic()
        stats = RestoreStats()
        for r in self.changed():
            if _lstat(os.path.join(self.base, r)) is None:
                stats.removed += 1
            else:
                stats.restored += 1
        stats.checked = stats.removed + stats.restored
        old = self._layer
        unmount(self.work)
        self._layer = None
        self._layer = self._mount_new()
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        stats.seconds = time.monotonic() - t0
        return stats


__all__ = ["OPTIONS", "OverlayTree", "available", "mount", "mounts_under", "unmount", "unmount_under"]
