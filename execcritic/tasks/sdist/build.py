"""Build a `verified-sdist` task environment: sdist -> git Base checkout -> venv with the project installed.

Layout under the cache root (`$EXECCRITIC_CACHE` or the user cache dir, `.../execcritic/verified-sdist`):

    sdists/<filename>                 downloaded archives (sha256-checked against the recipe/PyPI)
    pypi/<project>.json               PyPI metadata used for release selection
    bases/<project>-<version>/        pristine git Base of a release (shared by the envs built on it)
    envs/<env_key>/checkout/          git repo; first and only commit = the Base (sdist content)
    envs/<env_key>/venv/              the task venv (interpreter from SWE-bench's specs)
    envs/<env_key>/env.json           what was built, the lock, timings; written last

The install step runs inside bubblewrap with the checkout bound at /testbed, so editable installs
record /testbed: at evaluation time the sandbox binds a copy of the checkout at /testbed and the venv
read-only at its own host path.

Environments are shared by every process on the machine (audits, pipelines, training, tests), so a build is
idempotent (an env whose env.json says it was built from this recipe is reused untouched, and the build says
so), locked (one builder per env: `envs/.<key>.build.lock`), and atomic: it happens in a staging directory
beside the env, which every build step sees at the env's final path (a bubblewrap bind), and is renamed into
place complete. Users of an env hold `envs/.<key>.lock` shared while they use it (`use_lock`); a swap takes it
exclusively, so no user ever sees an env half-built or replaced under it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console
from rich.progress import DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from execcritic.files import atomic_write, locked
from execcritic.hashing import file_sha256
from execcritic.tasks.envbuild import (  # noqa: F401 - re-exported: the sdist builder's public names
    WORKDIR,
    BuildError,
    StepLog,
    VenvPlan,
    build_once,
    build_venv,
    cache_base,
    find_interpreter,
    read_requirements,
    swap_into_place,
    use_lock,
)
from execcritic.tasks.sdist.select import Release, parse_time

# Fixed identity and dates make the Base commit a pure function of the sdist content.
_GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "execcritic", "GIT_AUTHOR_EMAIL": "execcritic@localhost",
    "GIT_COMMITTER_NAME": "execcritic", "GIT_COMMITTER_EMAIL": "execcritic@localhost",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
}


def cache_root() -> Path:
    return cache_base() / "verified-sdist"


# ---- download ------------------------------------------------------------------------------------

def download_sdist(release: Release, root: Path | None = None, *, progress: bool = True) -> Path:
    """The sdist archive, downloaded once and verified against the recorded sha256."""
    root = root or cache_root()
    dest = root / "sdists" / release.filename
    if dest.exists():
        if file_sha256(dest) == release.sha256:
            return dest
        dest.unlink()  # corrupt or replaced upstream: fetch again and check again
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.part-{os.getpid()}-{threading.get_ident()}")
    try:
        with urllib.request.urlopen(release.url, timeout=120) as resp, tmp.open("wb") as out:
            total = int(resp.headers.get("Content-Length") or release.size or 0)
            bar = _bar(total, f"download {release.filename}", progress)
            for chunk in iter(lambda: resp.read(1 << 16), b""):
                out.write(chunk)
                bar.update(len(chunk))
            bar.close()
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"could not download {release.url} ({exc}); PyPI must be reachable for a first build")
    got = file_sha256(tmp)
    if got != release.sha256:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"sha256 mismatch for {release.filename}: recipe says {release.sha256}, got {got}; "
                         f"the file on PyPI changed - re-run selection (`execcritic tasks build-sdist --reselect`)")
    tmp.replace(dest)
    return dest


class _Bar:
    """A download's progress on stderr (rich), or nothing."""

    def __init__(self, total: int, desc: str, enabled: bool):
        self._progress = Progress(TextColumn(desc), DownloadColumn(), TransferSpeedColumn(), transient=True,
                                  disable=not enabled, console=Console(stderr=True))
        self._progress.start()
        self._task = self._progress.add_task(desc, total=total or None)

    def update(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def close(self) -> None:
        self._progress.stop()


def _bar(total: int, desc: str, enabled: bool) -> _Bar:
    return _Bar(total, desc, enabled)


# ---- unpack into a git Base ----------------------------------------------------------------------

def _extract(archive: Path, dest: Path) -> None:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if info.filename.startswith("/") or ".." in Path(info.filename).parts:
                    raise BuildError(f"unsafe path {info.filename!r} in {archive.name}")
            zf.extractall(dest)
        return
    with tarfile.open(archive) as tf:
        try:
            tf.extractall(dest, filter="data")
        except tarfile.FilterError:  # e.g. a symlink pointing outside: fall back to the tar filter
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            tf.extractall(dest, filter="tar")


OVERLAYS = Path(__file__).with_name("overlays")


def overlay_files(project: str) -> dict[str, Path]:
    """Stand-in files a release's sdist lacks but its SWE-bench test command needs (e.g. SymPy's
    `bin/test`), keyed by repo-relative path. Added to the Base only where the sdist has no such file."""
    d = OVERLAYS / project.lower()
    if not d.is_dir():
        return {}
    return {str(p.relative_to(d)): p for p in sorted(d.rglob("*")) if p.is_file()}


def overlay_digest(project: str) -> str:
    h = hashlib.sha256()
    for rel, p in overlay_files(project).items():
        h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def unpack_to_git(archive: Path, dest: Path, *, commit_date: str, project: str = "") -> str:
    """Unpack the sdist into `dest` as a git repo with one commit (the Base); return its hash.

    The sdist's own metadata (top-level PKG-INFO, *.egg-info) is dropped: it is not part of the
    repository and the install step regenerates it.
    """
    if dest.exists():
        raise BuildError(f"{dest} exists: a Base is unpacked beside its final place, then renamed")
    with tempfile.TemporaryDirectory(prefix="sdist-", dir=dest.parent) as tmp:
        tmpdir = Path(tmp)
        _extract(archive, tmpdir)
        entries = [p for p in tmpdir.iterdir()]
        if len(entries) != 1 or not entries[0].is_dir():
            raise BuildError(f"{archive.name}: expected one top-level directory, found {[p.name for p in entries]}")
        top = entries[0]
        (top / "PKG-INFO").unlink(missing_ok=True)
        for base in (top, top / "src"):
            if base.is_dir():
                for egg in base.glob("*.egg-info"):
                    shutil.rmtree(egg) if egg.is_dir() else egg.unlink()
        for rel, src in overlay_files(project).items():
            target = top / rel
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, target)
                os.chmod(target, 0o755 if os.access(src, os.X_OK) else 0o644)
        top.rename(dest)
    env = {**os.environ, **_GIT_IDENTITY, "GIT_AUTHOR_DATE": commit_date, "GIT_COMMITTER_DATE": commit_date}
    for cmd in (["git", "init", "-q", "-b", "base"], ["git", "add", "-A", "-f"],
                # no background gc: it would outlive this build and leave its gc.pid in the cached checkout
                ["git", "-c", "gc.auto=0", "commit", "-q", "--no-gpg-sign", "--no-verify", "-m",
                 f"Base: {archive.name}"]):
        _run_checked(cmd, cwd=dest, env=env, what=f"git base for {archive.name}")
    return git_head(dest)


