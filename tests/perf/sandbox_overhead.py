"""Sandbox overhead: one real test node, bare vs through each backend (reset included).

A script, not a test. It builds the toolz repository the tests use (PyPI sdist committed as git,
plus ignored build outputs), then runs interleaved rounds: each round runs every variant once in a
shuffled order; the first (warm-up) round is dropped. Reported per variant: median/min/max wall
seconds of one check (reset + run for sandboxes), the reset and run parts, the ratio of medians to
the matching bare baseline and the paired ratio (median over rounds of variant/bare in the round).

Variants
  bare_host     host interpreter (this venv), plain subprocess in a host copy, warm __pycache__
  local         LocalSandbox (bubblewrap, same venv): reset() + run()
  local_warm    LocalSandbox(warm_bytecode=True)
  local_plain   LocalSandbox(isolated=False)
  bare_rootfs   the debootstrap image's interpreter (bwrap over its rootfs, no reset, warm cache)
  docker        DockerSandbox on the debootstrap task image: reset() + run()
  docker_warm   DockerSandbox(warm_bytecode=True)
  docker_noreset  DockerSandbox run() only (what `docker exec` itself costs)
local* compare with bare_host; docker* and bare_rootfs compare with bare_rootfs (same interpreter).

Children never inherit PYTHONDONTWRITEBYTECODE / PYTHONUNBUFFERED from this process (the sandboxes
build a clean environment; the bare variants drop them), so bytecode caching behaves as in Docker.
The report says whether the parent environment had them set.

Usage: python tests/perf/sandbox_overhead.py [--rounds 8] [--no-docker] [--json out.json]

Reset cost on a bigger tree (any git checkout, e.g. a Django sdist committed as git):
       python tests/perf/sandbox_overhead.py --reset-tree /path/to/checkout [--rounds 5] [--no-docker]
prints, per backend: sandbox creation time, an idle reset (nothing changed), and a reset after a
dirty run (3 tracked files edited, a new file, a deleted file, `python -c "import <pkg>"` writing
__pycache__, `git status` refreshing the index).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))   # the repository root (for `tests.conftest`)

from tests.conftest import TOOLZ_VERSION, make_toolz_repo  # noqa: E402  (after the sys.path setup)

NODE = "toolz/tests/test_itertoolz.py::test_groupby"
CMD = f"python -m pytest -q -p no:cacheprovider {NODE}"


def toolz_sdist() -> Path:
    import platformdirs

    dest = Path(platformdirs.user_cache_dir("execcritic")) / "test-data"
    path = dest / f"toolz-{TOOLZ_VERSION}.tar.gz"
    if not path.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", f"toolz=={TOOLZ_VERSION}", "-d", str(dest)], check=True)
    return path


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}
    return env


class Bare:
    """A plain subprocess in its own host copy (pycache allowed to stay warm: no reset)."""

    def __init__(self, repo: Path, work: Path, argv_prefix: list[str], python: str):
        self.copy = work
        subprocess.run(["cp", "-a", str(repo), str(work)], check=True)
        self.argv = argv_prefix + ["bash", "-c", CMD.replace("python ", f"{python} ", 1)]
        self.env = clean_env()

    def check(self) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        p = subprocess.run(self.argv, cwd=self.copy, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"bare run failed: {p.stdout.decode()[-1500:]}")
        return dt, 0.0, p.returncode


class Sandboxed:
    def __init__(self, sb, cmd: str, reset: bool = True):
        self.sb, self.cmd, self.do_reset = sb, cmd, reset

    def check(self) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        if self.do_reset:
            self.sb.reset()
        t1 = time.perf_counter()
        r = self.sb.run(self.cmd, timeout=300)
        t2 = time.perf_counter()
        if r.exit_code != 0 or "1 passed" not in r.output:
            raise SystemExit(f"{self.sb.backend} run failed ({r.exit_code}): {r.output[-1500:]}")
        return t2 - t0, t1 - t0, r.exit_code


DIRTY_BIG = r"""
set -e
files=$(git ls-files '*.py' | head -3)
for f in $files; do echo '# edited' >> "$f"; done
echo new > NEW_FILE.txt
git rm -q --cached $(git ls-files | tail -1) >/dev/null && rm -f $(git ls-files -d | head -1) || true
pkg=$(git ls-files '*/__init__.py' | head -1 | cut -d/ -f1)
PY=$(command -v python || command -v python3)
[ -z "$pkg" ] || $PY -c "import $pkg" || true
git status --porcelain >/dev/null
"""


def reset_tree(args) -> None:
    """Creation, idle reset and dirty reset on a big checkout, per backend."""
    from execcritic.sandbox.local import LocalSandbox

    tree = args.reset_tree.resolve()
    sbs: dict[str, object] = {}
    created: dict[str, float] = {}
    closers = []
    try:
        t0 = time.perf_counter()
        sbs["local"] = LocalSandbox(tree)
        created["local"] = time.perf_counter() - t0
        if not args.no_docker:
            from execcritic.sandbox.docker import DockerSandbox
            from execcritic.sandbox.dockerd import start_dockerd
            from execcritic.sandbox.images import build_task_image, ensure_base_image

            d = start_dockerd()
            closers.append(d)
            client = d.client()
            ensure_base_image(client)
            t0 = time.perf_counter()
            image = build_task_image(client, tree, f"execcritic/perf-tree:{tree.name.lower()}")
            print(f"task image built in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            t0 = time.perf_counter()
            sbs["docker"] = DockerSandbox(image, client=client, activate="")
            created["docker"] = time.perf_counter() - t0
        n_entries = sum(1 for _ in tree.rglob("*"))
        print(f"tree {tree}: {n_entries} entries; rounds {args.rounds}; loadavg {os.getloadavg()[0]:.1f}")
        for name, sb in sbs.items():
            idle, dirty, restored = [], [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                sb.reset()
                idle.append(time.perf_counter() - t0)
                r = sb.run(DIRTY_BIG, timeout=600)
                if r.exit_code != 0:
                    raise SystemExit(f"dirty run failed in {name}: {r.output[-1500:]}")
                t0 = time.perf_counter()
                sb.reset()
                dirty.append(time.perf_counter() - t0)
                lr = sb.last_restore
                restored.append(lr if isinstance(lr, dict) else vars(lr))
            print(f"{name:7s} create {created[name]:6.2f}s  idle reset median {statistics.median(idle):.3f}s "
                  f"(min {min(idle):.3f})  dirty reset median {statistics.median(dirty):.3f}s "
                  f"(min {min(dirty):.3f})  last restore {restored[-1]}")
            print(f"        describe timings: {sb.describe().get('timings')}")
    finally:
        for sb in sbs.values():
            sb.close()
        for c in closers:
            c.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8, help="measured rounds (one warm-up round is added)")
    ap.add_argument("--no-docker", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--reset-tree", type=Path, help="measure reset cost on this checkout instead")
    args = ap.parse_args()
    if args.reset_tree:
        reset_tree(args)
        return

    from execcritic.sandbox.local import LocalSandbox

    parent_pdwb = os.environ.get("PYTHONDONTWRITEBYTECODE")
    tmp = Path(tempfile.mkdtemp(prefix="execcritic-perf-"))
    variants: dict[str, object] = {}
    closers = []
    try:
        repo = make_toolz_repo(toolz_sdist(), tmp / "repo")
        venv = Path(sys.prefix)
        act = {"activate": f"source {shlex.quote(str(venv))}/bin/activate", "binds": [venv]} \
            if sys.prefix != sys.base_prefix else {"activate": "", "binds": []}
        variants["bare_host"] = Bare(repo, tmp / "bare_host", [], sys.executable)
        for name, kw in (("local", {}), ("local_warm", {"warm_bytecode": True}),
                         ("local_plain", {"isolated": False})):
            sb = LocalSandbox(repo, **act, **kw)
            closers.append(sb)
            variants[name] = Sandboxed(sb, CMD)
        if not args.no_docker:
            from execcritic.sandbox.docker import DockerSandbox
            from execcritic.sandbox.dockerd import start_dockerd
            from execcritic.sandbox.images import build_task_image, ensure_base_image, ensure_rootfs

            rootfs = ensure_rootfs()
            bw = LocalSandbox(repo, rootfs=rootfs)  # only for its bwrap argv over the rootfs
            closers.append(bw)
            argv = bw.bwrap_argv("", cwd="/testbed")
            argv = argv[:argv.index(str(bw.tree)) - 1]  # everything before `--bind <copy> /testbed`
            prefix = argv + ["--bind", str(tmp / "bare_rootfs"), "/testbed", "--chdir", "/testbed"]
            variants["bare_rootfs"] = Bare(repo, tmp / "bare_rootfs", prefix, "python3")
            d = start_dockerd()
            closers.append(d)
            client = d.client()
            ensure_base_image(client)
            image = build_task_image(client, repo, "execcritic/perf-task:toolz")
            dcmd = CMD.replace("python ", "python3 ", 1)
            for name, kw, reset in (("docker", {}, True), ("docker_warm", {"warm_bytecode": True}, True),
                                    ("docker_noreset", {}, False)):
                sb = DockerSandbox(image, client=client, activate="", **kw)
                closers.append(sb)
                variants[name] = Sandboxed(sb, dcmd, reset=reset)

        names = list(variants)
        rows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        load0 = os.getloadavg()
        for rnd in range(args.rounds + 1):
            order = names[:]
            random.shuffle(order)
            for n in order:
                total, reset_s, _ = variants[n].check()
                if rnd > 0:
                    rows[n].append((total, reset_s))
            print(f"round {rnd}{' (warm-up, dropped)' if rnd == 0 else ''}: "
                  + " ".join(f"{n}={rows[n][-1][0]:.3f}" for n in names if rnd > 0), file=sys.stderr)
        load1 = os.getloadavg()

        def baseline(n: str) -> str:
            return "bare_rootfs" if (n.startswith("docker") or n == "bare_rootfs") else "bare_host"

        report = {"node": NODE, "rounds": args.rounds, "parent_PYTHONDONTWRITEBYTECODE": parent_pdwb,
                  "children_PYTHONDONTWRITEBYTECODE": None, "loadavg_start": load0, "loadavg_end": load1,
                  "cpu_count": os.cpu_count(), "variants": {}}
        print(f"\nnode {NODE}; {args.rounds} interleaved rounds (+1 warm-up dropped); "
              f"PYTHONDONTWRITEBYTECODE in parent env: {parent_pdwb!r}, in children: unset; "
              f"loadavg {load0[0]:.1f} -> {load1[0]:.1f}\n")
        hdr = (f"{'variant':15s} {'median':>7s} {'min':>7s} {'max':>7s} {'reset':>7s} {'run':>7s} "
               f"{'vs':>11s} {'ratio':>6s} {'paired':>6s} {'added':>7s}")
        print(hdr)
        print("-" * len(hdr))
        for n in names:
            tot = [t for t, _ in rows[n]]
            rst = [r for _, r in rows[n]]
            run = [t - r for t, r in rows[n]]
            b = baseline(n)
            btot = [t for t, _ in rows[b]]
            med, bmed = statistics.median(tot), statistics.median(btot)
            paired = statistics.median(t / bt for t, bt in zip(tot, btot))
            v = {"median": med, "min": min(tot), "max": max(tot), "reset_median": statistics.median(rst),
                 "run_median": statistics.median(run), "baseline": b, "ratio": med / bmed,
                 "paired_ratio": paired, "added_s": med - bmed, "samples": tot}
            report["variants"][n] = v
            print(f"{n:15s} {med:7.3f} {min(tot):7.3f} {max(tot):7.3f} {v['reset_median']:7.3f} "
                  f"{v['run_median']:7.3f} {b:>11s} {v['ratio']:6.2f} {paired:6.2f} {v['added_s']:+7.3f}")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    finally:
        for c in reversed(closers):
            try:
                c.stop() if hasattr(c, "stop") else c.close()
            except Exception as exc:  # keep cleaning up
                print(f"cleanup: {exc}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
