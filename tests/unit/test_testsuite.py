"""The cargo test log parser, on real `cargo test --no-fail-fast -v` output of tests/fixtures/tested."""

from __future__ import annotations

import pytest

from recipes.toolchain.cargo.log import Invocation, harness_executables, running_invocations
from recipes.toolchain.cargo.testlog import binary_under_test, failed_named, parse_cargo_test, summary_line
from tests.conftest import DATA


def _log(name: str) -> str:
    return (DATA / f"cargo-test-{name}.log").read_text()


def test_passing_suite() -> None:
    run = parse_cargo_test(_log("pass"))
    assert run.ok
    assert (run.passed, run.failed, run.ignored) == (9, 0, 1)
    assert [s.name for s in run.suites] == ["tested_pgo", "tested_pgo", "cli", "doc-tests tested_pgo"]
    assert [s.planned for s in run.suites] == [6, 0, 3, 1]
    assert all(s.finished for s in run.suites)
    assert run.failed_tests == []
    assert summary_line(run) == "9 passed, 0 failed, 1 ignored"


def test_failing_tests_are_named_with_their_target() -> None:
    run = parse_cargo_test(_log("fail"))
    assert not run.ok
    assert (run.passed, run.failed, run.ignored) == (7, 2, 1)
    assert run.failed_tests == ["tests::gcd_of_multiples (--lib)", "fizzbuzz_from_the_command_line (--test cli)"]
    assert summary_line(run) == "7 passed, 2 failed, 1 ignored"
    assert failed_named(run) == "tests::gcd_of_multiples (--lib); fizzbuzz_from_the_command_line (--test cli)"
    run.suites[0].failed_tests.extend(f"t{n}" for n in range(4))  # 6 failed: the first 5 named, then …
    assert failed_named(run).endswith("; t3 (--lib) …") and failed_named(run).count("; ") == 4


def test_should_panic_suffix_is_not_part_of_the_name() -> None:
    text = _log("pass").replace(
        "test tests::digit_sum_panics_never_but_division_does - should panic ... ok",
        "test tests::digit_sum_panics_never_but_division_does - should panic ... FAILED",
    )
    assert parse_cargo_test(text).suites[0].failed_tests == ["tests::digit_sum_panics_never_but_division_does"]


def test_crashed_test_binary() -> None:
    run = parse_cargo_test(_log("crash"))
    assert not run.ok
    assert run.failed == 0
    assert [s.label() for s in run.crashed] == ["--test cli"]
    assert run.failed_tests == ["--test cli crashed: signal: 6, SIGABRT: process abort signal"]
    assert summary_line(run) == "6 passed, 0 failed, 1 ignored, 1 test binaries crashed"


def test_suite_that_does_not_compile() -> None:
    run = parse_cargo_test(_log("nocompile"))
    assert not run.ok
    assert run.suites == []
    assert run.compile_error == 'error: could not compile `tested-pgo` (test "cli") due to 1 previous error'


NOT_VERBOSE = """\
    Finished `release` profile [optimized] target(s) in 0.02s
     Running unittests src/lib.rs (target/x86_64-unknown-linux-gnu/release/deps/tested_pgo-7ff7647fa6312591)

running 1 test
test tests::gcd_of_multiples ... FAILED

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 5 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
"""


def test_output_without_verbose() -> None:
    run = parse_cargo_test(NOT_VERBOSE)
    assert [s.name for s in run.suites] == ["tested_pgo"]
    assert run.failed_tests == ["tests::gcd_of_multiples (--lib)"]


@pytest.mark.parametrize("name", ["pass", "fail", "crash"])
def test_rustc_lines_are_not_suites(name: str) -> None:
    run = parse_cargo_test(_log(name))
    assert "rustc" not in " ".join(s.name for s in run.suites)
    assert len(run.suites) == 4


def test_empty_log_is_not_a_pass() -> None:
    assert not parse_cargo_test("").ok


