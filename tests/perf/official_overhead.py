"""Official evaluation cost: one `evaluate_official` of an instance's Gold patch, as `execcritic official` runs it,
against a bare run of the same FAIL_TO_PASS + PASS_TO_PASS tests in the same environment (environment builds
excluded: every environment named must be built).

  bare              the row's test command (the eval script's line after its Start marker: SWE-bench's test
                    directives, with the script's `export` lines, PYTHONHASHSEED set as the official runs set it) in
                    a host copy of the environment's checkout with Gold and the test patch applied, under the
                    environment's activation, no sandbox; graded with the row's log parser; where that does not run
                    the tests, in a sandbox without reporter (`Bare`)
  official          evaluate_official(task, gold, env) with the paper's harness: a fresh sandbox, the candidate gate,
                    the instrumented and the plain run (at the same time: harness.official_runs_together), grading,
                    the reporter's cross-check
  official-serial   the same with the two runs one after the other in one sandbox (official_runs_together off)
Variants are interleaved per round in random order. One more official run per instance, untimed in the medians,
times the evaluator's phases (sandbox open, reset, apply, each run, grading, cross-check) by wrapping them.
The sandboxes' own preparation (`sandbox.open`: an overlay mount over the checkout, or a copy of it where this
process may not mount; `working_copy` in the JSON says which) is part of every official run and shown apart. The
load average is recorded with the numbers: on a shared machine only ratios side by side compare.

  EXECCRITIC_VERIFIED=... PYTHONPATH=. .venv/bin/python tests/perf/official_overhead.py \
      --dataset verified-sdist -i psf__requests-2931 ... [--rounds 3] [--json results/bench/official_overhead.json]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
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
from execcritic.evaluation import official as off
from execcritic.evaluation.official import START, env_eval_script, evaluate_official, grade_log
from execcritic.harness.apply import SWEBENCH, apply_patch
from execcritic.sandbox.base import Limits
from execcritic.sandbox.local import LocalSandbox
from execcritic.tasks.environment import environment_for
from execcritic.tasks.load import load_tasks

PHASES = {off: ["source_patch_problems", "apply_patch", "tree_problem", "run_reported", "grade_log", "cross_check",
                "outside_tree", "candidate_facts"],
          LocalSandbox: ["__init__", "reset", "run", "changed_paths", "close", "read_file"]}


def bare_command(task, env) -> str:
    """The eval script's exports and test command, as the bare run types them."""
    lines = env_eval_script(task, env).split("\n")
    test = next(lines[i + 1] for i, ln in enumerate(lines) if START in ln)
    exports = [ln for ln in lines if ln.startswith("export ")]
    return " && ".join([env.activation or "true", *exports, test])


#: the bare run's PYTHONHASHSEED: both official runs set one (the instrumented run's), and SymPy's bin/test starts
#: itself again in a subprocess when none is set - a bare run without one did twice the work (0.33x "overhead")
HASHSEED = "0"


class Bare:
    """The bare run of the row's test command with Gold and the test patch applied: on the host in a copy of the
    checkout; where that does not run the tests (an environment that works only at /testbed: pytest-dev's editable
    install of its checkout) in a sandbox of the environment, the patches applied once, no reporter, no reset -
    `where` says which (a sandbox's own cost, bubblewrap and the seccomp filter, is then in the bare time)."""

    def __init__(self, task, env, root: Path):
        self.task, self.env, self.sandbox = task, env, None
        self.tree = root / task.instance_id
        shutil.copytree(env.checkout, self.tree, symlinks=True)
        for patch in (task.patch, task.test_patch):
            subprocess.run(["git", "apply", "-"], cwd=self.tree, input=patch, text=True, check=True,
                           capture_output=True)
        self.where = "host"
        self.graded = grade_log(task, self.run()[1], patch=task.patch)          # (and the warm-up)
        if not self.graded.valid:
            self.where = "sandbox"
            self.sandbox = env.open_sandbox(limits=Limits.from_config(PAPER.harness))
            for name, patch in (("gold", task.patch), ("test", task.test_patch)):
                applied = apply_patch(self.sandbox, patch, name=name, ladder=SWEBENCH, timeout=120)
                if not applied.applied:
                    raise SystemExit(f"{task.instance_id}: the {name} patch does not apply in the sandbox")
            self.graded = grade_log(task, self.run()[1], patch=task.patch)

    def run(self) -> tuple[float, str]:
        t0 = time.perf_counter()
        if self.sandbox is not None:
            res = self.sandbox.run(bare_command(self.task, self.env), timeout=PAPER.harness.official_timeout_s,
                                   cwd="/testbed", env={"PYTHONHASHSEED": HASHSEED})
            return time.perf_counter() - t0, f"{START}\n{res.output}\n{off.END}\n"
        envvars = {**os.environ, **self.env.env, "PYTHONPATH": str(self.tree), "PYTHONHASHSEED": HASHSEED}
        proc = subprocess.run(["bash", "-c", bare_command(self.task, self.env)], cwd=self.tree, env=envvars,
                              capture_output=True, text=True, errors="replace", check=False)
        return time.perf_counter() - t0, f"{START}\n{proc.stdout}\n{proc.stderr}\n{off.END}\n"

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        shutil.rmtree(self.tree, ignore_errors=True)


