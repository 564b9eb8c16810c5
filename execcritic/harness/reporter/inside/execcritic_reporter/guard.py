"""Tamper detection for the whole run, and the check that a test callable is the test the file defines.

The guard belongs to the core (core.py): only the core's closure holds it. It fires a `tamper` record when:
- the audit hook (Python 3.8+, irremovable) sees an event a forger needs and a test does not: a function's code
  swapped; the garbage collector walked; raw memory read through ctypes or /proc; and - when the code doing it
  is the candidate's (lines the candidate added, or code compiled at run time) - a frame obtained
  (`sys._getframe`, a traceback's, generator's or coroutine's frame), a trace or profile function installed,
  a function's defaults or a class's bases replaced, a signal handler installed;
- provenance fails: a function, method, class or callable bound in the runner's modules and classes comes from
  a file the candidate changed or from code built at run time (this catches patches a changed source file
  installs at import time, before any snapshot); the same for registered plugin hooks, trace functions and
  signal handlers;
- a snapshot changes: the runner's modules and classes (names rebound, added or deleted), builtins, and the test
  modules (each name bound by an import statement of the test file must be what that import binds), compared
  before each test's call is recorded, after each test (pytest: its teardown) and at the end of the run -
  which catches rebinding after import, including a patch installed late and restored before the end.

What it costs is paid by every run, so it is kept to what a run needs: the hook returns at once on events it
does not read, a function's provenance is computed once, a check stops at identity tests for a namespace that
is exactly as held (`_unchanged`), a test file is parsed once per run, and the reference compile compiles only
the definitions a node names (`definitions_of`), not the whole test file through pytest's rewriter. A run
started ahead of time takes its snapshots before its go (`prewatch`).
"""
import ast
import builtins
import copy
import functools
import os
import sys
import types
from operator import is_ as _is

_FUNCS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, classmethod, staticmethod, property)
# events a test never needs and a forger does
_MEMORY_EVENTS = {"ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer"}
_INTROSPECTION_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
_TRACE_EVENTS = {"sys.settrace", "sys.setprofile"}
_FRAME_ATTRS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
_RUNNER_PACKAGES = {"pytest", "_pytest", "py", "pluggy"}
_CASE_MACHINERY = {"run", "debug", "__call__", "subTest", "skipTest", "doCleanups"}
_SENSITIVE_SETATTR = {"__defaults__", "__kwdefaults__", "__bases__", "__closure__", "__globals__"}
# standard-library functions that only hand a frame on to their caller: the caller is the one who asked
_FRAME_HELPERS = {"currentframe", "stack", "trace", "getouterframes", "getinnerframes", "walk_stack", "walk_tb",
                  "_getframe", "get_stack", "_task_get_stack", "print_stack", "_task_print_stack"}


# bound at boot: the reference compile of test files must not go through anything the checkout's code rebinds
_parse, _compile, _copy, _deepcopy = ast.parse, compile, copy.copy, copy.deepcopy
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While) + \
    ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


_DESCRIPTORS = (classmethod, staticmethod, property, functools.partial)
# bound at boot: a check must not go through builtins the code under test rebinds (`all = lambda it: True`)
_all, _map, _len, _list, _isinstance = all, map, len, list, isinstance


def _parts(value):
    """What a descriptor runs (re-running its `__init__`, or a partial's `__setstate__`, changes it in place)."""
    if _isinstance(value, (classmethod, staticmethod)):
        return (value.__func__,)
    if _isinstance(value, property):
        return (value.fget, value.fset, value.fdel)
    return (value.func, value.args, value.keywords)


def _ident(value):
    """What a binding is, for snapshots: descriptors by what they wrap (`_parts`), everything else by identity.
    A function's code is not read here: replacing it fires `code_swap` from the audit hook the moment it
    happens (and each read of `__code__` is itself an audit event: thousands per check). (Never `getattr` on
    arbitrary objects here: a module's `__getattr__` is code.)"""
    if _isinstance(value, _DESCRIPTORS):
        return (id(value),) + tuple(id(part) for part in _parts(value))
    return (id(value),)


def _snapshot(ns):
    """[{name: ident} of the bindings that decide behaviour, every name present, the namespace held]: rebinding
    a behaviour binding and adding a new name are changes; a runner filling a name it declared (`X = None` -> a
    class) is not. The held copy makes the common check - nothing changed at all - identity tests only."""
    items = list(ns.items())
    return [{k: _ident(v) for k, v in items if _behaviour(v)}, {k for k, _ in items}, _held(ns)]


def _held(ns):
    """The namespace as it is now, by reference: its keys, its values, and what its descriptors run."""
    keys, values = _list(ns), _list(ns.values())
    return keys, values, [(v, _parts(v)) for v in values if _isinstance(v, _DESCRIPTORS)]


