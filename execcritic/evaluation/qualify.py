"""Qualify a Verified instance on its sdist environment, and the whole selection -> build -> qualify run.

An instance is kept only if, through the official evaluator's local path (LocalSandbox: isolated,
no network):
  - on Base (empty patch) every FAIL_TO_PASS node ran and failed validly (present, FAILED; ERROR
    counts only for unittest-style runners where it means the test body raised);
  - on Gold every FAIL_TO_PASS node passed and every PASS_TO_PASS node that can run here passed.
A PASS_TO_PASS node "cannot run here" when it has no result on Gold (not in this release's test files)
or fails identically on Base and Gold (the environment, e.g. network). Those are recorded per
instance with the reason and left out of the task's PASS_TO_PASS; more than a few drops the instance.
The decision is a pure function of the two graded runs (`decide`).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.progress import track

from execcritic.config import PAPER, HarnessConfig
from execcritic.errors import ExecCriticError
from execcritic.evaluation.official import BEHAVIORAL_ERROR_PARSERS, OfficialResult, evaluate_local, grade_log
from execcritic.results.manifest import build_manifest
from execcritic.sandbox.base import Limits
from execcritic.swebench_compat import grading
from execcritic.tasks.environment import TaskEnvironment
from execcritic.tasks.model import Task
from execcritic.tasks.sdist import rebase_task
from execcritic.tasks.sdist.build import (
    BuildError,
    base_checkout,
    build_env,
    era_cutoff,
    patch_applies,
    read_requirements,
)
from execcritic.tasks.sdist.recipe import EnvRecipe, InstanceRecipe, Recipe, load_recipe, recipe_to_dict
from execcritic.tasks.sdist.select import PYPI_PROJECT, fetch_releases, releases_before
from execcritic.tasks.sdist.specs import SPEC_SOURCE, load_specs

PASSING = ("PASSED", "XFAIL")


def max_excluded(n_p2p: int) -> int:
    """How many PASS_TO_PASS nodes may be left out before the instance is dropped instead."""
    return max(3, n_p2p // 10)


@dataclass
class Decision:
    instance_id: str
    kept: bool
    reason: str                                     # one line: why kept/dropped
    p2p_excluded: dict[str, str] = field(default_factory=dict)
    stage: str = "qualify"
    flaky_nodes: dict[str, str] = field(default_factory=dict)   # node -> the statuses seen across repetitions
    # F2P nodes with no result on Base in a Base run another F2P node fails outright (`OfficialResult.unreported`):
    # failing there as swebench grades them, and passing on Gold
    f2p_unreported_on_base: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _status(sm: dict[str, str], node: str) -> str | None:

    key = grading()._resolve_case(node, sm)
    return None if key is None else sm[key]


def _run_problem(r: OfficialResult) -> str | None:
    """An operational problem with a run as a whole (not about particular nodes)."""
    if r.timed_out:
        return "timed out"
    if r.failure_kind:                  # the harness refused the run (reporter, tree): the evaluator would too
        return f"{r.failure_kind}: {r.error[:300]}"
    if not r.patch_applied:
        return "patch did not apply: " + r.error.splitlines()[0][:200] if r.error else "patch did not apply"
    if r.load_errors:
        return "collection/import errors: " + "; ".join(r.load_errors[:2])[:300]
    if not r.status_map:
        return (r.error or "no test results")[:300]
    return None


def decide(task: Task, base: OfficialResult, gold: OfficialResult) -> Decision:
    iid = task.instance_id
    for name, r in (("Base", base), ("Gold", gold)):
        problem = _run_problem(r)
        if problem:
            return Decision(iid, False, f"{name} run invalid: {problem}")
    behavioral_error = task.log_parser in BEHAVIORAL_ERROR_PARSERS
    unreported = []
    for node in task.fail_to_pass:
        b = _status(base.status_map, node)
        if b is None and node in base.unreported:
            unreported.append(node)
        elif b is None:
            return Decision(iid, False, f"F2P {node} has no result on Base")
        elif b in PASSING:
            return Decision(iid, False, f"F2P {node} passes on Base (the release already behaves like Gold)")
        elif b == "SKIPPED":
            return Decision(iid, False, f"F2P {node} is skipped on Base")
        elif b == "ERROR" and not behavioral_error:
            return Decision(iid, False, f"F2P {node} errors outside the test body on Base (not a valid fail)")
        g = _status(gold.status_map, node)
        if g not in PASSING:
            return Decision(iid, False, f"F2P {node} does not pass on Gold ({g or 'no result'})")
    excluded: dict[str, str] = {}
    for node in task.pass_to_pass:
        g = _status(gold.status_map, node)
        if g in PASSING or g == "SKIPPED":  # swebench: a skipped P2P is maintained
            continue
        b = _status(base.status_map, node)
        if g is None:
            excluded[node] = "no result on Gold: not among the results of the test files run here"
        elif b == g:
            excluded[node] = f"{g} on both Base and Gold here (environment or release difference, not the fix)"
        else:
            return Decision(iid, False, f"P2P {node} is {b} on Base but {g} on Gold")
    if len(excluded) > max_excluded(len(task.pass_to_pass)):
        return Decision(iid, False, f"{len(excluded)} of {len(task.pass_to_pass)} P2P cannot run here "
                        f"(limit {max_excluded(len(task.pass_to_pass))})", excluded)
    note = f"; {len(excluded)} P2P excluded" if excluded else ""
    if unreported:
        note += f"; {len(unreported)} F2P with no result on Base, where another F2P fails (as swebench grades them)"
    return Decision(iid, True, f"F2P {len(task.fail_to_pass)} fail on Base and pass on Gold; "
                    f"P2P {len(task.pass_to_pass) - len(excluded)} pass on Gold{note}", excluded,
                    f2p_unreported_on_base=unreported)


# Every hunk's context is wrong, so no strategy can apply it: the evaluator must say so, not grade.
UNAPPLICABLE = ("diff --git a/no_such_dir/missing.py b/no_such_dir/missing.py\n--- a/no_such_dir/missing.py\n"
                "+++ b/no_such_dir/missing.py\n@@ -1,2 +1,2 @@\n-this line is not there\n+nor is this one\n"
                " context that does not exist\n")


def qualify_instance(task: Task, env, *, harness: HarnessConfig = PAPER.harness, log_dir: Path | None = None,
                     repeat: int = 1, unapplicable: bool = False) -> tuple[Decision, dict[str, Any]]:
    """Run Base and Gold through the official evaluator in one sandbox; decide; re-check the decision
    by re-grading the same logs with the reduced PASS_TO_PASS (gold resolved, empty unresolved).

    repeat > 1 runs the pair again (only when the first pair keeps the instance) and measures flakiness: a
    FAIL_TO_PASS node whose status changes on either side drops the instance, a PASS_TO_PASS one is left out
    (`p2p_excluded`) and named in `flaky_nodes`, and a repetition that does not run validly drops it. Every
    repetition's logs are re-graded. `unapplicable` also checks that a patch that cannot apply is invalid."""
    t0 = time.monotonic()
    sb = env.open_sandbox(limits=Limits.from_config(harness))
    runs: list[tuple[OfficialResult, OfficialResult]] = []
    junk = None
    try:
        for k in range(max(1, repeat)):
            sub = (log_dir / f"run{k + 1}" if k else log_dir) if log_dir else None
            base = evaluate_local(task, "", env, sandbox=sb, harness=harness,
                                  log_dir=sub / "base" if sub else None)
            gold = evaluate_local(task, task.patch, env, sandbox=sb, harness=harness,
                                  log_dir=sub / "gold" if sub else None)
            runs.append((base, gold))
            if k == 0 and not decide(task, base, gold).kept:
                break
        if unapplicable and len(runs) == max(1, repeat):
            junk = evaluate_local(task, UNAPPLICABLE, env, sandbox=sb, harness=harness, candidate=True)
    finally:
        sb.close()
    base, gold = runs[0]
    d = decide_repeated(task, runs)
    facts = {"base_s": base.duration_s, "gold_s": gold.duration_s, "seconds": round(time.monotonic() - t0, 1),
             "runs": len(runs), "base_error": base.error[:500], "gold_error": gold.error[:500],
             "n_f2p": len(task.fail_to_pass), "n_p2p": len(task.pass_to_pass)}
    if d.kept:
        p2p = [t for t in task.pass_to_pass if t not in d.p2p_excluded]
        checks = [(_regrade(task, b, "", p2p), _regrade(task, g, task.patch, p2p)) for b, g in runs]
        facts["official_checks"] = {"empty": [_outcome(rb) for rb, _ in checks],
                                    "gold": [_outcome(rg) for _, rg in checks]}
        if junk is not None:
            facts["official_checks"]["unapplicable"] = _outcome(junk)
        for k, (rb, rg) in enumerate(checks, 1):
            if not (rg.valid and rg.resolved and rb.valid and not rb.resolved):
                d = Decision(task.instance_id, False, f"re-grade disagrees (run {k}): gold valid={rg.valid} "
                             f"resolved={rg.resolved} ({rg.error[:200]}); empty valid={rb.valid} "
                             f"resolved={rb.resolved} ({rb.error[:200]})", d.p2p_excluded, flaky_nodes=d.flaky_nodes)
                break
        if d.kept and junk is not None and (junk.valid or "apply" not in junk.error):
            d = Decision(task.instance_id, False, f"a patch that cannot apply was not invalid: {_outcome(junk)} "
                         f"({junk.error[:200]})", d.p2p_excluded, flaky_nodes=d.flaky_nodes)
    return d, facts


