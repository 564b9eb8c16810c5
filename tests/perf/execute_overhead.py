"""Harness overhead: median wall time of `execute()` on a real test node vs the same command run bare.

Task: the toolz demo task (tests/demo_tasks.py: toolz 1.0.0 sdist, a re-introduced bug); bundle: its
official test patch; node: the two F2P nodes. Variants, interleaved per round in random order (warm-up
dropped), each local variant in a sandbox of its own:
  bare           the bundle's command in a host checkout that already has the test patch applied
  execute-local  execute(task, bundle, sandbox=LocalSandbox) as configured by default: reset + apply + run +
                 parse; the run was started ahead of time by the previous execute (harness/prestart.py) and
                 the benchmark waits, untimed, until it is ready - the idle time between two checks of an
                 agent or two runs of a Gold audit. The wall time of each execute includes starting the next.
  execute-local-back-to-back  the same, but each timed execute follows an untimed one at once (checks with no
                 idle time between them: a Base gate then Gold, a pool of candidates); its run was started in
                 the sandbox's twin while the untimed one ran (an overlay working copy; else it is claimed before
                 it is ready)
  execute-local-cold     the same with harness.prestart_next_run off: every run starts its interpreter
  execute-local-rewrite  cold, and harness.reuse_rewritten_tests off: pytest rewrites the test module on
                 every run (what execute cost before harness/rewrite_cache.py)
  execute-docker, execute-docker-back-to-back, execute-docker-cold   the same three in a DockerSandbox (private
                 dockerd, a locally built image; files read, written and listed in the volumes' host directories)
  execute-docker-api-files  execute-docker with every file operation through the Docker API (a remote daemon)
  sandbox-local, sandbox-docker  the bare command inside the sandbox, no reset/apply/reporter (isolation's own
                 cost)
Reports medians, ratios of medians and paired ratios, the phase split, and PYTHONDONTWRITEBYTECODE. The
sandboxes run with the harness-owned reporter on (every pytest execution does) and with the Base compiled
once when the sandbox is prepared (checked-hash pycs restored by every reset), as task environments are.

  PYTHONPATH=. .venv/bin/python tests/perf/execute_overhead.py [--rounds 10] [--no-docker] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from execcritic.config import PAPER
from execcritic.sandbox.base import Limits
from execcritic.harness import prestart
from execcritic.harness.execute import execute
from tests.bundles import ScenarioKit
from tests.demo_tasks import TOOLZ, build_demo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--no-docker", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="execcritic-perf-"))
    demo = build_demo(TOOLZ, work)
    limits = Limits(memory_mb=2048, pids=1024)
    local, cold, plain, b2b = (demo.open_local(limits=limits, warm_bytecode=True) for _ in range(4))
    kit = ScenarioKit(demo, local)
    bundle = kit.official_bundle()
    bare_dir = work / "bare"
    shutil.copytree(demo.repo, bare_dir)
    subprocess.run(["git", "apply", "-"], cwd=bare_dir, input=bundle.test_patch, text=True, check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PATH=f"{demo.venv}/bin:{env['PATH']}", PYTHONPATH=str(bare_dir))
    bare_cmd = bundle.command_line
    cold_cfg = dataclasses.replace(PAPER.harness, prestart_next_run=False)
    no_cache = dataclasses.replace(cold_cfg, reuse_rewritten_tests=False)

    def execute_ahead():
        out = execute(demo.task, bundle, sandbox=local)
        return out, lambda: prestart.wait_ready(local, 60)     # untimed: the idle time before the next check

    variants = {"bare": lambda: subprocess.run(bare_cmd, check=False, shell=True, cwd=bare_dir, env=env, capture_output=True),
                "execute-local": execute_ahead,
                "execute-local-back-to-back": lambda: execute(demo.task, bundle, sandbox=b2b),
                "execute-local-cold": lambda: execute(demo.task, bundle, sandbox=cold, config=cold_cfg),
                "execute-local-rewrite": lambda: execute(demo.task, bundle, sandbox=cold, config=no_cache),
                # isolation alone: the same command in a sandbox whose tree a cold execute left patched (test
                # patch applied, pytest's cache of the rewritten test module kept) - no reset, apply,
                # reporter or parse: what bwrap, the cgroups and output capture cost
                "sandbox-local": lambda: plain.run(bare_cmd, timeout=300)}
    docker = dockerd = None
    if not args.no_docker:
        from execcritic.sandbox.docker import DockerSandbox
        from execcritic.sandbox.dockerd import start_dockerd
        from execcritic.sandbox.images import build_task_image, ensure_base_image

        dockerd = start_dockerd()
        client = dockerd.client()
        image = build_task_image(client, demo.repo, "execcritic/test-task:toolz-demo", base=ensure_base_image(client))
        docker, docker_b2b, docker_cold, docker_plain, docker_api = (
            DockerSandbox(image, client=client, activate="", limits=Limits(memory_mb=2048, pids=1024),
                          warm_bytecode=True, host_files=host_files) for host_files in (None,) * 4 + (False,))

        def docker_ahead(sb=docker):
            out = execute(demo.task, bundle, sandbox=sb)
            return out, lambda: prestart.wait_ready(sb, 60)

        variants.update({
            "execute-docker": docker_ahead,
            "execute-docker-api-files": lambda: docker_ahead(docker_api),
            "execute-docker-back-to-back": lambda: execute(demo.task, bundle, sandbox=docker_b2b),
            "execute-docker-cold": lambda: execute(demo.task, bundle, sandbox=docker_cold, config=cold_cfg),
            "sandbox-docker": lambda: docker_plain.run(bare_cmd, timeout=300)})
        execute(demo.task, bundle, sandbox=docker_plain, config=cold_cfg)    # (as for sandbox-local)
    # untimed, right before the variant's timed call
    before = {"execute-local-back-to-back": lambda: execute(demo.task, bundle, sandbox=b2b)}
    ahead = {"execute-local", "execute-local-back-to-back"}
    if docker:
        before["execute-docker-back-to-back"] = lambda: execute(demo.task, bundle, sandbox=docker_b2b)
        ahead |= {"execute-docker", "execute-docker-back-to-back", "execute-docker-api-files"}

    execute(demo.task, bundle, sandbox=plain, config=cold_cfg)   # leaves the test patch applied for sandbox-local
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in variants}
    phases: dict[str, list[dict]] = {k: [] for k in variants}
    for r in range(args.rounds + 1):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            if name in before:
                before[name]()
            t = time.monotonic()
            out = variants[name]()
            dt = time.monotonic() - t
            if isinstance(out, tuple):
                out, idle = out
                assert idle(), "the run started ahead of time never said it was ready"
            if hasattr(out, "valid"):
                assert out.valid and out.verdict.value == "FAIL", out.diagnostic
                if r > 0:
                    assert out.extra.get("prestarted") is (name in ahead), (name, out.extra)
                assert out.extra.get("reporter", {}).get("ended"), out.extra.get("reporter")
            elif hasattr(out, "exit_code"):             # the F2P tests fail on Base: pytest exits 1
                assert out.exit_code == 1, out.output[-2000:]
            if r > 0:  # round 0 is the warm-up
                times[name].append(dt)
                if hasattr(out, "phases"):
                    phases[name].append(out.phases)
    med = {k: statistics.median(v) for k, v in times.items()}
    report = {"rounds": args.rounds, "task": demo.task.instance_id, "command": bare_cmd,
              "PYTHONDONTWRITEBYTECODE_parent": os.environ.get("PYTHONDONTWRITEBYTECODE"),
              "PYTHONDONTWRITEBYTECODE_children": "unset (bare env, bwrap and docker children)", "loadavg_start": load_start, "loadavg": os.getloadavg(), "variants": {}}
    for k, v in times.items():
        paired = [a / b for a, b in zip(v, times["bare"])]
        split = {p: round(statistics.median(d.get(p, 0.0) for d in phases[k]), 3)
                 for p in ("reset", "apply", "run", "parse", "prestart")} if phases[k] else {}
        report["variants"][k] = {"median_s": round(med[k], 3), "min_s": round(min(v), 3), "max_s": round(max(v), 3),
                                 "ratio_of_medians": round(med[k] / med["bare"], 2),
                                 "paired_ratio_median": round(statistics.median(paired), 2), "phases_median_s": split}
    print(json.dumps(report, indent=2))
    if args.json:
        from execcritic.results.manifest import build_manifest, write_result

        manifest = build_manifest(datasets=[{"id": demo.task.instance_id, "source": "tests/demo_tasks.py (toolz sdist)"}],
                                  extra={"rounds": args.rounds})
        write_result(args.json, report, manifest)
    for sb in (local, cold, plain, b2b):
        sb.close()
    if docker:
        for sb in (docker, docker_b2b, docker_cold, docker_plain, docker_api):
            sb.close()
    if dockerd:
        dockerd.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
