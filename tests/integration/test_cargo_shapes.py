"""`nox -s pgo` on crates whose cargo output has the shapes of real crates' (issue 10).

- tests/fixtures/described: a Cargo.toml description over three lines (with backticks and quotes), so the
  optimised build's `cargo -vv` prints every rustc command of the package over several log lines, and a build
  script that reruns (`rerun-if-changed`, `rerun-if-env-changed`) and fails when DESCRIBED_WEIGHT_SEED is not a
  number; unit tests, an integration test and a doc-test.
- tests/fixtures/renamed: a virtual workspace whose package `renamed-pkg` has the lib `wordcore` and two
  binaries, `rnm` and `rnm-aux`, and uses the proc-macro of the member `renamed-macros`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Pipeline, assert_ok, assert_refused

pytestmark = pytest.mark.slow

DESCRIBED_WORKLOAD = """
[workload]
description = "described-pgo: word counts, longest words, weights and rare letters"
min_functions = 4

[[instance]]
name = "cli"

[[instance.phase]]
name = "count"
kind = "command"
args = ["count", "the quick brown fox jumps over the lazy dog"]
runs = 2

[[instance.phase]]
name = "longest"
kind = "command"
args = ["longest", "profile guided optimisation of a small crate"]

[[instance.phase]]
name = "weight"
kind = "command"
args = ["weight", "several lines of description"]

[[instance.phase]]
name = "rare"
kind = "command"
args = ["rare", "Hello World"]
"""

RENAMED_WORKLOAD = """
[workload]
description = "renamed-pkg's rnm: squares, reversed words and vowels"
min_functions = 3

[[instance]]
name = "cli"

[[instance.phase]]
name = "squares"
kind = "command"
args = ["squares", "500"]
runs = 2

[[instance.phase]]
name = "reverse"
kind = "command"
args = ["reverse", "one two three four"]

[[instance.phase]]
name = "vowels"
kind = "command"
args = ["vowels", "profile guided optimisation"]
"""

DESCRIPTION_LINES = [
    "Word statistics from the command line: counts, `longest` words and 'rare' letters.",
    'It says "hello" in three lines,',
    "and ends with a backslash \\ and a tab\tinside.",
]


def _pipeline(tmp_path: Path, fixture: str, workload: str) -> Pipeline:
    path = tmp_path / f"{fixture}.toml"
    path.write_text(workload)
    return Pipeline(tmp_path, fixture, workload=str(path))


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_figures(report: dict[str, Any], binary_name: str, identities: list[str]) -> None:
    merge = report["merge"]
    assert merge["min_functions"] <= merge["executed_functions"] <= merge["total_functions"]
    optimise = report["optimise"]
    assert "failed" not in optimise
    assert (optimise["missing_profile_functions"], optimise["stale_profile_warnings"]) == (0, 0)
    assert list(optimise["crate_metadata"]) == identities
    assert report["instrument"]["crate_metadata"] == optimise["crate_metadata"]
    binary = Path(optimise["binary"])
    assert binary.name == binary_name
    assert _sha256(binary) == optimise["binary_sha256"]
    assert optimise["verify"]["requests"] == report["train"]["requests"]
    for stage in ("instrument", "train", "merge", "optimise"):
        assert report[stage]["seconds"] >= 0


@pytest.mark.refuses("test-suite-does-not-compile-profile")
def test_a_description_over_several_lines_and_a_build_script(tmp_path: Path) -> None:
    p = _pipeline(tmp_path, "described", DESCRIBED_WORKLOAD)
    text = assert_ok(p.nox("pgo", PGO_TEST="1"))
    assert "7 passed, 0 failed, 0 ignored" in text
    # the shape: the optimised build's rustc commands of the package cover several log lines
    log = (p.work / "logs" / "optimise-build.log").read_text()
    assert log.count(f"\n{DESCRIPTION_LINES[1]}\n") >= 3
    assert "CARGO_PKG_DESCRIPTION=" in log and "--crate-name described_pgo" in log
    report = _report(p)
    _check_figures(report, "described-pgo", ["described_pgo (lib)", "described_pgo (bin)"])
    assert report["merge"]["executed_functions"] >= 4
    # the build script reran in the test build and is not counted as a test binary
    assert "/build-script-build`" in (p.work / "logs" / "test.log").read_text()
    test = report["test"]
    assert (test["passed"], test["failed"], test["ignored"], test["failed_tests"]) == (7, 0, 0, [])
    assert [s["name"] for s in test["suites"]] == ["described_pgo", "described_pgo", "cli", "doc-tests described_pgo"]
    # the optimised binary is the crate's, description and all
    binary = Path(report["optimise"]["binary"])
    about = subprocess.run([binary, "about"], capture_output=True, text=True, check=True, timeout=30).stdout
    assert about.splitlines() == DESCRIPTION_LINES

    # a test build that fails (its build script, here) fails pgo-test and leaves the optimised binary alone
    optimised = report["optimise"]
    line = assert_refused(
        p.nox("pgo-test", DESCRIBED_WEIGHT_SEED="seven"),
        "the test suite did not compile with the profile: error: failed to run custom build command for "
        "`described-pgo v0.1.0",
    )
    assert "build-script-build" not in line.split("(see")[0]
    after = _report(p)
    assert after["optimise"] == optimised
    assert _sha256(binary) == optimised["binary_sha256"]
    assert not (p.work / "rejected").exists()
    assert after["test"]["failed_check"].startswith("the test suite did not compile with the profile")


@pytest.mark.refuses("package-has-several-binaries-no-pgo-bin")
def test_a_workspace_binary_named_unlike_its_package(tmp_path: Path) -> None:
    p = _pipeline(tmp_path, "renamed", RENAMED_WORKLOAD)
    # two binaries: which one is refused before anything is built
    assert_refused(p.nox("pgo", PGO_PACKAGE="renamed-pkg"), "package renamed-pkg has 2 binaries (rnm, rnm-aux)")
    assert not p.work.joinpath("generate-target").exists()
    assert_ok(p.nox("pgo", PGO_PACKAGE="renamed-pkg", PGO_BIN="rnm"))
    report = _report(p)
    _check_figures(report, "rnm", ["wordcore (lib)", "rnm (bin)"])
    assert Path(report["instrument"]["binary"]).name == "rnm"
    # the proc-macro of the workspace is compiled for the host, without the profile
    log = (p.work / "logs" / "optimise-build.log").read_text()
    macro = [line for line in log.splitlines() if "--crate-name renamed_macros " in line]
    assert len(macro) == 1 and "--crate-type proc-macro" in macro[0] and "--target " not in macro[0]
    # and the binary is the one asked for
    binary = Path(report["optimise"]["binary"])
    out = subprocess.run([binary, "reverse", "a b c"], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout == "c b a\n"
