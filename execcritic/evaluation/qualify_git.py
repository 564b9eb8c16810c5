"""Qualify SWE-bench Verified at exact base commits (`verified-git`), resumably, and write the recipe.

For each row, in the order of the issue's priorities (Django and SymPy first, the compiled repositories
last): plan its (repository, version) environment from SWE-bench's spec, build it once (a failure drops the
version's rows with the build log's tail), prepare the row's checkout from the named git source, and run Base
and Gold through the official evaluator `repeat` times (`qualify.qualify_instance`: same decision rule as
verified-sdist, flaky nodes measured by repetition). A git source that cannot serve a commit (missing, corrupt,
unreachable) decides nothing: the row stays undecided and is listed in the summary's `failures`, and the
command exits 4. Every decision is appended to `instances.jsonl` at once;
`envs.json`, `summary.json`, `table.md`, the manifest and the recipe are rewritten from those rows after each
instance (merged under a lock: runs on different repositories may share one results dir), so a killed run
loses at most the instance it was on and a rerun continues where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from execcritic.config import PAPER, HarnessConfig
from execcritic.errors import ExecCriticError
from execcritic.evaluation.qualify import Decision, qualify_instance, reason_class
from execcritic.files import atomic_write, atomic_write_json, locked
from execcritic.results.manifest import build_manifest, write_result
from execcritic.tasks.environment import git_environment
from execcritic.tasks.git import git_task
from execcritic.tasks.git.build import BuildError, build_env, cache_root, prepare_checkout, prune_checkout
from execcritic.tasks.git.plan import DEFAULT_CUTOFF, plan_envs
from execcritic.tasks.git.recipe import GitEnvRecipe, parse_env, recipe_to_dict
from execcritic.tasks.git.source import SourceUnavailable, source_for
from execcritic.tasks.model import Task
from execcritic.tasks.sdist.recipe import InstanceRecipe
from execcritic.tasks.sdist.specs import SPEC_SOURCE, load_specs

REPO_ORDER = ("django/django", "sympy/sympy", "sphinx-doc/sphinx", "pytest-dev/pytest", "pydata/xarray",
              "pylint-dev/pylint", "psf/requests", "mwaskom/seaborn", "pallets/flask", "matplotlib/matplotlib",
              "scikit-learn/scikit-learn", "astropy/astropy")
RERUN = ("EXECCRITIC_VERIFIED=<verified_test.parquet> EXECCRITIC_GIT_SOURCES=<repo=mirror,...> "
         "execcritic tasks qualify-git --results results/verified_git")


def order(tasks: Sequence[Task]) -> list[Task]:
    rank = {r: i for i, r in enumerate(REPO_ORDER)}
    return sorted(tasks, key=lambda t: (rank.get(t.repo, len(rank)), t.repo, t.version, t.instance_id))


def read_rows(results_dir: Path) -> dict[str, dict]:
    path = results_dir / "instances.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["instance_id"]: r for r in rows}


def _row(task: Task, env_key: str | None, d: Decision, facts: Mapping[str, Any], stage: str | None = None
         ) -> dict[str, Any]:
    return {"instance_id": task.instance_id, "repo": task.repo, "version": task.version, "env": env_key,
            "base_commit": task.base_commit, "kept": d.kept, "stage": stage or d.stage, "reason": d.reason,
            "reason_class": None if d.kept else reason_class(d), "p2p_excluded": d.p2p_excluded,
            "flaky_nodes": d.flaky_nodes,
            **({"f2p_unreported_on_base": d.f2p_unreported_on_base} if d.f2p_unreported_on_base else {}), **facts}


def run_qualification(tasks: Sequence[Task], *, results_dir: Path, recipe_out: Path | None,
                      sources: Mapping[str, str] | None = None, root: Path | None = None, repeat: int = 2,
                      keep_checkouts: bool = False, redo: bool = False, cutoff: str = DEFAULT_CUTOFF,
                      harness: HarnessConfig = PAPER.harness, dataset_manifest: Mapping[str, Any] | None = None,
                      all_rows: Sequence[Task] = (), log: Callable[[str], None] = print,
                      progress: bool = True, limit: int | None = None,
                      specs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Qualify `tasks` (resuming: rows already in `results_dir` are kept unless `redo`); returns the summary.
    `all_rows` (the whole Verified set) sizes the per-repository table and plans the environments; `specs`
    ({"specs": {repo: {version: spec}}, "reqs_paths": {repo: [paths]}}) defaults to swebench 4.1.0's tables."""
    root = root or cache_root()
    results_dir.mkdir(parents=True, exist_ok=True)
    specs = specs if specs is not None else load_specs(str(root))
    plan = plan_envs(all_rows or tasks, specs["specs"], sources=sources, cutoff=cutoff)   # not the selection
    rows = read_rows(results_dir)
    envs = _read_envs(results_dir)
    todo = [t for t in order(tasks) if redo or t.instance_id not in rows]
    if limit is not None:
        todo = todo[:limit]
    log(f"qualify-git: {len(tasks)} rows selected, {len(tasks) - len(todo)} already decided in {results_dir}, "
        f"{len(todo)} to do in {len({plan.env_of.get(t.instance_id) for t in todo} - {None})} environments; "
        f"repeat {repeat}")
    failed_envs: dict[str, str] = {k: v["error"] for k, v in envs.items() if v.get("error") and not redo}
    built: dict[str, Any] = {}
    unserved: dict[str, str] = {}              # env key -> why its source could not serve the setup commit
    failures: list[dict[str, str]] = []        # rows left undecided by their source

    def undecided(task: Task, stage: str, why: str) -> None:
        first = why.splitlines()[0][:300]
        failures.append({"key": task.instance_id, "stage": stage, "error": first,
                         "record": "none: the row stays undecided; fix the git source and run the same command"})
        log(f"  {task.instance_id}: UNDECIDED ({stage}) - {first}")

    mine: dict[str, dict] = {}                 # env records this process made

    def save(task: Task, row: dict[str, Any]) -> None:
        """Merge this row (and this process's env records) into what is on disk, under the results lock:
        runs on other repositories may share the results dir."""
        with locked(results_dir / ".qualify.lock"):
            rows.update(read_rows(results_dir))
            envs.update(_read_envs(results_dir))
            envs.update(mine)
            rows[task.instance_id] = row
            _write(results_dir, rows, envs, recipe_out, dataset_manifest or {}, all_rows or tasks)

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), disable=not progress)
    with bar:
        job = bar.add_task("qualify-git", total=len(todo))
        for task in todo:
            bar.update(job, description=f"{task.instance_id}")
            key = plan.env_of.get(task.instance_id)
            if key is None:
                save(task, _row(task, None, Decision(task.instance_id, False, plan.unplanned[task.instance_id],
                                                     stage="plan"), {}))
                bar.advance(job)
                continue
            env = plan.envs[key]
            source = source_for(task.repo, sources)
            if key not in built and key not in failed_envs and key not in unserved:
                try:
                    b, resolved = build_env(env, source=source, root=root, resolve=True,
                                            reqs_paths=specs["reqs_paths"].get(task.repo, []),
                                            env_yml_paths=specs.get("env_yml_paths", {}).get(task.repo, []),
                                            log=lambda m, k=key: log(f"  {k}: {m}"))
                    built[key] = (b, resolved)
                    mine[key] = {"recipe": resolved.to_dict(), "build_seconds": b.record.get("build_seconds"),
                                 "disk_bytes": b.record.get("disk_bytes"), "products": len(b.record["products"]),
                                 "compiled": bool(b.record.get("compiled")), "interpreter": b.record["interpreter"],
                                 "built_at": b.record.get("built_at")}
                except SourceUnavailable as exc:
                    unserved[key] = str(exc)
                except (BuildError, ExecCriticError, OSError) as exc:
                    failed_envs[key] = str(exc)
                    mine[key] = {"recipe": env.to_dict(), "error": str(exc)[-6000:]}
                    log(f"  {key}: BUILD FAILED: {str(exc).splitlines()[0][:300]}")
            if key in unserved:
                undecided(task, "fetch setup commit", unserved[key])
                bar.advance(job)
                continue
            if key in failed_envs:
                first = failed_envs[key].strip().splitlines()[0][:300]
                save(task, _row(task, key, Decision(task.instance_id, False, f"env build failed: {first}",
                                                    stage="build"), {}))
                bar.advance(job)
                continue
            b, resolved = built[key]
            try:
                row = _qualify_one(task, b, resolved, source=source, root=root, repeat=repeat, harness=harness,
                                   log=log)
            except SourceUnavailable as exc:
                undecided(task, "fetch base commit", str(exc))
                bar.advance(job)
                continue
            save(task, row)
            log(f"  {task.instance_id}: {'KEPT' if row['kept'] else 'dropped'} - {row['reason'][:200]} "
                f"({row.get('seconds', '?')}s)")
            if not keep_checkouts:
                prune_checkout(task.instance_id, root)
            bar.advance(job)
    if not todo:     # the derived files follow instances.jsonl even when nothing was left to decide
        with locked(results_dir / ".qualify.lock"):
            _write(results_dir, rows, envs, recipe_out, dataset_manifest or {}, all_rows or tasks)
    summary = summarize(rows, envs, all_rows or tasks)
    log(f"qualify-git: {summary['qualified']} of {summary['decided']} decided rows qualified "
        f"({summary['verified_rows']} Verified rows)")
    return {**summary, "failures": failures}


