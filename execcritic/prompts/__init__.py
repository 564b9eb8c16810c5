"""The paper's prompts as templates (Appendix B.3), loaded from YAML and digested into every record."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

_DIR = Path(__file__).parent
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


class PromptSet:
    def __init__(self, name: str):
        self.name = name
        self.path = _DIR / f"{name}.yaml"
        raw = self.path.read_bytes()
        self.digest = hashlib.sha256(raw).hexdigest()[:16]
        self.templates: dict[str, str] = {k: v for k, v in yaml.safe_load(raw).items() if k != "source"}

    def render(self, key: str, **values: Any) -> str:
        """Jinja rendering (double-braced placeholders); a missing value is an error, not an empty string."""
        return _ENV.from_string(self.templates[key]).render(**values)

    def format(self, key: str, **values: Any) -> str:
        """Python str.format rendering for the single-braced follow-up templates (Listing 8)."""
        return self.templates[key].format(**values)

    def raw(self, key: str) -> str:
        return self.templates[key]


@lru_cache(maxsize=None)
def prompts(name: str) -> PromptSet:
    return PromptSet(name)


def prompt_digests() -> dict[str, str]:
    return {p.stem: prompts(p.stem).digest for p in sorted(_DIR.glob("*.yaml"))}
