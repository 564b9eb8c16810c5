"""The docker backend against a real daemon (a private dockerd) and a real image (debootstrap
Debian + the toolz repository at /testbed, the layout of the official sweb.eval.* images)."""

from __future__ import annotations

import time

import pytest

from execcritic.sandbox.base import Limits
from execcritic.errors import EnvironmentMissing, SandboxError
from execcritic.sandbox import open_sandbox
from execcritic.sandbox.base import MAX_OUTPUT_BYTES
from execcritic.sandbox.docker import DockerSandbox
from tests.conftest import DIRTY_RUN, TREE_LISTING, check_write_files, tree_diff

pytestmark = pytest.mark.docker

NODE = "toolz/tests/test_itertoolz.py::test_groupby"


@pytest.fixture(scope="module")
def sb(docker_client, toolz_image):
    with DockerSandbox(toolz_image, client=docker_client, activate="", limits=Limits(memory_mb=256, pids=1024)) as s:
        yield s


@pytest.fixture
def clean(sb):
    sb.reset()
    return sb


def after_summary(out: str) -> str:
    """What a check printed after pytest's summary line (the tree listing)."""
    return out[out.index("\n", out.index(" passed")) + 1:]


def listing(s) -> str:
    r = s.run(TREE_LISTING, timeout=60)
    assert r.exit_code == 0, r.output[-2000:]
    return r.output


def procs(s) -> str:
    return s.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done", timeout=10).output


# --- isolation ----------------------------------------------------------------------------------

def test_no_network(clean):
    r = clean.run("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
                  timeout=30)
    assert r.exit_code != 0 and not r.timed_out and "unreachable" in r.output.lower()
    assert clean.run("tail -n +3 /proc/net/dev | cut -d: -f1", timeout=10).output.split() == ["lo"]


def test_private_tmp_persists_until_reset(clean, docker_client, toolz_image):
    assert clean.run("echo hi > /tmp/marker", timeout=10).exit_code == 0
    assert clean.run("cat /tmp/marker", timeout=10).output == "hi\n"
    with DockerSandbox(toolz_image, client=docker_client, activate="") as other:
        assert other.run("test -e /tmp/marker", timeout=10).exit_code == 1
    clean.reset()
    assert clean.run("test -e /tmp/marker", timeout=10).exit_code == 1


def test_snapshot_is_read_only(clean):
    r = clean.run("touch /.execcritic/snap/tree/x; rm -f /.execcritic/snap/tree/setup.py; "
                  "mount -o remount,rw /.execcritic/snap; echo done", timeout=10)
    assert r.output.count("Read-only file system") == 2 and "done" in r.output
    assert "permission denied" in r.output.lower()   # no CAP_SYS_ADMIN: no remount


def test_environment_changes_do_not_survive_a_reset(clean):
    first, cid = listing(clean), clean.container_id
    r = clean.run("echo 'import os' > /usr/lib/python3/dist-packages/evil.pth; echo x > /var/tmp/x; "
                  "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/find; "
                  "echo '# patched' >> /usr/lib/python3/dist-packages/pytest/__init__.py; "
                  "echo '# edited' >> toolz/itertoolz.py", timeout=10)
    assert r.exit_code == 0, r.output
    clean.reset()
    assert clean.last_restore["recreated"] == 1 and clean.container_id != cid
    gone = clean.run("ls /usr/lib/python3/dist-packages/evil.pth /var/tmp/x; "
                     "tail -c 10 /usr/lib/python3/dist-packages/pytest/__init__.py; find --version | head -1",
                     timeout=10).output
    assert "No such file" in gone and gone.count("No such file") == 2
    assert "# patched" not in gone and "GNU findutils" in gone
    after = listing(clean)
    assert after == first, tree_diff(first, after)
    clean.reset()
    assert clean.last_restore["recreated"] == 0  # a quiet reset keeps the container


def test_read_only_root_option(docker_client, toolz_image):
    with DockerSandbox(toolz_image, client=docker_client, activate="", read_only_root=True) as s:
        r = s.run("touch /usr/lib/python3/dist-packages/evil.pth; touch /testbed/ok; echo done", timeout=10)
        assert r.output.count("Read-only file system") == 1 and "done" in r.output
        with pytest.raises(PermissionError):
            s.write_file("/usr/evil.txt", "no")
        assert s.describe()["rootfs_guard"] == "read-only"