def _outcome(r: OfficialResult) -> str:
    return "invalid" if not r.valid else "resolved" if r.resolved else "unresolved"


def flaky(task: Task, runs: Sequence[tuple[OfficialResult, OfficialResult]]) -> dict[str, str]:
    """FAIL_TO_PASS/PASS_TO_PASS nodes whose status differs between repetitions of the same side."""
    out = {}
    for node in [*task.fail_to_pass, *task.pass_to_pass]:
        seen = {side: [_status(r[i].status_map, node) or "no result" for r in runs]
                for i, side in enumerate(("Base", "Gold"))}
        if any(len(set(v)) > 1 for v in seen.values()):
            out[node] = "; ".join(f"{side}: {', '.join(v)}" for side, v in seen.items())
    return out


def decide_repeated(task: Task, runs: Sequence[tuple[OfficialResult, OfficialResult]]) -> Decision:
    """`decide` on the first pair, with what repetitions showed (see `qualify_instance`)."""
    iid = task.instance_id
    for k, pair in enumerate(runs[1:], 2):
        for name, r in zip(("Base", "Gold"), pair):
            problem = _run_problem(r)
            if problem:
                return Decision(iid, False, f"{name} run invalid (repetition {k}): {problem}")
    unstable = flaky(task, runs) if len(runs) > 1 else {}
    for node in task.fail_to_pass:
        if node in unstable:
            return Decision(iid, False, f"F2P {node} is flaky over {len(runs)} runs ({unstable[node]})",
                            flaky_nodes=unstable)
    stable = dataclasses.replace(task, pass_to_pass=tuple(t for t in task.pass_to_pass if t not in unstable))
    d = decide(stable, *runs[0])
    if not unstable:
        return d
    excluded = {**d.p2p_excluded, **{n: f"flaky over {len(runs)} runs ({why})" for n, why in unstable.items()}}
    if d.kept and len(excluded) > max_excluded(len(task.pass_to_pass)):
        return Decision(iid, False, f"{len(excluded)} of {len(task.pass_to_pass)} P2P cannot run here "
                        f"(limit {max_excluded(len(task.pass_to_pass))})", excluded, flaky_nodes=unstable)
    reason = d.reason + (f"; {len(unstable)} flaky P2P excluded" if d.kept else "")
    return Decision(iid, d.kept, reason, excluded, flaky_nodes=unstable,
                    f2p_unreported_on_base=d.f2p_unreported_on_base)


