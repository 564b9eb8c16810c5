"""Official-bundle (oracle) validation: does every SWE-bench instance's *official* test bundle pass
the bundle rules? Writes `results/oracle_validation/<dataset>.json` and the release outlines used.

For each instance: the dataset's test_patch + an exact command built by the task's runner from
FAIL_TO_PASS (+ the tests the patch adds) + a generated contract, validated by
`execcritic.harness.validate.validate_bundle` (see execcritic/harness/oracle/ for what is declared).

Two passes:
1. dataset rows only - everything the row itself says;
2. for instances whose bundle cannot be *built* from the row (a Django test named by its docstring, an
   added method whose class the hunk does not show), the Base source is needed. There is no checkout
   here, so the nearest release archive on PyPI (sdist, or a wheel where the sdist cannot be
   fetched) stands in for Base: its test definitions are read, turned into outlines (classes, test
   names, docstring first lines) and saved, so the check reruns offline
   (`execcritic bundle check --oracle DATASET --sources <outlines>`).

Usage:
    python experiments/oracle_validation.py verified_test multilingual_test \
        [--data-dir ../shared/data/swebench] [--cache ~/.cache/execcritic/releases] [--download]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from execcritic.harness.oracle.check import OracleResult, check_official, load_rows, summarize  # noqa: E402
from execcritic.harness.oracle.outlines import outline_of, outline_reader
from execcritic.hashing import file_sha256
from execcritic.results.manifest import build_manifest, note_start
from execcritic.tasks.load import TaskSet  # noqa: E402

DEFAULT_DATA_DIR = Path(os.environ.get("EXECCRITIC_DATA_DIR", str(ROOT.parent / "shared" / "data" / "swebench")))
DEFAULT_CACHE = Path(
    os.environ.get("EXECCRITIC_RELEASE_CACHE", Path.home() / ".cache" / "execcritic" / "releases")
)
OUT_DIR = ROOT / "results" / "oracle_validation"

# repository -> PyPI distribution whose release archives carry the repository's test files
PYPI_NAMES = {
    "django/django": "Django",
    "astropy/astropy": "astropy",
    "pytest-dev/pytest": "pytest",
    "sphinx-doc/sphinx": "Sphinx",
    "sympy/sympy": "sympy",
    "scikit-learn/scikit-learn": "scikit-learn",
    "matplotlib/matplotlib": "matplotlib",
    "pydata/xarray": "xarray",
    "psf/requests": "requests",
    "pylint-dev/pylint": "pylint",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "Flask",
}


# Why each class of rejection is right (reported next to the rejections).
EXPLANATIONS = {
    "patch.rename": "a rename deletes the old path; a test patch may only add or change files (SPEC 2.1). "
    "astropy-7336 renames py3_test_quantity_annotations.py away.",
    "patch.deletion": "the test patch deletes a file; a test patch may only add or change files.",
    "patch.source_edit": "the test patch changes a file that is not a test: django/test/testcases.py, "
    "sphinx/testing/util.py and sympy/testing/quality_unicode.py are modules of packages shipped to users "
    "(django.test, sphinx.testing, sympy.testing), i.e. product source; a bundle that edits them changes the "
    "code under test.",
    "command.too_long": "the exact command for hundreds of FAIL_TO_PASS nodes exceeds "
    "HarnessConfig.max_command_chars; a Test bundle is a focused test, and the limit is a config value.",
    "oracle.unresolved_node": "the FAIL_TO_PASS name identifies no single test: django-12209's is the docstring "
    "of functools.partial (tests generated with partialmethod all print it); django-14011's docstring is in "
    "neither the patch nor the release sources (that instance is also rejected for its source edit).",
    "oracle.unresolved_scope": "an added test method's class is not visible in the hunk and no dataset id or "
    "Base source names it; a label cannot be guessed.",
    "task.invalid_row": "the dataset row is not a valid task (e.g. empty FAIL_TO_PASS): there is no official "
    "node to select.",
}


# ---- release archives ------------------------------------------------------------------------------


class ReleaseArchive:
    """Files of a release archive by repository-relative path (sdists: minus the top directory)."""

    def __init__(self, path: Path):
        self.path = path
        self.sha256 = file_sha256(path)
        self._members: dict[str, str] = {}
        if path.suffix in (".whl", ".zip"):
            self._zip = zipfile.ZipFile(path)
            for name in self._zip.namelist():
                rel = name if path.suffix == ".whl" else name.split("/", 1)[-1]
                self._members[rel] = name
        else:
            self._tar = tarfile.open(path)
            for m in self._tar.getmembers():
                if m.isfile():
                    self._members[m.name.split("/", 1)[-1]] = m.name

    def read(self, rel: str) -> str | None:
        name = self._members.get(rel)
        if name is None:
            return None
        if self.path.suffix in (".whl", ".zip"):
            data = self._zip.read(name)
        else:
            fh = self._tar.extractfile(name)
            data = fh.read() if fh else b""
        return data.decode("utf-8", errors="replace")


def find_archive(cache: Path, repo: str, version: str, download: bool) -> Path | None:
    """The cached release archive of repo==version (sdist preferred), fetched with pip if allowed."""
    dist = PYPI_NAMES.get(repo)
    if not dist:
        return None
    cache.mkdir(parents=True, exist_ok=True)
    stems = [f"{dist}-{v}" for v in (version, f"{version}.0")] + [
        f"{dist.lower()}-{v}" for v in (version, f"{version}.0")
    ]
    for stem in stems:
        for suffix in (".tar.gz", ".zip"):
            if (cache / f"{stem}{suffix}").exists():
                return cache / f"{stem}{suffix}"
        wheels = sorted(cache.glob(f"{stem}-*.whl"))
        if wheels:
            return wheels[0]
    if not download:
        return None
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache)]
    kinds = (["--no-binary", ":all:", "--no-build-isolation"],  # the sdist, else a wheel (sources too)
             ["--only-binary", ":all:", "--python-version", "3.7", "--platform", "manylinux1_x86_64"])
    for spec in (f"{dist}=={version}", f"{dist}=={version}.0"):
        for kind in kinds:
            if subprocess.run([*pip, *kind, spec], check=False, capture_output=True, text=True).returncode == 0:
                return find_archive(cache, repo, version, False)
    return None


class RecordingReader:
    """A BaseReader over an archive that remembers the files asked for (to save their outlines)."""

    exact_lines = False  # a release's line numbers are not Base's

    def __init__(self, archive: ReleaseArchive):
        self.archive = archive
        self.requested: dict[str, str | None] = {}

    def __call__(self, rel: str) -> str | None:
        if rel not in self.requested:
            self.requested[rel] = self.archive.read(rel)
        return self.requested[rel]


# ---- the check ---------------------------------------------------------------------------------------


def relevant(task) -> tuple[set[str], set[str]]:
    """What a resolution of this task can look up in Base: its FAIL_TO_PASS names (docstrings
    included), the tests its patch adds and their sibling methods. Outlines keep only these."""
    from execcritic.bundle.added import added_tests
    from execcritic.runners.registry import runner_for_task

    runner = runner_for_task(task)
    names: set[str] = set()
    docs: set[str] = {t.strip() for t in task.fail_to_pass}
    for text in task.fail_to_pass:
        if runner is not None:
            names.add(runner.parse_node(text).name)
    for added in added_tests(task.test_patch, task.language):
        names.add(added.name)
        names.update(added.hints)
    return names, docs


def needs_base(result: OracleResult) -> bool:
    """The row alone could not build the bundle, or built a label from a heuristic (a sibling's class,
    the hunk header): the Base source (here: its release stand-in) decides."""
    return bool(result.inferred) or any(p.code.startswith("oracle.") for p in result.problems)


def run(
    dataset: str, data_dir: Path, cache: Path, download: bool, out_dir: Path, outlines_in: dict | None = None
) -> dict:
    path = data_dir / f"{dataset}.parquet" if not Path(dataset).exists() else Path(dataset)
    task_list, bad_rows, sha = load_rows(str(path))
    tasks = TaskSet(str(path), "test", tuple(task_list), sha)
    name = path.stem
    rows_only = [check_official(t) for t in tasks] + bad_rows
    final: dict[str, OracleResult] = {r.instance_id: r for r in rows_only}
    source_of: dict[str, str] = {}
    outlines: dict = {"sources": {}}
    archives: dict[str, dict] = {}
    for result in rows_only:
        if not needs_base(result):
            continue
        task = tasks.get(result.instance_id)
        key = f"{task.repo}@{task.version}"
        reader: Callable | None = None
        recorder = None
        if outlines_in is not None:
            reader = outline_reader(outlines_in, task)
            label = outlines_in.get("sources", {}).get(key, {}).get("archive", "recorded outlines")
        else:
            archive_path = find_archive(cache, task.repo, task.version, download)
            if archive_path is None:
                continue
            archive = ReleaseArchive(archive_path)
            archives[key] = {"archive": archive_path.name, "sha256": archive.sha256}
            recorder = RecordingReader(archive)
            reader = recorder
            label = archive_path.name
        if reader is None:
            continue
        second = check_official(task, read_base=reader)
        final[task.instance_id] = second
        source_of[task.instance_id] = label
        if recorder is not None:
            slot = outlines["sources"].setdefault(key, {**archives[key], "files": {}})
            wanted_names, wanted_docs = relevant(task)
            for rel, text in recorder.requested.items():
                if text is None or not rel.endswith(".py"):
                    continue
                outline = outline_of(text)
                keep = [e for e in outline["defs"] if e[1] in wanted_names or (e[2] and e[2] in wanted_docs)]
                if not keep:
                    continue
                have = slot["files"].setdefault(rel, {"defs": [], "blocks": outline["blocks"]})
                merged = {json.dumps(e) for e in have["defs"]} | {json.dumps(e) for e in keep}
                have["defs"] = [json.loads(e) for e in sorted(merged)]
    results = [final[t.instance_id] for t in tasks] + bad_rows
    summary = summarize(results)
    for rej in summary["rejections"]:
        rej["base_source"] = source_of.get(rej["instance_id"], "dataset row only")
    report = {
        "manifest": build_manifest(
            datasets=[{"id": path.name, "rows": len(tasks) + len(bad_rows), "sha256": sha}],
            extra={"base_sources": "release archives" if archives else
                   f"saved release outlines ({name}.release_outlines.json)" if (outlines_in or {}).get("sources")
                   else "dataset rows only",
                   "release_archives": archives or {
                       k: {kk: vv for kk, vv in v.items() if kk != "files"}
                       for k, v in (outlines_in or {}).get("sources", {}).items()}}),
        "rows_only": {k: v for k, v in summarize(rows_only).items() if k != "rejections"},
        "why_rejected": {code: EXPLANATIONS.get(code, "") for code in summary["rejections_by_code"]},
        "with_release_sources": {"instances": sorted(source_of), "source": source_of},
        **summary,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    if outlines["sources"]:
        (out_dir / f"{name}.release_outlines.json").write_text(json.dumps(outlines, sort_keys=True) + "\n")
        # the saved outlines must reproduce the archive-backed result exactly
        replay = {
            t.instance_id: check_official(t, read_base=outline_reader(outlines, t)).valid
            for t in tasks
            if t.instance_id in source_of
        }
        drift = sorted(i for i, ok in replay.items() if ok != final[i].valid)
        report["manifest"]["outlines_replay_identical"] = not drift
        if drift:
            report["manifest"]["outlines_replay_drift"] = drift
        (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    note_start()    # the manifest names the code this script started with
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "datasets", nargs="+", help="dataset names under --data-dir (verified_test, ...) or paths"
    )
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="release archive cache")
    ap.add_argument("--download", action="store_true", help="fetch missing release archives with pip")
    ap.add_argument(
        "--from-outlines",
        action="store_true",
        help="use saved outlines (<outlines-dir>/<dataset>.release_outlines.json) instead of archives",
    )
    ap.add_argument("--outlines-dir", type=Path, default=OUT_DIR)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    for ds in args.datasets:
        outlines_in = None
        if args.from_outlines:
            f = args.outlines_dir / f"{Path(ds).stem}.release_outlines.json"
            outlines_in = json.loads(f.read_text()) if f.exists() else {"sources": {}}
        rep = run(ds, args.data_dir, args.cache, args.download, args.out, outlines_in)
        ro = rep["rows_only"]
        print(
            f"{ds}: {rep['valid']}/{rep['total']} valid ({rep['rate']:.1%}); rows only "
            f"{ro['valid']}/{ro['total']} ({ro['rate']:.1%}); release sources used for "
            f"{len(rep['with_release_sources']['instances'])} instances"
        )
        for code, ids in rep["rejections_by_code"].items():
            print(f"  {code:32s} {len(ids):3d}  {' '.join(ids)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
