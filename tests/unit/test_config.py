from __future__ import annotations

import contextlib
import random
import re
from pathlib import Path

import pytest

from recipes.config import SETTINGS, load_config
from recipes.errors import ConfigError
from tests.hostile import garbage, mutations, to_toml


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


@pytest.mark.refuses("unknown-pgo-variable")
def test_unknown_pgo_variable_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"PGO_MIN_FUNCTION .*did you mean PGO_MIN_FUNCTIONS"):
        load_config(_project(tmp_path), {"PGO_MIN_FUNCTION": "3"})


@pytest.mark.refuses("unknown-tool-pgo-key")
def test_unknown_pyproject_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[tool.pgo\]: unknown key 'manifets'.*manifest"):
        load_config(_project(tmp_path, 'manifets = "x"'), {})


@pytest.mark.refuses("value-not-what-setting-takes-not-number", "pgo-cargo-not-cargo-build-command")
@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PGO_MIN_FUNCTIONS": "many"}, "PGO_MIN_FUNCTIONS: 'many' is not a whole number"),
        ({"PGO_MAX_MISSING": "-1"}, "negative"),
        ({"PGO_VERIFY": "perhaps"}, "not a boolean"),
        ({"PGO_TRAIN_SCALE": "0"}, "not above 0"),
        ({"PGO_CARGO": "make"}, "not a cargo build command"),
    ],
)
def test_bad_values_name_their_source(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_project(tmp_path), env)