def _regrade(task: Task, run: OfficialResult, patch: str, p2p: list[str]) -> OfficialResult:
    text = Path(run.log_path).read_text() if run.log_path else ""
    if not text:
        return run
    return grade_log(task, text, patch=patch, p2p=p2p, backend=run.backend, timed_out=run.timed_out)


# ---- the whole run: select -> build -> qualify -> recipe + results --------------------------------

SUPPORTED_REPOS = ("sympy/sympy", "django/django", "pytest-dev/pytest", "psf/requests", "pallets/flask",
                   "sphinx-doc/sphinx", "pylint-dev/pylint", "mwaskom/seaborn", "pydata/xarray")


@dataclass
class Candidate:
    task: Task
    tried: list[dict] = field(default_factory=list)   # release tries: version, gold/test apply
    release: Any = None
    base_commit: str = ""
    env_key: str = ""
    decision: Decision | None = None
    facts: dict = field(default_factory=dict)


def env_key_for(project: str, version: str, python: str, spec: dict) -> str:

    h = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    return f"{project.lower()}-{version}-py{python}-{h}"


def select_releases(tasks: Sequence[Task], root: Path, *, max_tries: int = 3, jobs: int = 3,
                    log: Callable[[str], None] = print, order: str = "version") -> list[Candidate]:

    cands = [Candidate(t) for t in tasks]
    plans: dict[str, list] = {}
    needed: dict[tuple[str, str], Any] = {}
    for c in cands:
        project = PYPI_PROJECT.get(c.task.repo)
        if not project:
            c.decision = Decision(c.task.instance_id, False, f"no PyPI project known for {c.task.repo}", stage="select")
            continue
        plans[c.task.instance_id] = releases_before(fetch_releases(project, root), c.task.created_at, max_tries,
                                                    order=order)
        for r in plans[c.task.instance_id]:
            needed[(r.project, r.version)] = r
    log(f"selection: {len(cands)} candidates, {len(needed)} releases to unpack")

    bases: dict[tuple[str, str], tuple[Path, str]] = {}
    with cf.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(base_checkout, r, root, progress=False): k for k, r in needed.items()}
        for fut in track(cf.as_completed(futs), total=len(futs), description="sdists", transient=True,
                         console=Console(stderr=True)):
            bases[futs[fut]] = fut.result()
    for c in cands:
        if c.decision:
            continue
        for r in plans[c.task.instance_id]:
            path, commit = bases[(r.project, r.version)]
            g, gd = patch_applies(path, c.task.patch)
            t, td = patch_applies(path, c.task.test_patch)
            c.tried.append({"release": r.version, "order": order, "gold_applies": g, "test_applies": t,
                            **({"diagnostic": (gd if not g else td)[:300]} if not (g and t) else {})})
            if g and t:
                c.release, c.base_commit = r, commit
                break
        if c.release is None:
            why = "no release before the issue date" if not c.tried else \
                f"gold/test patch do not apply to the {len(c.tried)} latest release(s) before the issue"
            c.decision = Decision(c.task.instance_id, False, why, stage="select")
    return cands