def test_write_and_read_files(clean):
    clean.write_file("/testbed/sub/dir/note.txt", "hello\n")
    r = clean.run("cat /testbed/sub/dir/note.txt; stat -c %a /testbed/sub/dir/note.txt", timeout=10)
    assert r.output == "hello\n644\n"
    clean.run("printf 'from run' > /tmp/out.bin; ln -s /tmp/out.bin /tmp/link", timeout=10)
    assert clean.read_file("/tmp/out.bin") == b"from run"
    assert clean.read_file("/tmp/link") == b"from run"
    with pytest.raises(FileNotFoundError):
        clean.read_file("/testbed/does-not-exist")


def test_write_files_at_once_with_pinned_mtimes(clean):
    check_write_files(clean)


def test_stdin(clean):
    assert clean.run("wc -c", timeout=10, stdin=b"x" * 1000).output.strip() == "1000"


# --- limits and accounting ----------------------------------------------------------------------

def test_exit_codes(clean):
    assert clean.run("true", timeout=10).exit_code == 0
    assert clean.run("exit 3", timeout=10).exit_code == 3
    r = clean.run("kill -TERM $$", timeout=10)
    assert r.exit_code == 143 and not r.timed_out and not r.oom_killed


def test_timeout_kills_the_whole_tree(clean):
    t0 = time.monotonic()
    r = clean.run("sleep 4711 & (setsid sleep 4712 &); echo started; sleep 4713", timeout=1.5)
    assert r.timed_out and not r.oom_killed and "started" in r.output
    assert time.monotonic() - t0 < 15
    assert "sleep 471" not in procs(clean)


def test_background_processes_do_not_outlive_a_run(clean):
    r = clean.run("(setsid sleep 4714 &); echo bye", timeout=10)
    assert r.exit_code == 0 and not r.timed_out and r.duration_s < 5
    assert "sleep 4714" not in procs(clean)


def test_memory_limit_oom_is_flagged(clean):
    r = clean.run("python3 -c \"x = b'x' * (600 << 20); print('survived')\"", timeout=60)
    assert r.oom_killed and r.exit_code == 137 and "survived" not in r.output
    small = clean.run("python3 -c \"x = b'x' * (20 << 20); print('ok')\"", timeout=60)
    assert small.exit_code == 0 and not small.oom_killed


def test_output_is_merged_and_capped(clean):
    r = clean.run("echo a; echo b >&2; echo c", timeout=10)
    assert r.output == "a\nb\nc\n" and not r.truncated
    big = clean.run("python3 -c \"import sys; sys.stdout.write('HEAD\\n' + 'x' * (6 << 20) + '\\nTAIL\\n')\"",
                    timeout=60)
    assert big.truncated and big.exit_code == 0
    assert big.output.startswith("HEAD\n") and big.output.endswith("\nTAIL\n")
    assert MAX_OUTPUT_BYTES <= len(big.output) < MAX_OUTPUT_BYTES + 200


# --- reset -------------------------------------------------------------------------------------

def test_reset_restores_the_exact_prepared_tree(clean):
    first = listing(clean)
    assert "toolz/_build_info.py|f" in first and "build/lib/toolz/__init__.py|f" in first
    r = clean.run(DIRTY_RUN, timeout=60)
    assert r.exit_code == 0, r.output
    assert listing(clean) != first
    clean.reset()
    after = listing(clean)
    assert after == first, tree_diff(first, after)
    left = clean.run("ls -A /tmp; echo --; ls -A $HOME", timeout=10).output.split()
    assert left == ["--", ".bashrc", ".profile"]
    st = clean.run("git status --porcelain --ignored", timeout=30).output
    assert st.split("\n") == ["!! build/", "!! toolz.egg-info/", "!! toolz/_build_info.py", ""]


