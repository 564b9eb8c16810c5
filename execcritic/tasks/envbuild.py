"""What every task-environment builder shares (`verified-sdist`, `verified-git`): the guarantees and the venv.

Guarantees. Environments are shared by every process on the machine (audits, pipelines, training, tests), so a
build is idempotent (`build_once` first asks the caller whether what is there was built from the same recipe,
and reuses it untouched), locked (one builder per directory: `.<name>.build.lock`) and atomic: it happens in a
staging directory beside the final one, which every build step sees at the final path (a bubblewrap bind), and
is renamed into place complete. Users hold `.<name>.lock` shared while they use the directory (`use_lock`); the
swap takes it exclusively, so no user ever sees a directory half-built or replaced under it.

The venv. `build_venv` follows one SWE-bench spec (interpreter, conda packages and requirement files as pip
requirements, pip_packages, pre_install, install) with uv, under bubblewrap with the checkout at /testbed, and
returns the lock (`pip freeze`) and what it left out and why.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

import platformdirs
from packaging.utils import canonicalize_name

from execcritic.errors import EnvironmentMissing, ExecCriticError
from execcritic.files import locked

WORKDIR = "/testbed"
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))
FAR_FUTURE = "2100-01-01T00:00:00Z"
SEED_SETUPTOOLS = "setuptools<81"
# pip's answer when a project's build backend cannot install it editable (PEP 660), and the last pip that then
# falls back to `setup.py develop`
NO_EDITABLE_HOOK = "missing the 'build_editable' hook"
NO_LEGACY_OPTION = "no such option: --no-use-pep517"      # (pip >= 25.3: scikit-learn 1.3's spec install asks for it)
ISOLATED_EDITABLE_FAILED = "Failed building editable for"   # pip's isolated PEP 660 build of the project failed
LEGACY_EDITABLE_PIP = "pip<25.3"
# the setuptools that legacy pip's isolated `setup.py develop` may use: 80 made `develop` a shim that runs
# `pip install -e . --use-pep517`, which that pip cannot do for such a project (the failure it was to avoid)
LEGACY_DEVELOP_SETUPTOOLS = "setuptools<80"
BUILD_TOOLS = ("setuptools", "wheel", "pip", "setuptools-scm", "flit-core", "hatchling", "hatch-vcs", "cython",
               "poetry-core", "pdm-backend", "versioneer", "extension-helpers")
_APT = ("apt-get", "apt ")

T = TypeVar("T")


class BuildError(ExecCriticError):
    """An environment could not be built; the message names the instance/env and the failing step."""


# ---- the guarantees: idempotent, locked, atomic ----------------------------------------------------

def use_lock(root: Path) -> Path:
    """Held shared by every user of a built directory while it uses it; a build takes it exclusively to swap."""
    return root.with_name(f".{root.name}.lock")


def build_lock(root: Path) -> Path:
    return root.with_name(f".{root.name}.build.lock")


def build_once(d: Path, reusable: Callable[[], T | None], build_into: Callable[[Path], T]) -> tuple[T, bool]:
    """(what is at `d`, built now?): `reusable()` when it says the directory was built from this recipe, else a
    build under the build lock (checked again once the lock is held: another process may have built it)."""
    found = reusable()
    if found is None:
        d.parent.mkdir(parents=True, exist_ok=True)
        with locked(build_lock(d)):
            found = reusable()
            if found is None:
                return build_beside(d, build_into), True
    return found, False


def build_beside(d: Path, build_into: Callable[[Path], T]) -> T:
    """Build into `.<name>.staging-<pid>` (`build_into(staging)`; its steps see it at `d` through `mapped`
    binds), then swap it into place under the use lock. The caller holds the build lock."""
    for stale in d.parent.glob(f".{d.name}.staging-*"):   # a builder that died: we hold the build lock
        shutil.rmtree(stale, ignore_errors=True)
    staging = d.with_name(f".{d.name}.staging-{os.getpid()}")
    staging.mkdir()
    placeholder = not d.exists()
    d.mkdir(exist_ok=True)              # the mount point at which the build sees the staging dir
    try:
        result = build_into(staging)
        with locked(use_lock(d)):
            swap_into_place(staging, d)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if placeholder and d.is_dir() and not any(d.iterdir()):
            d.rmdir()
        raise
    return result


def swap_into_place(staging: Path, dest: Path) -> None:
    """Rename a complete `staging` directory to `dest`, replacing what was there (an empty mount point, or an
    older build whose users are gone: the caller holds the lock they hold shared)."""
    old = None
    if dest.exists() and any(dest.iterdir()):
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(dest, old)
    os.rename(staging, dest)            # over an empty directory, or where nothing is: atomic
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---- interpreters, bubblewrap, uv ------------------------------------------------------------------

def find_interpreter(version: str) -> Path:
    """The CPython `version` ('3.9') interpreter: pyenv's, else `pythonX.Y` on PATH, else one uv manages
    (`uv python install 3.9`)."""
    candidates = sorted(PYENV_ROOT.glob(f"versions/{version}.*/bin/python{version}"))
    for c in reversed(candidates):
        if c.exists():
            return c
    found = shutil.which(f"python{version}")
    if found:
        real = subprocess.run([found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
        if real.returncode == 0 and real.stdout.strip():
            return Path(real.stdout.strip())
    try:                                # one `uv python install X.Y` put there (never downloaded here)
        uv = subprocess.run([uv_binary(), "python", "find", version], capture_output=True, text=True,
                            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"}, timeout=60)
        if uv.returncode == 0 and uv.stdout.strip():
            return Path(uv.stdout.strip())
    except (EnvironmentMissing, OSError, subprocess.TimeoutExpired):
        pass
    raise EnvironmentMissing(f"CPython {version} is not installed (SWE-bench's specs need it); install it, "
                             f"e.g. `pyenv install {version}` or `uv python install {version}`, so that "
                             f"python{version} is on PATH")


def cache_base() -> Path:
    """Where the image-free task sets keep their environments: $EXECCRITIC_CACHE, else the user's cache dir."""
    env = os.environ.get("EXECCRITIC_CACHE")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("execcritic"))


