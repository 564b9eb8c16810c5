"""The Test bundle b = (test.patch, test_command, test_contract.json) - SPEC §2.1, paper §3.1.

A bundle is plain data; `execcritic.harness.validate.validate_bundle` says whether it is admissible.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.bundle.problems import CONTRACT, Problem
from execcritic.config import PAPER
from execcritic.errors import InputError

STRING_FIELDS = ("entrypoint", "trigger", "expected_output")
LIST_FIELDS = ("issue_evidence", "alternative_hypotheses", "non_assertions", "test_nodes")
CONTRACT_FIELDS = STRING_FIELDS + LIST_FIELDS

BUNDLE_FILES = ("test.patch", "test_command", "test_contract.json")


@dataclass(frozen=True)
class Contract:
    entrypoint: str
    trigger: str
    expected_output: str
    issue_evidence: tuple[str, ...]
    alternative_hypotheses: tuple[str, ...]
    non_assertions: tuple[str, ...]
    test_nodes: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in STRING_FIELDS}
        d.update({k: list(getattr(self, k)) for k in LIST_FIELDS})
        d.update(self.extra)
        return d


def parse_contract(text: str | None, max_field_chars: int = PAPER.harness.max_contract_field_chars) -> tuple[Contract | None, list[Problem]]:
    """Structural validation of test_contract.json. Returns (contract, problems); contract is None
    when a problem prevents building one. Every problem is reported, not just the first."""
    problems: list[Problem] = []

    def bad(code: str, message: str) -> None:
        problems.append(Problem(code, CONTRACT, message))

    if text is None or not text.strip():
        bad("contract.missing", "test_contract.json is missing or empty; write the seven required fields")
        return None, problems
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        bad("contract.invalid_json", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
        return None, problems
    if not isinstance(data, dict):
        bad("contract.not_object", f"the top-level value must be a JSON object, got {type(data).__name__}")
        return None, problems
    values: dict[str, Any] = {}
    for key in STRING_FIELDS:
        value = data.get(key)
        if key not in data:
            bad("contract.missing_field", f"required field {key!r} is missing")
        elif not isinstance(value, str) or not value.strip():
            bad("contract.empty_field", f"{key!r} must be a non-empty string")
        elif len(value) > max_field_chars:
            bad("contract.field_too_long", f"{key!r} is {len(value)} characters (limit {max_field_chars})")
        else:
            values[key] = value.strip()
    for key in LIST_FIELDS:
        value = data.get(key)
        if key not in data:
            bad("contract.missing_field", f"required field {key!r} is missing")
        elif not isinstance(value, list) or not value:
            bad("contract.empty_field", f"{key!r} must be a non-empty list of non-empty strings")
        elif not all(isinstance(v, str) and v.strip() for v in value):
            bad("contract.empty_field", f"every item of {key!r} must be a non-empty string")
        elif any(len(v) > max_field_chars for v in value):
            bad("contract.field_too_long", f"an item of {key!r} exceeds {max_field_chars} characters")
        else:
            values[key] = tuple(v.strip() for v in value)
    if "test_nodes" in values:
        seen: set[str] = set()
        dups = [n for n in values["test_nodes"] if n in seen or seen.add(n)]  # type: ignore[func-returns-value]
        if dups:
            bad("contract.duplicate_nodes", f"test_nodes has duplicates: {sorted(set(dups))}")
    if problems:
        return None, problems
    extra = {k: v for k, v in data.items() if k not in CONTRACT_FIELDS}
    return Contract(extra=extra, **values), []


@dataclass(frozen=True)
class TestBundle:
    """As submitted: raw texts, so that validation can report on each artifact independently."""

    __test__ = False  # not a pytest test class

    test_patch: str
    test_command: str
    contract_text: str

    @property
    def contract(self) -> Contract | None:
        return parse_contract(self.contract_text)[0]

    @property
    def command_line(self) -> str:
        return self.test_command.strip()

    def digest(self) -> str:
        """Identity of a bundle: sha256 over patch, command and contract (16 hex)."""
        h = hashlib.sha256()
        for part in (self.test_patch, self.command_line, self.contract_text):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]

    @classmethod
    def from_contract(cls, test_patch: str, test_command: str, contract: Contract | dict) -> "TestBundle":
        data = contract.to_dict() if isinstance(contract, Contract) else contract
        return cls(test_patch, test_command, json.dumps(data, indent=2, sort_keys=True))

    @classmethod
    def from_dir(cls, directory: str | Path) -> "TestBundle":
        """Read `test.patch`, `test_command`, `test_contract.json` from a directory. A missing file is an
        InputError naming it; an empty one is left to validation (it is a bundle problem)."""
        d = Path(directory)
        if not d.is_dir():
            raise InputError("bundle directory does not exist", file=str(d))
        texts = {}
        for name in BUNDLE_FILES:
            p = d / name
            if not p.is_file():
                raise InputError(f"bundle file {name} is missing (a bundle is {', '.join(BUNDLE_FILES)})",
                                 file=str(p))
            try:
                texts[name] = p.read_text()
            except UnicodeDecodeError as exc:
                raise InputError(f"{name} is not UTF-8 text", file=str(p)) from exc
        return cls(texts["test.patch"], texts["test_command"], texts["test_contract.json"])

    def write_dir(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "test.patch").write_text(self.test_patch)
        (d / "test_command").write_text(self.command_line + "\n")
        (d / "test_contract.json").write_text(self.contract_text)
        return d

    def to_dict(self) -> dict[str, str]:
        return {"test_patch": self.test_patch, "test_command": self.command_line,
                "test_contract": self.contract_text, "digest": self.digest()}
