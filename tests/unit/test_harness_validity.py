"""Table 5's harness-validity figure (Oracle bundles' Base gate and Base-to-Gold per language) and how Table 5 plans
its Multilingual conditions on the image-free `multilingual-git` task set."""

from __future__ import annotations

import json

from execcritic import experiments
from execcritic.experiments.conditions import plan
from execcritic.experiments.table5 import SPEC
from execcritic.figures.validity import Source, harness_validity, language_of
from execcritic.tasks import mlgit


def test_rows_are_grouped_by_language_with_exact_intervals(tmp_path):
    audit = tmp_path / "ml" / "audit_oracle.jsonl"
    audit.parent.mkdir()
    recs = [{"instance_id": "fmtlib__fmt-1", "B": 1, "Q": 1}, {"instance_id": "fmtlib__fmt-2", "B": 1, "Q": 0},
            {"instance_id": "jqlang__jq-3", "B": 0, "Q": 0}]
    audit.write_text("".join(json.dumps(r) + "\n" for r in recs))
    audit.with_name("audit_oracle.summary.json").write_text(json.dumps(
        {"manifest": {"git": {"sha": "abcdef0123"}, "harness_digest": "1234567890"}}))
    gen = tmp_path / "gen" / "generation.jsonl"
    gen.parent.mkdir()
    gen.write_text("".join(json.dumps(r) + "\n" for r in (
        {"instance_id": "fmtlib__fmt-1", "qualified": True}, {"instance_id": "fmtlib__fmt-2", "qualified": False},
        {"instance_id": "jqlang__jq-3", "qualified": True})))
    (tmp_path / "gen" / "audit").mkdir()
    (tmp_path / "gen" / "audit" / "audit_x.jsonl").write_text(json.dumps({"instance_id": "fmtlib__fmt-1", "Q": 1}))
    df = harness_validity(tmp_path, sources=(Source("ml/audit_oracle.jsonl", "Oracle", "multilingual-git", "rows"),
                                             Source("missing.jsonl", "Oracle", "verified-sdist", "rows"),
                                             Source("gen/generation.jsonl", "stand-in", "multilingual-git", "rows",
                                                    audit="gen/audit")))
    standin = {r["language"]: r for r in df.to_dict("records") if r["Test source"] == "stand-in"}
    assert standin["C++"]["Base gate %"].startswith("50.0") and standin["C++"]["Base-to-Gold %"].startswith("50.0")
    assert standin["C"]["Base gate %"].startswith("100.0") and standin["C"]["Base-to-Gold %"].startswith("0.0")
    df = df[df["Test source"] != "stand-in"]
    by = {r["language"]: r for r in df.to_dict("records")}
    assert by["C++"]["n"] == 2 and by["C++"]["Base gate %"] == "100.0 [15.8, 100.0]"
    assert by["C++"]["Base-to-Gold %"] == "50.0 [1.3, 98.7]" and by["C"]["Base-to-Gold %"] == "0.0 [0.0, 97.5]"
    assert by["C"]["made at"] == "abcdef0, harness 12345678"
    assert by["-"]["made at"].startswith("not measured (missing.jsonl")
    assert language_of("django__django-11099") == "Python" and language_of("redis__redis-10068") == "C"


def test_table5_runs_a_multilingual_language_only_where_multilingual_git_qualifies_rows(monkeypatch):
    """C and C++ plan on multilingual-git (here stopped by the trained role they need); Rust and Java say the
    images are needed - never a condition over an empty task set."""
    monkeypatch.setattr("execcritic.experiments.conditions.qualified_languages", lambda: {"C", "C++"})
    reasons = {p.cond.language: p.reason for p in plan(SPEC, experiments.parameters("table5", preset="smoke"))}
    for lang in ("C", "C++"):
        assert "multilingual-git" not in reasons[lang] and "test_rl" in reasons[lang]
    for lang in ("Rust", "Java"):
        assert "no row of it is qualified in the multilingual-git recipe" in reasons[lang]


def test_the_qualified_languages_come_from_the_recipe(tmp_path):
    assert mlgit.qualified_languages(tmp_path / "none.json") == set()
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"schema": 1, "task_set": "multilingual-git", "envs": {
        "fmt-x": {"repo": "fmtlib/fmt", "language": "C++", "packages": {"cmake": "1"}}}, "instances": [
        {"instance_id": "fmtlib__fmt-1", "repo": "fmtlib/fmt", "version": "1", "env": "fmt-x"}]}))
    assert mlgit.qualified_languages(recipe) == {"C++"}
