"""Layers point one way: every import in the package (function-level ones included) goes from a layer to a
lower one, or stays inside its own package. The table is docs/architecture.md's diagram, as data.

Why: training and the notebooks are built on the harness and the agents; a cycle (bundle <-> runners,
tasks <-> evaluation) makes a change in one place break another silently, and a hidden function-level
import hides exactly such an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "execcritic"
# code that runs inside the sandbox, on the task's interpreter, importing nothing of the package (its imports
# inside functions are about what exists before the code under test starts, not about weight)
INSIDE = PACKAGE / "harness" / "reporter" / "inside"

# rank: a package may import packages of a strictly lower rank (and itself).
LAYERS: dict[str, int] = {
    "cancel": 0, "errors": 0, "files": 0, "hashing": 0, "limits": 0, "prompts": 0, "swebench_compat": 0,
    "config": 1,
    "results": 2, "sandbox": 2,
    "tasks": 3,
    "bundle": 4,
    "runners": 5,
    "harness": 6,
    "evaluation": 7,
    "agents": 8, "rewards": 8,
    "pipeline": 9,
    "training": 10,
    "experiments": 11, "figures": 11,
    "cli": 12,
}
# stricter than the rank: the reward equations are pure (no I/O, nothing but the config)
ONLY: dict[str, set[str]] = {"rewards": {"config", "errors"}}


def _package_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if rel.parts else ""


def _imports() -> list[tuple[str, int, str, str]]:
    """(file, line, importing package, imported package) for every execcritic import."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" and path.parent == PACKAGE:
            continue
        src = _package_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] if node.module != "execcritic" else [f"execcritic.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "execcritic" and len(parts) > 1 and not parts[1].startswith("__"):
                    out.append((str(path.relative_to(PACKAGE.parent)), node.lineno, src, parts[1]))
    return out


def test_sandbox_side_code_imports_nothing_of_the_package():
    for path in INSIDE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "execcritic" or n.startswith("execcritic.") for n in names), f"{path}:{node.lineno}"


def test_every_package_has_a_layer():
    found = {_package_of(p) for p in PACKAGE.rglob("*.py")} - {"__init__", "__main__"}
    assert found <= set(LAYERS), f"packages without a layer (add them to LAYERS and docs/architecture.md): " \
                                 f"{sorted(found - set(LAYERS))}"


def test_imports_point_down():
    bad = []
    for file, line, src, dst in _imports():
        if src == dst:
            continue
        if dst not in LAYERS:
            bad.append(f"{file}:{line}: {src} -> {dst} (unknown package)")
        elif src in ONLY and dst not in ONLY[src]:
            bad.append(f"{file}:{line}: {src} may import only {sorted(ONLY[src])}, not {dst}")
        elif LAYERS[dst] >= LAYERS[src]:
            bad.append(f"{file}:{line}: {src} (layer {LAYERS[src]}) -> {dst} (layer {LAYERS[dst]})")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(bad)


def test_the_checker_sees_function_level_imports():
    """The scan must include imports inside functions (they were where the cycles hid)."""
    inner = [i for i in _imports() if i[0].endswith("pipeline/models.py") and i[3] == "agents"]
    assert inner, "expected pipeline/models.py's lazy import of the openai backend to be seen"


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.rglob("*.py") if INSIDE not in p.parents),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_function_level_imports_are_only_heavy_optional_dependencies(path):
    """Imports inside functions are allowed only for heavy optional dependencies, and each says so."""
    lines = path.read_text().split("\n")
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                assert "# lazy:" in lines[node.end_lineno - 1], \
                    f"{path}:{node.lineno}: a function-level import without a `# lazy: <why>` note; move it to the " \
                    "top of the module unless it is a heavy optional dependency"


def _module_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (every import statement, `if TYPE_CHECKING:` ones included)."""
    def name(path: Path) -> str:
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        return ".".join(parts)

    modules = {name(p): p for p in PACKAGE.rglob("*.py") if INSIDE not in p.parents}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith("execcritic.") and not mod.startswith(t + "."):
                    graph[mod].add(t)
    return graph


def test_no_module_imports_itself_through_others():
    """One-way inside packages too: e.g. experiments/params -> the artifact registry -> core -> params was a
    circle (through an `if TYPE_CHECKING:` import), which made the layer order a matter of luck."""
    graph = _module_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n] if n in stack else [m, n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles[:10])
