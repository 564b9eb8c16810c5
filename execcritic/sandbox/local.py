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
(minus mknod), and a cgroup memory limit applies with OOM kills counted by the cgroup itself. Every process
runs under the seccomp filter of `confine` (no ptrace, process_vm_*, namespaces, mounts, ...), with no procfs
mounted at all unless `procfs=True` (a procfs of the sandbox's own pid namespace, for runners graded from their
log alone that need one: node's worker pools count CPUs in /proc/cpuinfo), and the foreign-function modules of
every visible Python behind /dev/null unless `ffi=True`.

Where this process may mount (root), the working copy is an overlay mount over the pristine tree
(`overlay.OverlayTree`): opening copies nothing, the upper layer holds exactly what runs changed, and a
reset remounts on a new empty upper layer. Elsewhere it is a copy, and reset is exact and cheap: after
every restore we record each entry's inode and change time (ctime), which no unprivileged write can
preserve or forge, then wait until the kernel's coarse clock has moved past every recorded ctime. Any
later write, chmod, rename, link or delete therefore shows up as a changed, new or missing entry, and
only those are restored from base/ (see `TreeSnapshot`). `working_copy` (or $EXECCRITIC_WORKING_COPY)
chooses: auto, overlay, copy.

`isolated=False` runs a plain subprocess in the copy (no bwrap; a cgroup still limits memory when
available). Paths `/testbed` and `/tmp` in the command text and in `cwd` are rewritten to the copy
and its private tmp dir (best effort: a path the program builds at run time is not mapped), and
every result and `describe()` says `isolated: false`.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from execcritic.errors import EnvironmentMissing, InputError, SandboxError
from execcritic.sandbox import confine, hostfs, overlay
from execcritic.sandbox.base import (
    CHANNEL_MOUNT,
    HARNESS_FILES,
    HARNESS_MOUNT,
    WORKDIR,
    CommandResult,
    Limits,
    Sandbox,
)
from execcritic.sandbox.capture import OutputCapture
from execcritic.sandbox.cgroup import Cgroups
from execcritic.sandbox.snapshot import TreeSnapshot, _remove

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_ROOT_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
ROOTFS_SKIP = {"proc", "dev", "sys", "tmp", "run", "root", "testbed", "lost+found"}
# Docker's default capability set, minus CAP_MKNOD (bwrap's /dev has no devices cgroup behind it)
# and CAP_NET_RAW/CAP_NET_BIND_SERVICE/CAP_AUDIT_WRITE (no network). No CAP_SYS_ADMIN: the
# sandboxed root cannot remount the read-only binds.
BWRAP_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
              "CAP_SETUID", "CAP_SETPCAP", "CAP_SETFCAP", "CAP_SYS_CHROOT")

# Compile a tree's Python files in place at /testbed, as checked-hash pycs (a changed source is never served
# stale bytecode, whatever its mtime): every copy of a warmed tree imports without recompiling.
WARM_SCRIPT = (
    "__ec_py=$(command -v python || command -v python3) || exit 0\n"
    "\"$__ec_py\" - <<'EOF'\n"
    "import sys\n"
    "if sys.version_info < (3, 7): sys.exit(0)\n"
    "import compileall, py_compile, re\n"
    "compileall.compile_dir('/testbed', quiet=2, rx=re.compile(r'/\\.git/'), workers=1,\n"
    "    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)\n"
    "EOF\n")
WARM_MARKER = ".git/execcritic-bytecode"