def plan_envs(cands: Sequence[Candidate], root: Path, *, cutoff: str = "release") -> dict[str, Any]:
    """Group applicable candidates into EnvRecipes (one per release x interpreter x spec)."""

    specs = load_specs(str(root))
    envs: dict[str, EnvRecipe] = {}
    for c in cands:
        if c.decision:
            continue
        repo_specs = specs["specs"].get(c.task.repo, {})
        if c.task.version not in repo_specs:
            c.decision = Decision(c.task.instance_id, False, f"swebench 4.1.0 has no spec for {c.task.repo} "
                                  f"{c.task.version}", stage="plan")
            continue
        spec = dict(repo_specs[c.task.version])
        key = env_key_for(c.release.project, c.release.version, spec["python"], spec)
        c.env_key = key
        if key in envs:
            continue
        reqs: list[str] = []
        skipped: dict[str, str] = {}
        if spec.get("packages") == "requirements.txt":
            base, _ = base_checkout(c.release, root, progress=False)
            paths = specs["reqs_paths"].get(c.task.repo, [])
            reqs = read_requirements(base, paths)
            if not reqs:
                skipped["packages: requirements.txt"] = f"none of {paths} exists in the sdist"
        elif spec.get("packages") == "environment.yml":
            skipped["packages: environment.yml"] = "conda environment file not reproduced in a venv; the spec's " \
                "pip_packages are installed"
        envs[key] = EnvRecipe(key=key, repo=c.task.repo, release=c.release, base_commit=c.base_commit,
                              python=spec["python"], spec=spec, spec_version=c.task.version,
                              exclude_newer=era_cutoff(c.release.upload_time, spec["python"]), requirements=tuple(reqs), lock=(),
                              skipped=skipped)
    return envs


