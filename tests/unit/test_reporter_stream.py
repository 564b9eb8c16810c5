"""The harness end of the reporter's channel (pure): only an authenticated, ordered, complete stream from one
process has results; the classifier then trusts the records over the log, and refuses a verdict when the log
or the exit status contradicts them."""

from __future__ import annotations

import json

import pytest

from execcritic.harness.classify import agree, classify
from execcritic.harness.execution import FailureKind
from execcritic.harness.instrument import declared_paths, tree_problem
from execcritic.harness.reporter.stream import mac_of, parse_stream
from execcritic.runners.registry import get_runner
from execcritic.sandbox.base import CommandResult

KEY = b"k" * 32


def stream(records: list[dict], key: bytes = KEY, *, pid: int = 7, cut: bool = False) -> bytes:
    out = b""
    for seq, rec in enumerate(records):
        body = json.dumps({"pid": pid, "seq": seq, **rec}, sort_keys=True).encode()
        out += body + b"\t" + mac_of(key, seq, body).encode() + b"\n"
    return out[:-5] if cut else out


def run(*nodes: tuple[str, str, str], end: bool = True, extra: list[dict] | None = None) -> list[dict]:
    recs = [{"kind": "hello", "python": "3.11"}]
    for node, phase, outcome in nodes:
        recs.append({"kind": "node", "node": node, "phase": phase, "outcome": outcome})
    recs += extra or []
    if end:
        recs.append({"kind": "end"})
    return recs


N = "t.py::test_x"


def test_a_clean_stream_has_results():
    rep = parse_stream(stream(run((N, "setup", "passed"), (N, "call", "failed"), (N, "teardown", "passed"))), KEY)
    assert rep.problem is None and rep.started and rep.ended
    assert rep.status_map() == {N: "FAILED"}


