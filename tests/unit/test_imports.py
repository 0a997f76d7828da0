"""The modules of recipes/ import each other without a cycle: each can be read, tested and changed from the
modules below it. Imports for type checking only (``if TYPE_CHECKING:``) do not count; a package's
``__init__`` importing its own submodules (to register them) does not either."""

from __future__ import annotations

import ast
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _module_name(path: Path) -> str:
    parts = path.relative_to(RECIPES.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module) -> list[str]:
    """The modules a file imports when it runs (at the top, or inside a function), not under TYPE_CHECKING."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in RECIPES.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        imported = {m for m in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))) if m in files}
        is_package = path.name == "__init__.py"
        # a submodule importing a name of its package reaches the package's __init__, which imports it back
        # only to register it: that is the package, not a cycle
        graph[name] = {
            m
            for m in imported
            if m != name and not name.startswith(m + ".") and not (is_package and m.startswith(name + "."))
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50 and "recipes.stages.frame" in graph["recipes.stages.optimise"]  # edges are found
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_do_not_count() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from recipes import report\n"
        "if TYPE_CHECKING:\n    from recipes.stages import BuildPlan\n"
        "def f():\n    from recipes.toolchain import zig\n"
    )
    imported = _runtime_imports(tree)
    assert "recipes.report" in imported and "recipes.toolchain.zig" in imported
    assert not any(m.startswith("recipes.stages") for m in imported)
