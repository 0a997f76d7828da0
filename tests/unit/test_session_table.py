"""The sessions declared in one table (recipes/sessions.py): what each stage's plan must find, decided from the
configuration alone, without cargo; every session registered once, from the table, with its line in ``nox -l``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import nox
import pytest

from recipes import sessions
from recipes.config import load_config
from recipes.errors import ConfigError
from recipes.results import Report
from recipes.stages.bolt import bolt
from recipes.stages.instrument import instrument
from recipes.stages.optimise import optimise
from recipes.stages.pipeline import pgo

#: (instruments, profdata, bolt) of each stage's plan, for (PGO_PROFDATA set, PGO_BOLT=1)
NEEDS = {
    "instrument": {(False, False): (True, True, False), (True, True): (True, True, False)},
    "train": {(False, False): (False, False, False), (True, True): (False, False, False)},
    "merge": {(False, False): (False, True, False), (True, True): (False, True, False)},
    "optimise": {(False, False): (False, True, False), (True, True): (False, True, True)},
    "bolt": {(False, False): (False, False, True), (True, True): (False, False, True)},
    # a given profile: nothing instrumented, so rustc's LLVM need not be one this llvm-profdata reads
    "pgo": {
        (False, False): (True, True, False),
        (True, True): (False, True, True),
        (True, False): (False, True, False),
    },
    "pgo-test": {(False, False): (False, False, False), (True, True): (False, False, False)},
}


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_what_each_stage_s_plan_must_find(name: str, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pgo]\n")
    stage = sessions.PLAN_STAGES[name]
    for (given, bolted), expected in NEEDS[name].items():
        environ = {
            **({"PGO_PROFDATA": str(tmp_path / "given.profdata")} if given else {}),
            "PGO_BOLT": str(int(bolted)),
        }
        config = load_config(tmp_path, environ)
        assert (stage.instruments(config), stage.profdata, stage.bolt(config)) == expected, (given, bolted)


def test_the_table_runs_the_stages_it_names() -> None:
    runs = {name: stage.run for name, stage in sessions.PLAN_STAGES.items()}
    assert (runs["instrument"], runs["optimise"], runs["bolt"], runs["pgo"]) == (instrument, optimise, bolt, pgo)
    assert set(sessions.PLAN_STAGES) <= set(sessions.PGO_SESSIONS)


def test_every_session_is_registered_once_from_the_table_with_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: dict[str, tuple[str | None, bool]] = {}

    def session(**options: object) -> object:
        def register(function: object) -> object:
            name = str(options["name"])
            assert name not in registered
            registered[name] = (getattr(function, "__doc__", None), bool(options["default"]))
            return function

        return register

    monkeypatch.setattr(nox, "session", session)
    sessions.register_pgo_sessions()
    assert list(registered) == list(sessions.PGO_SESSIONS)
    assert all(doc and doc.strip() for doc, _ in registered.values()), registered
    assert [name for name, (_, default) in registered.items() if default] == ["pgo"]
    assert registered["instrument"][0] == sessions.PLAN_STAGES["instrument"].doc


def test_every_session_declares_its_parser_its_records_and_its_tools() -> None:
    recorded = {field.name for field in dataclasses.fields(Report)}
    for declared in sessions.SESSIONS:
        assert set(declared.records) <= recorded, declared.name
        assert declared.tools is sessions.PLAN_STAGES.get(declared.name), declared.name
    by_name = {declared.name: declared for declared in sessions.SESSIONS}
    assert by_name["train"].parse(["--shard", "main", "--min-functions", "3"]) == sessions.PlanArgs(
        ("--min-functions", "3"), shard="main"
    )
    assert by_name["merge"].parse(["--gather", "a", "b"]) == sessions.PlanArgs((), gather=("a", "b"))
    assert by_name["pgo"].parse(["--min-functions", "3"]) == sessions.PlanArgs(("--min-functions", "3"))
    assert by_name["determinism"].parse([]).config == ()


@pytest.mark.parametrize("name", ["release", "rebuild", "verify", "image"])
def test_a_release_session_s_arguments_are_refused_before_it_runs(name: str) -> None:
    declared = next(declared for declared in sessions.SESSIONS if declared.name == name)
    with pytest.raises(ConfigError, match=f"nox -s {name} needs a release tag first"):
        declared.parse(["--artefacts", "dist"])
    with pytest.raises(ConfigError, match="--artefacts needs a value"):
        declared.parse(["v1.2.3", "--artefacts"])
