"""The toolchain of a `multilingual-git` repository: the Debian packages its row's eval_script builds with.

SWE-bench Multilingual's images install a compiler and the repository's build tools; here the same tools come
from the host's Debian packages (scripts/system-deps.sh installs them), seen read-only inside bubblewrap. The
environment of a repository is that set of packages at the versions installed: its lock is `dpkg-query`'s
answer, recorded in the recipe, and a checkout built with other versions is built again.

A JavaScript/TypeScript repository's image also holds the row's dependencies (node_modules), installed from its
lockfile before the eval_script runs; here that install (`DepsInstall`) runs once per checkout, the only step with
network, and its package manager is the one the row's package.json names (`packageManager`, as corepack would
pick), fetched from the npm registry into the cache (`build.tool_dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from execcritic.errors import EnvironmentMissing


@dataclass(frozen=True)
class DepsInstall:
    """A row's dependency install: what its image ran before the eval_script, which the script assumes done."""
    command: str                      # run once at /testbed with network, from the Base's lockfile
    manager: str = "npm"              # npm (Debian's nodejs ships it) or pnpm (the row's packageManager version)
    lockfile: str = "package-lock.json"
    why: str = ""                     # a difference from a plain install, measured


@dataclass(frozen=True)
class Toolchain:
    language: str                     # Table 5's language column: "C", "C++", "JavaScript/TypeScript"
    packages: tuple[str, ...]         # Debian packages the eval_script's build and test steps use
    why: str = ""                     # what needs the less obvious ones
    # environment variables every run of the row's scripts gets here -> why (a difference from the image, measured)
    run_env: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # the submodules the build uses, when not every one the Base records (None: all of them)
    submodules: tuple[str, ...] | None = None
    # the dependency install before the Base's build (node_modules from the lockfile; None: nothing to install)
    install: DepsInstall | None = None
    # eval_script steps run otherwise here: {step line: (replacement, why)} (a difference from the image, measured)
    replace_steps: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # why the runs get a procfs of the sandbox's pid namespace ("": none, the sandbox's default)
    procfs: str = ""


NO_VALGRIND_WHY = ("jq's tests run under valgrind when one is on PATH, and valgrind cannot start in the sandbox (it "
                   "reads /proc/self/maps; the sandbox has no procfs): measured on jqlang__jq-2839 and 2235, every "
                   "test FAIL. jq's own switch is NO_VALGRIND; before jq 1.7 its Makefile sets NO_VALGRIND from "
                   "configure (empty when valgrind is found) and passes that to the tests, so the switch reaches "
                   "them as a make command-line variable (MAKEFLAGS). A memory error only valgrind would report "
                   "is not seen here")

PARALLEL_MAKE_WHY = ("the row's eval_script runs `make` serially (its image's build step); redis' Makefile builds "
                     "the same targets in parallel (its README's `make -j`), and a serial build of redis with its "
                     "dependencies is minutes on a small machine. The value is this machine's CPU count")
PARALLEL_MAKE = (f"-j{max(1, os.cpu_count() or 1)}", PARALLEL_MAKE_WHY)

# The C and C++ repositories of SWE-bench Multilingual (issue 43: 42 rows). Every tool an eval_script calls is
# listed, so a machine without one says which package to install instead of failing a build step.
TOOLCHAINS: dict[str, Toolchain] = {
    "jqlang/jq": Toolchain("C", ("gcc", "make", "autoconf", "automake", "libtool", "bison", "flex", "git"),
                           "autoreconf -fi (autoconf, automake, libtool); src/parser.y and src/lexer.l are "
                           "regenerated (bison, flex); `git submodule update --init` for the builtin oniguruma",
                           {"NO_VALGRIND": ("1", NO_VALGRIND_WHY), "MAKEFLAGS": ("NO_VALGRIND=1", NO_VALGRIND_WHY)}),
    "fmtlib/fmt": Toolchain("C++", ("g++", "make", "cmake"), "GoogleTest is vendored in test/gtest"),
    "redis/redis": Toolchain("C", ("gcc", "make", "tcl"), "the test suite is Tcl (./runtest needs tclsh >= 8.5)",
                             {"MAKEFLAGS": PARALLEL_MAKE}),
    "valkey-io/valkey": Toolchain("C", ("gcc", "make", "tcl"), "the test suite is Tcl (./runtest)",
                                  {"MAKEFLAGS": PARALLEL_MAKE}),
    "micropython/micropython": Toolchain(
        "C", ("gcc", "make", "python3", "pkg-config", "libffi-dev"),
        "the unix port links Debian's libffi; run-tests.py is Python. Of the ~25 submodules (other ports' SDKs) the "
        "unix port's `make submodules` initialises three: btree, mbedtls (ssl) and micropython-lib (the frozen "
        "manifest's require())",
        submodules=("lib/berkeley-db-1.xx", "lib/mbedtls", "lib/micropython-lib")),
    "nlohmann/json": Toolchain("C++", ("g++", "make", "cmake")),
}

