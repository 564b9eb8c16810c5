"""Start-up cost of the command line: median wall time of `execcritic --version`, `execcritic --help` and each
command's own `--help`, each a fresh process, beside a bare `python -c pass` on the same interpreter (the floor no
command can go under). Also lists which heavy libraries `import execcritic.cli` pulls in (none is the aim:
tests/unit/test_cli_startup.py asserts it). Rounds are interleaved in random order; the load average is recorded
with the numbers, since on a shared machine only ratios side by side compare.

  PYTHONPATH=. .venv/bin/python tests/perf/startup.py [--rounds 7] [--json results/bench/startup.json]
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

from execcritic.cli import COMMANDS
from tests.unit.test_cli_startup import HEAVY, imported_by

CASES = {"python -c pass": [sys.executable, "-c", "pass"],
         "execcritic --version": [sys.executable, "-m", "execcritic.cli", "--version"],
         "execcritic --help": [sys.executable, "-m", "execcritic.cli", "--help"],
         **{f"execcritic {name} --help": [sys.executable, "-m", "execcritic.cli", name, "--help"]
            for name in COMMANDS}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        order = list(CASES)
        random.shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            subprocess.run(CASES[name], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t0)
        load.append(os.getloadavg()[0])
    report = {"rounds": args.rounds, "load_avg_1min": [round(x, 2) for x in load],
              "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
              "heavy_imported_by_execcritic_cli": sorted(imported_by("execcritic.cli") & set(HEAVY))}
    print(json.dumps(report, indent=2))
    if args.json:
        from execcritic.results.manifest import build_manifest, write_result

        manifest = build_manifest(datasets=[], timings={"median_s": report["median_s"]})
        write_result(args.json, report, manifest)


if __name__ == "__main__":
    main()