def run_pipeline(tasks: Sequence[Task], *, root: Path, results_dir: Path, recipe_out: Path | None,
                 max_tries: int = 3, jobs: int = 1, harness: HarnessConfig = PAPER.harness, dataset_manifest: dict | None = None,
                 log: Callable[[str], None] = print, merge: bool = True, order: str = "version") -> dict[str, Any]:

    t_start = time.monotonic()
    results_dir.mkdir(parents=True, exist_ok=True)
    cands = select_releases(tasks, root, max_tries=max_tries, log=log, order=order)
    envs = plan_envs(cands, root)
    built: dict[str, Any] = {}
    env_facts: dict[str, dict] = {}
    def build(key: str) -> None:
        env = envs[key]
        users = [c for c in cands if c.env_key == key and not c.decision]
        log(f"env {key}: building for {len(users)} instance(s)")
        try:
            b, resolved = build_env(env, root=root, resolve=True, progress=False,
                                    log=lambda m: log(f"  {key}: {m}"))
            built[key] = (b, resolved)
            env_facts[key] = {"build_seconds": b.record.get("build_seconds"), "skipped": resolved.skipped}
        except (BuildError, ExecCriticError, OSError) as exc:
            env_facts[key] = {"error": str(exc)[:2000]}
            for c in users:
                c.decision = Decision(c.task.instance_id, False, f"env build failed: {str(exc).splitlines()[0][:300]}",
                                      stage="build")

    with cf.ThreadPoolExecutor(max(1, jobs)) as ex:  # builds share nothing but the sdist cache
        list(ex.map(build, list(envs)))
    todo = [c for c in cands if not c.decision]
    log(f"qualifying {len(todo)} instance(s) with {jobs} job(s)")

    def work(c: Candidate) -> Candidate:
        b, resolved = built[c.env_key]
        rec = Recipe("<pipeline>", {}, {c.env_key: resolved},
                     (InstanceRecipe(c.task.instance_id, c.task.repo, c.task.version, c.env_key),))
        t = rebase_task(c.task, rec, rec.instances[0])
        env = TaskEnvironment(kind="local", checkout=b.checkout, venv=b.venv, activation=b.activation,
                              base_commit=resolved.base_commit, upstream_base_commit=c.task.base_commit)
        try:
            c.decision, c.facts = qualify_instance(t, env, harness=harness,
                                                   log_dir=root / "qualify-logs" / c.task.instance_id)
        except ExecCriticError as exc:
            c.decision = Decision(c.task.instance_id, False, f"qualification error: {exc}"[:400])
        log(f"  {c.task.instance_id}: {'KEPT' if c.decision.kept else 'dropped'} - {c.decision.reason[:160]} "
            f"({c.facts.get('seconds', '?')}s)")
        return c

    with cf.ThreadPoolExecutor(max(1, jobs)) as ex:
        list(ex.map(work, todo))
    kept = [c for c in cands if c.decision and c.decision.kept]
    this_run = {c.task.instance_id for c in cands}
    previous = _previous_rows(results_dir, this_run) if merge else []
    summary = summarize(cands, envs=envs, env_facts=env_facts, seconds=time.monotonic() - t_start,
                        previous=previous)
    write_results(results_dir, cands, summary, dataset_manifest or {}, previous=previous)
    if recipe_out is not None:
        insts = [InstanceRecipe(c.task.instance_id, c.task.repo, c.task.version, c.env_key,
                                c.decision.p2p_excluded) for c in kept]
        env_map = {c.env_key: built[c.env_key][1] for c in kept}
        if merge and recipe_out.exists():  # keep what earlier runs qualified for other instances

            old = load_recipe(recipe_out)
            for inst in old.instances:
                if inst.instance_id not in this_run:
                    insts.append(inst)
                    env_map.setdefault(inst.env, old.envs[inst.env])
        data = recipe_to_dict(env_map, insts, dataset=dataset_manifest or {}, notes=recipe_notes())
        recipe_out.write_text(json.dumps(data, indent=1) + "\n")
    return summary