JS = "JavaScript/TypeScript"           # SWE-bench Multilingual's one language for both
NPM_CI = DepsInstall("npm ci", why="npm here (11) leaves the dependencies' own install scripts unrun unless approved; "
                                   "each checkout records which (install_scripts_not_run), and a row whose tests need "
                                   "one does not qualify")
IMMUTABLE_BUILD = ("npx run-s $(node -p \"Object.keys(require('./package.json').scripts)"
                   ".filter(s => s.startsWith('build:') && s !== 'build:stats').join(' ')\")")
IMMUTABLE_BUILD_WHY = ("`npm run build` is `run-s build:*`, whose last script, build:stats, compares the bundle's size "
                       "with bundlephobia.com's (network; measured: it fails the build offline after dist/ is made). "
                       "Every other build:* script runs, in package.json's order, as run-s runs them")
NODE_PROCFS = ("node's worker pools size themselves from /proc/cpuinfo (tinypool, vitest's pool: without a procfs it "
               "counts 0 CPUs, and vitest hung after its last test until the timeout - measured on vuejs__core-11589, "
               "which exits in 1.2 s with one). These runners are graded from their log alone (no reporter in the "
               "process), so a procfs of the sandbox's own pid namespace gives candidate code nothing a verdict "
               "depends on")
# The JavaScript/TypeScript repositories whose dependencies this machine's npm registry serves and whose tests run
# under node without a browser (measured: results/multilingual_git/blockers_other.md; the rest are blocked there).
TOOLCHAINS.update({
    "axios/axios": Toolchain(JS, ("nodejs", "git"), "mocha (TAP reporter) from node_modules; the SSRF test "
                             "listens on localhost ports (the sandbox has its own loopback)", install=NPM_CI,
                             procfs=NODE_PROCFS),
    "immutable-js/immutable-js": Toolchain(
        JS, ("nodejs", "git"), "jest from node_modules; `npm run build` (rollup) before the tests", install=NPM_CI,
        replace_steps={"npm run build": (IMMUTABLE_BUILD, IMMUTABLE_BUILD_WHY)}, procfs=NODE_PROCFS),
    "vuejs/core": Toolchain(JS, ("nodejs", "git"), "vitest through `pnpm run test`", install=DepsInstall(
        "pnpm install --frozen-lockfile --ignore-scripts", "pnpm", "pnpm-lock.yaml",
        why="--ignore-scripts: puppeteer's postinstall downloads Chrome from googlechromelabs.github.io, which this "
            "machine cannot reach, and the whole install fails on it (measured); no row's tests start a browser"),
        procfs=NODE_PROCFS),
})


@dataclass(frozen=True)
class NativeEnv:
    """One repository's environment: its toolchain at the installed versions."""
    key: str
    repo: str
    language: str
    packages: Mapping[str, str] = field(default_factory=dict)   # Debian package -> installed version

    @property
    def label(self) -> str:           # `tasks list`'s release column
        return self.language

    python = "-"                      # no interpreter: `tasks list`'s python column

    def digest(self) -> str:
        return hashlib.sha256(json.dumps({"repo": self.repo, "packages": dict(sorted(self.packages.items()))},
                                         sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "language": self.language, "packages": dict(sorted(self.packages.items()))}


def installed_versions(packages: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """({package: version} of those installed, [those that are not])."""
    res = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Status}\t${Version}\n", *packages],
                         capture_output=True, text=True, check=False)
    found = {}
    for line in res.stdout.splitlines():
        name, status, version = (line.split("\t") + ["", ""])[:3]
        if status.endswith(" installed") and version:
            found[name.split(":")[0]] = version
    return found, [p for p in packages if p not in found]


def native_env(repo: str) -> NativeEnv:
    """The environment of `repo` on this machine; EnvironmentMissing names the packages to install."""
    tc = TOOLCHAINS.get(repo)
    if tc is None:
        raise EnvironmentMissing(f"{repo} is not one of the multilingual-git repositories ({sorted(TOOLCHAINS)})")
    found, missing = installed_versions(tc.packages)
    if missing:
        raise EnvironmentMissing(f"{repo} builds with Debian packages that are not installed: {' '.join(missing)} "
                                 f"(`apt-get install {' '.join(missing)}`, or `make system-deps`)")
    env = NativeEnv("", repo, tc.language, found)
    return NativeEnv(f"{repo.split('/')[1].lower()}-{env.digest()[:8]}", repo, tc.language, found)
