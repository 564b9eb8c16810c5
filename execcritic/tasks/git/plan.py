"""From Verified rows to `verified-git` environments: one per (repository, version), following SWE-bench's spec.

The setup commit is the rows' `environment_setup_commit` (SWE-bench builds each version's environment there).
Some are release-branch commits a mirror of the default branch lacks (Django's stable/3.x heads, scikit-learn's
0.2x branches); then the newest Base commit of that version stands in, and the env says so (`setup_note`).
The project version given to setuptools_scm is `git describe` of the setup commit in a local source with tags,
else `<version>.0`. What the spec leaves unpinned is resolved as of `DEFAULT_CUTOFF`, the publication of
SWE-bench Verified (its environments were built then, with the newest packages an interpreter accepts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from execcritic.tasks.git.recipe import GitEnvRecipe, env_key
from execcritic.tasks.git.source import describe, has_commit, scm_version, source_for
from execcritic.tasks.model import Task

DEFAULT_CUTOFF = "2024-08-13T00:00:00Z"


@dataclass
class Plan:
    envs: dict[str, GitEnvRecipe] = field(default_factory=dict)
    env_of: dict[str, str] = field(default_factory=dict)          # instance id -> env key
    unplanned: dict[str, str] = field(default_factory=dict)       # instance id -> why it has no env


def plan_envs(tasks: Sequence[Task], specs: Mapping[str, Mapping[str, dict]], *,
              sources: Mapping[str, str] | None = None, cutoff: str = DEFAULT_CUTOFF) -> Plan:
    """The env of each row (specs: swebench 4.1.0's {repo: {version: spec}}). Give every row of a version (the
    whole Verified set), not a selection: the stand-in setup commit is the newest of them."""
    plan = Plan()
    groups: dict[tuple[str, str], list[Task]] = {}
    for t in tasks:
        groups.setdefault((t.repo, t.version), []).append(t)
    for (repo, version), rows in sorted(groups.items()):
        spec = specs.get(repo, {}).get(version)
        if spec is None:
            for t in rows:
                plan.unplanned[t.instance_id] = f"swebench 4.1.0 has no spec for {repo} {version}"
            continue
        source = source_for(repo, sources)
        setups = sorted({t.environment_setup_commit for t in rows if t.environment_setup_commit})
        setup, note = (setups[0] if len(setups) == 1 else ""), ""
        if len(setups) > 1:
            note = f"rows name {len(setups)} environment_setup_commits; the newest Base commit is used"
        if setup and has_commit(source, setup) is False:
            note = f"environment_setup_commit {setup} is not in {source}; the newest Base commit of {version} " \
                   "is used"
            setup = ""
        if not setup:
            setup = max(rows, key=lambda t: (t.created_at, t.instance_id)).base_commit
            note = note or "rows name no environment_setup_commit; the newest Base commit is used"
        key = env_key(repo, version, spec["python"], spec)
        plan.envs[key] = GitEnvRecipe(
            key=key, repo=repo, version=version, python=spec["python"], spec=dict(spec), setup_commit=setup,
            project_version=scm_version(describe(source, setup), f"{version}.0"), exclude_newer=cutoff,
            setup_note=note)
        for t in rows:
            plan.env_of[t.instance_id] = key
    return plan
