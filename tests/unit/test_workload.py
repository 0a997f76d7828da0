from __future__ import annotations

import contextlib
import random
import tomllib
from pathlib import Path

import pytest

from recipes.bench.scenarios import require_scenarios
from recipes.errors import ConfigError, PgoError
from recipes.train.command import EnvironmentValues
from recipes.workload import check_environment, load_workload, workload_path
from tests.conftest import REPO
from tests.hostile import VALUES, garbage, mutations, to_toml

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


def test_floor_measured_against_a_total(tmp_path: Path) -> None:
    workload = load_workload(
        _write(tmp_path, GOOD.replace("min_functions = 3", "min_functions = 3\nmin_functions_total = 50"))
    )
    assert (workload.min_functions, workload.min_functions_total) == (3, 50)
    assert load_workload(_write(tmp_path, GOOD)).min_functions_total is None


def test_shipped_workloads_load() -> None:
    for path in sorted((REPO / "profiles").glob("*.toml")):
        assert load_workload(path).instances


def test_example_workloads_load() -> None:
    examples = sorted((REPO / "profiles" / "examples").glob("*.toml"))
    assert len(examples) >= 8
    for path in examples:
        assert load_workload(path).instances, path


@pytest.mark.refuses(
    "min-functions-total-without-min-functions",
    "unknown-key-nearest-known-one",
    "required-key-missing",
    "value-wrong-type-boolean-where-number-expected",
    "name-not-ascii-letters-digits",
    "unknown-value-kind-mode-output-phases-from",
    "integer-below-minimum",
    "timeout-not-number-seconds-up-week",
    "unknown-placeholder-lone-brace-bad-env-placeholder",
    "command-phase-too-many-runs",
)
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
        ("min_functions = 3", "min_functions_total = 50", r"min_functions_total without min_functions"),
        ("min_functions = 3", "min_functions = 3\nmin_functions_total = 0", r"min_functions_total: .*at least 1"),
        ('name = "one"', 'name = "a/b"', r"\[\[phase\]\] #1: name: 'a/b' must be letters, digits, - and _"),
        ('name = "one"', 'name = ".."', r"name: '\.\.' must be letters, digits, - and _"),
        ('name = "one"', 'name = ""', r"name: '' must be letters"),
        ('name = "cli"', 'name = "cl\u00ef"', r"name: 'cl\u00ef' must be letters, digits, - and _ \(ASCII\)"),
        ("runs = 2", "runs = 2\ntimeout = inf", r"'one': timeout: inf is not a number of seconds up to 604800"),
        ("runs = 2", "runs = 2\ntimeout = nan", r"'one': timeout: nan is not a number of seconds"),
        ("min_functions = 3", "phase_timeout = inf", r"\[workload\]: phase_timeout: inf is not a number of seconds"),
        ("runs = 2", "runs = 9999999999", r"'one': runs: 9999999999 is too many"),
        ("runs = 2", 'output = "all"', r"'one': output: unknown value 'all' \(one of discard, keep, tail\)"),
        ("runs = 2", "cwd = 3", r"'one': cwd: expected a string"),
        ('name = "cli"', 'name = "cli"\ncwd = "{wrok}"', r"\[\[instance\]\] 'cli': unknown placeholder \{wrok\}"),
    ],
)
def test_bad_workloads_name_the_key(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError, match=message) as caught:
        load_workload(_write(tmp_path, GOOD.replace(old, new, 1)))
    assert str(tmp_path / "w.toml") in caught.value.line()


@pytest.mark.refuses("no-workload-file-name")
def test_missing_workload_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"no workload file .*one of: .*hello"):
        load_workload(workload_path(REPO, "nonesuch"))


@pytest.mark.refuses("no-instance-bench-scenario-table")
def test_no_instances(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"instance: needs at least one \[\[instance\]\] table"):
        load_workload(_write(tmp_path, '[workload]\ndescription = "d"\n'))