def _under_tmp() -> list[Path]:
    """The cache when it lives under /tmp, which a build's fresh /tmp would hide (a venv's `python` not found, a
    rebuild that cannot find the venv's `activate`): bound read-only over it, like the rest of the host."""
    base = cache_base().resolve()
    return [base] if base.is_dir() and base.is_relative_to("/tmp") else []


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None


def bwrap_prefix(checkout: Path | None, writable: Sequence[Path], *, network: bool = True,
                 mapped: Sequence[tuple[Path, Path]] = (), readable: Sequence[Path] = ()) -> list[str]:
    """A bubblewrap command prefix: host / read-only, `checkout` at /testbed, `writable` paths rw, each
    `(host dir, path)` of `mapped` writable at that path (a staging dir seen at its env's final path), and
    `readable` paths read-only even where the fresh /tmp would hide them (a tool of a clone under /tmp; the cache
    itself is, when it lives there)."""
    if not bwrap_available():
        raise EnvironmentMissing("bubblewrap (`bwrap`) is not installed; `apt-get install bubblewrap`")
    args = ["bwrap", "--die-with-parent"]
    for entry in sorted(os.listdir("/")):
        if entry in ("proc", "dev", "tmp", "testbed", "sys"):
            continue
        p = Path("/") / entry
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys", "--tmpfs", "/tmp"]
    for r in [*_under_tmp(), *readable]:
        args += ["--ro-bind", str(r), str(r)]
    for w in writable:
        args += ["--bind", str(w), str(w)]
    for host, seen_at in mapped:
        args += ["--bind", str(host), str(seen_at)]
    if checkout is not None:
        args += ["--bind", str(checkout), WORKDIR, "--chdir", WORKDIR]
    else:
        args += ["--chdir", "/tmp"]
    if not network:
        args += ["--unshare-net"]
    return args


@dataclass
class StepLog:
    """Every build command with its exit status and duration: the env.json record of how it was made."""

    steps: list = field(default_factory=list)

    def run(self, cmd: Sequence[str], *, what: str, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 3600, log: Callable[[str], None] | None = None) -> str:
        t0 = time.monotonic()
        try:
            res = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"{what} timed out after {timeout:.0f}s: {' '.join(cmd)[-400:]}") from exc
        dt = round(time.monotonic() - t0, 2)
        shown = " ".join(cmd)
        if "bwrap" in cmd[:1]:
            shown = "bwrap " + " ".join(cmd[cmd.index("--chdir") + 2:])
        self.steps.append({"what": what, "cmd": shown[-2000:], "exit": res.returncode, "seconds": dt})
        if log:
            log(f"{what}: exit {res.returncode} in {dt}s")
        if res.returncode != 0:
            tail = (res.stdout + res.stderr)[-4000:]
            raise BuildError(f"{what} failed (exit {res.returncode}): {shown[:400]}\n{tail}")
        return res.stdout


