"""The Gold boundary (paper §3.1, Appendix B.1): Gold and the official tests neither enter generation nor
decide admission. Checked three ways:

1. by type: a `TaskView` has no field that could carry Gold or the official tests;
2. statically, over every module of `execcritic/agents/` (function-level code included): no import of the
   full `Task`, the Gold audit, discrimination, the oracle builder, the official evaluator, the pipeline or
   training; every attribute read on a `task` is a `TaskView` field; the prompt templates have no
   placeholder but the issue and budgets;
3. at run time, on real episodes: tests/integration/test_gold_boundary_episodes.py (what the model receives
   and what the trajectory records contain no Gold line, no official test line and no F2P name).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from execcritic.prompts import prompts
from execcritic.tasks.model import Task
from execcritic.tasks.view import HIDDEN_FIELDS, TaskView

AGENTS = Path(__file__).resolve().parents[2] / "execcritic" / "agents"
AGENT_MODULES = sorted(AGENTS.rglob("*.py"))
VIEW_FIELDS = {f.name for f in dataclasses.fields(TaskView)}

# what an agent module may never import: where Gold or the official tests live or are read
FORBIDDEN_MODULES = ("execcritic.tasks.model", "execcritic.tasks.load", "execcritic.tasks.sdist",
                     "execcritic.harness.oracle", "execcritic.harness.gate", "execcritic.harness.validate",
                     "execcritic.harness.execute", "execcritic.evaluation", "execcritic.pipeline",
                     "execcritic.training")
FORBIDDEN_NAMES = {"Task", "gold_audit", "discriminate", "oracle_bundle", "evaluate_official", "LabeledPatch"}


def test_the_view_has_no_gold_field():
    assert not VIEW_FIELDS & set(HIDDEN_FIELDS)
    task_fields = {f.name for f in dataclasses.fields(Task)}
    assert set(HIDDEN_FIELDS) <= task_fields          # the hidden list names real Task fields
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "b" * 40, "patch": "GOLD PATCH TEXT",
           "test_patch": "OFFICIAL TEST TEXT", "problem_statement": "the issue", "FAIL_TO_PASS": ["t.py::test_f2p"],
           "PASS_TO_PASS": [], "eval_script": "EVAL SCRIPT"}
    view = Task.from_row(row).view()
    text = repr(dataclasses.asdict(view))
    for secret in ("GOLD PATCH TEXT", "OFFICIAL TEST TEXT", "test_f2p", "EVAL SCRIPT"):
        assert secret not in text


def violations(source: str, where: str = "<source>") -> list[str]:
    """Every way `source` (an agents module) reaches for Gold or the official tests."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(FORBIDDEN_MODULES):
                out.append(f"{where}:{node.lineno} imports {node.module}")
            names = {a.name for a in node.names} & FORBIDDEN_NAMES
            if names:
                out.append(f"{where}:{node.lineno} imports {sorted(names)}")
        elif isinstance(node, ast.Import):
            out += [f"{where}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith(FORBIDDEN_MODULES)]
        elif isinstance(node, ast.Attribute):
            if node.attr in {"test_patch", "fail_to_pass", "pass_to_pass", "eval_script", "FAIL_TO_PASS", "PASS_TO_PASS"}:
                out.append(f"{where}:{node.lineno} reads .{node.attr}")
            base = ast.unparse(node.value)
            if (base == "task" or base.endswith(".task")) and node.attr not in VIEW_FIELDS:
                out.append(f"{where}:{node.lineno} reads {base}.{node.attr}, not a TaskView field")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.arg == "task" and (arg.annotation is None or ast.unparse(arg.annotation) != "TaskView"):
                    out.append(f"{where}:{node.lineno} {node.name}() takes a task that is not a TaskView")
    return out


@pytest.mark.parametrize("path", AGENT_MODULES, ids=lambda p: str(p.relative_to(AGENTS)))
def test_agent_modules_never_reach_for_gold(path):
    assert violations(path.read_text(), str(path)) == []


@pytest.mark.parametrize("name", ["test_agent", "repair"])
def test_prompt_templates_ask_only_for_the_issue_and_budgets(name):
    allowed = {"task", "step_limit", "feedback", "error"}
    for key, template in prompts(name).templates.items():
        placeholders = set(re.findall(r"\{\{\s*(\w+)", template)) | set(re.findall(r"(?<!\{)\{(\w+)\}(?!\})", template))
        assert placeholders <= allowed, f"{name}.{key} asks for {placeholders - allowed}"


@pytest.mark.parametrize("snippet", [
    "from execcritic.tasks.model import Task\n",
    "from execcritic.harness.gate import gold_audit\n",
    "def f(task: TaskView):\n    return task.patch\n",
    "def f(view):\n    return view.fail_to_pass\n",
    "def f(task):\n    return task.problem_statement\n",
    "def f():\n    from execcritic.evaluation.official import evaluate_official\n",
])
def test_the_checker_catches_each_shortcut(snippet):
    assert violations(snippet)
