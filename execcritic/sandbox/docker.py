"""The `docker` backend: one long-lived container per sandbox, reset exactly before every grade.

Users run it on the official `swebench/sweb.eval.*` images (repo at /testbed, conda env `testbed`);
tests run it on a debootstrap image built locally (`images.py`) against a real daemon.

Container layout (why each part exists):
- PID 1 is a bash loop blocked on an open stdin: it has no child, reaps orphans, and ignores
  signals sent from inside, so `kill -9 -1` (run after every command, on timeout and before a
  reset) kills everything a command started - daemonized children included - and nothing else.
  One exception: a run started ahead (`spawn`, harness/prestart.py) waits in its exec's session, and
  the commands run meanwhile (applying the patches) kill every process but that session's. An exec
  starts as a session leader and no process can join another session, so nothing they start can
  hide there; the spawned run's own end, a reset and any other `spawn` kill everything.
- Files of the tree, /tmp and HOME are read, written and listed from the host when the daemon is
  local and this process is root without user-namespace remapping (`hostfs`: links resolve as in
  the container and never out of the volumes; the rest goes through the Docker API).
- /testbed, /tmp, HOME (/root) and /.execcritic/io are per-sandbox volumes; the rest is the image
  filesystem. The official eval scripts `pip install` the repo into the env, so that filesystem
  stays writable by default, and a reset checks it: if a command changed anything there (read from
  the overlay upper dir on the host when the daemon is local, else `docker diff`), the container
  is replaced by a fresh one on the same volumes, so a `pip install`, a `.pth` file or a trojaned
  tool never survives into the next check. `read_only_root=True` forbids such writes instead.
- The pristine /testbed and HOME are copied once, by a short-lived helper container, into a
  volume mounted read-only at /.execcritic/snap: the code under test can read but never alter
  the state it will be reset to.
- Reset kills every process, then restores only what changed since the last restore: entries
  not in the snapshot are removed, entries whose ctime is newer than the recorded restore time
  (a ctime cannot be forged without CAP_SYS_TIME) are copied back, missing ones are copied
  back, and changed directories get owner/mode/times from the snapshot. /tmp is emptied.
- Network is `none` unless asked for; the memory limit (no swap) is the container's cgroup, and
  OOM kills are read from that cgroup's own counter (memory.oom_control / memory.events).
- `close()` removes the container with SIGKILL (`remove(force=True)`): no 15 s `docker stop`.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import queue
import re
import shlex
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path

from execcritic.errors import EnvironmentMissing, SandboxError
from execcritic.sandbox.base import (
    CHANNEL_MOUNT,
    HARNESS_FILES,
    HARNESS_MOUNT,
    WORKDIR,
    CommandResult,
    Limits,
    Sandbox,
)
from execcritic.sandbox import confine, hostfs
from execcritic.sandbox.capture import OutputCapture

OFFICIAL_ACTIVATE = "source /opt/miniconda3/bin/activate && conda activate testbed"
SNAP = "/.execcritic/snap"
IO_DIR = "/.execcritic/io"

# PID 1: no child process, blocked reading a stdin that dockerd keeps open (stdin_open=True).
KEEPER = "trap '' TERM INT HUP; while :; do read -r _ || sleep 3600; done"

# The container cgroup's own counters: OOM kills and forks the pids limit refused ("oom=N pids=N";
# -1 when a counter is unreadable).
_COUNTERS_FN = (
    '__ec_count() { local key="$1" f k v; shift; '
    'for f in "$@"; do if [ -r "$f" ]; then while read -r k v; do '
    'if [ "$k" = "$key" ]; then echo "$v"; return; fi; '
    'done < "$f"; fi; done; echo -1; }\n'
    '__ec_counters() { printf "oom=%s pids=%s" '
    '"$(__ec_count oom_kill /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events)" '
    '"$(__ec_count max /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events)"; }\n')
# Kill every process but PID 1 and this shell. With a session id ($1), that session is spared: a run started
# ahead (`spawn`) waits in it while the harness applies patches. A docker exec starts as a session leader, and no
# process can move into another session, so nothing a command starts can hide there; the spared run's own
# wrapper kills everything when it ends, and a reset kills everything.
_KILL_FN = r"""__ec_kill_all() {
  local spare="${1:-}" i=0 n p l st f
  if [ -z "$spare" ]; then
    while kill -9 -1 2>/dev/null; do i=$((i+1)); if [ $i -ge 500 ]; then return 1; fi; sleep 0.01; done
    return 0
  fi
  while :; do
    n=0
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      if [ "$p" = 1 ] || [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ]; then continue; fi
      l=; { read -r l < "/proc/$p/stat"; } 2>/dev/null || continue
      read -r st _ _ f _ <<< "${l##*) }"
      if [ "$st" = Z ] || [ "$f" = "$spare" ]; then continue; fi
      kill -9 "$p" 2>/dev/null && n=$((n+1))
    done
    if [ $n = 0 ]; then return 0; fi
    i=$((i+1)); if [ $i -ge 500 ]; then return 1; fi
    sleep 0.01
  done
}
"""

# One command: $1 = inner script (prelude + cd + command), $2 = stdin file or "", $3 = the session to spare or "",
# $4 = "inline": stdin is $5; $6 = "spawn": say the session id first (on stderr: the output is the command's);
# $7 = the confinement script (`_confine_script`): the command runs only after it, and only it says so, on the
# exec's stderr (a descriptor it closes before the command starts, whose own stderr goes to the output stream: no
# output of the command can fake it).
RUN_WRAPPER = (
    _COUNTERS_FN + _KILL_FN
    + 'if [ "${6:-}" = spawn ]; then printf \'EXECCRITIC-SPAWNED sid=%s\\n\' "$$" >&2; fi\n'
    + '__ec_in() { unshare --mount --propagation private -- bash -c "$7" confine "$1" 3>&2 2>&1; }\n'
    + 'if [ "${4:-}" = inline ]; then printf %s "$5" | __ec_in "$@"; '
    + 'else __ec_in "$@" < "${2:-/dev/null}"; fi\n'
    + '__ec_rc=$?\n'
    + '__ec_kill_all "${3:-}"\n'
    + "printf '\\nEXECCRITIC-TRAILER rc=%s %s\\n' \"$__ec_rc\" \"$(__ec_counters)\" >&2\n"
    + 'exit $__ec_rc\n')
CONFINED = b"EXECCRITIC-CONFINED"

# Docker's default capabilities: what the command keeps once the confinement wrapper has dropped CAP_SYS_ADMIN
# (which the container holds only so that the wrapper can build the command's mount namespace)
COMMAND_CAPS = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap", "net_bind_service",
                "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap")
CONFINE_TOOLS = ("unshare", "mount", "umount", "setpriv", "mktemp")
# what the image must provide for `_confine_script` (util-linux, coreutils), checked when the sandbox starts
_TOOLS_SCRIPT = "for t in " + " ".join(CONFINE_TOOLS) + "; do command -v \"$t\" >/dev/null || echo \"$t\"; done; true\n"
# Binaries the harness's own execs run (with the container's capabilities): read-only for the command
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _confine_script(hide: list[str], ffi_files: list[str], ctypes_packages: list[str]) -> str:
    """Run by the wrapper in a fresh, private mount namespace, as root with the container's capabilities: unmount
    the harness's own volumes (`hide`), make the system directories read-only (the harness's execs run binaries
    from there with CAP_SYS_ADMIN), put /dev/null over the foreign-function modules and the inert ctypes over the
    ctypes packages (confine.py), unmount /proc (last:
    mount(8) reads it), then drop every capability Docker would not give a container (the bounding set
    too) with no_new_privs, and exec the command ($1). Any failing step ends the run before the command starts.
    The seccomp profile (confine.docker_profile) applies to all of it."""
    q = shlex.quote
    lines = ["set -eu"]
    # (the inert ctypes comes from the reporter's mount, before that is unmounted)
    lines += [f"mount --bind {q(confine.INERT_CTYPES_MOUNTED)} {q(p)}" for p in ctypes_packages]
    lines += [f"umount -l {q(h)}" for h in hide]
    lines += [f'if [ -d {q(d)} ] && [ ! -L {q(d)} ]; then mount --rbind {q(d)} {q(d)}; '
              f'mount -o remount,bind,ro {q(d)}; fi' for d in SYSTEM_DIRS]
    lines += [f"mount --bind /dev/null {q(f)}" for f in ffi_files]      # (after the binds above, or under them)
    lines += ["umount -l /proc",
              f"printf '{CONFINED.decode()}\\n' >&3; exec 3>&-",
              "exec setpriv --bounding-set=-all," + ",".join("+" + c for c in COMMAND_CAPS)
              + " --inh-caps=-all --no-new-privs -- bash -c \"$1\""]
    return "\n".join(lines) + "\n"


# Timeout / recovery: kill everything but PID 1 (and session $1, when given) and report the counters.
KILL_SCRIPT = (_COUNTERS_FN + _KILL_FN + '__ec_kill_all "${1:-}" || true\n'
               + "printf 'EXECCRITIC-TRAILER rc=0 %s\\n' \"$(__ec_counters)\"\n")

# Reset: $1 = time of the last restore (epoch.ns), then "work:snap" pairs; dirs to empty in EC_CLEAN.
# Only entries whose ctime moved past $1 are looked at: new ones are removed, changed files/links
# (and type changes) are copied back, a changed dir gets back the children it lost plus its own
# owner/mode/times. Deletions always move the parent dir's ctime, so nothing is missed; tar
# (--format=posix keeps nanosecond mtimes) does the copying in two processes whatever the count.
RESET_SCRIPT = _COUNTERS_FN + r"""
set -Eeuo pipefail
trap 'echo "EXECCRITIC-RESET-ERROR line $LINENO: $BASH_COMMAND" >&2; exit 6' ERR
export LC_ALL=C
T="$1"; shift
__ec_i=0
while kill -9 -1 2>/dev/null; do
  __ec_i=$((__ec_i+1))
  if [ $__ec_i -ge 500 ]; then echo "EXECCRITIC-RESET-ERROR processes survive SIGKILL" >&2; exit 3; fi
  sleep 0.01
