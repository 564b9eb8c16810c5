"""Reproduce one runtime-corpus case outside pytest (for docs/BYPASSES.md and for whoever fixes the harness):

    PYTHONPATH=. python -m tests.adversarial.runtime.repro CHEAT_ID [FAMILY] [--docker] [--show-patch]

Builds the cheat's patch against the family's Base checkout, runs `execute(..., check_source_patch=True)`
with the official bundle in a fresh sandbox (local bubblewrap; `--docker`: the toolz demo image), and prints
the failure kind, the diagnostic, the reporter summary and the output tail. Families: requests, pytest,
django, sympy (verified-sdist environments, built in the user cache) and toolz (the demo task).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from execcritic.config import PAPER
from execcritic.harness.execute import base_reader, execute
from execcritic.sandbox.base import Limits
from tests.adversarial.runtime import cheats as C
from tests.paths import VERIFIED


def open_target(fam: str, docker: bool):
    limits = Limits.from_config(PAPER.harness)
    if fam == "toolz":
        from tests.bundles import ScenarioKit
        from tests.demo_tasks import TOOLZ, build_demo

        demo = build_demo(TOOLZ, Path(tempfile.mkdtemp(prefix="redteam-demo-")))
        C.CHECKOUTS[demo.task.instance_id] = demo.repo
        if docker:
            from execcritic.sandbox.docker import DockerSandbox
            from execcritic.sandbox.dockerd import start_dockerd
            from execcritic.sandbox.images import build_task_image, ensure_base_image

            client = start_dockerd().client()
            image = build_task_image(client, demo.repo, "execcritic/test-task:toolz-demo",
                                     base=ensure_base_image(client))
            sandbox = DockerSandbox(image, client=client, activate="", limits=limits)
        else:
            sandbox = demo.open_local(limits=limits)
        return demo.task, ScenarioKit(demo, sandbox).official_bundle(), sandbox
    os.environ.setdefault("EXECCRITIC_VERIFIED", str(VERIFIED))
    from execcritic.harness.oracle.build import oracle_bundle
    from execcritic.tasks.environment import environment_for
    from execcritic.tasks.sdist import load_verified_sdist

    iid = {f: i for i, f in C.FAMILY_OF.items()}[fam]
    task = next(iter(load_verified_sdist(instance_ids=[iid])))
    sandbox = environment_for(task).open_sandbox(limits=limits)
    sandbox.reset()
    return task, oracle_bundle(task, read_base=base_reader(sandbox)), sandbox


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cheat")
    ap.add_argument("family", nargs="?")
    ap.add_argument("--docker", action="store_true")
    ap.add_argument("--show-patch", action="store_true")
    args = ap.parse_args(argv)
    cheat = next((c for c in C.CHEATS if c.id == args.cheat), None)
    if cheat is None:
        ap.error(f"no cheat {args.cheat!r}; known: {', '.join(c.id for c in C.CHEATS)}")
    fam = args.family or cheat.families[0]
    task, bundle, sandbox = open_target(fam, args.docker)
    with sandbox:
        patch = cheat.build(task)
        if args.show_patch:
            print(patch)
        config = PAPER.harness if cheat.timeout_s is None else dataclasses.replace(PAPER.harness,
                                                                                   test_timeout_s=cheat.timeout_s)
        ex = execute(task, bundle, patch, sandbox=sandbox, config=config, check_source_patch=not cheat.runtime_only)
    print(f"{cheat.id} on {task.instance_id} ({sandbox.backend}): verdict={ex.verdict and ex.verdict.value} "
          f"kind={ex.failure_kind.value} (expected {cheat.expect.value}) exit={ex.exit_code}")
    print("diagnostic:", ex.diagnostic)
    print("reporter:", json.dumps(ex.extra.get("reporter"), default=str)[:2000])
    print("output tail:\n" + ex.output_tail[-2500:])
    return 1 if ex.passed else 0


if __name__ == "__main__":
    sys.exit(main())