def uv_binary() -> str:
    """uv drives the dependency installs (`--exclude-newer` pins the era). It ships as a PyPI wheel. Its real
    path: the sandbox binds it at that path, and bwrap cannot make a bind target under a symlink (a venv that is a
    symlink to another, as a git worktree's often is)."""
    try:
        from uv import find_uv_bin  # type: ignore  # lazy: uv binary lookup

        found = find_uv_bin()
    except Exception:
        found = shutil.which("uv")
        if not found:
            raise EnvironmentMissing("`uv` is not installed; `pip install uv` (it is a dependency of execcritic)")
    return os.path.realpath(found)


def uv_cache_dir(uv: str) -> Path:
    out = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True)
    path = Path(out.stdout.strip() or Path.home() / ".cache" / "uv")
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---- SWE-bench specs as venv steps -----------------------------------------------------------------

def _pinned_name(req: str) -> str | None:
    """'numpy==1.19.2' -> 'numpy' (an exact pin SWE-bench chose: exempt from --exclude-newer)."""
    if "==" not in req or any(c in req for c in "<>;@ "):
        return None
    return req.split("==", 1)[0].strip() or None


def conda_packages(spec: Mapping) -> list[str]:
    """The spec's conda `packages` string as pip requirements (the file-based forms are handled apart)."""
    pkgs = spec.get("packages", "") or ""
    if pkgs in ("requirements.txt", "environment.yml"):
        return []

    return [p for p in shlex.split(pkgs)]


def _keep_requirement(line: str) -> bool:
    s = line.strip()
    return bool(s) and not any(s.startswith(x) for x in ("-e .", "#", ".[test"))


def _clean_requirement(line: str) -> str:  # requirement files allow trailing ` # comment`; a CLI argument does not
    return re.sub(r"\s+#.*$", "", line).strip()


def parse_requirements(text: str, include: Callable[[str], str | None] = lambda name: None) -> list[str]:
    """SWE-bench's `get_requirements` on one file's text: `-r` includes inlined (read by `include`, which
    returns the included file's text or None), `-e .`, comments and `.[test` lines dropped."""
    out: list[str] = []
    extra: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("-r"):
            inc = include(line.strip()[2:].strip())
            if inc is not None:
                extra += [_clean_requirement(x) for x in inc.splitlines() if _keep_requirement(x)]
        elif _keep_requirement(line):
            out.append(_clean_requirement(line))
    return extra + out


def read_requirements(checkout: Path, paths: Sequence[str]) -> list[str]:
    """`parse_requirements` of the first of `paths` that exists in a checkout."""
    for rel in paths:
        p = checkout / rel
        if p.exists():
            return parse_requirements(p.read_text(), lambda name, d=p.parent: (d / name).read_text()
                                      if (d / name).exists() else None)
    return []


# conda package names that differ on PyPI; None: conda-only (a system library, a GUI toolkit, conda itself)
CONDA_TO_PIP = {"pytables": "tables", "setuptools_scm": "setuptools-scm", "python-graphviz": "graphviz",
                "matplotlib-base": "matplotlib", "iris": "scitools-iris", "pytorch": "torch", "pyqt": None,
                "wxpython": None, "gtk4": None, "gtk3": None, "pygobject": None, "graphviz": None, "python": None,
                "pip": None, "pynio": None, "cdms2": None, "libnetcdf": None, "hdf5": None, "ffmpeg": None,
                "imagemagick": None, "ghostscript": None, "nodejs": None, "compilers": None, "cxx-compiler": None,
                "c-compiler": None, "pkg-config": None, "texlive-core": None, "qt": None, "tk": None, "cartopy": None,
                "esmpy": None, "xesmf": None}


