"""``nox -s bench`` without the demo server: the builds it makes by default, and its refusals.

The benchmark itself, on two demo-server binaries, is in tests/e2e/test_bench.py (it needs the shared
``demo_pgo`` build).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Pipeline, assert_refused

pytestmark = pytest.mark.slow


def test_default_builds_plain_and_pgo_of_the_same_tree(hello: Pipeline) -> None:
    """No --baseline/--candidate: the pipeline runs, a plain build is made apart, both are copied and
    hashed; the hello binary is no server, so the scenario is invalid and the session says why."""
    proc = hello.nox(
        "bench",
        "--scenarios",
        "static-5k",
        "--trials",
        "1",
        CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-Cdebuginfo=1",
    )
    assert_refused(proc, "1 of 1 scenarios invalid", "static-5k", "plain", "exited with")
    report = json.loads((hello.work / "report.json").read_text())
    assert "optimise" in report  # the pipeline ran for the candidate
    plain_log = (hello.work / "logs" / "bench-plain-build.log").read_text()
    main_line = next(line for line in plain_log.splitlines() if "--crate-name hello_pgo" in line)
    assert "profile-use" not in main_line and "profile-generate" not in main_line
    assert "--target x86_64-unknown-linux-gnu" in main_line
    assert "-Cdebuginfo=1" in main_line  # the base flags both builds share
    optimise_log = (hello.work / "logs" / "optimise-build.log").read_text()
    pgo_line = next(line for line in optimise_log.splitlines() if "--crate-name hello_pgo" in line)
    assert "-Cdebuginfo=1" in pgo_line
    results = json.loads((hello.work / "bench" / "results.json").read_text())
    assert results["baseline_label"] == "plain" and results["candidate_label"] == "PGO"
    assert results["baseline_origin"] == str(
        hello.work / "plain-target" / "x86_64-unknown-linux-gnu" / "release" / "hello-pgo"
    )
    assert results["candidate_origin"] == report["optimise"]["binary"]
    assert results["candidate_sha256"] == report["optimise"]["binary_sha256"]
    assert results["baseline_sha256"] != results["candidate_sha256"]
    assert Path(results["baseline"]).parent == hello.work / "bench" / "bin"
    assert results["scenarios"][0]["valid"] is False
    assert "| files from disk | invalid | invalid |" in (hello.work / "bench" / "results.md").read_text()
    # the PGO binary of the work dir was built with other flags than a plain build now would be: refused
    proc = hello.nox(
        "bench", "--scenarios", "static-5k", CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-Cdebuginfo=2"
    )
    assert_refused(proc, "the plain build would get the rustflags '-Cdebuginfo=2'", "'-Cdebuginfo=1' besides")


def test_a_bad_argument_is_refused_before_anything_runs(hello: Pipeline) -> None:
    assert_refused(hello.nox("bench", "--scenarios", "cached-5k-h3"), "unknown scenario 'cached-5k-h3'")
    assert_refused(hello.nox("bench", "--trials", "0"), "--trials", "not a positive integer")
    assert not hello.work.exists()


def test_a_missing_binary_is_refused(hello: Pipeline, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server"
    proc = hello.nox("bench", "--baseline", str(missing), "--candidate", str(missing), "--scenarios", "static-5k")
    assert_refused(proc, "no such binary", str(missing))
