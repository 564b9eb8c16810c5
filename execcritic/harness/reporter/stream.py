"""Reading the reporter's record stream (pure): authenticate, order, and summarize it.

Each line is `<json>\\t<hmac>`; the HMAC is over `<seq>\\t<json>` under the run's key. A record that does not
verify, a gap or repeat in the sequence, a second process, a record after the end, or two different outcomes
for one phase of one node make the stream *forged*; no start record means the reporter never ran (*missing*);
no end record means the process ended without the interpreter's normal exit (*incomplete*: `os._exit`, a
kill, a crash). Only a stream with none of these problems has results.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

# raw record outcome -> the swebench status vocabulary the runners' results maps use
STATUS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "skipped": "SKIPPED", "xfailed": "XFAIL",
          "xpassed": "XPASS", "not_run": "SKIPPED"}
_RANK = {"ERROR": 5, "FAILED": 4, "XPASS": 3, "XFAIL": 2, "SKIPPED": 1, "PASSED": 0}


@dataclass
class NodeRecord:
    node: str
    key: str                                   # the runner's results-map key (log-style id)
    phases: dict[str, str] = field(default_factory=dict)     # phase -> raw outcome
    exc: dict[str, str] = field(default_factory=dict)        # phase -> exception text
    strict: bool = False
    round: int = 1                             # > 1: a plugin of the env reran the node; the last round counts

    @property
    def status(self) -> str:
        """The node's status in the runner's vocabulary: the worst of its phases (a setup error is an
        ERROR, a failing call FAILED, an expected failure XFAIL ...). A pass needs a recorded call: a node
        whose test function never reported is not run (SKIPPED), whatever its setup and teardown say."""
        worst = "PASSED" if "call" in self.phases else "SKIPPED"
        for phase, outcome in self.phases.items():
            status = STATUS.get(outcome, "ERROR")
            if phase in ("setup", "teardown") and status == "FAILED":
                status = "ERROR"
            if phase == "subtest":
                status = "FAILED"
            if _RANK.get(status, 5) > _RANK.get(worst, 0):
                worst = status
        return worst


@dataclass
class ReporterReport:
    """What the harness-owned channel says about one run."""

    problem: tuple[str, str] | None = None           # (missing|incomplete|forged, why) or None
    started: bool = False
    ended: bool = False
    records: int = 0
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    tampers: list[dict[str, str]] = field(default_factory=list)
    collect_errors: list[dict[str, str]] = field(default_factory=list)
    exitstatus: int | None = None                      # the runner's own session exit status, where it says
    hello: dict[str, Any] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)     # a run started ahead of time had run code of the checkout
                                                       # (these modules, files): it ended before its go was used
    snapshots_ahead: bool | None = None                # a run started ahead: it took the runner's snapshots while
                                                       # it waited (False: released first, it took them as a cold run)

    def status_map(self) -> dict[str, str]:
        """Per-node statuses keyed like the runner's log-parsed results."""
        return {rec.key: rec.status for rec in self.nodes.values()}

    def summary(self) -> dict[str, Any]:
        return {"started": self.started, "ended": self.ended, "records": self.records,
                "problem": list(self.problem) if self.problem else None, "nodes": len(self.nodes),
                "tampers": self.tampers[:20], "collect_errors": self.collect_errors[:20],
                "exitstatus": self.exitstatus, "python": self.hello.get("python"),
                "snapshots_ahead": self.snapshots_ahead}


def mac_of(key: bytes, seq: int, body: bytes) -> str:
    m = hmac.new(key, digestmod=hashlib.sha256)
    m.update(b"%d\t" % seq)
    m.update(body)
    return m.hexdigest()


def parse_stream(data: bytes, key: bytes, *, overflow: bool = False) -> ReporterReport:
    rep = ReporterReport()

    def forged(why: str) -> ReporterReport:
        rep.problem = ("forged", why)
        return rep

    if overflow:
        return forged("the reporter stream exceeded its size limit")
    lines = data.split(b"\n")
    tail = lines.pop()                       # after the last newline: empty unless a record was cut
    pid = None
    for seq, line in enumerate(lines):
        body, sep, mac = line.rpartition(b"\t")
        if not sep or not hmac.compare_digest(mac.decode("ascii", "replace"), mac_of(key, seq, body)):
            return forged(f"record {seq} does not carry the run's authentication (written by something other "
                          "than the harness's reporter, or out of sequence)")
        try:
            rec = json.loads(body)
        except ValueError:
            return forged(f"record {seq} is not JSON")
        if rec.get("seq") != seq:
            return forged(f"record {seq} claims sequence number {rec.get('seq')}")
        if pid is None:
            pid = rec.get("pid")
        elif rec.get("pid") != pid:
            return forged(f"record {seq} comes from process {rec.get('pid')}, not {pid}")
        if rep.ended:
            return forged(f"record {seq} ({rec.get('kind')}) follows the end record")
        rep.records += 1
        kind = rec.get("kind")
        if seq == 0:
            if kind != "hello":
                return forged("the stream does not begin with the reporter's start record")
            rep.started, rep.hello = True, rec
        elif kind == "node":
            node = str(rec.get("node"))
            nr = rep.nodes.setdefault(node, NodeRecord(node, str(rec.get("key") or rec.get("desc") or node)))
            phase, outcome = str(rec.get("phase")), str(rec.get("outcome"))
            again = rec.get("round", 1)
            if not isinstance(again, int) or again < nr.round:
                return forged(f"{node}: a record of round {again!r} after round {nr.round}")
            if again > nr.round:               # a rerun: what its earlier round recorded is not the outcome
                nr.round, nr.phases, nr.exc = again, {}, {}
            if phase in nr.phases and phase != "subtest" and nr.phases[phase] != outcome:
                return forged(f"{node}: two different outcomes for its {phase} ({nr.phases[phase]}, {outcome})")
            if phase == "subtest" and outcome != "failed":
                continue
            nr.phases[phase] = outcome
            if rec.get("exc"):
                nr.exc[phase] = str(rec["exc"])
            nr.strict = nr.strict or bool(rec.get("strict"))
        elif kind == "tamper":
            rep.tampers.append({"what": str(rec.get("what")), "detail": str(rec.get("detail"))})
        elif kind == "collect_error":
            rep.collect_errors.append({"node": str(rec.get("node")), "exc": str(rec.get("exc"))})
        elif kind == "session_end":
            rep.exitstatus = rec.get("exitstatus")
        elif kind == "end":
            rep.ended = True
        elif kind == "ready":
            rep.snapshots_ahead = bool(rec.get("snapshots"))
        elif kind == "stale":
            rep.stale = [str(m) for m in rec.get("modules") or ()] or ["?"]
        else:
            return forged(f"record {seq} has an unknown kind {kind!r}")
    if not rep.started:
        if tail:
            return forged("the stream holds no complete record")
        rep.problem = ("missing", "the harness's reporter never reported: the run's Python process did not start "
                                  "it (the command is not a Python test run the harness instruments, the "
                                  "interpreter ran in isolated mode, or it could not connect)")
        return rep
    if tail:
        rep.problem = ("incomplete", "the last record was cut off: the process died while writing it")
        return rep
    if not rep.ended:
        rep.problem = ("incomplete", "the process ended without its normal interpreter exit (os._exit, a signal, "
                                     "a crash): the reporter wrote no end record")
    return rep
