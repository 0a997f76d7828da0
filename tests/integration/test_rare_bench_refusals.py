"""Refusals of ``nox -s bench`` that a normal run never meets, made to happen with the real cargo, rustc,
llvm-profdata and h2load on the hello fixture, and a real server (a plain release build of
tests/fixtures/bare-server) on loopback.

Where the real tools cannot be made to fail that way, ``cargo`` on ``PATH`` is the wrapper of
tests/integration/test_rare_refusals.py: the real cargo, then what a broken build or a racing process would do to
its output (removes a binary). The server that never gets ready is real: the bench asks it for a readiness URL it
answers with 404.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from recipes import report
from recipes.results import Failed, OptimiseResult, TestResult
from tests.conftest import REPO, Pipeline, assert_refused, nox_argv
from tests.integration.test_rare_refusals import TRIPLE, _cargo_wrapper, _path_with

pytestmark = pytest.mark.slow


def _bench(p: Pipeline, posargs: Sequence[str], **extra: str) -> subprocess.CompletedProcess[str]:
    """``nox -r -s bench -- <posargs>``: as a user runs it, but the session's virtualenv (matplotlib, for the
    chart) is reused when there is one, not made again (about 30 s each time); its install still runs (quick
    when it is all there), so the test does not depend on which bench ran first."""
    argv = nox_argv("bench", posargs)
    argv.insert(argv.index("-s"), "-r")
    return subprocess.run(
        argv,
        cwd=REPO,
        env=p.env(**extra),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


#: the fewest runs the bench allows: one scenario, one trial (never reached: every refusal comes first)
MINIMAL = ("--scenarios", "collatz", "--trials", "1", "--scale", "0.05", "--no-coverage")


@pytest.mark.refuses("bench-plain-build-left-no-binary")
def test_bench_whose_plain_build_leaves_no_binary_refused(hello: Pipeline, tmp_path: Path) -> None:
    """The candidate is given (it is never run), so the plain build is the only build; the cargo wrapper
    removes its binary after the real cargo built it."""
    true = shutil.which("true")
    assert true is not None
    plain = hello.work / "plain-target" / TRIPLE / "release" / "hello-pgo"
    wrappers = _cargo_wrapper(tmp_path / "wrapped")
    proc = _bench(
        hello,
        ["--candidate", true, *MINIMAL],
        PATH=_path_with(wrappers, hello), BREAK="remove", BREAK_FLAG="", BREAK_BINARY=str(plain),
    )  # fmt: skip
    line = assert_refused(proc, f"the plain build left no binary at {plain}", "bench-plain-build.log")
    assert "Finished" in (hello.work / "logs" / "bench-plain-build.log").read_text()  # cargo did build it
    assert not plain.exists()
    recorded = report.load(hello.work).plain  # the plain stage's record says it failed, and names no binary
    assert isinstance(recorded, Failed), line
    assert f"the plain build left no binary at {plain}" in recorded.reason, line
    assert "binary" not in recorded.partial
    assert not (hello.work / "bench").exists()  # nothing copied to measure, no results


@pytest.mark.refuses("no-checked-optimised-binary-work-dir")
def test_bench_whose_pipeline_leaves_no_checked_optimised_binary_refused(hello: Pipeline, tmp_path: Path) -> None:
    """No PGO binary in the work dir: the bench runs the pipeline (with its test stage, PGO_TEST=1), which passes;
    the cargo wrapper removes the checked copy of the optimised binary after ``cargo test``, as another process
    cleaning the work dir would. The bench refuses before it builds the plain binary."""
    checked = hello.work / "optimised" / "hello-pgo"
    wrappers = _cargo_wrapper(tmp_path / "wrapped")
    proc = _bench(
        hello,
        MINIMAL,
        PATH=_path_with(wrappers, hello), PGO_TEST="1",
        BREAK="remove", BREAK_COMMAND="test", BREAK_FLAG="profile-use", BREAK_BINARY=str(checked),
    )  # fmt: skip
    assert_refused(proc, f"the pipeline left no checked optimised binary in {hello.work}", "report.json")
    recorded = report.load(hello.work)
    assert isinstance(optimised := recorded.optimise, OptimiseResult)  # the pipeline passed
    assert isinstance(tested := recorded.test, TestResult) and tested.failed_check is None
    assert optimised.binary == checked and not checked.exists()
    assert recorded.plain is None and not (hello.work / "plain-target").exists()
    assert not (hello.work / "bench").exists()


#: bare-server's training instance, and a bench instance of it whose readiness URL is a path it answers with 404
NOT_READY_WORKLOAD = """
[workload]
description = "bare-server with a readiness URL it does not serve"