def phases(task, env) -> dict[str, float]:
    """One official run with the evaluator's steps timed (wrapped here, restored after)."""
    spent: dict[str, float] = collections.defaultdict(float)
    saved = []

    def timed(owner, name):
        fn = getattr(owner, name)
        saved.append((owner, name, fn))
        label = "sandbox.open" if name == "__init__" else f"{'sandbox.' if owner is LocalSandbox else ''}{name}"

        @functools.wraps(fn)
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.perf_counter() - t0
        setattr(owner, name, wrapper)

    for owner, names in PHASES.items():
        for name in names:
            timed(owner, name)
    try:
        t0 = time.perf_counter()
        evaluate_official(task, task.patch, env)
        spent["total"] = time.perf_counter() - t0
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    # the plain run is what sandbox.run spent beyond the instrumented run (run_reported calls sandbox.run)
    spent["plain_run (sandbox.run outside run_reported)"] = spent.pop("sandbox.run", 0.0) - spent["run_reported"]
    return {k: round(v, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", action="append", required=True, help="task set of the -i that follow")
    ap.add_argument("-i", "--instance", action="append", default=[], help="DATASET:INSTANCE or INSTANCE")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    from execcritic.results.manifest import note_start

    note_start()            # the manifest names the code this run started with, whatever HEAD is when it ends
    by_set: dict[str, list[str]] = collections.defaultdict(list)
    for item in args.instance:
        ds, _, iid = item.rpartition(":")
        by_set[ds or args.dataset[0]].append(iid)
    tasks, sets = [], []
    for ds, ids in by_set.items():
        ts = load_tasks(ds, instance_ids=ids)
        sets.append(ts.manifest())
        tasks += [(ds, t) for t in ts]
    serial = dataclasses.replace(PAPER.harness, official_runs_together=False)
    work = Path(tempfile.mkdtemp(prefix="execcritic-official-bench-"))
    rows = []
    load = [os.getloadavg()[0]]
    try:
        for ds, task in tasks:
            env = environment_for(task)
            bare = Bare(task, env, work)
            row = {"dataset": ds, "instance_id": task.instance_id, "repo": task.repo,
                   "tests": len(task.fail_to_pass) + len(task.pass_to_pass), "bare_where": bare.where,
                   "bare_valid": bare.graded.valid, "bare_resolved": bare.graded.resolved,
                   "bare_error": bare.graded.error[:300], "times": collections.defaultdict(list)}
            row["verdict"] = _verdict(evaluate_official(task, task.patch, env))     # (and the warm-up)
            if row["verdict"] != "resolved":                 # the benchmark times resolving evaluations only
                bare.close()
                rows.append(row)
                print(json.dumps({k: row[k] for k in ("instance_id", "verdict")}), flush=True)
                continue
            for _ in range(args.rounds):
                for name, seconds in one_round(task, env, bare, serial):
                    row["times"][name].append(seconds)
                load.append(os.getloadavg()[0])
            row["phases_s"] = phases(task, env)
            med = {k: statistics.median(v) for k, v in row["times"].items()}
            row["median_s"] = {k: round(v, 3) for k, v in med.items()}
            row["ratio"] = {k: round(med[k] / med["bare"], 2) for k in med if k != "bare"}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("instance_id", "tests", "bare_where", "bare_valid", "median_s",
                                                  "ratio", "verdict")}), flush=True)
            bare.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    timed_rows = [r for r in rows if r["bare_valid"] and "ratio" in r]
    report = {"rounds": args.rounds, "load_avg_1min": [round(x, 2) for x in load], "cpus": os.cpu_count(),
              "working_copy": _working_copy(),
              "instances": rows,
              "summary": {k: {"median_ratio": round(statistics.median(r["ratio"][k] for r in timed_rows), 2),
                              "max_ratio": max(r["ratio"][k] for r in timed_rows),
                              "within_2x": sum(r["ratio"][k] <= 2 for r in timed_rows), "of": len(timed_rows)}
                          for k in timed_rows[0]["ratio"]} if timed_rows else {},
              "bare_not_valid": [r["instance_id"] for r in rows if not r["bare_valid"]],
              "gold_not_resolved": {r["instance_id"]: r["verdict"] for r in rows if r["verdict"] != "resolved"}}
    print(json.dumps(report["summary"], indent=2))
    if args.json:
        from execcritic.results.manifest import build_manifest, write_result

        manifest = build_manifest(datasets=sets, timings={f'{r["dataset"]}:{r["instance_id"]}': r["median_s"]
                                                          for r in rows if "median_s" in r})
        write_result(args.json, report, manifest)


def one_round(task, env, bare: Bare, serial) -> list[tuple[str, float]]:
    """Each variant once, in random order."""
    variants = {"bare": lambda: bare.run()[0],
                "official": lambda: _timed(lambda: evaluate_official(task, task.patch, env)),
                "official-serial": lambda: _timed(lambda: evaluate_official(task, task.patch, env, harness=serial))}
    order = list(variants)
    random.shuffle(order)
    return [(name, round(variants[name](), 3)) for name in order]


def _timed(fn) -> float:
    t0 = time.perf_counter()
    res = fn()
    if not (res.valid and res.resolved):
        raise SystemExit(f"{res.instance_id}: Gold is not resolved here ({res.failure_kind} {res.error[:300]}); "
                         "the benchmark times a resolving evaluation")
    return time.perf_counter() - t0


def _working_copy() -> str:
    """How the local sandboxes made their working copies here (sandbox/local.py `overlay_working_copy`)."""
    from execcritic.sandbox.local import WORKING_COPY_ENV, overlay_working_copy
    from execcritic.tasks.environment import trees_dir

    return "overlay" if overlay_working_copy(os.environ.get(WORKING_COPY_ENV) or "auto", trees_dir()) else "copy"


def _verdict(res) -> str:
    return "resolved" if res.resolved else (res.failure_kind or ("unresolved" if res.valid else "invalid"))


if __name__ == "__main__":
    main()
