"""execcritic's harness-owned results reporter: the boot.

The harness runs a bundle's command with this directory (bound read-only, outside the checkout) first on
PYTHONPATH and `EXECCRITIC_REPORT` naming a one-shot socket. Python imports `sitecustomize` while it starts,
before `__main__` and so before any code of the repository under test; the first Python process of the run
connects, receives its per-run key, and arms the reporter (see execcritic_reporter/__init__.py). Every other
process (children, nested interpreters) finds the variable gone and only chains to the environment's own
sitecustomize, if any.

Runs inside the sandbox, on the task's interpreter (Python 3.6+), importing nothing from execcritic.
"""
import os
import sys


def _chain():
    """Run the next `sitecustomize` on sys.path (the environment's own), as Python would have; it then stands in
    `sys.modules` where this one stood."""
    here = os.path.dirname(os.path.abspath(__file__))
    module = None
    try:
        import importlib.machinery
        import importlib.util

        rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is not None and spec.origin and os.path.abspath(spec.origin) != os.path.abspath(__file__):
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as exc:  # the environment's own hook failing is its business, as without us
        sys.stderr.write("sitecustomize (chained): %r\n" % (exc,))
    return module


def _unlisted(here, chained):
    """Leave no trace of the reporter where the tested code would look first: its directory leaves sys.path and
    PYTHONPATH (child interpreters do not see it either), `sitecustomize` is the environment's own (or none).
    (The reporter's modules leave sys.modules once the runner has loaded its hook: `forget_modules`.)"""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    paths = os.environ.get("PYTHONPATH")
    if paths is not None:
        rest = [p for p in paths.split(os.pathsep) if p and os.path.abspath(p) != here]
        if rest:
            os.environ["PYTHONPATH"] = os.pathsep.join(rest)
        else:
            del os.environ["PYTHONPATH"]
    if chained is None:                        # (this module is still being imported: its entry must stay)
        import types

        chained = types.ModuleType("sitecustomize")
    sys.modules["sitecustomize"] = chained


def _boot(path):
    """Start the reporter's core with the interpreter's own library and this directory only on sys.path: a
    module of the checkout (a `json.py`, a `socket.py`) must not stand in for its dependencies. Then, with
    sys.path restored, arm the runner's hook (which may import the runner itself)."""
    import sysconfig

    here = os.path.dirname(os.path.abspath(__file__))
    keep = {os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
    saved = sys.path[:]
    sys.path[:] = [here] + [p for p in saved if p and any(os.path.abspath(p).startswith(k) for k in keep)]
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # the reporter's sealed calls are "str is not callable" to the compiler
            import execcritic_reporter
        config = execcritic_reporter.boot(path)
    finally:
        sys.path[:] = saved
    if config is not None:
        execcritic_reporter.arm(config)


_socket = os.environ.pop("EXECCRITIC_REPORT", None)
if _socket:
    try:
        _boot(_socket)
    except Exception as _exc:  # the harness sees no records (or no end) and says so; never a verdict
        sys.stderr.write("execcritic reporter: could not start: %r\n" % (_exc,))
_unlisted(os.path.dirname(os.path.abspath(__file__)), _chain())
