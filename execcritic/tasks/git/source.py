"""Where a repository's commits come from: a git source the user names, fetched shallowly.

A source is the upstream URL (a user with network), or a local mirror path (a bare or non-bare repository that
has the commits; CI and offline machines). Users name them with `--git-source REPO=SOURCE` or
`$EXECCRITIC_GIT_SOURCES`: comma-separated `owner/name=SOURCE` entries, and at most one entry without `=`, a
template for every other repository (`{repo}`, `{owner}`, `{name}` are filled in). Without either, the
source is `https://github.com/{repo}.git`.

`fetch_commit` puts exactly one commit into a fresh repository (`git fetch --depth 1 <source> <sha>`): the
checkout has no history beyond its Base, no remote and no refs but its branch. Submodules (astropy < 4 builds
from its `astropy_helpers`) are fetched the same way, each at the commit the Base records, from the source
configured for their own repository.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from execcritic.errors import InputError
from execcritic.tasks.envbuild import BuildError, StepLog

SOURCES_ENV = "EXECCRITIC_GIT_SOURCES"
DEFAULT_TEMPLATE = "https://github.com/{repo}.git"
BRANCH = "base"
# Fixed identity: nothing here commits, but a git without one refuses some commands.
GIT_ENV = {"GIT_AUTHOR_NAME": "execcritic", "GIT_AUTHOR_EMAIL": "execcritic@localhost",
           "GIT_COMMITTER_NAME": "execcritic", "GIT_COMMITTER_EMAIL": "execcritic@localhost",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0"}


class SourceUnavailable(BuildError):
    """The git source could not serve a commit (it lacks it, refuses it, is corrupt or unreachable): a fault of the
    source the user named, not of the row, so qualification leaves the row undecided instead of dropping it."""


class CommitUnavailable(SourceUnavailable):
    """The source does not have (or will not serve) the commit."""


def parse_sources(entries: Sequence[str] | str | None) -> dict[str, str]:
    """`['django/django=/mirrors/django', 'https://example.org/{name}.git']` -> {repo: source, '*': template}."""
    if entries is None:
        return {}
    if isinstance(entries, str):
        entries = [e for e in entries.split(",") if e.strip()]
    out: dict[str, str] = {}
    for raw in entries:
        entry = raw.strip()
        repo, sep, source = entry.partition("=")
        if sep and "/" in repo and "://" not in repo:
            if not source.strip():
                raise InputError(f"git source entry {entry!r} names no source", field="--git-source")
            out[repo.strip()] = source.strip()
        elif "{" in entry:
            if "*" in out:
                raise InputError(f"two git source templates: {out['*']!r} and {entry!r}", field="--git-source")
            out["*"] = entry
        else:
            raise InputError(f"git source entry {entry!r} is neither `owner/name=SOURCE` nor a template with "
                             "{repo}, {owner} or {name}", field="--git-source")
    return out


def configured_sources(given: Sequence[str] | None = None) -> dict[str, str]:
    """The command line's entries over `$EXECCRITIC_GIT_SOURCES`'s."""
    return {**parse_sources(os.environ.get(SOURCES_ENV)), **parse_sources(given)}


def source_for(repo: str, sources: Mapping[str, str] | None = None) -> str:
    """The source of `repo`: its own entry, else the template, else GitHub."""
    sources = configured_sources() if sources is None else sources
    if repo in sources:
        return sources[repo]
    owner, _, name = repo.partition("/")
    return sources.get("*", DEFAULT_TEMPLATE).format(repo=repo, owner=owner, name=name)


def fetch_url(source: str) -> str:
    """A local path as a file:// URL (git ignores --depth for plain local paths); URLs as given."""
    if "://" in source or source.startswith("git@"):
        return source
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError("the git source is neither a URL nor an existing local path", file=source,
                         field="--git-source")
    return path.resolve().as_uri()


#: one shallow fetch of a commit of a large repository (Django) over a slow link (not a protocol number)
FETCH_TIMEOUT_S = 30 * 60


def git_env() -> dict[str, str]:
    return {**os.environ, **GIT_ENV}


def fetch_commit(source: str, commit: str, dest: Path, *, steps: StepLog | None = None, log=None,
                 timeout: float = FETCH_TIMEOUT_S, submodules: Sequence[str] | None = None) -> None:
    """A fresh repository at `dest` holding exactly `commit` from `source`, checked out on branch `base`, with
    its submodules (only those at the paths `submodules` names, when given)."""
    steps = steps or StepLog()
    url = fetch_url(source)
    dest.mkdir(parents=True, exist_ok=True)
    env = git_env()
    steps.run(["git", "init", "-q", "-b", BRANCH, str(dest)], what="git init", env=env, log=log)
    try:
        steps.run(["git", "-C", str(dest), "fetch", "-q", "--depth", "1", "--no-tags", url, commit],
                  what=f"fetch {commit[:12]}", env=env, timeout=timeout, log=log)
    except BuildError as exc:
        text = str(exc)
        if any(s in text for s in ("not our ref", "couldn't find remote ref", "no such remote ref",
                                   "unadvertised object", "not a valid object", "Server does not allow")):
            raise CommitUnavailable(f"{source} does not have commit {commit} (or will not serve it by hash)"
                                    ) from None
        said = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("fatal:", "error:"))]
        raise SourceUnavailable(f"{source} could not serve commit {commit}: "
                                f"{'; '.join(said[-2:]) or text.strip()[-300:]}") from None
    got = steps.run(["git", "-C", str(dest), "rev-parse", "FETCH_HEAD"], what="rev-parse", env=env).strip()
    if got != commit:
        raise BuildError(f"{source}: fetching {commit} gave {got}")
    steps.run(["git", "-C", str(dest), "checkout", "-q", "-B", BRANCH, commit], what="checkout", env=env, log=log)
    (dest / ".git" / "FETCH_HEAD").unlink(missing_ok=True)    # names the source; the Base needs no route back
    fetch_submodules(dest, steps=steps, log=log, timeout=timeout, only=submodules)


