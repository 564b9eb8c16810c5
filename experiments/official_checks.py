"""The official evaluator's checks on every qualified `verified-sdist` instance (issue: gold -> resolved,
empty -> unresolved, a patch that does not apply -> invalid with the apply diagnostic).

Each (instance, patch kind) is one append-only record in results/official_checks/checks.jsonl, so an
interrupted run resumes where it stopped; summary.json (with the manifest) lists every exception to
the expectation, and the record of each keeps the end of its test log and the run's hash seed. The local path is the one these tasks use: our runner, the row's log parser and
swebench's `get_eval_report`.

  python experiments/official_checks.py [--workers 2] [--instance ID ...] [--patch gold ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from execcritic.evaluation.official import evaluate_official
from execcritic.evaluation.qualify import UNAPPLICABLE
from execcritic.pipeline.records import RecordStore, unit_key
from execcritic.pipeline.workers import Unit, run_units
from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.tasks import load_tasks

EXPECTED = {"gold": "resolved", "empty": "unresolved", "unapplicable": "invalid"}


def outcome(res) -> str:
    return "invalid" if not res.valid else "resolved" if res.resolved else "unresolved"


def check_unit(payload) -> dict:
    task, kind = payload
    patch = {"gold": task.patch, "empty": "", "unapplicable": UNAPPLICABLE}[kind]
    with tempfile.TemporaryDirectory(prefix="execcritic-check-") as logs:
        res = evaluate_official(task, patch, log_dir=Path(logs))
        got = outcome(res)
        log = Path(logs) / "test_output.txt"
        # an unexpected outcome keeps the end of its test log (a flaky exception is otherwise not on record)
        tail = log.read_text(errors="replace")[-3000:] if got != EXPECTED[kind] and log.exists() else ""
    return {"instance_id": task.instance_id, "repo": task.repo, "patch": kind, "outcome": got,
            "as_expected": got == EXPECTED[kind], "patch_applied": res.patch_applied,
            "f2p_fail": res.f2p_fail, "p2p_fail": res.p2p_fail, "missing": res.missing,
            "error": res.error[:1500], "duration_s": round(res.duration_s, 2), "hashseed": res.hashseed,
            "log_tail": tail}


def summarize(records: list[dict]) -> dict:
    per_kind: dict[str, dict[str, int]] = {}
    for r in records:
        k = per_kind.setdefault(r["patch"], {"checked": 0, "as_expected": 0})
        k["checked"] += 1
        k["as_expected"] += bool(r["as_expected"])
    return {"expected": EXPECTED, "per_patch": per_kind,
            "unexpected": [{k: r[k] for k in ("instance_id", "patch", "outcome", "error")}
                           for r in records if not r["as_expected"]],
            "unapplicable_diagnostics_name_the_failure": all(
                "apply" in r["error"].lower() for r in records if r["patch"] == "unapplicable")}


def main(argv: list[str] | None = None) -> int:
    note_start()    # the manifest names the code this script started with
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="verified-sdist")
    ap.add_argument("--instance", action="append", default=[])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--patch", action="append", choices=sorted(EXPECTED), default=[],
                    help="only these patch kinds (repeatable; default: all three)")
    ap.add_argument("--out", default="results/official_checks")
    args = ap.parse_args(argv)
    ts = load_tasks(args.dataset)
    tasks = [t for t in ts if not args.instance or t.instance_id in args.instance]
    out = Path(args.out)
    store = RecordStore(out / "checks.jsonl")
    kinds = [k for k in EXPECTED if not args.patch or k in args.patch]
    units = [Unit(unit_key(t.instance_id, kind), (t, kind)) for t in tasks for kind in kinds]
    run = run_units(units, check_unit, store=store, workers=args.workers, label="official checks",
                    count=lambda r: {"as_expected": r["as_expected"]})
    wanted = {u.key for u in units}
    records = [r for r in store.iter() if r["key"] in wanted]
    payload = {"tasks": len(tasks), "run": run.to_dict(), **summarize(records)}
    write_result(out / "summary.json", payload, build_manifest(datasets=[ts.manifest()]))
    print(json.dumps({k: v for k, v in payload.items() if k != "unexpected"}, indent=1))
    for u in payload["unexpected"]:
        print(f"  {u['instance_id']} {u['patch']}: {u['outcome']} {u['error'][:200]}", file=sys.stderr)
    return 0 if not payload["unexpected"] and run.errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
