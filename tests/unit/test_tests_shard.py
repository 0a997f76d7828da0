"""The tests shard (recipes/stages/tests_shard.py, recipes/config.py, recipes/workload/shards.py): the reserved name
in the configuration and its refusals, its failed tests named from real ``cargo test`` logs, and its records counted
against the binary's functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes import train
from recipes.config import TESTS_SHARD, load_config
from recipes.errors import CheckFailed, ConfigError, TrainingFailed
from recipes.llvm.profdata import ProfileSummary
from recipes.plan import refuse_tests_without_reach
from recipes.results import MergeResult, Report, ShardRecord, TrainResult, from_json
from recipes.stages import tests_shard
from recipes.stages.summary import shard_summary_lines, summary_lines
from recipes.toolchain.cargo import metadata
from recipes.toolchain.cargo.metadata import CrateInfo
from recipes.toolchain.cargo.testlog import parse_cargo_test
from recipes.workload.shards import plan_shards, workload_shards
from tests.conftest import DATA

_ = train  # imported for its registrations: the phase kinds a workload file names

WORKLOAD = '[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\nmode = "command"\n\n'
PHASE = '[[instance.phase]]\nname = "p"\nkind = "command"\nargs = ["x"]\n'

#: record names as llvm-profdata shows them for tests/fixtures/tested: the binary's, and the test build's own
GCD = "_ZN10tested_pgo3gcd17h25a3c377bceb83edE"
FIZZBUZZ = "_ZN10tested_pgo8fizzbuzz17h402fc6c500db0901E"
MAIN = "_ZN10tested_pgo4main17h2b304bc9f6d9b0cdE"
STD = "tested_pgo.eeadbb2d6a50e9e6-cgu.0;_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17habf40698aff9e1c1E"
TEST_GCD = "tested_pgo.8a68418ac6494088-cgu.0;_ZN10tested_pgo3gcd17h4afca3ad3cd50efaE"
HARNESS = "_ZN10tested_pgo4main17h58e474bf3f9cb90aE"


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.pgo]\n")
    (tmp_path / "main.toml").write_text(WORKLOAD + PHASE)
    return tmp_path


def test_tests_names_the_reserved_shard_without_a_workload_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    config = load_config(project, {"PGO_WORKLOAD": "tests,main.toml", "PGO_WEIGHTS": "tests=1,main=3"})
    # the stages that run one workload take the first shard with a file
    assert (config.workload, config.shards) == ("main.toml", ("tests", "main.toml"))
    shards = plan_shards(config)
    assert [(s.name, s.weight, s.is_tests) for s in shards] == [("tests", 1.0, True), ("main", 3.0, False)]
    assert shards[0].workload is None
    assert shards[0].source == "the crate's own tests, cargo test"
    assert [s.name for s, _ in workload_shards(shards)] == ["main"]
    config = load_config(project, {}, ["--workload", "main.toml,tests"])
    assert config.workload == "main.toml"


@pytest.mark.refuses("tests-shard-alone")
def test_the_tests_shard_alone_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), {"PGO_WORKLOAD": TESTS_SHARD})
    assert caught.value.line().startswith("PGO_WORKLOAD: the shard tests (the crate's own test suite) alone")
    assert "PGO_WORKLOAD=main,tests" in caught.value.line()


@pytest.mark.refuses("tests-shard-workload-file")
def test_a_workload_file_named_tests_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config(project, {"PGO_WORKLOAD": "main.toml,w/tests.toml"})
    assert "the workload file w/tests.toml is named like the reserved shard tests" in caught.value.line()
    # the name alone, with a profiles/tests.toml of the project: which one is meant?
    (project / "profiles").mkdir()
    (project / "profiles" / "tests.toml").write_text(WORKLOAD + PHASE)
    config = load_config(project, {"PGO_WORKLOAD": "main.toml,tests"})
    with pytest.raises(ConfigError) as caught:
        plan_shards(config)
    line = caught.value.line()
    assert line.startswith("PGO_WORKLOAD: the shard tests is reserved for the crate's own test suite, and ")
    assert f"{project / 'profiles' / 'tests.toml'} is a workload file of that name" in line


@pytest.mark.refuses("tests-shard-test-failed")
def test_a_failed_test_is_named() -> None:
    run = parse_cargo_test((DATA / "cargo-test-fail.log").read_text())
    with pytest.raises(TrainingFailed) as caught:
        tests_shard.refuse_failed(run, 101, "/w/logs/train-tests.log")
    line = caught.value.line()
    failed = len(run.failed_tests)
    assert line.startswith(f"the tests shard: {failed} of the crate's tests failed under instrumentation")
    assert run.failed_tests[0] in line
    assert "see /w/logs/train-tests.log" in line
    crashed = parse_cargo_test((DATA / "cargo-test-crash.log").read_text())
    with pytest.raises(TrainingFailed, match="crashed"):
        tests_shard.refuse_failed(crashed, 101, "log")
    broken = parse_cargo_test((DATA / "cargo-test-nocompile.log").read_text())
    with pytest.raises(TrainingFailed, match="did not compile instrumented"):
        tests_shard.refuse_failed(broken, 101, "log")
    passed = parse_cargo_test((DATA / "cargo-test-pass.log").read_text())
    tests_shard.refuse_failed(passed, 0, "log")
    with pytest.raises(TrainingFailed, match="exited with code 3 though every test passed"):
        tests_shard.refuse_failed(passed, 3, "log")


def test_the_records_are_counted_against_the_binarys_functions() -> None:
    main = {GCD: 12, FIZZBUZZ: 0, MAIN: 3, STD: 3}
    tests = {GCD: 1, FIZZBUZZ: 15, MAIN: 2, STD: 2, TEST_GCD: 2, HARNESS: 1}
    binary = tests_shard.binary_records([main])
    assert binary == {GCD, FIZZBUZZ, MAIN, STD}
    record: ShardRecord = {  # the keys every shard has
        "name": "tests",
        "profile": "/w/shards/tests/tests.profdata",
        "profile_sha256": "2" * 64,
        "share_asked": 0.25,
        "share_reached": 0.2497,
        "weight": 10,
        "executed_functions": 6,
        "total_functions": 6,
        "only_this_shard": 3,
        "total_count": 23,
        "overlap_with_rest": 1.5,
    }
    others = {name for name, count in main.items() if count}
    tests_shard.add_fields(record, tests, others, binary, ["tested_pgo"])
    # fizzbuzz: the one function of the main crate the workload never ran; the harness's are not the binary's
    assert (record["records_matching_binary"], record["records_not_matching_binary"]) == (4, 2)
    assert record["main_crate_only_this_shard"] == 1
    merged = {**{n: main[n] * 3 + tests[n] for n in main}, TEST_GCD: 2, HARNESS: 1}
    counts = tests_shard.binary_only(merged, binary)
    assert counts == {GCD: 37, FIZZBUZZ: 15, MAIN: 11, STD: 11}
    assert tests_shard.binary_summary(ProfileSummary(6, 6, 77), counts) == ProfileSummary(4, 4, 77)


@pytest.mark.refuses("tests-shard-reaches-no-binary-function")
def test_a_tests_shard_that_reaches_none_of_the_main_crate_in_the_binary_is_refused() -> None:
    binary = {GCD, FIZZBUZZ, MAIN, "main"}
    tests_shard.refuse_unreaching({GCD: 0, TEST_GCD: 4, FIZZBUZZ: 1}, binary, ["tested_pgo"])
    # the entry point, named main in the binary and in the harness, is not the crate's code
    with pytest.raises(CheckFailed) as caught:
        tests_shard.refuse_unreaching({GCD: 0, TEST_GCD: 4, HARNESS: 1, "main": 1}, binary, ["tested_pgo"])
    line = caught.value.line()
    assert line.startswith(
        "the shard tests executed none of the main crate's 3 functions in the binary: of its 4 records, 2 are named "
        "as the binary's functions and 2 are the test build's own"
    )
    assert "drop tests from PGO_WORKLOAD" in line


def _merge_record(shards: list[dict[str, object]]) -> dict[str, object]:
    return {
        "profile": "/w/tested-pgo.profdata",
        "profraw_merged": 7,
        "profraw_dropped": {},
        "min_functions": 1,
        "min_functions_set": 1,
        "min_functions_source": "the default",
        "min_functions_total": None,
        "llvm_profdata": "/usr/bin/llvm-profdata-22",
        "llvm_profdata_version": "22.1.8",
        "profile_sha256": "0" * 64,
        "executed_functions": 12,
        "total_functions": 15,
        "seconds": 0.9,
        "shards": shards,
    }


def test_the_summary_says_what_the_tests_shard_matched() -> None:
    tests = {
        "name": "tests",
        "profile": "/w/shards/tests/tests.profdata",
        "profile_sha256": "2" * 64,
        "share_asked": 0.25,
        "share_reached": 0.2497,
        "weight": 10,
        "executed_functions": 54,
        "total_functions": 88,
        "only_this_shard": 47,
        "total_count": 1234,
        "overlap_with_rest": 12.5,
        "records_matching_binary": 15,
        "records_not_matching_binary": 73,
        "main_crate_only_this_shard": 2,
    }
    record = from_json(MergeResult, _merge_record([tests]))
    assert shard_summary_lines(record) == [
        "shard       tests: share 25.0 % asked, 24.97 % reached (weight 10); 54 of 88 functions executed, 47 by no "
        "other shard (2 of the main crate's); total count 1,234; overlap with the rest 12.50 %; 15 of its 88 "
        "records match the binary's functions, 73 do not"
    ]


def test_the_train_line_says_how_the_tests_ran() -> None:
    tests: dict[str, object] = {
        "name": "tests",
        "workload": None,
        "seconds": 4.1,
        "requests": 9,
        "profraw": [],
        "tests": {"passed": 9, "failed": 0, "ignored": 1, "log": "/w/logs/train-tests.log"},
    }
    record = {
        "seconds": 4.7,
        "requests": 12,
        "phases": [],
        "scale": 1.0,
        "workload": "/w/main.toml",
        "profraw_files": 9,
        "profraw": [],
        "shards": [tests],
    }
    report = Report(train=from_json(TrainResult, record))
    line = next(ln for ln in summary_lines(report) if ln.startswith("train"))
    assert line.endswith("9 .profraw files; the crate's tests: 9 passed, 1 ignored")


def test_a_binary_cargo_built_again_between_the_runs_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tests ran the instrumented binary only if the file is still its copy after the run."""
    instrumented, replaced = tmp_path / "instrumented", tmp_path / "release" / "tested-pgo"
    replaced.parent.mkdir()
    instrumented.write_bytes(b"\x7fELF instrumented")
    replaced.write_bytes(b"\x7fELF instrumented")
    assert tests_shard.still_replaced(replaced, instrumented)
    assert capsys.readouterr().err == ""
    replaced.write_bytes(b"\x7fELF built again by cargo")
    assert not tests_shard.still_replaced(replaced, instrumented)
    line = capsys.readouterr().err.strip()
    assert line.startswith("pgo: warning: train: shard tests: cargo built ") and "not the instrumented one" in line


