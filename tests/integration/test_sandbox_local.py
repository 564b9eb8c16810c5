"""The local backend against real bubblewrap, a real cgroup and a real repository (toolz sdist).

Every isolation claim is checked by doing the forbidden thing for real: a connect() that must
fail, a process that must die, an allocation the kernel must OOM-kill, a dirty tree that must come
back byte for byte.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from execcritic.sandbox.base import Limits
from execcritic.errors import InputError, SandboxError
from execcritic.sandbox import open_sandbox
from execcritic.sandbox.base import MAX_OUTPUT_BYTES
from execcritic.sandbox.capture import OutputCapture
from execcritic.sandbox.local import LocalSandbox
from execcritic.sandbox.snapshot import TreeSnapshot
from tests.conftest import DIRTY_RUN, TREE_LISTING, check_write_files, tree_diff

pytestmark = pytest.mark.integration

NODE = "toolz/tests/test_itertoolz.py::test_groupby"

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def env_kwargs() -> dict:
    """Run the sandbox with the interpreter running these tests (its venv bound read-only)."""
    if sys.prefix != sys.base_prefix:
        return {"activate": f"source {shlex.quote(sys.prefix)}/bin/activate", "binds": [Path(sys.prefix)]}
    return {"activate": f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH",
            "binds": [Path(sys.base_prefix)]}


@pytest.fixture(scope="module")
def sb(toolz_repo):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    with LocalSandbox(toolz_repo, limits=Limits(memory_mb=256, pids=1024), **env_kwargs()) as s:
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


# --- pure parts ---------------------------------------------------------------------------------

def test_output_capture_keeps_head_and_tail():
    cap = OutputCapture(cap=100)
    cap.feed(b"H" * 30)
    for _ in range(50):
        cap.feed(b"m" * 10)
    cap.feed(b"T" * 20)
    text = cap.text()
    assert cap.truncated and cap.total == 550
    assert text.startswith("H" * 30 + "m" * 20)
    assert text.endswith("m" * 30 + "T" * 20)
    assert "500 bytes" not in text and "450 bytes of output truncated" in text


def test_output_capture_small_is_verbatim():
    cap = OutputCapture(cap=100)
    cap.feed(b"abc")
    cap.feed(b"\xff")
    assert not cap.truncated and cap.text() == "abc\ufffd"


def test_tree_snapshot_restores_exactly(tmp_path):
    base, work = tmp_path / "base", tmp_path / "work"
    (base / "d" / "e").mkdir(parents=True)
    (base / "d" / "f.txt").write_text("one")
    (base / "g").write_text("two")
    os.symlink("g", base / "ln")
    os.system(f"cp -a {base} {work}")
    snap = TreeSnapshot(base, work)
    snap.record()
    (work / "g").write_text("TWO")                  # same size, new content
    os.utime(work / "g", ns=(0, os.lstat(base / "g").st_mtime_ns))  # and the old mtime back
    (work / "new").write_text("x")
    os.unlink(work / "ln")
    os.symlink("/etc", work / "ln")
    shutil.rmtree(work / "d")
    stats = snap.restore()
    assert (work / "g").read_text() == "two"
    assert not (work / "new").exists()
    assert os.readlink(work / "ln") == "g"
    assert (work / "d" / "f.txt").read_text() == "one" and (work / "d" / "e").is_dir()
    assert stats.removed == 1 and stats.restored >= 3
    again = snap.restore()
    assert (again.removed, again.restored, again.dirs_fixed) == (0, 0, 0)


# --- isolation ----------------------------------------------------------------------------------

def test_no_network(clean):
    r = clean.run("python -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
                  timeout=30)
    assert r.exit_code != 0 and not r.timed_out
    assert "unreachable" in r.output.lower()
    ifaces = clean.run("python -c 'import socket; print(*(n for _, n in socket.if_nameindex()))'",
                       timeout=10).output.split()
    assert ifaces == ["lo"]


def test_private_tmp_persists_until_reset(clean, toolz_repo):
    marker = f"execcritic-marker-{os.getpid()}-{time.time_ns()}"
    assert clean.run(f"echo hi > /tmp/{marker}", timeout=10).exit_code == 0
    assert not os.path.exists(f"/tmp/{marker}")                       # not the host's /tmp
    assert clean.run(f"cat /tmp/{marker}", timeout=10).output == "hi\n"  # persists across runs
    with LocalSandbox(toolz_repo, **env_kwargs()) as other:
        assert other.run(f"test -e /tmp/{marker}", timeout=10).exit_code == 1
    clean.reset()
    assert clean.run(f"test -e /tmp/{marker}", timeout=10).exit_code == 1


def test_a_procfs_is_mounted_only_when_asked_and_shows_only_the_sandbox(clean, toolz_repo):
    """The default run has no /proc (tests/integration/test_confinement.py); a sandbox made with `procfs=True` (the
    log-graded node runners: tasks/mlgit/toolchain.py) sees its own pid namespace's processes, not the host's."""
    assert clean.run("test -e /proc && echo present || echo absent", timeout=30).output.strip() == "absent"
    with LocalSandbox(toolz_repo, limits=Limits(memory_mb=256, pids=64), procfs=True, **env_kwargs()) as box:
        out = box.run("ls /proc | grep -c '^[0-9]'; grep -c '^processor' /proc/cpuinfo", timeout=30).output.split()
        assert box.describe()["confinement"].startswith("seccomp filter, procfs of its pid namespace")
    visible, cpus = int(out[0]), int(out[1])
    assert 1 <= visible <= 5 < len([p for p in os.listdir("/proc") if p.isdigit()]) and cpus >= 1


def test_environment_is_read_only(clean):
    r = clean.run(f"touch {shlex.quote(sys.prefix)}/x-forbidden; touch /usr/x-forbidden; "
                  "mount -o remount,rw /usr; echo done", timeout=10)
    assert r.output.count("Read-only file system") == 2
    assert "done" in r.output and not os.path.exists(os.path.join(sys.prefix, "x-forbidden"))
    assert "permission denied" in r.output.lower()  # no CAP_SYS_ADMIN: cannot remount


def test_write_and_read_files(clean):
    clean.write_file("/testbed/sub/dir/note.txt", "hello\n")
    assert clean.run("cat /testbed/sub/dir/note.txt", timeout=10).output == "hello\n"
    clean.run("printf 'from run' > /tmp/out.bin", timeout=10)
    assert clean.read_file("/tmp/out.bin") == b"from run"
    with pytest.raises(FileNotFoundError):
        clean.read_file("/testbed/does-not-exist")
    clean.run("ln -s /etc /testbed/escape", timeout=10)
    with pytest.raises(PermissionError):
        clean.write_file("/testbed/escape/passwd-x", "no")       # a symlink never leads out
    with pytest.raises(PermissionError):
        clean.read_file("/etc/hostname")


def test_write_files_at_once_with_pinned_mtimes(clean):
    check_write_files(clean)

def test_stdin(clean):
    r = clean.run("wc -c", timeout=10, stdin=b"x" * 1000)
    assert r.output.strip() == "1000"


# --- limits and accounting ----------------------------------------------------------------------

def test_exit_codes(clean):
    assert clean.run("true", timeout=10).exit_code == 0
    assert clean.run("exit 3", timeout=10).exit_code == 3
    r = clean.run("kill -TERM $$", timeout=10)
    assert r.exit_code == 143 and not r.timed_out and not r.oom_killed


def test_timeout_kills_the_whole_tree(clean):
    tag = f"{4000 + os.getpid() % 1000}.{time.time_ns() % 1000}"
    t0 = time.monotonic()
    r = clean.run(f"sleep {tag}1 & (setsid sleep {tag}2 &); echo started; sleep {tag}3", timeout=1.5)
    assert r.timed_out and not r.oom_killed
    assert time.monotonic() - t0 < 10
    assert "started" in r.output
    time.sleep(0.2)
    left = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if f"sleep {tag}" in cmd:
                left.append(cmd)
    assert left == []


def test_memory_limit_oom_is_flagged(clean):
    d = clean.describe()
    r = clean.run("python -c \"x = b'x' * (600 << 20); print('survived')\"", timeout=60)
    if "memory:cgroup" in d["limit_enforcement"]:
        assert r.oom_killed and r.exit_code in (137, -9)
        assert "survived" not in r.output
    else:  # rlimit fallback (no usable cgroup): the allocation fails, but no OOM accounting
        assert d["limit_enforcement"] == "rlimit" and r.exit_code != 0 and not r.oom_killed
    small = clean.run("python -c \"x = b'x' * (20 << 20); print('ok')\"", timeout=60)
    assert small.exit_code == 0 and not small.oom_killed


def test_a_spawned_run_waits_in_its_own_cgroups_under_the_same_limits(clean):
    """`spawn` (harness/prestart.py): the run keeps going while other runs are made and cleaned up, its clock
    starts at `wait`, the memory limit holds for it too, and a reset kills it."""
    assert clean.run("mkfifo /tmp/go && echo made", timeout=30).output == "made\n"
    sp = clean.spawn("read -t 20 line < /tmp/go; echo got $line")
    assert clean.run("sleep 0.2; echo other", timeout=30).output == "other\n"   # another run, cleaned up
    assert sp.alive()
    clean.run("echo released > /tmp/go", timeout=30)
    r = sp.wait(30)
    assert r.exit_code == 0 and "got released" in r.output and not r.timed_out, r.output
    hog = clean.spawn("python -c \"x = b'x' * (600 << 20); print('survived')\"")
    r = hog.wait(60)
    if "memory:cgroup" in clean.describe()["limit_enforcement"]:
        assert r.oom_killed and "survived" not in r.output
    else:
        assert r.exit_code != 0 and "survived" not in r.output
    slow = clean.spawn("sleep 60")
    clean.reset()
    assert not slow.alive()


FORK_BOMB = """import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as exc:
    print("refused after", n, exc.errno)