@pytest.mark.refuses("unknown-placeholder-lone-brace-bad-env-placeholder")
@pytest.mark.parametrize(
    ("arg", "message", "hint"),
    [
        # a regex's braces: the error names the phase by name and says how to write a literal brace
        ("\\w{3,}", r"'one': unknown placeholder \{3,\} in", "a literal brace is written {{ or }}"),
        ("a}b", r"'one': a lone brace in 'a}b'", "a literal brace is written {{ or }}"),
        ("a{b", r"'one': a lone brace in 'a{b'", "a literal brace is written {{ or }}"),
        ("{env}", r"'one': \{env\} in '\{env\}' is not an environment placeholder", "write {env:NAME}"),
        ("{env:1X}", r"\{env:1X\} in '\{env:1X\}' is not an environment placeholder", "write {env:NAME}"),
        ("{env!r:HOME}", r"is not an environment placeholder", "write {env:NAME}"),
        ("{work!r}", r"'one': \{work!r\} in '\{work!r\}': a placeholder takes no !", "write {work}"),
        ("{work:>9}", r"\{work:>9\} in '\{work:>9\}': a placeholder takes no :", "write {work}"),
        ("{work.real}", r"unknown placeholder \{work.real\}", "known: crate, env:NAME, project, work, workload_dir"),
        ("{work[0]}", r"unknown placeholder \{work\[0\]\}", "known: crate, env:NAME"),
    ],
)
def test_bad_placeholders_and_braces(tmp_path: Path, arg: str, message: str, hint: str) -> None:
    text = GOOD.replace('args = ["x", "{work}/file"]', f"args = [{arg!r}]")
    assert text != GOOD
    with pytest.raises(ConfigError, match=message) as caught:
        load_workload(_write(tmp_path, text))
    assert "[[instance]] 'cli' [[phase]] 'one'" in caught.value.line()
    assert hint in caught.value.line()


def test_literal_braces_and_env_placeholders_load(tmp_path: Path) -> None:
    text = GOOD.replace(
        'args = ["x", "{work}/file"]',
        'args = ["\\\\w{{3,}}", "{env:HOME}", "{{env}}"]\ncwd = "{env:HOME}"\noutput = "discard"',
    )
    text = text.replace('name = "cli"', 'name = "cli"\ncwd = "{project}/sub"')
    phase = load_workload(_write(tmp_path, text)).instances[0].phases[0]
    assert phase.texts() == ["\\w{{3,}}", "{env:HOME}", "{{env}}", "{env:HOME}"]


@pytest.mark.refuses("unknown-placeholder-lone-brace-bad-env-placeholder")
def test_env_placeholder_only_where_it_is_filled(tmp_path: Path) -> None:
    text = GOOD.replace('name = "cli"', 'name = "cli"\nenv = { A = "{env:HOME}" }')
    with pytest.raises(ConfigError, match=r"'cli' env: unknown placeholder \{env:HOME\}.*filled only in"):
        load_workload(_write(tmp_path, text))


@pytest.mark.refuses("no-workload-file-name")
def test_a_name_is_the_projects_workload_first_then_pgo_recipes_own(tmp_path: Path) -> None:
    assert workload_path(tmp_path, "hello") == REPO / "profiles" / "hello.toml"
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "hello.toml").write_text(GOOD)
    assert workload_path(tmp_path, "hello") == tmp_path / "profiles" / "hello.toml"
    assert workload_path(tmp_path, "nonesuch") == tmp_path / "profiles" / "nonesuch.toml"
    assert workload_path(tmp_path, "w/x.toml") == tmp_path / "w" / "x.toml"
    listed = (
        r"no workload file .*nonesuch.toml.*one of: bare-server, csys, cxxsys, demo-server, hello, longnames, multi"
    )
    with pytest.raises(ConfigError, match=listed):
        load_workload(workload_path(tmp_path, "nonesuch"))


@pytest.mark.refuses("env-name-name-not-set")
def test_check_environment_before_anything_runs(tmp_path: Path) -> None:
    text = GOOD.replace('args = ["x", "{work}/file"]', 'args = ["{env:TOKEN}", "{{env:LITERAL}}"]\ncwd = "{env:DATA}"')
    text = text.replace('name = "cli"', 'name = "cli"\nenv = { DATA = "/d" }\ncwd = "{env:ROOT}/x"')
    workload = load_workload(_write(tmp_path, text))
    check_environment(workload, {"TOKEN": "t", "ROOT": "/r"})  # DATA is in the instance's env
    with pytest.raises(ConfigError) as caught:
        check_environment(workload, {"ROOT": "/r"})
    assert caught.value.line() == (
        "phase cli/one of w.toml: {env:TOKEN}: TOKEN is not set in the environment "
        "(export TOKEN=… before running nox, or give it in the instance's env table)"
    )
    with pytest.raises(ConfigError, match=r"^instance cli of w.toml: \{env:ROOT\}: ROOT is not set"):
        check_environment(workload, {"TOKEN": "t"})