def conda_env_requirements(text: str) -> tuple[list[str], dict[str, str]]:
    """A conda environment file's dependencies as pip requirements (its `pip:` section as is; conda's
    `name=1.2` is `name==1.2.*`), and {dependency: why it is left out} for the conda-only ones."""
    import yaml  # lazy: only environment files need it

    data = yaml.safe_load(text) or {}
    reqs: list[str] = []
    skipped: dict[str, str] = {}
    for dep in data.get("dependencies") or []:
        if isinstance(dep, dict):
            reqs += [_clean_requirement(p) for p in dep.get("pip") or [] if _keep_requirement(str(p))]
            continue
        text_dep = str(dep).split("::")[-1].strip()
        m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$", text_dep)
        if not m:
            skipped[f"environment.yml: {dep}"] = "not a package specification"
            continue
        name, extras, spec = m.group(1), m.group(2) or "", m.group(3).strip()
        if spec.startswith("=") and not spec.startswith("=="):
            version = spec[1:].split("=")[0]
            spec = f"=={version}" if version.endswith("*") else f"=={version}.*"
        elif re.match(r"^\d", spec):
            spec = "==" + spec.split()[0]
        pip = CONDA_TO_PIP.get(name.lower(), name)
        if pip is None:
            skipped[f"environment.yml: {dep}"] = "conda-only package (no PyPI distribution); not installed"
            continue
        reqs.append(f"{pip}{extras}{spec}")
    return reqs, skipped


def read_env_requirements(checkout: Path, paths: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """`conda_env_requirements` of the first of `paths` that exists in a checkout."""
    for rel in paths:
        if (checkout / rel).is_file():
            return conda_env_requirements((checkout / rel).read_text())
    return [], {"packages: environment.yml": f"none of {list(paths)} exists"}


def install_command(spec: Mapping) -> str:
    """SWE-bench's install command; a non-editable `pip install .` becomes editable (see skipped)."""
    cmd = spec["install"]
    return cmd.replace("pip install .", "pip install -e .") if cmd.rstrip().endswith("pip install .") else cmd


def build_environ(venv: Path, version: str) -> dict:
    """The environment of a build step run at /testbed: the venv first on PATH, no pip cache or prompts, and the
    project's version for setuptools_scm (a checkout without tags, or an sdist, cannot say it)."""
    out = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "LANG", "LC_", "TERM"))}
    out.update({"PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "PIP_NO_CACHE_DIR": "1",
                "SETUPTOOLS_SCM_PRETEND_VERSION": version, "PIP_NO_INPUT": "1"})
    return out


def uv_install(steps: StepLog, uv: list[str], py: str, reqs: list[str], cutoff: str, env: dict, log, *,
               what: str, exempt: Sequence[str] = BUILD_TOOLS) -> dict[str, str]:
    """Install `reqs` into the venv; pins SWE-bench chose (and the `exempt` build tools) are exempt from the
    date cutoff. If the set fails as a whole, install one by one and return {requirement: why it was left
    out}; then the ones that installed go in again as one set, so that what a later one pulled in cannot move an
    earlier pin (measured: astropy 1.3's exceptiongroup==0.0.0a0 pulled trio, whose outcome needs attrs >= 19.2,
    over SWE-bench's attrs==17.3.0, and pytest 3.3.1 then failed to import)."""
    def cmd(items: list[str], dated: bool = True) -> list[str]:
        c = [*uv, "pip", "install", "--python", py]
        if dated:
            c += ["--exclude-newer", cutoff]
            for name in exempt:  # build backends of any era must still build on this interpreter
                c += ["--exclude-newer-package", f"{name}={FAR_FUTURE}"]
            for r in items:
                name = _pinned_name(r)
                if name:
                    c += ["--exclude-newer-package", f"{name}={FAR_FUTURE}"]
        return c + items
    try:
        steps.run(cmd(reqs), what=f"uv install {what}", env=env, log=log)
        return {}
    except BuildError:
        pass
    skipped: dict[str, str] = {}
    substituted: dict[str, str] = {}
    for r in reqs:
        try:
            steps.run(cmd([r]), what=f"uv install {r}", env=env, log=log)
            continue
        except BuildError as exc:
            dated_error = str(exc).strip().splitlines()[-1][:300]
        try:  # nothing of that era installs on this interpreter: take the newest that does
            steps.run(cmd([r], dated=False), what=f"uv install {r} (no date cutoff)", env=env, log=log)
            skipped[f"cutoff: {r}"] = f"resolved without --exclude-newer (dated resolution failed: {dated_error})"
        except BuildError as exc:
            error = str(exc).strip().splitlines()[-1][:300]
            later = _later_patch_release(steps, uv, py, r, env, log)
            if later:
                substituted[r] = later
                skipped[f"substituted: {r}"] = (
                    f"{later} instead: {r} has no wheel for this interpreter and does not build here ({error}); "
                    f"{later} is the first later release of that minor version with one")
            else:
                skipped[r] = "install failed: " + error
    kept = [substituted.get(r, r) for r in reqs if r not in skipped]
    if len(kept) > 1:
        try:
            steps.run(cmd(kept), what=f"uv install {what} (together, without the ones left out)", env=env, log=log)
        except BuildError as exc:
            skipped[f"together: {what}"] = ("installed one by one only (together: " +
                                            str(exc).strip().splitlines()[-1][:300] + ")")
    return skipped


