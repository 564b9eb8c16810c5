"""The `local` backend: a real copy of the prepared checkout, run under bubblewrap.

Layout of one sandbox's private workspace (a host directory, by default under the system temp dir):
    base/     pristine snapshot of the prepared checkout; never visible to the sandboxed code
    testbed/  the working copy, bound read-write at /testbed
    tmp/      bound at /tmp (private, persists across runs until reset)
    home/     bound at /root, the sandbox's HOME (private, emptied on reset; a read-only bind that
              lives under /root, such as a pyenv interpreter, shows up there as its mount point)
Everything else in the sandbox is read-only: selected host top-level dirs (or a debootstrap rootfs),
plus read-only binds for the environment (a venv and the interpreter it was made from); a dir the
checks must write to (a venv that a check `pip install`s into) can be a `writable_binds` entry,
copied into the workspace and restored like the tree. Network,
pid, ipc and uts namespaces are private, the root user keeps only Docker's default capabilities
(minus mknod), and a cgroup memory limit applies with OOM kills counted by the cgroup itself.

Reset is exact and cheap: after every restore we record each entry's inode and change time (ctime),
which no unprivileged write can preserve or forge, then wait until the kernel's coarse clock has
moved past every recorded ctime. Any later write, chmod, rename, link or delete therefore shows up
as a changed, new or missing entry, and only those are restored from base/ (see `TreeSnapshot`).

`isolated=False` runs a plain subprocess in the copy (no bwrap; a cgroup still limits memory when
available). Paths `/testbed` and `/tmp` in the command text and in `cwd` are rewritten to the copy
and its private tmp dir (best effort: a path the program builds at run time is not mapped), and
every result and `describe()` says `isolated: false`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from execcritic.errors import EnvironmentMissing, InputError, SandboxError
from execcritic.sandbox.base import MAX_OUTPUT_BYTES, WORKDIR, CommandResult, Sandbox

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_ROOT_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
ROOTFS_SKIP = {"proc", "dev", "sys", "tmp", "run", "root", "testbed", "lost+found"}
# Docker's default capability set, minus CAP_MKNOD (bwrap's /dev has no devices cgroup behind it)
# and CAP_NET_RAW/CAP_NET_BIND_SERVICE/CAP_AUDIT_WRITE (no network). No CAP_SYS_ADMIN: the
# sandboxed root cannot remount the read-only binds.
BWRAP_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
              "CAP_SETUID", "CAP_SETPCAP", "CAP_SETFCAP", "CAP_SYS_CHROOT")
CLOCK_REALTIME_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)


# --------------------------------------------------------------------------------------------
# Output capture (pure)
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Exact tree restore (host-side I/O, no sandbox knowledge)
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# cgroups (memory limit + OOM accounting)
# --------------------------------------------------------------------------------------------

class MemoryCgroup:
    """One memory cgroup per sandbox, created under our own cgroup; v1 or v2."""

    def __init__(self, path: Path, version: int):
        self.path = path
        self.version = version

    @classmethod
    def create(cls, limit_mb: int, name: str) -> MemoryCgroup | None:
        """A fresh cgroup with the limit, or None when neither v1 nor v2 memory control is usable."""
        limit = int(limit_mb) * 1024 * 1024
        for version, parent in _cgroup_parents():
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                if version == 1:
                    (path / "memory.limit_in_bytes").write_text(str(limit))
                    memsw = path / "memory.memsw.limit_in_bytes"
                    if memsw.exists():
                        memsw.write_text(str(limit))
                    if not (path / "memory.oom_control").exists():
                        raise OSError("no memory.oom_control")
                else:
                    (path / "memory.max").write_text(str(limit))
                    swap = path / "memory.swap.max"
                    if swap.exists():
                        swap.write_text("0")
                    if not (path / "memory.events").exists():
                        raise OSError("no memory.events")
                return cls(path, version)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return None

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    @property
    def label(self) -> str:
        return f"cgroup-v{self.version}"

    def oom_kills(self) -> int:
        """The cgroup's own OOM-kill counter (v1 memory.oom_control / v2 memory.events)."""
        fname = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in (self.path / fname).read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, wait: float = 5.0) -> bool:
        """SIGKILL every process in the cgroup until it is empty. False if some survived."""
        killer = self.path / "cgroup.kill"
        deadline = time.monotonic() + wait
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            if self.version == 2 and killer.exists():
                with contextlib.suppress(OSError):
                    killer.write_text("1")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill_all(wait=2.0)
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _cgroup_parents() -> list[tuple[int, Path]]:
    """Candidate parent dirs for our cgroups: our own v1 memory cgroup, then our v2 cgroup."""
    out: list[tuple[int, Path]] = []
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    v1_mount = v2_mount = None
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        if rfields[0] == "cgroup" and "memory" in rfields[2].split(","):
            v1_mount = v1_mount or fields[4]
        elif rfields[0] == "cgroup2":
            v2_mount = v2_mount or fields[4]
    for line in own:
        hid, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        if v1_mount and "memory" in ctrls.split(","):
            out.append((1, Path(v1_mount) / path.lstrip("/")))
    for line in own:
        hid, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        if v2_mount and hid == "0" and ctrls == "":
            base = Path(v2_mount) / path.lstrip("/")
            try:
                if "memory" in (base / "cgroup.subtree_control").read_text().split():
                    out.append((2, base))
            except OSError:
                pass
    return out


