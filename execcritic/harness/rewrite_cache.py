"""pytest's rewritten test modules, compiled once by a Base run and served to every later run of the sandbox.

Why: an exact reset restores the Base tree, so every run's pytest rewrites the bundle's test modules and the
conftests afresh (assertion rewriting: parse, rewrite, compile) - about a third of a short run. The bare
command does not pay this: pytest keeps the rewritten module in `__pycache__/<name>.<tag>-pytest-<ver>.pyc`,
valid while the source's mtime and size match.

Why it cannot be poisoned: the cache lives in the harness (on the Sandbox object), not in the tree; a run
only ever sees a copy the harness writes after the reset, which the next reset removes. It is filled only
from a run of Base with nothing but the bundle applied (no source patch: no candidate's or Gold's code ran),
only from a run the reporter found clean, and only for that bundle: what one bundle's run wrote (a test that
overwrites a conftest's pyc) is never served to another bundle. A file of the bundle is keyed by its
content, so its pyc is served only beside the very source it was compiled from; a Base file's (a conftest)
only when no patch of the run changes that file; and a run whose patches touch the rewriter or pytest's
configuration outside the bundle's Python files (a pytest-dev Gold patch, an ini file) gets nothing served
and rewrites as pytest would. The bundle's files get one fixed mtime after every apply (`MTIME`), so that
pytest's own staleness check (mtime + size) accepts the copy; a candidate that writes its own pyc during a
run affects that run only, where the reporter compares the test functions that run with the code it
compiles from the source.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
import weakref
from dataclasses import dataclass

from execcritic.sandbox.base import Sandbox

#: what decides how pytest rewrites a test module besides its source: the rewriter itself (the runner's own
#: packages, in the checkout on pytest-dev tasks) and the configuration (conftests, ini files)
RUNNER_PACKAGES = frozenset({"pytest", "_pytest", "py", "pluggy"})
CONFIG_FILES = frozenset({"conftest.py", "setup.cfg", "tox.ini", "pytest.ini", ".pytest.ini", "pyproject.toml"})

#: the mtime every applied test file gets (2001-09-09): the same on every run, so a pyc stays valid
MTIME = 1_000_000_000

# sandbox -> bundle (its test patch's sha256) -> (source, content sha256 or BASE) -> (pyc path, pyc bytes)
_CACHES: "weakref.WeakKeyDictionary[Sandbox, dict[str, dict[tuple[str, str], tuple[str, bytes]]]]" = \
    weakref.WeakKeyDictionary()
BASE = "base"       # the key of a file no patch touches: its content (and mtime) is the Base's on every run


@dataclass
class Served:
    """What `prepare` did for one run: the bundle, the test files it pinned (with their content), the paths the
    patches change, and the sources it served a cached pyc for."""
    bundle: str
    contents: dict[str, bytes]
    changed: frozenset[str]
    served: list[str]


def may_change_rewrite(path: str) -> bool:
    """Could a patch to `path` change what pytest compiles a test module to? Then nothing is served to that
    run (a Gold patch of pytest's assertion rewriter must rewrite the tests itself)."""
    parts = path.split("/")
    return parts[-1] in CONFIG_FILES or any(p in RUNNER_PACKAGES for p in parts[:-1])


def serves(paths: set[str], test_files: list[str]) -> bool:
    """Whether a run whose patches change `paths` may use the cache."""
    return not any(may_change_rewrite(p) for p in paths - set(test_files))


def _key(path: str, data: bytes) -> tuple[str, str]:
    return path, hashlib.sha256(data).hexdigest()


def _cache(sandbox: Sandbox, bundle: str) -> dict[tuple[str, str], tuple[str, bytes]]:
    return _CACHES.setdefault(sandbox, {}).setdefault(bundle, {})


def prepare(sandbox: Sandbox, bundle: str, test_files: list[str], changed: set[str]) -> Served:
    """After the patches are applied (and the tree judged), before the run: pin each test file's mtime and
    write what this bundle's clean Base run compiled - the test files' by their content, the Base's own files'
    (conftests) unless a patch changes them. `bundle`: the sha256 of the bundle's test patch."""
    cache = _cache(sandbox, bundle)
    root = sandbox.workdir.rstrip("/")
    contents: dict[str, bytes] = {}
    hits: list[tuple[str, str, bytes]] = []
    for path in test_files:
        try:
            data = sandbox.read_file(f"{root}/{path}")
        except (OSError, ValueError):     # deleted by the patch, a directory, a link the sandbox will not follow
            continue
        contents[path] = data
        hit = cache.get(_key(path, data))
        if hit is not None:
            hits.append((path, *hit))
    hits += [(path, *hit) for (path, key), hit in cache.items()
             if key == BASE and path not in changed and path not in contents]
    # the pycs keep the pinned mtime too: a rewrite by pytest would show
    try:
        sandbox.write_files([(f"{root}/{path}", data, 0o644, MTIME) for path, data in contents.items()] +
                            [(f"{root}/{pyc_rel}", pyc, 0o644, MTIME) for _path, pyc_rel, pyc in hits])
    except (OSError, ValueError):         # nothing pinned or served: pytest rewrites, as without the cache
        return Served(bundle, {}, frozenset(changed), [])
    return Served(bundle, contents, frozenset(changed), sorted(h[0] for h in hits))


def capture(sandbox: Sandbox, served: Served, *, timeout: float = 60.0) -> list[str]:
    """After a clean run of Base + the bundle: keep every pyc pytest wrote (test modules, conftests) whose
    source is a test file of the bundle or a file no patch changes. Returns the sources captured. Nothing to
    do when every test file was served (the run that compiled them captured the conftests too)."""
    if not set(served.contents) - set(served.served):
        return []
    root = sandbox.workdir.rstrip("/")
    listing = sandbox.run(f"cd {shlex.quote(root)} && find . -path '*/__pycache__/*-pytest-*.pyc' -type f "
                          "-not -path './.git/*' 2>/dev/null; true", timeout=timeout)
    cache = _cache(sandbox, served.bundle)
    out = []
    for line in listing.output.splitlines():
        pyc_rel = posixpath.normpath(line.strip())
        pycache, name = posixpath.split(pyc_rel)
        if posixpath.basename(pycache) != "__pycache__" or "." not in name:
            continue
        source = posixpath.join(posixpath.dirname(pycache), name.split(".", 1)[0] + ".py")
        if source in served.served:
            continue
        if source in served.contents:
            key = _key(source, served.contents[source])
        elif source not in served.changed:
            key = (source, BASE)
        else:
            continue
        try:
            cache[key] = (pyc_rel, sandbox.read_file(f"{root}/{pyc_rel}"))
        except (OSError, ValueError):
            continue
        out.append(source)
    return sorted(out)


def clear(sandbox: Sandbox) -> None:
    _CACHES.pop(sandbox, None)
