"""docs/rules.md's table "rule → function → test" stays true as the code moves.

The table is written by ``tools/rule_table.py`` from docs/rules.toml (the rules, their groups and functions) and
the tests' ``@pytest.mark.refuses("<rule id>")`` marks. Here: the page is what the generator writes (a mark added
or removed fails until the page is written again), every function a rule names is a function (or class, or method)
under ``recipes/``, every mark names a rule, and the generator refuses what it cannot work from.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tools import rule_table
from tools.rule_table import RuleTableError


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


def test_the_table_has_the_rules() -> None:
    assert sum(len(g.rules) for g in rule_table.load_rules()) > 250
    assert len(rule_table.find_marks()) > 400


def test_the_page_is_what_the_generator_writes() -> None:
    page = rule_table.RULES_MD.read_text(encoding="utf-8")
    assert page == rule_table.expected_page(page), "docs/rules.md is out of date: run python tools/rule_table.py"


def test_every_function_a_rule_names_exists() -> None:
    wrong = []
    for group in rule_table.load_rules():
        for rule in group.rules:
            for dotted in rule.names():
                try:
                    obj = _resolve(dotted)
                except (AttributeError, AssertionError) as e:
                    wrong.append(f"{rule.id}: {dotted} ({e})")
                    continue
                if not callable(obj):
                    wrong.append(f"{rule.id}: {dotted} is not a function or class")
    assert not wrong, "\n".join(wrong)


def test_every_mark_names_a_rule() -> None:
    wrong = rule_table.unknown_marks(rule_table.load_rules(), rule_table.find_marks())
    assert not wrong, "\n".join(wrong)


def test_the_rules_without_a_test_are_listed_by_group() -> None:
    groups, marks = rule_table.load_rules(), rule_table.find_marks()
    tested = {m.rule for m in marks}
    untested = [r for g in groups for r in g.rules if r.id not in tested]
    table = rule_table.render(groups, marks)
    assert f"Rules without a test: {len(untested)}." in table
    assert table.count(" | no test |") == len(untested)
    for rule in untested:
        assert f"{rule.text} (`{rule.functions[0]}`)" in table


def test_a_mark_and_its_test_found_in_a_class_and_on_a_parametrized_test(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "unit").mkdir(parents=True)
    (tests / "unit" / "test_x.py").write_text(
        "import pytest\n\n"
        '@pytest.mark.refuses("b", "a")\n@pytest.mark.parametrize("n", [1, 2])\ndef test_one(n): ...\n\n'
        'class TestThem:\n    @pytest.mark.refuses("a")\n    def test_two(self): ...\n'
    )
    marks = rule_table.find_marks(tests)
    assert [(m.rule, m.test) for m in marks] == [
        ("b", "tests/unit/test_x.py::test_one"),
        ("a", "tests/unit/test_x.py::test_one"),
        ("a", "tests/unit/test_x.py::TestThem::test_two"),
    ]
    groups = (rule_table.Group("G", (rule_table.Rule("a", "rule a", ("m.f",), via=("m.g",)),)),)
    table = rule_table.render(groups, marks)
    assert (
        "| rule a | `m.f` (`m.g`) | `tests/unit/test_x.py::test_one`, `tests/unit/test_x.py::TestThem::test_two` |"
        in table
    )
    assert rule_table.unknown_marks(groups, marks) == [
        f"{tests / 'unit' / 'test_x.py'}:3: tests/unit/test_x.py::test_one names no rule of docs/rules.toml: 'b'"
    ]


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ('import pytest\npytestmark = pytest.mark.refuses("a")\n', "outside a test function's decorators"),
        ('import pytest\n@pytest.mark.refuses("a")\ndef helper(): ...\n', "which is not a test"),
        ("import pytest\nA = 'a'\n@pytest.mark.refuses(A)\ndef test_x(): ...\n", "as string literals"),
        ("import pytest\n@pytest.mark.refuses()\ndef test_x(): ...\n", "takes rule ids"),
    ],
)
def test_a_mark_the_generator_cannot_read_is_refused(tmp_path: Path, source: str, says: str) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(source)
    with pytest.raises(RuleTableError, match=says):
        rule_table.find_marks(tmp_path / "tests")


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[[group]]\ntitle = "G"\n[[group.rule]]\nid = "a"\nrule = "r"\n', "needs an id, its rule and its function"),
        ('[[group]]\ntitle = "G"\n[[group.rule]]\nid = "a"\nrule = "r"\nfunction = "f"\nsee = "x"\n', "unknown keys"),
        (
            '[[group]]\ntitle = "G"\n[[group.rule]]\nid = "a"\nrule = "r"\nfunction = "f"\n'
            '[[group.rule]]\nid = "a"\nrule = "s"\nfunction = "g"\n',
            "the id 'a' twice",
        ),
        ('[[group]]\ntitle = "G"\n[[group.rule]]\nid = "a"\nrule = "r"\nfunction = []\n', "a list of them"),
        ('[[group]]\ntitle = "G"\n[[group.rule]]\nid = "a"\nrule = "x | y"\nfunction = "f"\n', "breaks the table"),
        ("", "no \\[\\[group\\]\\]"),
    ],
)
def test_a_rules_file_the_generator_cannot_read_is_refused(tmp_path: Path, toml: str, says: str) -> None:
    (tmp_path / "rules.toml").write_text(toml)
    with pytest.raises(RuleTableError, match=says):
        rule_table.load_rules(tmp_path / "rules.toml")


def test_check_says_the_page_is_out_of_date_and_writing_it_makes_it_true(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "rules.md"
    page.write_text(rule_table.RULES_MD.read_text(encoding="utf-8").replace(" | no test |", " | |", 1))
    monkeypatch.setattr(rule_table, "RULES_MD", page)
    monkeypatch.setattr(rule_table, "ROOT", tmp_path)
    assert rule_table.main(["--check"]) == 1
    assert "run python tools/rule_table.py" in capsys.readouterr().err
    assert rule_table.main([]) == 0
    assert rule_table.main(["--check"]) == 0
    assert page.read_text(encoding="utf-8") == rule_table.RULES_MD.read_text(encoding="utf-8")