def _previous_rows(results_dir: Path, exclude: set[str]) -> list[dict]:
    path = results_dir / "instances.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["instance_id"] not in exclude]


def recipe_notes() -> dict[str, Any]:

    return {
        "selection": "latest PyPI release (pre-releases included) uploaded before the instance's created_at whose "
                     "sdist accepts both the gold patch and the test patch (`git apply --check`); up to 3 "
                     "releases tried, newest first - by version (select.releases_before order='version', the "
                     "default; used for Django) or, in the first batch (SymPy, pytest, requests, seaborn, flask, "
                     "pylint), by upload time; results/verified_sdist/summary.json 'batches' says which, and "
                     "instances.jsonl lists each instance's tries",
        "base": "the sdist unpacked (minus PKG-INFO and *.egg-info) as the only commit of a fresh git repo, "
                "author/committer execcritic, dated the sdist upload time",
        "environment": "venv on the spec's CPython; spec packages/requirements resolved with uv --exclude-newer "
                       "<release upload time> (SWE-bench's exact pins exempt); then pre_install and install run "
                       "under bubblewrap with the checkout at /testbed; lock = pip freeze",
        "qualification": "official evaluator, local path (LocalSandbox isolated, no network): F2P fail validly "
                         "on Base and pass on Gold; P2P pass on Gold except recorded p2p_excluded",
        "spec_source": SPEC_SOURCE,
        "overlays": "SymPy sdists do not ship the repository script bin/test that SWE-bench's command runs; the "
                    "Base adds execcritic's stand-in (execcritic/tasks/sdist/overlays/sympy/bin/test, a thin "
                    "wrapper over the release's own sympy.test()) and the Base commit includes it",
        "install": "a non-editable `pip install .` spec is run as `pip install -e .` (the venv is read-only in "
                   "the sandbox, so patched sources must be imported from /testbed); the eval script's re-install "
                   "step is not run (no network in the sandbox; editable installs need none)",
    }


def summarize(cands: Sequence[Candidate], *, envs: dict, env_facts: dict, seconds: float,
              previous: Sequence[dict] = ()) -> dict[str, Any]:
    """Per-repo yield of this run plus the rows of earlier runs (other instances)."""
    rows = [*previous, *(candidate_row(c) for c in cands)]
    summary = summarize_rows(rows, envs={k: env_facts.get(k, {}) for k in envs})
    return {**summary, "seconds": round(seconds, 1)}


def reason_class(d: Decision) -> str:
    r = d.reason
    for prefix in ("gold/test patch do not apply", "no release before", "env build failed", "swebench 4.1.0 has no spec",
                   "Base run invalid", "Gold run invalid", "re-grade disagrees", "qualification error"):
        if r.startswith(prefix):
            return prefix
    if "(repetition" in r:
        return "run invalid on repetition"
    if " is flaky over " in r:
        return "F2P flaky"
    if "passes on Base" in r:
        return "F2P passes on Base"
    if "has no result on Base" in r:
        return "F2P has no result on Base"
    if "does not pass on Gold" in r:
        return "F2P does not pass on Gold"
    if "errors outside the test body" in r:
        return "F2P errors (setup) on Base"
    if r.startswith("P2P"):
        return "P2P passes on Base but fails on Gold"
    if "cannot run here" in r:
        return "too many P2P cannot run here"
    return r[:60]


