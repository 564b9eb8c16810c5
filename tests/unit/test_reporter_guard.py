"""The reporter's reference compile covers only the definitions a node names (`Guard.expected_codes` with
`guard.definitions_of`, then the whole file once a file's definitions were compiled one by one WHOLE_FILE_AFTER times),
for speed; it must give exactly the code objects a compile of the whole file gives, or every test would be
`test_code` tampering. Checked on real files - the standard library's own test modules under every local
CPython, this project's test files through the installed pytest's assertion rewriter - and on a file of the
edge cases (class cells, decorators, definitions under blocks, `__future__` flags, Python 3.11's calls on
imported names, pytest's opt-out docstring)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

INSIDE = Path(__file__).resolve().parents[2] / "execcritic" / "harness" / "reporter" / "inside"
ROOT = Path(__file__).resolve().parents[2]

EDGES = textwrap.dedent('''\
    """Edge cases for the reference compile."""
    from __future__ import annotations
    import os
    from os import path as osp
    try:
        import json
    except ImportError:
        json = None


    def deco(fn):
        return fn


    class Base:
        def test_super(self):
            assert super().__init__() is None
            return __class__

        class Inner:
            @deco
            def test_nested(self, x: int = 3) -> list[int]:
                return [os.path.join("a", str(x)), osp.basename("/b"), json.dumps(x)]


    if True:
        def test_under_if():
            assert (lambda y: y + 1)(1) == 2
    try:
        async def test_async():
            return [i async for i in object()]
    finally:
        pass


    def factory():
        class TestMade:
            def test_made(self):
                return super().__init__()
        return TestMade


    class WithBlock:
        if os.name:
            def test_in_class_block(self):
                return [x for x in range(3)]
        else:
            def test_in_class_block(self):
                return None


    def test_twice():
        return 1


    def test_twice():
        assert os.getcwd() != "", "cwd"
        return {k: v for k, v in os.environ.items()}
''')

# run under each interpreter: every test function of each file, partial compile vs whole-file compile
CHECK = textwrap.dedent('''\
    import ast, sys
    sys.path.insert(0, sys.argv[1])
    from execcritic_reporter.guard import Guard, codes_named
    mode, files = sys.argv[2], sys.argv[3:]
    guard = Guard({"workdir": "/nonexistent"}, tamper=None)
    if mode == "rewrite":
        from _pytest.assertion import rewrite
        def comp(tree, source, path):
            rewrite.rewrite_asserts(tree, source, path, None)
            return compile(tree, path, "exec", dont_inherit=True)
    else:
        comp = None
    checked = bad = 0
    for path in files:
        source = open(path, "rb").read()
        try:
            tree = ast.parse(source, filename=path)
            whole = comp(tree, source, path) if comp else compile(source, path, "exec", dont_inherit=True)
        except SyntaxError:
            continue
        tree = ast.parse(source, filename=path)
        names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name.startswith("test")}
        for name in sorted(names):
            want = codes_named(whole, name)
            # a guard of its own compiles this one definition; the shared one compiles the whole file once it has
            # compiled WHOLE_FILE_AFTER of the file's definitions one by one: both must give the whole file's codes
            alone = Guard({"workdir": "/nonexistent"}, tamper=None).expected_codes(path, name, comp)
            shared = guard.expected_codes(path, name, comp)
            if not want:
                continue                 # defined only inside a function: not a test the runner collects
            checked += 1
            for got in (alone, shared):
                if len(got) != len(want) or not all(any(g == w for w in want) for g in got):
                    bad += 1
                    print("MISMATCH", path, name)
    print("checked", checked, "mismatches", bad)
''')


def _interpreters() -> list[str]:
    """This interpreter and every other local CPython 3.6+ (pyenv's versions first: its shims may not run)."""
    found = [sys.executable]
    root = Path.home() / ".pyenv" / "versions"
    for version in ("3.6", "3.7", "3.8", "3.9", "3.10", "3.12", "3.13"):
        options = [str(p / "bin" / "python3") for p in sorted(root.glob(f"{version}.*"))] if root.is_dir() else []
        options.append(shutil.which(f"python{version}") or "")
        for exe in options:
            if exe and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
                found.append(exe)
                break
    return found


def _check(exe: str, mode: str, files: list[Path]) -> tuple[int, str]:
    proc = subprocess.run([exe, "-c", CHECK, str(INSIDE), mode, *map(str, files)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1].split()
    assert last[0] == "checked" and last[2] == "mismatches", proc.stdout
    return int(last[1]), proc.stdout


@pytest.mark.parametrize("exe", _interpreters())
def test_partial_compile_equals_whole_file_on_stdlib_tests(exe, tmp_path):
    stdlib_tests = subprocess.run([exe, "-c", "import os, test; print(os.path.dirname(test.__file__))"],
                                  capture_output=True, text=True).stdout.strip()
    files = [f for f in sorted(Path(stdlib_tests).glob("test_*.py")) if f.stat().st_size < 40_000][:12] \
        if stdlib_tests else []
    edges = tmp_path / "test_edges.py"
    edges.write_text(EDGES)                   # (3.6 has no `annotations` future: a SyntaxError there, skipped)
    checked, out = _check(exe, "plain", [edges, *files])
    assert checked >= 6, out
    assert "mismatches 0" in out, out


def test_partial_compile_equals_whole_file_through_pytests_rewriter(tmp_path):
    edges = tmp_path / "test_edges.py"
    edges.write_text(EDGES)
    dont = tmp_path / "test_dont.py"
    dont.write_text('"""PYTEST_DONT_REWRITE"""\n' + EDGES.split('\n', 1)[1].replace("from __future__ import annotations\n", ""))
    files = [edges, dont, *sorted((ROOT / "tests").rglob("test_*.py"))[:30]]
    checked, out = _check(sys.executable, "rewrite", files)
    assert checked >= 150, out
    assert "mismatches 0" in out, out


def test_a_different_body_is_a_different_code():
    """The comparison the guard relies on can fail: a recompiled body (same name, file and line) differs."""
    import ast

    sys.path.insert(0, str(INSIDE))
    try:
        from execcritic_reporter.guard import codes_named, definitions_of
    finally:
        sys.path.remove(str(INSIDE))
    source = "import os\n\ndef test_x():\n    assert os.sep == '?'\n"
    forged = "import os\n\ndef test_x():\n    return os.sep == '?'\n"
    want = codes_named(compile(definitions_of(ast.parse(source), "test_x"), "f.py", "exec"), "test_x")
    got = codes_named(compile(forged, "f.py", "exec"), "test_x")
    assert len(want) == len(got) == 1 and want[0] != got[0]
    assert want[0] == codes_named(compile(source, "f.py", "exec"), "test_x")[0]


NAMEDTUPLE = textwrap.dedent('''\
    import collections, sys, types
    sys.path.insert(0, sys.argv[1])
    from execcritic_reporter.guard import Guard
    guard = Guard({"workdir": "/nonexistent"}, tamper=None)
    Point = collections.namedtuple("Point", "x y")
    methods = [getattr(v, "__func__", v) for v in vars(Point).values()]
    methods = [m for m in methods if isinstance(m, types.FunctionType) and m.__code__.co_filename.startswith("<")]
    ns = {"__name__": "namedtuple_Point", "Point": Point}
    exec("def _replace(_self, **kwds):\\n    return 'forged'\\n", ns)
    print(len(methods), all(guard.namedtuple_method(m) for m in methods), guard.namedtuple_method(ns["_replace"]),
          guard._untrusted_callable(ns["_replace"]))
''')


BOOT_CODE = textwrap.dedent('''\
    import os, sys, types
    sys.path.insert(0, sys.argv[1])
    from execcritic_reporter.guard import Guard

    def generated(text, name):        # attrs: a method compiled from a string, under a name that is no file
        scope = {}
        exec(compile(text, name, "exec"), scope)
        return scope["__init__"]

    runner = types.ModuleType("runnerlike")      # as pytest's modules are loaded when the reporter boots
    sys.modules["runnerlike"] = runner
    exec("class FixtureFunctionMarker(object):\\n    pass\\n", vars(runner))
    runner.FixtureFunctionMarker.__init__ = generated("def __init__(self, scope):\\n    self.scope = scope\\n",
                                                      "<attrs generated init 1a2b>")
    workdir = sys.argv[2]
    if sys.argv[3] == "checkout loaded":         # a module of the checkout had run before the boot ended
        checkout = types.ModuleType("pkg")
        checkout.__file__ = os.path.join(workdir, "pkg", "__init__.py")
        exec("x = 1", vars(checkout))          # ran (a module only made from its spec ran nothing: it is trusted)
        sys.modules["pkg"] = checkout
    guard = Guard({"workdir": workdir}, tamper=None)
    before = guard._untrusted_callable(runner.FixtureFunctionMarker.__init__)
    guard.trust_boot_code()
    at_boot = guard._untrusted_callable(runner.FixtureFunctionMarker.__init__)
    late = generated("def __init__(self, scope):\\n    self.scope = 'forged'\\n", "<attrs generated init 3c4d>")
    print("|".join(map(str, (before, at_boot, guard._untrusted_callable(late)))))
''')


@pytest.mark.parametrize("exe", [e for e in _interpreters() if subprocess.run(
    [e, "-c", "import sys; sys.exit(sys.version_info >= (3, 8))"]).returncode == 0] or ["none"])
@pytest.mark.parametrize("case", ["clean boot", "checkout loaded"])
def test_without_audit_hooks_code_compiled_before_the_boot_ended_is_trusted(exe, case, tmp_path):
    """Python < 3.8 has no `exec` event, and pytest's classes get `__init__` from attrs, which compiles it from a
    string: every astropy 1.3 run (Python 3.6, pytest 3.3, attrs 17.3) was refused as `runner_tampered`. What
    the modules loaded when the boot ends bind was made before any code of the checkout ran, so it is trusted;
    code compiled later is not, and nothing is when a module of the checkout was already loaded."""
    if exe == "none":
        pytest.skip("no local CPython < 3.8 (the rule applies only there)")
    proc = subprocess.run([exe, "-c", BOOT_CODE, str(INSIDE), str(tmp_path), case], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, at_boot, late = proc.stdout.strip().split("|")
    assert before == "<attrs generated init 1a2b>" and late == "<attrs generated init 3c4d>", proc.stdout
    assert at_boot == ("None" if case == "clean boot" else before), proc.stdout


@pytest.mark.parametrize("exe", [e for e in _interpreters() if subprocess.run(
    [e, "-c", "import sys; sys.exit(sys.version_info >= (3, 8))"]).returncode == 0] or ["none"])
def test_without_audit_hooks_namedtuple_methods_are_trusted_and_only_they(exe):
    """Python < 3.8 has no `exec` audit event, so code compiled at run time is untrusted - but 3.6's namedtuple
    execs its class template, and unittest's own classes (Django's runner) carry such methods. Exactly the
    methods the standard library's namedtuple generates for the class are trusted; a look-alike is not."""
    if exe == "none":
        pytest.skip("no local CPython < 3.8 (the check applies only there)")
    proc = subprocess.run([exe, "-c", NAMEDTUPLE, str(INSIDE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, trusted, forged, untrusted = proc.stdout.split()
    assert int(count) >= 1 and trusted == "True" and forged == "False" and untrusted == "<string>", proc.stdout