def warm_checkout(checkout: Path | str, *, activate: str = "", binds: Sequence[Path | str] = ()) -> bool:
    """Compile a prepared checkout's Python files once, in place (checked-hash pycs at the paths the sandboxes
    see), so that no run pays for recompiling the Base: every sandbox copies the checkout with its pycs, and
    every reset restores them - a run cannot change what the next run imports. Idempotent and locked; returns
    True if it compiled now."""
    checkout = Path(checkout)
    marker = checkout / WARM_MARKER
    if marker.exists() or not (checkout / ".git").is_dir():
        return False
    with open(checkout / ".git" / "execcritic-bytecode.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return False
        box = LocalSandbox(checkout, activate=activate, binds=binds)
        try:
            box._warm(checkout)          # the checkout itself at /testbed: compiled in place
        finally:
            box.close()
        # git must not see the pycs as untracked files (agents' `git status`, the workspace's Base commit)
        exclude = checkout / ".git" / "info" / "exclude"
        exclude.parent.mkdir(exist_ok=True)
        with open(exclude, "a") as fh:
            fh.write("\n# bytecode compiled by execcritic when the environment was prepared\n__pycache__/\n*.pyc\n")
        marker.write_text("checked-hash pycs compiled by execcritic\n")
        return True


TREE_DIR_ENV = "EXECCRITIC_TREE_DIR"
#: how a sandbox makes its working copy: `overlay` (a mount over the pristine checkout: no copy; needs root),
#: `copy` (cp -a, restored by `TreeSnapshot`), `auto` (overlay where this process may mount, else copy)
WORKING_COPY_ENV = "EXECCRITIC_WORKING_COPY"
WORKING_COPIES = ("auto", "overlay", "copy")
FAST_TREE_DIRS = ("/dev/shm",)
FAST_TREE_MIN_FREE = 4 << 30         # a memory file system with less room left is not used (Docker's is 64 MiB)


NICEST = 19       # a `background` spawn's niceness: it runs only on CPU no other run wants


def fast_tree_dir() -> str | None:
    """Where task environments' sandboxes make their working copies: $EXECCRITIC_TREE_DIR when set ('' = the
    temporary directory), else a memory file system with at least FAST_TREE_MIN_FREE free, else None (the
    temporary directory). A copy there is made at memory speed (Django's checkout: 0.6 s against 8.5 s on this
    machine's disk); the runs' own /tmp and HOME stay in the workspace, on disk."""
    if TREE_DIR_ENV in os.environ:
        return os.environ[TREE_DIR_ENV] or None
    for d in FAST_TREE_DIRS:
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize >= FAST_TREE_MIN_FREE and os.access(d, os.W_OK | os.X_OK):
            return d
    return None


def overlay_working_copy(asked: str, parent: str | None) -> bool:
    """Whether a working copy made under `parent` is an overlay mount: `auto` where this process may mount one,
    `copy` never; `overlay` where it cannot be mounted is refused by name."""
    if asked == "copy":
        return False
    why = overlay.available(parent)
    if why and asked == "overlay":
        raise SandboxError(f"working copy 'overlay' ({WORKING_COPY_ENV}) is not possible here: {why}")
    return why is None


_MAPPED_RE = re.compile(r"(?<![\w./-])/(testbed|tmp|\.execcritic/reporter|\.execcritic/chan)(?=/|$|[^\w.-])")
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
    """A working copy of `checkout` at /testbed, run under bubblewrap (see the module docstring).

    checkout: the prepared Base checkout (as the environment build left it). It is copied or overlaid
        (`working_copy`), never modified. A git worktree (`.git` is a file) is refused: it breaks inside
        the sandbox.
    activate: shell prelude run before every command (e.g. `source /venv/bin/activate`).
    binds: host paths bound read-only at the same path (a venv; its base interpreter is added).
    writable_binds: host dirs (e.g. a venv a check `pip install`s into) copied into the workspace,
        bound read-write at the same path and restored exactly by `reset()`, like /testbed.
    isolated: False = plain subprocess in the copy (explicit opt-out; results say isolated false).
    limits: memory (cgroup v1/v2; `prlimit --as` when no cgroup is usable), processes (pids cgroup;
        `prlimit --nproc` otherwise) and captured output bytes.
    network: False unshares the network namespace (only loopback).
    rootfs: a directory to use as `/` (e.g. the debootstrap rootfs) instead of host dirs.
    warm_bytecode: compile the pristine tree once (checked-hash pycs, so a changed source is never
        served stale bytecode) before snapshotting; the pycs become part of the restored Base.
    pristine: the caller holds `checkout` unchanged while the sandbox lives (a task environment's use lock):
        it is then the reference `reset()` restores from, instead of a copy of it (a copy of Django's checkout,
        22,000 files, took 7 s of this machine's disk writes).
    tree_dir: where the working copy (/testbed) is made, apart from the workspace (tmp, home, channel):
        `fast_tree_dir()` for a memory file system, which copies a checkout 15x faster than this disk.
    ffi: leave ctypes/cffi (`confine.FFI_MODULES`) visible - only for a task whose recipe says its Gold run
        needs them (a reduced guarantee: the tested process can then read its own memory).
    working_copy: `overlay` (mounted over the pristine tree, upper layer under `tree_dir`; needs root), `copy`,
        or `auto` (default; $EXECCRITIC_WORKING_COPY): overlay where this process may mount one.
    """

    backend = "local"
    can_spawn = True

    def __init__(self, checkout: Path | str, *, activate: str = "", binds: Sequence[Path | str] = (),
                 isolated: bool = True, limits: Limits = Limits(), network: bool = False,
                 rootfs: Path | str | None = None, env: Mapping[str, str] | None = None,
                 workspace_dir: Path | str | None = None, warm_bytecode: bool = False,
                 writable_binds: Sequence[Path | str] = (), bwrap: str = "bwrap", ffi: bool = False,
                 pristine: bool = False, tree_dir: Path | str | None = None, working_copy: str | None = None,
                 procfs: bool = False):
        self.checkout = Path(checkout).resolve()
        self._twin_args = {"activate": activate, "binds": binds, "isolated": isolated, "limits": limits,
                           "network": network, "rootfs": rootfs, "env": env, "workspace_dir": workspace_dir,
                           "bwrap": bwrap, "ffi": ffi, "tree_dir": tree_dir, "procfs": procfs}
        self._twin: LocalSandbox | None = None
        self.working_copy = working_copy or os.environ.get(WORKING_COPY_ENV) or "auto"
        if self.working_copy not in WORKING_COPIES:
            raise InputError(f"working copy {self.working_copy!r} is not one of {', '.join(WORKING_COPIES)} (the "
                             f"argument working_copy, or ${WORKING_COPY_ENV})", field="working_copy")
        self.ffi = bool(ffi)
        self.procfs = bool(procfs)
        self.hostname = uuid.uuid4().hex[:12]       # what a container's hostname looks like: nothing to sniff
        self.activate = activate
        self.isolated = bool(isolated)
        self.limits = limits
        self.network = bool(network)
        self.rootfs = Path(rootfs).resolve() if rootfs else None
        self.env = dict(env or {})
        self.warm_bytecode = warm_bytecode
        self._closed = False
        self._held: list = []                    # open files whose locks this sandbox holds while it lives
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
        # the working copy's own directory (tree_dir: another file system) is made now: the finalizer removes both
        try:
            self.tree_ws = Path(tempfile.mkdtemp(prefix="execcritic-tree-", dir=tree_dir)) if tree_dir else self.ws
        except OSError as exc:
            shutil.rmtree(self.ws, ignore_errors=True)
            raise SandboxError(f"cannot make the sandbox's working copy under {tree_dir}: {exc} (set "
                               f"{TREE_DIR_ENV} to another directory, or to '' for the temporary directory)") from exc
        self._finalizer = weakref.finalize(self, _cleanup, self._dirs(), None)
        self.base_dir = self.checkout if pristine and not warm_bytecode else self.ws / "base"
        self.tree, self.tmp, self.home, self.io = (
            self.tree_ws / "testbed", self.ws / "tmp", self.ws / "home", self.ws / "io")
        self.channel_dir = self.ws / "chan"
        self._cgroup: Cgroups | None = None
        self._spawn_cgroup: Cgroups | None = None
        self._spawned: list[SpawnedRun] = []
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
        if self.base_dir != self.checkout:
            _run_checked(["cp", "-a", "--no-target-directory", str(self.checkout), str(self.base_dir)],
                         f"copying checkout {self.checkout}")
        self._timings["copy_s"] = time.monotonic() - t0
        for d, mode in ((self.tmp, 0o1777), (self.home, 0o700), (self.io, 0o700), (self.channel_dir, 0o755)):
            d.mkdir()
            os.chmod(d, mode)
        if self.limits.memory_mb or self.limits.pids:
            name = self._cgroup_name = f"execcritic-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self._cgroup = Cgroups.create(name, memory_mb=self.limits.memory_mb, pids=self.limits.pids)
            self._renew_finalizer()
        if self.warm_bytecode:
            t1 = time.monotonic()
            self._warm(self.base_dir)
            self._timings["warm_bytecode_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        self.overlaid = overlay_working_copy(self.working_copy, str(self.tree_ws.parent))
        if self.overlaid:
            self.snapshot: TreeSnapshot | overlay.OverlayTree = overlay.OverlayTree(
                self.base_dir, self.tree, self.tree_ws / "layers")
            self.snapshot.record()
            self._renew_finalizer()
        else:
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

    def _renew_finalizer(self) -> None:
        """The finalizer removes the workspace and every cgroup the sandbox made so far, after unmounting an
        overlay working copy."""
        self._finalizer.detach()
        cgroups = [str(x) for c in (self._cgroup, self._spawn_cgroup) if c is not None for x in c.paths]
        mounts = [str(self.tree)] if getattr(self, "overlaid", False) else []
        self._finalizer = weakref.finalize(self, _cleanup, self._dirs(), cgroups or None, mounts)

    def _dirs(self) -> list[str]:
        return [str(self.ws)] + ([str(self.tree_ws)] if self.tree_ws != self.ws else [])

    def _warm(self, tree: Path) -> None:
        res = self._run(WARM_SCRIPT, timeout=1800, env=None, cwd="/", stdin=None, tree=tree)
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

    def _ffi_args(self) -> list[str]:
        """Every foreign-function module a Python visible in the sandbox could load behind /dev/null, and the
        inert ctypes over every `ctypes/__init__.py` (confine.py)."""
        if self.ffi:
            return []
        base = Path("/") if self.rootfs is None else self.rootfs
        roots = [str(base / "usr"), *sorted(glob.glob(str(base / "opt" / "*")))] + [str(b) for b in self.binds]
        hidden, packages = confine.ffi_files(tuple(roots))
        out = []
        for files, source in ((hidden, "/dev/null"), (packages, str(confine.INERT_CTYPES))):
            for f in files:
                inside = self.rootfs is not None and f.startswith(str(base) + "/")
                dest = "/" + os.path.relpath(f, base) if inside else f
                out += ["--ro-bind", source, dest]
        return out

    def bwrap_argv(self, script: str, *, cwd: str, tree: Path | None = None, seccomp_fd: int | None = None,
                   reporter: bool = False) -> list[str]:
        """The bwrap command line for one run (exposed for tests and manifests). No `--proc`: the tested code
        gets no procfs (confine.py); `seccomp_fd` is a descriptor holding `confine.seccomp_program()`; the
        reporter's directories are there only for a `reporter` run (a plain one has no `/.execcritic`)."""
        tree = tree or self.tree
        argv = [self._bwrap or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
                "--unshare-ipc", "--unshare-uts", "--hostname", self.hostname]
        if not self.network:
            argv.append("--unshare-net")
        if os.geteuid() == 0:
            argv += ["--cap-drop", "ALL"]
            for cap in BWRAP_CAPS:
                argv += ["--cap-add", cap]
        else:
            argv += ["--unshare-user", "--uid", "0", "--gid", "0"]
        argv += self._root_args()
        argv += ["--dev", "/dev", *(("--proc", "/proc") if self.procfs else ()),
                 "--bind", str(self.tmp), "/tmp",          # before anything that may live under /tmp
                 "--bind", str(self.home), "/root"]
        for b in self.binds:
            argv += ["--ro-bind", str(b), str(b)]
        for w, snap in self._wsnaps:
            argv += ["--bind", str(snap.work), str(w)]
        if reporter:
            argv += ["--ro-bind", str(HARNESS_FILES), HARNESS_MOUNT, "--ro-bind", str(self.channel_dir), CHANNEL_MOUNT]
        argv += self._ffi_args()
        argv += ["--bind", str(tree), WORKDIR, "--remount-ro", "/", "--chdir", "/"]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        argv += ["bash", "-c", script]
        return argv

    def _script(self, command: str, cwd: str) -> str:
        prelude = self.activate.strip()
        return (f"{prelude}\n" if prelude else "") + f"cd -- {shlex.quote(cwd)} || exit 126\n{command}"

    def _map_path(self, text: str) -> str:
        """Non-isolated mode: /testbed, /tmp and the harness mounts in command text -> their host dirs."""
        hosts = {"testbed": self.tree, "tmp": self.tmp, ".execcritic/reporter": HARNESS_FILES,
                 ".execcritic/chan": self.channel_dir}
        return _MAPPED_RE.sub(lambda m: str(hosts[m.group(1)]), text)

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        out = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", "USER": "root"}
        if not self.isolated:
            out.update({"HOME": str(self.home), "TMPDIR": str(self.tmp),
                        "EXECCRITIC_TESTBED": str(self.tree)})
        out.update(self.env)
        out.update(env or {})
        if not self.isolated:
            out = {k: self._map_path(v) for k, v in out.items()}
        return out

    # -- running ------------------------------------------------------------------------------
    def run(self, command: str, *, timeout: float, env: Mapping[str, str] | None = None,
            cwd: str | None = None, stdin: bytes | None = None, reporter: bool = False) -> CommandResult:
        self._check_open()
        return self._run(command, timeout=timeout, env=env, cwd=cwd or WORKDIR, stdin=stdin, tree=None,
                         reporter=reporter)

    def _run(self, command: str, *, timeout: float, env, cwd: str, stdin: bytes | None,
             tree: Path | None, reporter: bool = False) -> CommandResult:
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds (got {timeout!r})")
        self.generation += 1
        return self._collect(self._start(command, env=env, cwd=cwd, stdin=stdin, tree=tree, cgroup=self._cgroup,
                                         reporter=reporter), timeout)

    def spawn(self, command: str, *, env: Mapping[str, str] | None = None,
              cwd: str | None = None, reset: bool = False, reporter: bool = False,
              background: bool = False) -> "SpawnedRun":
        """Start `command` now and collect it later (`SpawnedRun.wait(timeout)`: the clock starts there). It
        runs in cgroups of its own with the same limits, so that runs made meanwhile (applying a patch) and
        their cleanup leave it alone; `reset()` and `close()` kill it."""
        self._check_open()
        if reset:
            self.reset()
        if self._spawn_cgroup is None and self._cgroup is not None:
            self._spawn_cgroup = Cgroups.create(self._cgroup_name + "-spawn", memory_mb=self.limits.memory_mb,
                                                pids=self.limits.pids)
            self._renew_finalizer()
        self.generation += 1
        # niced only where its cgroup lists every process it starts, for `foreground` to restore
        nice = NICEST if background and self._spawn_cgroup is not None and self._spawn_cgroup.procs_files else 0
        run = SpawnedRun(self, self._start(command, env=env, cwd=cwd or WORKDIR, stdin=None, tree=None,
                                           cgroup=self._spawn_cgroup, reporter=reporter, nice=nice))
        self._spawned.append(run)
        return run

    def _start(self, command: str, *, env, cwd: str, stdin: bytes | None, tree: Path | None,
               cgroup: Cgroups | None, reporter: bool = False, nice: int = 0) -> "_Started":
        if not cwd.startswith("/"):
            raise ValueError(f"cwd must be an absolute sandbox path (got {cwd!r})")
        started_r = started_w = filter_fd = None
        if self.isolated:
            # bash says "started" on a private fd and closes it before the script runs: no output text
            # can fake or hide a bwrap setup failure.
            started_r, started_w = os.pipe()
            filter_fd = _seccomp_fd()
            script = f"printf 1 >&{started_w}; exec {started_w}>&-\n" + self._script(command, cwd)
            argv = self.bwrap_argv(script, cwd=cwd, tree=tree, seccomp_fd=filter_fd, reporter=reporter)
            run_cwd = str(self.io)
        else:
            # map the command and cwd only: the activation prelude names real host paths (a venv may
            # itself live under /tmp) and must reach bash unchanged
            argv = ["bash", "-c", self._script(self._map_path(command), self._map_path(cwd))]
            run_cwd = str(self.tree)
        rlimits = []
        if self.limits.memory_mb and not (cgroup and cgroup.memory):
            rlimits.append(f"--as={int(self.limits.memory_mb) * 1024 * 1024}")
        if self.limits.pids and not (cgroup and cgroup.pids):
            rlimits.append(f"--nproc={int(self.limits.pids)}")
        if rlimits:
            argv = ["prlimit", *rlimits, "--", *argv]
        if nice:
            argv = ["nice", "-n", str(nice), *argv]
        if cgroup is not None and cgroup.procs_files:
            # join every cgroup before exec: nothing the command starts runs outside them
            joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(cgroup.procs_files)))
            n = len(cgroup.procs_files)
            argv = ["/bin/sh", "-c", f'{joins} && shift {n} && exec "$@"', "sh",
                    *(str(f) for f in cgroup.procs_files), *argv]
        stdin_f = None
        if stdin is not None:
            stdin_f = tempfile.TemporaryFile(dir=self.io)
            stdin_f.write(stdin)
            stdin_f.seek(0)
        oom_before = cgroup.oom_kills() if cgroup else 0
        pids_before = cgroup.pids_refused() if cgroup else 0
        try:
            proc = subprocess.Popen(argv, stdin=stdin_f if stdin_f is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self._env(env),
                                    cwd=run_cwd, start_new_session=True,
                                    pass_fds=tuple(f for f in (started_w, filter_fd) if f is not None))
        except OSError as exc:
            if started_r is not None:
                os.close(started_r)
            raise SandboxError(f"could not start the local sandbox for {self.checkout}: {exc}") from exc
        finally:
            if stdin_f is not None:
                stdin_f.close()
            for fd in (started_w, filter_fd):
                if fd is not None:
                    os.close(fd)
        return _Started(proc, started_r, cgroup, oom_before, pids_before)

    def _collect(self, st: "_Started", timeout: float) -> CommandResult:
        proc = st.proc
        cap = OutputCapture(self.limits.output_bytes)
        timed_out = False
        t0 = time.monotonic()
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
                self._kill(proc, st.cgroup)
            duration = time.monotonic() - t0
            self._kill_leftovers(proc, st.cgroup)
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
                self._kill(proc, st.cgroup)
                proc.wait(5)
            started = _read_started(st.started_r)
        oom = bool(st.cgroup and st.cgroup.oom_kills() > st.oom_before)
        pids_limited = bool(st.cgroup and st.cgroup.pids_refused() > st.pids_before)
        rc = proc.returncode
        if st.started_r is not None:
            if not started and not timed_out:
                raise SandboxError(f"bubblewrap could not set up the sandbox for {self.checkout} "
                                   f"(exit {rc}): {cap.text()[-1000:]}")
        return CommandResult(exit_code=rc, output=cap.text(), timed_out=timed_out, oom_killed=oom,
                             duration_s=duration, truncated=cap.truncated, isolated=self.isolated,
                             pids_limited=pids_limited)

    @staticmethod
    def _kill(proc: subprocess.Popen, cgroup: Cgroups | None) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        if cgroup is not None:
            cgroup.kill_all()

    def _kill_leftovers(self, proc: subprocess.Popen, cgroup: Cgroups | None) -> None:
        """Nothing a run started outlives it: the process group, and the whole cgroup when we have one
        (bwrap's pid namespace already ends with its init)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if cgroup is not None and not cgroup.kill_all():
            raise SandboxError(f"processes of the sandbox for {self.checkout} survived SIGKILL "
                               f"(cgroups {', '.join(str(x) for x in cgroup.paths)})")

    # -- files --------------------------------------------------------------------------------
    def _roots(self) -> dict[str, Path]:
        return {WORKDIR: self.tree, "/tmp": self.tmp, "/root": self.home}

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, *, mtime: int | None = None) -> None:
        self.generation += 1
        self._check_open()
        hostfs.write(path, data.encode() if isinstance(data, str) else bytes(data), mode, mtime, self._roots())

    def read_file(self, path: str) -> bytes:
        self._check_open()
        return hostfs.read(path, self._roots())

    def changed_paths(self) -> list[str]:
        self._check_open()
        return self.snapshot.changed()

    def twin(self) -> "LocalSandbox | None":
        """An overlay working copy is a new upper layer over the pristine tree: a twin costs a mount, not a copy.
        It overlays this sandbox's Base (warmed bytecode included) and has its own /tmp, HOME, channel and
        cgroups. None for a copied working copy, a writable bind (each copy costs a copy) or no isolation."""
        self._check_open()
        if self._twin is None and self.overlaid and self.isolated and not self.writable_binds:
            self._twin = LocalSandbox(self.base_dir, pristine=True, working_copy="overlay", **self._twin_args)
        return self._twin

    # -- reset / close ------------------------------------------------------------------------
    def reset(self) -> None:
        self._check_open()
        self.generation += 1
        self._end_spawned()
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
        if self._twin is not None:
            self._twin.close()
        self._end_spawned()
        for cgroup in (self._cgroup, self._spawn_cgroup):
            if cgroup is not None:
                cgroup.remove()
        self._finalizer()
        while self._held:
            self._held.pop().close()

    def hold(self, resource) -> None:
        """Keep `resource` (an open lock file: the environment's use lock) until this sandbox closes."""
        self._held.append(resource)

    def _end_spawned(self) -> None:
        while self._spawned:
            self._spawned.pop().kill()

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
            "limits": {"memory_mb": self.limits.memory_mb, "pids": self.limits.pids,
                       "output_bytes": self.limits.output_bytes},
            "limit_enforcement": self._cgroup.label if self._cgroup else ("rlimit" if (self.limits.memory_mb or
                                                                                    self.limits.pids) else None),
            "oom_detection": "cgroup" if (self._cgroup and self._cgroup.memory) else "none",
            "pids_detection": "cgroup" if (self._cgroup and self._cgroup.pids) else "none",
            "sandbox": (bwrap_version() if self.isolated else "plain subprocess"),
            "confinement": ("seccomp filter, " + ("procfs of its pid namespace" if self.procfs else "no procfs")
                            + ", " + ("ffi visible (recipe)" if self.ffi else "no ffi modules"))
            if self.isolated else "none",
            "rootfs": str(self.rootfs) if self.rootfs else "host",
            "binds": [str(b) for b in self.binds],
            "writable_binds": [str(w) for w, _ in self._wsnaps],
            "activate": self.activate,
            "warm_bytecode": self.warm_bytecode,
            "working_copy": "overlay" if self.overlaid else "copy",
            "reset": ("a new empty upper layer over the pristine checkout" if self.overlaid else
                      "ctime inventory, exact restore from a pristine copy"),
            "timings": dict(self._timings),
        })
        if not self.isolated:
            d["path_mapping"] = {"/testbed": str(self.tree), "/tmp": str(self.tmp), "HOME": str(self.home)}
        return d