_GITHUB = re.compile(r"^(?:https?://github\.com/|git@github\.com:|git://github\.com/)([^/]+/[^/]+?)(?:\.git)?/?$")


def submodules(dest: Path) -> list[tuple[str, str, str]]:
    """(path, url, recorded commit) of each submodule the checkout's `.gitmodules` names and its tree records."""
    if not (dest / ".gitmodules").is_file():
        return []
    res = subprocess.run(["git", "-C", str(dest), "config", "-f", ".gitmodules", "--get-regexp",
                          r"^submodule\..*\.(path|url)$"], capture_output=True, text=True, env=git_env(), check=False)
    entries: dict[str, dict[str, str]] = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition(" ")
        name, _, field = key[len("submodule."):].rpartition(".")
        entries.setdefault(name, {})[field] = value.strip()
    out = []
    for e in entries.values():
        if "path" not in e or "url" not in e:
            continue
        tree = subprocess.run(["git", "-C", str(dest), "ls-tree", "HEAD", "--", e["path"]], capture_output=True,
                              text=True, env=git_env(), check=False).stdout.split()
        if len(tree) >= 3 and tree[1] == "commit":          # a gitlink: the commit the Base pins
            out.append((e["path"], e["url"], tree[2]))
    return out


def fetch_submodules(dest: Path, *, steps: StepLog, log=None, timeout: float = FETCH_TIMEOUT_S,
                     only: Sequence[str] | None = None) -> list[str]:
    """Each submodule at its recorded commit (or each of those at the paths `only` names), as `git submodule
    update --init` would leave it (a repository at its path), from the configured source of its repository
    (`source_for`); its path names the failure."""
    done = []
    for path, url, commit in submodules(dest):
        if only is not None and path not in only:
            continue
        m = _GITHUB.match(url)
        if m is None:
            raise BuildError(f"submodule {path}: cannot tell which repository {url!r} is, so no configured source "
                             "can serve it")
        if (dest / path).is_dir() and any((dest / path).iterdir()):
            continue
        fetch_commit(source_for(m.group(1)), commit, dest / path, steps=steps, log=log, timeout=timeout)
        done.append(path)
    return done


def has_commit(source: str, commit: str) -> bool | None:
    """Whether a local source can serve `commit` whole: the commit and every object of its tree. A snapshot that
    left its largest files out (astropy 5.1's setup commit lacks one IERS table) has the commit but no fetch of it
    succeeds. None: a remote source, which only a fetch can tell."""
    if "://" in source or source.startswith("git@") or not Path(source).expanduser().exists():
        return None
    res = subprocess.run(["git", "-C", str(Path(source).expanduser()), "rev-list", "--objects", "--no-walk",
                          "--missing=print", f"{commit}^{{commit}}", "--"],
                         capture_output=True, text=True, env=git_env(), check=False)
    return res.returncode == 0 and not any(line.startswith("?") for line in res.stdout.splitlines())


def describe(source: str, commit: str) -> str | None:
    """`git describe --tags --long` of a commit in a local source with history (None otherwise)."""
    if has_commit(source, commit) is not True:
        return None
    res = subprocess.run(["git", "-C", str(Path(source).expanduser()), "describe", "--tags", "--long", commit],
                         capture_output=True, text=True, env=git_env(), check=False)
    if res.returncode != 0:
        return None
    return res.stdout.strip() or None


def scm_version(described: str | None, fallback: str) -> str:
    """setuptools_scm's default version for a `git describe --long` string ('6.0.0-180-gabc' ->
    '6.0.1.dev180+gabc'), else `fallback`: a shallow checkout has no tags to describe."""
    if not described:
        return fallback
    tag, _, rest = described.rpartition("-g")[0].rpartition("-")
    tag = tag.lstrip("v")
    distance = int(rest) if rest.isdigit() else 0
    parts = tag.split(".")
    if not tag or not all(p.isdigit() for p in parts):
        return fallback
    if distance == 0:
        return tag
    parts[-1] = str(int(parts[-1]) + 1)
    return f"{'.'.join(parts)}.dev{distance}+g{described.rpartition('-g')[2]}"
