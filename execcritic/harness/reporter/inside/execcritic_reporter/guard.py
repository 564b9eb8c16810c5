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

import ast as _ast_module
import builtins as _builtins_module
import collections as _collections_module
import functools as _functools_module
import opcode as _opcode_module
import os as _os_module
import sys as _sys_module
import threading as _threading_module
import types as _types_module
from itertools import chain as _itertools_chain
from itertools import compress as _itertools_compress
from operator import is_ as _operator_is
from operator import methodcaller as _operator_methodcaller


def _build():
    """The guard, built once while the reporter boots. Everything its code uses while the audit hook runs is bound
    here, as closure variables: builtins, the C functions of the standard library, its own path arithmetic. None is
    looked up in a namespace the code under test can change (a module, a class, `builtins`): a class attribute
    can be rebound without any audit event, and a rebound `isinstance`, `os.path.abspath` or `Guard.audit` would
    decide what the guard sees. Checks on the tested code's objects go by `type()` (C), never through protocol
    methods that object's class defines (`__class__`, `__getattr__`, metaclass properties): those would run its
    code inside the hook."""
    _b = _builtins_module
    (Exception, LookupError, OSError, SyntaxError, TypeError, ValueError, all, any, bytes, callable, classmethod,
     compile, enumerate, frozenset, getattr, hasattr, id, len, list, map, open, property, range, set, sorted,
     staticmethod, str, sum, tuple, type, ModuleNotFoundError, RuntimeError, PermissionError, EOFError, bool,
     float) = (
        _b.Exception, _b.LookupError, _b.OSError, _b.SyntaxError, _b.TypeError, _b.ValueError, _b.all, _b.any,
        _b.bytes, _b.callable, _b.classmethod, _b.compile, _b.enumerate, _b.frozenset, _b.getattr, _b.hasattr, _b.id,
        _b.len, _b.list, _b.map, _b.open, _b.property, _b.range, _b.set, _b.sorted, _b.staticmethod, _b.str, _b.sum,
        _b.tuple, _b.type, _b.ModuleNotFoundError, _b.RuntimeError, _b.PermissionError, _b.EOFError, _b.bool,
        _b.float)
    _is = _operator_is
    _chain = _itertools_chain.from_iterable
    _values = _operator_methodcaller("values")
    _compress = _itertools_compress
    _Namespace = _types_module.SimpleNamespace      # a C type: its instances' attributes are only their own
    builtins = _b
    types = _Namespace(FunctionType=_types_module.FunctionType, BuiltinFunctionType=_types_module.BuiltinFunctionType,
                       MethodType=_types_module.MethodType, ModuleType=_types_module.ModuleType,
                       CodeType=_types_module.CodeType)
    functools = _Namespace(partial=_functools_module.partial)
    ast = _Namespace(**{k: v for k, v in _b.vars(_ast_module).items() if _b.isinstance(v, type)})
    _ONLY_AST = _ast_module.PyCF_ONLY_AST
    _modules, _gettrace, _getprofile, _sysgetframe = (_sys_module.modules, _sys_module.gettrace,
                                                      _sys_module.getprofile, _sys_module._getframe)
    _threading = _b.vars(_threading_module)
    _EXCEPTION_HOOKS = tuple(("%s.%s" % (label, name), space, name) for label, space, names in (
        ("sys", _b.vars(_sys_module), ("excepthook", "unraisablehook", "displayhook", "breakpointhook")),
        ("threading", _threading, ("excepthook",))) for name in names)
    _getcwd, _stat = _os_module.getcwd, _os_module.stat
    _statvfs, _ST_RDONLY = _os_module.statvfs, _os_module.ST_RDONLY
    _subclass = type.__subclasscheck__               # (C: never calls a metaclass's code for plain types)
    _module_dict = _types_module.ModuleType.__dict__["__dict__"].__get__
    _type_dict = type.__dict__["__dict__"].__get__
    _NO_NAMESPACE = _types_module.MappingProxyType({})
    _func_dict = _types_module.FunctionType.__dict__["__dict__"].__get__
    _mro_of = type.__dict__["__mro__"].__get__
    _qualname_of = type.__dict__["__qualname__"].__get__
    _str_copy = str.__str__
    _namedtuple = _collections_module.namedtuple
    # Python < 3.8 has no audit hooks: no `exec` event says that trusted code compiled a function at run time
    _NO_AUDIT = not hasattr(_sys_module, "addaudithook")
    _version = _sys_module.version_info

    def isinstance(obj, classinfo):
        """By the object's type alone: a `__class__` the object's class defines is its code."""
        return _is_subtype(type(obj), classinfo)

    def _is_subtype(t, classinfo):
        if type(classinfo) is tuple:
            for c in classinfo:
                if _is_subtype(t, c):
                    return True
            return False
        return _subclass(classinfo, t)

    def vars(obj):
        """The namespace itself, through the C descriptor of its kind (never a `__dict__` the class defines)."""
        t = type(obj)
        if _subclass(types.ModuleType, t):
            return _module_dict(obj)
        if _subclass(type, t):
            ns = _type_dict(obj)
            # (Python 3.6: a static type the interpreter has not readied yet, `unicodedata.UCD`, has no namespace)
            return _NO_NAMESPACE if ns is None else ns
        if t is types.FunctionType:
            return _func_dict(obj)
        return _b.vars(obj)

    def _normpath(path):
        """posixpath.normpath for a str, by str methods only."""
        comps = []
        for comp in path.split("/"):
            if comp in ("", "."):
                continue
            if comp == ".." and comps and comps[-1] != "..":
                comps.pop()
            elif comp != ".." or not path.startswith("/"):
                comps.append(comp)
        out = "/".join(comps)
        return ("/" + out) if path.startswith("/") else (out or ".")

    def _abspath(path):
        path = _str_copy(path)
        return _normpath(path if path.startswith("/") else _getcwd() + "/" + path)

    def _parse(source, filename):
        return compile(source, filename, "exec", _ONLY_AST, True)

    def _line_span(code):
        """(first, last) line of a code object's own instructions (3.10+: its line table; before: co_lnotab,
        whose line increments are signed bytes from 3.6)."""
        first = last = code.co_firstlineno
        if hasattr(code, "co_lines"):
            for _start, _end, line in code.co_lines():
                if line is not None and line > last:
                    last = line
            return first, last
        line, table = first, code.co_lnotab
        for i in range(1, len(table), 2):
            step = table[i]
            line += step - 256 if step >= 128 else step
            if line > last:
                last = line
        return first, last

    _HERE = _os_module.path.dirname(_os_module.path.abspath(__file__)) + "/"
    _FUNCS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, classmethod, staticmethod, property)
    # events a test never needs and a forger does
    _MEMORY_EVENTS = {"ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer"}
    _INTROSPECTION_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
    _TRACE_EVENTS = {"sys.settrace", "sys.setprofile"}
    _MONITORING = "sys.monitoring.register_callback"      # 3.12+: a callback at every line/call it asks for
    # (event, file under site-packages, function): a library's own walk of the collector whose result stays inside
    # that function (measured). pandas' chained-assignment check asks whether a copy's parent has referents
    # (`_check_setitem_copy`; seaborn 3187's Base run was refused for it).
    _OWN_INTROSPECTION = {("gc.get_referents", "pandas/core/generic.py", "_check_setitem_copy")}
    _FRAME_ATTRS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
    _RUNNER_PACKAGES = {"pytest", "_pytest", "py", "pluggy"}
    _CASE_MACHINERY = {"run", "debug", "__call__", "subTest", "skipTest", "doCleanups"}
    # wrapper classes (module, qualname) whose call runs the callable held in an attribute (`_held_callee`)
    _CALLEE_ATTRS = {("asgiref.sync", "AsyncToSync"): "awaitable", ("asgiref.sync", "SyncToAsync"): "func"}
    _type_qualname = vars(type)["__qualname__"].__get__     # not through a metaclass the candidate may define
    _SENSITIVE_SETATTR = {"__defaults__", "__kwdefaults__", "__bases__", "__closure__", "__globals__"}
    # standard-library functions that only hand a frame on to their caller: the caller is the one who asked
    _FRAME_HELPERS = {"currentframe", "stack", "trace", "getouterframes", "getinnerframes", "walk_stack", "walk_tb",
                      "_getframe", "get_stack", "_task_get_stack", "print_stack", "_task_print_stack"}


    _compile = compile
    _loads, _dumps = __import__("marshal").loads, __import__("marshal").dumps
    _fspath = _os_module.fspath
    _BufferedReader = __import__("io").BufferedReader
    _EXTENSIONS = tuple(__import__("importlib.machinery").machinery.EXTENSION_SUFFIXES) or (".so",)
    # the native modules that hand out raw memory, call C, or run code outside this hook (sandbox/confine.py hides
    # their files; a name refused here as well covers any interpreter the sandbox did not find)
    _NATIVE = frozenset({"_ctypes", "_cffi_backend", "_ctypes_test", "_testcapi", "_testinternalcapi",
                         "_testmultiphase", "_testsinglephase", "_testbuffer", "_testclinic", "_testimportmultiple",
                         "_xxtestfuzz", "_testexternalinspection", "_remote_debugging", "_xxsubinterpreters",
                         "_xxinterpchannels", "_interpreters", "_interpchannels", "_interpqueues"})
    # files of any process under /proc that hold or map its memory, or its descriptors (the channel among them)
    _MEM_FILES = frozenset({"mem", "pagemap", "map_files", "kcore", "kmem", "environ", "fd", "fdinfo", "maps",
                            "smaps", "syscall", "auxv", "stack", "clear_refs", "kpageflags", "kpagecount"})

    _signal_module = __import__("_signal")
    _SIGNAL_DEFAULTS = tuple(h for h in (getattr(_signal_module, "default_int_handler", None),
                                         getattr(_signal_module, "SIG_DFL", None),
                                         getattr(_signal_module, "SIG_IGN", None)) if h is not None)
    _NATIVE_CALLABLES = (_types_module.BuiltinFunctionType, type(len.__call__), type(str.join),
                         type(object.__init__), type(dict.__dict__["fromkeys"]))

    _TYPE_CHECKS = {h: type.__dict__[h] for h in ("__subclasscheck__", "__instancecheck__")}
    _BaseException = _b.BaseException
    try:
        _abc_dump = __import__("_abc")._get_dump          # (C: the registry of an ABC, as weak references)
    except (ImportError, AttributeError):
        _abc_dump = None

    def _abc_registered(cls):
        """The names of the classes registered into ABC `cls` (nothing when it is not an ABC)."""
        if _abc_dump is None or "_abc_impl" not in vars(cls):
            return ""
        try:
            registry = _abc_dump(cls)[0]
        except (TypeError, AttributeError):
            return ""
        names = [_name(ref()) for ref in list(registry) if ref() is not None]
        return ", ".join(sorted(names))

    class RefusedImport(ModuleNotFoundError):
        """Raised by the hook: the import does not happen (the code under test sees a missing module)."""

    class RefusedHook(RuntimeError):
        """Raised by the hook for `sys.addaudithook`: CPython then silently leaves the new hook out."""

    class RefusedWrite(PermissionError):
        """Raised by the hook: the operation does not happen."""

    EVENTS = frozenset({"object.__setattr__", "object.__getattr__", "sys._getframe", "exec", "compile", "open",
                        "os.listdir", "os.scandir",
                        "import", "code.__new__", "marshal.loads", "marshal.load", "sys.addaudithook",
                        "cpython.PyInterpreterState_New", _MONITORING} | _MEMORY_EVENTS | _INTROSPECTION_EVENTS
                       | _TRACE_EVENTS)
    _DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
    WHOLE_FILE_AFTER = 3    # definitions of one file compiled one by one before the whole file is (expected_codes)
    _BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While) + \
        ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


    _DESCRIPTORS = (classmethod, staticmethod, property, functools.partial)
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

    def Guard(config, tamper, frame_at=None, refused=None):
        core_globals = frame_at.__globals__ if frame_at is not None else None
        if frame_at is None:                       # (the core passes its own: guard.py's tests do not)
            def frame_at(skip):
                return _sysgetframe(skip + 1)
        S = _Namespace()
        S.EVENTS = EVENTS

        def set_facts(config):
            """What the harness says about this run's patches: the files the source patch changes, the lines it
            adds, and the test files - read now, before any code of the checkout runs (when the interpreter
            starts, or, for a run started ahead of time, when the harness releases it)."""
            S.changed = set(config.get("changed", ()))
            # what the run itself writes from now on is the run's: bytecode or native code it then loads is checked
            S.t0 = float(config.get("__go_time") or config.get("__boot") or 0.0)
            S.written, S.readonly_dirs = {}, {}
            S.claims_seen, S.claim_modules, S.claim_checked = -1, [], {}
            S.readonly = tuple(p for p in (_sys_module.base_prefix, _HERE) if p and p != "/")
            S.ffi = bool(config.get("ffi"))
            S.changed_lines = {p: [tuple(r) for r in rs] for p, rs in (config.get("changed_lines") or {}).items()}
            S.originals = {}
            for rel in config.get("test_files", ()):
                try:
                    with open(S.workdir + rel, "rb") as fh:
                        S.originals[_abspath(S.workdir + rel)] = fh.read()
                except OSError:
                    pass

        def _rel(path):
            rel = S.rels.get(path, S)
            if rel is S:
                full = _abs(path)
                rel = full[len(S.workdir):] if full.startswith(S.workdir) else None
                if path.startswith("/"):         # a relative name depends on the working directory at the time
                    S.rels[path] = rel
            return rel

        def _abs(path):
            try:
                return _abspath(path)
            except OSError:                      # the working directory is gone (a test removed its tmpdir)
                return _normpath(S.workdir + path)

        def changed_file(path):
            """A file the candidate changed, or one the run wrote (`run_written`)."""
            if not path or path.startswith("<"):
                return False
            rel = _rel(path)
            return (rel is not None and rel in S.changed) or run_written(path)

        def run_written(path):
            """A file created or modified after the go, wherever it is (the temp dir, HOME, a new file in the
            checkout): only the code under test writes files then, so code read from one is the candidate's.
            Once written, always; a file seen unwritten is stat'ed again at each question unless it is the
            interpreter's own or this reporter's (a module rewritten and then reloaded is new code)."""
            if not S.t0 or not path or path.startswith("<") or S.product_runner:
                return False          # (pytest-dev: pytester's inner runs write and run files; as its checkout,
                                      # they are the product's - docs/failure_kinds.md, "what is not protected")
            got = S.written.get(path)
            if got is None:
                got = _written_during_run(path)
                if got or path.startswith(S.readonly):
                    S.written[path] = got
            return got

        def trusted_file(path):
            """Code from outside the checkout (the interpreter, site-packages, this reporter: read-only) or from
            a file of the checkout the candidate did not change (Base or the bundle's tests) - never from a file
            the candidate changed or the run wrote. (Code built at run time: `runtime_untrusted`.)"""
            if path.startswith("<"):
                return path.startswith("<frozen ")
            rel = _rel(path)
            return (rel is None or rel not in S.changed) and not run_written(path)

        def candidate_line(code, lineno):
            """Did the candidate write this line (an added line of a changed file, or any line of a file the run
            wrote), or code it compiled at run time?"""
            return _candidate_lines(code, (lineno, lineno))

        def candidate_code(code):
            """Did the candidate write any line of this code object's own (a function's lines, not the rest of
            its file)? A file the run wrote, or one without line information, is the candidate's whole."""
            return _candidate_lines(code, None)

        def _candidate_lines(code, span):
            path = code.co_filename
            if path.startswith("<"):
                return runtime_untrusted(code)
            rel = _rel(path)
            if rel is None or rel not in S.changed:
                return run_written(path)
            ranges = S.changed_lines.get(rel)
            if ranges is None:
                return True                      # no line information: the whole file is the candidate's
            first, last = span or _line_span(code)
            return any(a <= last and first <= b for a, b in ranges)

        def runtime_untrusted(code):
            """Code compiled at run time is trusted when trusted code executed it (dataclasses, namedtuple, attrs
            generate methods this way); code the candidate executed, or that nothing executed, is not."""
            if code.co_filename.startswith("<frozen "):
                return False
            return id(code) not in S.trusted_runtime or id(code) in S.candidate_runtime

        def _note_runtime(code, frame):
            if not code.co_filename.startswith("<") or code.co_filename.startswith("<frozen "):
                return
            candidate = frame is not None and candidate_line(frame.f_code, frame.f_lineno)
            target = S.candidate_runtime if candidate else S.trusted_runtime
            stack = [code]
            while stack:
                c = stack.pop()
                target.add(id(c))
                S.runtime_refs.append(c)
                stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))

        def namedtuple_method(fn):
            """Python < 3.8 (no `exec` event): is `fn` exactly a method the standard library's namedtuple generates
            at run time (3.6 execs a class template, 3.7 evals `__new__`; unittest's own classes carry such
            methods)? Its code must equal the reference namedtuple's for the same name, fields and defaults, built
            here by the namedtuple bound at boot."""
            glob = fn.__globals__
            name = glob.get("__name__") if type(glob) is dict else None
            if type(name) is not str or not name.startswith("namedtuple_"):
                return False
            typename = name[len("namedtuple_"):]
            cls = glob.get(typename)
            if isinstance(cls, type) and _subclass(tuple, cls):          # 3.6: the class is in the namespace
                fields = vars(cls).get("_fields")
            elif fn.__name__ == "__new__":                                # 3.7: `__new__(_cls, <fields>)` alone
                fields = fn.__code__.co_varnames[1:fn.__code__.co_argcount]
            else:
                return False
            if not (type(fields) is tuple and all(type(f) is str for f in fields)):
                return False
            defaults = fn.__defaults__ if _version >= (3, 7) else None
            key = (typename, fields, defaults)
            ref = S.namedtuples.get(key)
            if ref is None:
                try:
                    ref = S.namedtuples[key] = _namedtuple(typename, fields, **(
                        {"defaults": defaults} if defaults else {}))
                except (TypeError, ValueError):
                    return False
            want = vars(ref).get(fn.__name__)
            want = want.__func__ if isinstance(want, (classmethod, staticmethod)) else want
            return type(want) is types.FunctionType and want.__code__ == fn.__code__ and \
                want.__defaults__ == fn.__defaults__ and want.__kwdefaults__ == fn.__kwdefaults__

        def _library_relabels(fn, new, frame):
            """Read-only library code gives a function of a read-only library another name: the same instructions,
            set by a library on library code, never under the name of a file of the checkout.
            - numpy 1.22-1.24's `array_function_dispatch` renames each wrapper of its own file (`co_name`, and
              `co_filename` '<__array_function__ internals>'). Measured: every Django 4.0 run that imports numpy
              was refused for 313 such renames.
            - Hypothesis's `reflection.impersonate` gives each strategy function (some of them code its own
              `exec` made) the `co_filename` and first line of the function it stands for, in another of its files
              ("to hide the hypothesis internals from pytest"). Measured: astropy 4.3's Base runs were refused for
              74 such renames."""
            if not _renamed_only(fn, new):
                return False
            path, old = frame.f_code.co_filename, fn.__code__.co_filename
            made = _library(old) or (old.startswith("<") and not runtime_untrusted(fn.__code__))
            if not (_library(path) and made):
                return False
            if new.co_filename.startswith("<"):
                return path == old and not new.co_filename.startswith("<frozen")
            return _library(new.co_filename)

        def _library(path):
            """A file of an installed library: read-only, outside the checkout."""
            return "site-packages" in path and not _abs(path).startswith(S.workdir) and trusted_file(_abs(path))

        def _memory_read(frame, detail):
            """Raw memory read through ctypes. With no `ffi` there is no ctypes to read with: tampering. In an `ffi`
            env (its recipe says a library needs the real ctypes) libraries read memory of their own: llvmlite reads
            the object code numba's JIT made (`ctypes.string_at`; measured: xarray 0.12's Base and Gold runs). Such a
            read is the library's when the code that asked, past ctypes' own wrappers, is a library file and no
            line the candidate wrote is on the stack; a read the candidate's line drives is `memory_access`."""
            while frame is not None and _stdlib(frame.f_code.co_filename) and \
                    "/ctypes/" in frame.f_code.co_filename:
                frame = frame.f_back
            where = "%s:%d" % (frame.f_code.co_filename, frame.f_lineno) if frame is not None else "no Python caller"
            if S.ffi and frame is not None and _library(frame.f_code.co_filename):
                up = frame
                while up is not None and not candidate_line(up.f_code, up.f_lineno):
                    up = up.f_back
                if up is None:
                    return
                where += ", driven by %s:%d" % (up.f_code.co_filename, up.f_lineno)
            _fire("memory_access", "%s, from %s" % (detail, where))

        def _own_introspection(event, frame):
            """Is `frame` one of the library functions of `_OWN_INTROSPECTION` (read-only, outside the checkout)
            asking for `event`? Whoever called it, the collector's answer does not leave that function."""
            if frame is None:
                return False
            path = frame.f_code.co_filename
            return _library(path) and any(event == e and path.endswith("/site-packages/" + f) and
                                          frame.f_code.co_name == fn for e, f, fn in _OWN_INTROSPECTION)

        def trust_boot_code():
            """Python < 3.8 has no `exec` event to show who compiles code at run time. When the boot ends, nothing
            of the checkout has run (unless a module of it is loaded already: then nothing is trusted here), so
            code compiled at run time that the modules loaded by then bind, in their namespaces and classes, was
            made by trusted code - pytest's classes get `__init__` from attrs, which compiles it from a string
            (astropy 1.3's runs were refused as `runner_tampered` for it)."""
            if not _NO_AUDIT:
                return
            loaded = [(n, m) for n, m in list(_modules.items()) if isinstance(m, types.ModuleType)]
            # (a module of the checkout that was only made, never run, ran nothing: a namespace package's .pth
            # makes matplotlib 3.0's `mpl_toolkits` from its spec at start-up. Running a module's code puts
            # `__builtins__` into its namespace.)
            if any(_abs(_module_file(m) or "/").startswith(S.workdir) and "__builtins__" in vars(m) for _, m in loaded):
                return
            for name, module in loaded:
                spaces, classes = [vars(module)], [v for v in list(vars(module).values()) if isinstance(v, type)]
                seen = set()
                while classes:                   # the module's classes, and the classes they nest (pytest's
                    cls = classes.pop()          # `Config.InvocationParams`)
                    if id(cls) in seen or _module_name(cls) != name:
                        continue
                    seen.add(id(cls))
                    spaces.append(vars(cls))
                    classes.extend(v for v in list(vars(cls).values()) if isinstance(v, type))
                for ns in spaces:
                    for value in list(ns.values()):
                        if isinstance(value, (classmethod, staticmethod)):
                            value = value.__func__
                        parts = (value.fget, value.fset, value.fdel) if isinstance(value, property) else (value,)
                        for fn in parts:
                            if isinstance(fn, types.FunctionType) and fn.__code__.co_filename.startswith("<"):
                                _note_runtime(fn.__code__, None)

        def _stdlib(path):
            return not path.startswith(S.workdir) and "site-packages" not in path and not path.startswith("<")

        def audit(event, args, level):
            if event in ("object.__setattr__", "object.__getattr__") and len(args) >= 2 and type(args[1]) is not str:
                # (the interpreter found the attribute by a name object whose __eq__/__hash__ are the candidate's:
                # comparing it here would ask that code what the guard sees)
                _fire("attribute_swap", "attribute %s under a name that is not a str (%s)"
                      % ("set" if event == "object.__setattr__" else "read", _name(args[1])))
                return
            if event == "object.__setattr__":
                if len(args) >= 3 and args[1] == "__code__" and not _flags_only(args[0], args[2]):
                    frame = _caller(3)
                    if frame is not None and _library_relabels(args[0], args[2], frame):
                        _note_runtime(args[2], frame)      # its new "<...>" name: code trusted code made
                    elif frame is None or not frame.f_code.co_filename.startswith(S.here):
                        _fire("code_swap", "a function's __code__ was replaced: %s" % _name(args[0]))
                elif len(args) >= 2 and args[1] in _SENSITIVE_SETATTR:
                    _by_candidate(_caller(3), "attribute_swap", "%s.%s was replaced" % (_name(args[0]), args[1]))
            elif event == "object.__getattr__":
                if len(args) >= 2 and args[1] in _FRAME_ATTRS:
                    _frame_access(_caller(3), level, "read %s of a %s" % (args[1], type(args[0]).__name__))
                elif len(args) >= 2 and args[1] == "__code__" and type(args[0]) is types.FunctionType and \
                        _module_name(args[0]).startswith("execcritic_reporter"):
                    _by_candidate(_caller(3), "reporter_code_read",
                                       "read the code of the reporter's %s" % _name(args[0]))
            elif event == "sys._getframe":
                _frame_access(_caller(3), level, "sys._getframe")
            elif event == "exec":
                if args and isinstance(args[0], types.CodeType):
                    if S.early_code is not None and args[0].co_filename.startswith(S.workdir):
                        S.early_code.add(args[0].co_filename[len(S.workdir):])
                    _note_runtime(args[0], _caller(3))
            elif event == "compile":
                name = args[1] if len(args) > 1 else None
                name = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
                if isinstance(name, str) and not name.startswith("<") and not changed_file(name):
                    _by_candidate(_caller(3), "code_spoofed",
                                  "code compiled under the name of a file it does not come from (%s)" % name)
                _py_compile_source(_caller(3), args)
            elif event == "import":
                _import(args)
            elif event == "code.__new__":
                _by_candidate(_caller(3), "code_built", "a code object was built at run time (crafted bytecode reads "
                                                        "and writes any memory)")
            elif event in ("marshal.loads", "marshal.load"):
                frame = _caller(3)
                if not _by_candidate(frame, "bytecode", "code was unmarshalled by the candidate's code (crafted "
                                                        "bytecode reads and writes any memory)"):
                    _bytecode_file(frame, args)
            elif event == "sys.addaudithook":
                # (every refusal is named before it is raised: the exception carries this hook's frames, and
                # must find the run already invalid - docs/BYPASSES.md, fourth generation)
                found = candidate_on_stack(_caller(3)) or "code outside the candidate's files"
                _fire("audit_hook", "an audit hook was added from %s (it would be handed what the reporter's "
                                    "hook sees)" % found)
                raise RefusedHook("no audit hook can be added once the reporter runs")
            elif event == "cpython.PyInterpreterState_New":
                _fire("subinterpreter", "a subinterpreter was created: its code would run outside the reporter's "
                                        "audit hook")
                raise RefusedHook("subinterpreters are not available to the code under test")
            elif event in _MEMORY_EVENTS:
                _memory_read(_caller(3), "%s: raw memory read through ctypes" % event)
            elif event in _INTROSPECTION_EVENTS:
                detail = "%s: the process walked the garbage collector or other threads' frames" % event
                frame = _caller(3)
                if S.product_runner:             # pytest's own tests walk the gc; the candidate's lines may not
                    _by_candidate(frame, "introspection", detail)
                elif not _own_introspection(event, frame):
                    _fire("introspection", detail)
            elif event in _TRACE_EVENTS:
                if level or in_hook(_caller(3)):     # (code running inside the hook installs a trace function)
                    _fire("trace_hook", "%s inside the reporter's audit hook" % event)
                    raise RefusedWrite("no trace or profile function from inside the reporter's hook")
                if _proxy_traced(_caller(3)):
                    _fire("trace_hook", "%s while a recording proxy's frame was traced (a trace function may move "
                                        "its lines past the test call)" % event)
                if not _by_candidate(_caller(3), "trace_hook", "%s installed a trace/profile function" % event):
                    check_trace_functions()
            elif event == _MONITORING and args and args[0] is not None:      # (None: a callback removed)
                where = _untrusted_hook(args[0])
                if where:
                    _fire("trace_hook", "a sys.monitoring callback is %s from %s" % (_name(args[0]), where))
                else:
                    _by_candidate(_caller(3), "trace_hook", "a sys.monitoring callback was registered")
            elif event in ("open", "os.listdir", "os.scandir") and args:
                _open(args[0])
                if event == "open" and len(args) > 1 and type(args[1]) is str and "w" in args[1]:
                    _pytest_writes_pyc(_caller(3))

        def _import(args):
            """The native modules that hand out raw memory are refused by name (hidden by the sandbox too); a native
            extension written during the run is refused (a candidate could build ctypes of its own)."""
            name = args[0]
            path = args[1] if len(args) > 1 else None
            if type(name) is str and not S.ffi and name.rpartition(".")[2] in _NATIVE:
                found = candidate_on_stack(_caller(4)) or "code outside the candidate's files"
                _fire("native_code", "an import of %s from %s" % (name, found))
                raise RefusedImport("No module named %r (no foreign-function interface here)" % name)
            if type(path) is str and _written_during_run(path):      # (whatever its name: the loader does not care)
                _fire("native_code", "a native extension written during the run was loaded: %s" % path)
                raise RefusedImport("native code written during the run cannot be loaded: %s" % path)

        def _written_during_run(path):
            """Changed since the go, on a mount the run can write. (A file of a read-only mount is not the run's
            whatever its ctime: the host links the interpreter's files into other environments meanwhile.)"""
            try:
                if _stat(path).st_ctime < S.t0:
                    return False
                folder = path.rpartition("/")[0] or "."
                ro = S.readonly_dirs.get(folder)
                if ro is None:
                    ro = S.readonly_dirs[folder] = bool(_statvfs(folder).f_flag & _ST_RDONLY)
                return not ro
            except (OSError, ValueError, TypeError):
                return False

        def _bytecode_file(frame, args):
            """Bytecode the run wrote itself and then loads (a .pyc next to a module, pytest's rewritten test module,
            a bare .pyc): the interpreter trusts bytecode, so crafted instructions read and write any memory. Such
            a file must be exactly what compiling its source gives; else it is refused (importlib and pytest then
            compile the source) and named."""
            if frame is None:
                return
            code = frame.f_code
            if code.co_name == "_compile_bytecode" and code.co_filename.startswith("<frozen"):
                local = frame.f_locals
                path, source = local.get("bytecode_path"), local.get("source_path")
                if type(path) is not str or not _written_during_run(path):
                    return
                if args and type(args[0]) is bytes:
                    try:
                        if type(source) is str:
                            with open(source, "rb") as fh:
                                text, name, optimize = fh.read(), source, -1
                        else:                    # a bare .pyc: the source py_compile compiled for it this run
                            text, name, optimize = S.compiled_pycs[_abs(path)]
                        if _loads(args[0]) == _compile(text, name, "exec", dont_inherit=True, optimize=optimize):
                            return
                    except (OSError, LookupError, ValueError, TypeError, SyntaxError, EOFError):
                        pass
            elif code.co_name == "_read_pyc" and "_pytest" in code.co_filename:
                fp = frame.f_locals.get("fp")
                path = fp.name if type(fp) is _BufferedReader else None
                if type(path) is not str or not _written_during_run(path):
                    return
                written = S.pytest_pycs.get(_abs(path))
                if written is not None:          # pytest's own rewrite, as it wrote it (pytester's inner runs)
                    try:
                        with open(path, "rb") as fh:
                            if fh.read().endswith(written):
                                return
                    except OSError:
                        pass
            else:
                return
            _fire("bytecode_planted", "bytecode written during the run was loaded: %s" % path)
            raise RefusedImport("bytecode written during the run: %s" % path)

        def _py_compile_source(frame, args):
            """`py_compile.compile` about to write the bytecode of a source it read (Django's autoreload tests compile
            a file, delete its source and import the bare .pyc): remember the source under the .pyc's path, so that
            loading that file is judged against a compile of what was compiled, as a .pyc beside its source is."""
            for _ in range(4):                   # (source_to_code and _call_with_frames_removed in between)
                if frame is None:
                    return
                code = frame.f_code
                if code.co_name == "compile" and code.co_filename.endswith("/py_compile.py") and \
                        _stdlib(code.co_filename):
                    local = frame.f_locals
                    cfile, optimize = local.get("cfile"), local.get("optimize", -1)
                    if type(cfile) is str and type(optimize) is int and len(args) > 1 and \
                            type(args[0]) in (bytes, str) and type(args[1]) is str and len(S.compiled_pycs) < 1000:
                        S.compiled_pycs[_abs(cfile)] = (args[0], args[1], optimize)
                    return
                frame = frame.f_back

        def _pytest_writes_pyc(frame):
            """pytest's assertion rewriter (trusted: outside the candidate's files) writes the module it compiled:
            remember the code it writes, so that reading that file back (`_read_pyc`) is not planted bytecode.
            (pytest-dev's own tests run pytest inside the run, on files they write: measured, every pytest-dev
            Gold was refused as bytecode_planted without this.)"""
            for _ in range(8):                   # (older pytest opens it inside atomicwrites' context manager)
                if frame is None:
                    return
                code = frame.f_code
                if code.co_name == "_write_pyc" and "_pytest" in code.co_filename and \
                        trusted_file(_abs(code.co_filename)):
                    local = frame.f_locals
                    pyc, co = local.get("pyc"), local.get("co")
                    if type(co) is types.CodeType and pyc is not None:
                        S.pytest_pycs[_abs(_fspath(pyc))] = _dumps(co)
                    return
                frame = frame.f_back

        def _open(target):
            """/proc is not there at all (sandbox/confine.py); an attempt on a memory-class file of any process, under
            any spelling, and any /proc path from the candidate's code, is named."""
            if type(target) is bytes:
                target = target.decode("utf-8", "replace")
            if type(target) is not str:
                return
            path = _normpath(target) if target.startswith("/") else target
            if not path.startswith(("/proc/", "/dev/fd/", "/dev/std")) and path != "/proc":
                return
            parts = set(path.split("/"))
            if parts & _MEM_FILES:
                _fire("proc_access", "opened %s" % target)
            else:
                found = candidate_on_stack(_caller(4))
                if found:
                    _fire("proc_access", "opened %s from %s" % (target, found))

        def _caller(skip):
            """The frame that raised the event (`skip` frames up from here), passed through standard-library
            helpers that only hand frames on to their caller."""
            try:
                frame = frame_at(skip)
            except ValueError:
                return None
            while frame is not None and frame.f_code.co_name in _FRAME_HELPERS and _stdlib(frame.f_code.co_filename):
                frame = frame.f_back
            return frame

        def _proxy_traced(frame):
            """Whether a recording proxy's frame (`recording.run_test`) on the stack from `frame` up has a trace
            function: its lines can be moved (a debugger's `jump`, `f_lineno`), the test call skipped."""
            while frame is not None:
                code = frame.f_code
                if code.co_name == "run_test" and code.co_filename.startswith(S.here) and frame.f_trace is not None:
                    return True
                frame = frame.f_back
            return False

        def in_hook(frame):
            """Whether code of the core (the dispatcher and what it calls) is on the stack from `frame` up: the
            hook's depth counter alone misses code that runs at the dispatcher's first instruction - from 3.12 the
            collector runs at the interpreter's periodic checks (a function's entry, after a call), so a finalizer
            can run inside the hook before the dispatcher has counted itself (reentry-finalizer-laundered on
            3.13). Frames are told by their globals (the core's module namespace): neither `f_back` nor
            `f_globals` raises an audit event, so the walk costs no events (each `f_code` read does)."""
            while frame is not None:
                if frame.f_globals is core_globals:
                    return True
                frame = frame.f_back
            return False

        def candidate_on_stack(frame, by_function=False):
            """The first frame of the candidate's files (any line) on the stack from `frame` up, as text, or None.
            `by_function`: only a frame running a function the candidate wrote a line of (frames of the product's
            functions in a changed file are not the candidate's: its code reaches them only through a frame of its
            own, lower on the same stack)."""
            while frame is not None:
                code = frame.f_code
                if candidate_code(code) if by_function else changed_file(code.co_filename):
                    return "%s:%d" % (code.co_filename, frame.f_lineno)
                frame = frame.f_back
            return None

        def _frame_access(frame, level, detail):
            """A frame taken by the candidate's line - or, inside the hook (`level`: code of the tested process
            running while the hook runs, a finalizer), by anyone with the candidate's code on the stack there: a
            library that compiles and runs a string it is handed (timeit.Timer, pdb's `!`) runs it as trusted code,
            and from inside the hook a frame walk reaches the dispatcher."""
            if not _by_candidate(frame, "frame_access", detail) and (level or in_hook(frame)):
                found = candidate_on_stack(frame)
                if found:
                    _fire("frame_access", "%s inside the reporter's audit hook, the candidate's %s on the stack"
                          % (detail, found))

        def _by_candidate(frame, what, detail):
            """Fire when the code that raised the event is the candidate's; True if it fired."""
            if frame is None or not candidate_line(frame.f_code, frame.f_lineno):
                return False
            _fire(what, "%s, from %s:%d" % (detail, frame.f_code.co_filename, frame.f_lineno))
            return True

        def _fire(what, detail):
            S.tamper(what, detail)

        def check_trace_functions():
            for label, fn in (("sys.gettrace()", _gettrace()), ("sys.getprofile()", _getprofile()),
                              ("threading trace hook", _threading.get("_trace_hook")),
                              ("threading profile hook", _threading.get("_profile_hook"))):
                where = _untrusted_hook(fn)
                if where:
                    report_once(("trace", label, id(fn)), "trace_hook",
                                      "%s is %s from %s" % (label, _name(fn), where))
            # the hooks the interpreter calls with an exception and its traceback (frames) - pytest sets two of
            # them around every test, its own functions; the candidate's code may not be one
            for label, space, name in _EXCEPTION_HOOKS:
                fn = space.get(name)
                where = _untrusted_hook(fn) if fn is not None else None
                if where:
                    report_once(("hook", label, id(fn)), "exception_hook",
                                "%s is %s from %s" % (label, _name(fn), where))

        def signal_handler(handler, caller):
            """A handler receives the frame a signal interrupts - any frame, the reporter's hook's too. Named (and
            the install refused by the caller): a handler from the candidate's code or a file the run wrote, one
            installed with the candidate's code anywhere on the stack (a standard-library caller such as
            `sched.scheduler.run` passes nothing on), and a native callable other than the interpreter's own
            handlers (`list.insert` would keep every frame it is handed)."""
            while caller is not None and caller.f_code.co_name == "signal" and _stdlib(caller.f_code.co_filename):
                caller = caller.f_back                     # signal.signal, the standard library's wrapper
            if type(handler) is types.FunctionType and not candidate_code(handler.__code__):
                where = None        # a function of a changed file whose own lines are the product's (Django's
                                    # autoreload installs `lambda *args: sys.exit(0)`; a Gold fix elsewhere in
                                    # autoreload.py made every Gold run `signal_handler`, 13837/14311)
            else:
                where = _untrusted_hook(handler)
            where = where or candidate_on_stack(caller, by_function=True)
            if not where and _native_callable(handler):
                where = "a native callable (%s), not a function" % _name(handler)
            if where:
                _fire("signal_handler", "a signal handler was installed by the candidate's code: %s from %s"
                      % (_name(handler), where))
                return True
            return False

        def _untrusted_hook(fn):
            """A trace, profile or signal hook: the callable, and what a bound method, partial or callable object
            brings along - a library's dispatcher (`bdb.Bdb.trace_dispatch`) bound to an instance of the
            candidate's subclass, or to a library instance holding the candidate's functions, runs the candidate's
            code, and a trace function may move a frame's next line."""
            where = _untrusted_callable(fn)
            for _ in range(4):
                if where or fn is None or isinstance(fn, (types.FunctionType, types.BuiltinFunctionType, type)):
                    return where
                if type(fn) is types.MethodType:
                    bound, fn = (fn.__self__,), fn.__func__
                elif type(fn) is functools.partial:
                    bound, fn = fn.args + tuple(fn.keywords.values()), fn.func
                else:
                    bound, fn = (fn,), None
                for obj in bound:
                    where = where or _untrusted_bound(obj)
            return where

        def _untrusted_bound(obj):
            """Where an object a hook is bound to gets behaviour from: its class's MRO, the callables of its dict."""
            for klass in _mro_of(obj if isinstance(obj, type) else type(obj)):
                found = _untrusted_callable(klass)
                if found:
                    return found
            try:
                own = list(vars(obj).values()) if not isinstance(obj, type) else []
            except TypeError:
                return None
            for value in own:        # (a library's dispatch table in the instance: profile.Profile.dispatch)
                inner = value.values() if type(value) is dict else value if type(value) in (list, tuple) else ()
                for item in [value] + list(inner)[:64]:
                    found = _untrusted_callable(item) if callable(item) else None
                    if found:
                        return found
            return None

        def _native_callable(value):
            """A callable whose behaviour is C: a builtin function or method, or a partial or bound method of one
            (the interpreter's default handlers and integers - SIG_DFL, SIG_IGN - are not handlers' code)."""
            for _ in range(4):
                if type(value) is functools.partial:
                    value = value.func
                elif type(value) is types.MethodType:
                    value = value.__func__
                else:
                    break
            if value is None or type(value) is int or any(value is d for d in _SIGNAL_DEFAULTS):
                return False
            return not isinstance(value, (types.FunctionType, type)) and (
                isinstance(value, _NATIVE_CALLABLES) or not isinstance(_lookup(type(value), "__call__"),
                                                                      types.FunctionType))

        def check_case(cls, node):
            """A unittest test class's assert/fail helpers and run machinery, as the test will resolve them, must not
            come from the candidate's code (a helper that accepts everything passes any test)."""
            seen = set()
            for klass in (_mro_of(cls) if isinstance(cls, type) else ()):
                for name, value in list(vars(klass).items()):
                    if name in seen or not (name.startswith(("assert", "fail", "_call", "_feed", "_add")) or
                                            name in _CASE_MACHINERY):
                        continue
                    seen.add(name)
                    found = _untrusted_callable(value)
                    if found:
                        report_once(("case", id(klass), name, id(value)), "runner_tampered",
                                          "%s: %s.%s is %s from %s" % (node, klass.__qualname__, name, _name(value),
                                                                        found))

        def _untrusted_callable(value, depth=0):
            """The untrusted file (or run-time code) a callable's behaviour comes from, or None."""
            if value is None or depth > 4:
                return None
            if isinstance(value, (classmethod, staticmethod)):
                return _untrusted_callable(value.__func__, depth + 1)
            if isinstance(value, property):
                for part in (value.fget, value.fset, value.fdel):
                    found = _untrusted_callable(part, depth + 1)
                    if found:
                        return found
                return None
            if isinstance(value, functools.partial):
                return _untrusted_callable(value.func, depth + 1)
            if isinstance(value, types.MethodType):
                return _untrusted_callable(value.__func__, depth + 1)
            if isinstance(value, types.FunctionType):
                known = S.functions.get(id(value))
                if known is not None and known[0] is value:
                    return known[1]
                code = value.__code__
                if code.co_filename.startswith("<"):
                    if _NO_AUDIT and namedtuple_method(value):
                        return None
                    return code.co_filename if runtime_untrusted(code) else None
                path = _abs(code.co_filename)
                if S.product_runner and path.startswith(S.workdir):
                    found = None               # the runner is the product (pytest's own repository)
                else:
                    found = None if trusted_file(path) else path
                # a file's function stays where it comes from (a code swap fires `code_swap` when it happens)
                S.functions[id(value)] = (value, found)
                return found
            if isinstance(value, type):
                memo = S.classes_seen
                known = memo.get(id(value)) if memo is not None else None
                if known is not None and known[0] is value and known[2] <= depth:
                    return known[1]              # (a result from a shallower visit saw at least as much)
                found = _untrusted_class(value, depth)
                if memo is not None:
                    memo[id(value)] = (value, found, depth)
                return found
            if isinstance(value, (types.BuiltinFunctionType, types.ModuleType)):
                return None
            call = _lookup(type(value), "__call__")
            if callable(value) and isinstance(call, types.FunctionType):
                return _untrusted_callable(type(value), depth + 1)
            return None

        def _untrusted_class(value, depth):
            """A class is untrusted when its module is a file the candidate changed, or one of its functions is."""
            module = _modules.get(_module_name(value))
            path = _module_file(module)
            if path and not trusted_file(_abs(path)) and not (
                    S.product_runner and _abs(path).startswith(S.workdir)):
                return _abs(path)
            for attr in list(vars(value).values()):
                if isinstance(attr, (types.FunctionType, classmethod, staticmethod, property)):
                    found = _untrusted_callable(attr, depth + 1)
                    if found:
                        return found
            return None

        def _provenance(where, ns, module):
            """Every callable bound in a runner namespace (a module, or a class it defines) must be the runner's own
            - or exactly an object one of the module's own import statements binds (Django's test framework imports
            product classes, and its classes keep them as attributes)."""
            for attr, value in list(ns.items()):
                if isinstance(value, types.ModuleType):
                    continue
                found = _untrusted_callable(value)
                if found and not _imported(module, value):
                    report_once(("provenance", where, attr), "runner_tampered",
                                      "%s.%s is %s from %s, not the runner's own code" % (where, attr, _name(value),
                                                                                         found))

        def _imported(module, value):
            path = _module_file(module)
            if not path or not path.endswith(".py"):
                return False
            package = vars(module).get("__package__") if isinstance(module, types.ModuleType) else None
            bindings = import_bindings(path, package if type(package) is str else "")[0]
            return any(value is _resolve(*binding) for binding in bindings.values())

        def watch(prefixes):
            """Snapshot every loaded module whose name starts with one of `prefixes`, and its classes; check
            provenance now."""
            S.classes_seen = {}
            try:
                if S.provisional:
                    S.provisional = False
                    _rebase()
                _watch(prefixes)
            finally:
                S.classes_seen = None

        def prewatch(prefixes):
            """A run started ahead of time, before its go (nothing of the checkout has run or is loaded: a run that
            had loaded a module of the checkout is stale and ends at the go): snapshot the runner now. The first
            `watch` after the go then does what a cold run's first watch does, for what changed since. (Python < 3.8:
            the code compiled at run time that is bound by then is trusted first, as the boot's end does - else the
            dataclass and attrs methods of pytest's classes were refused here: matplotlib 3.0's runs.)"""
            trust_boot_code()
            watch(prefixes)
            S.provisional = True

        def _rebase():
            """Between the early snapshot and the first watch after the go, the runner configures (pytest's
            `legacypath` adds properties to `Config`, `Node`, `Session`) and the checkout's conftest files may run.
            A cold run's first watch takes all that as its baseline, with provenance checked; so here, for what
            changed: a class is snapshot again and its provenance checked, a module whose namespace changed is
            watched again with its classes, one whose entry in sys.modules changed is dropped (`_watch` then takes
            the new one). The rest is as it was before any code of the checkout ran."""
            S.flat = None
            classes = {}
            for key, (cls, held) in S.classes.items():
                classes.setdefault(key[0], []).append((key, cls, held))
            for name, (module, snap) in list(S.modules.items()):
                own = classes.get(name, ())
                if _modules.get(name) is not module:
                    del S.modules[name]
                    for key, _, _ in own:
                        del S.classes[key]
                elif not _unchanged(vars(module), snap[2]):
                    for key, _, _ in own:
                        del S.classes[key]
                    _watch_module(name, module)
                else:
                    for key, cls, held in own:
                        if not _unchanged(vars(cls), held[2]):
                            S.classes[key] = (cls, _snapshot(vars(cls)))
                            _provenance("%s.%s" % key, vars(cls), module)

        def _watch(prefixes):
            for name, mod in sorted(_modules.items()):
                if mod is None or not isinstance(mod, types.ModuleType):
                    continue
                if not (name in prefixes or name.startswith(tuple(p + "." for p in prefixes))):
                    continue
                if name not in S.modules:
                    _watch_module(name, mod)

        def _watch_module(name, mod):
            S.flat = None
            ns = vars(mod)
            S.modules[name] = (mod, _snapshot(ns))
            for k, v in list(ns.items()):
                if isinstance(v, type) and _module_name(v) == name:
                    S.classes[(name, v.__qualname__)] = (v, _snapshot(vars(v)))
                    _provenance("%s.%s" % (name, v.__qualname__), vars(v), mod)
            _provenance(name, ns, mod)

        def watch_mapping(label, mapping, tests=0):
            """A test module's namespace: its imports must bind what they import, and nothing may rebind it later.
            `tests`: how many of its tests were collected (how `expected_codes` compiles the file; nothing else)."""
            if label in S.extra:
                return
            S.flat = None
            S.extra[label] = (mapping, _snapshot(mapping))
            path = mapping.get("__file__")
            if isinstance(path, str) and path.endswith(".py"):
                if type(tests) is int:
                    S.planned[_abs(path)] = S.planned.get(_abs(path), 0) + tests
                for name, problem in _imports_bound(path, mapping):
                    report_once(("import", label, name), "test_module_rebound", "%s: %s" % (label, problem))

        def _imports_bound(path, mapping):
            """(name, problem) for each module-level import of the test file whose name is bound to something else."""
            try:
                tree = parse(path)[1]
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

        def watch_plugins(manager, hooks):
            """Record the plugin manager's plugins and critical hook implementations: later changes are tampering."""
            S.plugins = (manager, {name: [(id(i), id(getattr(i, "function", None))) for i in
                                              _hookimpls(getattr(manager.hook, name))]
                                       for name in hooks if hasattr(manager.hook, name)},
                            {id(p) for p in manager.get_plugins()})
            for name in hooks:
                if hasattr(manager.hook, name):
                    for impl in _hookimpls(getattr(manager.hook, name)):
                        plugin_hook(impl)

        def _hookimpls(caller):
            """A hook's implementations: pluggy >= 0.7's `get_hookimpls`, or the two lists pluggy 0.6 (pytest 3.3,
            astropy 1.3) calls them from, in the order it calls them."""
            get = getattr(caller, "get_hookimpls", None)
            if get is not None:
                return get()
            return list(getattr(caller, "_nonwrappers", ())) + list(getattr(caller, "_wrappers", ()))

        def plugin_hook(impl):
            found = _untrusted_callable(getattr(impl, "function", None))
            if found:
                report_once(("plugin", id(impl)), "runner_tampered",
                                  "a pytest hook implementation (%s) comes from %s" % (_name(impl.function), found))

        def changes():
            out = []
            if not _unchanged(vars(builtins), S.builtins_held):
                out += _builtins_changes()
                S.builtins_held = _held(vars(builtins))
            if not _flat_unchanged():
                out += _namespace_changes()
                S.flat = None
            if S.plugins is not None:
                manager, hooks, plugins = S.plugins
                for name, before in hooks.items():
                    now = [(id(i), id(getattr(i, "function", None)))
                           for i in _hookimpls(getattr(manager.hook, name))]
                    if now != before:
                        out += _once(("hook", name), "runner_tampered",
                                          "the implementations of %s changed during the run" % name)
                if {id(p) for p in manager.get_plugins()} - plugins:
                    out += _once(("plugins",), "runner_tampered", "a plugin was registered during the run")
            check_trace_functions()
            return out + exception_claims()

        def _flat_unchanged():
            """Is every watched namespace exactly as held (`_unchanged` of each, and each module still the one in
            sys.modules)? One pass over flat lists of all of them, so that the common check - nothing changed at
            all, twice per test - costs what its identity tests cost: per namespace, the loops of `_namespace_changes`
            spent more in Python calls than in the tests (requests' 83 tests: 0.6 s of a 1.3 s run). A namespace
            that changes size while it is read (another thread) sends the caller to the per-namespace diff."""
            flat = S.flat
            if flat is None:
                watched = _list(_watched())
                entries = [entry for _, _, _, _, entry in watched if entry is not None]
                names, mods = [name for name, _ in entries], [module for _, module in entries]
                spaces = [space for _, _, space, _, _ in watched]
                helds = [snap[2] for _, _, _, snap, _ in watched]
                # a value the runner rebinds at every test (`_VOLATILE`) is no change to `_diff`: not compared here
                compared = [not _volatile(where, k) for _, where, _, snap, _ in watched for k in snap[2][0]]
                flat = S.flat = (names, mods, spaces, [_len(h[0]) for h in helds], _list(_chain(h[0] for h in helds)),
                                 compared, _list(_compress(_chain(h[1] for h in helds), compared)),
                                 [d for h in helds for d, _ in h[2]],
                                 _list(_chain(parts for h in helds for _, parts in h[2])))
            names, mods, spaces, lens, keys, compared, values, descriptors, parts = flat
            try:
                now = _list(_chain(_map(_parts, descriptors)))
                return (_all(_map(_is, _map(_modules.get, names), mods)) and _list(_map(_len, spaces)) == lens and
                        _all(_map(_is, _chain(spaces), keys)) and
                        _all(_map(_is, _compress(_chain(_map(_values, spaces)), compared), values)) and
                        _len(now) == _len(parts) and _all(_map(_is, now, parts)))
            except RuntimeError:
                return False

        def _watched():
            """Every namespace a check compares, in order: (what a change of it is, where, the namespace, its
            snapshot, (name, module) for a module). The runner's modules and their classes - not where the runner
            is the product (`_product_module`) - then the test modules."""
            for name, (module, snap) in S.modules.items():
                if not _product_module(name):
                    yield "runner_tampered", name, vars(module), snap, (name, module)
            for (mod, qual), (cls, snap) in S.classes.items():
                if not _product_module(mod):
                    yield "runner_tampered", "%s.%s" % (mod, qual), vars(cls), snap, None
            for label, (mapping, snap) in S.extra.items():
                yield "test_module_rebound", label, mapping, snap, None

        def _namespace_changes():
            """What changed in the watched namespaces, one by one (after `_flat_unchanged` found a difference)."""
            out = []
            for what, where, space, snap, entry in _watched():
                if entry is not None and _modules.get(entry[0]) is not entry[1]:
                    out += _once(("module", entry[0]), "runner_tampered", "sys.modules[%r] was replaced" % entry[0])
                    continue
                out += _diff(what, where, space, snap, module=entry is not None)
            return out

        def exception_claims():
            """An exception class defined by the candidate's files whose metaclass decides isinstance/issubclass
            itself (ABCMeta - whose `register` and `__subclasshook__` then decide - or a `__subclasscheck__`/
            `__instancecheck__` of its own): `pytest.raises` and `except*` of it can accept an unrelated error.
            The screen refuses the spellings it can read; this is the run-time half. (The modules of changed
            files are looked for among the modules not seen before, when sys.modules grows or shrinks.)"""
            if len(_modules) != S.claims_seen:
                S.claims_seen = len(_modules)
                for m in list(_modules.values()):
                    if id(m) not in S.claim_checked:
                        S.claim_checked[id(m)] = m
                        path = _module_file(m)
                        rel = _rel(path) if path is not None else None
                        if rel is not None and rel in S.changed:
                            S.claim_modules.append(m)
            out = []
            for module in S.claim_modules:
                for value in list(vars(module).values()):
                    if not _subclass(type, type(value)) or not _subclass(_BaseException, value):
                        continue
                    why = _claim(value)
                    if why:
                        out += _once(("claim", id(value)), "exception_claim",
                                     "%s: %s, so `pytest.raises`/`except*` of it accept what that says"
                                     % (_name(value), why))
            return out

        def _claim(cls):
            """Why exception class `cls` answers issubclass/isinstance by the candidate's say, or None: its
            metaclass's check has lines the candidate wrote, or it is an ABC (abc's checks) with a
            `__subclasshook__` the candidate wrote or classes registered into it. (A product's own metaclass
            check - Django's deprecated InvalidQuery - is the product's, not a claim.)"""
            meta = type(cls)
            for hook in ("__subclasscheck__", "__instancecheck__"):
                found = _lookup(meta, hook)
                if found is None or found is _TYPE_CHECKS[hook]:
                    continue
                if type(found) is types.FunctionType and _touched(found):
                    return "its metaclass %s's %s is the candidate's" % (_name(meta), hook)
                hookfn = vars(cls).get("__subclasshook__")
                hookfn = hookfn.__func__ if type(hookfn) is classmethod or type(hookfn) is staticmethod else hookfn
                if type(hookfn) is types.FunctionType and _touched(hookfn):
                    return "an ABC whose __subclasshook__ is the candidate's"
                if _abc_registered(cls):
                    return "an ABC with classes registered into it (%s)" % _abc_registered(cls)
            return None

        def _touched(fn):
            """Does any line of function `fn` belong to the candidate (`candidate_line`)?"""
            code = fn.__code__
            first = code.co_firstlineno
            last = first
            if _version >= (3, 10):
                for _s, _e, line in code.co_lines():
                    if line is not None and line > last:
                        last = line
            else:
                line = first
                table = code.co_lnotab
                for i in range(1, len(table), 2):
                    step = table[i]
                    line += step - 256 if step >= 128 else step
                    last = line if line > last else last
            for line in range(first, last + 1):
                if candidate_line(code, line):
                    return True
            return False

        def _builtins_changes():
            out = []
            for name, value in vars(builtins).items():
                before = S.builtins.get(name)
                if before is None:
                    if _behaviour(value):
                        out += _once(("builtins-add", name), "builtins_rebound", "builtins.%s was added" % name)
                elif _ident(value) != before:
                    out += _once(("builtins", name), "builtins_rebound", "builtins.%s was rebound" % name)
            for name, before in S.builtins.items():
                if name not in vars(builtins):
                    out += _once(("builtins-del", name), "builtins_rebound", "builtins.%s was deleted" % name)
            return out

        def _product_module(name):
            """pytest-dev: the runner is the product, and its own test suite monkeypatches it (and restores it);
            the candidate may change the runner's source anyway, so its namespaces are not compared there
            (docs/failure_kinds.md, "what is not protected")."""
            return S.product_runner and name.split(".")[0] in _RUNNER_PACKAGES

        def _diff(what, where, ns, snap, module=False):
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
                    out += _once((where, k, "del"), what, "%s.%s was deleted" % (where, k))
                elif _ident(now) != ident and not _volatile(where, k):
                    if what == "test_module_rebound" and _skipped_in_place(now, ident):
                        before[k] = _ident(now)
                        continue
                    out += _once((where, k), what, "%s.%s was rebound to %s" % (where, k, _name(now)))
            if len(ns) != len(keys) or any(k not in keys for k in list(ns.keys())):
                for k in list(ns.keys()):
                    if k not in keys and not _volatile(where, k):
                        value = ns.get(k)
                        if _behaviour(value) and not isinstance(value, types.ModuleType):
                            if module and not (k.startswith("__") and k.endswith("__")) and k not in S.builtins \
                                    and _untrusted_callable(value) is None:
                                before[k] = _ident(value)
                                keys.add(k)
                                continue
                            out += _once((where, k, "add"), what, "%s.%s was added (%s)" % (where, k, _name(value)))
            snap[2] = _held(ns)            # what was found is reported once; the next check starts from here
            return out

        def _skipped_in_place(now, ident):
            """A test module's function rebound to unittest's skip wrapper of itself (Django's
            `mark_expected_failures_and_skips` does it to the module's own functions - every Base run of 15252 was
            `test_module_rebound`): a skipped test never passes, so nothing can be forged by it. Any other
            wrapper may run something else in the test's place, and stays a rebinding."""
            if type(now) is not types.FunctionType:
                return False
            code = now.__code__
            path = code.co_filename
            if code.co_name != "skip_wrapper" or not path.endswith("/unittest/case.py") or not _stdlib(path) or \
                    not trusted_file(_abs(path)):
                return False
            wrapped = vars(now).get("__wrapped__")
            return wrapped is not None and _ident(wrapped) == ident

        def _once(key, what, detail):
            if key in S.reported:
                return []
            S.reported.add(key)
            return [(what, detail)]

        def report_once(key, what, detail):
            for w, d in _once(key, what, detail):
                S.tamper(w, d)


        def parse(path):
            """(source, module AST) of a test file as read when the run's facts arrived (before any code of the
            checkout ran), parsed once per run by functions bound at boot (a parse costs about as much as 500
            lines of tests take to run)."""
            found = S.parsed.get(path)
            if found is None or found[1] is None:
                source = found[0] if found is not None else S.originals.get(_abs(path))
                if source is None:
                    with open(path, "rb") as fh:
                        source = fh.read()
                found = S.parsed[path] = (source, _parse(source, path))
            return found

        def _tree_to_take(path):
            """A tree of `path` for a compile that takes it apart (`definitions_of`, pytest's rewriter: both change
            it in place): the one `parse` holds, handed over once - the next `parse` parses again - so that the
            tree the test module's import check needed also serves the first compile."""
            source, tree = parse(path)
            S.parsed[path] = (source, None)
            return tree

        def expected_codes(path, name, compiler=None):
            """The code objects a compile of file `path` gives its functions called `name`: the file as read when
            the interpreter started (or the go came), compiled from its text by the C compiler - no AST object of
            the process is involved - once per file. When the runner compiles test files its own way (pytest's
            assertion rewriting: `compiler(tree, source, path)`), only the definitions the node names go through
            it (`definitions_of`, a fresh parse each time): the whole file through pytest's rewriter costs more
            than a short run (0.2 s for a file of 190 asserts), but each definition costs a parse of the file (30 ms
            for requests' 1,700-line test file, against 175 ms for the whole): once WHOLE_FILE_AFTER names of one
            file were compiled, the whole file goes through the compiler once and serves the rest (an official run
            of that file's 86 tests: 2.7 s of reporter time before). A file whose collected tests are more than
            WHOLE_FILE_AFTER (`watch_mapping`'s count) goes through the compiler whole at once."""
            key = (path, name, compiler)
            if key not in S.compiled:
                source = parse(path)[0]
                whole = S.whole.get((path, compiler))
                if whole is None and compiler is None:
                    whole = S.whole[(path, None)] = _compile(source, path, "exec", dont_inherit=True)
                if whole is None:
                    one_by_one = S.one_by_one[(path, compiler)] = S.one_by_one.get((path, compiler), 0) + 1
                    module = None
                    if one_by_one <= WHOLE_FILE_AFTER and S.planned.get(_abs(path), 0) <= WHOLE_FILE_AFTER:
                        module = definitions_of(_tree_to_take(path), name)
                    if module is not None:
                        S.compiled[key] = codes_named(compiler(module, source, path), name)
                        return S.compiled[key]
                    # (or the definition sits inside a function: only the whole file's compile has it)
                    whole = S.whole[(path, compiler)] = compiler(_tree_to_take(path), source, path)
                S.compiled[key] = codes_named(whole, name)
            return S.compiled[key]

        def _same_handlers(code, path, name):
            """pytest as the product compiles its tests with its own (the candidate's) assertion rewriter, which the
            reference compile then shares. Rewriting asserts adds no exception handler; a rewriter that wraps test
            bodies in try/except does - compared with a plain compile of the same file."""
            plain = expected_codes(path, name)
            if plain and all(_handlers(code) != _handlers(p) for p in plain):
                return ("the assertion rewriter changed %s's exception handling (%d handlers, %d in a plain compile of "
                        "the file)" % (name, _handlers(code), _handlers(plain[0])))
            return None

        def check_test_callable(fn, name, path, compiler=None, max_wrappers=8):
            """None if calling `fn` runs the test `name` of file `path` as written; else why not. Wrappers
            (decorators such as mock.patch) are followed through `__wrapped__` when their own code is trusted."""
            try:
                expected = expected_codes(path, name, compiler)
            except (OSError, SyntaxError, ValueError, TypeError) as exc:
                return "cannot compile %s to check %s: %r" % (path, name, exc)
            if not expected:
                return _generated_test(fn, name, path, compiler, max_wrappers)
            return _runs_test(fn, name, path, compiler, expected, max_wrappers)

        def _generated_test(fn, name, path, compiler, budget):
            """A test method the file does not define by its name, made at import as a partial of a function it
            does define (Django's `register_tests`: `setattr(cls, 'test_json_serializer', partialmethod(
            serializerTest, 'json'))`; its tests were all `test_code` - 12209): the function must be the file's
            as written, and nothing bound to it the candidate's code."""
            missing = "%s defines no function %s" % (path, name)
            cur = fn.__func__ if isinstance(fn, types.MethodType) else fn
            if type(cur) is not functools.partial:
                return missing
            inner = cur.func.__func__ if isinstance(cur.func, types.MethodType) else cur.func
            if type(inner) is not types.FunctionType:
                return missing
            for value in cur.args + tuple(cur.keywords.values()):
                where = _untrusted_callable(value) if callable(value) else None
                if where:
                    return "%s binds %s from %s to %s" % (name, _name(value), where, _name(inner))
            real = inner.__name__
            try:
                expected = expected_codes(path, real, compiler)
            except (OSError, SyntaxError, ValueError, TypeError) as exc:
                return "cannot compile %s to check %s: %r" % (path, real, exc)
            if not expected:
                return missing
            return _runs_test(inner, real, path, compiler, expected, budget)

        def _runs_test(cur, name, path, compiler, expected, budget):
            """`check_test_callable` from `cur` on, through at most `budget` wrappers. A wrapper whose code is
            trusted leads to the function it wraps: `__wrapped__` (functools.wraps), else the functions its
            closure holds (matplotlib's `check_figures_equal` wraps the test in a closure, with no
            `__wrapped__`) - the test must be one of them."""
            if budget < 0:
                return "%s is wrapped too deeply to follow to the test" % name
            cur = cur.__func__ if isinstance(cur, types.MethodType) else cur
            code = cur.__code__ if isinstance(cur, types.FunctionType) else None
            if code is None:
                held = _held_callee(cur)
                if held is None:
                    return "%s is %s, not a function" % (name, type(cur).__name__)
                return _runs_test(held, name, path, compiler, expected, budget - 1)
            if _abs(code.co_filename) == _abs(path) and any(code == c for c in expected):
                if compiler is not None and S.product_runner:
                    problem = _same_handlers(code, path, name)
                    if problem:
                        return problem
                module = _modules.get(_module_name(cur))
                if module is not None and cur.__globals__ is not vars(module):
                    return "%s runs with globals that are not its module's" % name
                return None
            problem = ("the function that runs as %s is %s from %s, not the test %s defines (its code differs "
                       "from a compile of the file)" % (name, _name(cur), code.co_filename, path))
            if not trusted_file(_abs(code.co_filename)):
                return problem
            wrapped = vars(cur).get("__wrapped__")
            if wrapped is not None:
                return _runs_test(wrapped, name, path, compiler, expected, budget - 1)
            held = [c.cell_contents for c in (cur.__closure__ or ()) if _cell_function(c)]
            for inner in held:
                if _runs_test(inner, name, path, compiler, expected, budget - 1) is None:
                    return None
            return problem

        def _cell_function(cell):
            try:
                value = cell.cell_contents
            except ValueError:                   # (an empty cell)
                return False
            kind = type(value)                   # (compared by identity: `==` would ask the value's metaclass)
            return kind is types.FunctionType or kind is types.MethodType

        def _held_callee(obj):
            """The function a trusted wrapper object calls (`_CALLEE_ATTRS`): Django runs each `async def` test
            through asgiref's `AsyncToSync`, which calls the coroutine function it holds. The class must be the one
            its module defines, that module outside the checkout, and no function of the class the candidate's."""
            cls = type(obj)
            qualname = _type_qualname(cls)
            attr = _CALLEE_ATTRS.get((_module_name(cls), qualname))
            module = _modules.get(_module_name(cls))
            path = _module_file(module)
            if attr is None or path is None or vars(module).get(qualname) is not cls or \
                    _abs(path).startswith(S.workdir) or not trusted_file(_abs(path)) or _untrusted_class(cls, 0):
                return None
            return vars(obj).get(attr) if hasattr(obj, "__dict__") else None

        S.tamper = tamper
        S.workdir = _abspath(config.get("workdir", "/testbed")) + "/"
        S.here = _HERE
        S.builtins = {k: _ident(v) for k, v in vars(builtins).items()}
        S.builtins_held = _held(vars(builtins))
        S.modules = {}          # module name -> (module, snapshot)
        S.classes = {}          # (module, qualname) -> (class, snapshot)
        S.extra = {}            # label -> (mapping, snapshot) for test modules
        S.flat = None           # all of them as flat lists (`_flat_unchanged`), made again after any change
        S.plugins = None        # (plugin manager, {hook: [impl ids]}, {plugin ids}) once collection is done
        S.reported = set()
        S.rels = {}             # absolute file name -> path in the checkout (None: outside)
        S.functions = {}        # id(function) -> (function, the untrusted file it comes from or None)
        S.classes_seen = None   # the same for classes, during one `watch` (a class can gain methods later)
        S.compiled = {}         # (path, name, compiler) -> [code objects the file defines for `name`]
        S.whole = {}            # (path, compiler) -> the code of the whole file (expected_codes)
        S.one_by_one = {}       # (path, compiler) -> how many of its definitions were compiled one by one
        S.parsed = {}           # path -> (source, module AST or None once a compile took it: `_tree_to_take`)
        S.planned = {}          # absolute path of a test file -> how many of its tests were collected
        S.namedtuples = {}      # (typename, fields, defaults) -> the reference namedtuple (`namedtuple_method`)
        S.pytest_pycs = {}      # pyc path -> the marshalled code pytest's rewriter wrote there this run
        S.compiled_pycs = {}    # pyc path -> (source, filename, optimize) py_compile compiled for it this run
        set_facts(config)
        S.trusted_runtime, S.candidate_runtime, S.runtime_refs = set(), set(), []
        # True when the runner's own package lives in the checkout (pytest-dev/pytest): its code is the
        # candidate's to change, so provenance cannot apply to it; snapshots, the raw-outcome proxy and the
        # test-code check still do (docs/failure_kinds.md, "what is not protected")
        S.product_runner = False
        S.provisional = False   # the snapshots were taken before the go of a run started ahead (prewatch)
        # a run started ahead, until its go: files of the checkout whose code ran (a module that hides from
        # sys.modules after running still ran: the run is stale all the same)
        S.early_code = set() if config.get("prestart") else None
        for _fn in (set_facts, _rel, _abs, changed_file, run_written, trusted_file, candidate_line, runtime_untrusted,
                    _note_runtime, namedtuple_method, _own_introspection, trust_boot_code, _stdlib, audit, _pytest_writes_pyc, _import, _written_during_run, _bytecode_file, _open,
                    _caller, in_hook, candidate_on_stack, _by_candidate, _fire, check_trace_functions, exception_claims, _claim, _touched,
                    signal_handler, _native_callable, check_case, _untrusted_callable, _untrusted_class, _provenance,
                    _imported, watch, prewatch, _rebase, _watch, _watch_module, watch_mapping,
                    _imports_bound, watch_plugins, _hookimpls, plugin_hook, changes, _builtins_changes, _product_module,
                    _diff, _once, report_once, parse, expected_codes, _same_handlers, check_test_callable):
            vars(S)[_fn.__name__] = _fn
        S._report_once = report_once
        return S

    _SETUPS = {_opcode_module.opmap[n] for n in ("SETUP_FINALLY", "SETUP_EXCEPT", "SETUP_WITH", "SETUP_ASYNC_WITH")
               if n in _opcode_module.opmap}

    def _handlers(code):
        """How many exception handlers a function's code sets up (nested code included): the distinct targets of
        its exception table (3.11+: the varint format `dis` reads), or its SETUP_* instructions."""
        total = 0
        table = getattr(code, "co_exceptiontable", None)
        if table is not None:
            targets, entry, i = set(), [], 0
            while i < len(table):
                b = table[i]
                val = b & 63
                while b & 64:
                    i += 1
                    b = table[i]
                    val = (val << 6) | (b & 63)
                i += 1
                entry.append(val)
                if len(entry) == 4:             # start, length, target, depth+lasti
                    targets.add(entry[2])
                    entry = []
            total += len(targets)
        else:
            raw = code.co_code
            total += sum(1 for j in range(0, len(raw), 2) if raw[j] in _SETUPS)
        return total + sum(_handlers(c) for c in code.co_consts if isinstance(c, types.CodeType))


    # Names the runners themselves rebind or add during a run (each with the reason).
    _VOLATILE = {
        # pytest's assertion plugin installs the per-test comparison hook and resets it after each test
        ("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
        ("_pytest.assertion.util", "_config"),
    }


    def _flags_only(fn, new):
        """A code swap that changes nothing but the flags (the standard library's `types.coroutine` marks a
        generator function as an iterable coroutine this way) runs the same instructions. The file name must stay:
        code equality ignores it, and a file name is what says whose code a function is."""
        return _same_code(fn, new, "co_flags") and fn.__code__.co_filename == new.co_filename

    def _renamed_only(fn, new):
        """The same instructions under another name, file name and first line (`_library_relabels`)."""
        return _same_code(fn, new, "co_flags", "co_name", "co_qualname", "co_firstlineno")

    def _same_code(fn, new, *fields):
        """`new` equals `fn`'s code once `fields` are copied from it (code equality ignores co_filename)."""
        old = fn.__code__ if isinstance(fn, types.FunctionType) else None
        if not isinstance(old, types.CodeType) or not isinstance(new, types.CodeType):
            return False
        try:
            return old.replace(**{f: getattr(new, f) for f in fields if hasattr(new, f)}) == new
        except Exception:
            return False


    def _volatile(where, attr):
        return (where, attr) in _VOLATILE


    def _module_name(obj):
        """The `__module__` a class or function says it comes from (a str, else ""), read from its own dict."""
        mod = obj.__module__ if type(obj) is types.FunctionType else (
            vars(obj).get("__module__") if isinstance(obj, type) else None)
        return mod if type(mod) is str else ""

    def _module_file(module):
        path = vars(module).get("__file__") if isinstance(module, types.ModuleType) else None
        return path if type(path) is str else None

    def _lookup(cls, name):
        """`name` as the class's MRO defines it, read from the dicts (a metaclass's `__getattribute__` is code)."""
        for klass in _mro_of(cls):
            found = vars(klass).get(name, _lookup)
            if found is not _lookup:
                return found
        return None

    def _name(obj):
        """A name for messages, read without running any code of the object's class."""
        t = type(obj)
        if isinstance(obj, type):
            mod = vars(obj).get("__module__")
            return "%s.%s" % (mod if type(mod) is str else "?", _qualname_of(obj))
        if t is types.FunctionType:
            mod = obj.__module__
            return "%s.%s" % (mod if type(mod) is str else "?", obj.__qualname__)
        mod = vars(t).get("__module__")
        return "%s.%s instance" % (mod if type(mod) is str else "?", _qualname_of(t))


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
                    tree = _parse(fh.read(), path)
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
                    names = [t]
                    while names:                  # (Name, or Tuple/List/Starred of them: what a target binds)
                        n = names.pop()
                        if isinstance(n, ast.Name):
                            defined.add(n.id)
                        elif isinstance(n, (ast.Tuple, ast.List)):
                            names.extend(n.elts)
                        elif isinstance(n, ast.Starred):
                            names.append(n.value)
            elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(stmt, field, None) or ():
                        stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
        _BINDINGS[key] = (bindings, defined)
        return _BINDINGS[key]


    def _resolve(module, attr):
        """What `import module` / `from module import attr` binds now, without running any code (None: unknown)."""
        mod = _modules.get(module)
        if mod is None:
            return None
        if attr is None:
            return mod
        ns = vars(mod)
        if attr in ns:
            return ns[attr]
        return _modules.get(module + "." + attr)


    def definitions_of(tree, name):
        """A module holding only the file's definitions called `name` - at top level, in classes (as shells that
        keep the class's scope: `super()`'s cell), or under if/try/with/loop blocks (lifted: a block makes no
        scope) - after the file's docstring and `__future__` imports (which decide code flags and whether pytest
        rewrites at all), with the module's import statements (which decide how 3.11+ compiles calls on imported
        names). Each definition keeps its position, decorators and defaults, so its code object equals the one a
        compile of the whole file gives. None when a definition of that name sits inside a function (a class
        a factory builds): only the whole file's compile has it. Nothing here runs: the module is only compiled.
        `tree` is taken apart (a fresh parse each time: no copy module is involved)."""
        def pick(stmts, in_class):
            out = []
            for stmt in stmts:
                if isinstance(stmt, _DEFS):
                    if stmt.name == name:
                        out.append(stmt)
                    elif _defines(stmt.body, name):
                        raise LookupError(name)
                elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    if not in_class and getattr(stmt, "module", None) != "__future__":
                        out.append(stmt)   # 3.11+: a name the module imports is called without LOAD_METHOD
                elif isinstance(stmt, ast.ClassDef):
                    inner = pick(stmt.body, True)
                    if any(isinstance(s, (_DEFS, ast.ClassDef)) for s in inner):
                        shell = stmt
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
                head.append(stmt)
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
    return {"Guard": Guard, "EVENTS": EVENTS, "REFUSALS": (RefusedImport, RefusedHook, RefusedWrite),
            "definitions_of": definitions_of, "codes_named": codes_named, "import_bindings": import_bindings,
            "_snapshot": _snapshot, "_held": _held, "_unchanged": _unchanged, "_ident": _ident, "_name": _name,
            "_handlers": _handlers, "_flags_only": _flags_only, "_abspath": _abspath, "_normpath": _normpath}


globals().update(_build())
