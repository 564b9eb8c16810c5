"""What a multilingual-git instance costs here: the Base's build when its checkout is prepared (time, disk), and a
check - the Oracle bundle on Base + Gold through `execute` (sandbox copy, patches, the row's build steps, the test
command) - beside the same work without the harness: a copy of the same built checkout on the host, the same two
patches applied with git, the same build steps and the same test command run by bash. Rounds interleaved, medians;
the load average is recorded.

  EXECCRITIC_MULTILINGUAL=... EXECCRITIC_GIT_SOURCES=... python experiments/multilingual_cost.py \\
      --instance fmtlib__fmt-3248 --instance jqlang__jq-2839 --rounds 3 --out results/multilingual_git/cost.json
  ... --instance vuejs__core-11915 --bare-tree overlay --out results/multilingual_git/cost_js.json   (JS/TS rows)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from execcritic.config import PAPER
from execcritic.harness.execute import execute
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.sandbox.base import Limits
from execcritic.tasks.environment import environment_for
from execcritic.tasks.mlgit import load_multilingual_git
from execcritic.tasks.mlgit.build import BUILD_ENV, prepare_checkout


def bare(task, bundle, checkout: Path, tree: str = "copy") -> float:
    """The check's work on the host, no sandbox: a working copy of the built checkout (`copy`: cp -a; `overlay`: an
    overlay mount over it, as the sandbox makes where it may mount - for 220-660 MB of node_modules a copy would
    measure the copy), patches, build steps, test command."""
    with tempfile.TemporaryDirectory(prefix="ml-bare-") as tmp:
        t0 = time.monotonic()
        patches = []
        for i, patch in enumerate((task.patch, bundle.test_patch)):
            patches.append(Path(tmp) / f"{i}.patch")
            patches[-1].write_text(patch)
        if tree == "copy":
            subprocess.run(["cp", "-a", str(checkout), f"{tmp}/testbed"], check=True)
            mount = f"mount --bind {tmp}/testbed /testbed"
        else:
            os.makedirs(f"{tmp}/up")
            os.makedirs(f"{tmp}/work")
            mount = f"mount -t overlay overlay -o lowerdir={checkout},upperdir={tmp}/up,workdir={tmp}/work /testbed"
        apply = " && ".join(f"git apply {p}" for p in patches)
        script = "\n".join([*task.extra["build_steps"], bundle.test_command]) + "\n"
        # the checkout's build has /testbed baked in (CMake): the bare run sees the copy there too, as the sandbox
        # does, through a private mount namespace of its own
        subprocess.run(["unshare", "-m", "bash", "-c", f"{mount} && cd /testbed && {apply} && {script}"],
                       env={**BUILD_ENV, **environment_for(task).env}, capture_output=True, check=False)
        return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    note_start()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instance", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="results/multilingual_git/cost.json")
    ap.add_argument("--bare-tree", choices=("copy", "overlay"), default="copy",
                    help="the bare arm's working copy: cp -a of the checkout, or an overlay mount over it")
    args = ap.parse_args(argv)
    os.makedirs("/testbed", exist_ok=True)
    load0 = list(os.getloadavg())
    out = {}
    for task in load_multilingual_git(instance_ids=args.instance):
        co = prepare_checkout(task)
        bundle = oracle_bundle(task)
        env = environment_for(task)
        times: dict[str, list[float]] = {"check": [], "bare": []}
        phases: list[dict] = []
        verdicts = []
        with env.open_sandbox(limits=Limits.from_config(PAPER.harness)) as sb:
            for _ in range(args.rounds):
                for kind in random.sample(["check", "bare"], 2):
                    if kind == "bare":
                        times["bare"].append(bare(task, bundle, co.path, args.bare_tree))
                        continue
                    t0 = time.monotonic()
                    ex = execute(task, bundle, task.patch, sandbox=sb, check_source_patch=False)
                    times["check"].append(time.monotonic() - t0)
                    phases.append(ex.phases)
                    verdicts.append(ex.verdict.value if ex.verdict else f"invalid: {ex.failure_kind.value}")
        med = {k: round(statistics.median(v), 2) for k, v in times.items()}
        out[task.instance_id] = {
            "repo": task.repo, "base_build_seconds": co.record.get("build_seconds"),
            "checkout_disk_bytes": co.record.get("disk_bytes"), "check_median_s": med["check"],
            "bare_median_s": med["bare"], "check_over_bare": round(med["check"] / med["bare"], 2),
            "check_phases_median_s": {k: round(statistics.median(p.get(k, 0.0) for p in phases), 2)
                                      for k in sorted({k for p in phases for k in p})},
            "verdicts": verdicts, "rounds": args.rounds, "times_s": {k: [round(x, 2) for x in v]
                                                                      for k, v in times.items()}}
        print(task.instance_id, out[task.instance_id], flush=True)
    payload = {"instances": out, "loadavg_start": load0, "loadavg_end": list(os.getloadavg()),
               "bare_tree": args.bare_tree,
               "note": "check = execute(Oracle bundle, Gold) in the task's sandbox; bare = the same copy, patches, "
                       "build steps and test command on the host without the sandbox"}
    manifest = build_manifest(extra={"rounds": args.rounds, "instances": args.instance, "bare_tree": args.bare_tree})
    write_result(Path(args.out), payload, manifest)
    print(f"wrote {args.out}")
    if not os.listdir("/testbed"):
        shutil.rmtree("/testbed", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