"""


def test_process_limit_stops_a_fork_bomb(toolz_repo):
    """2,000 forks must not succeed: the sandbox's process limit refuses them, says so, and nothing the
    bomb started outlives the run."""
    with LocalSandbox(toolz_repo, limits=Limits(memory_mb=2048, pids=200), **env_kwargs()) as s:
        d = s.describe()
        assert d["limits"]["pids"] == 200
        s.write_file("/tmp/bomb.py", FORK_BOMB)
        r = s.run("python /tmp/bomb.py", timeout=120)
        assert "refused after" in r.output and not r.oom_killed, r.output[-2000:]
        forked = int(r.output.split("refused after")[1].split()[0])
        assert forked < 200
        if "pids:cgroup" in d["limit_enforcement"]:
            assert r.pids_limited
        assert s.run("echo still usable", timeout=30).output == "still usable\n"


def test_output_is_merged_and_capped(clean):
    r = clean.run("echo a; echo b >&2; echo c", timeout=10)
    assert r.output == "a\nb\nc\n" and not r.truncated
    big = clean.run("python -c \"import sys; sys.stdout.write('HEAD\\n' + 'x' * (6 << 20) + '\\nTAIL\\n')\"",
                    timeout=60)
    assert big.truncated and big.exit_code == 0
    assert big.output.startswith("HEAD\n") and big.output.endswith("\nTAIL\n")
    assert MAX_OUTPUT_BYTES <= len(big.output) < MAX_OUTPUT_BYTES + 200


# --- reset -------------------------------------------------------------------------------------

def test_reset_restores_the_exact_prepared_tree(clean, toolz_repo):
    first = listing(clean)
    assert "toolz/_build_info.py|f" in first and "build/lib/toolz/__init__.py|f" in first
    r = clean.run(DIRTY_RUN, timeout=60)
    assert r.exit_code == 0, r.output
    dirty = listing(clean)
    assert dirty != first
    clean.reset()
    after = listing(clean)
    assert after == first, tree_diff(first, after)
    # HOME is empty again, except mount points of read-only binds that live under /root
    # (and likewise under /tmp, e.g. a venv of a checkout cloned under /tmp)
    mounts = sorted({Path(b).relative_to("/root").parts[0] for b in clean.binds
                     if str(b).startswith("/root/")})
    tmp_mounts = sorted({Path(b).relative_to("/tmp").parts[0] for b in clean.binds
                         if str(b).startswith("/tmp/")})
    assert clean.run("ls -A /tmp $HOME", timeout=10).output.split() == ["/root:", *mounts, "/tmp:", *tmp_mounts]
    st = clean.run("git status --porcelain --ignored", timeout=30).output
    assert st.split("\n") == ["!! build/", "!! toolz.egg-info/", "!! toolz/_build_info.py", ""]
    # the checkout itself was never touched
    assert (toolz_repo / "setup.py").is_file() and not (toolz_repo / "NEW_UNTRACKED.txt").exists()


def test_second_check_after_dirty_run_sees_the_first_tree(clean):
    check = (f"{TREE_LISTING} > /tmp/tree.txt; python -m pytest -q -p no:cacheprovider {NODE}; "
             "cat /tmp/tree.txt")
    first = clean.run(check, timeout=120)
    assert first.exit_code == 0, first.output[-2000:]
    assert clean.run(DIRTY_RUN + f"\npython -m pytest -q {NODE} >/dev/null || true",
                     timeout=120).exit_code == 0
    clean.reset()
    second = clean.run(check, timeout=120)
    assert second.exit_code == 0 and after_summary(second.output) == after_summary(first.output)


def test_reset_is_cheap_when_little_changed(clean):
    clean.run("echo x >> README.rst", timeout=10)
    t0 = time.monotonic()
    clean.reset()
    assert time.monotonic() - t0 < 1.0
    assert clean.last_restore.restored == 1


def _host_listing(root: Path) -> dict[str, tuple]:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                         p.read_bytes() if p.is_file() and not p.is_symlink() else None)
    return out


@needs_bwrap
def test_a_pristine_checkout_is_the_reset_reference_and_the_tree_lives_apart(toolz_repo, tmp_path):
    """What task environments open (tasks/environment.py): the checkout, held unchanged by the caller, is what
    reset restores from (no copy of it), and the working copy is made under `tree_dir` (a memory file system
    there). A dirty run and a reset leave the checkout as it was, to the ctime; close removes both directories."""
    before = _host_listing(toolz_repo)
    trees = tmp_path / "trees"
    trees.mkdir()
    with LocalSandbox(toolz_repo, limits=Limits(memory_mb=512, pids=1024), pristine=True, tree_dir=trees,
                      **env_kwargs()) as box:
        assert box.base_dir == toolz_repo.resolve() and box.tree.parent.parent == trees
        first = listing(box)
        assert box.run(DIRTY_RUN, timeout=60).exit_code == 0
        assert listing(box) != first
        box.reset()
        assert listing(box) == first, tree_diff(first, listing(box))
        workspace = box.ws
    assert _host_listing(toolz_repo) == before
    assert list(trees.iterdir()) == [] and not workspace.exists()


@needs_bwrap
def test_an_overlay_working_copy_reports_and_resets_what_a_copy_does(toolz_repo, tmp_path):
    """The two working copies (`working_copy`): after the dirty run - plus a directory removed and made again,
    which the overlay keeps as an opaque directory - both name the same changed paths, both reset to the same
    tree, and neither writes to the checkout. Where this process cannot mount, the overlay is refused by name."""
    from execcritic.sandbox import overlay

    rerun = DIRTY_RUN + "rm -rf toolz/sandbox && mkdir toolz/sandbox && echo y > toolz/sandbox/only.py\n"
    before = _host_listing(toolz_repo)
    seen = {}
    for mode in ("overlay", "copy"):
        if mode == "overlay" and overlay.available(str(tmp_path)):
            with pytest.raises(SandboxError, match="not possible here"):
                LocalSandbox(toolz_repo, pristine=True, tree_dir=tmp_path, working_copy="overlay", **env_kwargs())
            continue
        with LocalSandbox(toolz_repo, pristine=True, tree_dir=tmp_path, working_copy=mode, **env_kwargs()) as box:
            assert box.describe()["working_copy"] == mode
            first = listing(box)
            assert box.run(rerun, timeout=60).exit_code == 0
            seen[mode] = box.changed_paths()
            box.reset()
            assert box.changed_paths() == [] and listing(box) == first, tree_diff(first, listing(box))
    if len(seen) == 2:
        assert seen["overlay"] == seen["copy"]
    assert {"setup.py", "NEW_UNTRACKED.txt", "toolz/sandbox/only.py", "tlz", "tlz_renamed"} <= set(seen["copy"])
    assert _host_listing(toolz_repo) == before and overlay.mounts_under(tmp_path) == []


def test_a_twin_overlays_the_same_base_and_shares_nothing_else(toolz_repo, tmp_path):
    """An overlay working copy's twin (harness/prestart.py starts the next check's interpreter there): the same
    Base, its own tree, /tmp, HOME and cgroups - what one run writes the other never sees - made once, and
    closed with its sandbox. A copied working copy has none (a twin would cost another copy)."""
    from execcritic.sandbox import overlay

    if overlay.available(str(tmp_path)):
        pytest.skip("this process cannot mount an overlay working copy")
    with LocalSandbox(toolz_repo, tree_dir=tmp_path, working_copy="copy", **env_kwargs()) as box:
        assert box.twin() is None
    box = LocalSandbox(toolz_repo, tree_dir=tmp_path, working_copy="overlay", limits=Limits(memory_mb=256, pids=64),
                       **env_kwargs())
    twin = box.twin()
    assert twin is not None and box.twin() is twin and twin.describe()["working_copy"] == "overlay"
    assert listing(twin) == listing(box)
    write = "echo x > /testbed/planted.txt && echo y > /tmp/planted && echo z > ~/planted && echo >> setup.py\n"
    assert box.run(write, timeout=60).exit_code == 0
    assert twin.changed_paths() == [] and box.changed_paths() == ["planted.txt", "setup.py"]
    out = twin.run("ls /testbed/planted.txt /tmp/planted ~/planted 2>&1; git diff --stat", timeout=60).output
    assert out.count("No such file") == 3 and "setup.py" not in out, out
    assert twin.run("sleep 30 & echo started", timeout=60).exit_code == 0     # its cgroups, not the sandbox's
    assert twin._cgroup is not None and box._cgroup is not None and twin._cgroup.paths != box._cgroup.paths
    dirs = [twin.ws, twin.tree_ws]
    box.close()
    with pytest.raises(SandboxError, match="closed"):
        twin.run("true", timeout=10)
    assert not any(d.exists() for d in dirs) and overlay.mounts_under(tmp_path) == []


def test_the_fast_tree_dir_is_a_memory_file_system_with_room_or_what_the_user_says(monkeypatch, tmp_path):
    from execcritic.sandbox import local

    monkeypatch.setenv(local.TREE_DIR_ENV, str(tmp_path))
    assert local.fast_tree_dir() == str(tmp_path)
    monkeypatch.setenv(local.TREE_DIR_ENV, "")
    assert local.fast_tree_dir() is None                     # '': the temporary directory
    monkeypatch.delenv(local.TREE_DIR_ENV)
    monkeypatch.setattr(local, "FAST_TREE_DIRS", ("/nonexistent", str(tmp_path)))
    monkeypatch.setattr(local, "FAST_TREE_MIN_FREE", 1)
    assert local.fast_tree_dir() == str(tmp_path)
    monkeypatch.setattr(local, "FAST_TREE_MIN_FREE", 1 << 62)  # not that much room anywhere: not used
    assert local.fast_tree_dir() is None


def test_the_working_copies_of_a_killed_process_are_swept_by_the_next_one(monkeypatch, tmp_path):
    """Working copies live in a directory of the process's own (tasks/environment.py: trees_dir), in memory where
    the tree dir is a memory file system: one whose process was killed (SIGKILL: no finalizer ran) is removed when
    another process opens its first sandbox; a live process's, and names of another form, are left alone."""
    import signal
    import subprocess

    from execcritic.tasks import environment

    child = subprocess.Popen(
        [sys.executable, "-c", "from execcritic.tasks.environment import trees_dir; import pathlib, time; "
         "d = pathlib.Path(trees_dir()); (d / 'execcritic-tree-x').mkdir(); print(d, flush=True); time.sleep(120)"],
        env={**os.environ, "EXECCRITIC_TREE_DIR": str(tmp_path)}, stdout=subprocess.PIPE, text=True)
    killed = Path(child.stdout.readline().strip())
    assert killed.parent == tmp_path and (killed / "execcritic-tree-x").is_dir()
    alive = subprocess.Popen(["sleep", "120"])
    try:
        (tmp_path / f"{environment.TREES_PREFIX}{alive.pid}").mkdir()
        (tmp_path / f"{environment.TREES_PREFIX}not-a-pid").mkdir()
        assert environment.sweep_trees(tmp_path) == []          # both processes still run
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        assert environment.sweep_trees(tmp_path) == [killed] and not killed.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [f"{environment.TREES_PREFIX}{alive.pid}", f"{environment.TREES_PREFIX}not-a-pid"])
        monkeypatch.setenv("EXECCRITIC_TREE_DIR", str(tmp_path))
        mine = Path(environment.trees_dir())
        assert mine == tmp_path / f"{environment.TREES_PREFIX}{os.getpid()}" and mine.is_dir()
    finally:
        alive.kill()
        child.kill()


