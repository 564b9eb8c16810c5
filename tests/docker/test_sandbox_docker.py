"""The docker backend against a real daemon (a private dockerd) and a real image (debootstrap
Debian + the toolz repository at /testbed, the layout of the official sweb.eval.* images)."""

from __future__ import annotations

import hashlib
import time

import pytest

from execcritic.sandbox.base import Limits
from execcritic.errors import EnvironmentMissing, SandboxError
from execcritic.sandbox import open_sandbox
from execcritic.sandbox.base import MAX_OUTPUT_BYTES
from execcritic.sandbox.docker import CHANGED_SCRIPT, INLINE_STDIN_BYTES, SNAP, DockerSandbox
from tests.conftest import DIRTY_RUN, TREE_LISTING, check_write_files, tree_diff

pytestmark = pytest.mark.docker

NODE = "toolz/tests/test_itertoolz.py::test_groupby"


@pytest.fixture(scope="module", params=["host-files", "api-files"])
def sb(request, docker_client, toolz_image):
    """Files through the volumes' host directories (what a local daemon gets), and through the Docker API only
    (a remote daemon)."""
    with DockerSandbox(toolz_image, client=docker_client, activate="", limits=Limits(memory_mb=256, pids=1024),
                       host_files=None if request.param == "host-files" else False) as s:
        if request.param == "host-files" and not s._host_roots:
            pytest.skip("the daemon's volumes are not accessible from here")
        yield s


@pytest.fixture
def clean(sb):
    sb.reset()
    return sb


@pytest.fixture(scope="module")
def host_sb(docker_client, toolz_image):
    """Files through the volumes' host directories only: the tests of that path."""
    with DockerSandbox(toolz_image, client=docker_client, activate="", limits=Limits(memory_mb=256, pids=1024)) as s:
        if not s._host_roots:
            pytest.skip("the daemon's volumes are not accessible from here")
        yield s


@pytest.fixture
def host_clean(host_sb):
    host_sb.reset()
    return host_sb


def after_summary(out: str) -> str:
    """What a check printed after pytest's summary line (the tree listing)."""
    return out[out.index("\n", out.index(" passed")) + 1:]


def listing(s) -> str:
    r = s.run(TREE_LISTING, timeout=60)
    assert r.exit_code == 0, r.output[-2000:]
    return r.output


