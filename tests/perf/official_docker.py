"""The official evaluator's two paths side by side on tasks whose Docker image can be built here: the image-free
path (`evaluate_official` in a local sandbox: the instrumented and the plain run, cross-checked) against the Docker
path, which is SWE-bench's own harness unchanged (`run_instance` with the row's eval_script in an image laid out
like `sweb.eval.*`), and a bare run of the same tests. The official `sweb.eval.*` images cannot be pulled here, so
the tasks are the test suite's demo tasks (tests/demo_tasks.py: toolz 1.0.0 and boltons 24.1.0 sdists with a
re-introduced bug; the image is built locally with debootstrap, as in tests/docker/test_official_docker.py).

  bare           the eval script's test command (`python3 -m pytest -rA <test file>`) in a host copy of the Base
                 with Gold and the test patch applied, the demo venv first on PATH, no sandbox
  official-local evaluate_official(task, gold, local environment): the paper's harness, image-free
  official-docker evaluate_official(task, gold, docker environment): swebench's run_instance (container start,
                 patch, eval script, log grading, container removal)
Variants are interleaved per round in random order; round 0 is a warm-up. The load average is recorded. One more
image-free official run per task, outside the medians, times its phases (tests/perf/official_overhead.py: phases).

  PYTHONPATH=. .venv/bin/python tests/perf/official_docker.py [--rounds 5] [--json results/bench/official_docker.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from execcritic.evaluation.official import evaluate_official
from execcritic.sandbox.dockerd import start_dockerd
from execcritic.sandbox.images import build_task_image, ensure_base_image
from execcritic.tasks.environment import TaskEnvironment
from tests.demo_tasks import BOLTONS, TOOLZ, build_demo
from tests.perf.official_overhead import phases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="execcritic-perf-official-docker-"))
    dockerd = start_dockerd()
    os.environ["DOCKER_HOST"] = dockerd.base_url      # swebench's cleanup shells out to `docker`
    client = dockerd.client()
    base = ensure_base_image(client)
    variants, meta, local_envs = {}, {}, {}
    for spec in (TOOLZ, BOLTONS):
        demo = build_demo(spec, work / spec.name)
        task = demo.task
        image = build_task_image(client, demo.repo, f"execcritic/test-task:{spec.name}-demo", base=base)
        local = TaskEnvironment(kind="local", checkout=demo.repo, venv=demo.venv, activation=demo.activate,
                                base_commit=task.base_commit)
        docker = TaskEnvironment(kind="docker", image=image, base_commit=task.base_commit)
        bare_dir = work / f"{spec.name}-bare"
        shutil.copytree(demo.repo, bare_dir)
        for patch in (task.patch, task.test_patch):
            subprocess.run(["git", "apply", "-"], cwd=bare_dir, input=patch, text=True, check=True)
        env = {**os.environ, "PATH": f"{demo.venv}/bin:{os.environ['PATH']}", "PYTHONPATH": str(bare_dir)}
        bare_cmd = ["python3", "-m", "pytest", "-rA", spec.test_file]

        def bare(bare_dir=bare_dir, env=env, bare_cmd=bare_cmd):
            proc = subprocess.run(bare_cmd, cwd=bare_dir, env=env, capture_output=True, text=True, check=False)
            assert proc.returncode == 0, proc.stdout[-2000:]           # Gold: every test of the file passes
            return "passed"

        def official(env_, task=task):
            res = evaluate_official(task, task.patch, env_)
            assert res.valid and res.resolved, res.error
            return res.backend

        variants[f"{spec.name}/bare"] = bare
        variants[f"{spec.name}/official-local"] = lambda official=official, local=local: official(local)
        variants[f"{spec.name}/official-docker"] = lambda official=official, docker=docker: official(docker)
        local_envs[spec.name] = (task, local)
        meta[spec.name] = {"instance": task.instance_id, "test_file": spec.test_file, "image": image,
                           "f2p": len(task.fail_to_pass), "p2p": len(task.pass_to_pass)}
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(args.rounds + 1):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            variants[name]()
            if r > 0:
                times[name].append(time.perf_counter() - t0)
    report = {"rounds": args.rounds, "tasks": meta, "loadavg_start": load_start, "loadavg": os.getloadavg(),
              "cpus": os.cpu_count(), "variants": {}}
    for name, v in times.items():
        project = name.split("/")[0]
        bare_med = statistics.median(times[f"{project}/bare"])
        report["variants"][name] = {"median_s": round(statistics.median(v), 3), "min_s": round(min(v), 3),
                                    "max_s": round(max(v), 3),
                                    "x_bare": round(statistics.median(v) / bare_med, 2)}
    report["phases_official_local_s"] = {name: phases(task, env_) for name, (task, env_) in local_envs.items()}
    print(json.dumps(report, indent=2))
    if args.json:
        from execcritic.results.manifest import build_manifest, write_result

        manifest = build_manifest(datasets=[{"id": m["instance"], "source": "tests/demo_tasks.py"} for m in meta.values()],
                                  extra={"rounds": args.rounds})
        write_result(args.json, report, manifest)
    dockerd.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
