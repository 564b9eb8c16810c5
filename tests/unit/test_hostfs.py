"""execcritic/sandbox/hostfs.py on real directories: links resolve as inside the sandbox and never out of it,
FIFOs are not opened, and the host-side listing of changed paths gives the in-container script's answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from execcritic.sandbox import hostfs
from execcritic.sandbox.docker import CHANGED_SCRIPT


@pytest.fixture
def roots(tmp_path):
    tree, tmp, secret = tmp_path / "tree", tmp_path / "tmp", tmp_path / "secret"
    for d in (tree, tmp, secret):
        d.mkdir()
    (secret / "key").write_text("host secret\n")
    return {"/testbed": tree, "/tmp": tmp}


def test_links_resolve_inside_the_mapped_dirs_and_never_out(roots, tmp_path):
    tree, tmp = roots["/testbed"], roots["/tmp"]
    (tmp / "data").write_bytes(b"in tmp\n")
    os.symlink("/tmp/data", tree / "abs")                    # absolute, as the sandbox sees it
    os.symlink("../tmp/data", tree / "rel")
    os.symlink("/etc/passwd", tree / "host_abs")                 # outside the mapped dirs
    os.symlink("../../secret/key", tree / "host_rel")            # /secret/key in the sandbox: outside too
    os.symlink(str(tmp_path / "secret" / "key"), tree / "tmp_path")   # a host path under /tmp: the sandbox's /tmp
    os.symlink("loop", tree / "loop")
    assert hostfs.read("/testbed/abs", roots) == b"in tmp\n"
    assert hostfs.read("/testbed/rel", roots) == b"in tmp\n"
    for name in ("host_abs", "host_rel"):
        with pytest.raises(hostfs.Outside):
            hostfs.read(f"/testbed/{name}", roots)
        with pytest.raises(hostfs.Outside):
            hostfs.write(f"/testbed/{name}", b"x", 0o644, None, roots)
    with pytest.raises(FileNotFoundError):
        hostfs.read("/testbed/tmp_path", roots)
    assert (tmp_path / "secret" / "key").read_text() == "host secret\n"
    with pytest.raises(OSError):
        hostfs.read("/testbed/loop", roots)
    with pytest.raises(ValueError):
        hostfs.read("testbed/abs", roots)


def test_fifos_and_devices_are_never_opened(roots):
    tree = roots["/testbed"]
    os.mkfifo(tree / "fifo")
    t0 = time.monotonic()
    with pytest.raises(FileNotFoundError):
        hostfs.read("/testbed/fifo", roots)
    hostfs.write("/testbed/fifo", b"a file now\n", 0o600, 1_000_000_000, roots)   # replaced, not opened
    assert time.monotonic() - t0 < 2
    st = os.lstat(tree / "fifo")
    assert (tree / "fifo").is_file() and st.st_mtime == 1_000_000_000 and st.st_mode & 0o777 == 0o600
    with pytest.raises(FileNotFoundError):
        hostfs.read("/testbed", roots)
    hostfs.write("/testbed/new/deep/f.txt", b"made", 0o644, None, roots)
    assert hostfs.read("/testbed/new/deep/f.txt", roots) == b"made"


def _inside(tree: Path, snap: Path, t: str) -> list[str]:
    out = subprocess.run(["bash", "-c", CHANGED_SCRIPT, "changed", t, str(tree), str(snap)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[-1] == "EXECCRITIC-CHANGED-END"
    return sorted({ln for ln in out[:-1] if ln})


def test_changed_paths_match_the_in_container_script(tmp_path):
    snap, tree = tmp_path / "snap", tmp_path / "tree"
    for rel in ("a.py", "pkg/m.py", "pkg/sub/n.py", "gone/x.py", "docs/r.txt", ".hidden"):
        (snap / rel).parent.mkdir(parents=True, exist_ok=True)
        (snap / rel).write_text(rel)
    shutil.copytree(snap, tree, symlinks=True)
    time.sleep(0.02)
    t = f"{time.time():.9f}"
    time.sleep(0.02)
    assert hostfs.changed_since(tree, snap, int(float(t) * 1e9)) == _inside(tree, snap, t) == []
    (tree / "a.py").write_text("edited")
    os.remove(tree / "pkg/sub/n.py")
    shutil.rmtree(tree / "gone")
    (tree / "new.txt").write_text("new")
    (tree / "newdir/deep").mkdir(parents=True)
    (tree / "newdir/deep/f").write_text("f")
    os.symlink("/etc/passwd", tree / "link")
    os.mkfifo(tree / "fifo")
    os.chmod(tree / "docs/r.txt", 0o600)
    os.remove(tree / ".hidden")
    os.mkdir(tree / ".hidden")
    sec, _, frac = t.partition(".")
    got = hostfs.changed_since(tree, snap, int(sec) * 10**9 + int(frac))
    assert got == _inside(tree, snap, t)
    assert {"a.py", "pkg/sub/n.py", "gone", "new.txt", "newdir", "link", "fifo", "docs/r.txt", ".hidden"} <= set(got)
