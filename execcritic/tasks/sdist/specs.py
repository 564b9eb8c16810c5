"""SWE-bench's per-repo environment specs (python version, packages, install, test command).

swebench 5.x moved them out of the package; `swebench==4.1.0` (PyPI, MIT license, (c) the SWE-bench
authors) is the last release that ships them, in `swebench/harness/constants/python.py`
(`MAP_REPO_VERSION_TO_SPECS_PY`, `MAP_REPO_TO_REQS_PATHS`). Only the reselection pipeline reads the
wheel; the specs it uses are copied verbatim into the committed recipe, so builds never need it.
We never install 4.1.0 (the project pins 5.0.2): the file is pure data and is executed standalone.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from execcritic.errors import EnvironmentMissing

SPEC_SOURCE = ("swebench==4.1.0 swebench/harness/constants/python.py: MAP_REPO_VERSION_TO_SPECS_PY and "
               "MAP_REPO_TO_REQS_PATHS (MIT License, Copyright (c) 2023 Carlos E Jimenez, John Yang, et al.)")
WHEEL = "swebench-4.1.0-py3-none-any.whl"
MEMBER = "swebench/harness/constants/python.py"


def _wheel(cache: Path) -> Path:
    path = cache / "swebench-4.1.0" / WHEEL
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([sys.executable, "-m", "pip", "download", "swebench==4.1.0", "--no-deps", "-q",
                          "-d", str(path.parent)], capture_output=True, text=True)
    if res.returncode != 0 or not path.exists():
        raise EnvironmentMissing(f"could not download {WHEEL} from PyPI (needed only to reselect): "
                                 f"{res.stderr[-500:]}")
    return path


@lru_cache(maxsize=2)
def load_specs(cache: str) -> dict[str, Any]:
    """{'specs': {repo: {version: spec}}, 'reqs_paths': {repo: [paths]}} from the 4.1.0 wheel."""
    with zipfile.ZipFile(_wheel(Path(cache))) as zf:
        source = zf.read(MEMBER).decode()
    namespace: dict[str, Any] = {}
    exec(compile(source, f"{WHEEL}/{MEMBER}", "exec"), namespace)  # pure constants, no imports
    return {"specs": namespace["MAP_REPO_VERSION_TO_SPECS_PY"], "reqs_paths": namespace["MAP_REPO_TO_REQS_PATHS"],
            "env_yml_paths": namespace.get("MAP_REPO_TO_ENV_YML_PATHS", {})}


def spec_for(cache: Path, repo: str, version: str) -> dict[str, Any]:
    specs = load_specs(str(cache))["specs"]
    if repo not in specs or version not in specs[repo]:
        raise KeyError(f"swebench 4.1.0 has no spec for {repo} {version}")
    return dict(specs[repo][version])