# --- modes, errors, factory ----------------------------------------------------------------------

def test_plain_subprocess_mode_says_not_isolated(toolz_repo):
    with open_sandbox("local", checkout=toolz_repo, isolated=False, **env_kwargs()) as s:
        assert s.describe()["isolated"] is False and "path_mapping" in s.describe()
        r = s.run("head -c 20 /testbed/setup.py; pwd", timeout=30)
        assert r.isolated is False and r.exit_code == 0
        assert r.output.endswith(str(s.tree) + "\n")
        s.write_file("/tmp/p.txt", "mapped")
        assert s.run("cat /tmp/p.txt", timeout=10).output == "mapped"
        s.run("echo dirty > /testbed/setup.py", timeout=10)
        s.reset()
        assert (s.tree / "setup.py").read_bytes() == (toolz_repo / "setup.py").read_bytes()


@needs_bwrap
def test_describe_and_results_say_isolated(sb):
    d = sb.describe()
    assert d["backend"] == "local" and d["isolated"] is True and d["network"] is False
    assert d["sandbox"].startswith("bubblewrap")
    assert sb.run("true", timeout=10).isolated is True


def test_refuses_worktrees_and_bad_input(toolz_repo, tmp_path):
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text("gitdir: /elsewhere\n")
    with pytest.raises(InputError, match="worktree"):
        LocalSandbox(wt)
    with pytest.raises(InputError, match="not a directory"):
        LocalSandbox(tmp_path / "missing")
    with LocalSandbox(toolz_repo, **env_kwargs()) as s:
        with pytest.raises(ValueError):
            s.run("true", timeout=0)


