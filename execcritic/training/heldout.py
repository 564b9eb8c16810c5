"""Evaluate a policy checkpoint on the RL episodes themselves: K real episodes per instance, scored by the harness
and the official evaluator exactly as a GRPO rollout is, with the policy in this process.

Why not `evaluate.py`'s pipeline path: that path serves the checkpoint in text mode (one fenced bash block per
turn), while training samples tool calls through `HFPolicy`; a before/after comparison of SFT or GRPO must use
the policy the trainer trained, with the same chat template, turn budgets and rollout sampling. So this module
runs `episodes.TestEpisode` / `RepairEpisode` through `episodes.run_episode` (an operational failure is an
aborted, masked episode: counted apart, never a behavioral 0).

Metrics per episode (one JSONL line each, resumable: an (instance, k) already written is skipped):
- Test agent: `valid_submission` (a bundle reached the Base gate), `base_gate` (it failed cleanly on Base:
  qualified), `b2g` (Q = B x G from a fresh Gold audit), the Eq. 5 level reward (no turn slack: that needs a
  group).
- Repair agent: `usable_patch` (a terminal patch that applies and touches no test), `resolved` (the official
  evaluator), the Eq. 6 reward.
- Test agent, what a policy learned about the protocol and the repository (`TRANSFER_METRICS`, the transfer study's
  secondaries): `protocol_valid`, `files_in_repo`, `files_on_issue` (`transfer_metrics`).
`summarize` gives each metric's mean over instances of the per-instance mean, with a 95% interval valid at the few
instances a CPU study has (`results.stats`): Wilson's with n = instances for a rate (conservative: an instance's
mean varies no more than one Bernoulli outcome), Hoeffding's within Eq. 5/6's range for the reward. A percentile
bootstrap over 2-3 instances printed "1.00 [1.00, 1.00]": no interval at all.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from execcritic.agents.models.base import SamplingConfig
from execcritic.bundle.diff import parse_patch
from execcritic.config import PAPER, ProtocolConfig
from execcritic.results import stats
from execcritic.results.manifest import build_manifest, write_result
from execcritic.tasks.model import Task
from execcritic.training.candidates import load_pools
from execcritic.training.episodes import (
    EpisodeResult,
    RepairEpisode,
    TestEpisode,
    repair_row,
    repository_paths,
    run_episode,
    test_row,
)
from execcritic.training.grpo import role_config
from execcritic.training.policy import HFPolicy
from execcritic.training.run import load_model
from execcritic.training.trl_adapter import rollout_sampling

METRICS = {"test": ("valid_submission", "base_gate", "b2g", "reward"),
           "repair": ("usable_patch", "resolved", "reward")}


#: what a policy learned about the protocol and the repository (issue 44), beside METRICS; a Test episode records
#: them when its info has `episodes.workspace_facts` (episodes from before those facts have none)
TRANSFER_METRICS = {"test": ("protocol_valid", "files_in_repo", "files_on_issue")}


def _dir(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else "."


def transfer_metrics(info: dict[str, Any], task: Task) -> dict[str, float]:
    """`protocol_valid`: every model turn was a well-formed tool call; `files_in_repo`: the episode changed files and
    each lies in a directory the repository has at Base (not a file named after another repository at the root);
    `files_on_issue`: a changed file lies in a directory the instance's official fix or tests change (read by the
    evaluator, never shown to the agent)."""
    touched = repository_paths(info.get("touched") or ())   # records from before the filter list .git too
    at_base = set(info.get("touched_dirs_at_base") or ())
    return {"protocol_valid": float(info.get("turns", 0) > 0 and not info.get("format_errors")),
            "files_in_repo": float(bool(touched) and all(_dir(p) in at_base for p in touched)),
            "files_on_issue": float(on_issue(touched, task))}


def on_issue(paths: Sequence[str], task: Task) -> bool:
    """A path lies in a directory the instance's official fix or tests change (the evaluator's reading; never shown
    to the agent)."""
    issue_dirs = {_dir(p) for patch in (task.patch, task.test_patch) for p in parse_patch(patch).paths if p}
    return any(_dir(p) in issue_dirs for p in paths)


def episode_metrics(role: str, res: EpisodeResult, task: Task | None = None) -> dict[str, Any]:
    """The per-episode outcomes of `METRICS[role]`, and of `TRANSFER_METRICS[role]` when the episode recorded its
    workspace facts and `task` is given (None when the episode was aborted: operational, not 0)."""
    facts = task is not None and "touched" in res.info
    extra = TRANSFER_METRICS.get(role, ()) if facts else ()
    if res.aborted:
        return {k: None for k in (*METRICS[role], *extra)}
    b = res.breakdown
    if role == "test":
        valid = bool(res.rollout.valid_submission)   # type: ignore[union-attr]
        out = {"valid_submission": float(valid), "base_gate": float(bool(res.info.get("qualified"))),
               "b2g": float(b.Q) if b is not None else 0.0, "reward": float(res.reward)}
        return {**out, **(transfer_metrics(res.info, task) if facts else {})}
    off = res.info.get("official") or {}
    return {"usable_patch": float(bool(res.rollout.patch_usable and not res.rollout.forbidden_test_edit)),  # type: ignore[union-attr]
            "resolved": float(bool(off.get("resolved"))) if off.get("valid") else 0.0, "reward": float(res.reward)}


def _seed(seed: int, instance_id: str, k: int) -> int:
    digest = hashlib.sha256(f"heldout/{seed}/{instance_id}/{k}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFFFFFFFFFFFFFF


def evaluate_policy(model, tokenizer, role: str, tasks: Sequence[Task], out_path: str | Path, *,
                    protocol: ProtocolConfig = PAPER, episodes: int = 2, seed: int = 0, backend: str | None = None,
                    candidates: dict[str, Any] | None = None, sampling: SamplingConfig | None = None,
                    label: str = "") -> list[dict[str, Any]]:
    """Run `episodes` episodes per task with `model` (an HF causal LM in this process) and append one record per
    episode to `out_path`; returns every record of the file. Test rows use `candidates[instance]` (a labeled
    pool) when given, else none (BA is then 0: the level reward is at most 0.2, B2G is unaffected)."""
    if role not in METRICS:
        raise ValueError(f"role must be one of {sorted(METRICS)}, got {role!r}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["instance_id"], r["k"]) for r in read_records(out_path)}
    sampling = sampling or rollout_sampling(role_config(role, protocol), protocol)
    policy = HFPolicy(model, tokenizer, sampling=sampling)
    episode = TestEpisode(protocol, backend) if role == "test" else RepairEpisode(protocol, backend)
    for task in tasks:
        row = (test_row(task, (candidates or {}).get(task.instance_id, ()), protocol) if role == "test"
               else repair_row(task, protocol))
        for k in range(episodes):
            if (task.instance_id, k) in done:
                continue
            started = time.monotonic()
            res = run_episode(role, episode, policy, row, _seed(seed, task.instance_id, k))
            rec = {"instance_id": task.instance_id, "k": k, "role": role, "aborted": res.aborted,
                   "masked": res.masked, "level": res.info.get("level"), **episode_metrics(role, res, task),
                   "turns": res.sample.turns if res.sample else 0,
                   "model_tokens": res.sample.model_tokens if res.sample else 0,
                   "seconds": round(time.monotonic() - started, 2), "info": res.to_record()["info"],
                   # what the policy wrote and what the environment answered, for reading a failure
                   "completion_text": policy.renderer.decode(res.sample.completion_ids)[:6000] if res.sample else ""}
            with out_path.open("a") as fh:
                fh.write(json.dumps(rec, default=str) + "\n")
            print(f"[{label + ' ' if label else ''}{role} eval] {task.instance_id} #{k}: "
                  + " ".join(f"{m}={rec[m]}" for m in METRICS[role]) + f" ({rec['seconds']:.0f} s)",
                  file=sys.stderr, flush=True)
    return read_records(out_path)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def summarize(records: Sequence[dict[str, Any]], role: str, instances: Sequence[str]) -> dict[str, Any]:
    """{metric: {value, ci_low, ci_high}} over `instances` (each instance's mean over its scored episodes; an
    instance without a scored episode is left out and counted in `n_unscored`), plus episode counts. The
    `TRANSFER_METRICS` are summarized when every scored episode recorded them."""
    by: dict[str, list[dict[str, Any]]] = {i: [] for i in instances}
    for r in records:
        if r["instance_id"] in by:
            by[r["instance_id"]].append(r)
    scored = {i: [r for r in rs if not r["aborted"]] for i, rs in by.items()}
    keep = [i for i in instances if scored[i]]
    out: dict[str, Any] = {"n_instances": len(keep), "n_unscored": len(instances) - len(keep),
                           "n_episodes": sum(len(scored[i]) for i in keep),
                           "n_aborted": sum(len(rs) - len(scored[i]) for i, rs in by.items())}
    bounds = (PAPER.test_reward if role == "test" else PAPER.repair_reward).bounds()
    scored_records = [r for i in keep for r in scored[i]]
    extra = [m for m in TRANSFER_METRICS.get(role, ()) if scored_records and all(m in r for r in scored_records)]
    for m in (*METRICS[role], *extra):
        per = np.array([np.mean([float(r[m]) for r in scored[i]]) for i in keep], dtype=float)
        value = float(per.mean()) if per.size else None
        if value is None:
            lo, hi, method = float("nan"), float("nan"), "undefined"
        elif m == "reward":
            (lo, hi), method = stats.hoeffding_mean_ci(value, per.size, bounds), "hoeffding"
        else:
            (lo, hi), method = stats.wilson(value, per.size), "wilson_instances"
        out[m] = {"value": value, "ci_low": lo, "ci_high": hi, "ci_method": method}
    return out


def sampling_record(role: str, protocol: ProtocolConfig = PAPER) -> dict[str, Any]:
    """What `evaluate_policy` sampled with, as its manifest records it: the role's GRPO rollout sampling under
    `protocol` (a preset's temperature, not the paper's default)."""
    s = rollout_sampling(role_config(role, protocol), protocol)
    return {"what": "the role's GRPO rollout sampling", "temperature": s.temperature, "top_p": s.top_p,
            "top_k": s.top_k, "max_tokens": s.max_tokens}


__all__ = ["METRICS", "TRANSFER_METRICS", "episode_metrics", "evaluate_policy", "on_issue", "read_records",
           "sampling_record", "summarize", "transfer_metrics"]


def run_evaluation(model_spec: str, role: str, tasks: Sequence[Task], out: str | Path, *,
                   protocol: ProtocolConfig = PAPER, episodes: int = 2, seed: int = 0, backend: str | None = None,
                   candidates: str | None = None, threads: int = 1, label: str = "",
                   datasets: list[dict[str, Any]] | None = None, command: list[str] | str | None = None
                   ) -> dict[str, Any]:
    """`evaluate_policy` for a model spec (checkpoint dir or alias), then `<out>` (episode records, JSONL) and
    `<out>.summary.json` (the summary with CIs, and the manifest: git SHA, config, datasets, seeds, timings)."""
    started = time.monotonic()
    model, tokenizer, facts = load_model(model_spec, threads=threads)
    pools = load_pools(candidates) if candidates else None
    recs = evaluate_policy(model, tokenizer, role, tasks, out, protocol=protocol, episodes=episodes, seed=seed,
                           backend=backend, candidates=pools, label=label)
    ids = [t.instance_id for t in tasks]
    summary = summarize(recs, role, ids)
    manifest = build_manifest(command=command, config=protocol, datasets=datasets, seeds=[seed],
                              model={"policy": model_spec, "init": facts},
                              timings={"wall_s": round(time.monotonic() - started, 2),
                                       "episode_s": round(sum(r["seconds"] for r in recs), 2)},
                              extra={"artifact": "policy-evaluation", "role": role, "instances": ids,
                                     "episodes_per_instance": episodes, "label": label, "candidates": candidates,
                                     "sampling": sampling_record(role, protocol),
                                     "records": str(out)})
    write_result(Path(f"{out}.summary.json"), {"summary": summary}, manifest)
    return {"out": str(out), "summary": summary}


__all__ += ["run_evaluation"]