def test_second_check_after_dirty_run_sees_the_first_tree(clean):
    check = (f"{TREE_LISTING} > /tmp/tree.txt; python3 -m pytest -q -p no:cacheprovider {NODE}; "
             "cat /tmp/tree.txt")
    first = clean.run(check, timeout=120)
    assert first.exit_code == 0, first.output[-2000:]
    dirty = clean.run(DIRTY_RUN + f"\npython3 -m pytest -q {NODE} >/dev/null || true", timeout=120)
    assert dirty.exit_code == 0
    clean.reset()
    second = clean.run(check, timeout=120)
    assert second.exit_code == 0 and after_summary(second.output) == after_summary(first.output)


def test_reset_kills_leftovers_and_reports(clean):
    clean.run("echo x >> README.rst", timeout=10)
    clean.reset()
    assert clean.last_restore["restored"] == 1 and clean.last_restore["removed"] == 0


# --- lifecycle and errors ----------------------------------------------------------------------

def test_describe(sb):
    d = sb.describe()
    assert d["backend"] == "docker" and d["isolated"] is True and d["network"] is False
    assert d["image_id"].startswith("sha256:") and d["read_only_root"] is False
    assert d["rootfs_guard"] in ("upperdir", "docker-diff")
    assert sb.run("true", timeout=10).isolated is True


def test_sandbox_error_when_container_is_killed(docker_client, toolz_image):
    s = open_sandbox("docker", image=toolz_image, client=docker_client, activate="")
    try:
        docker_client.containers.get(s.container_id).kill()
        with pytest.raises(SandboxError, match="not usable"):
            s.run("true", timeout=10)
        with pytest.raises(SandboxError):
            s.reset()
    finally:
        s.close()
    s.close()


def test_sandbox_error_when_container_dies_mid_run(docker_client, toolz_image):
    import threading

    s = DockerSandbox(toolz_image, client=docker_client, activate="")
    try:
        threading.Timer(1.0, lambda: docker_client.containers.get(s.container_id).kill()).start()
        with pytest.raises(SandboxError):
            s.run("sleep 30", timeout=20)
    finally:
        s.close()


def test_close_is_fast_and_removes_everything(docker_client, toolz_image):
    s = DockerSandbox(toolz_image, client=docker_client, activate="")
    cid, vol = s.container_id, s._snap_volume
    s.run("sleep 1000 & echo", timeout=10)
    t0 = time.monotonic()
    s.close()
    assert time.monotonic() - t0 < 5
    assert not [c for c in docker_client.containers.list(all=True) if c.id == cid]
    assert vol not in [v.name for v in docker_client.volumes.list()]


def test_missing_image_is_an_environment_error(docker_client):
    with pytest.raises(EnvironmentMissing, match="not present"):
        DockerSandbox("execcritic/no-such-image:nope", client=docker_client)


def test_warm_bytecode_never_serves_stale_code(docker_client, toolz_image):
    with DockerSandbox(toolz_image, client=docker_client, activate="", warm_bytecode=True) as s:
        before = listing(s)
        assert "toolz/__pycache__/" in before
        assert s.run("python3 -c 'import toolz'", timeout=30).exit_code == 0
        after = listing(s)
        assert after == before, tree_diff(before, after)
        s.run("echo 'MARK = 41 + 1' >> toolz/__init__.py", timeout=10)
        assert s.run("python3 -c 'import toolz; print(toolz.MARK)'", timeout=30).output == "42\n"
        s.reset()
        after = listing(s)
        assert after == before, tree_diff(before, after)


def test_dead_daemon_is_a_sandbox_error(toolz_image, tmp_path):
    import docker

    dead = docker.DockerClient(base_url=f"unix://{tmp_path}/no-daemon.sock", timeout=5, version="1.41")
    with pytest.raises(SandboxError, match="Docker engine"):
        DockerSandbox(toolz_image, client=dead, activate="")


def test_private_dockerd_flags_and_missing_binary(private_dockerd):
    from execcritic.sandbox.dockerd import check_available, dockerd_command

    argv = dockerd_command(private_dockerd.root)
    for flag in ("--iptables=false", "--ip-masq=false", "--bridge=none", "nofile=1024:1024", "nproc=4096:4096"):
        assert flag in argv
    assert f"unix://{private_dockerd.root / 'docker.sock'}" in argv
    assert "--data-root" in argv and "--exec-root" in argv
    with pytest.raises(EnvironmentMissing, match="docker.io"):
        check_available("no-such-dockerd-binary")
