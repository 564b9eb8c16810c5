"""The candidate screen's false alarms on Gold: every reference patch of SWE-bench Verified (all 500), Lite,
Multilingual and the dev splits through `bundle.screen.screen_file` (the added Python code read as syntax, bundle/screen_ast.py).
A rule that fires on a Gold patch would refuse a genuine fix; each one that does is listed with its message.
Also counted: the added logical lines read as syntax, and those that did not parse and were read as text.

Writes results/screen/gold_false_alarms.json (with its manifest).

Usage:
    python experiments/screen_false_alarms.py [--data-dir ../shared/data/swebench] [--out results/screen]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from execcritic.bundle.diff import parse_patch  # noqa: E402
from execcritic.bundle.screen import added_code, screen_file  # noqa: E402
from execcritic.hashing import file_sha256  # noqa: E402
from execcritic.results.manifest import build_manifest, note_start, write_result  # noqa: E402

SETS = ("verified_test", "lite_test", "multilingual_test", "lite_dev", "full_dev")
DEFAULT_DATA_DIR = Path(os.environ.get("EXECCRITIC_DATA_DIR", str(ROOT.parent / "shared" / "data" / "swebench")))


def measure(path: Path) -> dict:
    df = pd.read_parquet(path)
    flagged, lines, parsed, python_rows = [], 0, 0, 0
    for row in df.itertuples():
        files = [fd for fd in parse_patch(row.patch).files if (fd.new_path or fd.path or "").endswith(".py")]
        python_rows += bool(files)
        for fd in parse_patch(row.patch).files:
            for code, message in screen_file(fd, row.repo):
                flagged.append({"instance_id": row.instance_id, "repo": row.repo, "code": code, "message": message})
        for fd in files:
            for _text, tree in added_code(fd):
                lines += 1
                parsed += tree is not None
    return {"rows": len(df), "rows_with_python": python_rows, "gold_flagged": len({f["instance_id"] for f in flagged}),
            "flagged": flagged, "added_logical_lines": lines, "read_as_syntax": parsed,
            "read_as_text": lines - parsed}


def main(argv: list[str] | None = None) -> int:
    note_start()    # the manifest names the code this script started with
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "screen")
    args = ap.parse_args(argv)
    payload, datasets = {}, []
    for name in SETS:
        path = args.data_dir / f"{name}.parquet"
        payload[name] = measure(path)
        datasets.append({"id": path.name, "rows": payload[name]["rows"], "sha256": file_sha256(path)})
        print(f"{name}: {payload[name]['gold_flagged']} of {payload[name]['rows']} Gold patches flagged; "
              f"{payload[name]['read_as_syntax']} of {payload[name]['added_logical_lines']} added logical lines "
              "read as syntax")
    out = write_result(args.out / "gold_false_alarms.json", {"sets": payload},
                       build_manifest(datasets=datasets))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