def _unchanged(ns, held):
    """Is `ns` exactly as held: the same key and value objects in the same order, each descriptor running the
    same thing? Identity tests only: no `id()` (each call is an audit event) and no `__eq__` (which a value of
    the code under test may define). Any difference - state included - sends the caller to the full diff."""
    keys, values, descriptors = held
    return (_len(ns) == _len(keys) and _all(_map(_is, ns, keys)) and _all(_map(_is, ns.values(), values)) and
            _all(_all(_map(_is, _parts(d), parts)) for d, parts in descriptors))


def _behaviour(value):
    """Bindings that decide behaviour - functions, methods, classes, modules - as opposed to state (a
    runner's caches, its current config) that changes legitimately during a run."""
    return isinstance(value, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                              types.MethodType, classmethod, staticmethod, property, functools.partial))


class Guard:
    # the audit events `audit` reads: the core's hook returns at once on every other (builtins.id alone is
    # raised tens of thousands of times in a run, by the runner and by the guard's own snapshots)
    EVENTS = frozenset({"object.__setattr__", "object.__getattr__", "sys._getframe", "exec", "compile", "open"}
                       | _MEMORY_EVENTS | _INTROSPECTION_EVENTS | _TRACE_EVENTS)

    def __init__(self, config, tamper):
        self.tamper = tamper
        self.workdir = os.path.abspath(config.get("workdir", "/testbed")) + os.sep
        self.here = os.path.dirname(os.path.abspath(__file__)) + os.sep
        self.builtins = {k: _ident(v) for k, v in vars(builtins).items()}
        self.builtins_held = _held(vars(builtins))
        self.modules = {}          # module name -> (module, snapshot)
        self.classes = {}          # (module, qualname) -> (class, snapshot)
        self.extra = {}            # label -> (mapping, snapshot) for test modules
        self.plugins = None        # (plugin manager, {hook: [impl ids]}, {plugin ids}) once collection is done
        self.reported = set()
        self.rels = {}             # absolute file name -> path in the checkout (None: outside)
        self.functions = {}        # id(function) -> (function, the untrusted file it comes from or None)
        self.classes_seen = None   # the same for classes, during one `watch` (a class can gain methods later)
        self.compiled = {}         # (path, name, compiler) -> [code objects the file defines for `name`]
        self.parsed = {}           # path -> (source, module AST)
        self.set_facts(config)
        self.trusted_runtime, self.candidate_runtime, self.runtime_refs = set(), set(), []
        # True when the runner's own package lives in the checkout (pytest-dev/pytest): its code is the
        # candidate's to change, so provenance cannot apply to it; snapshots, the raw-outcome proxy and the
        # test-code check still do (docs/failure_kinds.md, "what is not protected")
        self.product_runner = False
        self.provisional = False   # the snapshots were taken before the go of a run started ahead (prewatch)
        # a run started ahead, until its go: files of the checkout whose code ran (a module that hides from
        # sys.modules after running still ran: the run is stale all the same)
        self.early_code = set() if config.get("prestart") else None

    def set_facts(self, config):
        """What the harness says about this run's patches: the files the source patch changes, the lines it
        adds, and the test files - read now, before any code of the checkout runs (when the interpreter
        starts, or, for a run started ahead of time, when the harness releases it)."""
        self.changed = set(config.get("changed", ()))
        self.changed_lines = {p: [tuple(r) for r in rs] for p, rs in (config.get("changed_lines") or {}).items()}
        self.originals = {}
        for rel in config.get("test_files", ()):
            try:
                with open(self.workdir + rel, "rb") as fh:
                    self.originals[os.path.abspath(self.workdir + rel)] = fh.read()
            except OSError:
                pass

    # ---- whose code is it ----------------------------------------------------------------------------------
    def _rel(self, path):
        rel = self.rels.get(path, self)
        if rel is self:
            full = self._abs(path)
            rel = full[len(self.workdir):] if full.startswith(self.workdir) else None
            if path.startswith("/"):         # a relative name depends on the working directory at the time
                self.rels[path] = rel
        return rel

    def _abs(self, path):
        try:
            return os.path.abspath(path)
        except OSError:                      # the working directory is gone (a test removed its tmpdir)
            return os.path.normpath(os.path.join(self.workdir, path))

    def changed_file(self, path):
        if not path or path.startswith("<"):
            return False
        rel = self._rel(path)
        return rel is not None and rel in self.changed

    def trusted_file(self, path):
        """Code from outside the checkout (the interpreter, site-packages, this reporter: read-only) or from
        a file of the checkout the candidate did not change (Base or the bundle's tests) - never from a file
        the candidate changed. (Code built at run time: `runtime_untrusted`.)"""
        if path.startswith("<"):
            return path.startswith("<frozen ")
        rel = self._rel(path)
        return rel is None or rel not in self.changed

    def candidate_line(self, code, lineno):
        """Did the candidate write this line (an added line of a changed file), or code it compiled at run time?"""
        path = code.co_filename
        if path.startswith("<"):
            return self.runtime_untrusted(code)
        rel = self._rel(path)
        if rel is None or rel not in self.changed:
            return False
        ranges = self.changed_lines.get(rel)
        if ranges is None:
            return True                      # no line information: the whole file is the candidate's
        return any(a <= lineno <= b for a, b in ranges)

    def runtime_untrusted(self, code):
        """Code compiled at run time is trusted when trusted code executed it (dataclasses, namedtuple, attrs
        generate methods this way); code the candidate executed, or that nothing executed, is not."""
        if code.co_filename.startswith("<frozen "):
            return False
        return id(code) not in self.trusted_runtime or id(code) in self.candidate_runtime

    def _note_runtime(self, code, frame):
        if not code.co_filename.startswith("<") or code.co_filename.startswith("<frozen "):
            return
        candidate = frame is not None and self.candidate_line(frame.f_code, frame.f_lineno)
        target = self.candidate_runtime if candidate else self.trusted_runtime
        stack = [code]
        while stack:
            c = stack.pop()
            target.add(id(c))
            self.runtime_refs.append(c)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))

    def _stdlib(self, path):
        return not path.startswith(self.workdir) and "site-packages" not in path and not path.startswith("<")

    # ---- the audit hook ------------------------------------------------------------------------------------
    def audit(self, event, args, level):
        if event == "object.__setattr__":
            if len(args) >= 3 and args[1] == "__code__" and not _flags_only(args[0], args[2]):
                frame = self._caller(3)
                if frame is None or not frame.f_code.co_filename.startswith(self.here):
                    self._fire("code_swap", "a function's __code__ was replaced: %s" % _name(args[0]))
            elif len(args) >= 2 and args[1] in _SENSITIVE_SETATTR:
                self._by_candidate(self._caller(3), "attribute_swap", "%s.%s was replaced" % (_name(args[0]), args[1]))
        elif event == "object.__getattr__":
            if len(args) >= 2 and args[1] in _FRAME_ATTRS:
                self._by_candidate(self._caller(3), "frame_access",
                                   "read %s of a %s" % (args[1], type(args[0]).__name__))
            elif len(args) >= 2 and args[1] == "__code__" and type(args[0]) is types.FunctionType and \
                    str(getattr(args[0], "__module__", "") or "").startswith("execcritic_reporter"):
                self._by_candidate(self._caller(3), "reporter_code_read",
                                   "read the code of the reporter's %s" % _name(args[0]))
        elif event == "sys._getframe":
            self._by_candidate(self._caller(3), "frame_access", "sys._getframe")
        elif event == "exec":
            if args and isinstance(args[0], types.CodeType):
                if self.early_code is not None and args[0].co_filename.startswith(self.workdir):
                    self.early_code.add(args[0].co_filename[len(self.workdir):])
                self._note_runtime(args[0], self._caller(3))
        elif event == "compile":
            name = args[1] if len(args) > 1 else None
            name = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
            if isinstance(name, str) and not name.startswith("<") and not self.changed_file(name):
                self._by_candidate(self._caller(3), "code_spoofed",
                                   "code compiled under the name of a file it does not come from (%s)" % name)
        elif event in _MEMORY_EVENTS:
            self._fire("memory_access", "%s: raw memory read through ctypes" % event)
        elif event in _INTROSPECTION_EVENTS:
            detail = "%s: the process walked the garbage collector or other threads' frames" % event
            if self.product_runner:             # pytest's own tests walk the gc; the candidate's lines may not
                self._by_candidate(self._caller(3), "introspection", detail)
            else:
                self._fire("introspection", detail)
        elif event in _TRACE_EVENTS:
            if not self._by_candidate(self._caller(3), "trace_hook", "%s installed a trace/profile function" % event):
                self.check_trace_functions()
        elif event == "open" and args and isinstance(args[0], str) and args[0].startswith("/proc/"):
            parts = args[0].split("/")          # ['', 'proc', 'self', 'mem', ...]
            if len(parts) > 3 and parts[3] in ("mem", "fd", "map_files", "environ"):
                self._fire("proc_access", "opened %s" % args[0])

    def _caller(self, skip):
        """The frame that raised the event (`skip` frames up from here), passed through standard-library
        helpers that only hand frames on to their caller."""
        try:
            frame = sys._getframe(skip)
        except ValueError:
            return None
        while frame is not None and frame.f_code.co_name in _FRAME_HELPERS and self._stdlib(frame.f_code.co_filename):
            frame = frame.f_back
        return frame

    def candidate_on_stack(self, frame):
        """The first frame of the candidate's files (any line) on the stack from `frame` up, as text, or None."""
        while frame is not None:
            code = frame.f_code
            if self.changed_file(code.co_filename):
                return "%s:%d" % (code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def _by_candidate(self, frame, what, detail):
        """Fire when the code that raised the event is the candidate's; True if it fired."""
        if frame is None or not self.candidate_line(frame.f_code, frame.f_lineno):
            return False
        self._fire(what, "%s, from %s:%d" % (detail, frame.f_code.co_filename, frame.f_lineno))
        return True

    def _fire(self, what, detail):
        self.tamper(what, detail)

    def check_trace_functions(self):
        import threading

        for label, fn in (("sys.gettrace()", sys.gettrace()), ("sys.getprofile()", sys.getprofile()),
                          ("threading trace hook", getattr(threading, "_trace_hook", None)),
                          ("threading profile hook", getattr(threading, "_profile_hook", None))):
            where = self._untrusted_callable(fn)
            if where:
                self._report_once(("trace", label, id(fn)), "trace_hook",
                                  "%s is %s from %s" % (label, _name(fn), where))

    def signal_handler(self, handler, caller):
        while caller is not None and caller.f_code.co_name == "signal" and self._stdlib(caller.f_code.co_filename):
            caller = caller.f_back                     # signal.signal, the standard library's wrapper
        where = self._untrusted_callable(handler)
        if where or (caller is not None and self.candidate_line(caller.f_code, caller.f_lineno)):
            self._fire("signal_handler", "a signal handler was installed by the candidate's code: %s from %s"
                       % (_name(handler), where or caller.f_code.co_filename))

    def check_case(self, cls, node):
        """A unittest test class's assert/fail helpers and run machinery, as the test will resolve them, must not
        come from the candidate's code (a helper that accepts everything passes any test)."""
        seen = set()
        for klass in getattr(cls, "__mro__", ()):
            for name, value in list(vars(klass).items()):
                if name in seen or not (name.startswith(("assert", "fail", "_call", "_feed", "_add")) or
                                        name in _CASE_MACHINERY):
                    continue
                seen.add(name)
                found = self._untrusted_callable(value)
                if found:
                    self._report_once(("case", id(klass), name, id(value)), "runner_tampered",
                                      "%s: %s.%s is %s from %s" % (node, klass.__qualname__, name, _name(value),
                                                                    found))

    # ---- provenance ----------------------------------------------------------------------------------------
    def _untrusted_callable(self, value, depth=0):
        """The untrusted file (or run-time code) a callable's behaviour comes from, or None."""
        if value is None or depth > 4:
            return None
        if isinstance(value, (classmethod, staticmethod)):
            return self._untrusted_callable(value.__func__, depth + 1)
        if isinstance(value, property):
            for part in (value.fget, value.fset, value.fdel):
                found = self._untrusted_callable(part, depth + 1)
                if found:
                    return found
            return None
        if isinstance(value, functools.partial):
            return self._untrusted_callable(value.func, depth + 1)
        if isinstance(value, types.MethodType):
            return self._untrusted_callable(value.__func__, depth + 1)
        if isinstance(value, types.FunctionType):
            known = self.functions.get(id(value))
            if known is not None and known[0] is value:
                return known[1]
            code = value.__code__
            if code.co_filename.startswith("<"):
                return code.co_filename if self.runtime_untrusted(code) else None
            path = self._abs(code.co_filename)
            if self.product_runner and path.startswith(self.workdir):
                found = None               # the runner is the product (pytest's own repository)
            else:
                found = None if self.trusted_file(path) else path
            # a file's function stays where it comes from (a code swap fires `code_swap` when it happens)
            self.functions[id(value)] = (value, found)
            return found
        if isinstance(value, type):
            memo = self.classes_seen
            known = memo.get(id(value)) if memo is not None else None
            if known is not None and known[0] is value and known[2] <= depth:
                return known[1]              # (a result from a shallower visit saw at least as much)
            found = self._untrusted_class(value, depth)
            if memo is not None:
                memo[id(value)] = (value, found, depth)
            return found
        if isinstance(value, (types.BuiltinFunctionType, types.ModuleType)):
            return None
        call = getattr(type(value), "__call__", None)
        if callable(value) and isinstance(call, types.FunctionType):
            return self._untrusted_callable(type(value), depth + 1)
        return None

    def _untrusted_class(self, value, depth):
        """A class is untrusted when its module is a file the candidate changed, or one of its functions is."""
        module = sys.modules.get(getattr(value, "__module__", "") or "")
        path = getattr(module, "__file__", None) if module is not None else None
        if path and not self.trusted_file(self._abs(path)) and not (
                self.product_runner and self._abs(path).startswith(self.workdir)):
            return self._abs(path)
        for attr in list(vars(value).values()):
            if isinstance(attr, (types.FunctionType, classmethod, staticmethod, property)):
                found = self._untrusted_callable(attr, depth + 1)
                if found:
                    return found
        return None

    def _provenance(self, where, ns, module):
        """Every callable bound in a runner namespace (a module, or a class it defines) must be the runner's own
        - or exactly an object one of the module's own import statements binds (Django's test framework imports
        product classes, and its classes keep them as attributes)."""
        for attr, value in list(ns.items()):
            if isinstance(value, types.ModuleType):
                continue
            found = self._untrusted_callable(value)
            if found and not self._imported(module, value):
                self._report_once(("provenance", where, attr), "runner_tampered",
                                  "%s.%s is %s from %s, not the runner's own code" % (where, attr, _name(value),
                                                                                     found))

    def _imported(self, module, value):
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            return False
        bindings = import_bindings(path, getattr(module, "__package__", None) or "")[0]
        return any(value is _resolve(*binding) for binding in bindings.values())

    # ---- snapshots -----------------------------------------------------------------------------------------
    def watch(self, prefixes):
        """Snapshot every loaded module whose name starts with one of `prefixes`, and its classes; check
        provenance now."""
        self.classes_seen = {}
        try:
            if self.provisional:
                self.provisional = False
                self._rebase()
            self._watch(prefixes)
        finally:
            self.classes_seen = None

    def prewatch(self, prefixes):
        """A run started ahead of time, before its go (nothing of the checkout has run or is loaded: a run that
        had loaded a module of the checkout is stale and ends at the go): snapshot the runner now. The first
        `watch` after the go then does what a cold run's first watch does, for what changed since."""
        self.watch(prefixes)
        self.provisional = True

    def _rebase(self):
        """Between the early snapshot and the first watch after the go, the runner configures (pytest's
        `legacypath` adds properties to `Config`, `Node`, `Session`) and the checkout's conftest files may run.
        A cold run's first watch takes all that as its baseline, with provenance checked; so here, for what
        changed: a class is snapshot again and its provenance checked, a module whose namespace changed is
        watched again with its classes, one whose entry in sys.modules changed is dropped (`_watch` then takes
        the new one). The rest is as it was before any code of the checkout ran."""
        classes = {}
        for key, (cls, held) in self.classes.items():
            classes.setdefault(key[0], []).append((key, cls, held))
        for name, (module, snap) in list(self.modules.items()):
            own = classes.get(name, ())
            if sys.modules.get(name) is not module:
                del self.modules[name]
                for key, _, _ in own:
                    del self.classes[key]
            elif not _unchanged(vars(module), snap[2]):
                for key, _, _ in own:
                    del self.classes[key]
                self._watch_module(name, module)
            else:
                for key, cls, held in own:
                    if not _unchanged(vars(cls), held[2]):
                        self.classes[key] = (cls, _snapshot(vars(cls)))
                        self._provenance("%s.%s" % key, vars(cls), module)

    def _watch(self, prefixes):
        for name, mod in sorted(sys.modules.items()):
            if mod is None or not isinstance(mod, types.ModuleType):
                continue
            if not (name in prefixes or name.startswith(tuple(p + "." for p in prefixes))):
                continue
            if name not in self.modules:
                self._watch_module(name, mod)

    def _watch_module(self, name, mod):
        ns = vars(mod)
        self.modules[name] = (mod, _snapshot(ns))
        for k, v in list(ns.items()):
            if isinstance(v, type) and getattr(v, "__module__", None) == name:
                self.classes[(name, v.__qualname__)] = (v, _snapshot(vars(v)))
                self._provenance("%s.%s" % (name, v.__qualname__), vars(v), mod)
        self._provenance(name, ns, mod)

    def watch_mapping(self, label, mapping):
        """A test module's namespace: its imports must bind what they import, and nothing may rebind it later."""
        if label in self.extra:
            return
        self.extra[label] = (mapping, _snapshot(mapping))
        path = mapping.get("__file__")
        if isinstance(path, str) and path.endswith(".py"):
            for name, problem in self._imports_bound(path, mapping):
                self._report_once(("import", label, name), "test_module_rebound", "%s: %s" % (label, problem))

    def _imports_bound(self, path, mapping):
        """(name, problem) for each module-level import of the test file whose name is bound to something else."""
        try:
            tree = self.parse(path)[1]
        except (OSError, SyntaxError, ValueError):
            tree = None
        bindings, defined = import_bindings(path, mapping.get("__package__") or "", tree)
        out = []
        for name, (module, attr) in bindings.items():
            if name in defined or name not in mapping:
                continue
            expected = _resolve(module, attr)
            value = mapping[name]
            if expected is None or value is expected:
                continue
            if isinstance(value, types.ModuleType) or isinstance(expected, types.ModuleType) or _behaviour(value):
                out.append((name, "%s is bound to %s, not to %s%s its import binds"
                            % (name, _name(value), module, "." + attr if attr else "")))
        return out

    def watch_plugins(self, manager, hooks):
        """Record the plugin manager's plugins and critical hook implementations: later changes are tampering."""
        self.plugins = (manager, {name: [(id(i), id(getattr(i, "function", None))) for i in
                                          getattr(manager.hook, name).get_hookimpls()]
                                   for name in hooks if hasattr(manager.hook, name)},
                        {id(p) for p in manager.get_plugins()})
        for name in hooks:
            if hasattr(manager.hook, name):
                for impl in getattr(manager.hook, name).get_hookimpls():
                    self.plugin_hook(impl)

    def plugin_hook(self, impl):
        found = self._untrusted_callable(getattr(impl, "function", None))
        if found:
            self._report_once(("plugin", id(impl)), "runner_tampered",
                              "a pytest hook implementation (%s) comes from %s" % (_name(impl.function), found))

    def changes(self):
        out = []
        if not _unchanged(vars(builtins), self.builtins_held):
            out += self._builtins_changes()
            self.builtins_held = _held(vars(builtins))
        for name, (module, ns) in self.modules.items():
            if self._product_module(name):
                continue
            if sys.modules.get(name) is not module:
                out += self._once(("module", name), "runner_tampered", "sys.modules[%r] was replaced" % name)
                continue
            out += self._diff("runner_tampered", name, vars(module), ns, module=True)
        for (mod, qual), (cls, attrs) in self.classes.items():
            if self._product_module(mod):
                continue
            out += self._diff("runner_tampered", "%s.%s" % (mod, qual), vars(cls), attrs)
        for label, (mapping, ns) in self.extra.items():
            out += self._diff("test_module_rebound", label, mapping, ns)
        if self.plugins is not None:
            manager, hooks, plugins = self.plugins
            for name, before in hooks.items():
                now = [(id(i), id(getattr(i, "function", None))) for i in getattr(manager.hook, name).get_hookimpls()]
                if now != before:
                    out += self._once(("hook", name), "runner_tampered",
                                      "the implementations of %s changed during the run" % name)
            if {id(p) for p in manager.get_plugins()} - plugins:
                out += self._once(("plugins",), "runner_tampered", "a plugin was registered during the run")
        self.check_trace_functions()
        return out

    def _builtins_changes(self):
        out = []
        for name, value in vars(builtins).items():
            before = self.builtins.get(name)
            if before is None:
                if _behaviour(value):
                    out += self._once(("builtins-add", name), "builtins_rebound", "builtins.%s was added" % name)
            elif _ident(value) != before:
                out += self._once(("builtins", name), "builtins_rebound", "builtins.%s was rebound" % name)
        for name, before in self.builtins.items():
            if name not in vars(builtins):
                out += self._once(("builtins-del", name), "builtins_rebound", "builtins.%s was deleted" % name)
        return out

    def _product_module(self, name):
        """pytest-dev: the runner is the product, and its own test suite monkeypatches it (and restores it);
        the candidate may change the runner's source anyway, so its namespaces are not compared there
        (docs/failure_kinds.md, "what is not protected")."""
        return self.product_runner and name.split(".")[0] in _RUNNER_PACKAGES

    def _diff(self, what, where, ns, snap, module=False):
        """Changes of namespace `ns` since `snap`. In a module (not a class: a name added there can shadow an
        inherited one), a name the runner's own code adds is no change (pytest < 5's tmpdir plugin sets
        `pytest.ensuretemp` at configure): not a dunder, not a builtin's name (a module global shadows the
        builtin), and nothing in it from the candidate's files; it joins the snapshot."""
        if _unchanged(ns, snap[2]):
            return []
        before, keys = snap[0], snap[1]
        out = []
        for k, ident in before.items():
            now = ns.get(k, None)
            if now is None and k not in ns:
                out += self._once((where, k, "del"), what, "%s.%s was deleted" % (where, k))
            elif _ident(now) != ident and not _volatile(where, k):
                out += self._once((where, k), what, "%s.%s was rebound to %s" % (where, k, _name(now)))
        if len(ns) != len(keys) or any(k not in keys for k in list(ns.keys())):
            for k in list(ns.keys()):
                if k not in keys and not _volatile(where, k):
                    value = ns.get(k)
                    if _behaviour(value) and not isinstance(value, types.ModuleType):
                        if module and not (k.startswith("__") and k.endswith("__")) and k not in self.builtins \
                                and self._untrusted_callable(value) is None:
                            before[k] = _ident(value)
                            keys.add(k)
                            continue
                        out += self._once((where, k, "add"), what, "%s.%s was added (%s)" % (where, k, _name(value)))
        snap[2] = _held(ns)            # what was found is reported once; the next check starts from here
        return out

    def _once(self, key, what, detail):
        if key in self.reported:
            return []
        self.reported.add(key)
        return [(what, detail)]

    def report_once(self, key, what, detail):
        for w, d in self._once(key, what, detail):
            self.tamper(w, d)

    _report_once = report_once

    # ---- the test callable is the test the file defines --------------------------------------------------
    def parse(self, path):
        """(source, module AST) of a test file as read when the run's facts arrived (before any code of the
        checkout ran), parsed once per run by functions bound at boot (a parse costs about as much as 500
        lines of tests take to run)."""
        if path not in self.parsed:
            source = self.originals.get(self._abs(path))
            if source is None:
                with open(path, "rb") as fh:
                    source = fh.read()
            self.parsed[path] = (source, _parse(source, filename=path))
        return self.parsed[path]

    def expected_codes(self, path, name, compiler=None):
        """The code objects a compile of file `path` gives its functions called `name` (`compiler(tree, source,
        path)` when the runner compiles test files its own way: pytest's assertion rewriting). Only those
        definitions are compiled (`definitions_of`): the whole file through pytest's rewriter costs more than a
        short run (0.2 s for a file of 190 asserts). The file is the one read when the interpreter started,
        parsed once, by functions bound before any code of the checkout ran."""
        key = (path, name, compiler)
        if key not in self.compiled:
            source, tree = self.parse(path)
            module = definitions_of(tree, name)
            if module is None:                    # defined inside a function: the whole file, parsed afresh
                module = _parse(source, filename=path)
            code = compiler(module, source, path) if compiler else _compile(module, path, "exec", dont_inherit=True)
            self.compiled[key] = codes_named(code, name)
        return self.compiled[key]

    def _same_handlers(self, code, path, name):
        """pytest as the product compiles its tests with its own (the candidate's) assertion rewriter, which the
        reference compile then shares. Rewriting asserts adds no exception handler; a rewriter that wraps test
        bodies in try/except does - compared with a plain compile of the same file."""
        plain = self.expected_codes(path, name)
        if plain and all(_handlers(code) != _handlers(p) for p in plain):
            return ("the assertion rewriter changed %s's exception handling (%d handlers, %d in a plain compile of "
                    "the file)" % (name, _handlers(code), _handlers(plain[0])))
        return None

    def check_test_callable(self, fn, name, path, compiler=None, max_wrappers=8):
        """None if calling `fn` runs the test `name` of file `path` as written; else why not. Wrappers
        (decorators such as mock.patch) are followed through `__wrapped__` when their own code is trusted."""
        try:
            expected = self.expected_codes(path, name, compiler)
        except (OSError, SyntaxError, ValueError, TypeError) as exc:
            return "cannot compile %s to check %s: %r" % (path, name, exc)
        if not expected:
            return "%s defines no function %s" % (path, name)
        cur = fn
        for _ in range(max_wrappers + 1):
            cur = cur.__func__ if isinstance(cur, types.MethodType) else cur
            code = cur.__code__ if isinstance(cur, types.FunctionType) else None
            if code is None:
                return "%s is %s, not a function" % (name, type(cur).__name__)
            if self._abs(code.co_filename) == self._abs(path) and any(code == c for c in expected):
                if compiler is not None and self.product_runner:
                    problem = self._same_handlers(code, path, name)
                    if problem:
                        return problem
                module = sys.modules.get(getattr(cur, "__module__", None) or "")
                if module is not None and cur.__globals__ is not vars(module):
                    return "%s runs with globals that are not its module's" % name
                return None
            wrapped = vars(cur).get("__wrapped__")
            if wrapped is None or not self.trusted_file(self._abs(code.co_filename)):
                return ("the function that runs as %s is %s from %s, not the test %s defines (its code differs "
                        "from a compile of the file)" % (name, _name(cur), code.co_filename, path))
            cur = wrapped
        return "%s is wrapped more than %d times" % (name, max_wrappers)


def _handlers(code):
    """How many exception handlers a function's code sets up (nested code included)."""
    import dis

    total = 0
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is not None and hasattr(code, "co_exceptiontable"):            # 3.11+
        total += len({e.target for e in parse(code)})
    else:
        total += sum(1 for i in dis.get_instructions(code) if i.opname in ("SETUP_FINALLY", "SETUP_EXCEPT",
                                                                          "SETUP_WITH", "SETUP_ASYNC_WITH"))
    return total + sum(_handlers(c) for c in code.co_consts if isinstance(c, types.CodeType))


# Names the runners themselves rebind or add during a run (each with the reason).
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


_BINDINGS = {}


def import_bindings(path, package, tree=None):
    """({bound name: (module, attribute or None)}, {names the file assigns or defines itself}) for the
    module-level statements of a Python file (inside if/try/with too, never inside functions or classes);
    `tree`: the file's AST, when the caller has parsed it already."""
    key = (path, package)
    if key in _BINDINGS:
        return _BINDINGS[key]
    bindings, defined = {}, set()
    if tree is None:
        try:
            with open(path, "rb") as fh:
                tree = _parse(fh.read(), filename=path)
        except (OSError, SyntaxError, ValueError):
            _BINDINGS[key] = (bindings, defined)
            return _BINDINGS[key]
    stack = list(tree.body)
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    bindings[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    bindings[top] = (top, None)
        elif isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
            base = stmt.module or ""
            if stmt.level:
                parts = package.split(".") if package else []
                keep = parts[:len(parts) - stmt.level + 1] if stmt.level > 1 else parts
                base = ".".join(keep + ([base] if base else []))
            for alias in stmt.names:
                if alias.name != "*":
                    bindings[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defined.add(n.id)
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(stmt, field, None) or ():
                    stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    _BINDINGS[key] = (bindings, defined)
    return _BINDINGS[key]


def _resolve(module, attr):
    """What `import module` / `from module import attr` binds now, without running any code (None: unknown)."""
    mod = sys.modules.get(module)
    if mod is None:
        return None
    if attr is None:
        return mod
    ns = vars(mod)
    if attr in ns:
        return ns[attr]
    return sys.modules.get(module + "." + attr)


def definitions_of(tree, name):
    """A module holding only the file's definitions called `name` - at top level, in classes (as shells that
    keep the class's scope: `super()`'s cell), or under if/try/with/loop blocks (lifted: a block makes no
    scope) - after the file's docstring and `__future__` imports (which decide code flags and whether pytest
    rewrites at all), with the module's import statements (which decide how 3.11+ compiles calls on imported
    names). Each definition keeps its position, decorators and defaults, so its code object equals the one a
    compile of the whole file gives. None when a definition of that name sits inside a function (a class
    a factory builds): only the whole file's compile has it. Nothing here runs: the module is only compiled."""
    def pick(stmts, in_class):
        out = []
        for stmt in stmts:
            if isinstance(stmt, _DEFS):
                if stmt.name == name:
                    out.append(_deepcopy(stmt))
                elif _defines(stmt.body, name):
                    raise LookupError(name)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if not in_class and getattr(stmt, "module", None) != "__future__":
                    out.append(_deepcopy(stmt))   # 3.11+: a name the module imports is called without LOAD_METHOD
            elif isinstance(stmt, ast.ClassDef):
                inner = pick(stmt.body, True)
                if any(isinstance(s, (_DEFS, ast.ClassDef)) for s in inner):
                    shell = _copy(stmt)
                    shell.body, shell.bases, shell.keywords, shell.decorator_list = inner, [], [], []
                    out.append(shell)
            elif isinstance(stmt, _BLOCKS):
                for part in _bodies(stmt):
                    out += pick(part, in_class)
            elif _defines([stmt], name):          # any other compound statement (match)
                raise LookupError(name)
        return out

    head = []
    for i, stmt in enumerate(tree.body):
        value = getattr(stmt, "value", None) if isinstance(stmt, ast.Expr) else None
        docstring = i == 0 and isinstance(getattr(value, "value", getattr(value, "s", None)), str)  # 3.7-: ast.Str
        if docstring or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__" and not stmt.level):
            head.append(_deepcopy(stmt))
        else:
            break
    try:
        body = pick(tree.body, False)
    except LookupError:
        return None
    return ast.Module(body=head + body, type_ignores=[])


def _bodies(stmt):
    """The statement lists directly inside a compound statement."""
    for field in ("body", "orelse", "finalbody"):
        part = getattr(stmt, field, None)
        if isinstance(part, list):
            yield part
    for clause in (getattr(stmt, "handlers", None) or []) + (getattr(stmt, "cases", None) or []):
        yield clause.body


def _defines(stmts, name):
    """Does a definition called `name` occur anywhere in these statements (nested statements included)?"""
    stack = list(stmts)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (_DEFS, ast.ClassDef)) and stmt.name == name and not isinstance(stmt, ast.ClassDef):
            return True
        for part in _bodies(stmt):
            stack.extend(part)
    return False


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
