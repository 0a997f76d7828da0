"""The pure checks of an optimised build, on real captured output (tests/data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.errors import CheckFailed
from recipes.llvm import checks
from recipes.llvm.profdata import parse_function_names
from recipes.results import InstrumentResult, from_json
from tests.conftest import DATA

STORE = Path("/tmp/pgo-test/store/5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03.profdata")
TRIPLE = "x86_64-unknown-linux-gnu"
RECORDS = parse_function_names((DATA / "profdata-show-all-functions.txt").read_text())
#: the hello fixture's own functions as they are in its optimised binary's symbol table
HELLO_SYMBOLS = {
    "_ZN9hello_pgo4main17h799b0546406fff5bE",
    "_ZN9hello_pgo8checksum17hb13ab36a579c66c1E",
    "_ZN9hello_pgo13collatz_steps17h22b3bd146362375bE",
}


def test_bad_magic_warning_of_the_profile_file_is_found() -> None:
    found = checks.profile_file_warnings((DATA / "cargo-optimise-bad-magic.log").read_text(), STORE)
    assert found == [f"warning: {STORE}: invalid instrumentation profile data (bad magic)"]


@pytest.mark.refuses("compiler-warns-about-profile-file-itself")
def test_not_ir_level_warning_is_found_whatever_the_path() -> None:
    text = (DATA / "cargo-optimise-not-ir.log").read_text()
    found = checks.profile_file_warnings(text, Path("/elsewhere.profdata"))
    assert found == ["warning: /tmp/pgo-test/empty.profdata: Not an IR level instrumentation profile"]
    with pytest.raises(CheckFailed, match=r"the compiler could not use the profile: warning: .*Not an IR level"):
        checks.refuse_profile_file_warnings(text, Path("/elsewhere.profdata"), Path("optimise-build.log"))


@pytest.mark.parametrize("log", ["cargo-optimise-clean.log", "cargo-optimise-missing.log", "cargo-optimise-stale.log"])
def test_a_clean_missing_or_stale_build_has_no_profile_file_warning(log: str) -> None:
    assert checks.profile_file_warnings((DATA / log).read_text(), STORE) == []


def test_function_names_of_a_real_profile() -> None:
    assert len(RECORDS) == 56
    assert "hello_pgo.9e151ce622a56ce3-cgu.2;_ZN9hello_pgo8checksum17hb13ab36a579c66c1E" in RECORDS


def test_coverage_counts_the_main_crate_records_found_in_the_binary() -> None:
    found = checks.coverage(RECORDS, ["hello_pgo"], HELLO_SYMBOLS, {"hello_pgo": 2, "std": 5})
    assert found.main_crate_with_profile == 3
    assert found.main_crate_without_profile == 2
    assert found.functions_with_profile == 3
    checks.refuse_uncovered_main_crate(found, "hello-pgo")


@pytest.mark.refuses("profile-covers-none-main-crate-functions")
def test_a_profile_of_another_crate_covers_none_of_the_main_crate() -> None:
    found = checks.coverage(RECORDS, ["withdep_pgo"], HELLO_SYMBOLS, {"withdep_pgo": 8})
    assert found.main_crate_with_profile == 0
    with pytest.raises(CheckFailed, match="covers none of withdep-pgo's functions \\(8 compiled without"):
        checks.refuse_uncovered_main_crate(found, "withdep-pgo")


def test_records_of_the_crate_under_other_hashes_do_not_count() -> None:
    """Another target or cargo command: the same names with other hashes, none of them in the binary."""
    other = {name.replace("17h", "17x") for name in HELLO_SYMBOLS}
    found = checks.coverage(RECORDS, ["hello_pgo"], other, {"hello_pgo": 14})
    assert found.main_crate_with_profile == 0


def test_without_a_symbol_table_records_are_counted_unmatched() -> None:
    found = checks.coverage(RECORDS, ["hello_pgo"], None, {})
    assert found.symbols_known is False
    assert found.functions_with_profile == 56
    assert found.main_crate_with_profile >= 5


@pytest.mark.parametrize(
    ("symbol", "crate", "expected"),
    [
        ("_ZN9hello_pgo4main17h799b0546406fff5bE", "hello_pgo", True),
        ("_ZN9hello_pgo4main17h799b0546406fff5bE", "hello", False),
        ("_RNvCs1234_9hello_pgo4main", "hello_pgo", True),
        ("_RNvCs1234_5hello4main", "hello_pgo", False),
        ("hello_pgo.9e15-cgu.2;_ZN4core3ptr13drop_in_place17h0E", "hello_pgo", True),
        ("other.9e15-cgu.2;_ZN9hello_pgo4main17h0E", "hello_pgo", True),
        ("_ZN4core3ptr13drop_in_place17h0E", "hello_pgo", False),
    ],
)
def test_records_of_the_crate(symbol: str, crate: str, expected: bool) -> None:
    assert checks.of_crate(symbol, [crate]) is expected


@pytest.mark.refuses("no-ceiling-set-more-half-functions-have")
def test_default_ceiling_refuses_mostly_missing() -> None:
    found = checks.Coverage(1, 0, functions_with_profile=10, symbols_known=True)
    checks.refuse_mostly_missing(10, found)  # half: accepted
    with pytest.raises(CheckFailed, match="11 of the build's 21 functions have no profile data, more than half"):
        checks.refuse_mostly_missing(11, found)


def _instrument_record() -> InstrumentResult:
    """The instrument stage's record of a real run (the demo server's report.json)."""
    full = json.loads((DATA / "report-demo-server-bolt.json").read_text())
    return from_json(InstrumentResult, full["instrument"])


def test_the_same_cargo_command_and_target_go_on() -> None:
    checks.refuse_other_build(
        _instrument_record(), cargo=["cargo", "build"], target=TRIPLE, earlier="the instrumented build", now="this one"
    )


@pytest.mark.refuses("builds-made-different-cargo-commands")
def test_another_cargo_command_is_refused() -> None:
    with pytest.raises(
        CheckFailed,
        match=r"the instrumented build was made by 'cargo build' and this one by 'cargo zigbuild'.*same PGO_CARGO",
    ):
        checks.refuse_other_build(
            _instrument_record(),
            cargo=["cargo", "zigbuild"],
            target=TRIPLE,
            earlier="the instrumented build",
            now="this one",
        )


@pytest.mark.refuses("builds-for-different-targets")
def test_another_target_is_refused() -> None:
    musl = "x86_64-unknown-linux-musl"
    with pytest.raises(
        CheckFailed, match=rf"the instrumented build was for {TRIPLE} and this for {musl}.*same PGO_TARGET"
    ):
        checks.refuse_other_build(
            _instrument_record(), cargo=["cargo", "build"], target=musl, earlier="the instrumented build", now="this"
        )


@pytest.mark.parametrize(
    ("argv", "silencing"),
    [
        (["-Cllvm-args=-no-pgo-warn-mismatch"], ["-Cllvm-args=-no-pgo-warn-mismatch"]),
        (["-C", "llvm-args=--no-pgo-warn-mismatch=TRUE"], ["-Cllvm-args=--no-pgo-warn-mismatch=TRUE"]),
        (["--codegen=llvm_args=-pgo-warn-missing-function=0"], ["-Cllvm-args=-pgo-warn-missing-function=0"]),
        # one -C llvm-args of several options, rustc splits it on white space
        (["-Cllvm-args=-x -no-pgo-warn-mismatch-comdat-weak"], ["-Cllvm-args=-no-pgo-warn-mismatch-comdat-weak"]),
        # LLVM takes an option's last value: the pipeline's -pgo-warn-missing-function after a user's =false
        (["-Cllvm-args=-pgo-warn-missing-function=false", "-Cllvm-args=-pgo-warn-missing-function"], []),
        (
            ["-Cllvm-args=-pgo-warn-missing-function", "-Cllvm-args=-pgo-warn-missing-function=false"],
            ["-Cllvm-args=-pgo-warn-missing-function=false"],
        ),
        (["-Cllvm-args=-no-pgo-warn-mismatch -no-pgo-warn-mismatch=false"], []),
        (["-Cllvm-args=-no-pgo-warn-mismatch-comdat-weak=false"], []),
        # rustc's lint flags (tried with rustc 1.95 on a stale profile): warnings allowed, the last level winning
        (["-Awarnings"], ["-Awarnings"]),
        (["-A", "warnings"], ["-A warnings"]),
        (["--allow=warnings"], ["--allow=warnings"]),
        (["--force-warn", "warnings", "-Awarnings"], ["-Awarnings"]),
        (["-Awarnings", "-Wwarnings"], []),
        (["-Aunused", "-Dwarnings"], []),
        # --cap-lints: the first one wins
        (["--cap-lints", "allow", "--cap-lints", "warn"], ["--cap-lints allow"]),
        (["--cap-lints", "warn", "--cap-lints=allow"], []),
        (["-Cprofile-use=/p", "-Cllvm-args=-pgo-warn-missing-function", "-Copt-level=3"], []),
    ],
)
def test_the_flags_that_silence_llvms_profile_warnings_as_rustc_and_llvm_read_them(
    argv: list[str], silencing: list[str]
) -> None:
    assert checks.silencing_flags(["rustc", *argv]) == silencing


@pytest.mark.refuses("rustflags-silence-profile-warnings")
def test_rustflags_that_silence_the_profile_warnings_are_refused_naming_them() -> None:
    checks.refuse_silencing_flags(["-Copt-level=3"], "CARGO_TARGET_X_RUSTFLAGS")
    with pytest.raises(CheckFailed) as caught:
        checks.refuse_silencing_flags(["-Cllvm-args=-no-pgo-warn-mismatch"], "CARGO_BUILD_RUSTFLAGS")
    assert caught.value.line().startswith(
        "CARGO_BUILD_RUSTFLAGS holds -Cllvm-args=-no-pgo-warn-mismatch, which silences LLVM's warnings of stale and "
        "unprofiled functions that the pipeline checks"
    )


@pytest.mark.parametrize(
    ("argv", "instrumenting"),
    [
        (["-Zinstrument-mcount"], ["-Zinstrument-mcount"]),
        (["-Z", "instrument_mcount=yes"], ["-Z instrument_mcount=yes"]),
        (["-Zinstrument-mcount", "-Zinstrument-mcount=no"], []),
        (["-Cinstrument-coverage"], ["-Cinstrument-coverage"]),
        (["--codegen", "instrument-coverage=off"], []),
        (["-Zinstrument-xray=always"], ["-Zinstrument-xray=always"]),
        (["-Zprofile"], ["-Zprofile"]),
        (["--codegen=profile-generate=/tmp/x"], ["--codegen=profile-generate=/tmp/x"]),
        (["-Cprofile-use=/p", "-Zprofile-sample-use=/s", "-Copt-level=3"], []),
    ],
)
def test_the_flags_that_instrument_a_binary(argv: list[str], instrumenting: list[str]) -> None:
    assert checks.instrumenting_flags(["rustc", *argv]) == instrumenting