@needs_bwrap
def test_sandbox_error_when_workspace_vanishes(toolz_repo):
    s = LocalSandbox(toolz_repo, **env_kwargs())
    shutil.rmtree(s.ws, ignore_errors=True)      # all but an overlay working copy's mount point
    with pytest.raises(SandboxError):
        s.run("true", timeout=10)
    with pytest.raises(SandboxError):
        s.reset()
    s.close()
    s.close()  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        s.run("true", timeout=10)


@needs_bwrap
def test_bwrap_setup_failure_is_a_sandbox_error_not_a_result(toolz_repo, tmp_path):
    env = tmp_path / "vanishing-env"
    env.mkdir()
    with LocalSandbox(toolz_repo, binds=[env]) as s:
        assert s.run("echo bwrap: looks like an error; exit 1", timeout=10).exit_code == 1  # just output
        env.rmdir()
        with pytest.raises(SandboxError, match="could not set up"):
            s.run("true", timeout=10)


@needs_bwrap
def test_warm_bytecode_never_serves_stale_code(toolz_repo):
    with LocalSandbox(toolz_repo, warm_bytecode=True, **env_kwargs()) as s:
        assert (s.base_dir / "toolz" / "__pycache__").is_dir()
        before = listing(s)
        assert s.run("python -c 'import toolz'", timeout=30).exit_code == 0
        assert listing(s) == before                     # warm pycs used, nothing rewritten
        s.run("echo 'MARK = 41 + 1' >> toolz/__init__.py", timeout=10)
        assert s.run("python -c 'import toolz; print(toolz.MARK)'", timeout=30).output == "42\n"
        s.reset()
        after = listing(s)
        assert after == before, tree_diff(before, after)
        r = s.run("python -c 'import toolz; print(hasattr(toolz, \"MARK\"))'", timeout=30)
        assert r.output == "False\n"


