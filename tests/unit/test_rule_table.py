"""docs/rules.md's table "rule → function → test" (moved there from CONTRIBUTING.md) stays true as the code moves.

Every function it names is a function (or class, or method) under ``recipes/``; every test it names is a test
function in the file it says; the list of rules without a test at the end of the section is exactly the table's
"no test" rows.
"""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "rules.md"
SECTION = "# Rules, their functions and their tests"
_CODE = re.compile(r"`([^`]+)`")
#: a ``|`` outside backticks (a cell may quote ``tail|keep``)
_CELL_SEPARATOR = re.compile(r"\|(?=(?:[^`]*`[^`]*`)*[^`]*$)")


def _section() -> str:
    text = RULES.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end >= 0 else len(text)]


def _rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in _section().splitlines():
        if not line.startswith("| ") or line.startswith("| ---") or line.startswith("| rule |"):
            continue
        cells = [c.strip() for c in _CELL_SEPARATOR.split(line.strip()[1:-1])]
        assert len(cells) == 3, f"a table row of other than three cells: {line}"
        if cells[0].startswith("**"):  # a group heading
            continue
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def _resolve(dotted: str) -> object:
    """``module.attr[.attr…]`` under recipes, the longest module prefix first."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: object = importlib.import_module("recipes." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise AssertionError(f"{dotted}: no module of recipes/")


@cache
def _tests_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    )


def test_the_table_has_the_rules() -> None:
    assert len(_rows()) > 250


def test_every_function_the_table_names_exists() -> None:
    wrong = []
    for rule, function, _ in _rows():
        for dotted in _CODE.findall(function):
            try:
                obj = _resolve(dotted)
            except (AttributeError, AssertionError) as e:
                wrong.append(f"{rule}: {dotted} ({e})")
                continue
            if not callable(obj):
                wrong.append(f"{rule}: {dotted} is not a function or class")
    assert not wrong, "\n".join(wrong)


def test_every_test_the_table_names_exists() -> None:
    wrong = []
    for rule, _, tests in _rows():
        if tests == "no test":
            continue
        names = _CODE.findall(tests)
        assert names, f"{rule}: neither a test nor 'no test'"
        for name in names:
            file, _, function = name.partition("::")
            path = ROOT / file
            if not path.is_file():
                wrong.append(f"{rule}: {file} is no file")
            elif function.split("[")[0] not in _tests_in(path):
                wrong.append(f"{rule}: {file} has no {function}")
    assert not wrong, "\n".join(wrong)


def test_the_list_of_rules_without_a_test_is_the_tables() -> None:
    section = _section()
    untested_rows = [(rule, function) for rule, function, tests in _rows() if tests == "no test"]
    m = re.search(r"^Rules without a test: (\d+)\.$", section, re.MULTILINE)
    assert m, "the section says how many rules have no test"
    assert int(m.group(1)) == len(untested_rows)
    listed = section[m.end() :]
    groups = re.findall(r"^- .+? \((\d+)\): (.*)$", listed, re.MULTILINE)
    assert sum(int(n) for n, _ in groups) == len(untested_rows)
    listed_functions = sorted(f for _, text in groups for f in re.findall(r"\(`([^`]+)`\)", text))
    table_functions = sorted(_CODE.findall(function)[0] for _, function in untested_rows)
    assert listed_functions == table_functions