# --------------------------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------------------------

_MAPPED_RE = re.compile(r"(?<![\w./-])/(testbed|tmp)(?=/|$|[^\w.-])")
_BWRAP_VERSION: str | None = None


def bwrap_version(bwrap: str = "bwrap") -> str:
    global _BWRAP_VERSION
    if _BWRAP_VERSION is None:
        path = shutil.which(bwrap)
        if path is None:
            raise EnvironmentMissing("bubblewrap is not installed: `apt-get install -y bubblewrap`, or pass "
                                     "isolated=False to run a plain (unisolated) subprocess")
        out = subprocess.run([path, "--version"], capture_output=True, text=True)
        _BWRAP_VERSION = (out.stdout or out.stderr).strip()
    return _BWRAP_VERSION


def _venv_home_prefix(path: Path) -> Path | None:
    """The interpreter prefix a venv was made from (its `home` in pyvenv.cfg, minus `bin`)."""
    cfg = path / "pyvenv.cfg"
    try:
        for line in cfg.read_text().splitlines():
            k, _, v = line.partition("=")
            if k.strip() == "home" and v.strip():
                home = Path(v.strip())
                return home.parent if home.name == "bin" else home
    except OSError:
        return None
    return None


class LocalSandbox(Sandbox):
    """A copy of `checkout` at /testbed, run under bubblewrap (see the module docstring).

    checkout: the prepared Base checkout (as the environment build left it). It is copied, never
        modified. A git worktree (`.git` is a file) is refused: it breaks inside the sandbox.
    activate: shell prelude run before every command (e.g. `source /venv/bin/activate`).
    binds: host paths bound read-only at the same path (a venv; its base interpreter is added).
    writable_binds: host dirs (e.g. a venv a check `pip install`s into) copied into the workspace,
        bound read-write at the same path and restored exactly by `reset()`, like /testbed.
    isolated: False = plain subprocess in the copy (explicit opt-out; results say isolated false).
    memory_mb: cgroup memory limit (v1 or v2); `prlimit --as` when no cgroup is usable.
    network: False unshares the network namespace (only loopback).
    rootfs: a directory to use as `/` (e.g. the debootstrap rootfs) instead of host dirs.
    warm_bytecode: compile the pristine tree once (checked-hash pycs, so a changed source is never
        served stale bytecode) before snapshotting; the pycs become part of the restored Base.
    """

    backend = "local"

    def __init__(self, checkout: Path | str, *, activate: str = "", binds: Sequence[Path | str] = (),
                 isolated: bool = True, memory_mb: int | None = None, network: bool = False,
                 rootfs: Path | str | None = None, env: Mapping[str, str] | None = None,
                 workspace_dir: Path | str | None = None, warm_bytecode: bool = False,
                 writable_binds: Sequence[Path | str] = (), bwrap: str = "bwrap"):
        self.checkout = Path(checkout).resolve()
        self.activate = activate
        self.isolated = bool(isolated)
        self.memory_mb = memory_mb
        self.network = bool(network)
        self.rootfs = Path(rootfs).resolve() if rootfs else None
        self.env = dict(env or {})
        self.warm_bytecode = warm_bytecode
        self._closed = False
        self._timings: dict[str, float] = {}
        if not self.checkout.is_dir():
            raise InputError(f"checkout {self.checkout} is not a directory", field="checkout")
        if (self.checkout / ".git").is_file():
            raise InputError(f"checkout {self.checkout} is a git worktree (.git is a file); it breaks inside "
                             "the sandbox - pass a real clone (`git clone --no-hardlinks`)", field="checkout")
        if self.rootfs is not None and not (self.rootfs / "usr").is_dir():
            raise InputError(f"rootfs {self.rootfs} has no /usr; pass a directory made by debootstrap",
                             field="rootfs")
        self._bwrap = None
        if self.isolated:
            bwrap_version(bwrap)
            self._bwrap = shutil.which(bwrap)
        self.binds = self._expand_binds(binds)
        self.writable_binds = [Path(w).absolute() for w in writable_binds]
        for w in self.writable_binds:
            if not w.is_dir():
                raise InputError(f"writable bind {w} is not a directory", field="writable_binds")
        if self.writable_binds and not self.isolated:
            raise InputError("writable_binds need the bubblewrap sandbox (isolated=True): a plain subprocess "
                             "cannot see a copy at the original path", field="writable_binds")
        self._wsnaps: list[tuple[Path, TreeSnapshot]] = []
        ws_parent = Path(workspace_dir) if workspace_dir else None
        if ws_parent:
            ws_parent.mkdir(parents=True, exist_ok=True)
        self.ws = Path(tempfile.mkdtemp(prefix="execcritic-local-", dir=ws_parent))
        self.base_dir, self.tree, self.tmp, self.home, self.io = (
            self.ws / "base", self.ws / "testbed", self.ws / "tmp", self.ws / "home", self.ws / "io")
        self._cgroup: MemoryCgroup | None = None
        self._finalizer = weakref.finalize(self, _cleanup, str(self.ws), None)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    # -- setup --------------------------------------------------------------------------------
    def _expand_binds(self, binds: Sequence[Path | str]) -> list[Path]:
        out: list[Path] = []
        for b in binds:
            p = Path(b).absolute()
            if not p.exists():
                raise InputError(f"bind {p} does not exist", field="binds")
            out.append(p)
            home = _venv_home_prefix(p)
            if home is not None and home.exists():
                out.append(home)
        roots = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt"} if self.rootfs is None else set()
        uniq: list[Path] = []
        for p in out:
            if any(str(p) == r or str(p).startswith(r + "/") for r in roots):
                continue  # already visible read-only
            if p not in uniq:
                uniq.append(p)
        return uniq

    def _setup(self) -> None:
        t0 = time.monotonic()
        _run_checked(["cp", "-a", "--no-target-directory", str(self.checkout), str(self.base_dir)],
                     f"copying checkout {self.checkout}")
        self._timings["copy_s"] = time.monotonic() - t0
        for d, mode in ((self.tmp, 0o1777), (self.home, 0o700), (self.io, 0o700)):
            d.mkdir()
            os.chmod(d, mode)
        if self.memory_mb:
            name = f"execcritic-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self._cgroup = MemoryCgroup.create(self.memory_mb, name)
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _cleanup, str(self.ws),
                                               str(self._cgroup.path) if self._cgroup else None)
        if self.warm_bytecode:
            t1 = time.monotonic()
            self._warm(self.base_dir)
            self._timings["warm_bytecode_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        _run_checked(["cp", "-a", "--no-target-directory", str(self.base_dir), str(self.tree)],
                     "creating the working copy")
        self.snapshot = TreeSnapshot(self.base_dir, self.tree)
        self.snapshot.record()
        for i, w in enumerate(self.writable_binds):
            wbase, wwork = self.ws / f"wbase{i}", self.ws / f"wwork{i}"
            _run_checked(["cp", "-a", "--no-target-directory", str(w), str(wbase)], f"copying {w}")
            _run_checked(["cp", "-a", "--no-target-directory", str(wbase), str(wwork)], f"copying {w}")
            snap = TreeSnapshot(wbase, wwork)
            snap.record()
            self._wsnaps.append((w, snap))
        self._timings["snapshot_s"] = time.monotonic() - t2
        self.checkout_head = _git_head(self.checkout)

    def _warm(self, tree: Path) -> None:
        script = (
            "__ec_py=$(command -v python || command -v python3) || exit 0\n"
            "\"$__ec_py\" - <<'EOF'\n"
            "import sys\n"
            "if sys.version_info < (3, 7): sys.exit(0)\n"
            "import compileall, py_compile, re\n"
            "compileall.compile_dir('/testbed', quiet=2, rx=re.compile(r'/\\.git/'), workers=1,\n"
            "    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)\n"
            "EOF\n")
        res = self._run(script, timeout=1800, env=None, cwd="/", stdin=None, tree=tree)
        if res.exit_code != 0 or res.timed_out:
            raise SandboxError(f"warming bytecode in {self.checkout} failed (exit {res.exit_code}): "
                               f"{res.output[-2000:]}")

    # -- command construction (pure given the instance state) --------------------------------
    def _root_args(self) -> list[str]:
        args: list[str] = []
        if self.rootfs is None:
            src_root, names = Path("/"), HOST_ROOT_DIRS
        else:
            src_root = self.rootfs
            names = tuple(sorted(n for n in os.listdir(self.rootfs)
                                 if n not in ROOTFS_SKIP and not n.startswith(".")))
        for name in names:
            src = src_root / name
            if src.is_symlink():
                args += ["--symlink", os.readlink(src), f"/{name}"]
            elif src.is_dir():
                args += ["--ro-bind", str(src), f"/{name}"]
        return args

    def bwrap_argv(self, script: str, *, cwd: str, tree: Path | None = None) -> list[str]:
        """The bwrap command line for one run (exposed for tests and manifests)."""
        tree = tree or self.tree
        argv = [self._bwrap or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
                "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        if not self.network:
            argv.append("--unshare-net")
        if os.geteuid() == 0:
            argv += ["--cap-drop", "ALL"]
            for cap in BWRAP_CAPS:
                argv += ["--cap-add", cap]
        else:
            argv += ["--unshare-user", "--uid", "0", "--gid", "0"]
        argv += self._root_args()
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--bind", str(self.tmp), "/tmp",          # before anything that may live under /tmp
                 "--bind", str(self.home), "/root"]
        for b in self.binds:
            argv += ["--ro-bind", str(b), str(b)]
        for w, snap in self._wsnaps:
            argv += ["--bind", str(snap.work), str(w)]
        argv += ["--bind", str(tree), WORKDIR, "--remount-ro", "/", "--chdir", "/", "bash", "-c", script]
        return argv

    def _script(self, command: str, cwd: str) -> str:
        prelude = self.activate.strip()
        return (f"{prelude}\n" if prelude else "") + f"cd -- {shlex.quote(cwd)} || exit 126\n{command}"

    def _map_path(self, text: str) -> str:
        """Non-isolated mode: /testbed and /tmp in command text -> the copy and its private tmp."""
        return _MAPPED_RE.sub(lambda m: str(self.tree if m.group(1) == "testbed" else self.tmp), text)

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        out = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", "USER": "root"}
        if not self.isolated:
            out.update({"HOME": str(self.home), "TMPDIR": str(self.tmp),
                        "EXECCRITIC_TESTBED": str(self.tree)})
        out.update(self.env)
        out.update(env or {})
        return out

    # -- running ------------------------------------------------------------------------------
    def run(self, command: str, *, timeout: float, env: Mapping[str, str] | None = None,
            cwd: str | None = None, stdin: bytes | None = None) -> CommandResult:
        self._check_open()
        return self._run(command, timeout=timeout, env=env, cwd=cwd or WORKDIR, stdin=stdin, tree=None)

    def _run(self, command: str, *, timeout: float, env, cwd: str, stdin: bytes | None,
             tree: Path | None) -> CommandResult:
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds (got {timeout!r})")
        if not cwd.startswith("/"):
            raise ValueError(f"cwd must be an absolute sandbox path (got {cwd!r})")
        started_r = started_w = None
        if self.isolated:
            # bash says "started" on a private fd and closes it before the script runs: no output text
            # can fake or hide a bwrap setup failure.
            started_r, started_w = os.pipe()
            script = f"printf 1 >&{started_w}; exec {started_w}>&-\n" + self._script(command, cwd)
            argv = self.bwrap_argv(script, cwd=cwd, tree=tree)
            run_cwd = str(self.io)
        else:
            # map the command and cwd only: the activation prelude names real host paths (a venv may
            # itself live under /tmp) and must reach bash unchanged
            argv = ["bash", "-c", self._script(self._map_path(command), self._map_path(cwd))]
            run_cwd = str(self.tree)
        if self._cgroup is not None:
            argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self._cgroup.procs_file), *argv]
        elif self.memory_mb:
            argv = ["prlimit", f"--as={int(self.memory_mb) * 1024 * 1024}", "--", *argv]
        stdin_f = None
        if stdin is not None:
            stdin_f = tempfile.TemporaryFile(dir=self.io)
            stdin_f.write(stdin)
            stdin_f.seek(0)
        oom_before = self._cgroup.oom_kills() if self._cgroup else 0
        cap = OutputCapture()
        timed_out = False
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=stdin_f if stdin_f is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self._env(env),
                                    cwd=run_cwd, start_new_session=True,
                                    pass_fds=(started_w,) if started_w is not None else ())
        except OSError as exc:
            if started_r is not None:
                os.close(started_r)
            raise SandboxError(f"could not start the local sandbox for {self.checkout}: {exc}") from exc
        finally:
            if stdin_f is not None:
                stdin_f.close()
            if started_w is not None:
                os.close(started_w)
        deadline = t0 + timeout
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            eof = False
            while not eof:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                if sel.select(min(remaining, 0.25)):
                    chunk = os.read(fd, 1 << 16)
                    if chunk:
                        cap.feed(chunk)
                    else:
                        eof = True
                elif proc.poll() is not None:
                    break  # exited; a leftover background process holds the pipe - killed below
            if not timed_out:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
            if timed_out:
                self._kill(proc)
            duration = time.monotonic() - t0
            self._kill_leftovers(proc)
            # drain what the killed processes had written (EOF comes once they are gone)
            drain_until = time.monotonic() + 2.0
            while time.monotonic() < drain_until and sel.select(0.05):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                cap.feed(chunk)
        finally:
            sel.close()
            proc.stdout.close()
            if proc.poll() is None:
                self._kill(proc)
                proc.wait(5)
            started = _read_started(started_r)
        oom = bool(self._cgroup and self._cgroup.oom_kills() > oom_before)
        rc = proc.returncode
        if started_r is not None:
            if not started and not timed_out:
                raise SandboxError(f"bubblewrap could not set up the sandbox for {self.checkout} "
                                   f"(exit {rc}): {cap.text()[-1000:]}")
        return CommandResult(exit_code=rc, output=cap.text(), timed_out=timed_out, oom_killed=oom,
                             duration_s=duration, truncated=cap.truncated, isolated=self.isolated)

    def _kill(self, proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _kill_leftovers(self, proc: subprocess.Popen) -> None:
        """Nothing a run started outlives it: the process group, and the whole cgroup when we have one
        (bwrap's pid namespace already ends with its init)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if self._cgroup is not None and not self._cgroup.kill_all():
            raise SandboxError(f"processes of the sandbox for {self.checkout} survived SIGKILL "
                               f"(cgroup {self._cgroup.path})")

    # -- files --------------------------------------------------------------------------------
    def _host_path(self, path: str, *, follow_last: bool) -> Path:
        """Resolve a sandbox path to the host, following symlinks the way the sandbox would and
        refusing anything that leaves /testbed, /tmp or /root (so a symlink in the tree can never
        make us write a host file)."""
        roots = {WORKDIR: self.tree, "/tmp": self.tmp, "/root": self.home}
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"sandbox path must be absolute (got {path!r})")
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
            spath = "/" + "/".join(cur)
            host = self._map_root(spath, roots)
            if host is None:
                raise PermissionError(f"{path}: only paths under /testbed, /tmp and /root are accessible "
                                      "from outside the sandbox")
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
        host = self._map_root(spath, roots)
        if host is None:
            raise PermissionError(f"{path} resolves to {spath}, outside /testbed, /tmp and /root")
        return host

    @staticmethod
    def _map_root(spath: str, roots: Mapping[str, Path]) -> Path | None:
        for root, host in roots.items():
            if spath == root:
                return host
            if spath.startswith(root + "/"):
                return host / spath[len(root) + 1:]
        return None

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._check_open()
        host = self._host_path(path, follow_last=True)
        if isinstance(data, str):
            data = data.encode()
        parent = host.parent
        if not parent.is_dir():
            rel_parent = os.path.dirname(path.rstrip("/"))
            self._makedirs(rel_parent)
            parent = self._host_path(rel_parent, follow_last=True)
            host = parent / host.name
        fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        try:
            os.write(fd, data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)

    def _makedirs(self, spath: str) -> None:
        parts = [p for p in spath.split("/") if p]
        for i in range(2, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            host = self._host_path(sub, follow_last=True)
            if not host.exists():
                host.mkdir(mode=0o755)

    def read_file(self, path: str) -> bytes:
        self._check_open()
        host = self._host_path(path, follow_last=True)
        if not host.is_file():
            raise FileNotFoundError(errno.ENOENT, f"no file at {path} in the sandbox", path)
        return host.read_bytes()

    # -- reset / close ------------------------------------------------------------------------
    def reset(self) -> None:
        self._check_open()
        if self._cgroup is not None and not self._cgroup.kill_all():
            raise SandboxError(f"cannot reset {self.checkout}: sandbox processes survive SIGKILL")
        t0 = time.monotonic()
        try:
            self.last_restore = self.snapshot.restore()
            for _w, snap in self._wsnaps:
                snap.restore()
            for d, mode in ((self.tmp, 0o1777), (self.home, 0o700), (self.io, 0o700)):
                _empty_dir(d)
                os.chmod(d, mode)
        except OSError as exc:
            raise SandboxError(f"resetting the sandbox copy of {self.checkout} failed: {exc}") from exc
        self._timings["last_reset_s"] = time.monotonic() - t0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._cgroup is not None:
            self._cgroup.remove()
        self._finalizer()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"the local sandbox for {self.checkout} is closed")

    def describe(self) -> dict:
        d = super().describe()
        d.update({
            "checkout": str(self.checkout),
            "checkout_head": self.checkout_head,
            "copy": str(self.tree),
            "network": self.network,
            "memory_mb": self.memory_mb,
            "memory_limit": (self._cgroup.label if self._cgroup else ("rlimit" if self.memory_mb else None)),
            "oom_detection": "cgroup" if self._cgroup else "none",
            "sandbox": (bwrap_version() if self.isolated else "plain subprocess"),
            "rootfs": str(self.rootfs) if self.rootfs else "host",
            "binds": [str(b) for b in self.binds],
            "writable_binds": [str(w) for w, _ in self._wsnaps],
            "activate": self.activate,
            "warm_bytecode": self.warm_bytecode,
            "reset": "ctime inventory, exact restore from a pristine copy",
            "timings": dict(self._timings),
        })
        if not self.isolated:
            d["path_mapping"] = {"/testbed": str(self.tree), "/tmp": str(self.tmp), "HOME": str(self.home)}
        return d


def _read_started(fd: int | None) -> bool:
    """Did bash inside bwrap write its start byte? (non-blocking; closes the fd)"""
    if fd is None:
        return True
    try:
        os.set_blocking(fd, False)
        return os.read(fd, 1) == b"1"
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _empty_dir(d: Path) -> None:
    with os.scandir(d) as it:
        for e in it:
            _remove(e.path)


def _run_checked(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True)
    if proc.returncode != 0:
        raise SandboxError(f"{what} failed ({' '.join(argv)}): "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")


def _git_head(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cleanup(ws: str, cgroup: str | None) -> None:
    """Finalizer: remove the workspace (and an empty cgroup dir) even if close() was never called."""
    if cgroup:
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)
    shutil.rmtree(ws, ignore_errors=True)