# --- before anything is built: a suite whose tests cannot run the binary ----------------------------------------


def _target(name: str, kind: str, *, test: bool) -> dict[str, object]:
    """A target as ``cargo metadata`` describes it (the keys read)."""
    return {"name": name, "kind": [kind], "test": test}


def test_the_targets_that_link_the_crate_as_the_binary_has_it() -> None:
    lib, binary = _target("tested_pgo", "lib", test=True), _target("tested-pgo", "bin", test=True)
    assert metadata.linking_tests([lib, binary]) == ()  # unit tests only
    cli = _target("cli", "test", test=True)
    assert metadata.linking_tests([lib, binary, cli]) == ("cli",)
    examples = [_target("demo", "example", test=False), _target("checked", "example", test=True)]
    assert metadata.linking_tests([binary, *examples, _target("b", "bench", test=False)]) == ("checked",)
    assert metadata.linking_tests([_target("off", "test", test=False)]) == ()  # [[test]] test = false


def _crate(linking: tuple[str, ...]) -> CrateInfo:
    return CrateInfo(
        Path("Cargo.toml"),
        "tested-pgo",
        Path(),
        "tested-pgo",
        ("tested_pgo",),
        Path("target"),
        linking_tests=linking,
    )


@pytest.mark.refuses("tests-shard-no-test-can-run-the-binary")
def test_a_tests_shard_of_unit_tests_alone_is_refused(tmp_path: Path) -> None:
    shards = plan_shards(load_config(_project(tmp_path), {"PGO_WORKLOAD": "main.toml,tests"}))
    with pytest.raises(ConfigError) as caught:
        refuse_tests_without_reach(shards, _crate(()))
    line = caught.value.line()
    assert line.startswith("the shard tests cannot train the binary: tested-pgo has no integration test (tests/*.rs)")
    assert line.endswith(
        "(add an integration test that runs the binary (CARGO_BIN_EXE_tested-pgo) or calls its "
        "library, or drop tests from PGO_WORKLOAD)"
    )
    refuse_tests_without_reach(shards, _crate(("cli",)))
    refuse_tests_without_reach(shards[:1], _crate(()))  # no tests shard: nothing to say