done
shopt -s nullglob dotglob
removed=0; restored=0; dirs=0
sync_tree() {
  local W="$1" B="$2" p c q skip=""
  local -a changed=() rm_list=() cp_list=() dir_list=()
  local -A in_dirs=()
  cd -- "$W" || { echo "EXECCRITIC-RESET-ERROR cannot enter $W" >&2; exit 4; }
  mapfile -d '' changed < <(find . -newerct "@$T" -printf '%P\0')
  for p in "${changed[@]}"; do
    if [ -z "$p" ]; then dir_list+=("."); in_dirs["."]=1; continue; fi
    if [ -n "$skip" ] && [[ "$p" == "$skip"* ]]; then continue; fi
    if [ ! -e "$B/$p" ] && [ ! -L "$B/$p" ]; then
      rm_list+=("$p"); skip="$p/"; continue
    fi
    if [ -d "$B/$p" ] && [ ! -L "$B/$p" ] && [ -d "$p" ] && [ ! -L "$p" ]; then
      dir_list+=("$p"); in_dirs["$p"]=1; continue
    fi
    rm_list+=("$p"); cp_list+=("$p"); skip="$p/"
  done
  for p in "${dir_list[@]}"; do
    for c in "$B/$p"/*; do
      c="${c#"$B/"}"; c="${c#./}"
      if [ ! -e "$c" ] && [ ! -L "$c" ]; then cp_list+=("$c"); fi
    done
  done
  # removing/replacing an entry changes its parent: that dir's times come back from the snapshot too
  for p in "${rm_list[@]}" "${cp_list[@]}"; do
    q="."; [[ "$p" == */* ]] && q="${p%/*}"
    if [ -z "${in_dirs[$q]:-}" ] && [ -d "$B/$q" ] && [ ! -L "$B/$q" ]; then
      dir_list+=("$q"); in_dirs["$q"]=1
    fi
  done
  if [ ${#rm_list[@]} -gt 0 ]; then
    printf '%s\0' "${rm_list[@]}" | xargs -0 rm -rf --
    removed=$((removed + ${#rm_list[@]} - ${#cp_list[@]}))
  fi
  if [ ${#cp_list[@]} -gt 0 ]; then
    printf '%s\0' "${cp_list[@]}" | tar -C "$B" --format=posix --null -T - -cf - \
      | tar -C "$W" -xpf - --same-owner \
      || { echo "EXECCRITIC-RESET-ERROR restoring files in $W failed" >&2; exit 5; }
    restored=$((restored + ${#cp_list[@]}))
  fi
  if [ ${#dir_list[@]} -gt 0 ]; then
    printf '%s\0' "${dir_list[@]}" | tar -C "$B" --format=posix --null --no-recursion -T - -cf - \
      | tar -C "$W" -xpf - --same-owner \
      || { echo "EXECCRITIC-RESET-ERROR restoring directories in $W failed" >&2; exit 5; }
    dirs=$((dirs + ${#dir_list[@]}))
  fi
}
for pair in "$@"; do sync_tree "${pair%%:*}" "${pair#*:}"; done
clean=()
for d in ${EC_CLEAN:-}; do clean+=("$d"/*); done
if [ ${#clean[@]} -gt 0 ]; then rm -rf -- "${clean[@]}"; fi
chmod 1777 /tmp
now=$(date +%s.%N)
sleep 0.012
# the report goes to a file the harness reads through the Docker API (an HTTP transfer), not only to the
# exec's attached stdout: the reset's result must not depend on the attach stream of a short-lived exec
printf 'EXECCRITIC-RESET t=%s removed=%s restored=%s dirs=%s %s\n' \
  "$now" "$removed" "$restored" "$dirs" "$(__ec_counters)" > "$EC_REPORT"
if [ -n "${EC_THEN+x}" ]; then
  # reset, then start a run ahead in this same process (`spawn(reset=True)`): the report goes to stderr, the
  # output stream is the command's
  __then=$EC_THEN; __wrap=$EC_WRAPPER; __confine=$EC_CONFINE
  cat "$EC_REPORT" >&2
  unset EC_THEN EC_WRAPPER EC_CLEAN EC_REPORT EC_CONFINE
  trap - ERR; set +Eeuo pipefail
  exec bash -c "$__wrap" execcritic "$__then" "" "" "" "" spawn "$__confine"
fi
cat "$EC_REPORT"
"""

# What changed in the tree since the last restore ($1 = its time, $2 = tree, $3 = snapshot): entries whose
# ctime moved past $1 that are files/links, new, or directories that were not one, and snapshot entries a
# changed directory lost. (hostfs.changed_since gives the same answer from the host.)
CHANGED_SCRIPT = r"""
set -eu
T="$1"; W="$2"; B="$3"
cd -- "$W"
shopt -s nullglob dotglob
find . -newerct "@$T" -printf '%P\0' | while IFS= read -r -d '' p; do
  [ -z "$p" ] && p="."
  if [ -d "$p" ] && [ ! -L "$p" ]; then
    if [ ! -d "$B/$p" ] || [ -L "$B/$p" ]; then printf '%s\n' "$p"; fi
    for c in "$B/$p"/*; do
      c="${c#"$B/"}"; c="${c#./}"
      if [ ! -e "$c" ] && [ ! -L "$c" ]; then printf '%s\n' "$c"; fi
    done
  else
    printf '%s\n' "$p"
  fi
done
echo EXECCRITIC-CHANGED-END
"""

# First fill of the empty volumes from the snapshot; same trailer as a reset.
INIT_SCRIPT = _COUNTERS_FN + r'''
set -eu
for pair in "$@"; do
  W="${pair%%:*}"; B="${pair#*:}"
  cp -a -- "$B/." "$W/"
  chown -h --reference="$B" -- "$W"; chmod --reference="$B" -- "$W"; touch -h -r "$B" -- "$W"
done
chmod 1777 /tmp
now=$(date +%s.%N)
sleep 0.012
printf 'EXECCRITIC-RESET t=%s removed=0 restored=0 dirs=0 %s\n' "$now" "$(__ec_counters)"
'''

_SPAWNED_RE = re.compile(rb"EXECCRITIC-SPAWNED sid=(\d+)")
#: stdin up to this size travels in the exec's arguments (one argument may hold 128 KiB); larger, as a file
INLINE_STDIN_BYTES = 96 * 1024


def _inline_text(data: bytes) -> str | None:
    """`data` as an exec argument (UTF-8 text without NUL, small enough), else None."""
    if len(data) > INLINE_STDIN_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


_TRAILER_RE = re.compile(rb"EXECCRITIC-TRAILER rc=(-?\d+) oom=(-?\d+) pids=(-?\d+)")
_RESET_RE = re.compile(r"EXECCRITIC-RESET t=(\d+\.\d+) removed=(\d+) restored=(\d+) dirs=(\d+) oom=(-?\d+) "
                       r"pids=(-?\d+)")


def _docker_errors():
    import docker  # lazy: docker SDK
    import requests  # lazy: docker SDK

    return docker.errors, requests.exceptions


class DockerSandbox(Sandbox):
    """A container from `image` with the repo at `workdir` (see the module docstring).

    image: e.g. `swebench/sweb.eval.x86_64.django_1776_django-11099:latest`, or a task image built
        by `images.build_task_image` (then pass `activate=""`: it has no conda).
    client: a `docker.DockerClient`; default `docker.from_env()`.
    activate: shell prelude before every command (official images: conda `testbed`).
    limits: container memory (swap disabled; OOM kills reported per run), container pids limit, captured
        output bytes.
    network: False = `network_mode="none"`.
    read_only_root: keep the image filesystem read-only (writable: workdir, /tmp, HOME); default
        False: writes there are allowed and undone by `reset()` (fresh container, same volumes).
    warm_bytecode: compile the pristine tree (checked-hash pycs) before snapshotting it.
    host_files: read, write and list files in the volumes' host directories where possible (None: when the
        daemon is local and this process is root without user-namespace remapping); False: always through the
        Docker API (archive transfers, execs), as with a remote daemon.
    ffi: leave ctypes/cffi visible to commands (`confine.FFI_MODULES`): only for a task whose recipe says its
        Gold run needs them.

    Every command runs confined (`_confine_script`, `confine.docker_profile`): no procfs, no foreign-function
    modules, read-only system directories, Docker's default capabilities only, and the seccomp profile.
    """

    backend = "docker"
    can_spawn = True

    def __init__(self, image: str, *, client=None, workdir: str = WORKDIR, activate: str = OFFICIAL_ACTIVATE,
                 limits: Limits = Limits(), network: bool = False, read_only_root: bool = False,
                 home: str = "/root", env: Mapping[str, str] | None = None, name: str | None = None,
                 warm_bytecode: bool = False, nano_cpus: int | None = None, host_files: bool | None = None,
                 ffi: bool = False):
        errors, req_errors = _docker_errors()
        self.ffi = bool(ffi)
        self._ffi_files: list[str] = []
        self._ctypes_packages: list[str] = []
        self.image = image
        self.workdir = workdir
        self.activate = activate
        self.limits = limits
        self.network = bool(network)
        self.read_only_root = read_only_root
        self.home = home
        self.env = dict(env or {})
        self.warm_bytecode = warm_bytecode
        self.nano_cpus = nano_cpus
        self.host_files = host_files
        self.isolated = True
        self._closed = False
        self._container = None
        self._snap_volume: str | None = None
        self._timings: dict[str, float] = {}
        self._oom_seen = 0
        self._pids_seen = 0
        self._restored_at = "0"
        self.last_restore: dict[str, int] = {}
        self.recreations = 0
        self._rootfs_mode = "unknown"
        self._rootfs_baseline: frozenset | None = None
        self._upperdir = ""
        self._spawned: DockerSpawnedRun | None = None
        self._pending_reset: str | None = None    # restore time before a reset `spawn` started in the background
        self._host_roots: dict[str, Path] = {}
        self._host_snap: Path | None = None
        if client is None:
            import docker  # lazy: docker SDK

            try:
                client = docker.from_env()
                client.ping()
            except Exception as exc:
                raise EnvironmentMissing(
                    f"no Docker engine reachable ({exc}); start one, set DOCKER_HOST, or use "
                    "execcritic.sandbox.dockerd.start_dockerd()") from exc
        self.client = client
        try:
            img = client.images.get(image)
        except errors.ImageNotFound as exc:
            raise EnvironmentMissing(f"Docker image {image} is not present: `docker pull {image}` (official "
                                     "SWE-bench images), or build it (execcritic.sandbox.images)") from exc
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise SandboxError(f"Docker engine error looking up image {image}: {exc}") from exc
        self.image_id = img.id
        self._sid = uuid.uuid4().hex[:12]
        self.name = name or f"execcritic-{self._sid}"
        self.channel_dir = Path(tempfile.mkdtemp(prefix="execcritic-chan-"))
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    # -- creation ------------------------------------------------------------------------------
    def _pairs(self) -> list[str]:
        return [f"{self.workdir}:{SNAP}/tree", f"{self.home}:{SNAP}/home"]

    def _create(self) -> None:
        from docker.types import Mount  # lazy: docker SDK

        errors, req_errors = _docker_errors()
        t0 = time.monotonic()
        self._snap_volume = f"execcritic-snap-{self._sid}"
        self.client.volumes.create(self._snap_volume, labels={"execcritic.sandbox": self.name})
        warm = ""
        if self.warm_bytecode:
            warm = ((self.activate.strip() + "\n") if self.activate.strip() else "") + (
                "__ec_py=$(command -v python || command -v python3 || true)\n"
                "if [ -n \"$__ec_py\" ]; then \"$__ec_py\" - <<'EOF'\n"
                "import sys\n"
                "if sys.version_info >= (3, 7):\n"
                "    import compileall, py_compile, re\n"
                f"    compileall.compile_dir({self.workdir!r}, quiet=2, rx=re.compile(r'/\\.git/'),\n"
                "        workers=1,\n"
                "        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)\n"
                "EOF\nfi\n")
        helper = (f"set -e\n{warm}set -e\n"
                  f"cp -a -- {shlex.quote(self.workdir)} {SNAP}/tree\n"
                  f"if [ -d {shlex.quote(self.home)} ]; then cp -a -- {shlex.quote(self.home)} {SNAP}/home; "
                  f"else mkdir -m 700 {SNAP}/home; fi\n")
        try:
            self.client.containers.run(
                self.image, command=["bash", "-c", helper], remove=True, network_mode="none", user="0",
                mounts=[Mount(SNAP, self._snap_volume, type="volume")],
                labels={"execcritic.sandbox": self.name}, entrypoint=[])
        except errors.ContainerError as exc:
            raise SandboxError(f"snapshotting {self.workdir} of image {self.image} failed: "
                               f"{(exc.stderr or b'').decode(errors='replace')[-2000:]}") from exc
        self._timings["snapshot_s"] = time.monotonic() - t0
        for role in ("tree", "home", "tmp", "io"):
            self.client.volumes.create(self._volume(role), labels={"execcritic.sandbox": self.name})
        self._host_roots, self._host_snap = self._host_volumes()
        t1 = time.monotonic()
        self._start_container()
        self._timings["start_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        self._apply_reset_output(self._exec_simple(["bash", "-c", INIT_SCRIPT, "init", *self._pairs()],
                                                   what="filling the working volumes"))
        self._timings["fill_s"] = time.monotonic() - t2
        self._check_confinement()
        self._set_rootfs_baseline()

    def _volume(self, role: str) -> str:
        return f"execcritic-{self._sid}-{role}"

    def _check_confinement(self) -> None:
        """The image must have what the confinement wrapper runs; its foreign-function modules are listed once."""
        missing = self._exec_simple(["bash", "-c", _TOOLS_SCRIPT], what="looking for the confinement tools").split()
        if missing:
            raise EnvironmentMissing(f"image {self.image} lacks {', '.join(missing)} (util-linux, coreutils): every "
                                     "command runs in its own mount namespace without /proc, and cannot without them")
        if not self.ffi:
            out = self._exec_simple(["bash", "-c", confine.FIND_FFI_SCRIPT], what="listing foreign-function modules")
            lines = out.splitlines()
            if not lines or lines[-1] != "EXECCRITIC-FFI-END":
                raise SandboxError(f"listing the foreign-function modules of image {self.image} gave no complete "
                                   "answer")
            self._ffi_files = sorted(ln for ln in lines[:-1] if ln.startswith("/"))
            self._ctypes_packages = sorted(ln[1:] for ln in lines[:-1] if ln.startswith("+/"))

    def _confinement(self, reporter: bool) -> str:
        hide = [SNAP, IO_DIR] + ([] if reporter else [HARNESS_MOUNT, CHANNEL_MOUNT])
        return _confine_script(hide, self._ffi_files, self._ctypes_packages)

    def _host_volumes(self) -> tuple[dict[str, Path], Path | None]:
        """The working volumes' host directories, when the daemon is local and this process may use them as the
        container's root would (it runs as root, no user namespace remapping): files are then read, written and
        listed there (`hostfs`) instead of by archive transfers and execs. Else ({}, None)."""
        if self.host_files is False or os.geteuid() != 0:
            return {}, None
        try:
            opts = " ".join(self.client.info().get("SecurityOptions") or [])
            points = {role: Path(self.client.volumes.get(name).attrs["Mountpoint"])
                      for role, name in [(r, self._volume(r)) for r in ("tree", "home", "tmp", "io")] +
                      [("snap", self._snap_volume)]}
        except Exception:  # noqa: BLE001 - no host access is only slower
            return {}, None
        if "userns" in opts or "rootless" in opts or not all(p.is_dir() for p in points.values()):
            return {}, None
        return ({self.workdir: points["tree"], self.home: points["home"], "/tmp": points["tmp"],
                 IO_DIR: points["io"]}, points["snap"] / "tree")

    def _start_container(self) -> None:
        from docker.types import Mount  # lazy: docker SDK

        errors, req_errors = _docker_errors()
        kwargs = {
            "command": ["bash", "-c", KEEPER], "entrypoint": [], "detach": True, "stdin_open": True,
            "name": self.name, "hostname": self._sid, "user": "0", "working_dir": self.workdir,
            # the wrapper builds each command's mount namespace with CAP_SYS_ADMIN, then drops it (`_confine_script`)
            "cap_add": ["SYS_ADMIN"], "security_opt": [f"seccomp={confine.docker_profile()}"],
            "read_only": self.read_only_root, "labels": {"execcritic.sandbox": self.name},
            "mounts": [Mount(SNAP, self._snap_volume, type="volume", read_only=True),
                       Mount(self.workdir, self._volume("tree"), type="volume", no_copy=True),
                       Mount(self.home, self._volume("home"), type="volume", no_copy=True),
                       Mount("/tmp", self._volume("tmp"), type="volume", no_copy=True),
                       Mount(IO_DIR, self._volume("io"), type="volume", no_copy=True),
                       Mount(HARNESS_MOUNT, str(HARNESS_FILES), type="bind", read_only=True),
                       Mount(CHANNEL_MOUNT, str(self.channel_dir), type="bind", read_only=True)],
        }
        if not self.network:
            kwargs["network_mode"] = "none"
        if self.limits.memory_mb:
            kwargs["mem_limit"] = f"{int(self.limits.memory_mb)}m"
            kwargs["memswap_limit"] = f"{int(self.limits.memory_mb)}m"
        if self.limits.pids:
            kwargs["pids_limit"] = int(self.limits.pids)
        if self.nano_cpus:
            kwargs["nano_cpus"] = self.nano_cpus
        try:
            self._container = self.client.containers.run(self.image, **kwargs)
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise SandboxError(f"could not start a container from {self.image}: {exc}") from exc
        self._oom_seen = 0
        self._pids_seen = 0

    # -- guarding the image filesystem (read_only_root=False) ----------------------------------
    def _set_rootfs_baseline(self) -> None:
        """Record the container layer as it is before any command ran (mount points, and whatever
        the activation prelude writes), and choose how changes to it are detected."""
        if self.read_only_root:
            self._rootfs_mode = "read-only"
            self._rootfs_baseline = None
            return
        if self.activate.strip():
            self._exec_simple(["bash", "-c", self.activate + "\ntrue"],
                              what=f"running the activation prelude {self.activate!r} (pass activate='' "
                                   "for an image without conda)")
        self._container.reload()
        gd = self._container.attrs.get("GraphDriver") or {}
        upper = (gd.get("Data") or {}).get("UpperDir")
        if gd.get("Name") == "overlay2" and upper and os.path.isdir(upper) \
                and os.access(upper, os.R_OK | os.X_OK):
            self._rootfs_mode = "upperdir"
            self._upperdir = upper
        else:
            self._rootfs_mode = "docker-diff"
        self._rootfs_baseline = self._rootfs_state()

    def _rootfs_state(self) -> frozenset:
        """What the commands changed in the image filesystem: the overlay upper dir read on the host
        (paths with inode and ctime, so rewriting a file in place counts too), else `docker diff`."""
        errors, req_errors = _docker_errors()
        if self._rootfs_mode == "upperdir":
            out = set()
            for dirpath, dirnames, filenames in os.walk(self._upperdir):
                for name in dirnames + filenames:
                    full = os.path.join(dirpath, name)
                    try:
                        st = os.lstat(full)
                    except FileNotFoundError:
                        continue
                    out.add((full[len(self._upperdir):], st.st_ino, st.st_ctime_ns))
            return frozenset(out)
        try:
            return frozenset((c["Path"], c["Kind"]) for c in (self._container.diff() or []))
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise self._gone(exc) from exc

    def _rootfs_changed(self) -> bool:
        return self._rootfs_baseline is not None and self._rootfs_state() != self._rootfs_baseline

    def _recreate(self) -> None:
        """Replace the container by a fresh one from the image, on the same volumes (which the
        following reset script brings back to the snapshot)."""
        errors, req_errors = _docker_errors()
        try:
            self._container.remove(force=True)
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise self._gone(exc) from exc
        self._start_container()
        self.recreations += 1

    # -- low-level exec -------------------------------------------------------------------------
    def _gone(self, exc: Exception | None = None) -> SandboxError:
        state = "unknown"
        with contextlib.suppress(Exception):
            self._container.reload()
            state = self._container.status
        detail = f": {exc}" if exc else ""
        return SandboxError(f"container {self.name} (image {self.image}) is not usable "
                            f"(state {state}){detail}")

    def _running(self) -> bool:
        try:
            self._container.reload()
            return self._container.status == "running"
        except Exception:
            return False

    def _exec_simple(self, cmd: list[str], *, what: str,
                     environment: dict[str, str] | None = None) -> str:
        """Run a helper command to completion (no user code); SandboxError on any failure."""
        errors, req_errors = _docker_errors()
        api = self.client.api
        try:
            exec_id = api.exec_create(self._container.id, cmd, stdout=True, stderr=True, user="0", workdir="/",
                                      environment=environment)["Id"]
            output = api.exec_start(exec_id, demux=True)
            # the exit status of a process that just closed its output may not be recorded yet: wait for it
            info = api.exec_inspect(exec_id)
            deadline = time.monotonic() + 30
            while info.get("Running") and time.monotonic() < deadline:
                time.sleep(0.01)
                info = api.exec_inspect(exec_id)
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise self._gone(exc) from exc
        out = (output[0] or b"").decode("utf-8", "replace") if output else ""
        err = (output[1] or b"").decode("utf-8", "replace") if output else ""
        code = info.get("ExitCode")
        if info.get("Running") or code != 0:
            if not self._running():
                raise self._gone()
            raise SandboxError(f"{what} in container {self.name} failed (exit {code}"
                               f"{', still running after 30 s' if info.get('Running') else ''}): {err[-2000:]}")
        return out

    def _apply_reset_output(self, out: str) -> None:
        m = None
        for m in _RESET_RE.finditer(out):
            pass
        if m is None:
            raise SandboxError(f"reset of container {self.name} gave no report: {out[-500:]}")
        self._restored_at = m.group(1)
        self.last_restore = {"removed": int(m.group(2)), "restored": int(m.group(3)),
                             "dirs_fixed": int(m.group(4))}
        self._oom_seen = max(self._oom_seen, int(m.group(5)))
        self._pids_seen = max(self._pids_seen, int(m.group(6)))

    # -- the interface --------------------------------------------------------------------------
    def _script(self, command: str, cwd: str) -> str:
        prelude = self.activate.strip()
        return (f"{prelude}\n" if prelude else "") + f"cd -- {shlex.quote(cwd)} || exit 126\n{command}"

    def run(self, command: str, *, timeout: float, env: Mapping[str, str] | None = None,
            cwd: str | None = None, stdin: bytes | None = None, reporter: bool = False) -> CommandResult:
        self._check_open()
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds (got {timeout!r})")
        self._settle()
        self.generation += 1
        spare = self._spare()
        args = [self._script_checked(command, cwd), "", spare, "", "", "", self._confinement(reporter)]
        if stdin is not None:
            inline = _inline_text(stdin)
            if inline is not None:
                args[3:5] = ["inline", inline]      # in the exec's arguments: no archive upload
            else:
                args[1] = f"{IO_DIR}/stdin-{uuid.uuid4().hex[:8]}"
                self._put_many([(args[1], stdin, 0o600, None)])
        return self._collect(self._start_exec(["bash", "-c", RUN_WRAPPER, "execcritic", *args], env), timeout,
                             spare)

    def _script_checked(self, command: str, cwd: str | None) -> str:
        cwd = cwd or self.workdir
        if not cwd.startswith("/"):
            raise ValueError(f"cwd must be an absolute sandbox path (got {cwd!r})")
        return self._script(command, cwd)

    def _start_exec(self, cmd: list[str], env: Mapping[str, str] | None) -> "_Exec":
        errors, req_errors = _docker_errors()
        environment = {**self.env, **(env or {})}
        try:
            exec_id = self.client.api.exec_create(self._container.id, cmd, stdout=True, stderr=True, stdin=False,
                                                  tty=False, user="0", environment=environment or None,
                                                  workdir="/")["Id"]
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise self._gone(exc) from exc
        return _Exec(self, exec_id)

    def _collect(self, ex: "_Exec", timeout: float, spare: str) -> CommandResult:
        """Stream `ex` to its end under `timeout` (counted from now), then read its status and counters."""
        errors, req_errors = _docker_errors()
        t0 = time.monotonic()
        deadline = t0 + timeout
        timed_out = False
        t_end: float | None = None
        kill_out = ""
        while not ex.ended:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not timed_out:
                timed_out = True
                t_end = time.monotonic()
                kill_out = self._kill_all(spare)
                deadline = time.monotonic() + 30  # time for the stream to end after the kill
                continue
            if remaining <= 0:
                raise SandboxError(f"the output stream of container {self.name} did not end 30 s after "
                                   "its processes were killed")
            ex.pump(min(remaining, 1.0))
        duration = (t_end or time.monotonic()) - t0
        if ex.error is not None:
            raise self._gone(ex.error)
        trailer = None
        for m in _TRAILER_RE.finditer(bytes(ex.err_tail)):
            trailer = m
        api = self.client.api
        try:
            info = api.exec_inspect(ex.exec_id)
            for _ in range(100):
                if not info.get("Running"):
                    break
                time.sleep(0.01)
                info = api.exec_inspect(ex.exec_id)
        except (errors.APIError, req_errors.ConnectionError) as exc:
            raise self._gone(exc) from exc
        rc = info.get("ExitCode")
        if trailer is None and not timed_out:
            # the wrapper did not finish: the container died under us, or the command killed it
            if not self._running():
                raise self._gone()
            kill_out = self._kill_all(spare)
        if trailer is not None and CONFINED not in ex.err_head and not timed_out:
            raise SandboxError(f"container {self.name}: the confinement wrapper did not start the command (a mount "
                               f"or capability step failed): {ex.cap.text()[-1500:]}")
        counters = trailer
        if counters is None:
            for counters in _TRAILER_RE.finditer(kill_out.encode()):
                pass
        oom = pids_limited = False
        if counters is not None:
            oom_now, pids_now = int(counters.group(2)), int(counters.group(3))
            oom, pids_limited = oom_now > self._oom_seen, pids_now > self._pids_seen   # -1 (unreadable) never counts
            self._oom_seen, self._pids_seen = max(self._oom_seen, oom_now), max(self._pids_seen, pids_now)
        if rc is None:
            if not self._running():
                raise self._gone()
            rc = -9 if timed_out else -1
        return CommandResult(exit_code=int(rc), output=ex.cap.text(), timed_out=timed_out, oom_killed=oom,
                             pids_limited=pids_limited, duration_s=duration, truncated=ex.cap.truncated,
                             isolated=True)

    # -- runs started ahead (harness/prestart.py) --------------------------------------------------
    def spawn(self, command: str, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
              reset: bool = False, reporter: bool = False, background: bool = False) -> "DockerSpawnedRun":
        """Start `command` now, collect it later (`wait(timeout)`: the clock starts there). It waits in a session
        of its own, which the runs made meanwhile (applying a patch) spare when they kill what they started; a
        reset and `close()` kill it. `reset=True`: reset first, in the same exec and in the background - every
        other call on the sandbox first waits for that reset's report (`_settle`). `background` changes nothing
        here: a container has no twin to start a run in while another goes."""
        self._check_open()
        self._settle()
        self._end_spawned()
        self.generation += 1
        script = self._script_checked(command, cwd)
        if reset:
            clean = " ".join(shlex.quote(d) for d in ("/tmp", "/dev/shm", IO_DIR))
            cmd = ["bash", "-c", RESET_SCRIPT, "reset", self._restored_at, *self._pairs()]
            env = {**(env or {}), "EC_CLEAN": clean, "EC_REPORT": f"{IO_DIR}/.reset-report", "EC_THEN": script,
                   "EC_WRAPPER": RUN_WRAPPER, "EC_CONFINE": self._confinement(reporter)}
            self._pending_reset = self._restored_at
        else:
            cmd = ["bash", "-c", RUN_WRAPPER, "execcritic", script, "", "", "", "", "spawn",
                   self._confinement(reporter)]
        t0 = time.monotonic()
        run = DockerSpawnedRun(self, self._start_exec(cmd, env))
        self._spawned = run
        if not reset:
            self._await_spawned(run)
        self._timings["last_spawn_s"] = time.monotonic() - t0
        return run

    def _await_spawned(self, run: "DockerSpawnedRun") -> bool:
        """Wait until `run` says its session id (after its reset's report, if any). False if it ended first."""
        deadline = time.monotonic() + 120
        while run.sid is None and not run.ex.ended and time.monotonic() < deadline:
            run.ex.pump(0.5)
            m = _SPAWNED_RE.search(bytes(run.ex.err_head))
            if m:
                run.sid = m.group(1).decode()
        return run.sid is not None

    def _settle(self) -> None:
        """Account for a reset started in the background by `spawn(reset=True)`: wait for its report, check the
        image filesystem as `reset()` does; if it failed, reset here (SandboxError if that fails too)."""
        trusted_t = self._pending_reset
        if trusted_t is None:
            return
        self._pending_reset = None
        run = self._spawned
        t0 = time.monotonic()
        ok = run is not None and self._await_spawned(run)
        if ok:
            try:
                self._apply_reset_output(bytes(run.ex.err_head).decode("utf-8", "replace"))
            except SandboxError:
                ok = False
        if not ok:
            self._end_spawned()
            self._reset_exec()
        self._after_restore(trusted_t)
        self._timings["last_reset_s"] = time.monotonic() - t0

    def _spare(self) -> str:
        """The session of the run started ahead, while it waits (the runs made meanwhile spare it)."""
        run = self._spawned
        return run.sid if run is not None and run.sid is not None and not run.done and not run.ex.ended else ""

    def _end_spawned(self) -> None:
        run, self._spawned = self._spawned, None
        if run is not None:
            run.kill()

    def _kill_all(self, spare: str = "") -> str:
        return self._exec_simple(["bash", "-c", KILL_SCRIPT, "kill", spare], what="killing the command's processes")

    def write_files(self, files: list[tuple[str, bytes, int, int | None]]) -> None:
        self._check_open()
        self._settle()
        self.generation += 1
        for path, _data, _mode, _mtime in files:
            if not path.startswith("/") or path.endswith("/"):
                raise ValueError(f"write_files needs absolute file paths (got {path!r})")
        if files:
            self._put_many([(p, bytes(d), m, t) for p, d, m, t in files])

    def _put_many(self, files: list[tuple[str, bytes, int, int | None]]) -> None:
        """Write on the host where the path stays in a working volume (`_host_volumes`), the rest in one
        archive upload."""
        if not self._host_roots:
            self._put_archive(files)
            return
        rest = []
        for path, data, mode, mtime in files:
            try:
                hostfs.write(path, data, mode, mtime, self._host_roots)
            except hostfs.Outside:
                rest.append((path, data, mode, mtime))
        if rest:
            self._put_archive(rest)

    def _put_archive(self, files: list[tuple[str, bytes, int, int | None]]) -> None:
        """One put_archive: a tar rooted at the files' common directory (missing directories inside it are
        created by the extraction)."""
        errors, req_errors = _docker_errors()
        paths = [posixpath.normpath(p) for p, *_ in files]
        parent = posixpath.commonpath([posixpath.dirname(p) for p in paths])
        path = paths[0] if len(paths) == 1 else parent
        buf = io.BytesIO()
        now = int(time.time())
        with tarfile.open(fileobj=buf, mode="w") as tf:
            for full, (_p, data, mode, mtime) in zip(paths, files):
                ti = tarfile.TarInfo(posixpath.relpath(full, parent))
                ti.size = len(data)
                ti.mode = mode
                ti.mtime = now if mtime is None else int(mtime)
                ti.uid = ti.gid = 0
                tf.addfile(ti, io.BytesIO(data))
        payload = buf.getvalue()
        for attempt in (1, 2):
            try:
                if self._container.put_archive(parent, payload):
                    return
                raise SandboxError(f"put_archive of {path} into container {self.name} failed")
            except errors.NotFound:
                if attempt == 2:
                    raise
                self._exec_simple(["mkdir", "-p", "--", parent], what=f"creating {parent}")
            except errors.APIError as exc:
                if "read-only" in str(exc):
                    raise PermissionError(f"{path}: read-only in the sandbox (writable: {self.workdir}, "
                                          f"/tmp, {self.home})") from exc
                raise self._gone(exc) from exc
            except req_errors.ConnectionError as exc:
                raise self._gone(exc) from exc

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, *, mtime: int | None = None) -> None:
        self._check_open()
        self._settle()
        self.generation += 1
        if not path.startswith("/") or path.endswith("/"):
            raise ValueError(f"write_file needs an absolute file path (got {path!r})")
        self._put_many([(path, data.encode() if isinstance(data, str) else bytes(data), mode, mtime)])

    def read_file(self, path: str) -> bytes:
        self._check_open()
        self._settle()
        errors, req_errors = _docker_errors()
        if not path.startswith("/"):
            raise ValueError(f"read_file needs an absolute path (got {path!r})")
        if self._host_roots:
            with contextlib.suppress(hostfs.Outside):
                return hostfs.read(path, self._host_roots)
        cur = posixpath.normpath(path)
        for _ in range(40):
            try:
                stream, _stat = self._container.get_archive(cur)
                raw = b"".join(stream)
            except errors.NotFound as exc:
                raise FileNotFoundError(2, f"no file at {path} in container {self.name}", path) from exc
            except (errors.APIError, req_errors.ConnectionError) as exc:
                raise self._gone(exc) from exc
            with tarfile.open(fileobj=io.BytesIO(raw)) as tf:
                members = tf.getmembers()
                if not members:
                    raise FileNotFoundError(2, f"no file at {path}", path)
                m = members[0]
                if m.issym():
                    cur = posixpath.normpath(posixpath.join(posixpath.dirname(cur), m.linkname))
                    continue
                if not m.isfile():
                    raise FileNotFoundError(2, f"{path} is not a regular file", path)
                return tf.extractfile(m).read()
        raise OSError(40, f"too many symlinks resolving {path}")

    def reset(self) -> None:
        """Kill everything, restore the volumes; if the image filesystem changed (a `pip install`,
        a file written under /usr), replace the container by a fresh one and restore again."""
        self._check_open()
        self._settle()
        self.generation += 1
        t0 = time.monotonic()
        trusted_t = self._restored_at
        self._end_spawned()
        self._reset_exec()
        self._after_restore(trusted_t)
        self._timings["last_reset_s"] = time.monotonic() - t0

    def _after_restore(self, trusted_t: str) -> None:
        recreated = False
        if self._rootfs_changed():
            # Whatever ran may have altered the tools the reset used: start from a fresh container
            # and restore the volumes relative to the last restore time we know to be genuine.
            self._end_spawned()
            self._recreate()
            self._restored_at = trusted_t
            self._reset_exec()
            self._set_rootfs_baseline()
            recreated = True
        self.last_restore["recreated"] = int(recreated)

    def changed_paths(self) -> list[str]:
        self._check_open()
        self._settle()
        if self._host_snap is not None:
            sec, _, frac = self._restored_at.partition(".")
            return hostfs.changed_since(self._host_roots[self.workdir], self._host_snap,
                                        int(sec) * 10**9 + int((frac + "000000000")[:9]))
        out = self._exec_simple(["bash", "-c", CHANGED_SCRIPT, "changed", self._restored_at, self.workdir,
                                 f"{SNAP}/tree"], what="listing changed paths")
        lines = out.splitlines()
        if not lines or lines[-1] != "EXECCRITIC-CHANGED-END":
            raise SandboxError(f"listing the changed paths of container {self.name} gave no complete answer")
        return sorted({ln for ln in lines[:-1] if ln})

    def _reset_exec(self) -> None:
        """Run the reset script; its report is read back from the file it wrote (through the Docker API,
        after the exec's exit status says it finished), never from the exec's attached output alone."""
        clean = " ".join(shlex.quote(d) for d in ("/tmp", "/dev/shm", IO_DIR))
        report = f"{IO_DIR}/.reset-report"
        out = self._exec_simple(["bash", "-c", RESET_SCRIPT, "reset", self._restored_at, *self._pairs()],
                                what="reset", environment={"EC_CLEAN": clean, "EC_REPORT": report})
        if not _RESET_RE.search(out):
            try:
                out = self.read_file(report).decode("utf-8", "replace")
            except FileNotFoundError:
                raise SandboxError(f"reset of container {self.name} exited 0 but left no report at {report} "
                                   f"(attached output: {out[-300:]!r})") from None
        self._apply_reset_output(out)

    def close(self) -> None:
        """Remove the container with SIGKILL (no stop grace period) and its volumes. Idempotent."""
        if self._closed:
            return
        self._closed = True
        run, self._spawned, self._pending_reset = self._spawned, None, None
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.remove(force=True, v=True)
        if run is not None:
            run.ended_by_close()
        shutil.rmtree(self.channel_dir, ignore_errors=True)
        names = [self._snap_volume] if self._snap_volume else []
        names += [self._volume(r) for r in ("tree", "home", "tmp", "io")]
        for name in names:
            for _ in range(20):
                try:
                    self.client.volumes.get(name).remove(force=True)
                    break
                except Exception as exc:  # noqa: BLE001 - gone already, or in use for a moment
                    if "no such volume" in str(exc).lower() or "not found" in str(exc).lower():
                        break
                    time.sleep(0.1)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"docker sandbox {self.name} is closed")

    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    def describe(self) -> dict:
        d = super().describe()
        d.update({
            "image": self.image,
            "image_id": self.image_id,
            "container": self.name,
            "network": self.network,
            "limits": {"memory_mb": self.limits.memory_mb, "pids": self.limits.pids,
                       "output_bytes": self.limits.output_bytes},
            "limit_enforcement": "container cgroup (memory, swap off; pids)",
            "oom_detection": "container cgroup oom_kill counter",
            "pids_detection": "container cgroup pids.events max counter",
            "read_only_root": self.read_only_root,
            "rootfs_guard": self._rootfs_mode,
            "recreations": self.recreations,
            "writable": [self.workdir, "/tmp", self.home],
            "activate": self.activate,
            "warm_bytecode": self.warm_bytecode,
            "reset": "ctime since last restore, exact restore from a read-only snapshot volume",
            "file_access": "host (volume directories)" if self._host_roots else "Docker API (archives, execs)",
            "spawn": "waits in its exec's session, spared by the runs made meanwhile",
            "confinement": ("own mount namespace without procfs, read-only system dirs, Docker default caps, seccomp "
                            "profile, " + ("ffi visible (recipe)" if self.ffi else
                                           f"{len(self._ffi_files)} ffi modules hidden")),
            "timings": dict(self._timings),
        })
        return d


_ERR_HEAD_BYTES = 64 * 1024      # room for a reset's warnings before its report and the spawned run's session id


class _Exec:
    """A started exec whose output a thread streams into a queue; `pump` moves it into the capture."""

    def __init__(self, sandbox: DockerSandbox, exec_id: str):
        self.exec_id = exec_id
        self.cap = OutputCapture(sandbox.limits.output_bytes)
        self.err_head = bytearray()      # the first stderr bytes: a reset's report, a spawned run's session id
        self.err_tail = bytearray()      # the last ones: the trailer
        self.ended = False
        self.error: Exception | None = None
        self._q: queue.Queue = queue.Queue()
        api = sandbox.client.api

        def pump():
            try:
                for out, err in api.exec_start(exec_id, stream=True, demux=True):
                    self._q.put((out, err))
            except Exception as exc:  # daemon/connection failure: reported by the collector
                self._q.put(exc)
            finally:
                self._q.put(None)

        threading.Thread(target=pump, name=f"execcritic-exec-{sandbox.name}", daemon=True).start()

    def pump(self, timeout: float) -> None:
        """Take what arrived (waiting up to `timeout` for the first item)."""
        block = True
        while not self.ended:
            try:
                item = self._q.get(timeout=timeout) if block else self._q.get_nowait()
            except queue.Empty:
                return
            block = False
            if item is None:
                self.ended = True
            elif isinstance(item, Exception):
                self.error = item
            else:
                out, err = item
                if out:
                    self.cap.feed(out)
                if err:
                    if len(self.err_head) < _ERR_HEAD_BYTES:
                        self.err_head += err[:_ERR_HEAD_BYTES - len(self.err_head)]
                    self.err_tail += err
                    del self.err_tail[:-4096]

    def wait_end(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ended and time.monotonic() < deadline:
            self.pump(min(0.5, max(0.0, deadline - time.monotonic())))


class DockerSpawnedRun:
    """A command `DockerSandbox.spawn` started; `wait(timeout)` collects it like `run` would have."""

    def __init__(self, sandbox: DockerSandbox, ex: _Exec):
        self._sandbox = weakref.proxy(sandbox)   # (callers may key the sandbox weakly and hold this)
        self.ex = ex
        self.sid: str | None = None              # its session id, once it said it
        self.done = False
        self.on_kill: list = []                  # called when the run is killed instead of collected

    def foreground(self) -> None:
        """(Never started in the background: see `DockerSandbox.spawn`.)"""

    def alive(self) -> bool:
        if self.done:
            return False
        self._sandbox._settle()
        self.ex.pump(0)
        return not self.done and self.sid is not None and not self.ex.ended

    def wait(self, timeout: float) -> CommandResult:
        if self.done:
            raise RuntimeError("this spawned run was already collected or killed")
        self._sandbox._settle()
        if self.done:                            # the reset before it found the image changed: it is gone
            raise SandboxError("the run started ahead ended before it was released (its container was replaced)")
        self._detach()
        return self._sandbox._collect(self.ex, timeout, "")

    def _detach(self) -> None:
        self.done = True
        if self._sandbox._spawned is self:
            self._sandbox._spawned = None

    def _ended(self) -> None:
        for fn in self.on_kill:
            fn()

    def kill(self) -> None:
        if self.done:
            return
        sb = self._sandbox
        with contextlib.suppress(SandboxError):
            sb._settle()                 # a reset it started must finish before anything is killed
        if self.done:                    # (that reset replaced the container, and ended it)
            return
        self._detach()
        try:
            with contextlib.suppress(SandboxError):
                sb._kill_all()
                self.ex.wait_end(30)
        finally:
            self._ended()

    def ended_by_close(self) -> None:
        if not self.done:
            self._detach()
            self._ended()