@pytest.mark.refuses("unknown-malformed-session-argument")
def test_unknown_posarg(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown argument '--min-fuctions'.*--min-functions"):
        load_config(_project(tmp_path), {}, ["--min-fuctions", "3"])


@pytest.mark.refuses("unknown-malformed-session-argument")
@pytest.mark.parametrize(
    ("posargs", "message"),
    [
        # taken for --min-functions before: an abbreviation is refused, as a session's own options refuse one
        (["--min-f", "5"], r"--min-f is an abbreviation of --min-functions \(write --min-functions whole\)"),
        (
            ["--min", "5"],
            r"--min is an abbreviation of --min-functions or --min-survival \(write the one you mean whole\)",
        ),
        (["--man=x"], r"--man is an abbreviation of --manifest \(write --manifest whole\)"),
        # argparse's usage (twenty lines) and exit 2 before: no refusal line
        (
            ["--m", "1"],
            r"--m is an abbreviation of --manifest or --min-functions or .*\(write the one you mean whole\)",
        ),
        (["--=x"], r"unknown argument '--=x'"),
    ],
)
def test_abbreviated_posarg_is_refused(tmp_path: Path, posargs: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_project(tmp_path), {}, posargs)


@pytest.mark.refuses("path-setting-no-file-can-have")
@pytest.mark.parametrize(
    ("env", "message"),
    [
        # before: OSError ENAMETOOLONG from Path.is_file() in make_plan, a traceback
        (
            {"PGO_MANIFEST": "x" * 300},
            r"PGO_MANIFEST: 'x{60}…' holds a name of 300 bytes, and a file name is at most 255",
        ),
        ({"PGO_OUT": "/w/" + "d/" * 2100}, r"PGO_OUT: '/w/d/d.*' is a path of \d+ bytes, and a path is at most 4095"),
        ({"PGO_PROFILE_STORE": "s/" + "y" * 256}, r"PGO_PROFILE_STORE: .* holds a name of 256 bytes"),
        ({"PGO_WORKLOAD": "hello," + "w" * 251}, r"PGO_WORKLOAD: 'w+…' holds a name of 256 bytes"),
        # before: RuntimeError from Path.expanduser(), a traceback
        (
            {"PGO_MANIFEST": "~nosuchuser/Cargo.toml"},
            r"PGO_MANIFEST: '~nosuchuser/Cargo.toml' starts with ~nosuchuser, ",
        ),
        ({"PGO_PROFDATA": "~nosuchuser/p.profdata"}, r"PGO_PROFDATA: .* no home directory of nosuchuser here"),
        ({"PGO_WORKLOAD": "~nosuchuser/main.toml"}, r"PGO_WORKLOAD: .* \(write the path without ~\)"),
    ],
)
def test_a_path_no_file_can_have_is_refused(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_project(tmp_path), env)


@pytest.mark.refuses("pgo-cargo-not-cargo-build-command")
@pytest.mark.parametrize(
    ("cargo", "message"),
    [
        # each built first before, and failed or built something else
        ("cargo test", r"PGO_CARGO: 'cargo test' is not a cargo build command"),
        ("cargo run", r"'cargo run' is not a cargo build command"),
        ("cargo + build", r"'cargo \+ build' is not a cargo build command"),  # rustup: invalid toolchain name ''
        (
            "cargo build --target aarch64-unknown-linux-gnu",
            r"gives --target, which the pipeline gives .*set PGO_TARGET",
        ),
        ("cargo build --profile=dev", r"gives --profile, which .*\[profile.release\] of Cargo.toml"),
        ("cargo +1.94.0 build --bin other", r"gives --bin, which the pipeline gives cargo itself \(set PGO_BIN\)"),
    ],
)
def test_a_cargo_command_the_pipeline_cannot_build_with_is_refused(tmp_path: Path, cargo: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_project(tmp_path), {"PGO_CARGO": cargo})


@pytest.mark.parametrize("cargo", ["cargo build", "cargo +1.94.0 zigbuild", "cargo build -Zbuild-std", "cargo  build"])
def test_a_cargo_build_command_is_taken(tmp_path: Path, cargo: str) -> None:
    assert load_config(_project(tmp_path), {"PGO_CARGO": cargo}).cargo == tuple(cargo.split())


@pytest.mark.refuses("pgo-workload-names-empty-workload")
@pytest.mark.parametrize("workload", [",", "main,,breadth", "main,", " , "])
def test_an_empty_workload_name_is_refused(tmp_path: Path, workload: str) -> None:
    # left out before: PGO_WORKLOAD=, trained the binary's default workload, main,,breadth two shards
    with pytest.raises(ConfigError, match=rf"PGO_WORKLOAD: {re.escape(repr(workload))} names an empty workload"):
        load_config(_project(tmp_path), {"PGO_WORKLOAD": workload})


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


#: every numeric setting, the bad values a user can type, and what the one line must say
BAD_NUMBERS = [
    ("PGO_MIN_FUNCTIONS", "abc", "is not a whole number", "a whole number from 0 to 2147483647", "=100"),
    ("PGO_MIN_FUNCTIONS", "1.5", "is not a whole number", "a whole number", "=100"),
    ("PGO_MIN_FUNCTIONS", "1e3", "is not a whole number", "a whole number", "=100"),
    ("PGO_MIN_FUNCTIONS", "1_000", "is not a whole number", "a whole number", "=100"),
    ("PGO_MIN_FUNCTIONS", "\u0661", "is not a whole number", "a whole number", "=100"),  # ARABIC-INDIC ONE
    ("PGO_MIN_FUNCTIONS", "-3", "is negative", "a whole number", "=100"),
    ("PGO_MAX_MISSING", "2147483648", "is too large", "from 0 to 2147483647", "=100"),
    ("PGO_MAX_MISSING", "9" * 5000, "is too large", "from 0 to 2147483647", "=100"),  # int() itself refuses this
    ("PGO_TRAIN_SCALE", "inf", "is not a finite number", "a number above 0 and at most 10000", "=0.5"),
    ("PGO_TRAIN_SCALE", "-inf", "is not a finite number", "a number above 0", "=0.5"),
    ("PGO_TRAIN_SCALE", "nan", "is not a finite number", "a number above 0", "=0.5"),
    ("PGO_TRAIN_SCALE", "1e400", "is not a finite number", "a number above 0", "=0.5"),
    ("PGO_TRAIN_SCALE", "1e300", "is too large", "at most 10000", "=0.5"),
    ("PGO_TRAIN_SCALE", "-0.5", "is not above 0", "a number above 0", "=0.5"),
    ("PGO_TRAIN_SCALE", "half", "is not a number", "a number above 0", "=0.5"),
    ("PGO_PHASE_TIMEOUT", "inf", "is not a finite number", "a number of seconds from 0.1 to 604800", "=600"),
    ("PGO_PHASE_TIMEOUT", "1e12", "is too large", "to 604800", "=600"),
    ("PGO_PHASE_TIMEOUT", "0", "is not above 0", "seconds from 0.1", "=600"),
    ("PGO_PHASE_TIMEOUT", "1e-300", "is below the floor of 0.1", "seconds from 0.1 to 604800", "=600"),
]


@pytest.mark.refuses("value-not-what-setting-takes-not-number")
@pytest.mark.parametrize(("name", "value", "problem", "form", "example"), BAD_NUMBERS)
def test_bad_numbers_from_the_environment(
    tmp_path: Path, name: str, value: str, problem: str, form: str, example: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), {name: value})
    line = caught.value.line()
    assert "\n" not in line
    assert line.startswith(f"{name}: {value!r} {problem}: expected "), line
    assert form in line
    assert f"(for example {name}{example})" in line