[[instance]]
name = "srv"
mode = "server"
args = ["{http_port}"]
exit_on_sigterm = true

[[instance.phase]]
name = "square"
kind = "http"
protocol = "h1"
path = "/square/12345"
requests = 10

[[bench.instance]]
name = "wrong-ready"
mode = "server"
args = ["{http_port}"]
ready = "http://127.0.0.1:{http_port}/ready"
exit_on_sigterm = true

[[bench.scenario]]
name = "square"
instance = "wrong-ready"
kind = "http"
protocol = "h1"
path = "/square/12345"
requests = 20
connections = 1
"""


@pytest.mark.refuses("bench-server-does-not-answer-readiness-url")
def test_bench_server_that_does_not_answer_its_readiness_url_with_200_refused(
    bare_server: Path, tmp_path: Path
) -> None:
    """Both builds given (no build); the first server started answers the readiness URL with 404 (steadily, so
    the bench gives up before the ready_timeout): the scenario is invalid, the run fails naming the server and
    the URL, and the other server is never started."""
    workload = tmp_path / "not-ready.toml"
    workload.write_text(NOT_READY_WORKLOAD)
    p = Pipeline(tmp_path, "bare-server", workload=str(workload))
    proc = _bench(
        p,
        ["--baseline", str(bare_server), "--candidate", str(bare_server), "--scenarios", "square", "--trials", "1",
         "--no-coverage"],
    )  # fmt: skip
    frozen = p.work / "bench" / "bin" / "baseline-bare-server"
    line = assert_refused(
        proc,
        "1 of 1 scenarios invalid, first square:",
        f"baseline ({frozen}) answered http://127.0.0.1:",
        "/ready with 404 Not Found for ",
        " s, expected 200",
    )
    assert "within 60 s" not in line  # it gave up after a few seconds of the same answer, and says so
    assert "candidate (" not in line
    results = json.loads((p.work / "bench" / "results.json").read_text())
    (scenario,) = results["scenarios"]
    assert scenario["valid"] is False and scenario["trials"] == []
    assert "expected 200" in scenario["problem"]
    runs = p.work / "bench" / "runs" / "square"
    assert (runs / "baseline.log").is_file() and not (runs / "candidate.log").exists()
    assert "Invalid scenarios:" in (p.work / "bench" / "results.md").read_text()


@pytest.mark.refuses("trial-too-short-for-kernel-count-any")
def test_bench_trials_too_short_to_measure_are_invalid_not_a_traceback(bare_server: Path, tmp_path: Path) -> None:
    """Two requests to a tiny server take far less CPU than one clock tick: no CPU time per request to compare,
    and the report divided by zero. Now such a trial is invalid, and the run fails in one line."""
    workload = tmp_path / "short.toml"
    workload.write_text(NOT_READY_WORKLOAD.replace("/ready", "/health").replace("requests = 20", "requests = 2"))
    p = Pipeline(tmp_path, "bare-server", workload=str(workload))
    proc = _bench(
        p,
        ["--baseline", str(bare_server), "--candidate", str(bare_server), "--scenarios", "square", "--trials", "1",
         "--no-coverage"],
    )  # fmt: skip
    line = assert_refused(proc, "1 of 1 scenarios invalid, first square:", "used no CPU time the kernel counts")
    assert "raise --scale" in line
