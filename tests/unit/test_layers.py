"""The layers of recipes/: the workload (``recipes.workload``: the file, its format, the registry of instance modes
and phase kinds) is the bottom every other layer shares, and imports nothing above it; the plugins
(``recipes.train``) register into it; the runner (``recipes.train.trainer``), the plan, the stages and the bench are
above. No import for type checking only runs the other way (``if TYPE_CHECKING:`` of a module that imports the
one it is in, or one of the layers above the workload)."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.unit.test_imports import RECIPES, _module_name, import_graph

#: the layers above the workload: none of them may be loaded by importing it
ABOVE_THE_WORKLOAD = ("recipes.bench", "recipes.train", "recipes.stages", "recipes.plan")
#: what the workload may import besides itself: the modules every layer shares, which import no layer
WORKLOAD_MAY_IMPORT = {
    "recipes",
    "recipes.config",
    "recipes.errors",
    "recipes.web",  # the package: its __init__ imports nothing
    "recipes.web.h2load",
    "recipes.inputs",
    "recipes.results",
}


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


#: the floors of the house, bottom first: the wings (folders) and the top floor's modules. A module imports only
#: from its own floor or below (CONTRIBUTING.md, "Layout"); within a floor anything goes, so the tools of the
#: toolchain and of LLVM, and the three wings the sessions drive, may import each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("recipes", "recipes.errors", "recipes.inputs", "recipes.files", "recipes.runner",
     "recipes.store", "recipes.results", "recipes.config", "recipes.report", "recipes.workdir"),
    ("recipes.web",),
    ("recipes.procs",),
    ("recipes.toolchain", "recipes.llvm"),
    ("recipes.workload",),
    ("recipes.train",),
    ("recipes.claim", "recipes.plan"),
    ("recipes.stages", "recipes.bench", "recipes.release"),
    ("recipes.sessions",),
)  # fmt: skip


def floor_of(module: str) -> int:
    """The floor a module is on: that of the longest name in :data:`FLOORS` it is, or is under."""
    found = [(len(name), floor) for floor, names in enumerate(FLOORS) for name in names if _is_under(module, name)]
    assert found, f"{module} is on no floor of FLOORS: put it on one"
    return max(found)[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module -> imported`` for each import of a module on a floor above the importer's."""
    return sorted(f"{a} -> {b}" for a, names in graph.items() for b in names if floor_of(b) > floor_of(a))


def test_every_module_is_on_a_floor_and_imports_nothing_above_it() -> None:
    graph = import_graph()
    assert {"recipes.release.make", "recipes.toolchain.rustc", "recipes.llvm.profdata", "recipes.web.net"} <= set(graph)
    assert upward_imports(graph) == []


def test_an_import_from_a_floor_above_is_found() -> None:
    """The check itself: the web wing importing the release wing, or the workload the plan, is upward."""
    graph = {"recipes.web.net": {"recipes.release.make"}, "recipes.workload.file": {"recipes.plan", "recipes.errors"}}
    assert upward_imports(graph) == ["recipes.web.net -> recipes.release.make", "recipes.workload.file -> recipes.plan"]


def test_the_top_floor_holds_few_modules_and_no_file_name_is_used_twice() -> None:
    top = sorted(p.stem for p in RECIPES.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 13, top
    names = [p.name for p in RECIPES.rglob("*.py") if p.name != "__init__.py"]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert twice == []


def _long_functions(limit: int) -> list[str]:
    """The functions of recipes/ longer than ``limit`` lines (decorators and docstring included), longest first."""
    found = []
    for path in RECIPES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append((length, f"{path.relative_to(RECIPES.parent)}:{node.lineno} {node.name}"))
    return [f"{where} ({length} lines)" for length, where in sorted(found, reverse=True)]


def test_no_function_over_99_lines_and_at_most_five_over_60() -> None:
    """A function that grows past a screen is split into its parts (CONTRIBUTING.md, "Style")."""
    assert _long_functions(99) == []
    assert len(_long_functions(60)) <= 5, _long_functions(60)
    assert _long_functions(40), "the scan finds no function at all"


def _loaded_by_importing(module: str) -> set[str]:
    """The modules of recipes a fresh interpreter holds after ``import module``."""
    code = f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m.startswith('recipes')))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=RECIPES.parent, capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def test_importing_the_workload_loads_no_layer_above_it() -> None:
    loaded = _loaded_by_importing("recipes.workload")
    assert "recipes.workload.file" in loaded  # the import did load the package
    above = sorted(m for m in loaded if any(_is_under(m, layer) for layer in ABOVE_THE_WORKLOAD))
    assert above == []


def test_the_workload_imports_only_the_shared_modules() -> None:
    """Every import of the workload's modules, type checking ones included, stays in the package or the shared
    modules (the test above sees what runs; this one also what mypy reads)."""
    outside: list[str] = []
    for path in sorted((RECIPES / "workload").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recipes"):
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name.startswith("recipes")]
            else:
                continue
            outside += [
                f"{_module_name(path)}: {name}"
                for name in names
                if not _is_under(name, "recipes.workload") and name not in WORKLOAD_MAY_IMPORT
            ]
    assert outside == []


def _type_checking_imports(tree: ast.Module) -> list[str]:
    """The modules imported under ``if TYPE_CHECKING:`` (anywhere in the file)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in (n for statement in node.body for n in ast.walk(statement)):
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    found.append(inner.module)
                elif isinstance(inner, ast.Import):
                    found.extend(alias.name for alias in inner.names)
    return found


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    """Whether ``start`` imports ``goal`` at run time, directly or through other modules."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), set()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def upward_type_checking_imports(files: dict[str, ast.Module], graph: dict[str, set[str]]) -> list[str]:
    """``module: imported`` for each ``if TYPE_CHECKING:`` import of a module above: one that imports, at run time,
    the module it is in (the cycle the guard hides), or a layer above the workload from inside it."""
    found = []
    for name, tree in sorted(files.items()):
        for imported in _type_checking_imports(tree):
            module = imported if imported in graph else imported.rpartition(".")[0]
            from_the_workload_up = _is_under(name, "recipes.workload") and any(
                _is_under(module, layer) for layer in ABOVE_THE_WORKLOAD
            )
            if module in graph and (from_the_workload_up or _reaches(graph, module, name)):
                found.append(f"{name}: {imported}")
    return found


def _recipes() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in RECIPES.rglob("*.py")}


def test_no_type_checking_import_runs_upward() -> None:
    assert upward_type_checking_imports(_recipes(), import_graph()) == []


GUARDED = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {} import X\n"


def test_the_scan_finds_an_upward_type_checking_import() -> None:
    """The scan sees the guards it is for (the bench's scenarios once imported the workload so, as the workload
    imported them), and lets a type-only import of a module below be."""
    files = {
        "recipes.workload.file": ast.parse(GUARDED.format("recipes.bench.scenarios")),  # the workload up
        "recipes.bench.scenarios": ast.parse(GUARDED.format("recipes.bench.cli")),  # cli imports scenarios
        "recipes.stages.train": ast.parse(GUARDED.format("recipes.workload.model")),  # below: fine
    }
    assert upward_type_checking_imports(files, import_graph()) == [
        "recipes.bench.scenarios: recipes.bench.cli",
        "recipes.workload.file: recipes.bench.scenarios",
    ]