def _replayed(data: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join(lines[:2] + [lines[1]] + lines[2:])      # a genuine record written twice


@pytest.mark.parametrize("mutate", [
    lambda d: d.replace(b'"failed"', b'"passed"'),                            # a record rewritten
    lambda d: stream(run((N, "call", "passed")), key=b"x" * 32),               # written without the key
    _replayed,                                                                 # replayed out of sequence
], ids=["rewritten", "wrong-key", "replayed"])
def test_a_changed_or_foreign_record_is_forged(mutate):
    rep = parse_stream(mutate(stream(run((N, "call", "failed")))), KEY)
    assert rep.problem and rep.problem[0] == "forged" and "authentication" in rep.problem[1]


def test_two_outcomes_for_one_phase_is_forged():
    rep = parse_stream(stream(run((N, "call", "failed"), (N, "call", "passed"))), KEY)
    assert rep.problem[0] == "forged" and "two different outcomes" in rep.problem[1]


def test_records_from_another_process_or_after_the_end_are_forged():
    data = stream(run((N, "call", "failed")))
    lines = data.split(b"\n")
    body = json.dumps({"pid": 8, "seq": 2, "kind": "node", "node": N, "phase": "teardown", "outcome": "passed"},
                      sort_keys=True).encode()
    other = body + b"\t" + mac_of(KEY, 2, body).encode()
    assert parse_stream(b"\n".join(lines[:2] + [other, b""]), KEY).problem[1].startswith("record 2 comes from")
    after = stream(run((N, "call", "failed"), extra=[]) + [{"kind": "node", "node": N, "phase": "teardown",
                                                            "outcome": "passed"}])
    assert "follows the end record" in parse_stream(after, KEY).problem[1]


def test_no_start_is_missing_no_end_is_incomplete_a_cut_record_is_incomplete():
    assert parse_stream(b"", KEY).problem[0] == "missing"
    assert parse_stream(stream(run((N, "call", "passed"), end=False)), KEY).problem[0] == "incomplete"
    assert parse_stream(stream(run((N, "call", "passed")), cut=True), KEY).problem[0] == "incomplete"


def test_node_status_is_the_worst_phase():
    rep = parse_stream(stream(run((N, "setup", "error"), ("b", "call", "passed"), ("b", "subtest", "failed"),
                                  ("c", "call", "xfailed"), ("d", "call", "skipped"))), KEY)
    assert rep.status_map() == {N: "ERROR", "b": "FAILED", "c": "XFAIL", "d": "SKIPPED"}


# ---- the classifier with records ---------------------------------------------------------------------

PYTEST = get_runner("pytest")
NODE = PYTEST.parse_node(N)


def result(log: str, code: int) -> CommandResult:
    return CommandResult(exit_code=code, output=log, timed_out=False, oom_killed=False, duration_s=1.0)


def report(*nodes, extra=None, end=True):
    return parse_stream(stream(run(*nodes, extra=extra, end=end)), KEY)


def test_records_decide_and_the_log_must_agree():
    rep = report((N, "call", "failed"))
    c = classify(PYTEST, [NODE], result(f"FAILED {N} - AssertionError\n", 1), rep)
    assert c.failure_kind is FailureKind.BEHAVIORAL_FAILURE
    forged = classify(PYTEST, [NODE], result(f"PASSED {N}\n", 0), rep)
    assert forged.failure_kind is FailureKind.RESULTS_FORGED and "contradicts" in forged.diagnostic
    filtered = classify(PYTEST, [NODE], result("", 1), rep)
    assert filtered.failure_kind is FailureKind.RESULTS_FORGED


def test_a_pass_in_the_log_without_a_record_is_forged():
    c = classify(PYTEST, [NODE], result(f"PASSED {N}\n", 0), report())
    assert c.failure_kind is FailureKind.RESULTS_FORGED


def test_reporter_problems_and_tampering_come_before_results():
    assert classify(PYTEST, [NODE], result(f"PASSED {N}\n", 0), report((N, "call", "passed"), end=False)
                    ).failure_kind is FailureKind.RESULTS_INCOMPLETE
    tampered = report((N, "call", "passed"), extra=[{"kind": "tamper", "what": "code_swap", "detail": "x"}])
    assert classify(PYTEST, [NODE], result(f"PASSED {N}\n", 0), tampered).failure_kind is FailureKind.RUNNER_TAMPERED
    forced = report((N, "call", "failed"), extra=[{"kind": "session_end", "exitstatus": 1}])
    assert classify(PYTEST, [NODE], result(f"FAILED {N}\n", 0), forced).failure_kind is FailureKind.RESULTS_FORGED


def test_expected_failures_are_neutral():
    xf = PYTEST.parse_node("t.py::test_xf")
    only = classify(PYTEST, [xf], result("XFAIL t.py::test_xf - reason\n", 0), report(("t.py::test_xf", "call",
                                                                                         "xfailed")))
    assert only.failure_kind is FailureKind.EXPECTED_FAILURE_ONLY and "carry no verdict" in only.diagnostic
    both = classify(PYTEST, [NODE, xf], result(f"PASSED {N}\nXFAIL t.py::test_xf - r\n", 0),
                    report((N, "call", "passed"), ("t.py::test_xf", "call", "xfailed")))
    assert both.failure_kind is FailureKind.PASSED and "neutral" in both.diagnostic
    xpass = classify(PYTEST, [NODE, xf], result(f"FAILED {N}\n", 1),
                     report((N, "call", "failed"), ("t.py::test_xf", "call", "xpassed")))
    assert xpass.failure_kind is FailureKind.BEHAVIORAL_FAILURE      # the XPASS line no parser reads agrees


def test_agreement_rules():
    assert agree(PYTEST, "SKIPPED", None) and agree(PYTEST, "XPASS", None) and agree(PYTEST, None, "ERROR")
    assert not agree(PYTEST, "FAILED", "PASSED") and not agree(PYTEST, None, "PASSED")
    django = get_runner("django")
    assert agree(django, "FAILED", "ERROR")          # unittest's ERROR is a body exception: behavioral
    sympy = get_runner("sympy")
    assert sympy.parse_results("test_a f\ntest_b X\ntest_c ok   [OK]\n") == {"test_a": "XFAIL", "test_b": "XPASS",
                                                                           "test_c": "PASSED"}


# ---- tree judging --------------------------------------------------------------------------------------

def test_the_tree_must_be_what_the_patches_declare():
    patch = "diff --git a/pkg/new/mod.py b/pkg/new/mod.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/new/mod.py\n@@ -0,0 +1 @@\n+x = 1\n"
    declared = declared_paths(patch)
    assert declared == {"pkg/new/mod.py"}
    assert tree_problem(["pkg/new", "pkg/new/mod.py"], declared) is None
    assert "changed without being declared: tests/test_x.py" in tree_problem(["pkg/new/mod.py", "tests/test_x.py"],
                                                                             declared)
    assert "declared but unchanged" in tree_problem([], declared)
    assert tree_problem(["pkg/new/mod.py", "pkg/new/mod.py.orig"], declared, backups=True) is None
    assert tree_problem(["pkg/new/mod.py", "pkg/new/mod.py.orig"], declared) is not None


def test_a_second_diff_before_the_first_header_is_refused():
    from execcritic.bundle.gates import source_patch_problems

    hidden = ("Index: tests/test_x.py\n=====\n--- tests/test_x.py\n+++ tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
              "diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1 +1 @@\n-a\n+b\n")
    codes = {p.code for p in source_patch_problems(hidden, repo="o/r")}
    assert "patch.preamble" in codes or "patch.test_edit" in codes
    pre = "Here is my fix:\ndiff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert "patch.preamble" in {p.code for p in source_patch_problems(pre, repo="o/r")}


def test_flaky_nodes_are_nodes_whose_outcome_varies():
    from types import SimpleNamespace as NS

    from execcritic.harness.execution import NodeResult
    from execcritic.pipeline.audit import flaky_nodes

    def side(*outcomes):
        return NS(nodes=[NodeResult(f"n{i}", None, o) for i, o in enumerate(outcomes)])

    runs = [NS(base=side("failed", "failed"), gold=side("passed", "passed")),
            NS(base=side("failed", "failed"), gold=side("passed", "failed"))]
    assert flaky_nodes(runs) == {"n1": "gold: passed, failed"}


def test_a_run_started_ahead_reads_like_a_cold_one_and_a_stale_one_has_no_results():
    """harness/prestart.py: the `ready` record of a run started ahead of time changes nothing; one that had
    imported code of the checkout says which (`stale`) and ends before its end record: never a result."""
    ready = parse_stream(stream(run((N, "call", "passed"), extra=[{"kind": "ready"}])), KEY)
    plain = parse_stream(stream(run((N, "call", "passed"))), KEY)
    assert ready.problem is None and ready.status_map() == plain.status_map() and not ready.stale
    stale = parse_stream(stream(run(end=False, extra=[{"kind": "ready"}, {"kind": "stale",
                                                                          "modules": ["iniconfig"]}])), KEY)
    assert stale.stale == ["iniconfig"] and stale.problem and stale.problem[0] == "incomplete"
    assert not stale.nodes


def test_a_contradiction_in_a_run_with_no_candidate_code_is_not_a_forgery():
    """The official evaluator's refusal of a Base or Gold run: nothing there could forge, so a log that contradicts
    the record names the environment or the harness (`results_disagree`); every other refusal is kept as it is."""
    from execcritic.evaluation.official import trusted_run_refusal
    from execcritic.harness.execution import FailureKind

    kind, why = trusted_run_refusal(FailureKind.RESULTS_FORGED.value, "t::x: the log says PASSED, the record FAILED")
    assert kind == FailureKind.RESULTS_DISAGREE.value and not FailureKind(kind).valid
    assert "not a forgery" in why and why.endswith("the log says PASSED, the record FAILED")
    for other in (FailureKind.RUNNER_TAMPERED, FailureKind.RESULTS_MISSING, FailureKind.RESULTS_INCOMPLETE):
        assert trusted_run_refusal(other.value, "w") == (other.value, "w")
