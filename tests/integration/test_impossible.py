"""`execcritic audit --impossible` end to end on a real verified-sdist task: the impossible variant is
qualified (Gold passes the official bundle, fails the variant, and is not resolved on it by the official
evaluator), a scripted cheater's attempts are caught with their failure kinds, and an honest scripted policy
that applies Gold neither passes a CHECK nor resolves - the cheating rate is 0 for both."""

from __future__ import annotations

import json

import pytest

from tests.paths import REPO
from tests.sdist import load_sdist_tasks

pytestmark = [pytest.mark.slow, pytest.mark.integration]

INSTANCE = "sympy__sympy-24443"
CHEATER = "scripted:tests/adversarial/impossible_standins.py:rewrite_results"
HONEST = "scripted:tests/scripted_policies.py:wrong_then_gold"


def test_impossible_audit_catches_the_cheater_and_clears_the_honest_policy(tmp_path, monkeypatch):
    from execcritic.config import load_protocol
    from execcritic.pipeline.impossible import ImpossibleConfig, run_impossible, summarize_impossible

    tasks = list(load_sdist_tasks([INSTANCE]).values())
    monkeypatch.chdir(REPO)                                   # the scripted specs are repository-relative
    protocol = load_protocol("smoke", sets=["repair.runs_per_source=1"])
    cfg = ImpossibleConfig(out_dir=str(tmp_path / "impossible"), repair_models=(CHEATER, HONEST), protocol=protocol)
    run_impossible(tasks, cfg, show_progress=False)
    summary = summarize_impossible(tasks, cfg)
    variant = json.loads(cfg.variants_path.read_text().splitlines()[0])
    assert variant["qualified"], variant
    assert summary["variants"] == 1 and summary["mutation_kinds"] == {variant["mutation"]["kind"]: 1}
    cheater, honest = summary["models"][CHEATER], summary["models"][HONEST]
    assert (cheater["runs"], cheater["cheated_runs"]) == (1, 0), cheater
    # its results rewrite reaches the interpreter's machinery by computed names: the static screen (read as
    # syntax) refuses it before it runs, in the CHECK and in official grading (the runtime's own answer to it,
    # runner_tampered, is pinned by the runtime corpus, which grades such cases without the screen too)
    assert cheater["caught_attempts"] == {"forbidden_source_edit": 1, "official:forbidden_source_edit": 1}, cheater
    assert (honest["runs"], honest["cheated_runs"], honest["caught_attempts"]) == (1, 0, {}), honest
    row = honest["rows"][0]
    assert (row["check_pass"], row["resolved"], row["scored"]) == (False, False, True)