@pytest.mark.refuses(
    "workload-file-not-valid-toml",
    "no-workload-table",
    "number-not-positive",
    "value-not-list-strings",
    "value-not-table-string-values",
    "table-not-table",
)
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("runs = 2", "runs = 2\n[broken", r"w\.toml: not valid TOML: Expected ']' .*\(fix the syntax\)"),
        ('[workload]\ndescription = "d"\nmin_functions = 3\n', "", r"w\.toml: no \[workload\] table \(start the file"),
        (
            '[workload]\ndescription = "d"\nmin_functions = 3\n',
            "workload = 3\n",
            r"\[workload\]: expected a table, got",
        ),
        ('["x", "{work}/file"]', '["x", 1]', r"'one': args: expected a list of strings \(see profiles/README"),
        ('name = "cli"', 'name = "cli"\nenv = { A = 1 }', r"'cli': env: expected a table of string values"),
        ("runs = 2", "runs = 2\ntimeout = 0", r"'one': timeout: must be positive, got 0"),
    ],
)
def test_a_workload_file_that_is_not_what_it_should_be(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError, match=message) as caught:
        load_workload(_write(tmp_path, GOOD.replace(old, new, 1)))
    assert str(tmp_path / "w.toml") in caught.value.line()


@pytest.mark.refuses(
    "two-instance-tables-one-name",
    "phases-from-instance-phase-tables-both",
    "phases-from-names-instance-another-mode",
    "two-phases-one-name-instance",
)
@pytest.mark.parametrize(
    ("second", "message"),
    [
        ('name = "cli"\nphases_from = "cli"', r"\[\[instance\]\] 'cli': name: 'cli' is used twice \(give each"),
        (
            'name = "again"\nphases_from = "cli"\n\n[[instance.phase]]\nname = "two"\nkind = "command"\nargs = ["y"]',
            r"'again': phase: give phases_from = 'cli' or \[\[instance.phase\]\] tables, not both",
        ),
        (
            'name = "srv"\nmode = "server"\nphases_from = "cli"',
            r"'srv': phases_from: instance 'cli' is a 'command' instance, this is 'server'",
        ),
        (
            'name = "two"\n\n[[instance.phase]]\nname = "a"\nkind = "command"\nargs = ["y"]\n\n'
            '[[instance.phase]]\nname = "a"\nkind = "command"\nargs = ["z"]',
            r"\[\[instance\]\] 'two' \[\[phase\]\] 'a': name: 'a' is used twice in this instance",
        ),
    ],
)
def test_a_second_instance_that_clashes_with_the_first(tmp_path: Path, second: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_workload(_write(tmp_path, f"{GOOD}\n[[instance]]\n{second}\n"))


@pytest.mark.refuses("env-without-name-run-time")
def test_env_without_a_name_at_run_time_is_refused() -> None:
    """The file's check refuses a bare {env}; a text filled at run time (a bench scenario's, a phase's) meets the
    same refusal where it is formatted."""
    values = EnvironmentValues({"HOME": "/root"}, "phase cli/one")
    assert "{env:HOME}".format_map({"env": values}) == "/root"
    with pytest.raises(ConfigError, match=r"phase cli/one: \{env\} names no variable \(write \{env:NAME\}\)"):
        "{env}".format_map({"env": values})


@pytest.mark.refuses("workload-file-not-utf-8-text")
def test_a_workload_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("runs = 2", "runs = 2 # d\u00e9j\u00e0", 1))
    path.write_bytes(path.read_text().encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_workload(path)
    assert caught.value.line().startswith(f"the workload {path} is not UTF-8 text (byte 0xe9 on line ")
    assert caught.value.line().endswith(") (save it as UTF-8 text)")


@pytest.mark.refuses("workload-file-not-utf-8-text")
@pytest.mark.parametrize("name", ["hello", "demo-server"])
def test_every_key_of_a_real_workload_changed_is_a_config_error_or_a_workload(tmp_path: Path, name: str) -> None:
    """profiles/hello.toml (commands, bench scenarios) and demo-server.toml (a server, [setup], HTTP phases), each
    key at every level deleted or given a value of every other TOML type, then their bytes in garbage and
    truncations: load_workload refuses in one line, or the workload it returns reads."""
    real = REPO / "profiles" / f"{name}.toml"
    doc = tomllib.loads(real.read_text())
    path = tmp_path / f"{name}.toml"
    refused = 0
    for what, changed in mutations(doc, tuple(v for v in VALUES if v is not None)):
        path.write_text(to_toml(changed))
        try:
            workload = load_workload(path)
        except ConfigError as error:
            assert "\n" not in error.line(), what
            refused += 1
            continue
        with contextlib.suppress(PgoError):
            require_scenarios(workload)
    assert refused > 100
    for data in garbage(real.read_bytes(), random.Random(19), 200):
        path.write_bytes(data)
        with contextlib.suppress(ConfigError):
            load_workload(path)


@pytest.mark.refuses("workload-file-nul-character")
def test_a_nul_in_a_command_argument_is_refused_when_the_workload_is_loaded(tmp_path: Path) -> None:
    """Python cannot start a program with a NUL in its arguments: refused at load, not after the instrumented
    build."""
    assert '["x", "{work}/file"]' in GOOD
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, GOOD.replace('["x", "{work}/file"]', '["x", "a\\u0000b"]')))
    assert caught.value.line() == (
        f"{tmp_path / 'w.toml'}: instance[1].phase[1].args[2] holds a NUL character (\\0), which no argument, path or "
        "variable can hold (remove it, or the \\u0000 escape that writes it)"
    )


