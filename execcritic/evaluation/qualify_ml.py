"""Qualify SWE-bench Multilingual's rows at their exact base commits (`multilingual-git`), resumably: the C and C++
repositories, and the JavaScript/TypeScript ones whose dependencies this machine's npm registry serves.

For each row: its repository's toolchain (Debian packages; a machine without one decides nothing and names the
packages), its checkout with the dependencies installed and the Base's build (`tasks/mlgit/build.py`; a Base that does not build drops the row
with the build log's tail), then Base and Gold through the official evaluator `repeat` times and a patch that
cannot apply (`qualify.qualify_instance`, the decision rule of every suite task set; flaky nodes by repetition).
The results directory's `instances.jsonl` is the state (one line per decided row, written at once);
`envs.json`, `summary.json` (with its manifest), `table.md` and the recipe are rewritten from it after each row,
so a killed run loses at most the row it was on. A row its git source cannot serve stays undecided (exit 4).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from execcritic.config import PAPER, HarnessConfig
from execcritic.errors import EnvironmentMissing, ExecCriticError
from execcritic.evaluation.qualify import Decision, qualify_instance
from execcritic.evaluation.qualify_git import (
    _read_envs,
    _row,
    read_rows,
    summarize,
    table_markdown,
    write_state,
)
from execcritic.files import atomic_write, atomic_write_json, locked
from execcritic.results.manifest import build_manifest, write_result
from execcritic.tasks.envbuild import BuildError
from execcritic.tasks.environment import native_environment
from execcritic.tasks.git.build import prune_checkout
from execcritic.tasks.git.source import SourceUnavailable, source_for
from execcritic.tasks.mlgit import NAME, ml_task, recipe_to_dict
from execcritic.tasks.mlgit.build import cache_root, prepare_checkout
from execcritic.tasks.mlgit.toolchain import TOOLCHAINS, NativeEnv, native_env
from execcritic.tasks.model import Task
from execcritic.tasks.sdist.recipe import InstanceRecipe

RERUN = ("EXECCRITIC_MULTILINGUAL=<multilingual_test.parquet> EXECCRITIC_GIT_SOURCES=<repo=mirror,...> "
         "execcritic tasks qualify-ml --results results/multilingual_git")
TITLE = ("multilingual-git qualification (SWE-bench Multilingual's C, C++ and JavaScript/TypeScript rows with a "
         "toolchain here, at exact base commits)")
ROWS_NAME = "C/C++/JS/TS"


def c_rows(rows: Sequence[Task]) -> list[Task]:
    """The rows of the repositories with a toolchain here (C, C++, and three JS/TS ones), in repository order."""
    return sorted((t for t in rows if t.repo in TOOLCHAINS), key=lambda t: (t.repo, t.instance_id))


def run_ml_qualification(tasks: Sequence[Task], *, results_dir: Path, recipe_out: Path | None,
                         sources: Mapping[str, str] | None = None, root: Path | None = None, repeat: int = 2,
                         keep_checkouts: bool = False, redo: bool = False, harness: HarnessConfig = PAPER.harness,
                         dataset_manifest: Mapping[str, Any] | None = None, all_rows: Sequence[Task] = (),
                         log: Callable[[str], None] = print, limit: int | None = None) -> dict[str, Any]:
    """Qualify `tasks` (rows already in `results_dir` are kept unless `redo`); returns the summary with the rows
    left undecided under `failures`. `all_rows` (every row with a toolchain) sizes the per-repository table."""
    root = root or cache_root()
    results_dir.mkdir(parents=True, exist_ok=True)
    all_rows = list(all_rows or tasks)
    rows = read_rows(results_dir)
    todo = [t for t in c_rows(tasks) if redo or t.instance_id not in rows][:limit]
    log(f"qualify-ml: {len(tasks)} rows selected, {len(tasks) - len(todo)} already decided in {results_dir}, "
        f"{len(todo)} to do; repeat {repeat}")
    failures: list[dict[str, str]] = []
    mine: dict[str, dict] = {}

    def save(row: dict[str, Any]) -> None:
        with locked(results_dir / ".qualify.lock"):
            rows.update(read_rows(results_dir))
            rows[row["instance_id"]] = row
            _write(results_dir, rows, {**_read_envs(results_dir), **mine}, recipe_out, dataset_manifest or {},
                   all_rows)

    for n, task in enumerate(todo, 1):
        log(f"[{n}/{len(todo)}] {task.instance_id}")
        try:
            env = native_env(task.repo)
            mine[env.key] = {"recipe": env.to_dict()}
            row = _qualify_one(task, env, source=source_for(task.repo, sources), root=root, repeat=repeat,
                               harness=harness, log=log)
        except EnvironmentMissing as exc:    # the machine's, not the row's: a package, or the package manager it names
            failures.append({"key": task.instance_id, "stage": "toolchain", "error": str(exc)[:600],
                             "record": "none: the row stays undecided; install what it names and run it again"})
            log(f"  {task.instance_id}: UNDECIDED - {str(exc)[:300]}")
            continue
        except SourceUnavailable as exc:
            first = str(exc).splitlines()[0][:300]
            failures.append({"key": task.instance_id, "stage": "fetch", "error": first,
                             "record": "none: the row stays undecided; fix the git source and run the same command"})
            log(f"  {task.instance_id}: UNDECIDED (fetch) - {first}")
            continue
        save(row)
        log(f"  {task.instance_id}: {'KEPT' if row['kept'] else 'dropped'} - {row['reason'][:200]} "
            f"({row.get('seconds', '?')}s)")
        if not keep_checkouts:
            prune_checkout(task.instance_id, root)     # the same layout as verified-git's: <root>/checkouts/<id>
    if not todo:
        with locked(results_dir / ".qualify.lock"):
            _write(results_dir, rows, _read_envs(results_dir), recipe_out, dataset_manifest or {}, all_rows)
    summary = summarize(rows, _read_envs(results_dir), all_rows)
    log(f"qualify-ml: {summary['qualified']} of {summary['decided']} decided rows qualified "
        f"({summary['verified_rows']} {ROWS_NAME} rows)")
    return {**summary, "failures": failures}


def _qualify_one(task: Task, env: NativeEnv, *, source: str, root: Path, repeat: int, harness: HarnessConfig,
                 log) -> dict[str, Any]:
    t0 = time.monotonic()
    mt = ml_task(task, env)
    info = mt.extra["multilingual_git"]
    facts: dict[str, Any] = {"language": env.language, "dropped_steps": info["dropped_steps"],
                             **({"replaced_steps": info["replaced_steps"]} if info.get("replaced_steps") else {})}
    try:
        co = prepare_checkout(mt, env, source=source, root=root)
    except (SourceUnavailable, EnvironmentMissing):       # the machine's reach, not the row's: undecided
        raise
    except (BuildError, ExecCriticError, OSError) as exc:
        text = str(exc)
        return _row(task, env.key, Decision(task.instance_id, False, f"Base build failed: "
                                            f"{text.splitlines()[0][:300]}", stage="checkout"),
                    {**facts, "error_tail": text[-3000:]})
    facts.update({"fetch_seconds": co.record.get("fetch_seconds"), "build_seconds": co.record.get("build_seconds"),
                  "checkout_seconds": co.record.get("seconds"), "checkout_bytes": co.record.get("disk_bytes"),
                  "checkout_reused": co.reused})
    try:
        d, qf = qualify_instance(mt, native_environment(mt, root), harness=harness, repeat=repeat,
                                 log_dir=root / "qualify-logs" / task.instance_id, unapplicable=True)
    except ExecCriticError as exc:
        d, qf = Decision(task.instance_id, False, f"qualification error: {exc}"[:400]), {}
    facts.update(qf)
    facts["total_seconds"] = round(time.monotonic() - t0, 1)
    return _row(task, env.key, d, facts)


def _write(results_dir: Path, rows: Mapping[str, dict], envs: Mapping[str, dict], recipe_out: Path | None,
           dataset: Mapping[str, Any], all_rows: Sequence[Task]) -> None:
    ordered = write_state(results_dir, rows, envs)
    summary = summarize(rows, envs, all_rows)
    manifest = build_manifest(datasets=[dict(dataset)], extra={"rerun": RERUN, "task_set": NAME, "notes": NOTES,
                                                                "files": ["instances.jsonl", "envs.json",
                                                                          "summary.json", "table.md"]})
    write_result(results_dir / "summary.json", summary, manifest)
    atomic_write(results_dir / "table.md", table_markdown(summary, title=TITLE, rows_name=ROWS_NAME, rerun=RERUN)
                 + blocked_repos_markdown(results_dir, set(TOOLCHAINS)))
    if recipe_out is not None:
        kept = [r for r in ordered if r["kept"]]
        env_map = {k: NativeEnv(k, e["recipe"]["repo"], e["recipe"]["language"], e["recipe"]["packages"])
                   for k, e in envs.items() if k in {r["env"] for r in kept}}
        insts = [InstanceRecipe(r["instance_id"], r["repo"], r["version"], r["env"], r.get("p2p_excluded") or {},
                                r.get("flaky_nodes") or {}) for r in kept]
        atomic_write_json(recipe_out, recipe_to_dict(env_map, insts, dataset=dataset, notes=NOTES), indent=1)


#: what experiments/multilingual_blockers.py (Rust, Java) and multilingual_blockers_other.py (JS/TS, Go, PHP, Ruby)
#: measured for the repositories with no toolchain here, beside the qualification in the results dir
BLOCKER_FILES = ("blockers.json", "blockers_other.json")


def blocked_repos_markdown(results_dir: Path, run_here: set[str]) -> str:
    """table.md's second part: every other Multilingual repository with the blocker measured for it, so that the one
    table names, per repository, its qualified rows or what stops them (the files' per-repository summaries; a
    repository with a toolchain here is in the first part instead)."""
    rows = []
    for name in BLOCKER_FILES:
        path = results_dir / name
        if not path.is_file():
            continue
        for repo, p in json.loads(path.read_text()).get("per_repo", {}).items():
            if repo not in run_here:
                blocker = str(p.get("blocker", "")).replace("|", "\\|").replace("\n", " ")
                rows.append(f"| {repo} | {p.get('language', '?')} | {p.get('rows', '?')} | {blocker} (`{name}`) |")
    if not rows:
        return ""
    return "\n".join(["", "## The other SWE-bench Multilingual repositories: not run here, what blocks each (measured)",
                      "", "| repository | language | rows | what blocks it |", "|---|---|---:|---|", *rows]) + "\n"


NOTES = {
    "base": "each row's own base_commit and its submodules at the commits it records, fetched with `git fetch "
            "--depth 1 <source> <sha>` (sources named by --git-source / $EXECCRITIC_GIT_SOURCES)",
    "environment": "the repository's toolchain from Debian packages (tasks/mlgit/toolchain.py), versions recorded; "
                   "no image. JavaScript/TypeScript rows: the dependencies installed from the Base's lockfile (npm ci, "
                   "or pnpm at the row's packageManager version), the one step with network, recorded per checkout",
    "build": "the eval_script's build steps run once at the Base when the checkout is prepared (bubblewrap, no "
             "network); every run applies its patches and runs the same steps, which rebuild what changed. The "
             "eval_script's clean steps (make clean, make distclean) are dropped, per task in dropped_steps; a step "
             "run otherwise here (immutable-js' build without its network-only size report) is in replaced_steps",
    "qualification": "official evaluator, local path (log graded by swebench's parser for the row; these runners "
                     "have no in-process reporter): F2P fail validly on Base and pass on Gold, P2P pass on Gold "
                     "except recorded p2p_excluded; Base and Gold run `repeat` times (flaky: F2P dropped, P2P "
                     "excluded); a patch that cannot apply is invalid",
}
