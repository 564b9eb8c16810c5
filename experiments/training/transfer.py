"""The CPU transfer study (issue 44): does SFT on trajectories that explore as an agent must carry to instances the
policy never saw?

Teacher: the exploring Test-agent teacher (`execcritic/training/explorer.py`, a scripted stand-in that reads only
what the agent is shown). Policy: SmolLM2-135M-Instruct (a stand-in for Qwen3.5-35B-A3B). Profile: cpu-transfer.

DECLARED (committed before the teacher, the SFT or any evaluation episode ran; `DECLARED_AT` and the commit that
adds this file are the record):
- Instances (`instances()`): verified-sdist's kept rows, sorted per repository, shuffled with `SEED`; held-out first:
  5 SymPy, 4 Django, 1 requests (repositories the policy trains on) and 4 pytest, 1 seaborn (repositories it never
  sees); the training pool next: 14 SymPy, 14 Django and the 2 other requests rows.
- The teacher runs once on every training-pool instance and on every held-out instance (its own rates, measured
  first). SFT data: its training-pool trajectories admitted by the paper's rule (a clean Base failure), at most
  `MAX_SFT` in the pool's order. If fewer than 10 instances or 3 repositories are admitted, the study stops there
  and says so.
- Evaluation: the base model and the SFT checkpoint, `EPISODES` episode per held-out instance (seed `EVAL_SEED`),
  with the cpu-transfer profile's sampling (temperature 0.8).
- PRIMARY statistic: the paired difference SFT - base in `valid_submission` (a submission the harness accepts as a
  bundle: it passed validation and reached the Base gate) over the 15 held-out instances; exact McNemar p-value and
  Newcombe's paired 95% interval (`results.stats.paired_delta`). Decision rule: the effect is shown when the
  interval's lower bound is > 0; otherwise it is not shown, and that is the result.
- SECONDARY (reported with the same method, deciding nothing): `protocol_valid`, `files_in_repo`, `files_on_issue`,
  `base_gate`, `b2g`; and the primary on the same-repository (10) and other-repository (5) held-out subsets.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DECLARED_AT = "2026-12-06T14:22Z"
SEED = 44
EVAL_SEED = 4400
EPISODES = 1
MAX_SFT = 12
PRIMARY = "valid_submission"
SECONDARY = ("protocol_valid", "files_in_repo", "files_on_issue", "base_gate", "b2g")
#: repository -> (held-out, training pool) counts
SPLIT = {"sympy/sympy": (5, 14), "django/django": (4, 14), "psf/requests": (1, 2), "pytest-dev/pytest": (4, 0),
         "mwaskom/seaborn": (1, 0)}
TRAINED_REPOS = ("sympy/sympy", "django/django", "psf/requests")


def instances(recipe: Path = REPO / "results" / "verified_sdist" / "instances.jsonl") -> dict[str, list[str]]:
    """{"heldout": [...], "train": [...]}: the declared selection from verified-sdist's kept rows."""
    kept: dict[str, list[str]] = defaultdict(list)
    for line in recipe.read_text().splitlines():
        r = json.loads(line)
        if r["kept"]:
            kept[r["repo"]].append(r["instance_id"])
    out: dict[str, list[str]] = {"heldout": [], "train": []}
    for repo, (n_held, n_train) in SPLIT.items():
        ids = sorted(kept[repo])
        random.Random(f"{SEED}/{repo}").shuffle(ids)
        if len(ids) < n_held + n_train:
            raise SystemExit(f"{repo}: {len(ids)} kept rows, the declaration needs {n_held + n_train}")
        out["heldout"] += ids[:n_held]
        out["train"] += ids[n_held:n_held + n_train]
    return out


if __name__ == "__main__":
    import sys
    split = instances()
    if sys.argv[1:2] in (["train"], ["heldout"]):
        print(" ".join(split[sys.argv[1]]))
    else:
        print(json.dumps(split, indent=1))
