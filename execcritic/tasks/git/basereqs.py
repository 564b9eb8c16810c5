"""What each row's Base asks to be installed, where an env installed once at the version's setup commit lacks it.

SWE-bench installs every instance at its own Base (`pip install -e .` in the instance image), so a dependency a
Base adds comes with it; a verified-git env is installed once per (repository, version) at the setup commit and
shared. For the repositories `plan.BASE_REQUIREMENTS` names (measured: a Base imports a module its setup commit
did not require), the env also gets the union of the Bases' install requirements that the setup commit does not
name, held to the env's date cutoff like the rest. Read from the project's own metadata files at each commit
(setup.py's literal lists, setup.cfg's `install_requires`, pyproject.toml's `dependencies`), markers evaluated for
the env's interpreter on Linux.
"""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from execcritic.tasks.git.source import git_env, has_commit

FILES = ("setup.py", "setup.cfg", "pyproject.toml")


def read_install_requires(files: dict[str, str], extras: Iterable[str] = ()) -> list[str]:
    """Requirement strings a project's metadata files declare, and those of the named `extras` (`files`: name ->
    text; absent files left out)."""
    out: list[str] = []
    if "setup.py" in files:
        out += setup_py_list(files["setup.py"], "install_requires")
    if "setup.cfg" in files:
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(files["setup.cfg"])
            for section, option in [("options", "install_requires")] + [("options.extras_require", e) for e in extras]:
                out += [ln.strip() for ln in cfg.get(section, option, fallback="").splitlines()
                        if ln.strip() and not ln.strip().startswith("#")]
        except configparser.Error:
            pass
    if "pyproject.toml" in files:
        import tomllib  # lazy: only a pyproject.toml needs it (as tasks/git/build.py reads build requirements)

        try:
            project = tomllib.loads(files["pyproject.toml"]).get("project", {})
            out += [str(d) for d in project.get("dependencies", [])]
            out += [str(r) for e in extras for r in project.get("optional-dependencies", {}).get(e, [])]
        except tomllib.TOMLDecodeError:
            pass
    return out


def read_build_requires(files: dict[str, str]) -> list[str]:
    """What building a project asks for: pyproject.toml's build-system requirements and setup.py's literal
    `setup_requires` (`files` as for `read_install_requires`)."""
    out: list[str] = []
    if "pyproject.toml" in files:
        import tomllib  # lazy: only a pyproject.toml needs it

        try:
            out += [r for r in tomllib.loads(files["pyproject.toml"]).get("build-system", {}).get("requires", [])
                    if isinstance(r, str)]
        except tomllib.TOMLDecodeError:
            pass
    if "setup.py" in files:
        out += setup_py_list(files["setup.py"], "setup_requires")
    return out


def without_numpy(requirements: Iterable[str]) -> list[str]:
    """`requirements` without numpy (a build asks for it; the spec pins the one the tests run with), each once."""
    kept: list[str] = []
    for r in requirements:
        name = re.split(r"[\s<>=!~;\[]", r.strip(), maxsplit=1)[0]
        if r not in kept and canonicalize_name(name) not in ("numpy", "oldest-supported-numpy"):
            kept.append(r)
    return kept


def setup_py_list(text: str, key: str) -> list[str]:
    """Literal lists of strings bound to a name containing `key`, added to one (`.extend([...])`, `+= [...]`: astropy
    3.1's setup.py extends setup_requires with cython and jinja2), or passed as `key=` (setup.py's
    `install_requires`, `setup_requires`)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []

    def keyed(target: ast.AST) -> bool:
        return isinstance(target, ast.Name) and key in target.id.lower()

    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(keyed(t) for t in node.targets) or \
                isinstance(node, ast.AugAssign) and keyed(node.target) or \
                isinstance(node, ast.keyword) and node.arg == key:
            found.append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "extend" \
                and keyed(node.func.value) and len(node.args) == 1:
            found.append(node.args[0])
    return [e.value for v in found if isinstance(v, (ast.List, ast.Tuple))
            for e in v.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def applicable(requirements: Iterable[str], python: str) -> dict[str, str]:
    """Canonical name -> requirement (marker dropped) for each requirement whose marker holds for CPython
    `python` on Linux; unparseable lines are left out."""
    env = {**default_environment(), "python_version": python, "python_full_version": f"{python}.0",
           "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    out: dict[str, str] = {}
    for line in requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        req.marker = None
        out.setdefault(canonicalize_name(req.name), str(req))
    return out


def commit_files(source: str, commit: str) -> dict[str, str]:
    """The metadata files at `commit` of a local source (`git show`)."""
    return {name: res.stdout for name in FILES
            if (res := subprocess.run(["git", "-C", str(Path(source).expanduser()), "show", f"{commit}:{name}"],
                                      capture_output=True, text=True, env=git_env(), check=False)).returncode == 0}


def gold_files(files: dict[str, str], patch: str) -> dict[str, str]:
    """The metadata files as a Gold patch leaves them (those it does not touch, or cannot apply to, as they are)."""
    touched = [n for n in FILES if f"\n+++ b/{n}\n" in "\n" + patch]
    if not touched:
        return files
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            Path(d, name).write_text(text)
        res = subprocess.run(["git", "apply", *(f"--include={n}" for n in touched), "-"], cwd=d, input=patch,
                             text=True, capture_output=True, env=git_env(), check=False)
        if res.returncode:
            return files
        return {n: Path(d, n).read_text() for n in FILES if Path(d, n).is_file()}


def base_requirements(source: str, setup_commit: str, bases: Sequence[tuple[str, str]], python: str,
                      known: Iterable[str] = (), golds: Mapping[str, str] | None = None,
                      read: Callable[[dict[str, str]], list[str]] = read_install_requires) -> dict[str, str] | None:
    """Requirement -> the rows whose Base needs it, for what the Bases (`(instance_id, base_commit)`) require
    and neither the setup commit nor `known` (the spec's packages) names; with `golds` ({instance_id: Gold patch}),
    also what each Gold patch adds to them (SWE-bench's eval script installs the project again once the patch is
    applied: a dependency the fix adds is there when its tests run). None when `source` is not a local
    repository holding every commit: like `git describe` for the project version, read at planning time from a
    local source only (a remote one would be fetched once per Base at every plan); the recipe records it.
    `read=read_build_requires`: the same for what building asks for (extensions are rebuilt in each checkout
    without network)."""
    if not all(has_commit(source, c) for c in (setup_commit, *(b for _, b in bases))):
        return None
    have = set(applicable([*read(commit_files(source, setup_commit)), *known], python))
    needed: dict[str, dict[str, set[str]]] = {}       # requirement -> side -> rows
    for instance_id, commit in bases:
        files = commit_files(source, commit)
        trees = [("Base", files)]
        if golds and golds.get(instance_id):
            trees.append(("Gold patch", gold_files(files, golds[instance_id])))
        for side, tree in trees:
            for name, req in applicable(read(tree), python).items():
                if name not in have:
                    needed.setdefault(req, {}).setdefault(side, set()).add(instance_id)
    return {req: "required by " + "; ".join(f"the {side} of {', '.join(sorted(ids))}" for side, ids in sides.items())
            for req, sides in sorted(needed.items())}
