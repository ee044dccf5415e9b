"""The packages import each other without cycles, function-level imports included.

Every ``import`` statement of capsim, vtfn_jax and i2ce_jax (read from the
source, so an import inside a function counts too) is an edge from its module
to the package module it names, and to the packages whose ``__init__`` runs
first (importing ``capsim.train.lock`` from outside capsim.train runs
capsim/train/__init__.py); the graph must have no cycle. A cycle hidden
behind a function-level import still breaks whoever imports the other end
first, and it hides which module owns what.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("capsim", "vtfn_jax", "i2ce_jax")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")
    }


def _imported(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The package modules one import statement loads (``from a import b``: a.b when it is
    a module, else a)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in modules]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        targets = []
        for alias in node.names:
            submodule = f"{node.module}.{alias.name}"
            targets.append(submodule if submodule in modules else node.module)
        return [t for t in targets if t in modules]
    return []


def _with_packages(target: str, importer: str, modules: dict[str, Path]) -> set[str]:
    """``target`` and the packages whose ``__init__`` runs first when ``importer`` loads it:
    its parents that do not contain ``importer`` (those are already running)."""
    parts = target.split(".")
    parents = {".".join(parts[:i]) for i in range(1, len(parts))}
    running = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 2)}
    return {target} | {p for p in parents - running if p in modules}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {
            module
            for node in ast.walk(tree)
            for target in _imported(node, modules)
            for module in _with_packages(target, name, modules)
            if module != name
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    # i2ce_jax.scorer imports the packaged models inside I2CEScorer.pretrained.
    assert "i2ce_jax.pretrained" in graph["i2ce_jax.scorer"]
    assert "capsim.train.trainer" in graph["capsim.train"]
    # Importing capsim.train.checkpoint from outside runs capsim/train/__init__ first.
    assert "capsim.train" in graph["i2ce_jax.pretrained"]


def test_no_import_cycles_in_the_packages():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
