"""A private Docker engine: start/stop our own `dockerd` when no engine is running.

Why: CI machines and these dev VMs have Debian's `docker.io` installed but no daemon (no systemd),
and the stock daemon cannot start in them without flags (no iptables, no bridge, the ulimits the
VM allows). We start one with its own socket, data-root and exec-root under the user cache dir, so
it never collides with a system daemon and its image store (the debootstrap test images) survives
between runs. Flags are the ones measured to work (SPEC section 5, ecosystem notes section 3).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from execcritic.errors import EnvironmentMissing, SandboxError

DOCKERD_FLAGS = (
    "--iptables=false",
    "--ip-masq=false",
    "--bridge=none",
    "--default-ulimit", "nofile=1024:1024",
    "--default-ulimit", "nproc=4096:4096",
)


def default_root() -> Path:
    """`<user cache>/execcritic/dockerd` (override with EXECCRITIC_DOCKERD_ROOT)."""
    env = os.environ.get("EXECCRITIC_DOCKERD_ROOT")
    if env:
        return Path(env)

    return Path(platformdirs.user_cache_dir("execcritic")) / "dockerd"


def dockerd_command(root: Path, dockerd: str = "dockerd") -> list[str]:
    """The exact command line (pure): own socket, data-root, exec-root, pidfile and config file."""
    return [
        dockerd,
        "-H", f"unix://{root / 'docker.sock'}",
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"),
        "--pidfile", str(root / "dockerd.pid"),
        "--config-file", str(root / "daemon.json"),
        *DOCKERD_FLAGS,
    ]


@dataclass
class PrivateDockerd:
    """A running private daemon. `owned` is False when we attached to one already running."""

    root: Path
    owned: bool
    process: subprocess.Popen | None = None
    _clients: list[Any] = field(default_factory=list, repr=False)

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def log_path(self) -> Path:
        return self.root / "dockerd.log"

    def client(self, timeout: int = 120):
        """A new `docker.DockerClient` on this daemon's socket."""
        import docker  # lazy: docker SDK

        c = docker.DockerClient(base_url=self.base_url, timeout=timeout)
        self._clients.append(c)
        return c

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the daemon if we started it (SIGTERM, then SIGKILL). Attached daemons are left running."""
        for c in self._clients:
            with contextlib.suppress(Exception):
                c.close()
        self._clients.clear()
        if not self.owned or self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


def _ping(socket: Path, timeout: float = 3.0) -> bool:
    if not socket.exists():
        return False
    import docker  # lazy: docker SDK

    try:
        c = docker.DockerClient(base_url=f"unix://{socket}", timeout=timeout)
        try:
            return bool(c.ping())
        finally:
            c.close()
    except Exception:
        return False


def check_available(dockerd: str = "dockerd") -> str:
    """Path of the dockerd binary; EnvironmentMissing (saying how to fix) when it cannot be used."""
    path = shutil.which(dockerd) or (dockerd if os.path.isfile(dockerd) else None)
    if path is None and dockerd == "dockerd":  # sbin may be missing from a non-root PATH
        for cand in ("/usr/sbin/dockerd", "/usr/bin/dockerd"):
            if os.path.isfile(cand):
                path = cand
                break
    if path is None:
        raise EnvironmentMissing(
            "dockerd is not installed: install Debian's engine with "
            "`apt-get install -y --no-install-recommends docker.io` (it brings containerd and runc), "
            "or point DOCKER_HOST at a running engine")
    if os.geteuid() != 0:
        raise EnvironmentMissing(
            f"a private dockerd ({path}) needs root (euid is {os.geteuid()}); run as root, or use an "
            "engine that is already running via DOCKER_HOST")
    return path


def start_dockerd(root: Path | None = None, *, timeout: float = 60.0, reuse: bool = True,
                  dockerd: str = "dockerd") -> PrivateDockerd:
    """Start (or attach to) the private daemon under `root` and wait until it answers a ping.

    A file lock serializes concurrent starters (parallel test sessions); if a daemon already answers
    on the socket it is reused and not stopped by us. Raises EnvironmentMissing when dockerd is not
    installed or we are not root, SandboxError (with the log tail) when it does not come up.
    """
    root = Path(root) if root is not None else default_root()
    root.mkdir(parents=True, exist_ok=True)
    sock = root / "docker.sock"
    with open(root / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if reuse and _ping(sock):
            return PrivateDockerd(root=root, owned=False)
        binary = check_available(dockerd)
        for p in (root / "data", root / "exec"):
            p.mkdir(parents=True, exist_ok=True)
        (root / "daemon.json").write_text(json.dumps({}))
        _clear_stale(root)
        log = open(root / "dockerd.log", "ab")
        log.write(f"\n=== execcritic: starting dockerd at {time.strftime('%F %T')} ===\n".encode())
        log.flush()
        proc = subprocess.Popen(dockerd_command(root, binary), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SandboxError(f"dockerd exited with status {proc.returncode} while starting; "
                                   f"log tail ({root / 'dockerd.log'}):\n{_tail(root / 'dockerd.log')}")
            if _ping(sock, timeout=2.0):
                return PrivateDockerd(root=root, owned=True, process=proc)
            time.sleep(0.2)
        proc.kill()
        proc.wait(10)
        raise SandboxError(f"dockerd did not answer on {sock} within {timeout:.0f}s; "
                           f"log tail ({root / 'dockerd.log'}):\n{_tail(root / 'dockerd.log')}")


def _clear_stale(root: Path) -> None:
    """Remove a stale socket/pidfile left by a daemon that died (no one answers on the socket)."""
    pidfile = root / "dockerd.pid"
    if pidfile.exists():
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            pidfile.unlink(missing_ok=True)
        except PermissionError:
            pass
        else:
            raise SandboxError(f"a dockerd (pid {pid}, pidfile {pidfile}) is running but does not answer on "
                               f"{root / 'docker.sock'}; stop it or remove {pidfile}")
    (root / "docker.sock").unlink(missing_ok=True)


def _tail(path: Path, n: int = 3000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no log)"
    return data[-n:].decode("utf-8", "replace")


def connect(base_url: str | None = None, *, start: bool = True, root: Path | None = None):
    """A docker client: DOCKER_HOST / `base_url` if it answers, else our private daemon (started if
    `start`). Returns (client, PrivateDockerd | None)."""
    import docker  # lazy: docker SDK

    url = base_url or os.environ.get("DOCKER_HOST")
    if url:
        try:
            c = docker.DockerClient(base_url=url, timeout=120)
            c.ping()
            return c, None
        except Exception as exc:
            raise SandboxError(f"no Docker engine answers at {url} ({exc}); unset DOCKER_HOST to use a "
                               "private dockerd") from exc
    if _ping(Path("/var/run/docker.sock")):
        return docker.DockerClient(base_url="unix:///var/run/docker.sock", timeout=120), None
    if not start:
        raise EnvironmentMissing("no Docker engine is running (no DOCKER_HOST, no /var/run/docker.sock)")
    d = start_dockerd(root)
    return d.client(), d
