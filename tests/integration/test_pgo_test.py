"""`nox -s pgo-test` and PGO_TEST=1: the test suite built with the profile, on tests/fixtures/tested."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Pipeline, assert_ok, assert_refused

pytestmark = pytest.mark.slow

WORKLOAD = """
[workload]
description = "tested-pgo: gcd, fizzbuzz, palindromes and digit sums"
min_functions = 3

[[instance]]
name = "cli"

[[instance.phase]]
name = "gcd"
kind = "command"
args = ["gcd", "1071", "462"]
runs = 2

[[instance.phase]]
name = "fizzbuzz"
kind = "command"
args = ["fizzbuzz", "100"]

[[instance.phase]]
name = "digits"
kind = "command"
args = ["digits", "5000"]
"""


@pytest.fixture
def tested(tmp_path: Path) -> Pipeline:
    workload = tmp_path / "tested.toml"
    workload.write_text(WORKLOAD)
    return Pipeline(tmp_path, "tested", workload=str(workload))


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def _rustc_lines(log: Path, crate: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if f"rustc --crate-name {crate} " in line]


@pytest.mark.refuses("builds-made-different-cargo-commands")
def test_pgo_with_the_test_suite(tested: Pipeline) -> None:
    text = assert_ok(tested.nox("pgo", PGO_TEST="1"))
    assert "9 passed, 0 failed, 1 ignored" in text
    report = _report(tested)
    result = report["test"]
    assert (result["passed"], result["failed"], result["ignored"]) == (9, 0, 1)
    assert result["target_dir"] == str(tested.work / "test-target")
    assert result["rustflags"] == report["optimise"]["rustflags"]
    store_path = report["optimise"]["store_path"]
    # every build of the package's own crates (lib, bin, their test harnesses) read the profile from the store
    lines = _rustc_lines(tested.work / "logs" / "test.log", "tested_pgo")
    assert len(lines) == 4
    for line in lines:
        assert f"-Cprofile-use={store_path}" in line
        assert "--target x86_64-unknown-linux-gnu" in line
        assert str(tested.work / "test-target") in line
    # the stage runs on its own too; another cargo command than the optimised build's is refused
    assert_ok(tested.nox("pgo-test"))
    # (PGO_GENERATE_LINKER: make_plan's preflight refuses cargo zigbuild without it, even for pgo-test)
    zigbuild = {"PGO_CARGO": "cargo zigbuild", "PGO_GENERATE_LINKER": "cc"}
    line = assert_refused(tested.nox("pgo-test", **zigbuild), "the optimised build was made by")
    assert "'cargo build' and the test suite would be by 'cargo zigbuild'" in line


@pytest.mark.refuses("tests-fail-profile-named")
def test_a_failing_test_fails_the_stage_and_is_named(tested: Pipeline) -> None:
    assert_ok(tested.nox("pgo"))
    optimised = _report(tested)["optimise"]
    source = tested.crate_dir / "src" / "lib.rs"
    text = source.read_text()
    broken = text.replace("assert_eq!(gcd(12, 18), 6);", "assert_eq!(gcd(12, 18), 7);")
    assert broken != text
    source.write_text(broken)
    line = assert_refused(tested.nox("pgo-test"), "the test suite compiled with the profile failed: 1 of 9 failed")
    assert "tests::gcd_of_multiples" in line
    result = _report(tested)["test"]
    assert result["failed"] == 1
    assert result["failed_tests"] == ["tests::gcd_of_multiples (-p tested-pgo --lib)"]
    # --no-fail-fast: the suites after the failing one ran
    assert [s["passed"] for s in result["suites"]] == [4, 0, 3, 1]
    # the optimised binary passed its own checks: a failing suite leaves it where report.json says, unchanged
    after = _report(tested)["optimise"]
    assert after == optimised
    binary = Path(after["binary"])
    assert binary.name == "tested-pgo" and "failed" not in after
    assert hashlib.sha256(binary.read_bytes()).hexdigest() == after["binary_sha256"]
    assert not (tested.work / "rejected").exists()
    assert "rejected_binary" not in result
    assert result["optimised_binary_kept"] == str(binary)


@pytest.mark.refuses("stage-run-without-result-stage-before")
def test_pgo_test_needs_an_optimised_build(tested: Pipeline) -> None:
    assert_refused(tested.nox("pgo-test"), "test needs the result of optimise", "run `nox -s optimise` first")


def test_pgo_test_with_cargo_zigbuild(tested: Pipeline) -> None:
    extra = {"PGO_CARGO": "cargo zigbuild", "PGO_GENERATE_LINKER": "cc", "PGO_TARGET": "x86_64-unknown-linux-gnu.2.28"}
    text = assert_ok(tested.nox("pgo", PGO_TEST="1", **extra))
    assert "9 passed, 0 failed, 1 ignored" in text
    log = (tested.work / "logs" / "test.log").read_text()
    assert log.startswith("$ cargo-zigbuild test --release --target x86_64-unknown-linux-gnu.2.28 ")
    assert "zigcc-x86_64-unknown-linux-gnu.2.28" in log
