from __future__ import annotations

from pathlib import Path

import pytest

from recipes.errors import ConfigError
from recipes.workload import load_workload, workload_path
from tests.conftest import REPO

GOOD = """
[workload]
description = "d"
min_functions = 3

[[instance]]
name = "cli"

[[instance.phase]]
name = "one"
kind = "command"
args = ["x", "{work}/file"]
runs = 2
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return path


def test_good_workload(tmp_path: Path) -> None:
    workload = load_workload(_write(tmp_path, GOOD))
    assert workload.min_functions == 3
    assert workload.instances[0].mode == "command"
    assert workload.instances[0].phases[0].name == "one"


def test_shipped_workloads_load() -> None:
    for path in sorted((REPO / "profiles").glob("*.toml")):
        assert load_workload(path).instances


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("runs = 2", "rnus = 2", r"rnus: unknown key \(did you mean 'runs'"),
        ("runs = 2", 'runs = "two"', r"runs: expected an integer, got str"),
        ("runs = 2", "runs = 0", r"runs: must be at least 1"),
        ('kind = "command"', 'kind = "comand"', r"kind: unknown value 'comand'.*did you mean 'command'"),
        ("{work}/file", "{wrok}/file", r"unknown placeholder \{wrok\}"),
        ('description = "d"', "", r"description: missing"),
        ('name = "cli"', 'name = "c li"', r"must be letters, digits"),
        ("min_functions = 3", "min_functions = true", r"expected an integer, got a boolean"),
    ],
)
def test_bad_workloads_name_the_key(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError, match=message) as caught:
        load_workload(_write(tmp_path, GOOD.replace(old, new, 1)))
    assert str(tmp_path / "w.toml") in caught.value.line()


def test_missing_workload_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no workload file .*one of: .*hello"):
        load_workload(workload_path(REPO, "nonesuch"))


def test_no_instances(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"instance: needs at least one \[\[instance\]\] table"):
        load_workload(_write(tmp_path, '[workload]\ndescription = "d"\n'))