@dataclass
class _Started:
    proc: subprocess.Popen
    started_r: int | None          # the fd bash writes its start byte to (isolated runs)
    cgroup: Cgroups | None
    oom_before: int
    pids_before: int


class SpawnedRun:
    """A command `LocalSandbox.spawn` started; `wait(timeout)` collects it like `run` would have."""

    def __init__(self, sandbox: LocalSandbox, started: _Started):
        self._sandbox = weakref.proxy(sandbox)   # (callers may key the sandbox weakly and hold this)
        self._started, self._done = started, False
        self.on_kill: list = []                  # called when the run is killed instead of collected

    def alive(self) -> bool:
        return not self._done and self._started.proc.poll() is None

    def foreground(self) -> None:
        """Back to the normal CPU priority (a `background` spawn): every process of its cgroup, before it goes on.
        Processes it starts later inherit it."""
        cgroup = self._started.cgroup
        for pid in cgroup.members() if cgroup is not None else ():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.setpriority(os.PRIO_PROCESS, pid, 0)

    def _finish(self) -> None:
        self._done = True
        with contextlib.suppress(ValueError):
            self._sandbox._spawned.remove(self)

    def wait(self, timeout: float) -> CommandResult:
        if self._done:
            raise RuntimeError("this spawned run was already collected or killed")
        self._finish()
        return self._sandbox._collect(self._started, timeout)

    def kill(self) -> None:
        if self._done:
            return
        self._finish()
        st = self._started
        self._sandbox._kill(st.proc, st.cgroup)
        with contextlib.suppress(subprocess.TimeoutExpired):
            st.proc.wait(5)
        st.proc.stdout.close()
        _read_started(st.started_r)
        for fn in self.on_kill:
            fn()


def _seccomp_fd() -> int:
    """A descriptor positioned at the start of the seccomp program (bwrap reads it to the end)."""
    fd = os.memfd_create("execcritic-seccomp", os.MFD_CLOEXEC)
    os.write(fd, confine.seccomp_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


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


def _cleanup(dirs: list[str], cgroups: list[str] | None, mounts: Sequence[str] = ()) -> None:
    """Finalizer: remove the workspace and the tree's directory (and empty cgroup dirs) even if close() was
    never called; an overlay working copy is unmounted first."""
    for m in mounts:
        with contextlib.suppress(SandboxError):
            overlay.unmount(m)
    for cg in cgroups or ():
        with contextlib.suppress(OSError):
            os.rmdir(cg)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
