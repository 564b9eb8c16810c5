"""execcritic's harness-owned results reporter (runs inside the sandbox, before the code under test).

Why: a verdict is a reward, and code under test can print a runner's result lines, rewrite the runner's
report objects, or exit early with status 0. The harness therefore does not take the verdict from text the
process prints. This reporter records each test node's outcome from the raw call (the exception the test
function raised, or none), per phase, and streams each record out of the process as it is written:

- over a unix socket the harness listens on outside the sandbox, connected once at interpreter start (the
  path is unlinked as soon as this process connects: nothing else can reopen it); the socket is closed in
  forked children and not inherited across exec;
- each record carries a sequence number and an HMAC under a per-run key that arrives over the socket and
  lives only inside two hash states in the core's closure (never in the environment, a file or a global);
- an end record, written at interpreter exit, carries what the reporter saw; the harness reads the stream
  only after the whole process tree is gone and checks it against the exit status and the runner's log.

The state lives in the closure of an audit hook (core.py), which nothing in the process can reach. The
runner hooks (pytest_plugin, unittest_hook, sympy_hook) talk to it through `sys.audit`, which `seal` writes
into their code as a constant: the call cannot be redirected through any namespace, and the core accepts a
record only from a frame running sealed code. The guard (guard.py) watches for tampering for the whole run.

Python 3.6+ (audit hooks from 3.8), standard library only.
"""
import functools
import sys
import types

EVENT = "execcritic.reporter"
SENTINEL = "\0audit"        # `"\0audit"(EVENT, ...)` in the reporter's source: sealed into `sys.audit`
SIGNAL_SENTINEL = "\0signal"  # the interpreter's own `_signal.signal`, sealed into the guard that replaces it
RUNNER_HOOKS = {"pytest": "pytest_plugin", "unittest": "unittest_hook", "django": "unittest_hook",
                "sympy": "sympy_hook"}
_FALLBACK = {}              # Python < 3.8 only: the core, called directly (see core.py)


def _targets():
    import _signal

    return {SENTINEL: sys.audit if hasattr(sys, "audit") else _FALLBACK["call"], SIGNAL_SENTINEL: _signal.signal}


def _replace(code, targets):
    consts = tuple(targets[c] if (type(c) is str and c in targets) else
                   (_replace(c, targets) if isinstance(c, types.CodeType) else c) for c in code.co_consts)
    if hasattr(code, "replace"):
        return code.replace(co_consts=consts)
    return types.CodeType(code.co_argcount, code.co_kwonlyargcount, code.co_nlocals, code.co_stacksize,   # 3.6/3.7
                          code.co_flags, code.co_code, consts, code.co_names, code.co_varnames, code.co_filename,
                          code.co_name, code.co_firstlineno, code.co_lnotab, code.co_freevars, code.co_cellvars)


def _all_codes(code, out):
    out.append(code)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _all_codes(c, out)
    return out


def seal(namespace):
    """Write `sys.audit` into every function of a reporter module (and of its classes) in place of SENTINEL,
    and tell the core which code objects are the reporter's own. Only honoured while the reporter boots."""
    targets = _targets()
    name = namespace.get("__name__")
    functions = []
    for value in list(namespace.values()):
        if isinstance(value, types.FunctionType) and value.__module__ == name:
            functions.append(value)
        elif isinstance(value, type) and value.__module__ == name:
            for attr in vars(value).values():
                attr = attr.__func__ if isinstance(attr, (classmethod, staticmethod)) else attr
                if isinstance(attr, types.FunctionType):
                    functions.append(attr)
    codes = []
    for fn in functions:
        fn.__code__ = _replace(fn.__code__, targets)
        _all_codes(fn.__code__, codes)
    targets[SENTINEL](EVENT, "seal", tuple(codes))


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
    """Connect, take the key, start the core (the audit hook). Called from sitecustomize with a sys.path
    restricted to the standard library; `arm` follows once sys.path is restored."""
    import _socket
    import json

    from execcritic_reporter import core, guard

    if "booted" in _FALLBACK:
        return None
    _FALLBACK["booted"] = True
    import time

    boot_time = time.time()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.connect(path)
    key = _recv_exact(sock, 32)
    config = json.loads(_recv_line(sock).decode("utf-8"))
    config["__boot"] = boot_time
    sock = _pin(sock, config.get("channel_fd"))
    if config.get("prestart"):
        # a run started ahead of time: this run's facts arrive once the harness has applied the patches
        config["__go"] = lambda: json.loads(_recv_line(sock).decode("utf-8"))
        import select   # (bound now: sys.path is the standard library's)
        config["__go_sent"] = lambda: bool(select.select([sock], [], [], 0)[0])
    dispatch = core.make(sock, key, config, guard.Guard, [sys.modules[__name__], core, guard], guard.REFUSALS)
    del key
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(dispatch)
    else:
        _FALLBACK["call"] = lambda event, *args: dispatch(event, args, 1)
    if hasattr(__import__("os"), "register_at_fork"):
        # (a Python function: registering the socket's own bound `close` crashes 3.9 at interpreter exit)
        __import__("os").register_at_fork(after_in_child=_close_in_child)
    seal(globals())
    seal(vars(guard))
    seal(vars(core))
    return config