def candidate_row(c: Candidate) -> dict[str, Any]:
    """One line of instances.jsonl: what was tried for the instance and why it was kept or dropped."""
    d = c.decision
    return {"instance_id": c.task.instance_id, "repo": c.task.repo, "version": c.task.version,
            "created_at": c.task.created_at, "release": c.release.version if c.release else None,
            "env": c.env_key or None, "kept": bool(d and d.kept), "stage": d.stage if d else None,
            "reason": d.reason if d else "not reached",
            "reason_class": reason_class(d) if d and not d.kept else None, "tried": c.tried,
            "p2p_excluded": d.p2p_excluded if d else {}, **c.facts}


def write_results(results_dir: Path, cands: Sequence[Candidate], summary: dict, dataset: dict,
                  previous: Sequence[dict] = ()) -> None:
    rows = [*previous, *(candidate_row(c) for c in cands)]
    rows.sort(key=lambda r: r["instance_id"])
    with (results_dir / "instances.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    manifest = build_manifest(datasets=[dataset], extra={"files": ["instances.jsonl", "summary.json"],
                                                         "notes": recipe_notes()})
    (results_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")


def summarize_rows(rows: Sequence[dict], *, envs: dict | None = None) -> dict[str, Any]:
    """Per-repo yield and drop reasons from instances.jsonl rows (any number of runs merged)."""
    per_repo: dict[str, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for row in rows:
        r = per_repo.setdefault(row["repo"], {"candidates": 0, "applied": 0, "built": 0, "qualified": 0})
        r["candidates"] += 1
        r["applied"] += bool(row.get("release"))
        r["built"] += row.get("stage") not in ("select", "plan", "build", None)
        r["qualified"] += bool(row.get("kept"))
        if not row.get("kept"):
            cls = row.get("reason_class") or reason_class(Decision(row["instance_id"], False, row.get("reason", "")))
            reasons[cls] = reasons.get(cls, 0) + 1
    times = [row["seconds"] for row in rows if row.get("seconds")]
    return {"qualified": sum(r["qualified"] for r in per_repo.values()),
            "repos_with_qualified": sum(1 for r in per_repo.values() if r["qualified"]),
            "per_repo": dict(sorted(per_repo.items())),
            "drop_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
            "envs": envs or {},
            "qualify_seconds_per_instance": {"mean": round(sum(times) / len(times), 1) if times else None,
                                             "median": sorted(times)[len(times) // 2] if times else None,
                                             "max": max(times) if times else None}}


def merge_runs(results_dir: Path, other_dir: Path, recipe_path: Path, other_recipe: Path) -> dict[str, Any]:
    """Fold a separate run (its results dir and recipe) into the main ones; the other run wins on
    instances both contain. Used when batches of repos are qualified as separate processes."""

    def rows(d: Path) -> dict[str, dict]:
        p = d / "instances.jsonl"
        return {json.loads(x)["instance_id"]: json.loads(x) for x in p.read_text().splitlines() if x.strip()} \
            if p.exists() else {}

    merged = {**rows(results_dir), **rows(other_dir)}
    envs: dict[str, Any] = {}
    for d in (results_dir, other_dir):
        s = d / "summary.json"
        if s.exists():
            envs.update(json.loads(s.read_text()).get("envs", {}))
    ordered = [merged[k] for k in sorted(merged)]
    with (results_dir / "instances.jsonl").open("w") as fh:
        for row in ordered:
            fh.write(json.dumps(row) + "\n")
    summary = summarize_rows(ordered, envs=envs)
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    a, b = load_recipe(recipe_path), load_recipe(other_recipe)
    insts = {i.instance_id: i for i in a.instances}
    insts.update({i.instance_id: i for i in b.instances})
    env_map = {**a.envs, **b.envs}
    used = {i.env for i in insts.values()}
    data = recipe_to_dict({k: v for k, v in env_map.items() if k in used}, list(insts.values()),
                          dataset=dict(a.dataset or b.dataset), notes=recipe_notes())
    recipe_path.write_text(json.dumps(data, indent=1) + "\n")
    return summary
