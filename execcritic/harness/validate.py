"""Static validation of a Test bundle b = (test.patch, test_command, test_contract.json) - SPEC §2.1.

Everything that can be decided without running anything is decided here, and *every* problem is
reported (an agent revising a bundle should see them all at once), each with a stable code:

- `patch.*`     test.patch safety (tests only, no deletion/rename/.git/absolute/`..`/binary, size)
- `command.*`   one line, one runner invocation, no chaining/substitution/redirection
- `contract.*`  the seven fields, non-empty, no duplicate nodes
- `runner.*`    the runner is recognized, fits the task, and its options are acceptable
- `selector.*`  nothing on the command selects more than named nodes (file/class/directory/suite/
                pattern), and no node is selected twice
- `binding.*`   every declared node is bound by an exact selector; every exact selector is declared;
                every test the patch adds is declared

Whether the declared nodes are actually *collected* is an execution question (the harness).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from execcritic.bundle.added import AddedTest, added_tests, base_scope
from execcritic.bundle.command import parse_command
from execcritic.bundle.diff import parse_patch
from execcritic.bundle.gates import test_patch_problems
from execcritic.bundle.languages import python as py
from execcritic.bundle.model import TestBundle, parse_contract
from execcritic.bundle.nodes import Node
from execcritic.bundle.problems import CONTRACT, TEST_COMMAND, TEST_PATCH, Problem
from execcritic.config import PAPER, HarnessConfig
from execcritic.runners.base import Runner
from execcritic.runners.registry import runner_for_command, runner_for_task

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_LEVEL_TEXT = {
    "file": "selects a whole file",
    "class": "selects a whole class",
    "directory": "selects a whole directory",
    "suite": "selects the whole suite",
    "pattern": "selects every test matching a pattern",
    "unknown": "is not an exact test node id this runner understands",
}


def validate_bundle(
    bundle: TestBundle,
    task: "Task | None" = None,
    config: HarnessConfig = PAPER.harness,
    *,
    read_base: Callable[[str], "str | None"] | None = None,
) -> list[Problem]:
    """All problems of a bundle; an empty list means the bundle is admissible.

    `task` enables the repository check (the command's runner must be the task's native runner
    where that is decidable). `read_base` (path -> Base file text or None) lets runner checks that
    need the repository's other tests (SymPy's substring `-k`) see them; without it they use what
    the patch shows.
    """
    problems: list[Problem] = []
    language = task.language if task is not None else None

    # ---- artifacts on their own ------------------------------------------------------------------
    problems += test_patch_problems(
        bundle.test_patch, language=language, max_bytes=config.max_test_patch_bytes
    )
    cmd = parse_command(bundle.test_command, max_chars=config.max_command_chars)
    problems += list(cmd.problems)
    contract, contract_problems = parse_contract(bundle.contract_text, config.max_contract_field_chars)
    problems += contract_problems

    # ---- the runner ------------------------------------------------------------------------------
    runner: Runner | None = None
    if cmd.argv and not any(
        p.code in ("command.empty", "command.multiline", "command.missing") for p in cmd.problems
    ):
        runner = runner_for_command(cmd)
        if runner is None:
            problems.append(
                Problem(
                    "runner.unrecognized",
                    TEST_COMMAND,
                    f"`{cmd.program}` is not a test runner this harness knows; invoke the "
                    "repository's own runner (e.g. pytest, ./tests/runtests.py, bin/test)",
                )
            )
    if runner is not None and task is not None:
        native = runner_for_task(task)
        if native is not None and native.name != runner.name and not _compatible(runner, native, task):
            problems.append(
                Problem(
                    "runner.mismatch",
                    TEST_COMMAND,
                    f"{task.repo} runs its tests with {native.name}, but the command uses "
                    f"{runner.name}; use the repository's runner",
                )
            )
    if runner is None:
        # the command cannot be bound, but the contract can still be checked against the patch
        native = runner_for_task(task) if task is not None else None
        if native is not None and contract is not None:
            declared = [(text, native.parse_node(text)) for text in contract.test_nodes]
            problems += _undeclared_added(native, bundle.test_patch, language, declared, read_base)
        return problems

    # ---- selection -------------------------------------------------------------------------------
    selection = runner.selection(cmd)
    problems += selection.problems
    for s in selection.broad:
        what = _LEVEL_TEXT.get(s.level, "is broader than a test node")
        note = f" ({s.note})" if s.note else ""
        problems.append(
            Problem(
                f"selector.{s.level}",
                TEST_COMMAND,
                f"`{s.text}` {what}{note}; select each declared test node explicitly",
            )
        )
    selected = selection.nodes
    if not selection.selectors:
        problems.append(Problem("selector.none", TEST_COMMAND, "the command selects no test node"))
    seen: list[Node] = []
    for node in selected:
        if any(_same_node(runner, node, other) for other in seen):
            problems.append(Problem("selector.duplicate", TEST_COMMAND, f"`{node.text}` is selected twice"))
        seen.append(node)

    if contract is None:
        return problems

    # ---- binding ---------------------------------------------------------------------------------
    declared = [(text, runner.parse_node(text)) for text in contract.test_nodes]
    for i, (text, node) in enumerate(declared):
        for text2, node2 in declared[:i]:
            if text2 != text and _same_node(runner, node, node2):
                problems.append(
                    Problem(
                        "contract.duplicate_nodes",
                        CONTRACT,
                        f"test_nodes {text2!r} and {text!r} name the same test",
                    )
                )
    for text, node in declared:
        if not node.name:
            problems.append(
                Problem(
                    "binding.not_a_node",
                    CONTRACT,
                    f"test_nodes entry {text!r} is not a test node (a file or class); declare "
                    "each test function",
                )
            )
            continue
        if not any(runner.binds(sel, node) for sel in selected):
            problems.append(
                Problem(
                    "binding.unbound",
                    TEST_COMMAND,
                    f"declared node {text!r} is not selected by an exact node selector on the "
                    f"command; add it (e.g. {_example(runner, node)})",
                )
            )
    for sel in selected:
        if not any(runner.binds(sel, node) for _t, node in declared if node.name):
            problems.append(
                Problem(
                    "binding.undeclared_selected",
                    CONTRACT,
                    f"the command selects `{sel.text}`, which test_nodes does not declare; "
                    "declare it or remove it from the command",
                )
            )
    problems += _undeclared_added(runner, bundle.test_patch, language, declared, read_base)

    # ---- runner-specific over-match (SymPy -k is a substring match) ----------------------------------
    overmatches = getattr(runner, "overmatches", None)
    if overmatches is not None:
        known = known_tests(
            bundle.test_patch,
            runner.selected_files(cmd) if hasattr(runner, "selected_files") else [],
            read_base,
        )
        declared_names = {node.name for _t, node in declared}
        for kw, others in overmatches(cmd, known).items():
            undeclared = [o for o in others if o not in declared_names]
            if undeclared:
                problems.append(
                    Problem(
                        "selector.overmatch",
                        TEST_COMMAND,
                        f"`-k {kw}` is a substring match and also selects {undeclared}; "
                        "declare those tests too (they run) or choose other tests",
                    )
                )
    return problems


def _undeclared_added(runner: Runner, test_patch: str, language, declared, read_base=None) -> list[Problem]:
    out = []
    for added in added_tests(test_patch, language):
        anode = _added_node(runner, added)
        if any(_declares(runner, node, anode, added.scope_certain) for _t, node in declared):
            continue
        # where the hunk does not show its scope, the Base file may place it (a JS describe block: mocha names a
        # test by its full title, which a declared node can only match with the chain the hunk leaves out)
        scope = None if added.scope_certain else base_scope(added, read_base, language)
        placed = _added_node(runner, dataclasses.replace(added, scope=scope)) if scope is not None else None
        if placed is None or not any(_declares(runner, node, placed, True) for _t, node in declared):
            out.append(
                Problem(
                    "binding.undeclared_added",
                    CONTRACT,
                    f"the patch adds test {added.qualified!r}, which test_nodes does not "
                    "declare; declare every new test (and select it)",
                )
            )
    return out


def _compatible(runner: Runner, native: Runner, task: "Task") -> bool:
    """unittest-style commands are accepted where the native runner is pytest (pytest runs
    unittest tests; a unittest command over them is as exact)."""
    return runner.name == "unittest" and native.name == "pytest"


def _same_node(runner: Runner, a: Node, b: Node) -> bool:
    return runner.binds(a, b) and runner.binds(b, a)


def _declares(runner: Runner, declared: Node, added: Node, scope_certain: bool) -> bool:
    """Does a declared node name a test the patch adds? Name and file must agree; the class only
    when the hunk showed it (a method added deep inside a class shows no class line, and git's hunk
    header is only a hint)."""
    if declared.name != added.name:
        return False
    if scope_certain:
        probe = added
    else:
        probe = Node(added.runner, added.name, added.path, tuple(declared.scope), declared.param, added.text)
    return runner.binds(probe, declared) or runner.binds(
        Node(probe.runner, probe.name, probe.path, probe.scope, None, probe.text), declared
    )


def _added_node(runner: Runner, added: "AddedTest") -> Node:
    to_node = getattr(runner, "node_for_file", None)
    if to_node is not None:
        return to_node(added.path, added.scope, added.name)
    return Node(runner.name, added.name, added.path, added.scope, None, added.qualified)


def _example(runner: Runner, node: Node) -> str:
    try:
        if node.path and (node.scope or runner.name not in ("django", "unittest")):
            return f"`{runner.build_command([node])}`"
    except Exception:  # noqa: BLE001 - an example is a courtesy
        pass
    return "its full node id"


def known_tests(
    test_patch: str, files: list[str], read_base: Callable[[str], "str | None"] | None
) -> dict[str, set[str]]:
    """Test names visible per file: from the Base file when a reader is given, plus the patch's
    post-image (added and context lines)."""

    out: dict[str, set[str]] = {}
    parsed = parse_patch(test_patch) if test_patch and test_patch.strip() else None
    paths = set(files)
    if parsed:
        paths |= {fd.new_path for fd in parsed.files if fd.new_path}
    for path in paths:
        names: set[str] = set()
        if read_base is not None:
            text = read_base(path)
            if text:
                names |= {n for _s, n, _i in py.scan_defs(text.splitlines())}
        if parsed:
            for fd in parsed.files:
                if fd.new_path == path:
                    for section, lines in fd.hunk_texts():
                        post = [ln[1:] for ln in lines if ln[:1] in (" ", "+")]
                        names |= {n for _s, n, _i in py.scan_defs(post, section)}
        if names:
            out[path] = names
    return out


def is_valid(bundle: TestBundle, task: "Task | None" = None, config: HarnessConfig = PAPER.harness) -> bool:
    return not validate_bundle(bundle, task, config)


__all__ = ["is_valid", "known_tests", "validate_bundle", "TEST_PATCH"]
