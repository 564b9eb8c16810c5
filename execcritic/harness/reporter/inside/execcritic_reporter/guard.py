"""Tamper detection for the whole run, and the check that a test callable is the test the file defines.

Three layers, each a `tamper` record when it fires:
- an audit hook (Python 3.8+, irremovable) on the events a forger needs and a test does not: swapping a
  function's code, walking the garbage collector, reading memory through ctypes or /proc, installing a
  trace or profile function;
- provenance: every function bound in the runner's modules and classes must come from read-only locations
  (the interpreter, site-packages) or from files of the checkout the candidate did not change - this catches
  patches a changed source file installs at import time, before any snapshot;
- snapshots of the runner's modules and classes, of builtins and of the test modules, compared at every
  check point (around every test phase and at exit) - this catches rebinding after import, including a
  patch installed late and restored before the end.
"""
import builtins
import functools
import os
import sys
import types

_FUNCS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, classmethod, staticmethod, property)
# events a test never needs and a forger does
_MEMORY_EVENTS = {"ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer"}
_INTROSPECTION_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
_TRACE_EVENTS = {"sys.settrace", "sys.setprofile"}


def _ident(value):
    """What a binding is, for snapshots: functions by identity and code, classes and modules by identity.
    (Never `getattr` on arbitrary objects here: a module's `__getattr__` is code that runs.)"""
    code = value.__code__ if isinstance(value, types.FunctionType) else None
    return (id(value), id(code) if code is not None else 0)


def _behaviour(value):
    """Bindings that decide behaviour - functions, methods, classes, modules - as opposed to state (a
    runner's caches, its current config) that changes legitimately during a run."""
    return isinstance(value, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                              types.MethodType, classmethod, staticmethod, property, functools.partial))


class Guard:
    def __init__(self, rep):
        self.rep = rep
        self.builtins = {k: _ident(v) for k, v in vars(builtins).items()}
        self.modules = {}          # module name -> (id(module), {name: ident})
        self.classes = {}          # (module, qualname) -> (class, {attr: ident})
        self.extra = {}            # label -> (mapping, {name: ident}) for test modules
        self.reported = set()
        self._in_hook = False
        # True when the runner's own package lives in the checkout (pytest-dev/pytest): its code is the
        # candidate's to change, so provenance cannot apply to it; snapshots, the raw-outcome proxy and the
        # test-code check still do (docs/failure_kinds.md, "what is not protected")
        self.product_runner = False

    # ---- audit hook ---------------------------------------------------------------------------------
    def install_audit_hook(self):
        if hasattr(sys, "addaudithook"):
            sys.addaudithook(self._audit)

    def _audit(self, event, args):
        if self._in_hook:
            return
        if event == "object.__setattr__":
            if len(args) >= 3 and args[1] == "__code__" and not _flags_only(args[0], args[2]):
                self._fire("code_swap", "a function's __code__ was replaced: %s" % _name(args[0]))
        elif event in _MEMORY_EVENTS:
            self._fire("memory_access", "%s: raw memory read through ctypes" % event)
        elif event in _INTROSPECTION_EVENTS:
            self._fire("introspection", "%s: the process walked the garbage collector or other threads' "
                                        "frames" % event)
        elif event in _TRACE_EVENTS:
            if len(args) and args[0] is not None:
                self._fire("trace_hook", "%s installed a trace/profile function" % event)
        elif event == "open" and args and isinstance(args[0], str) and args[0].startswith("/proc/"):
            parts = args[0].split("/")          # ['', 'proc', 'self', 'mem', ...]
            if len(parts) > 3 and parts[3] in ("mem", "fd", "map_files", "environ"):
                self._fire("proc_access", "opened %s" % args[0])

    def _fire(self, what, detail):
        self._in_hook = True
        try:
            self.rep.tamper(what, detail)
        finally:
            self._in_hook = False

    # ---- provenance and snapshots ----------------------------------------------------------------------
    def watch(self, prefixes):
        """Snapshot every loaded module whose name starts with one of `prefixes`, and its classes; check
        provenance now."""
        for name, mod in sorted(sys.modules.items()):
            if mod is None or not isinstance(mod, types.ModuleType):
                continue
            if not (name in prefixes or name.startswith(tuple(p + "." for p in prefixes))):
                continue
            if name in self.modules:
                continue
            ns = vars(mod)
            self.modules[name] = (id(mod), {k: _ident(v) for k, v in ns.items() if _behaviour(v)})
            for k, v in ns.items():
                if isinstance(v, type) and getattr(v, "__module__", None) == name:
                    self.classes[(name, v.__qualname__)] = (v, {a: _ident(b) for a, b in vars(v).items()
                                                               if _behaviour(b)})
                    self._provenance("%s.%s" % (name, v.__qualname__), vars(v))
            self._provenance(name, ns)

    def watch_mapping(self, label, mapping):
        if label not in self.extra:
            self.extra[label] = (mapping, {k: _ident(v) for k, v in mapping.items() if _behaviour(v)})

    def _provenance(self, where, ns):
        for attr, value in list(ns.items()):
            fn = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            if not isinstance(fn, types.FunctionType):
                continue
            path = os.path.abspath(fn.__code__.co_filename)
            if self.product_runner and path.startswith(os.path.abspath(self.rep.workdir) + os.sep):
                continue      # the runner is the product under test (pytest's own repository): see below
            if not self.trusted_file(path):
                self._report_once(("provenance", where, attr), "runner_tampered",
                                  "%s.%s is %s from %s, not the runner's own code" % (where, attr, _name(fn), path))

    def trusted_file(self, path):
        """Code from outside the checkout (the interpreter, site-packages, this reporter: read-only) or from
        a file of the checkout the candidate did not change (Base or the bundle's tests) - never from a file
        the candidate changed, nor code built at run time ("<string>")."""
        if path.startswith("<"):
            return False
        work = os.path.abspath(self.rep.workdir) + os.sep
        return not path.startswith(work) or path[len(work):] not in self.rep.changed

    def changes(self):
        out = []
        for name, value in vars(builtins).items():
            before = self.builtins.get(name)
            if before is not None and _ident(value) != before:
                out += self._once(("builtins", name), "builtins_rebound", "builtins.%s was rebound" % name)
        for name, before in self.builtins.items():
            if name not in vars(builtins):
                out += self._once(("builtins-del", name), "builtins_rebound", "builtins.%s was deleted" % name)
        for name, (mid, ns) in self.modules.items():
            mod = sys.modules.get(name)
            if mod is None or id(mod) != mid:
                out += self._once(("module", name), "runner_tampered", "sys.modules[%r] was replaced" % name)
                continue
            out += self._diff("runner_tampered", name, vars(mod), ns)
        for (mod, qual), (cls, attrs) in self.classes.items():
            out += self._diff("runner_tampered", "%s.%s" % (mod, qual), vars(cls), attrs)
        for label, (mapping, ns) in self.extra.items():
            out += self._diff("test_module_rebound", label, mapping, ns)
        return out

    def _diff(self, what, where, ns, before):
        out = []
        for k, ident in before.items():
            now = ns.get(k, None)
            if now is None and k not in ns:
                out += self._once((where, k, "del"), what, "%s.%s was deleted" % (where, k))
            elif _ident(now) != ident and not _volatile(where, k):
                out += self._once((where, k), what, "%s.%s was rebound to %s" % (where, k, _name(now)))
        return out

    def _once(self, key, what, detail):
        if key in self.reported:
            return []
        self.reported.add(key)
        return [(what, detail)]

    def _report_once(self, key, what, detail):
        for w, d in self._once(key, what, detail):
            self.rep.tamper(w, d)


