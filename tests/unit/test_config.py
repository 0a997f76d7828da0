from __future__ import annotations

from pathlib import Path

import pytest

from recipes.config import SETTINGS, load_config
from recipes.errors import ConfigError


def _project(tmp_path: Path, table: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.pgo]\n{table}\n")
    return tmp_path


def test_precedence_pyproject_env_posargs(tmp_path: Path) -> None:
    project = _project(tmp_path, 'min_functions = 10\nmax_missing = 5\ncargo = "cargo build"')
    config = load_config(project, {"PGO_MIN_FUNCTIONS": "20"}, ["--max-missing", "7"])
    assert config.min_functions == 20
    assert config.max_missing == 7
    assert config.source("min_functions") == "PGO_MIN_FUNCTIONS"
    assert config.source("max_missing") == "--max-missing"
    assert config.cargo == ("cargo", "build")


def test_defaults(tmp_path: Path) -> None:
    config = load_config(_project(tmp_path), {})
    assert config.out == tmp_path.resolve() / "target" / "pgo"
    assert config.manifest == tmp_path.resolve() / "Cargo.toml"
    assert config.verify is None
    assert config.train_scale == 1.0


def test_every_setting_has_a_pgo_variable() -> None:
    assert all(s.env.startswith("PGO_") for s in SETTINGS)
    assert len({s.env for s in SETTINGS}) == len(SETTINGS)


def test_unknown_pgo_variable_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"PGO_MIN_FUNCTION .*did you mean PGO_MIN_FUNCTIONS"):
        load_config(_project(tmp_path), {"PGO_MIN_FUNCTION": "3"})


def test_unknown_pyproject_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[tool.pgo\]: unknown key 'manifets'.*manifest"):
        load_config(_project(tmp_path, 'manifets = "x"'), {})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PGO_MIN_FUNCTIONS": "many"}, "PGO_MIN_FUNCTIONS: invalid literal"),
        ({"PGO_MAX_MISSING": "-1"}, "negative"),
        ({"PGO_VERIFY": "perhaps"}, "not a boolean"),
        ({"PGO_TRAIN_SCALE": "0"}, "not a positive number"),
        ({"PGO_CARGO": "make"}, "not a cargo build command"),
    ],
)
def test_bad_values_name_their_source(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_project(tmp_path), env)


def test_unknown_posarg(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown argument '--min-fuctions'.*--min-functions"):
        load_config(_project(tmp_path), {}, ["--min-fuctions", "3"])


def test_another_manifest_drops_the_pyproject_crate(tmp_path: Path) -> None:
    project = _project(tmp_path, 'manifest = "a/Cargo.toml"\npackage = "a"\nbin = "a"\nworkload = "a"')
    config = load_config(project, {"PGO_MANIFEST": "/elsewhere/Cargo.toml"})
    assert config.manifest == Path("/elsewhere/Cargo.toml")
    assert (config.package, config.bin, config.workload) == (None, None, None)


def test_empty_variable_means_unset(tmp_path: Path) -> None:
    config = load_config(_project(tmp_path), {"PGO_PROFDATA": "", "PGO_MAX_GLIBC": ""})
    assert config.profdata is None
    assert config.max_glibc is None


def test_paths_are_absolute_from_the_project(tmp_path: Path) -> None:
    config = load_config(_project(tmp_path), {"PGO_OUT": "w", "PGO_PROFDATA": "p.profdata"})
    assert config.out == tmp_path.resolve() / "w"
    assert config.profdata == tmp_path.resolve() / "p.profdata"
