"""Images without a registry: a debootstrap Debian rootfs imported into Docker, and task images.

Why: no registry is reachable here (and in CI), so the Docker path is exercised with an image we
build: `debootstrap --variant=minbase` (~1.5 min, cached under the user cache dir) then
`docker import`. `build_task_image` puts a local git checkout at /testbed on top of it, mirroring
the layout of the official `swebench/sweb.eval.*` images (repo at /testbed, tools on PATH), so the
same DockerSandbox code runs against both. The rootfs doubles as a `/` for the local bwrap backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import platformdirs

from execcritic.errors import EnvironmentMissing, SandboxError

BASE_IMAGE = "execcritic/test-base:bookworm"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "git", "python3-pytest", "python3-venv", "patch")
DIGEST_LABEL = "execcritic.source-digest"

Progress = Callable[[str], None]


def _stderr_progress(msg: str) -> None:
    print(f"[execcritic images] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:

    return Path(os.environ.get("EXECCRITIC_IMAGE_CACHE") or
                Path(platformdirs.user_cache_dir("execcritic")) / "images")


def rootfs_path(suite: str = SUITE) -> Path:
    return cache_dir() / f"rootfs-{suite}"


def _marker(packages: tuple[str, ...], suite: str) -> str:
    return f"suite={suite} variant=minbase include={','.join(sorted(packages))}\n"


def ensure_rootfs(*, suite: str = SUITE, packages: tuple[str, ...] = PACKAGES, mirror: str = MIRROR,
                  progress: Progress | None = _stderr_progress, rebuild: bool = False) -> Path:
    """A minbase Debian rootfs with `packages`, built once and cached (rebuilt if the package list
    changed). Needs root and `debootstrap`; EnvironmentMissing otherwise."""
    dest = rootfs_path(suite)
    marker = dest / ".execcritic-rootfs"
    want = _marker(packages, suite)
    if not rebuild and marker.is_file() and marker.read_text() == want:
        return dest
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap"
                                                   if os.path.isfile("/usr/sbin/debootstrap") else None)
    if debootstrap is None:
        raise EnvironmentMissing("debootstrap is not installed: `apt-get install -y debootstrap`")
    if os.geteuid() != 0:
        raise EnvironmentMissing(f"debootstrap needs root to build {dest} (euid {os.geteuid()})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    debs = dest.parent / "debs"
    debs.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"rootfs-{suite}.", dir=dest.parent))
    cmd = [debootstrap, "--variant=minbase", f"--include={','.join(packages)}",
           f"--cache-dir={debs}", suite, str(work), mirror]
    say = progress or (lambda _m: None)
    say(f"building Debian {suite} rootfs with {', '.join(packages)} (about 1.5 min): {' '.join(cmd)}")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-30:]
        if line.startswith(("I: Retrieving", "I: Extracting")):
            continue  # hundreds of lines; the phase lines below are enough progress
        say(line)
    if proc.wait() != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise SandboxError(f"debootstrap failed (exit {proc.returncode}) building {dest}:\n"
                           + "\n".join(tail))
    (work / ".execcritic-rootfs").write_text(want)
    if dest.exists():
        shutil.rmtree(dest)
    work.rename(dest)
    say(f"rootfs ready at {dest} in {time.monotonic() - t0:.0f}s")
    return dest


def image_exists(client, tag: str) -> bool:
    import docker  # lazy: docker SDK

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_base_image(client, tag: str = BASE_IMAGE, *, suite: str = SUITE,
                      packages: tuple[str, ...] = PACKAGES, progress: Progress | None = _stderr_progress,
                      rebuild: bool = False) -> str:
    """`docker import` the cached rootfs as `tag` unless the engine already has it. Returns the tag."""
    if not rebuild and image_exists(client, tag):
        return tag
    rootfs = ensure_rootfs(suite=suite, packages=packages, progress=progress)
    say = progress or (lambda _m: None)
    say(f"importing {rootfs} as {tag}")
    repo, _, version = tag.rpartition(":")
    if not repo:
        repo, version = tag, "latest"
    with tempfile.TemporaryDirectory(dir=rootfs.parent) as td:
        tar_path = Path(td) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./.execcritic-rootfs",
                        "-cf", str(tar_path), "."], check=True)
        client.api.import_image_from_file(
            str(tar_path), repository=repo, tag=version,
            changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'])
    if not image_exists(client, tag):
        raise SandboxError(f"docker import of {rootfs} did not produce image {tag}")
    say(f"image {tag} ready")
    return tag


def source_digest(checkout: Path) -> str:
    """Content digest of a checkout (paths, modes, symlink targets, file bytes): the cache key of a
    task image, so a changed checkout is never served a stale image."""
    h = hashlib.sha256()
    root = Path(checkout)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"{os.path.join(rel_dir, name)}\0{st.st_mode:o}\0".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode() + b"\0")
            else:
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
        for d in dirnames:
            st = os.lstat(os.path.join(dirpath, d))
            h.update(f"{os.path.join(rel_dir, d)}/\0{st.st_mode:o}\0".encode())
    return h.hexdigest()


def checkout_tar(checkout: Path, arcname: str = "testbed") -> tempfile.SpooledTemporaryFile:
    """A tar of `checkout` rooted at `arcname`, owned by root (like the official images' /testbed)."""
    def as_root(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    buf = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(checkout), arcname=arcname, recursive=True, filter=as_root)
    buf.seek(0)
    return buf


def build_task_image(client, checkout: Path, tag: str, *, base: str = BASE_IMAGE, workdir: str = "/testbed",
                     progress: Progress | None = _stderr_progress, rebuild: bool = False) -> str:
    """Commit `base` + `checkout` at `workdir` as `tag` (the official `sweb.eval.*` layout).

    Reused when an image `tag` exists with the same source digest label; rebuilt otherwise.
    """
    import docker  # lazy: docker SDK

    checkout = Path(checkout)
    if not checkout.is_dir():
        raise SandboxError(f"checkout {checkout} is not a directory")
    digest = source_digest(checkout)
    old_id = None
    try:
        img = client.images.get(tag)
        if not rebuild and (img.labels or {}).get(DIGEST_LABEL) == digest:
            return tag
        old_id = img.id
    except docker.errors.ImageNotFound:
        pass
    say = progress or (lambda _m: None)
    say(f"building task image {tag} from {checkout} on {base}")
    parent = os.path.dirname(workdir.rstrip("/")) or "/"
    container = client.containers.create(base, command=["true"], network_mode="none")
    try:
        with checkout_tar(checkout, arcname=os.path.basename(workdir.rstrip("/"))) as tar:
            if not container.put_archive(parent, tar):
                raise SandboxError(f"put_archive of {checkout} into {tag} failed")
        repo, _, version = tag.rpartition(":")
        if not repo:
            repo, version = tag, "latest"
        container.commit(repository=repo, tag=version,
                         changes=[f"WORKDIR {workdir}", f'LABEL {DIGEST_LABEL}="{digest}"'])
    finally:
        container.remove(force=True)
    if old_id is not None:  # the image the tag pointed to before is dangling now; drop it if unused
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(old_id)
    return tag


__all__ = ["BASE_IMAGE", "PACKAGES", "build_task_image", "cache_dir", "checkout_tar", "ensure_base_image",
           "ensure_rootfs", "image_exists", "rootfs_path", "source_digest"]