def _later_patch_release(steps: StepLog, uv: list[str], py: str, req: str, env: dict, log) -> str | None:
    """For an exact pin `name==X.Y.Z` that neither installs from a wheel nor builds here (SWE-bench's conda channels
    built numpy 1.19.2 and scipy 1.5.2 for CPython 3.9, PyPI has no such wheels, and their sources need Cython < 3
    and a Fortran compiler): install the first later X.Y release with a wheel for this interpreter; its pin, or
    None. The caller records the substitution."""
    name = _pinned_name(req)
    version = req.split("==", 1)[1].strip() if name else ""
    parts = version.split(".")
    if not name or len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    upper = f"{parts[0]}.{int(parts[1]) + 1}"
    try:
        steps.run([*uv, "pip", "install", "--python", py, "--resolution", "lowest-direct", "--only-binary", name,
                   f"{name}>{version},<{upper}"], what=f"uv install the first later {name} {parts[0]}.{parts[1]} "
                                                     "release with a wheel", env=env, log=log)
    except BuildError:
        return None
    freeze = subprocess.run([*uv, "pip", "freeze", "--python", py], capture_output=True, text=True, env=env,
                            check=False)
    want = canonicalize_name(name)
    return next((line.strip() for line in freeze.stdout.splitlines()
                 if "==" in line and canonicalize_name(line.split("==", 1)[0]) == want), None)


def system_step(cmd: str) -> bool:
    """A pre_install step that installs system packages (apt) or locales: a host requirement, never run in a
    venv build (system-deps.sh provides what the supported repositories need)."""
    return cmd.strip().startswith(_APT) or "locale-gen" in cmd


_VAR = re.compile(r"\$\{?([A-Za-z_]\w*)")


def pre_install_script(spec: Mapping, extra: Sequence[str] = ()) -> tuple[list[str], dict[str, str], list[str]]:
    """The spec's pre_install steps (then `extra`) that run here, as one shell script's lines (SWE-bench runs
    them in one shell: a step may set a variable a later one reads); ({step: why it is left out}, [the system
    steps]). Left out: system package steps (system-deps.sh provides them), downloads from hosts other than
    the package index (wget/curl: no network beyond PyPI and Debian here), and the steps that use what such a
    download names (its variables)."""
    run: list[str] = []
    skipped: dict[str, str] = {}
    host_steps: list[str] = []
    downloaded: set[str] = set()
    for cmd in [*(spec.get("pre_install") or []), *extra]:
        if system_step(cmd):
            skipped[f"pre_install: {cmd}"] = "system package step: not run in a venv build (host requirement)"
            host_steps.append(cmd)
        elif re.search(r"\b(wget|curl)\b", cmd):
            downloaded |= set(_VAR.findall(cmd))
            skipped[f"pre_install: {cmd}"] = "download from outside the package index: not run (no network beyond " \
                                             "PyPI and Debian; the build uses Debian's library instead)"
        elif downloaded & set(_VAR.findall(cmd)):
            skipped[f"pre_install: {cmd}"] = "uses what a skipped download would have fetched: not run"
        else:
            run.append(cmd)
    return run, skipped, host_steps


def run_pre_install(steps: StepLog, spec: Mapping, checkout: Path, venv: Path, version: str, *,
                    mapped: Sequence[tuple[Path, Path]] = (), extra: Sequence[str] = (),
                    log=None) -> tuple[dict[str, str], list[str]]:
    """`pre_install_script` at /testbed (the checkout) under bwrap, in one shell that stops at the first
    failing step; returns ({step: why it was not run}, [the system steps])."""
    run, skipped, host_steps = pre_install_script(spec, extra)
    if run:
        steps.run(bwrap_prefix(checkout, [], mapped=mapped) + ["bash", "-ec", "\n".join(run)], what="pre_install",
                  env=build_environ(venv, version), log=log)
    return skipped, host_steps