@pytest.mark.refuses("value-not-what-setting-takes-not-number")
@pytest.mark.parametrize(("name", "value", "problem", "form", "example"), BAD_NUMBERS)
def test_bad_numbers_from_posargs(tmp_path: Path, name: str, value: str, problem: str, form: str, example: str) -> None:
    option = next(s.option for s in SETTINGS if s.env == name)
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), {}, [f"{option}={value}"])
    line = caught.value.line()
    assert line.startswith(f"{option}: {value!r} {problem}: expected "), line
    assert form in line
    assert f"(for example {option} {example[1:]})" in line


@pytest.mark.refuses("value-not-what-setting-takes-not-number", "toml-boolean-tool-pgo-where-number-string")
@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("train_scale = inf", r"\[tool.pgo\] train_scale: 'inf' is not a finite number: expected a number above 0"),
        ("train_scale = nan", r"train_scale: 'nan' is not a finite number"),
        ("train_scale = -1", r"train_scale: '-1' is not above 0"),
        ("phase_timeout = 1e9", r"phase_timeout: '1000000000.0' is too large: expected a number of seconds"),
        ("min_functions = 5.0", r"min_functions: '5.0' is not a whole number: expected a whole number"),
        ("min_functions = -2", r"min_functions: '-2' is negative"),
        ("max_missing = 9223372036854775807", r"max_missing: '9223372036854775807' is too large"),
        ("min_functions = true", r"min_functions: True is a boolean: expected a whole number"),
        ("train_scale = false", r"train_scale: False is a boolean: expected a number above 0"),
        ("verify = 2", r"verify: '2' is not a boolean: expected 1 or 0 \(for example verify = true in \[tool.pgo\]\)"),
    ],
)
def test_bad_numbers_from_pyproject(tmp_path: Path, table: str, message: str) -> None:
    project = _project(tmp_path, table)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(project, {})
    line = caught.value.line()
    assert str(project / "pyproject.toml") in line
    assert "in [tool.pgo])" in line or "for example" in line


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"PGO_MIN_FUNCTIONS": " 12 "}, ("min_functions", 12)),
        ({"PGO_MAX_MISSING": "2147483647"}, ("max_missing", 2147483647)),
        ({"PGO_TRAIN_SCALE": "1e-3"}, ("train_scale", 0.001)),
        ({"PGO_TRAIN_SCALE": "10000"}, ("train_scale", 10000.0)),
        ({"PGO_PHASE_TIMEOUT": "604800"}, ("phase_timeout", 604800.0)),
    ],
)
def test_good_numbers_at_the_bounds(tmp_path: Path, env: dict[str, str], expected: tuple[str, object]) -> None:
    config = load_config(_project(tmp_path), env)
    assert getattr(config, expected[0]) == expected[1]


@pytest.mark.refuses("pyproject-toml-not-valid-toml-tool-pgo")
def test_a_pyproject_that_is_not_toml_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pgo\nmin_functions = 3\n")
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'pyproject.toml'}: not valid TOML: .*\(fix the syntax\)"):
        load_config(tmp_path, {})


@pytest.mark.refuses("pyproject-toml-not-valid-toml-tool-pgo")
def test_a_tool_pgo_that_is_not_a_table_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool]\npgo = "cargo build"\n')
    with pytest.raises(ConfigError, match=r"\[tool.pgo\] must be a table \(write it as \[tool.pgo\] with key = value"):
        load_config(tmp_path, {})