# Names the runners themselves rebind during a run (each with the reason).
_VOLATILE = {
    # pytest's assertion plugin installs the per-test comparison hook and resets it after each test
    ("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
    ("_pytest.assertion.util", "_config"),
}


def _flags_only(fn, new):
    """A code swap that changes nothing but the flags (the standard library's `types.coroutine` marks a
    generator function as an iterable coroutine this way) runs the same instructions."""
    old = fn.__code__ if isinstance(fn, types.FunctionType) else None
    if not isinstance(old, types.CodeType) or not isinstance(new, types.CodeType):
        return False
    try:
        return old.replace(co_flags=new.co_flags) == new
    except Exception:
        return False


def _volatile(where, attr):
    return (where, attr) in _VOLATILE


def _name(obj):
    try:
        mod = getattr(obj, "__module__", None) or type(obj).__module__
        return "%s.%s" % (mod, getattr(obj, "__qualname__", type(obj).__name__))
    except Exception:
        return type(obj).__name__


# ---- the test callable is the test the file defines ----------------------------------------------------

_COMPILED = {}


def file_code(path, compiler=None):
    """The module code of `path`, compiled here from the file (`compiler(source, path)` when the runner
    compiles test files its own way, e.g. pytest's assertion rewriting). Cached per (path, compiler)."""
    key = (path, compiler)
    if key not in _COMPILED:
        with open(path, "rb") as fh:
            source = fh.read()
        _COMPILED[key] = compiler(source, path) if compiler else compile(source, path, "exec", dont_inherit=True)
    return _COMPILED[key]


def codes_named(module_code, name):
    """Every function code object called `name` in a module's code, nested classes included."""
    out = []
    stack = [module_code]
    while stack:
        code = stack.pop()
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == name:
                    out.append(const)
                stack.append(const)
    return out


def check_test_callable(fn, name, path, guard, compiler=None, max_wrappers=8):
    """None if calling `fn` runs the test `name` of file `path` as written; else why not. Wrappers
    (decorators such as mock.patch) are followed through `__wrapped__` when their own code is trusted."""
    try:
        expected = codes_named(file_code(path, compiler), name)
    except (OSError, SyntaxError, ValueError) as exc:
        return "cannot compile %s to check %s: %r" % (path, name, exc)
    if not expected:
        return "%s defines no function %s" % (path, name)
    cur = fn
    for _ in range(max_wrappers + 1):
        cur = getattr(cur, "__func__", cur)           # bound methods
        code = getattr(cur, "__code__", None)
        if code is None:
            return "%s is %s, not a function" % (name, type(cur).__name__)
        if os.path.abspath(code.co_filename) == os.path.abspath(path) and any(code == c for c in expected):
            module = sys.modules.get(getattr(cur, "__module__", None) or "")
            if module is not None and getattr(cur, "__globals__", None) is not vars(module):
                return "%s runs with globals that are not its module's" % name
            return None
        wrapped = getattr(cur, "__wrapped__", None)
        if wrapped is None or not guard.trusted_file(os.path.abspath(code.co_filename)):
            return ("the function that runs as %s is %s from %s, not the test %s defines (its code differs from "
                    "a compile of the file)" % (name, _name(cur), code.co_filename, path))
        cur = wrapped
    return "%s is wrapped more than %d times" % (name, max_wrappers)
