"""Pick the PyPI release whose source distribution stands in for an instance's Base.

Rule (issue #3): the latest release uploaded *before the issue was created*, pre-releases included;
later releases may already contain the fix. If its sdist does not accept the gold patch and the test
patch, the next older releases are tried (at most `max_tries`), and every try is recorded.

Pure logic here (release ordering, the rule); the one I/O function reads PyPI's JSON API through a
small on-disk cache so that selection is repeatable offline once fetched.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from packaging.version import InvalidVersion, Version

from execcritic.errors import InputError
from execcritic.files import atomic_write

PYPI_JSON = "https://pypi.org/pypi/{project}/json"

# SWE-bench repository -> PyPI project that publishes its sdists.
PYPI_PROJECT = {
    "django/django": "Django",
    "sympy/sympy": "sympy",
    "psf/requests": "requests",
    "pytest-dev/pytest": "pytest",
    "sphinx-doc/sphinx": "Sphinx",
    "pylint-dev/pylint": "pylint",
    "pydata/xarray": "xarray",
    "pallets/flask": "Flask",
    "mwaskom/seaborn": "seaborn",
    "astropy/astropy": "astropy",
    "matplotlib/matplotlib": "matplotlib",
    "scikit-learn/scikit-learn": "scikit-learn",
}


@dataclass(frozen=True)
class Release:
    project: str
    version: str
    upload_time: str          # ISO-8601 UTC of the sdist upload
    filename: str
    url: str
    sha256: str
    size: int

    @property
    def uploaded(self) -> datetime:
        return parse_time(self.upload_time)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_time(text: str) -> datetime:
    """SWE-bench `created_at` ('2022-03-03T15:14:54Z') and PyPI upload times, as aware UTC."""
    t = text.strip().replace("Z", "+00:00")
    dt = datetime.fromisoformat(t)
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def releases_from_json(project: str, data: dict) -> list[Release]:
    """Every non-yanked release with a .tar.gz/.zip sdist, oldest upload first."""
    out = []
    for version, files in (data.get("releases") or {}).items():
        try:
            Version(version)
        except InvalidVersion:
            continue
        for f in files:
            if f.get("packagetype") != "sdist" or f.get("yanked"):
                continue
            if not (f["filename"].endswith(".tar.gz") or f["filename"].endswith(".zip")):
                continue
            url = urllib.parse.urljoin(PYPI_JSON.format(project=project), f["url"])  # mirrors answer relative
            out.append(Release(project, version, f.get("upload_time_iso_8601") or f["upload_time"],
                               f["filename"], url, f["digests"]["sha256"], int(f.get("size") or 0)))
            break
    out.sort(key=lambda r: (r.uploaded, Version(r.version)))
    return out


def releases_before(releases: Iterable[Release], created_at: str, max_tries: int = 3,
                    order: str = "version") -> list[Release]:
    """The `max_tries` latest releases uploaded strictly before `created_at`.

    order="version": highest version first (PEP 440, pre-releases included). Projects that maintain
    several release series (Django ships 4.1.3, 4.0.8 and 3.2.16 the same day) then try the newest
    series' releases, which are closest to the development branch the issue was filed against.
    order="upload": most recent upload first (ties: higher version first).
    """
    cutoff = parse_time(created_at)
    before = [r for r in releases if r.uploaded < cutoff]
    if order == "version":
        before.sort(key=lambda r: (Version(r.version), r.uploaded), reverse=True)
    elif order == "upload":
        before.sort(key=lambda r: (r.uploaded, Version(r.version)), reverse=True)
    else:
        raise ValueError(f"order must be 'version' or 'upload', got {order!r}")
    return before[:max_tries]


def fetch_releases(project: str, cache_dir: Path, *, max_age_s: float = 7 * 86400,
                   offline: bool = False) -> list[Release]:
    """Releases of `project` from PyPI's JSON API, cached under cache_dir/pypi/<project>.json."""
    path = cache_dir / "pypi" / f"{project}.json"
    fresh = path.exists() and (offline or time.time() - path.stat().st_mtime < max_age_s)
    if not fresh:
        if offline:
            raise InputError(f"no cached PyPI metadata for {project!r} and offline mode is on", file=str(path))
        url = PYPI_JSON.format(project=project)
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                body = resp.read()
        except OSError as exc:
            if path.exists():  # stale cache beats no answer; the sha256 check still guards content
                body = path.read_bytes()
            else:
                raise InputError(f"could not read PyPI metadata for {project!r} ({exc}); check network access "
                                 f"to PyPI", file=url) from exc
        atomic_write(path, body)
    return releases_from_json(project, json.loads(path.read_bytes()))


def find_release(releases: Iterable[Release], version: str) -> Release:
    for r in releases:
        if r.version == version:
            return r
    raise InputError(f"release {version!r} has no sdist on PyPI")
