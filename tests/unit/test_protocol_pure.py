"""Pure parts of the protocol: config defaults, prompts, the feedback envelope, the classifier's
invariants, append-only records and the revision-turn statistics."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

from tests.paths import PAPER_TEXT

from execcritic.prompts import prompt_digests, prompts
from execcritic.bundle.model import TestBundle
from execcritic.config import PAPER, ProtocolConfig
from execcritic.harness.execution import Execution, FailureKind, NodeResult, Verdict
from execcritic.harness.feedback import render_envelope
from execcritic.pipeline.records import RecordStore
from execcritic.pipeline.stats import revision_turn_stats



def test_paper_defaults():
    assert (PAPER.test_agent.max_submissions, PAPER.test_agent.max_turns) == (5, 60)
    assert (PAPER.repair.round0_turns, PAPER.repair.revision_rounds, PAPER.repair.turns_per_round) == (200, 5, 40)
    assert (PAPER.repair.feedback_chars, PAPER.repair.apply_diagnostics_chars) == (6000, 12000)
    assert PAPER.grpo.clip_low == 0.2 and PAPER.grpo.clip_high == 0.28 and not PAPER.grpo.std_normalization
    assert PAPER.deviations() == {}
    changed = dataclasses.replace(PAPER, repair=dataclasses.replace(PAPER.repair, turns_per_round=30))
    assert changed.deviations() == {"repair.turns_per_round": (40, 30)}
    assert changed.digest() != PAPER.digest()


def _words(text: str) -> list[str]:
    text = text.replace("\u2212", "-").replace("\u2018", "`").replace("\u2019", "'")
    return re.findall(r"[A-Za-z0-9_]+", text)


@pytest.mark.skipif(not PAPER_TEXT.exists(), reason="the paper text is not next to this checkout")
@pytest.mark.parametrize("name,key,listing", [
    ("test_agent", "system_template", "Listing 1"), ("test_agent", "instance_template", "Listing 2"),
    ("repair", "repair_initial_template", "Listing 6"), ("repair", "repair_followup_template", "Listing 8"),
    ("repair", "pass_terminal_notice", "Listing 9"), ("repair", "exhausted_terminal_notice", "Listing 10"),
    ("repair", "unchanged_candidate_followup", "Listing 11"), ("repair", "apply_failure_recovery_template", "Listing 12"),
])
def test_prompts_are_the_papers_words(name, key, listing):
    """Every word of each template appears, in order, in the paper's listing (verbatim transcription)."""
    text = " " + " ".join(_words(PAPER_TEXT.read_text())) + " "
    ours = _words(prompts(name).raw(key))
    # our words must be one contiguous run of the paper's words, or two when the listing crosses a
    # page break (the PDF text puts a page header and "(continued)" in the middle of Listing 2)
    pieces, rest = 0, ours
    while rest:
        k = len(rest)
        while k and " " + " ".join(rest[:k]) + " " not in text:
            k -= 1
        assert k, f"{name}.{key}: {' '.join(rest[:12])!r}... is not in the paper ({listing})"
        pieces, rest = pieces + 1, rest[k:]
    assert pieces <= 2, f"{name}.{key} is not a verbatim transcription of {listing} ({pieces} pieces)"


def test_prompt_digests_are_stable():
    d = prompt_digests()
    assert set(d) == {"test_agent", "repair"} and all(len(v) == 16 for v in d.values())


def _execution(kind: FailureKind, tail: str, names: int = 1) -> Execution:
    valid = kind.valid
    verdict = (Verdict.PASS if kind is FailureKind.PASSED else Verdict.FAIL) if valid else None
    nodes = [NodeResult(f"tests/test_x.py::test_{i}" + "x" * 300, "FAILED", "failed") for i in range(names)]
    return Execution("i", valid, verdict, kind, "d", nodes=nodes, exit_code=1, command="python -m pytest " + "y" * 2000,
                     output_tail=tail)


@pytest.mark.parametrize("tail_len", [0, 10, 5000, 50_000])
@pytest.mark.parametrize("names", [1, 50])
def test_envelope_is_capped_and_keeps_its_header(tail_len, names):
    bundle = TestBundle("diff --git a/tests/test_x.py b/tests/test_x.py\n+++ b/tests/test_x.py\n", "pytest " + "z" * 3000,
                        "{}")
    tail = "".join(chr(97 + i % 26) for i in range(tail_len)) + "END"
    env = render_envelope(_execution(FailureKind.BEHAVIORAL_FAILURE, tail, names), bundle)
    assert len(env) <= 6000
    for field in ("test_execution_contract:", "generated_test_gate:", "gate_status: hard_fail",
                  "gate_reason: behavioral_failure", "n_tests:", "failed_test_names:", "per_test:",
                  "<raw_test_output_tail>", "</raw_test_output_tail>"):
        assert field in env
    assert env.rstrip().endswith("</raw_test_output_tail>") and "END" in env  # the tail keeps its end