def _qualify_one(task: Task, b, env: GitEnvRecipe, *, source: str, root: Path, repeat: int,
                 harness: HarnessConfig, log) -> dict[str, Any]:
    facts: dict[str, Any] = {"source": source}     # where the Base came from (the recipe names it)
    t0 = time.monotonic()
    try:
        co = prepare_checkout(task.instance_id, task.base_commit, b, env, source=source, root=root)
        facts.update({"checkout_seconds": co.record.get("seconds"), "fetch_seconds": co.record.get("fetch_seconds"),
                      "checkout_bytes": co.record.get("disk_bytes"), "rebuilt": co.record.get("rebuilt", []),
                      "checkout_reused": co.reused})
    except SourceUnavailable:
        raise                                  # the source's fault: the caller leaves the row undecided
    except (BuildError, ExecCriticError, OSError) as exc:
        text = str(exc)
        return _row(task, env.key, Decision(task.instance_id, False, f"checkout failed: {text.splitlines()[0][:300]}",
                                            stage="checkout"), {"error_tail": text[-3000:]})
    gtask = git_task(task, env)
    try:
        d, qf = qualify_instance(gtask, git_environment(gtask, root), harness=harness,
                                 log_dir=root / "qualify-logs" / task.instance_id, repeat=repeat,
                                 unapplicable=True)
    except ExecCriticError as exc:
        d, qf = Decision(task.instance_id, False, f"qualification error: {exc}"[:400]), {}
    facts.update(qf)
    facts["total_seconds"] = round(time.monotonic() - t0, 1)
    return _row(task, env.key, d, facts)


