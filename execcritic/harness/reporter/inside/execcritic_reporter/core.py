"""The reporter's core: everything that decides what the harness reads lives in the closure of one audit hook.

Python (3.8+) offers no way to list, reach or remove an audit hook, so the socket, the per-run MAC state, the
sequence number, the registered test functions and the guard's snapshots are out of reach of the code under
test: no module attribute, no object graph that `gc` (itself audited) could walk, leads to them. The rest of
the reporter talks to the core with `sys.audit(EVENT, op, ...)`, written into the sealed code of the
reporter's own functions as a constant (see `seal` in __init__), and the core accepts a record only when the
calling frame runs one of those sealed code objects: anyone may raise the event, only the reporter's own code
is heard. A test's call outcome is computed here, from the exception object the recording proxy caught, for
a test function registered (and verified against a compile of its file) beforehand.

Nothing on the record path looks a name up in a namespace the code under test can change: what it needs is
bound once at creation (builtins, the socket's `sendall`, the hash constructor, the clock). The reporter's
own modules (and their classes), whose functions the core and the guard call, are compared with their state
at boot at every check.

On Python 3.6/3.7 (no audit hooks) the same core is called directly; it is then reachable through the
reporter's code objects (docs/failure_kinds.md, "what is not protected").
"""
import sys


MAX_DEPTH = 12       # nested hook invocations one thread may reach (see `dispatch`)