@needs_bwrap
def test_writable_binds_are_private_and_restored(toolz_repo, tmp_path):
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    (env / "lib" / "mod.py").write_text("X = 1\n")
    with LocalSandbox(toolz_repo, writable_binds=[env], **env_kwargs()) as s:
        r = s.run(f"echo 'X = 2' > {env}/lib/mod.py; touch {env}/lib/installed.pth; cat {env}/lib/mod.py",
                  timeout=10)
        assert r.exit_code == 0 and r.output == "X = 2\n"
        assert (env / "lib" / "mod.py").read_text() == "X = 1\n"       # the host env is untouched
        s.reset()
        assert s.run(f"cat {env}/lib/mod.py; ls {env}/lib", timeout=10).output == "X = 1\nmod.py\n"
    with pytest.raises(InputError, match="isolated"):
        LocalSandbox(toolz_repo, writable_binds=[env], isolated=False)


@needs_bwrap
def test_debootstrap_rootfs_as_root(toolz_repo):
    from execcritic.sandbox.images import rootfs_path

    root = rootfs_path()
    if not (root / ".execcritic-rootfs").is_file():
        if shutil.which("debootstrap") is None and not os.path.isfile("/usr/sbin/debootstrap"):
            pytest.skip("debootstrap is not installed; no rootfs to use as /")
        from execcritic.sandbox.images import ensure_rootfs

        root = ensure_rootfs()
    with LocalSandbox(toolz_repo, rootfs=root) as s:
        r = s.run(f"cat /etc/debian_version; python3 -m pytest -q -p no:cacheprovider {NODE}", timeout=120)
        assert r.exit_code == 0, r.output[-2000:]
        assert "1 passed" in r.output