@pytest.mark.refuses("tool-pgo-value-not-string-where-one")
@pytest.mark.parametrize(
    ("table", "got"), [('cargo = ["cargo", "build"]', "list"), ("workload = { name = 'x' }", "dict")]
)
def test_a_pyproject_value_that_is_not_a_string_refused(tmp_path: Path, table: str, got: str) -> None:
    key = table.split(maxsplit=1)[0]
    with pytest.raises(ConfigError, match=rf"\[tool.pgo\] {key}: expected a string, got {got}"):
        load_config(_project(tmp_path, table), {})


@pytest.mark.refuses("tool-pgo-value-not-string-where-one")
@pytest.mark.parametrize(
    ("table", "message"),
    [
        # read as the strings "2.3" and "1.1" before: a glibc limit of 2.3 refuses every binary; a wrong package
        ("max_glibc = 2.30", r"max_glibc: the number 2.3 where a string is expected .*\(write it as a string, quoted"),
        ("package = 1.10", r"package: the number 1.1 where a string is expected"),
        # joined with str() before: the shards "1" and "2", the feature "True", the shard "['a']"
        ("workload = [1, 2]", r"workload: expected a list of strings, got the number 1 in it"),
        ("features = [true]", r"features: expected a list of strings, got the boolean true in it"),
        ("workload = [['a'], 'b']", r"workload: expected a list of strings, got a list in it"),
        ("c = [{ name = 'zstd-sys' }]", r"c: expected a list of strings, got an object in it"),
    ],
)
def test_a_pyproject_value_of_another_type_than_its_setting_refused(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_project(tmp_path, table), {})


def test_a_pyproject_number_where_a_number_is_read_is_taken(tmp_path: Path) -> None:
    config = load_config(_project(tmp_path, "min_functions = 30\ntrain_scale = 0.50\nbin = 7\nlocked = 1"), {})
    assert (config.min_functions, config.train_scale, config.bin, config.locked) == (30, 0.5, "7", True)


@pytest.mark.refuses("pyproject-toml-not-utf-8-text")
def test_a_pyproject_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b'[project]\nname = "caf\xe9"\n[tool.pgo]\nmin_functions = 3\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {})
    assert caught.value.line() == (f"{path} is not UTF-8 text (byte 0xe9 on line 2, offset 21) (save it as UTF-8 text)")


@pytest.mark.refuses("pyproject-toml-tool-not-table")
@pytest.mark.parametrize(("tool", "kind"), [("tool = 3", "the number 3"), ('tool = ["pgo"]', "a list")])
def test_a_tool_that_is_not_a_table_refused(tmp_path: Path, tool: str, kind: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f"{tool}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {})
    assert caught.value.line() == f"{path}: tool must be a table, not {kind} (write its tables as [tool.<name>])"


#: a [tool.pgo] of every kind of value a setting takes
TOOL_PGO: dict[str, object] = {
    "workload": "hello",
    "features": ["a", "b"],
    "locked": True,
    "min_functions": 10,
    "max_missing": 5,
    "train_scale": 0.5,
    "phase_timeout": 30,
    "cargo": "cargo build",
    "bolt": False,
}


@pytest.mark.refuses("pyproject-toml-tool-not-table")
def test_every_key_of_the_pyproject_changed_is_a_config_error_or_a_config(tmp_path: Path) -> None:
    """``[project]`` and ``[tool.pgo]``, each key deleted or given a value of every other type, at every level;
    then the bytes of the file in garbage and truncations: load_config refuses in one line or returns a Config."""
    doc: dict[str, object] = {"project": {"name": "x", "version": "1"}, "tool": {"pgo": TOOL_PGO, "ruff": {}}}
    path = tmp_path / "pyproject.toml"
    refused = 0
    for what, changed in mutations(doc):
        path.write_text(to_toml(changed))
        try:
            load_config(tmp_path, {})
        except ConfigError as error:
            assert "\n" not in error.line(), what
            refused += 1
    assert refused > 20
    real = to_toml(doc).encode()
    for data in garbage(real, random.Random(19), 200):
        path.write_bytes(data)
        with contextlib.suppress(ConfigError):
            load_config(tmp_path, {})


def test_the_verify_default_is_decided_in_one_place(tmp_path: Path) -> None:
    """On after a training (nox -s pgo), off for a given profile or optimise alone; PGO_VERIFY wins either way."""
    config = load_config(tmp_path, {})
    assert config.verify_wanted(trained=True) is True and config.verify_wanted(trained=False) is False
    for value, wanted in (("1", True), ("0", False)):
        config = load_config(tmp_path, {"PGO_VERIFY": value})
        assert config.verify_wanted(trained=True) is wanted and config.verify_wanted(trained=False) is wanted


@pytest.mark.refuses("pyproject-toml-nul-character")
def test_a_nul_in_a_tool_pgo_value_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.pgo]\nfeatures = "a\\u0000b"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {})
    assert caught.value.line().startswith(
        f"{tmp_path / 'pyproject.toml'}: tool.pgo.features holds a NUL character (\\0), which no argument"
    )