def make(sock, key, config, guard_factory, watched_modules, refusals=()):
    """The core for one run: returns `dispatch(event, args)` (also the audit hook). `key` (a bytearray) is
    wiped here; it survives only inside the two hash states (and a forked child gets fresh, useless ones).
    `refusals`: the guard's exception types that stop the audited operation itself (they pass through)."""
    import _thread
    import gc
    import hashlib
    import os
    import time
    from json import encoder as _json_encoder

    # ---- bound now, never looked up again ----------------------------------------------------------------
    _len, _id, _type, _isinstance, _repr, _str, _int, _float, _bool = (len, id, type, isinstance, repr, str, int,
                                                                       float, bool)
    _dict, _list, _tuple, _sorted, _getattr, _hasattr = dict, list, tuple, sorted, getattr, hasattr
    _BaseException, _Exception, _KeyboardInterrupt, _SystemExit = BaseException, Exception, KeyboardInterrupt, SystemExit
    _inf, _ValueError, _OSError = _float("inf"), ValueError, OSError
    _WARN_REGISTRY = "__warningregistry__"
    _enc_str = _json_encoder.encode_basestring_ascii
    _sha256 = hashlib.sha256
    _send = sock.sendall
    _getpid = os.getpid
    _now = time.time
    _ident = _thread.get_ident
    _getframe = sys._getframe
    _gc_enabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable
    _refusals = tuple(refusals)
    _lock = _thread.allocate_lock()

    block = bytearray(64)
    block[:_len(key)] = key
    inner, outer = _sha256(), _sha256()
    inner.update(bytes(b ^ 0x36 for b in block))
    outer.update(bytes(b ^ 0x5C for b in block))
    for i in range(_len(key)):
        key[i] = 0
    for i in range(64):
        block[i] = 0

    runner = config.get("runner", "")
    state = {"seq": 0, "dead": False, "booting": True, "failed_any": False, "ended": False, "next_token": 1}
    pid = _getpid()
    sealed = set()            # ids of the reporter's own code objects (kept alive in `sealed_refs`)
    sealed_refs = []
    seen = {}                 # (node, phase) -> outcome, of the node's current round
    rounds = {}               # node -> its round (2, 3, ... when a plugin of the env reruns it: pytest-rerunfailures)
    tokens = {}               # token -> [node, fn, xfail, strict, raises, label, used, extra record fields]
    tampered = []
    depth = {}                # thread ident -> hook depth (events raised while the hook runs)
    own = {}                  # thread ident -> 1 while the reporter itself calls sys._getframe (`frame_at`)

    def frame_at(skip):
        """The frame `skip` levels above the caller - for the reporter's own code. Its `sys._getframe` event is
        the one event the hook lets pass unjudged: marked on this thread for exactly that C call, with automatic
        garbage collection off (a collection could run a finalizer of the tested code in between)."""
        me = _ident()
        was = _gc_enabled()
        if was:
            _gc_disable()
        own[me] = 1
        try:
            return _getframe(skip + 1)
        except _ValueError:
            return None
        finally:
            own[me] = 0
            if was:
                _gc_enable()

    guard = guard_factory(config, tamper=lambda what, detail: tamper(what, detail), frame_at=frame_at)
    heard = frozenset(guard.EVENTS) | {"execcritic.reporter"}

    # ---- integrity of what the core's code depends on ---------------------------------------------------
    baseline = []
    modules = _list(watched_modules)

    def take_baseline():
        del baseline[:]
        for mod in modules:
            ns = vars(mod)
            baseline.append((mod.__name__, ns, _dict(ns)))
            for value in _list(ns.values()):
                if _isinstance(value, _type) and _getattr(value, "__module__", None) == mod.__name__:
                    baseline.append((mod.__name__ + "." + value.__qualname__, vars(value), _dict(vars(value))))

    take_baseline()

    def integrity():
        for where, ns, before in baseline:
            n = _len(ns)
            # the warnings machinery files a plain dict under this one name in the globals of whatever frame a
            # warning is attributed to - a reporter frame too (stacklevel, a ResourceWarning at collection): not
            # tampering, and nothing here reads it
            if n != _len(before) and _WARN_REGISTRY not in before and _type(ns.get(_WARN_REGISTRY)) is _dict:
                n -= 1
            if n != _len(before):
                added = [k for k in ns if k not in before][:3]
                return "%s gained or lost names (%s)" % (where, ", ".join(_str(k) for k in added) or "deleted")
            for k, v in before.items():
                if ns.get(k, ns) is not v:
                    return "%s.%s was rebound" % (where, k)
        return None

    # ---- the stream ---------------------------------------------------------------------------------------
    def encode(value):
        t = _type(value)
        if value is None:
            return "null"
        if t is _bool:
            return "true" if value else "false"
        if t is _int:
            return _int.__repr__(value)
        if t is _float:
            return _float.__repr__(value) if value == value and value not in (_inf, -_inf) else "null"
        if t is _str:
            return _enc_str(value)
        if t is _dict:
            return "{" + ", ".join(_enc_str(_str(k)) + ": " + encode(v) for k, v in
                                   _sorted(value.items(), key=lambda kv: _str(kv[0]))) + "}"
        if t is _list or t is _tuple:
            return "[" + ", ".join(encode(v) for v in value) + "]"
        return _enc_str(_type.__repr__(t) if not _isinstance(value, _str) else _str.__str__(value))

    def emit(kind, fields):
        if state["dead"] or state["ended"] or _getpid() != pid:
            return False
        with _lock:
            rec = _dict(fields)
            rec["kind"] = kind
            rec["seq"] = state["seq"]
            rec["pid"] = pid
            body = encode(rec).encode("utf-8", "replace")
            m = inner.copy()
            m.update(("%d\t" % state["seq"]).encode())
            m.update(body)
            o = outer.copy()
            o.update(m.digest())
            try:
                _send(body + b"\t" + o.hexdigest().encode() + b"\n")
            except _OSError:
                state["dead"] = True
                return False
            state["seq"] += 1
        return True

    def forget_key():
        """A forked child holds a copy of everything, the hash states too: it gets fresh ones (the old ones are
        freed - OpenSSL clears a digest context it frees - and nothing of the child's reaches them)."""
        nonlocal inner, outer
        inner, outer = _sha256(), _sha256()

    def tamper(what, detail):
        tampered.append((what, detail))
        emit("tamper", {"what": _str(what), "detail": _str(detail)[:500]})

    def node(name, phase, outcome, exc_text=None, extra=None):
        key = (name, phase)
        if key in seen and phase == "call":
            tamper("double_call", "%s was called twice in one run" % name)
        seen[key] = outcome
        if outcome in ("failed", "error"):
            state["failed_any"] = True
        fields = {"node": name, "phase": phase, "outcome": outcome, "t": round(_now(), 3)}
        if name in rounds:
            fields["round"] = rounds[name]
        if exc_text:
            fields["exc"] = exc_text
        if extra:
            for k, v in extra.items():
                fields[k] = v
        emit("node", fields)

    def describe(exc):
        name = _type(exc).__name__
        try:
            text = _BaseException.__str__(exc)
        except _Exception:
            text = "<unprintable>"
        return (name + (": " + text.splitlines()[0] if text.strip() else ""))[:300]

    def check(where):
        problem = integrity()
        if problem:
            guard.report_once(("integrity", problem), "reporter_tampered", "%s (seen at %s)" % (problem, where))
        for what, detail in guard.changes():
            tamper(what, "%s (seen at %s)" % (detail, where))

    # ---- outcomes of a test's own call ------------------------------------------------------------------------
    def raised_by_candidate(exc):
        """Was a skip/xfail exception raised from code the candidate changed (not the test's own)?"""
        tb = _getattr(exc, "__traceback__", None)
        while tb is not None:
            code = tb.tb_frame.f_code
            if guard.changed_file(code.co_filename):
                return True
            tb = tb.tb_next
        return False

    def call_outcome(entry, exc, raised, subtests_failed):
        xfail, strict, raises = entry[2], entry[3], entry[4]
        if raised and exc is None:
            return "failed", "the recorded exception was removed before it reached the reporter"
        if not raised:
            if subtests_failed:
                return ("xfailed" if xfail else "failed"), None
            if xfail:
                return ("failed" if strict else "xpassed"), None
            return "passed", None
        names = {k.__name__ for k in _type(exc).__mro__}
        if names & {"Skipped", "SkipTest"}:
            return "skipped", None                      # not run: no verdict, whoever raised it
        if names & {"XFailed", "XFail"}:
            if raised_by_candidate(exc):                # neutral would let one node drop out of the verdict
                return "failed", "the candidate's code raised an expected-failure exception"
            return "xfailed", None
        if "XPass" in names:
            return "xpassed", None
        if _isinstance(exc, _KeyboardInterrupt) or "Exit" in names:
            return "error", None                        # (pytest's `Exit`: the session stops)
        if _isinstance(exc, _SystemExit):
            # pytest's call phase catches SystemExit as any exception: the test FAILED (argparse's exit in
            # pylint 6386); unittest reports it as an ERROR
            return ("failed" if runner == "pytest" else "error"), None
        if xfail and (raises is None or _isinstance(exc, raises)):
            return "xfailed", None
        return "failed", None

    # ---- dispatch ---------------------------------------------------------------------------------------------
    def on_event(op, args, caller, level):
        if level:
            # a reporter operation raised while the hook runs: code of the tested process is running inside it
            # (a finalizer, a signal handler). Only a tamper report is heard; a signal handler is refused there.
            if op == "tamper":
                tamper(_str(args[0])[:100], _str(args[1])[:500])
            elif op == "signal":
                tamper("signal_handler", "a signal handler was installed from inside the reporter's audit hook")
                raise _refusals[-1]("no signal handler from inside the reporter's hook")
            return
        if op == "seal":
            if state["booting"]:
                for code in args[0]:
                    sealed.add(_id(code))
                    sealed_refs.append(code)
            return
        if op == "tamper":                   # anyone may make the run invalid
            tamper(_str(args[0])[:100], _str(args[1])[:500])
            return
        if op == "check":
            check(_str(args[0])[:300])
            return
        if op == "ffi":                      # the inert ctypes was used: tampering when the candidate's code asked
            found = guard.candidate_on_stack(caller)
            if found:
                tamper("native_code", "ctypes was used from %s: there is no foreign-function interface here" % found)
            return
        if caller is None or _id(caller.f_code) not in sealed:
            tamper("forged_event", "%r raised outside the reporter's own code" % (op,))
            return
        if op == "boot_done":
            state["booting"] = False
            guard.trust_boot_code()
        elif op == "integrity":               # a reporter module imported while booting joins the baseline
            if state["booting"]:
                modules.append(args[0])
                take_baseline()
        elif op == "signal":
            if guard.signal_handler(args[0], args[1]):      # (named first: a refusal never leaves the run valid)
                raise _refusals[-1]("a signal handler from the code under test is not installed")
        elif op == "register":
            box, name, fn, xfail, strict, raises, label, test_name, path, compiler, extra = args
            problem = guard.check_test_callable(fn, test_name, path, compiler)
            if problem:
                tamper("test_code", "%s: %s" % (name, problem))
            token = state["next_token"]
            state["next_token"] += 1
            tokens[token] = [_str(name), fn, _bool(xfail), _bool(strict), raises, label, False,
                             _dict(extra) if _type(extra) is _dict else {}]
            box.append(token)
        elif op in ("call_raised", "call_returned"):
            token, fn, exc, extra = args
            entry = tokens.get(token)
            if entry is None or entry[1] is not fn:
                tamper("call_forged", "a call record for an unregistered test function (token %r)" % (token,))
                return
            check("call " + entry[0])
            if caller is not None and caller.f_trace is not None:
                # a trace function may move a frame's next line: past the test call to this record
                tamper("trace_hook", "%s: the recording proxy's frame was traced when it recorded the call"
                       % entry[0])
            if entry[6]:
                tamper("double_call", "%s was called twice in one run" % entry[0])
            entry[6] = True
            raised = op == "call_raised"
            subs = extra.get("subtests_failed") if _type(extra) is _dict else None
            subtests = _len(subs) if _type(subs) is _list else 0
            outcome, why = call_outcome(entry, exc if raised else None, raised, subtests)
            if not raised and (_hasattr(exc, "__await__") or _hasattr(exc, "__aiter__")):
                outcome, why = "not_run", None          # `exc` is the call's result here: a coroutine
            if why:
                tamper("call_forged", "%s: %s" % (entry[0], why))
            fields = _dict(entry[7])
            fields.update({"xfail": entry[2], "strict": entry[3], "via": entry[5]})
            if subtests:
                fields["subtests_failed"] = subtests
            if outcome == "not_run":
                fields["note"] = "coroutine: no async runner"
            node(entry[0], "call", outcome, describe(exc) if raised and exc is not None else None, fields)
        elif op == "node":
            name, phase, outcome, exc, extra = args
            if phase == "call":
                tamper("call_forged", "%s: a call record that did not come from its recording proxy" % name)
                return
            name, phase = _str(name), _str(phase)
            if phase == "setup" and (name, "teardown") in seen:
                # the node runs again after its teardown: a rerun, as pytest-rerunfailures runs a failed test
                # marked flaky (matplotlib's network tests). Its last round is its outcome, as in the runner's
                # log - so only a plugin of the environment may start one, never the candidate's code
                found = guard.candidate_on_stack(caller)
                if found:
                    tamper("double_call", "%s was run again from %s" % (name, found))
                else:
                    for done in ("setup", "call", "teardown"):
                        seen.pop((name, done), None)
                    rounds[name] = rounds.get(name, 1) + 1
            node(name, phase, _str(outcome), describe(exc) if exc is not None else None, extra)
        elif op == "not_called":
            name, exc, outcome, had_proxy = args
            name = _str(name)
            if (name, "call") in seen:
                return
            if had_proxy and outcome == "error":
                # the call phase raised before the test function ran (pytest's skipping plugin could not evaluate
                # an xfail condition: astropy-8872's `MATPLOTLIB_LT_15`): the runner reports it FAILED, and a
                # failure is never a way to a pass
                node(name, "call", "failed", describe(exc) if exc is not None else None,
                     {"via": "hook", "note": "the call phase failed before the test function ran"})
            elif had_proxy:                  # the test function was never called through its proxy
                node(name, "call", "not_run", describe(exc) if exc is not None else None,
                     {"via": "hook", "note": "the test function was not called"})
                if outcome == "passed":
                    tamper("call_bypassed", "%s reported a pass without its test function running" % name)
            else:                            # items without a test function (doctests): the hook's outcome
                node(name, "call", "failed" if outcome == "error" else _str(outcome),
                     describe(exc) if exc is not None else None, {"via": "hook"})
        elif op == "adopt_session":
            # (pytest-dev/pytest: the session machinery on the stack is the product's own code)
            started_by = None if guard.product_runner else guard.candidate_on_stack(caller)
            if started_by:
                tamper("nested_session", "a pytest session was started by the candidate's code (%s): it is not "
                                         "the run's session" % started_by)
            else:
                args[0].append(True)
        elif op == "check_case":
            guard.check_case(args[0], _str(args[1]))
        elif op == "watch":
            guard.watch(args[0])
        elif op == "prewatch":               # a run started ahead of time, before its go
            if state["booting"] and not state.get("facts"):
                guard.prewatch(args[0])
        elif op == "watch_mapping":
            guard.watch_mapping(args[0], args[1], args[2] if _len(args) > 2 else 0)
        elif op == "watch_plugins":
            guard.watch_plugins(args[0], args[1])
        elif op == "close_in_child":         # after fork: nothing the child does reaches the stream
            if _getpid() != pid:
                state["dead"] = True
                forget_key()
                try:
                    sock.close()
                except _OSError:
                    pass
        elif op == "ready":                  # a run started ahead of time waits for the harness's go
            if state["booting"]:
                emit("ready", {"snapshots": guard.provisional})   # (taken while it waited, or not: released)
        elif op == "facts":                  # ... which brings this run's facts (once, before boot_done)
            if state["booting"] and not state.get("facts"):
                state["facts"] = True
                args[0]["__go_time"] = _now()       # (what the run writes from now on is its own: guard.set_facts)
                guard.set_facts(args[0])
                early, guard.early_code = guard.early_code, None
                if early:
                    args[1].extend(sorted(early)[:20])      # code of the checkout ran before the go: stale
        elif op == "stale":                  # ... and the code of the checkout it had already imported
            if state["booting"]:
                emit("stale", {"modules": _list(args[0])[:20]})
        elif op == "product_runner":
            if state["booting"]:
                guard.product_runner = _bool(args[0])
        elif op == "collect_error":
            emit("collect_error", {"node": _str(args[0]), "exc": _str(args[1])[:300]})
        elif op == "session_end":
            if runner == "pytest":
                check("session end")
            emit("session_end", {"exitstatus": _int(args[0])})
        elif op == "end":
            if state["ended"]:
                return
            if runner != "pytest":
                check("exit")
            emit("end", {"nodes": _len({n for n, _ in seen}), "failed_any": state["failed_any"],
                         "tampered": _len(tampered)})
            state["ended"] = True
            try:
                sock.shutdown(2)
            except _OSError:
                pass
        else:
            tamper("forged_event", "unknown reporter operation %r" % (op,))

    def dispatch(event, args, up=0):
        """The audit hook (`up`: extra frames between the caller and this function, when called directly).

        Events are judged at every depth: code of the tested process can run while the hook runs (a finalizer, a
        signal handler, a protocol method of an object the guard looks at) and must not find the guard switched
        off there. The one event let through unjudged is the reporter's own `sys._getframe` (`frame_at`). The
        exceptions in `refusals` stop the operation that raised the event."""
        if event not in heard or state["ended"]:
            return                    # an event nobody here reads (most: builtins.id, marshal.dumps); after the
                                      # end record nothing is read: the interpreter is finalizing
        me = _ident()
        if own.get(me) and event == "sys._getframe":
            own[me] = 0
            return
        level = depth.get(me, 0)
        if level >= MAX_DEPTH:
            if not state.get("deep"):
                state["deep"] = True
                tamper("reentry", "the reporter's audit hook was re-entered %d times on one thread: code of the "
                                  "tested process runs inside it" % level)
            return
        depth[me] = level + 1
        try:
            if event == "execcritic.reporter":
                if args:
                    caller = frame_at(1 + up)
                    on_event(args[0], args[1:], caller, level or guard.in_hook(caller))
            else:
                guard.audit(event, args, level)
        except _refusals:
            raise
        except _BaseException as exc:          # never break the run from inside a hook; say so instead
            try:
                tamper("reporter_error", "%s: %s" % (event, describe(exc)))
            except _BaseException:
                pass
        finally:
            depth[me] = level

    emit("hello", {"python": "%d.%d.%d" % sys.version_info[:3], "runner": runner,
                   "argv": _list(_getattr(sys, "argv", []))[:50], "executable": sys.executable})
    return dispatch