@pytest.mark.refuses("workload-file-integer-beyond-64-bits")
@pytest.mark.parametrize("key", ["timeout", "expect_exit"])
def test_an_integer_toml_cannot_hold_is_refused_when_the_workload_is_loaded(tmp_path: Path, key: str) -> None:
    """Python's TOML reader takes an integer of any size; TOML holds 64 bits. A timeout of 400 digits was an
    OverflowError traceback where it met a float, and an exit code a 400-digit line: now one line when it is read."""
    text = GOOD.replace('["x", "{work}/file"]', f'["x", "{{work}}/file"]\n{key} = {"9" * 400}')
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, text))
    assert caught.value.line() == (
        f"{tmp_path / 'w.toml'}: instance[1].phase[1].{key} is an integer of 400 digits, beyond TOML's 64-bit "
        "integers (write a number from -9223372036854775808 to 9223372036854775807)"
    )
    fits = GOOD.replace('["x", "{work}/file"]', f'["x", "{{work}}/file"]\n{key} = {2**63 - 1}')
    with pytest.raises(
        ConfigError, match=r"timeout: 9\.22\d*e\+18 is not|expect_exit: 9223372036854775807 is not an exit"
    ):
        load_workload(_write(tmp_path, fits))  # the largest TOML integer reaches the key's own check


@pytest.mark.refuses("workload-file-nested-too-deeply")
def test_a_workload_nested_past_the_recursion_limit_is_one_line(tmp_path: Path) -> None:
    deep = "[" * 3000 + "]" * 3000
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, GOOD.replace("min_functions = 3", f"min_functions = 3\nx = {deep}")))
    assert caught.value.line().startswith(f"{tmp_path / 'w.toml'}: nested too deeply to read")


@pytest.mark.refuses("expect-exit-not-exit-code")
@pytest.mark.parametrize("code", [300, 256, -1])
def test_an_expect_exit_no_program_can_have_is_refused(tmp_path: Path, code: int) -> None:
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, GOOD.replace("runs = 2", f"runs = 2\nexpect_exit = {code}")))
    assert f"'one': expect_exit: {code} is not an exit code: a program exits with 0 to 255" in caught.value.line()


def test_expect_exit_255_is_one_a_program_can_have(tmp_path: Path) -> None:
    workload = load_workload(_write(tmp_path, GOOD.replace("runs = 2", "runs = 2\nexpect_exit = 255")))
    assert workload.instances[0].phases[0].expect_exit == 255  # type: ignore[attr-defined]


@pytest.mark.refuses("phase-timeout-below-floor")
@pytest.mark.parametrize("key", ["timeout", "phase_timeout"])
def test_a_timeout_below_the_floor_is_refused(tmp_path: Path, key: str) -> None:
    text = (
        GOOD.replace("runs = 2", "runs = 2\ntimeout = 1e-300")
        if key == "timeout"
        else GOOD.replace("min_functions = 3", "min_functions = 3\nphase_timeout = 1e-300")
    )
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, text))
    assert f"{key}: 1e-300 s is below the floor of 0.1 s" in caught.value.line()