# ---- the committed outputs, all derived from instances.jsonl + envs.json -----------------------------

def _read_envs(results_dir: Path) -> dict[str, dict]:
    path = results_dir / "envs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def with_setup_deviation(row: dict, envs: Mapping[str, dict]) -> dict:
    """The row with the deviation of its env, if any (`setup_commit`, `setup_deviation`): an env installed at a
    stand-in for the rows' environment_setup_commit (plan_envs) is a deviation of every row run in it. A row
    that records one keeps its own."""
    recipe = (envs.get(row.get("env") or "") or {}).get("recipe") or {}
    if "setup_deviation" in row or not recipe.get("setup_note"):
        return row
    return {**row, "setup_commit": recipe["setup_commit"], "setup_deviation": recipe["setup_note"]}


def write_state(results_dir: Path, rows: Mapping[str, dict], envs: Mapping[str, dict]) -> list[dict]:
    """instances.jsonl (the resumable state, sorted) and envs.json; returns the rows in that order."""
    ordered = [with_setup_deviation(rows[k], envs) for k in sorted(rows)]
    atomic_write(results_dir / "instances.jsonl", "".join(json.dumps(r) + "\n" for r in ordered))
    atomic_write_json(results_dir / "envs.json", dict(sorted(envs.items())), indent=1)
    return ordered


