"""``[[setup.command]]``: a workload's setup command, checked when the workload loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.errors import ConfigError
from recipes.train.resources import SetupCommand
from recipes.workload import load_workload

HEAD = '[workload]\ndescription = "d"\n\n'
PHASES = """
[[instance]]
name = "cli"

[[instance.phase]]
name = "one"
kind = "command"
args = ["{corpus}/a.txt"]
"""
CORPUS = """
[[setup.command]]
name = "corpus"
args = ["python3", "{workload_dir}/make.py", "{corpus}", "{work}"]
output = "corpus"
env = { SEED = "{project}" }
"""


def _load(tmp_path: Path, setup: str, phases: str = PHASES) -> object:
    path = tmp_path / "w.toml"
    path.write_text(HEAD + setup + phases)
    return load_workload(path)


def test_a_setup_command_gives_its_output_as_a_placeholder(tmp_path: Path) -> None:
    workload = _load(tmp_path, CORPUS)
    ((kind, commands),) = workload.resources  # type: ignore[attr-defined]
    assert kind == "command"
    assert commands == (
        SetupCommand(
            "corpus",
            ("python3", "{workload_dir}/make.py", "{corpus}", "{work}"),
            None,
            (("SEED", "{project}"),),
            "corpus",
        ),
    )


def test_setup_commands_use_earlier_outputs_and_other_resources(tmp_path: Path) -> None:
    setup = (
        "[setup]\ndocroot = true\n"
        + CORPUS
        + (
            '\n[[setup.command]]\nname = "second"\nargs = ["cp", "-r", "{corpus}", "{docroot}", "{other}"]\n'
            'output = "other"\ncwd = "{corpus}"\n'
        )
    )
    workload = _load(tmp_path, setup)
    assert [kind for kind, _ in workload.resources] == ["docroot", "command"]  # type: ignore[attr-defined]


@pytest.mark.refuses("setup-command-invalid")
@pytest.mark.parametrize(
    ("setup", "words"),
    [
        ('[[setup.command]]\nname = "c"\n', "[[command]] 'c': args: missing"),
        ('[[setup.command]]\nname = "c"\nargs = []\n', "args: needs the program to run first"),
        ('[[setup.command]]\nname = "c"\nargs = ["x"]\noutput = "a-b"\n', "output: 'a-b' is not a placeholder name"),
        ('[[setup.command]]\nname = "c"\nargs = ["x"]\nretries = 3\n', "retries: unknown key"),
        ('[[setup.command]]\nargs = ["x"]\n', "name: missing"),
        (
            '[[setup.command]]\nname = "c"\nargs = ["x", "{late}"]\n[[setup.command]]\nname = "d"\nargs = ["y"]\n'
            'output = "late"\n',
            "args: {late} is the output of a later setup command",
        ),
        (
            '[[setup.command]]\nname = "c"\nargs = ["x"]\n[[setup.command]]\nname = "c"\nargs = ["y"]\n',
            "name: 'c' is used twice",
        ),
        (
            '[[setup.command]]\nname = "c"\nargs = ["x"]\noutput = "o"\n[[setup.command]]\nname = "d"\n'
            'args = ["y"]\noutput = "o"\n',
            "output: 'o' is used twice",
        ),
    ],
)
def test_a_bad_setup_command_is_refused_when_the_workload_loads(tmp_path: Path, setup: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, setup, PHASES.replace("{corpus}", "{work}"))
    assert words in caught.value.line(), caught.value.line()


@pytest.mark.refuses("unknown-placeholder-lone-brace-bad-env-placeholder")
def test_a_setup_command_with_an_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, CORPUS.replace("{work}", "{binary}"))
    assert "[setup] command: unknown placeholder {binary}" in caught.value.line(), caught.value.line()


@pytest.mark.refuses("setup-placeholder-given-twice")
@pytest.mark.parametrize("name", ["work", "docroot"])
def test_a_setup_output_named_as_another_placeholder_is_refused(tmp_path: Path, name: str) -> None:
    setup = "[setup]\ndocroot = true\n" + CORPUS.replace('output = "corpus"', f'output = "{name}"')
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, setup.replace("{corpus}", "{work}"), PHASES.replace("{corpus}", "{work}"))
    assert f"[setup]: command: the placeholder {{{name}}} is already given" in caught.value.line(), caught.value.line()


def test_a_phase_without_the_output_placeholder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "", PHASES)
    assert "unknown placeholder {corpus}" in caught.value.line()
