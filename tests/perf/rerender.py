"""Re-rendering from stored results: median wall time of `execcritic figures` (paper_figures/ from the pinned runs)
and `execcritic reproduce --from-results` (every artifact re-rendered, nothing run), each a fresh process, rounds
interleaved; the load average is recorded. Both must leave the checkout unchanged (the committed figures are what
they regenerate): the script fails when `git status` changes.

  EXECCRITIC_VERIFIED=... PYTHONPATH=. .venv/bin/python tests/perf/rerender.py [--rounds 3] [--json results/bench/rerender.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

CASES = {"execcritic figures": [sys.executable, "-m", "execcritic.cli", "figures"],
         "execcritic reproduce --from-results": [sys.executable, "-m", "execcritic.cli", "reproduce", "--from-results"]}


def status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    before = status()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    load_start = os.getloadavg()
    for _ in range(args.rounds):
        order = list(CASES)
        random.shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            proc = subprocess.run(CASES[name], capture_output=True, text=True, check=False)
            times[name].append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"{name} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    if status() != before:
        raise SystemExit("re-rendering changed the checkout:\n" + status())
    report = {"rounds": args.rounds, "loadavg_start": load_start, "loadavg": os.getloadavg(), "cpus": os.cpu_count(),
              "commands": {k: {"median_s": round(statistics.median(v), 2), "min_s": round(min(v), 2),
                               "max_s": round(max(v), 2)} for k, v in times.items()}}
    print(json.dumps(report, indent=2))
    if args.json:
        from execcritic.results.manifest import build_manifest, write_result

        write_result(args.json, report, build_manifest(extra={"rounds": args.rounds}))


if __name__ == "__main__":
    main()