def _write(results_dir: Path, rows: Mapping[str, dict], envs: Mapping[str, dict], recipe_out: Path | None,
           dataset: Mapping[str, Any], all_rows: Sequence[Task]) -> None:
    ordered = write_state(results_dir, rows, envs)
    summary = summarize({r["instance_id"]: r for r in ordered}, envs, all_rows)
    manifest = build_manifest(datasets=[dict(dataset)],
                              extra={"rerun": RERUN, "files": ["instances.jsonl", "envs.json", "summary.json",
                                                               "table.md"], "notes": recipe_notes()})
    write_result(results_dir / "summary.json", summary, manifest)
    atomic_write(results_dir / "table.md", table_markdown(summary))
    if recipe_out is not None:
        kept = [r for r in ordered if r["kept"]]
        env_map = {k: parse_env(k, envs[k]["recipe"], path=str(results_dir / "envs.json"))
                   for k in {r["env"] for r in kept}}
        insts = [InstanceRecipe(r["instance_id"], r["repo"], r["version"], r["env"], r.get("p2p_excluded") or {},
                                r.get("flaky_nodes") or {}, r.get("source") or "") for r in kept]
        atomic_write_json(recipe_out, recipe_to_dict(env_map, insts, dataset=dataset, notes=recipe_notes()),
                          indent=1)