# `cargo test -v` of tests/fixtures/described (captured by `nox -s pgo` with PGO_TEST=1): its build script
# reruns in the test build, and cargo prints ``Running `…/build-script-build` `` among the rustc lines.


def test_a_build_script_is_not_a_test_binary() -> None:
    text = (DATA / "cargo-test-buildscript.log").read_text()
    assert "/build-script-build`" in text
    run = parse_cargo_test(text)
    assert run.ok, run.failed_tests
    assert [s.name for s in run.suites] == ["described_pgo", "described_pgo", "cli", "doc-tests described_pgo"]
    assert [(s.planned, s.passed) for s in run.suites] == [(4, 4), (0, 0), (2, 2), (1, 1)]
    assert summary_line(run) == "7 passed, 0 failed, 0 ignored"


def test_which_running_commands_are_test_binaries() -> None:
    text = (DATA / "cargo-test-buildscript.log").read_text()
    kinds = [binary_under_test(inv) is not None for inv in running_invocations(text)]
    programs = [inv.argv[0].rsplit("/", 1)[-1] for inv in running_invocations(text)]
    assert programs.count("build-script-build") == 1
    assert [p for p, is_test in zip(programs, kinds, strict=True) if is_test] == [
        "described_pgo-f142016b13957655",
        "described_pgo-3b64ceb656522a30",
        "cli-4a95f66e4837e4ed",
    ]


RUNNER_AND_VV = """\
     Running `CARGO=/usr/bin/cargo OUT_DIR=/t/out /t/release/build/x-0123456789abcdef/build-script-build`
     Running `CARGO=/usr/bin/cargo CARGO_PKG_DESCRIPTION='two
lines' /t/x86_64-unknown-linux-gnu/release/deps/x-fedcba9876543210`

running 1 test
test it_works ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running `qemu-aarch64 -L /usr/aarch64-linux-gnu /t/aarch64-unknown-linux-gnu/release/deps/cli-0123456789abcdef`

running 1 test
test from_the_cli ... FAILED

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--test cli`
"""


def test_test_binaries_behind_a_runner_or_with_env() -> None:
    run = parse_cargo_test(RUNNER_AND_VV)
    assert [s.name for s in run.suites] == ["x", "cli"]
    assert run.failed_tests == ["from_the_cli (--test cli)"]
    assert not run.crashed


def test_a_failing_build_script_is_a_compile_error_not_a_crash() -> None:
    run = parse_cargo_test((DATA / "cargo-test-buildscript-fails.log").read_text())
    assert not run.ok
    assert run.suites == []
    assert run.compile_error == (
        "error: failed to run custom build command for `described-pgo v0.1.0 (/tmp/shapes-try/described)`"
    )


def test_a_log_with_json_messages() -> None:
    # `cargo test -v --message-format=json-render-diagnostics`: JSON lines among the text, same suites
    text = (DATA / "cargo-test-buildscript-json.log").read_text()
    run = parse_cargo_test(text)
    assert run.ok
    assert [s.name for s in run.suites] == ["described_pgo", "described_pgo", "cli", "doc-tests described_pgo"]
    assert (run.passed, run.failed, run.ignored) == (7, 0, 0)
    # the binaries the text calls tests are those cargo's JSON calls test harnesses
    ran = {binary_under_test(inv) for inv in running_invocations(text)} - {None}
    harnesses = frozenset(str(path) for _, path in harness_executables(text))
    assert ran == harnesses
    assert len(ran) == 3
    # with cargo's word for it, a binary in deps/ that is no test harness is not a suite
    build_script = next(inv for inv in running_invocations(text) if inv.argv[0].endswith("build-script-build"))
    assert binary_under_test(build_script, harnesses) is None
    other = Invocation((), ("/t/release/deps/tool-0123456789abcdef",), 0, 0)
    assert binary_under_test(other) is not None
    assert binary_under_test(other, harnesses) is None
