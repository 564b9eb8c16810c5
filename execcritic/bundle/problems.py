"""A validation problem: a stable code (for tests and tables), the artifact at fault, and what to fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The three artifacts of a bundle b = (test.patch, test_command, test_contract.json), plus the
# Repair candidate (source patch) that the executor also checks.
TEST_PATCH = "test.patch"
TEST_COMMAND = "test_command"
CONTRACT = "test_contract.json"
SOURCE_PATCH = "source.patch"


@dataclass(frozen=True)
class Problem:
    code: str        # e.g. "command.chaining", "patch.source_edit", "contract.missing_field"
    artifact: str    # one of TEST_PATCH, TEST_COMMAND, CONTRACT, SOURCE_PATCH
    message: str     # says what is wrong and what to do about it

    def __str__(self) -> str:
        return f"{self.artifact}: [{self.code}] {self.message}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