def summarize(rows: Mapping[str, dict], envs: Mapping[str, dict], all_rows: Sequence[Task]) -> dict[str, Any]:
    """Per-repository yield over the whole Verified set (undecided rows counted as such), drop reasons, costs."""
    per_repo: dict[str, dict[str, Any]] = {}
    for t in all_rows:
        per_repo.setdefault(t.repo, {"verified": 0, "decided": 0, "qualified": 0, "dropped": {}})["verified"] += 1
    reasons: dict[str, int] = {}
    excluded = flaky = 0
    for r in rows.values():
        p = per_repo.setdefault(r["repo"], {"verified": 0, "decided": 0, "qualified": 0, "dropped": {}})
        p["decided"] += 1
        if r["kept"]:
            p["qualified"] += 1
            if r.get("setup_deviation"):
                p["qualified_at_stand_in_setup"] = p.get("qualified_at_stand_in_setup", 0) + 1
            excluded += len(r.get("p2p_excluded") or {})
            flaky += len(r.get("flaky_nodes") or {})
        else:
            cls = r.get("reason_class") or "other"
            p["dropped"][cls] = p["dropped"].get(cls, 0) + 1
            reasons[cls] = reasons.get(cls, 0) + 1

    def stats(values: list[float]) -> dict[str, float | None]:
        values = sorted(v for v in values if isinstance(v, (int, float)))
        if not values:
            return {"n": 0, "median": None, "mean": None, "max": None}
        return {"n": len(values), "median": values[len(values) // 2], "mean": round(sum(values) / len(values), 1),
                "max": values[-1]}

    built = [e for e in envs.values() if not e.get("error")]
    return {"verified_rows": len(all_rows), "decided": len(rows),
            "qualified": sum(p["qualified"] for p in per_repo.values()),
            "per_repo": dict(sorted(per_repo.items(), key=lambda kv: -kv[1]["verified"])),
            "drop_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
            "p2p_excluded_nodes": excluded, "flaky_p2p_nodes": flaky,
            "envs": {"built": len(built), "failed": len(envs) - len(built),
                     "build_seconds": stats([e.get("build_seconds") for e in built]),
                     "disk_bytes": stats([e.get("disk_bytes") for e in built])},
            "instances": {"qualify_seconds": stats([r.get("seconds") for r in rows.values()]),
                          "checkout_seconds": stats([r.get("checkout_seconds") for r in rows.values()]),
                          "checkout_bytes": stats([r.get("checkout_bytes") for r in rows.values()])}}


def table_markdown(summary: Mapping[str, Any], *, title: str = "verified-git qualification (SWE-bench Verified at "
                   "exact base commits)", rows_name: str = "Verified", rerun: str = RERUN) -> str:
    lines = [f"# {title}", "",
             f"{summary['qualified']} qualified of {summary['verified_rows']} {rows_name} rows "
             f"({summary['decided']} decided so far). Regenerate: `{rerun}` (resumable).", "",
             f"| repository | {rows_name} | decided | qualified | dropped (reason: count) |", "|---|---:|---:|---:|---|"]
    for repo, p in summary["per_repo"].items():
        dropped = ", ".join(f"{k}: {v}" for k, v in sorted(p["dropped"].items(), key=lambda kv: -kv[1])) or "-"
        lines.append(f"| {repo} | {p['verified']} | {p['decided']} | {p['qualified']} | {dropped} |")
    lines.append(f"| **total** | {summary['verified_rows']} | {summary['decided']} | {summary['qualified']} | |")
    stand_in = {repo: p["qualified_at_stand_in_setup"] for repo, p in summary["per_repo"].items()
                if p.get("qualified_at_stand_in_setup")}
    if stand_in:
        lines += ["", "Qualified in an env installed at a stand-in for the rows' environment_setup_commit (the source "
                      "cannot serve it whole; `setup_deviation` in instances.jsonl): "
                      + ", ".join(f"{repo} {n}" for repo, n in stand_in.items()) + "."]
    return "\n".join(lines) + "\n"


def recipe_notes() -> dict[str, Any]:
    return {
        "base": "each row's own base_commit, fetched with `git fetch --depth 1 <source> <sha>` into a fresh "
                "repository (branch `base`, no remote); sources are named by the user (--git-source / "
                "$EXECCRITIC_GIT_SOURCES; default https://github.com/<repo>.git)",
        "environment": "one venv per (repository, version) from SWE-bench's spec: the spec's CPython (pyenv or "
                       "PATH), its conda packages and requirement files (read at the setup commit) as pip "
                       "requirements and its pip_packages, resolved with uv --exclude-newer <cutoff> (exact pins "
                       "exempt); pre_install (minus apt/locale steps: system-deps.sh) and the install run under "
                       "bubblewrap with the setup commit at /testbed; lock = pip freeze",
        "install": "editable (`python setup.py install` and `pip install .` run as `pip install -e .`): the venv is "
                   "shared read-only by every checkout of the version, each importing from /testbed; files the "
                   "install writes into the tree (metadata, version files, compiled extensions) are copied into "
                   "each checkout, and extensions whose sources differ from the setup commit's are rebuilt in it",
        "checkout": "pre_install (minus apt/locale steps) re-applied in every checkout, as SWE-bench's instance "
                    "images do; the eval script's re-install step is not run (no network in the sandbox)",
        "qualification": "official evaluator, local path (LocalSandbox isolated, no network): F2P fail validly "
                         "on Base and pass on Gold; P2P pass on Gold except recorded p2p_excluded; Base and Gold "
                         "run `repeat` times: a node whose status changes is flaky (F2P: dropped; P2P: excluded "
                         "and listed in flaky_nodes)",
        "spec_source": SPEC_SOURCE,
    }