@dataclass
class VenvPlan:
    """What `build_venv` installs: a SWE-bench spec and the requirements read from the project."""

    python: str
    spec: Mapping
    requirements: Sequence[str]
    exclude_newer: str               # uv --exclude-newer for what the spec does not pin
    version: str                     # the project's version (SETUPTOOLS_SCM_PRETEND_VERSION)
    lock: Sequence[str] = ()         # install exactly this (resolve=False)
    skipped: Mapping[str, str] = field(default_factory=dict)   # carried over from the resolution (resolve=False)
    install: str = ""                # the install command actually run ("" = install_command(spec))
    exempt: Sequence[str] = BUILD_TOOLS   # build tools resolved without the cutoff
    extra_pre_install: Sequence[str] = ()  # local adaptations, run after the spec's pre_install
    # requirements to add after the install, from the installed checkout (resolving builds only): what a
    # rebuild in the tree needs without build isolation
    post_install: Callable[[Path], list[str]] | None = None
    # requirements to install (held to the date cutoff) before an install that runs on the legacy pip, which has no
    # cutoff of its own, from the checkout (resolving builds only): what that install would otherwise resolve today
    legacy_requirements: Callable[[Path], list[str]] | None = None
    # the venv made its own prefix at the end of the build (`make_own_prefix`): for test commands that reach the
    # interpreter through a symlink elsewhere (tox-current-env's `.tox/<env>/bin/python`)
    own_prefix: bool = False


@dataclass
class VenvResult:
    interpreter: Path
    lock: list[str]
    skipped: dict[str, str]
    host_steps: list[str]


def _pip_has_uploaded_prior_to(host: list[str], py: str) -> bool:
    """Whether the venv's pip takes a date cutoff (`--uploaded-prior-to`; older pips have none)."""
    res = subprocess.run(host + [py, "-m", "pip", "install", "--help"], capture_output=True, text=True, check=False)
    return "--uploaded-prior-to" in res.stdout


