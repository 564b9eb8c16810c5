"""A SWE-bench-style task row (swebench 5.x schema, SPEC §4) as a typed, validated object.

Task x = (d, R_B): the issue text and the buggy Base checkout. Gold R_G = Base + `patch`. The hidden
official tests are `test_patch` + FAIL_TO_PASS + PASS_TO_PASS; only the official evaluator and the
offline Gold audit may read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from execcritic.errors import InputError
from execcritic.tasks.view import TaskView

REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
                   "FAIL_TO_PASS", "PASS_TO_PASS")
OPTIONAL_TEXT_FIELDS = ("hints_text", "created_at", "version", "environment_setup_commit", "eval_script",
                        "log_parser", "eval_type", "image", "difficulty")

# log_parser -> language, for the Multilingual rows whose repo does not say it.
_PARSER_LANGUAGE = {
    "parse_log_cargo": "rust", "parse_log_gotest": "go", "parse_log_maven": "java",
    "parse_log_gradle_custom": "java", "parse_log_ant": "java", "parse_log_jest": "javascript",
    "parse_log_tap": "javascript", "parse_log_karma": "javascript", "parse_log_vitest": "javascript",
    "parse_log_immutable_js": "javascript", "parse_log_phpunit": "php",
    "parse_log_rspec_transformed_json": "ruby", "parse_log_ruby_unit": "ruby", "parse_log_jekyll": "ruby",
    "parse_log_googletest": "cpp", "parse_log_doctest": "cpp", "parse_log_redis": "c", "parse_log_jq": "c",
    "parse_log_micropython_test": "c",
}


def _node_list(value: Any, *, instance: str, name: str, source: str | None) -> tuple[str, ...]:
    """FAIL_TO_PASS/PASS_TO_PASS arrive as JSON text (Verified), numpy arrays (Multilingual) or lists."""
    if value is None:
        raise InputError("missing test list", file=source, instance=instance, field=name)
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise InputError(f"not a JSON list of test names ({exc.msg})", file=source, instance=instance,
                             field=name) from exc
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise InputError(f"expected a list of test names, got {type(value).__name__}", file=source,
                         instance=instance, field=name)
    for item in value:
        if not isinstance(item, str) or not item:
            raise InputError(f"test names must be non-empty strings, got {item!r}", file=source,
                             instance=instance, field=name)
    return tuple(value)


@dataclass(frozen=True)
class Task:
    instance_id: str
    repo: str
    base_commit: str
    patch: str                       # Gold: the reference source patch (hidden from agents)
    test_patch: str                  # the official test patch (hidden from agents)
    problem_statement: str           # the issue text d
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    hints_text: str = ""
    created_at: str = ""
    version: str = ""
    environment_setup_commit: str = ""
    eval_script: str = ""
    log_parser: str = ""
    eval_type: str = ""
    image: str = ""
    difficulty: str = ""
    dataset: str = ""                # where the row came from (path or hub id)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def language(self) -> str:
        if self.log_parser in _PARSER_LANGUAGE:
            return _PARSER_LANGUAGE[self.log_parser]
        return "python"

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, source: str | None = None) -> "Task":
        """Validate one dataset row. Errors name the file, the instance and the field."""
        instance = str(row.get("instance_id") or "<no instance_id>")
        for name in REQUIRED_FIELDS:
            if name not in row or row[name] is None:
                raise InputError("required field is missing", file=source, instance=instance, field=name)
        for name in ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement"):
            if not isinstance(row[name], str) or not row[name].strip():
                raise InputError(f"must be a non-empty string, got {type(row[name]).__name__}", file=source,
                                 instance=instance, field=name)
        if "/" not in row["repo"]:
            raise InputError(f"repo must look like 'owner/name', got {row['repo']!r}", file=source,
                             instance=instance, field="repo")
        f2p = _node_list(row["FAIL_TO_PASS"], instance=instance, name="FAIL_TO_PASS", source=source)
        if not f2p:
            raise InputError("FAIL_TO_PASS is empty: the task has no failing test to resolve", file=source,
                             instance=instance, field="FAIL_TO_PASS")
        p2p = _node_list(row["PASS_TO_PASS"], instance=instance, name="PASS_TO_PASS", source=source)
        optional = {}
        for name in OPTIONAL_TEXT_FIELDS:
            value = row.get(name)
            if value is None or (isinstance(value, float) and value != value):  # None or NaN
                value = ""
            optional[name] = str(value)
        known = set(REQUIRED_FIELDS) | set(OPTIONAL_TEXT_FIELDS)
        extra = {k: v for k, v in row.items() if k not in known}
        return cls(instance_id=row["instance_id"], repo=row["repo"], base_commit=row["base_commit"],
                   patch=row["patch"], test_patch=row["test_patch"],
                   problem_statement=row["problem_statement"], fail_to_pass=f2p, pass_to_pass=p2p,
                   dataset=source or "", extra=extra, **optional)

    def to_row(self) -> dict[str, Any]:
        """The swebench 5.x row (lists as JSON text, like Verified), e.g. for `make_test_spec`."""
        row: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("fail_to_pass", "pass_to_pass", "dataset", "extra"):
                continue
            row[f.name] = getattr(self, f.name)
        row["FAIL_TO_PASS"] = json.dumps(list(self.fail_to_pass))
        row["PASS_TO_PASS"] = json.dumps(list(self.pass_to_pass))
        return row

    def view(self) -> TaskView:
        """What an agent may see of this task (the Gold boundary as a type)."""
        return TaskView(instance_id=self.instance_id, repo=self.repo, problem_statement=self.problem_statement,
                        language=self.language)