def procs(s) -> str:
    """The container's processes, as the harness sees them (a command has no /proc)."""
    return s._exec_simple(["bash", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"],
                          what="listing processes")


# --- isolation ----------------------------------------------------------------------------------

def test_no_network(clean):
    r = clean.run("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
                  timeout=30)
    assert r.exit_code != 0 and not r.timed_out and "unreachable" in r.output.lower()
    assert clean.run("python3 -c 'import socket; print(*(n for _, n in socket.if_nameindex()))'",
                     timeout=10).output.split() == ["lo"]


def test_private_tmp_persists_until_reset(clean, docker_client, toolz_image):
    assert clean.run("echo hi > /tmp/marker", timeout=10).exit_code == 0
    assert clean.run("cat /tmp/marker", timeout=10).output == "hi\n"
    with DockerSandbox(toolz_image, client=docker_client, activate="") as other:
        assert other.run("test -e /tmp/marker", timeout=10).exit_code == 1
    clean.reset()
    assert clean.run("test -e /tmp/marker", timeout=10).exit_code == 1


def test_snapshot_is_out_of_the_commands_reach(clean):
    """The snapshot volume is mounted read-only in the container and unmounted in every command's own mount
    namespace; the command cannot mount it back (no CAP_SYS_ADMIN: the wrapper dropped it)."""
    r = clean.run("ls /.execcritic/snap; touch /.execcritic/snap/tree/x; "
                  "mount -o remount,rw /.execcritic/snap; echo done", timeout=10)
    assert "No such file" in r.output and r.output.endswith("done\n")
    assert "permission denied" in r.output.lower() or "not mounted" in r.output.lower()
    assert clean._exec_simple(["ls", "/.execcritic/snap/tree/setup.py"], what="ls").strip()


def test_environment_changes_do_not_survive_a_reset(clean):
    """The system directories (what the harness's own execs run) are read-only to a command; what it may write
    elsewhere in the image filesystem gets the container replaced at the next reset."""
    first, cid = listing(clean), clean.container_id
    r = clean.run("echo 'import os' > /usr/lib/python3/dist-packages/evil.pth; echo x > /var/tmp/x; "
                  "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/find; "
                  "echo '# patched' >> /usr/lib/python3/dist-packages/pytest/__init__.py; "
                  "echo '# edited' >> toolz/itertoolz.py", timeout=10)
    assert r.exit_code == 0 and r.output.count("Read-only file system") == 3, r.output
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
    assert d["file_access"] == ("host (volume directories)" if sb.host_files is None else "Docker API (archives, execs)")
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


# --- stdin, files on the host side, runs started ahead -----------------------------------------

@pytest.mark.parametrize("data", [b"", b"no newline", "caf\u00e9\n".encode(), b"\xff\xfe not utf-8", b"nul\0byte",
                                  b"y" * (INLINE_STDIN_BYTES + 1)],
                         ids=["empty", "text", "utf8", "latin1", "nul", "large"])
def test_stdin_reaches_the_command_byte_for_byte(clean, data):
    """Small UTF-8 stdin travels in the exec's arguments, the rest as a file: the command reads the same bytes."""
    r = clean.run("sha256sum | cut -c1-64", timeout=30, stdin=data)
    assert r.exit_code == 0 and r.output.strip() == hashlib.sha256(data).hexdigest(), r.output


def test_files_are_read_as_the_container_sees_them(host_clean):
    """Reads and writes go through the volumes' host directories when the daemon is local; a link that leaves
    them is resolved by the container (its /etc, not the host's), and a FIFO is neither read nor opened."""
    clean = host_clean
    r = clean.run("echo container-only > /var/tmp/ec-marker && ln -s /var/tmp/ec-marker out_link && mkfifo fifo && "
                  "ln -s ../../etc/hostname up_link && echo ok", timeout=30)
    assert r.output == "ok\n"
    assert clean.read_file("/testbed/out_link") == b"container-only\n"
    assert clean.read_file("/testbed/up_link") == clean.run("cat /etc/hostname", timeout=10).output.encode()
    t0 = time.monotonic()
    with pytest.raises(FileNotFoundError):
        clean.read_file("/testbed/fifo")
    clean.write_file("/testbed/fifo", b"now a file\n")
    assert time.monotonic() - t0 < 5
    assert clean.run("test -f fifo && cat fifo", timeout=10).output == "now a file\n"
    clean.reset()          # (the write under /var replaced the container)


def test_changed_paths_from_the_host_match_the_containers_listing(host_clean):
    clean = host_clean
    assert clean._host_snap is not None
    assert clean.changed_paths() == []
    assert clean.run(DIRTY_RUN, timeout=60).exit_code == 0
    inside = clean._exec_simple(["bash", "-c", CHANGED_SCRIPT, "changed", clean._restored_at, clean.workdir,
                                 f"{SNAP}/tree"], what="listing")
    expected = sorted({ln for ln in inside.splitlines()[:-1] if ln})
    assert clean.changed_paths() == expected
    assert {"setup.py", "NEW_UNTRACKED.txt", "toolz/itertoolz.py", "a_fifo", "link_out", "tlz", "build"} <= \
        set(expected), expected


def test_a_spawned_run_waits_in_a_session_the_runs_made_meanwhile_spare(clean):
    """`spawn` (harness/prestart.py): the run keeps waiting while other runs are made and cleaned up - what they
    start is killed, daemonized or not - its clock starts at `wait`, it ends with everything it started, the
    memory limit holds for it, and a reset kills it."""
    assert clean.run("mkfifo /tmp/go && echo made", timeout=30).output == "made\n"
    # (the spawned run's end kills everything else: it pauses after the read, so that the run releasing it ends first)
    sp = clean.spawn("read -t 20 line < /tmp/go; sleep 1; echo got $line")
    other = clean.run("(setsid sleep 4721 &); sleep 4722 & echo other", timeout=30)
    assert other.output == "other\n"
    assert sp.alive() and "sleep 472" not in procs(clean)
    clean.run("echo released > /tmp/go", timeout=30)
    time.sleep(1.5)
    r = sp.wait(1.0)         # finished meanwhile: the clock counts from `wait`
    assert r.exit_code == 0 and "got released" in r.output and not r.timed_out, r.output
    left = clean.spawn("(setsid sleep 4723 &); echo started")
    assert left.wait(30).output == "started\n" and "sleep 4723" not in procs(clean)
    slow = clean.spawn("sleep 4724")
    t0 = time.monotonic()
    r = slow.wait(1.0)
    assert r.timed_out and time.monotonic() - t0 < 15 and "sleep 4724" not in procs(clean)
    hog = clean.spawn("python3 -c \"x = b'x' * (600 << 20); print('survived')\"")
    r = hog.wait(60)
    assert r.oom_killed and "survived" not in r.output
    parked = clean.spawn("sleep 4725")
    clean.reset()
    assert not parked.alive() and "sleep 4725" not in procs(clean)


def test_a_spawn_after_reset_resets_first_and_everything_waits_for_it(clean):
    """`spawn(reset=True)` restores Base in the same exec, in the background: the next call on the sandbox -
    here a read - waits for that reset, and sees Base."""
    base = clean.read_file("/testbed/README.rst")
    clean.run("echo dirty > README.rst; echo x > /tmp/left", timeout=30)
    gen = clean.generation
    sp = clean.spawn("ls -A /tmp; mkfifo /tmp/go; read -t 20 l < /tmp/go; sleep 1; cat README.rst | wc -c", reset=True)
    assert clean.read_file("/testbed/README.rst") == base
    assert clean.generation == gen + 1 and clean.last_restore["restored"] >= 1
    assert sp.alive()
    clean.run("while [ ! -p /tmp/go ]; do sleep 0.05; done; echo go > /tmp/go", timeout=30)
    r = sp.wait(30)
    assert r.exit_code == 0 and r.output == f"{len(base)}\n", r.output
    assert clean.changed_paths() == []


def test_a_spawn_after_a_run_that_changed_the_image_gets_a_fresh_container(clean):
    """The reset in a spawn's exec used the image's tools as the last run left them: the next call finds the
    image filesystem changed, replaces the container and resets again, and the run started in the old one is
    gone - as after `reset()`."""
    n = clean.recreations
    assert clean.run("echo trojan > /opt/ec-trojan && echo ok", timeout=30).output == "ok\n"
    sp = clean.spawn("sleep 4726", reset=True)
    assert not sp.alive()
    assert clean.recreations == n + 1 and clean.last_restore["recreated"] == 1
    assert clean.run("test -e /opt/ec-trojan && echo still || echo gone", timeout=30).output == "gone\n"
    assert "sleep 4726" not in procs(clean)
    with pytest.raises(RuntimeError):
        sp.wait(5)