def _pin(sock, fd):
    """Move the channel to descriptor `fd`, which the sandbox's seccomp filter lets nothing dup2 over or close
    (sandbox/confine.py): records can then not be diverted through a socket the tested code controls."""
    if fd is None:
        return sock
    import _socket
    import fcntl

    n = fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD_CLOEXEC, int(fd))
    pinned = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, n)
    sock.close()
    if n != int(fd):
        pinned.close()
        raise OSError("the reporter's channel could not be moved to descriptor %d (got %d)" % (int(fd), n))
    return pinned


def arm(config):
    """Install the runner's hook (sealed), the signal guard and the end record; then close the boot window.
    A run started ahead of time (`prestart`) imports the runner, says it is ready and waits here for the
    harness's go, which brings the facts of the run (harness/prestart.py); it ends at once, saying so, when
    it had already imported code of the checkout (that code may be what the patches change)."""
    import atexit
    import importlib
    import os
    import warnings

    go = config.pop("__go", None)
    ahead = go is not None
    go_sent = config.pop("__go_sent", None)
    runner = config.get("runner", "")
    hook = RUNNER_HOOKS.get(runner)
    if hook is None:
        "\0audit"(EVENT, "tamper", "unsupported_runner", "no reporter hook for runner %r" % runner)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # SENTINEL calls are "str is not callable" to the compiler
            module = importlib.import_module("execcritic_reporter." + hook)
        seal(vars(module))
        "\0audit"(EVENT, "integrity", module)
    if runner != "pytest":
        forget_modules()                       # (pytest loads its hook by name: pytest_configure does it there)
    if ahead:
        if hook is not None and hasattr(module, "prepare"):
            # released already (checks back to back): no idle time to use; the run goes on as a cold one would
            module.prepare(snapshots=not go_sent())
        "\0audit"(EVENT, "ready")
        facts = go()
        del go
        config.update(facts)
        ran = []
        "\0audit"(EVENT, "facts", facts, ran)
        workdir = os.path.abspath(config.get("workdir", "/testbed")) + os.sep
        stale = sorted(name for name, m in list(sys.modules.items())
                       if os.path.abspath(getattr(m, "__file__", None) or "/").startswith(workdir)) + ran
        if stale:
            "\0audit"(EVENT, "stale", stale)
            os._exit(75)
    if hook is not None:
        if not ahead and not hasattr(sys, "audit") and hasattr(module, "prepare"):
            # Python < 3.8: code compiled at run time is trusted only if the boot's end finds it bound (guard.
            # trust_boot_code), so pytest's built-in plugins, which pytest imports first thing anyway, are imported
            # now (the attrs classes of `_pytest.skipping`)
            module.prepare(snapshots=False)
        module.install(config)
    _guard_signals()
    atexit.register(_end)          # registered first: runs after every handler the code under test adds
    "\0audit"(EVENT, "boot_done")


def forget_modules():
    """The reporter's modules leave sys.modules (the objects live on in the core and in what they installed; the
    core compares their namespaces with their boot state at every check): a name is a trace of the harness."""
    for name in [n for n in list(sys.modules) if n == __name__ or n.startswith(__name__ + ".")]:
        sys.modules.pop(name, None)


def recording(token, fn, extra=None):
    """The proxy a runner hook puts where the runner will call test `fn` (registered as `token`): only the
    call's own outcome leaves it, straight to the core (which checks `token` and `fn`). `extra` (unittest:
    the subtests that failed, filled while the call runs) goes with the record."""
    def run_test(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            "\0audit"("execcritic.reporter", "call_raised", token, fn, exc, extra)
            raise
        "\0audit"("execcritic.reporter", "call_returned", token, fn, result, extra)
        return result
    glob = getattr(fn, "__globals__", None)
    if type(glob) is dict:
        # with the test's globals, as the test itself: pytest evaluates a string xfail condition again in the call
        # phase over `item.obj.__globals__` (astropy-8872's 'MATPLOTLIB_LT_15' was a NameError in the reporter's)
        run_test = types.FunctionType(run_test.__code__, glob, run_test.__name__, None, run_test.__closure__)
    return functools.wraps(fn)(run_test)


def _end():
    "\0audit"(EVENT, "end")


def _close_in_child():
    "\0audit"(EVENT, "close_in_child")


def _guard_signals():
    """A signal handler receives the interrupted frame - a way to the stack no audit event announces. Every
    handler installed from now on is shown to the guard with the frame that installs it. (`signal.signal`
    converts enums and calls `_signal.signal`, replaced here; the original lives only in sealed code.)"""
    import _signal

    _signal.signal = _install_signal


def _install_signal(signalnum, handler):
    "\0audit"(EVENT, "signal", handler, sys._getframe(1))
    return "\0signal"(signalnum, handler)
