"""execcritic's harness-owned results reporter (runs inside the sandbox, before the code under test).

Why: a verdict is a reward, and code under test can print a runner's result lines, rewrite the runner's
report objects, or exit early with status 0. The harness therefore does not take the verdict from text the
process prints. This reporter records each test node's outcome from the raw call (the exception the test
function raised, or none), per phase, and streams each record out of the process as it is written:

- over a unix socket the harness listens on outside the sandbox, connected once at interpreter start (the
  path is unlinked as soon as this process connects: nothing else can reopen it); the socket is closed in
  forked children and not inherited across exec;
- each record carries a sequence number and an HMAC under a per-run key that arrives over the socket and
  lives only inside the HMAC object (never in the environment, a file or a global);
- an end record, written at interpreter exit, carries what the reporter saw; the harness reads the stream
  only after the whole process tree is gone and checks it against the exit status and the runner's log.

It also watches for tampering for the whole run (an audit hook, and snapshots of the runner's modules, of
builtins and of the test modules checked around every test phase), and verifies that the function about to
run as a bound test is the one the test file defines (its code compared with a compile of the file made
here). Anything it sees becomes a `tamper` record; the harness then refuses a verdict.

Python 3.6+ (audit hooks from 3.8), standard library only.
"""
import atexit
import hashlib
import hmac
import json
import os
import socket
import sys
import threading
import time

_STATE = {}          # filled once by boot(); read by the runner hooks


class Reporter:
    """The armed reporter of this process. Created once by boot(); the runner hooks call its methods."""

    def __init__(self, sock, mac, config):
        self._sock = sock
        self._mac = mac
        self._pid = os.getpid()
        self._seq = 0
        self._lock = threading.Lock()
        self._dead = False
        self.config = config                               # from the harness: runner, bound nodes, ...
        self.runner = config.get("runner", "")
        self.bound = set(config.get("bound", ()))
        self.changed = set(config.get("changed", ()))
        self.workdir = config.get("workdir", "/testbed")
        self.watch_names = tuple(config.get("watch", ()))  # module name prefixes of the runner
        self.seen = {}                                      # (node, phase) -> outcome
        self.failed_any = False
        self.tampered = []
        self.guard = None

    # ---- the stream ----------------------------------------------------------------------------------
    def emit(self, kind, fields):
        """Write one authenticated record now (never buffered). Refused in a forked child."""
        if self._dead or os.getpid() != self._pid:
            return False
        with self._lock:
            rec = dict(fields)
            rec["kind"] = kind
            rec["seq"] = self._seq
            rec["pid"] = self._pid
            body = json.dumps(rec, sort_keys=True, default=repr)
            m = self._mac.copy()
            m.update(("%d\t" % self._seq).encode())
            m.update(body.encode("utf-8", "replace"))
            line = (body + "\t" + m.hexdigest() + "\n").encode("utf-8", "replace")
            try:
                self._sock.sendall(line)
            except OSError:
                self._dead = True
                return False
            self._seq += 1
        return True

    def node(self, node, phase, outcome, exc=None, **extra):
        """One phase of one test node, from the raw outcome the hook observed."""
        key = (node, phase)
        if key in self.seen and phase == "call":
            self.tamper("double_call", "%s was called twice in one run" % node)
        self.seen[key] = outcome
        if outcome in ("failed", "error"):
            self.failed_any = True
        fields = {"node": node, "phase": phase, "outcome": outcome, "t": round(time.time(), 3)}
        if exc is not None:
            fields["exc"] = _describe(exc)
        fields.update(extra)
        self.emit("node", fields)

    def tamper(self, what, detail):
        self.tampered.append((what, detail))
        self.emit("tamper", {"what": what, "detail": str(detail)[:500]})

    def check(self, where):
        """A check point: anything watched that changed since the snapshot is tampering."""
        if self.guard is not None:
            for what, detail in self.guard.changes():
                self.tamper(what, "%s (seen at %s)" % (detail, where))

    def close_in_child(self):
        """After fork, in the child: drop the socket so nothing the child does reaches the stream."""
        self._dead = True
        try:
            self._sock.close()
        except OSError:
            pass

    def end(self):
        # pytest undoes its own monkeypatches of its classes at unconfigure (legacypath): its final check
        # runs at the end of the session instead (pytest_plugin.pytest_sessionfinish)
        if self.runner != "pytest":
            self.check("exit")
        self.emit("end", {"nodes": len({n for n, _ in self.seen}), "failed_any": self.failed_any,
                          "tampered": len(self.tampered)})
        self._dead = True
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _describe(exc):
    name = type(exc).__name__
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    return (name + (": " + text.splitlines()[0] if text.strip() else ""))[:300]


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise OSError("the harness closed the reporter socket during the handshake")
        got += k
    return buf


def _recv_line(sock, limit=1 << 22):
    out = bytearray()
    while not out.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise OSError("the harness closed the reporter socket during the handshake")
        out += chunk
        if len(out) > limit:
            raise OSError("handshake too long")
    return bytes(out)


def boot(path):
    """Connect, take the key, arm the guards and the runner hooks. Called from sitecustomize."""
    if _STATE:
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    key = _recv_exact(sock, 32)
    mac = hmac.new(bytes(key), digestmod=hashlib.sha256)
    for i in range(len(key)):          # the key lives on only inside the HMAC state
        key[i] = 0
    del key
    config = json.loads(_recv_line(sock).decode("utf-8"))
    rep = Reporter(sock, mac, config)
    _STATE["reporter"] = rep
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=rep.close_in_child)
    rep.emit("hello", {"python": "%d.%d.%d" % sys.version_info[:3], "runner": rep.runner,
                       "argv": list(getattr(sys, "argv", []))[:50], "executable": sys.executable})
    from execcritic_reporter import guard

    rep.guard = guard.Guard(rep)
    rep.guard.install_audit_hook()
    atexit.register(rep.end)          # registered first: runs after every handler the code under test adds
    if rep.runner == "pytest":
        # pytest loads the plugin by name while it configures (before conftest files and test modules)
        names = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p.strip()]
        os.environ["PYTEST_PLUGINS"] = ",".join(["execcritic_reporter.pytest_plugin"] + names)
    elif rep.runner in ("unittest", "django"):
        from execcritic_reporter import unittest_hook

        unittest_hook.install(rep)
    elif rep.runner == "sympy":
        from execcritic_reporter import sympy_hook

        sympy_hook.install(rep)
    else:
        rep.tamper("unsupported_runner", "no reporter hook for runner %r" % rep.runner)


def reporter():
    """The armed reporter of this process, or None (not the run's first Python process)."""
    return _STATE.get("reporter")