def test_envelope_marks_operational_checks_inconclusive():
    ex = Execution("i", False, None, FailureKind.TIMEOUT, "timed out", timed_out=True)
    env = render_envelope(ex, TestBundle("", "pytest a.py::t", "{}"))
    assert "gate_status: inconclusive" in env and '"timeout_detected": true' in env and "passed: False" in env


def test_execution_invariant():
    with pytest.raises(ValueError):
        Execution("i", False, Verdict.FAIL, FailureKind.TIMEOUT, "")
    with pytest.raises(ValueError):
        Execution("i", True, Verdict.PASS, FailureKind.BEHAVIORAL_FAILURE, "")
    with pytest.raises(ValueError):
        Execution("i", True, None, FailureKind.PASSED, "")
    ex = Execution("i", True, Verdict.FAIL, FailureKind.BEHAVIORAL_FAILURE, "ok", nodes=[NodeResult("n", "FAILED", "failed")])
    assert Execution.from_dict(json.loads(json.dumps(ex.to_dict()))) == ex


def test_records_survive_a_torn_tail_and_never_duplicate(tmp_path):
    store = RecordStore(tmp_path / "r.jsonl")
    assert store.append({"key": "a", "v": 1}) and store.append({"key": "b", "v": 2})
    assert not store.append({"key": "a", "v": 3})
    with open(store.path, "ab") as fh:  # what a kill -9 mid-write leaves
        fh.write(b'{"key": "c", "v"')
    again = RecordStore(store.path)
    assert again.torn_lines == 1 and again.keys() == {"a", "b"}
    assert again.append({"key": "c", "v": 4})
    assert [r["key"] for r in RecordStore(store.path).load()] == ["a", "b", "c"]
    assert store.path.read_bytes().endswith(b"\n") and os.path.getsize(store.path) > 0


def test_revision_turn_statistics():
    recs = [{"entered_repair": True, "revision_turns": t} for t in (1, 3, 5, 8, 10, 11, 12, 20, 34, 40)]
    recs.append({"entered_repair": False, "revision_turns": 0})
    s = revision_turn_stats(recs)
    assert s["n"] == 10 and s["median"] == 10.5 and s["mean"] == 14.4
    assert s["share_le_5_pct"] == 30.0 and s["share_le_10_pct"] == 50.0
    assert s["p75"] == 18.0 and s["p90"] == 34.6
    assert revision_turn_stats([]) == {"n": 0}


def test_protocol_config_round_trips():
    assert ProtocolConfig().to_dict() == PAPER.to_dict()


def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_git_state_counts_code_changes_not_result_rewrites(tmp_path):
    from execcritic.results.manifest import git_state

    def git(*args):
        _git(tmp_path, *args)

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "c")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "results" / "r.json").unlink()          # a run rewriting its own output
    state = git_state(tmp_path)
    assert state["dirty"] is False and state["changed_paths"] == [] and state["results_paths_changed"] == 1
    (tmp_path / "code.py").write_text("x = 2\n")
    state = git_state(tmp_path)
    assert state["dirty"] is True and state["changed_paths"] == ["code.py"]      # dirty says which paths


def test_a_manifest_names_the_code_its_command_started_with_and_says_when_head_moved(tmp_path, monkeypatch):
    """A long run outlived a merge and its manifests named the merge's SHA: the start state is what ran."""
    from execcritic.results import manifest

    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "start")
    monkeypatch.setattr(manifest, "_AT_START", None)
    assert "changed_during_run" not in manifest.code_state(tmp_path)       # nothing noted: the state now
    manifest.note_start(tmp_path)
    started = manifest.git_state(tmp_path)["sha"]
    assert manifest.code_state(tmp_path)["git"]["sha"] == started
    assert "changed_during_run" not in manifest.code_state(tmp_path)
    (tmp_path / "code.py").write_text("x = 2\n")
    _git(tmp_path, "commit", "-qam", "merged while the run ran")
    state = manifest.code_state(tmp_path)
    assert state["git"]["sha"] == started
    moved = state["changed_during_run"]["git"]
    assert moved["sha"] != started and moved["sha"] == manifest.git_state(tmp_path)["sha"]


def test_the_cli_notes_the_code_state_before_its_command_runs(monkeypatch):
    from execcritic.cli import main
    from execcritic.results import manifest

    monkeypatch.setattr(manifest, "_AT_START", None)
    with pytest.raises(SystemExit) as done:
        main(["config", "show", "--json"])
    assert done.value.code == 0
    assert manifest._AT_START is not None and manifest._AT_START["git"]["sha"]