def build_venv(plan: VenvPlan, steps: StepLog, *, staging: Path, final: Path, checkout: str = "checkout",
               resolve: bool, progress: bool = False, log=None) -> VenvResult:
    """venv at `final/venv` (built in `staging`, seen at `final`), the spec's packages (resolved, or the lock),
    pre_install and install at /testbed = `staging/<checkout>`, then `pip freeze` as the lock."""
    venv = final / "venv"                                 # as every step sees it
    interp = find_interpreter(plan.python)
    uv = uv_binary()
    seen = [(staging, final)]
    # uv's steps, with the staging dir at `final` (and uv itself visible when its venv lives under /tmp)
    host = bwrap_prefix(None, [uv_cache_dir(uv)], mapped=seen, readable=[Path(uv)])
    try:  # uv's venv (seeded with pip) is several times faster than `python -m venv` + ensurepip
        steps.run(host + [uv, "venv", "--seed", "--no-project", "--python", str(interp), str(venv)],
                  what=f"venv on {interp}", env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"}, log=log)
    except BuildError:
        shutil.rmtree(staging / "venv", ignore_errors=True)
        steps.run(host + [str(interp), "-m", "venv", str(venv)], what=f"venv on {interp} (python -m venv)",
                  log=log)
    py = str(venv / "bin" / "python")
    uv_env = {**os.environ, "UV_NO_PROGRESS": "0" if progress else "1", "VIRTUAL_ENV": str(venv),
              "UV_CACHE_DIR": str(uv_cache_dir(uv))}
    spec = dict(plan.spec)
    skipped = dict(plan.skipped) if not resolve else {}
    if resolve:
        # SWE-bench's conda envs (built 2024) carry a setuptools with pkg_resources, which test suites of
        # that era import; uv seeds the newest setuptools, which no longer has it (removed in 81).
        steps.run(host + [uv, "pip", "install", "--python", py, SEED_SETUPTOOLS], what="seed setuptools",
                  env=uv_env, log=log)
        first = conda_packages(spec) + list(plan.requirements)
        if first:
            skipped.update(uv_install(steps, host + [uv], py, first, plan.exclude_newer, uv_env, log,
                                      what="packages", exempt=plan.exempt))
        pip_pkgs = list(spec.get("pip_packages") or [])
        if pip_pkgs:
            skipped.update(uv_install(steps, host + [uv], py, pip_pkgs, plan.exclude_newer, uv_env, log,
                                      what="pip_packages", exempt=plan.exempt))
    elif plan.lock:
        (staging / "lock.txt").write_text("\n".join(plan.lock) + "\n")
        steps.run(host + [uv, "pip", "install", "--python", py, "--no-deps", "-r", str(final / "lock.txt")],
                  what="install lock", env=uv_env, log=log)
    # pre_install (minus system package steps) and the install command, at /testbed under bwrap
    pre_skipped, host_steps = run_pre_install(steps, spec, staging / checkout, venv, plan.version, mapped=seen,
                                              extra=plan.extra_pre_install, log=log)
    skipped.update(pre_skipped)
    install = plan.install or install_command(spec)
    if install != spec["install"]:
        skipped[f"install: {spec['install']}"] = f"run as `{install}`: the sandbox mounts the venv read-only, so " \
            "the checkout must be importable in place (editable) for patches to take effect"
    install_env, what = build_environ(venv, plan.version), "install"
    if plan.exclude_newer:
        # the install command's own pip resolves what the spec leaves open (sphinx 3.x's `pip install -e .[test]`
        # took docutils 0.23, which dropped `docutils.utils.roman`): the same date cutoff as uv's steps - on a
        # rebuild from the lock too (another machine, a Ray node), or its build requirements would be today's
        if _pip_has_uploaded_prior_to(host, py):
            install_env["PIP_UPLOADED_PRIOR_TO"] = plan.exclude_newer
            what = f"install (pip: uploaded before {plan.exclude_newer})"
        else:
            skipped["install: date cutoff"] = "this venv's pip has no --uploaded-prior-to: what the install " \
                "command resolves is not held to the date cutoff"
    install_cmd = bwrap_prefix(staging / checkout, [], mapped=seen) + [
        "bash", "-c", f"source {venv}/bin/activate && {install}"]
    try:
        steps.run(install_cmd, what=what, env=install_env, log=log)
    except BuildError as e:
        why = legacy_install_cause(str(e), has_pyproject=(staging / checkout / "pyproject.toml").exists())
        if why is None:
            raise
        cutoff = ["--exclude-newer", plan.exclude_newer] if plan.exclude_newer else []
        steps.run(host + [uv, "pip", "install", "--python", py, *cutoff, LEGACY_EDITABLE_PIP],
                  what=f"pip with the legacy editable install ({LEGACY_EDITABLE_PIP})", env=uv_env, log=log)
        install_env.pop("PIP_UPLOADED_PRIOR_TO", None)
        held_back = staging / "legacy-constraints.txt"
        held_back.write_text(LEGACY_DEVELOP_SETUPTOOLS + "\n")
        install_env["PIP_CONSTRAINT"] = str(final / held_back.name)     # pip passes it to its build isolation too
        first = plan.legacy_requirements(staging / checkout) if resolve and plan.legacy_requirements else []
        if first:
            skipped.update(uv_install(steps, host + [uv], py, first, plan.exclude_newer, uv_env, log,
                                      what="requirements of the install (before its legacy run)", exempt=plan.exempt))
        held = ("that pip has no --uploaded-prior-to, so the project's requirements and its extras' were installed "
                "first, held to the date cutoff, and only what else it resolves is not") if first else \
            "what that install resolves is not held to the date cutoff (that pip has no --uploaded-prior-to)"
        skipped["install: editable"] = f"{why}: installed by {LEGACY_EDITABLE_PIP}'s `setup.py develop` (with " \
            f"{LEGACY_DEVELOP_SETUPTOOLS}), as SWE-bench's 2024 pip did; {held}"
        steps.run(install_cmd, what="install (legacy editable)", env=install_env, log=log)
    more = plan.post_install(staging / checkout) if resolve and plan.post_install else []
    if more:
        skipped.update(uv_install(steps, host + [uv], py, more, plan.exclude_newer, uv_env, log,
                                  what="build requirements", exempt=plan.exempt))
    freeze = subprocess.run(host + [uv, "pip", "freeze", "--python", py], capture_output=True, text=True,
                            env=uv_env)
    lock = sorted(line for line in freeze.stdout.splitlines()
                  if line.strip() and not line.startswith("-e ") and "file:///testbed" not in line
                  and "/testbed" not in line)
    if plan.own_prefix:
        make_own_prefix(staging / "venv", interp)
        check_own_prefix(steps, host, staging, venv, log=log)
    return VenvResult(interp, lock, skipped, host_steps)


def legacy_install_cause(error: str, *, has_pyproject: bool) -> str | None:
    """Why a failed editable install is one SWE-bench's 2024 pip would have done by `setup.py develop` (None: it is
    not). That pip installs a setuptools<64 project (no PEP 660 hook: pylint 2.15 pins setuptools~=62.6), and a
    project without pyproject.toml, by `setup.py develop` in the env itself, and knows `--no-use-pep517`; pip 25.3
    dropped all three, and only pip 26 has the date cutoff, so no pip does both. (astropy 3.1's setup.py asks for
    jinja2 only when it builds: pip 26's isolated build ran its erfa generator without it.)"""
    if NO_EDITABLE_HOOK in error:
        return "the project's build backend has no PEP 660 hook"
    if NO_LEGACY_OPTION in error:
        return "the spec's install asks for `--no-use-pep517`, which pip 26 no longer has"
    if ISOLATED_EDITABLE_FAILED in error and not has_pyproject:
        return "pip 26's isolated editable build of a project without pyproject.toml failed"
    return None


def make_own_prefix(venv: Path, interp: Path) -> None:
    """Turn a venv into a Python prefix of its own, as a conda env is: a copy of the interpreter binary, the
    base's standard library and headers hard-linked in (copied across file systems), and no pyvenv.cfg.

    Why: CPython (3.9 at least) looks for pyvenv.cfg beside the path it was started by, but finds its prefix
    from the resolved binary. tox-current-env starts tests through `.tox/<env>/bin/python`, a symlink to the
    venv's python: no pyvenv.cfg there, so a venv's interpreter starts as the bare base (no site-packages). A
    prefix of its own is found from the binary wherever the symlink lives. Links, not symlinks: the sandbox
    hides files inside the standard library (lib-dynload's foreign-function modules), which it cannot do
    through a symlinked directory. site-packages, scripts and `bin/activate` stay the venv's own."""
    xy = interp.name.removeprefix("python")               # interp is the real binary: .../bin/python3.9
    base = interp.resolve().parent.parent
    bindir = venv / "bin"
    for name in ("python", "python3", interp.name):
        if (bindir / name).is_symlink() or (bindir / name).exists():
            (bindir / name).unlink()
    shutil.copy2(interp.resolve(), bindir / interp.name)
    for name in ("python", "python3"):
        (bindir / name).symlink_to(interp.name)
    for sub in (f"lib/python{xy}", f"include/python{xy}"):
        src, dst = base / sub, venv / sub
        if not src.is_dir():
            continue
        dst.mkdir(parents=True, exist_ok=True)
        for entry in src.iterdir():
            if entry.name == "site-packages" or (dst / entry.name).exists():
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, dst / entry.name, symlinks=True, copy_function=_link_or_copy)
            else:
                _link_or_copy(str(entry), str(dst / entry.name))
    (venv / "pyvenv.cfg").unlink(missing_ok=True)


def _link_or_copy(src: str, dst: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:                                       # another file system
        shutil.copy2(src, dst)


def check_own_prefix(steps: StepLog, host: list[str], staging: Path, venv: Path, *, log=None) -> None:
    """Start the interpreter as tox-current-env does, through a symlink in another directory: it must come up
    as the env's prefix, with the env's packages (else the build fails here, not every test run later)."""
    probe = staging / "own-prefix-probe" / "bin"
    probe.mkdir(parents=True)
    try:
        (probe / "python").symlink_to(venv / "bin" / "python")
        seen = venv.parent / "own-prefix-probe" / "bin" / "python"
        steps.run(host + [str(seen), "-c", f"import sys, pip; assert sys.prefix == {str(venv)!r}, sys.prefix"],
                  what="own prefix: started through a symlink elsewhere, the interpreter is the env's", log=log)
    finally:
        shutil.rmtree(probe.parent, ignore_errors=True)
