"""One output path: what recipes/ tells a person goes through ``runner.say`` (a progress line) or ``runner.show``
(a block), both to stderr and flushed; the session layer ends with the stage's summary through nox's
``session.log`` (recipes/sessions.py and noxfile.py). Nothing else under recipes/ prints."""

from __future__ import annotations

import ast
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

#: the prints that are not output for a person: the two in runner.py are say and show themselves; upstream's
#: is the port it listens on, read by the process that started it
ALLOWED = {("runner.py", "say"), ("runner.py", "show"), ("web/upstream.py", "serve")}


def _writes(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of every print() and sys.stdout/sys.stderr write."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                found.append((function, node.lineno))
            if (
                isinstance(f, ast.Attribute)
                and f.attr == "write"
                and isinstance(f.value, ast.Attribute)
                and f.value.attr in {"stdout", "stderr"}
            ):
                found.append((function, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_nothing_under_recipes_prints_but_say_and_show() -> None:
    stray = []
    for path in sorted(RECIPES.rglob("*.py")):
        name = str(path.relative_to(RECIPES))
        for function, line in _writes(ast.parse(path.read_text())):
            if (name, function) not in ALLOWED:
                stray.append(f"recipes/{name}:{line} in {function}")
    assert not stray, "print outside runner.say/show: " + ", ".join(stray)


def test_the_check_sees_a_print() -> None:
    assert _writes(ast.parse("def f():\n    print('x')\n\nsys.stderr.write('y')\n")) == [("f", 2), ("<module>", 4)]
