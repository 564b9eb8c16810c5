"""Docker API calls per `execute`: how many execs, archive uploads and downloads one check makes, and their time.

Task: the toolz demo task and its official bundle, on Base, in a DockerSandbox (private dockerd, a locally built
image). Each call on the Docker API client is counted and timed (a streamed exec: until its stream ends); the
harness waits, untimed, until the run started ahead is ready before each timed `execute`, as the overhead
benchmark's default variant does. The first `execute` starts cold.

  PYTHONPATH=. .venv/bin/python tests/perf/docker_api_calls.py [--runs 6] [--api-files]
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
import time
from pathlib import Path

from execcritic.harness import prestart
from execcritic.harness.execute import execute
from execcritic.sandbox.base import Limits
from execcritic.sandbox.docker import DockerSandbox
from execcritic.sandbox.dockerd import start_dockerd
from execcritic.sandbox.images import build_task_image, ensure_base_image
from tests.bundles import ScenarioKit
from tests.demo_tasks import TOOLZ, build_demo

CALLS = ("exec_create", "exec_start", "exec_inspect", "put_archive", "get_archive", "inspect_container", "diff")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--api-files", action="store_true", help="files through the Docker API only (a remote daemon)")
    args = ap.parse_args()
    demo = build_demo(TOOLZ, Path(tempfile.mkdtemp(prefix="execcritic-api-")))
    client = start_dockerd().client()
    image = build_task_image(client, demo.repo, "execcritic/test-task:toolz-demo", base=ensure_base_image(client))
    sb = DockerSandbox(image, client=client, activate="", limits=Limits(memory_mb=2048, pids=1024),
                       warm_bytecode=True, host_files=False if args.api_files else None)
    bundle = ScenarioKit(demo, sb).official_bundle()
    calls: collections.Counter = collections.Counter()
    spent: collections.Counter = collections.Counter()
    api = client.api
    for name in CALLS:
        orig = getattr(api, name)

        def counted(*a, _orig=orig, _name=name, **k):
            t = time.monotonic()
            calls[_name] += 1
            out = _orig(*a, **k)
            if _name == "exec_start" and k.get("stream"):
                def stream(out=out, t=t):
                    yield from out
                    spent[_name] += time.monotonic() - t
                return stream()
            spent[_name] += time.monotonic() - t
            return out
        setattr(api, name, counted)
    try:
        for _ in range(args.runs):
            prestart.wait_ready(sb, 60)
            calls.clear()
            spent.clear()
            t = time.monotonic()
            e = execute(demo.task, bundle, sandbox=sb)
            print(json.dumps({"wall_s": round(time.monotonic() - t, 3), "valid": e.valid, "verdict": str(e.verdict),
                              "prestarted": e.extra.get("prestarted"), "calls": dict(calls),
                              "seconds": {k: round(v, 3) for k, v in spent.items()},
                              "phases": {k: round(v, 3) for k, v in e.phases.items()}}))
    finally:
        sb.close()


if __name__ == "__main__":
    main()