def git_head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


def patch_applies(repo: Path, patch: str) -> tuple[bool, str]:
    """`git apply --check` of a patch against the checkout: (ok, diagnostic)."""
    if not patch.strip():
        return True, ""
    data = patch if patch.endswith("\n") else patch + "\n"
    res = subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=data, capture_output=True, text=True)
    return res.returncode == 0, (res.stdout + res.stderr).strip()[-2000:]


def _run_checked(cmd: Sequence[str], *, cwd: Path | None, env: dict | None, what: str,
                 timeout: float = 3600) -> str:
    res = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        tail = (res.stdout + res.stderr)[-3000:]
        raise BuildError(f"{what}: `{' '.join(cmd)[:300]}` exited {res.returncode}:\n{tail}")
    return res.stdout


def _subst(text: str, env_dir: Path) -> str:
    return text.replace("{testbed}", WORKDIR).replace("{venv}", str(env_dir / "venv"))


# ---- pristine Base checkouts (release selection and env builds start from these) ----------------

def base_checkout(release: Release, root: Path | None = None, *, progress: bool = True) -> tuple[Path, str]:
    """A pristine git checkout of the release's sdist under bases/, built once (locked, unpacked beside and
    renamed into place); (path, base commit)."""
    root = root or cache_root()
    dest = root / "bases" / f"{release.project}-{release.version}"
    stamp = f"overlay {overlay_digest(release.project)}"

    def current() -> tuple[Path, str] | None:
        marker = dest / ".git" / "execcritic-base"
        if not marker.exists():
            return None
        lines = marker.read_text().split("\n")
        recorded = lines[1] if len(lines) > 1 and lines[1] else f"overlay {overlay_digest('')}"
        return (dest, lines[0].strip()) if recorded == stamp else None

    found = current()
    if found:
        return found
    dest.parent.mkdir(parents=True, exist_ok=True)
    with locked(base_lock(dest)):
        found = current()
        if found:
            return found
        archive = download_sdist(release, root, progress=progress)
        staging = dest.with_name(f".{dest.name}.staging-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        commit = unpack_to_git(archive, staging, commit_date=release.upload_time, project=release.project)
        (staging / ".git" / "execcritic-base").write_text(f"{commit}\n{stamp}\n")
        swap_into_place(staging, dest)
    return dest, commit


def base_lock(base: Path) -> Path:
    """Held exclusively to (re)build a Base, shared while an env build copies it."""
    return base.with_name(f".{base.name}.lock")


# ---- the task environment ------------------------------------------------------------------------

PYTHON_RELEASED = {"2.7": "2010-07-03T00:00:00Z", "3.5": "2015-09-13T00:00:00Z", "3.6": "2016-12-23T00:00:00Z",
                   "3.7": "2018-06-27T00:00:00Z", "3.8": "2019-10-14T00:00:00Z", "3.9": "2020-10-05T00:00:00Z",
                   "3.10": "2021-10-04T00:00:00Z", "3.11": "2022-10-24T00:00:00Z",
                   "3.12": "2023-10-02T00:00:00Z", "3.13": "2024-10-07T00:00:00Z"}


def era_cutoff(release_upload: str, python: str) -> str:
    """`uv --exclude-newer` date: the release's upload time, but not before the interpreter existed."""

    floor = PYTHON_RELEASED.get(python)
    if floor and parse_time(floor) > parse_time(release_upload):
        return floor
    return release_upload
def env_dir(key: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "envs" / key


def env_digest(env) -> str:
    return hashlib.sha256(json.dumps(env.digest_payload(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class BuiltEnv:
    key: str
    root: Path                # envs/<key>
    checkout: Path
    venv: Path
    record: dict

    @property
    def activation(self) -> str:
        return f"source {self.venv}/bin/activate"


def load_built(key: str, root: Path | None = None) -> BuiltEnv | None:
    d = env_dir(key, root)
    rec = d / "env.json"
    if not rec.exists():
        return None
    return BuiltEnv(key, d, d / "checkout", d / "venv", json.loads(rec.read_text()))


def _reusable(env, root: Path, resolve: bool):
    """(BuiltEnv, locked EnvRecipe) if the env in the cache was built from this recipe, else None. The check
    is against what was asked for (the recipe's digest), never against what a build happened to install."""
    built = load_built(env.key, root)
    if built is None:
        return None
    rec = built.record
    if resolve and rec.get("resolved_from") != _resolve_digest(env) or \
            not resolve and rec.get("recipe_digest") != env_digest(env):
        return None
    return built, dataclasses.replace(env, lock=tuple(rec["lock"]),
                                      requirements=tuple(rec.get("requirements", env.requirements)),
                                      skipped=dict(rec.get("skipped", {})))


def build_env(env, *, root: Path | None = None, resolve: bool = False, progress: bool = True,
              log: Callable[[str], None] | None = None):
    """Build (or reuse) the environment for an EnvRecipe. Returns (BuiltEnv, resolved EnvRecipe).

    resolve=False installs the recipe's lock exactly (reproducible rebuild); resolve=True resolves
    the spec's packages with uv under `--exclude-newer env.exclude_newer` and records the new lock.
    Idempotent, locked and atomic (`envbuild.build_once`); `BuiltEnv.record["reused"]` says whether it built.
    """
    root = root or cache_root()
    d = env_dir(env.key, root)

    def build_into(staging: Path):
        built, new_env = _build_into(env, staging, d, root, resolve=resolve, progress=progress, log=log)
        return dataclasses.replace(built, root=d, checkout=d / "checkout", venv=d / "venv"), new_env

    found, built_now = build_once(d, lambda: _reusable(env, root, resolve), build_into)
    if not built_now:
        if log:
            log(f"env {env.key}: already built from this recipe, unchanged ({d})")
        found[0].record["reused"] = True
    return found


def _build_into(env, staging: Path, d: Path, root: Path, *, resolve: bool, progress: bool, log):
    t0 = time.monotonic()
    steps = StepLog([])
    base, commit = base_checkout(env.release, root, progress=progress)
    if commit != env.base_commit:
        raise BuildError(f"env {env.key}: Base commit of {env.release.filename} is {commit}, recipe says "
                         f"{env.base_commit}; the unpack is not reproducible here (git version?) - report it")
    with locked(base_lock(base), shared=True):
        steps.run(["cp", "-a", "--no-target-directory", str(base), str(staging / "checkout")], what="copy Base",
                  log=log)
    (staging / "checkout" / ".git" / "execcritic-base").unlink(missing_ok=True)
    plan = VenvPlan(python=env.python, spec=env.spec, requirements=env.requirements,
                    exclude_newer=env.exclude_newer, version=env.release.version, lock=env.lock, skipped=env.skipped)
    venv = build_venv(plan, steps, staging=staging, final=d, resolve=resolve, progress=progress, log=log)
    requirements = list(env.requirements)
    new_env = dataclasses.replace(env, lock=tuple(venv.lock), requirements=tuple(requirements),
                                  skipped=venv.skipped)
    record = {"key": env.key, "recipe_digest": env_digest(env), "digest": env_digest(new_env),
              "resolved_from": _resolve_digest(env), "release": env.release.to_dict(),
              "base_commit": env.base_commit, "python": env.python, "interpreter": str(venv.interpreter),
              "lock": venv.lock, "requirements": requirements, "skipped": venv.skipped,
              "host_steps": venv.host_steps, "steps": steps.steps,
              "build_seconds": round(time.monotonic() - t0, 1),
              "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reused": False}
    atomic_write(staging / "env.json", json.dumps(record, indent=1))
    return BuiltEnv(env.key, staging, staging / "checkout", staging / "venv", record), new_env


def _resolve_digest(env) -> str:
    payload = {"release": env.release.to_dict(), "base_commit": env.base_commit, "python": env.python,
               "spec": dict(env.spec), "exclude_newer": env.exclude_newer}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