@pytest.mark.refuses("pyproject-toml-integer-beyond-64-bits")
def test_an_integer_toml_cannot_hold_in_tool_pgo_is_one_short_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.pgo]\nmin_functions = {'9' * 400}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {})
    assert caught.value.line() == (
        f"{tmp_path / 'pyproject.toml'}: tool.pgo.min_functions is an integer of 400 digits, beyond TOML's 64-bit "
        "integers (write a number from -9223372036854775808 to 9223372036854775807)"
    )


@pytest.mark.refuses("pyproject-toml-nested-too-deeply")
def test_a_pyproject_nested_past_the_recursion_limit_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nx = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {})
    assert caught.value.line().startswith(f"{tmp_path / 'pyproject.toml'}: nested too deeply to read")


@pytest.mark.refuses("pgo-max-glibc-not-version")
@pytest.mark.parametrize("value", ["abc", "2", "2.x", "v2.28", "2.28."])
def test_a_max_glibc_that_is_not_a_version_is_refused_with_the_configuration(tmp_path: Path, value: str) -> None:
    """Not after four stages, where the optimised binary's glibc is checked."""
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), {"PGO_MAX_GLIBC": value})
    assert caught.value.line() == (
        f"PGO_MAX_GLIBC: {value!r} is not a glibc version: expected a glibc release as GLIBC_x.y names it "
        "(for example PGO_MAX_GLIBC=2.28)"
    )


@pytest.mark.parametrize(("value", "kept"), [("2.28", "2.28"), (" 2.3.4 ", "2.3.4")])
def test_a_max_glibc_version_is_taken(tmp_path: Path, value: str, kept: str) -> None:
    assert load_config(_project(tmp_path), {"PGO_MAX_GLIBC": value}).max_glibc == kept


def test_pgo_c_and_pgo_cxx_take_1_0_or_packages(tmp_path: Path) -> None:
    assert load_config(_project(tmp_path), {"PGO_C": "1"}).c is True
    assert load_config(_project(tmp_path), {"PGO_C": "0", "PGO_CXX": "1"}).cxx is True
    assert load_config(_project(tmp_path), {"PGO_C": ""}).c is False  # an empty PGO_C is 0, as before
    listed = load_config(_project(tmp_path), {"PGO_C": " zstd-sys, libz_sys ", "PGO_CXX": "0"})
    assert listed.c == ("zstd-sys", "libz_sys") and listed.cxx is False
    assert load_config(_project(tmp_path), {}).c is None and load_config(_project(tmp_path), {}).cxx is None
    table = load_config(_project(tmp_path, 'c = ["zstd-sys", "brotli"]\ncxx = false'), {})
    assert table.c == ("zstd-sys", "brotli") and table.cxx is False
    assert load_config(_project(tmp_path, "c = true"), {}).c is True
    assert load_config(_project(tmp_path, 'c = "plainc"'), {}).c == ("plainc",)


@pytest.mark.refuses("pgo-c-list-not-package-names")
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("zstd-sys,,brotli", "'zstd-sys,,brotli' names an empty package"),
        ("zstd sys", "'zstd sys': 'zstd sys' is not a package name"),
        ("a,b,a", "'a,b,a' names a twice"),
        ("zstd-sys,", "'zstd-sys,' names an empty package"),
    ],
)
def test_a_pgo_c_that_is_no_list_of_packages_refused(tmp_path: Path, value: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), {"PGO_CXX": value})
    assert caught.value.message == (
        f"PGO_CXX: {said}: expected 1, 0 or the packages whose C is profiled, comma-separated"
    ), caught.value.message
    assert caught.value.hint == "for example PGO_CXX=1"
