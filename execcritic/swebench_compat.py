"""Access to swebench 5.x's pure parts (log parsers, grading) without importing its Docker harness.

`import swebench.harness.<anything>` runs `swebench/harness/__init__.py`, which imports docker,
datasets and modal (~2 s). The grading and parser modules themselves only need unidiff, so we bind
`swebench.harness` to a bare package object first when it is not already imported. This is the
documented workaround from the ecosystem notes §1.6; the official Docker path imports the real package.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from functools import lru_cache
from pathlib import Path
from typing import Callable


def _ensure_light_harness_package() -> None:
    if "swebench.harness" in sys.modules:
        return
    spec = importlib.util.find_spec("swebench")
    if spec is None or spec.origin is None:
        raise ImportError("swebench is not installed; `pip install swebench==5.0.2`")
    harness_dir = Path(spec.origin).parent / "harness"
    stub = types.ModuleType("swebench.harness")
    stub.__path__ = [str(harness_dir)]  # type: ignore[attr-defined]
    sys.modules["swebench.harness"] = stub


@lru_cache(maxsize=None)
def parser_registry() -> dict[str, Callable]:
    _ensure_light_harness_package()
    from swebench.harness.log_parsers import PARSER_REGISTRY  # lazy: swebench's Docker harness

    return dict(PARSER_REGISTRY)


def parser_for(name: str) -> Callable[[str], dict[str, str]]:
    """swebench's log parser `name`, as a one-argument function of the log text."""
    registry = parser_registry()
    if name not in registry:
        raise KeyError(f"swebench has no log parser {name!r}")
    fn = registry[name]
    return lambda log: fn(log, None)


def grading():
    """The swebench.harness.grading module (get_logs_eval, get_eval_report, get_resolution_status...)."""
    _ensure_light_harness_package()
    from swebench.harness import grading as g  # lazy: swebench's Docker harness

    return g


def constants():
    _ensure_light_harness_package()
    from swebench.harness import constants as c  # lazy: swebench's Docker harness

    return c
