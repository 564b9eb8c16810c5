"""The oracle check: build and validate the official bundle of every row of a dataset, with a rejection
table (`execcritic bundle check --oracle`, `experiments/oracle_validation.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from execcritic.bundle.diff import BaseReader
from execcritic.bundle.gates import test_patch_problems
from execcritic.bundle.problems import Problem
from execcritic.config import HarnessConfig
from execcritic.errors import InputError
from execcritic.harness.oracle.build import build_oracle
from execcritic.harness.oracle.resolve import OracleError
from execcritic.harness.validate import validate_bundle
from execcritic.hashing import file_sha256
from execcritic.runners.registry import runner_for_task
from execcritic.tasks.load import _rows_from_file, load_tasks, resolve_source
from execcritic.tasks.model import Task


@dataclass
class OracleResult:
    instance_id: str
    repo: str
    runner: str | None
    valid: bool
    problems: list[Problem]
    command: str = ""
    declared: list[str] = field(default_factory=list)
    added_extra: list[str] = field(default_factory=list)
    overmatch_extra: list[str] = field(default_factory=list)
    resolved: dict[str, str] = field(default_factory=dict)
    inferred: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "runner": self.runner,
            "valid": self.valid,
            "problems": [p.to_dict() for p in self.problems],
            "command": self.command,
            "declared": self.declared,
            "added_extra": self.added_extra,
            "overmatch_extra": self.overmatch_extra,
            "resolved": self.resolved,
            "inferred": self.inferred,
        }


def check_official(task: Task, *, read_base: BaseReader | None = None, config=None) -> OracleResult:
    """Build and validate the official bundle of one task. When the bundle cannot be built, the
    test patch is still checked, so that every reason to reject is listed."""
    cfg = config or HarnessConfig()
    try:
        built = build_oracle(task, read_base=read_base)
    except (OracleError, ValueError) as exc:  # ValueError: a runner cannot build an exact command
        code = exc.code if isinstance(exc, OracleError) else "oracle.unbuildable"
        runner = runner_for_task(task)
        problems = [Problem(code, "FAIL_TO_PASS", str(exc))]
        problems += test_patch_problems(
            task.test_patch, language=task.language, max_bytes=cfg.max_test_patch_bytes
        )
        return OracleResult(task.instance_id, task.repo, runner.name if runner else None, False, problems)
    problems = validate_bundle(built.bundle, task, cfg, read_base=read_base)
    return OracleResult(
        task.instance_id,
        task.repo,
        built.runner,
        not problems,
        problems,
        built.bundle.command_line,
        built.declared,
        built.added_extra,
        built.overmatch_extra,
        built.resolved,
        built.inferred,
    )


def load_rows(source: str) -> tuple[list[Task], list[OracleResult], str]:
    """Every row of a dataset file as a Task, and a rejection for each row that is not a valid task
    (e.g. an empty FAIL_TO_PASS: there is no official node to select). Returns (tasks, bad, sha256)."""
    path = Path(resolve_source(source))
    if not path.exists():
        ts = load_tasks(source)
        return list(ts), [], ts.sha256
    tasks, bad = [], []
    for row in _rows_from_file(path):
        try:
            tasks.append(Task.from_row(row, source=str(path)))
        except InputError as exc:
            bad.append(
                OracleResult(
                    str(row.get("instance_id")),
                    str(row.get("repo", "")),
                    None,
                    False,
                    [Problem("task.invalid_row", exc.field or "row", str(exc))],
                )
            )
    return tasks, bad, file_sha256(path)


def check_official_all(
    tasks: Iterable[Task],
    *,
    read_base_for: Callable[[Task], BaseReader | None] | None = None,
    config=None,
) -> dict:
    """The oracle report: counts, rate, rejections grouped by problem code."""
    results = [
        check_official(t, read_base=read_base_for(t) if read_base_for else None, config=config) for t in tasks
    ]
    return summarize(results)


def summarize(results: list[OracleResult]) -> dict:
    total = len(results)
    valid = sum(r.valid for r in results)
    by_code: dict[str, list[str]] = {}
    by_runner: dict[str, dict[str, int]] = {}
    for r in results:
        key = r.runner or "(none)"
        slot = by_runner.setdefault(key, {"total": 0, "valid": 0})
        slot["total"] += 1
        slot["valid"] += int(r.valid)
        for code in sorted({p.code for p in r.problems}):
            by_code.setdefault(code, []).append(r.instance_id)
    return {
        "total": total,
        "valid": valid,
        "rejected": total - valid,
        "rate": round(valid / total, 4) if total else None,   # undefined over zero bundles
        "by_runner": by_runner,
        "rejections_by_code": {
            k: sorted(v) for k, v in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        },
        "rejections": [r.to_dict() for r in results if not r.valid],
        "generated_extras": {
            "added_tests_declared": sum(bool(r.added_extra) for r in results),
            "sympy_overmatches_declared": sum(bool(r.overmatch_extra) for r in results),
            "docstring_names_resolved": sum(bool(r.resolved) for r in results),
            "scopes_inferred_heuristically": sum(bool(r.inferred) for r in results),
        },
    }
