"""``nox -s bench`` and ``nox -s plain`` on the hello fixture: command scenarios declared in its workload
(profiles/hello.toml), the builds bench makes by default, the coverage check, and the refusals.

The benchmark of a server, on the demo server, is in tests/e2e/test_bench.py (it needs the shared ``demo_pgo``
build).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from recipes.bench import cpu_report as report_lib
from recipes.workload import BUILTIN_PROFILES
from tests.conftest import Pipeline, assert_ok, assert_refused

pytestmark = pytest.mark.slow

FLAGS = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"


@pytest.mark.refuses("plain-build-would-get-other-rustflags-pgo", "plain-build-would-differ-another-setting")
def test_plain_then_bench_of_a_command_line_tool(hello: Pipeline) -> None:
    """`nox -s plain` builds the plain binary; `nox -s bench` runs the pipeline for the PGO one, takes the plain
    one, runs hello's two command scenarios (one as trained, one held out) interleaved, user and system time
    apart, and the coverage check on a real merged profile."""
    text = assert_ok(hello.nox("plain", **{FLAGS: "-Cdebuginfo=1"}))
    plain_binary = hello.work / "plain-target" / "x86_64-unknown-linux-gnu" / "release" / "hello-pgo"
    assert str(plain_binary) in text
    assert "pgo: the plain build of hello-pgo in" in text and "pgo: bench:" not in text  # one prefix a session
    assert "uv binary not found" not in text.split("Running session plain", 1)[1]  # the session's venv: no uv hunt
    recorded = json.loads((hello.work / "report.json").read_text())["plain"]
    assert recorded["binary"] == str(plain_binary) and recorded["rustflags"] == "-Cdebuginfo=1"
    plain_log = (hello.work / "logs" / "bench-plain-build.log").read_text()
    main_line = next(line for line in plain_log.splitlines() if "--crate-name hello_pgo" in line)
    assert "profile-use" not in main_line and "profile-generate" not in main_line
    assert "--target x86_64-unknown-linux-gnu" in main_line
    assert "-Cdebuginfo=1" in main_line  # the base flags both builds share

    summary = assert_ok(hello.nox("bench", "--trials", "2", "--scale", "0.25", **{FLAGS: "-Cdebuginfo=1"}))
    report = json.loads((hello.work / "report.json").read_text())
    assert "optimise" in report and "plain" in report  # the pipeline ran for the candidate
    results = json.loads((hello.work / "bench" / "results.json").read_text())
    assert results["baseline_label"] == "plain" and results["candidate_label"] == "PGO"
    assert results["baseline_origin"] == str(plain_binary)
    assert results["candidate_origin"] == report["optimise"]["binary"]
    assert results["candidate_sha256"] == report["optimise"]["binary_sha256"]
    assert results["baseline_sha256"] != results["candidate_sha256"]
    assert Path(results["baseline"]).parent == hello.work / "bench" / "bin"
    by_name = {s["name"]: s for s in results["scenarios"]}
    assert list(by_name) == ["collatz", "primes-held-out", "collatz-held-out"]
    assert by_name["collatz"]["held_out"] == {"status": "trained", "trained": 1, "total": 1, "rule": "arguments"}
    assert by_name["primes-held-out"]["held_out"]["status"] == "held-out"
    assert results["design"]["name"] == "rotation"
    assert results["design"]["orders"] == [["baseline", "candidate"], ["candidate", "baseline"]]
    for scenario in by_name.values():
        assert scenario["valid"] is True, scenario["problem"]
        assert scenario["unit"] == "run"
        assert [(t["build"], t["index"]) for t in scenario["trials"]] == [
            ("baseline", 1), ("candidate", 1), ("candidate", 2), ("baseline", 2)
        ]  # fmt: skip
        assert scenario["server_busy"] is None and scenario["not_busy_trials"] == []  # a command waits on nobody
        for trial in scenario["trials"]:
            assert trial["answered"] == trial["requests"] == 5  # 20 runs at --scale 0.25
            assert trial["us_per_request"] > 0 and trial["user_us"] > 0 and trial["system_us"] >= 0
        medians = scenario["medians"]["baseline"]
        assert medians["user_us"] + medians["system_us"] == pytest.approx(medians["total_us"], abs=0.002)
    coverage = results["coverage"]
    assert 0 < coverage["overlap_percent"] <= 100
    assert Path(coverage["bench_profile"]).is_file()
    assert coverage["bench_functions"] > 5 and coverage["problems"] == []
    markdown = (hello.work / "bench" / "results.md").read_text()
    assert "| primes below 2,000,000 (held out) (per run) | held-out (arguments) | plain |" in markdown
    assert "## Training coverage of the bench" in markdown
    assert markdown.startswith("# CPU time per run: PGO vs plain\n")
    assert (
        "the builds' order rotated each round, round r starting r - 1 places on (plain, PGO / PGO, plain)" in markdown
    )
    assert "the command's runs on core" in markdown and "| the runs | harness | harness per run |" in markdown
    for server_word in ("load generator", "h2load", "server in user space", "per request", "requests"):
        assert server_word not in markdown, server_word
    assert re.search(r"\| plain \| [\d,.]+ (µs|ms) \| [\d,.]+ (µs|ms) \| [\d,.]+ (µs|ms) \|", markdown), markdown
    # the summary: the labels, the parts that add up to the difference, runs; the trials' tick flag
    summary = "\n".join(line for line in summary.splitlines() if re.match(r"nox > (collatz|primes|  +flagged)", line))
    parts = r"[+\u2212][\d.]+ % = user [+\u2212][\d.]+ % \+ system [+\u2212][\d.]+ %"
    assert re.search(rf"collatz +{parts} of plain's [\d,.]+ (µs|ms)/run", summary), summary
    assert summary.count("[PGO]") == 3 and "[candidate]" not in summary and "request" not in summary
    # 5 runs of hello a trial take well under a second of CPU: flagged, with the count that would do
    assert "flagged: " in summary and " runs per trial would do" in summary, summary
    assert "Flagged trials (the figures stand, read them with this):" in markdown
    chart_words = report_lib.chart_texts(*report_lib.from_json(results))
    assert chart_words[0] == "CPU time per run, PGO vs plain: change, % of plain's total"
    assert (hello.work / "bench" / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # three builds at once, given by path: no build; one of them is the work dir's PGO binary, so the coverage
    # check runs against its training
    pgo = report["optimise"]["binary"]
    proc = hello.nox(
        "bench",
        "--baseline", str(plain_binary),
        "--candidate", pgo, "--candidate", pgo,
        "--candidate-label", "PGO", "--candidate-label", "PGO again",
        "--scenarios", "primes-held-out", "--trials", "3", "--scale", "0.1",
    )  # fmt: skip
    assert_ok(proc)
    again = json.loads((hello.work / "bench" / "results.json").read_text())
    assert [b["label"] for b in again["builds"]] == ["baseline", "PGO", "PGO again"]
    assert [t["build"] for t in again["scenarios"][0]["trials"]] == [
        "baseline", "candidate", "candidate-2",
        "candidate", "candidate-2", "baseline",
        "candidate-2", "baseline", "candidate",
    ]  # fmt: skip
    assert "[PGO again]" in proc.stdout + proc.stderr and "[candidate-2]" not in proc.stdout + proc.stderr
    assert again["coverage"]["problems"] == [] and 0 < again["coverage"]["overlap_percent"] <= 100

    # none of the candidates is the work dir's PGO binary: its training says nothing about them, no coverage check
    proc = hello.nox(
        "bench", "--baseline", pgo, "--candidate", str(plain_binary),
        "--scenarios", "primes-held-out", "--trials", "1", "--scale", "0.1",
    )  # fmt: skip
    assert_ok(proc)
    skipped = json.loads((hello.work / "bench" / "results.json").read_text())["coverage"]["skipped"]
    assert "given by path and none is the work dir's PGO binary" in skipped

    # the PGO binary of the work dir was built with other flags than a plain build now would be: refused
    proc = hello.nox("bench", "--scenarios", "collatz", **{FLAGS: "-Cdebuginfo=2"})
    assert_refused(proc, "the plain build would get the rustflags '-Cdebuginfo=2'", "'-Cdebuginfo=1' besides")
    # the same flags, for another target: the work dir's records are of another target (recipes/claim.py)
    musl = {
        "PGO_TARGET": "x86_64-unknown-linux-musl",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS": "-Cdebuginfo=1",
    }
    assert_refused(
        hello.nox("bench", "--scenarios", "collatz", **musl),
        "target x86_64-unknown-linux-gnu, features none), not of hello-pgo (bin hello-pgo,",
        "target x86_64-unknown-linux-musl, features none)",
    )


@pytest.mark.refuses("workload-declares-no-bench-scenario")
def test_a_workload_without_scenarios_is_refused_before_anything_is_built(hello: Pipeline) -> None:
    text = (BUILTIN_PROFILES / "hello.toml").read_text()
    bare = hello.root / "bare.toml"
    bare.write_text(text[: text.index("# Bench scenarios")])
    line = assert_refused(
        hello.nox("bench", PGO_WORKLOAD=str(bare)), "declares no bench scenario", "add a [[bench.scenario]] table"
    )
    assert str(bare) in line
    assert not hello.work.exists()


@pytest.mark.refuses("bad-session-argument", "scenarios-names-unknown-scenario-none")
def test_a_bad_argument_is_refused_before_anything_runs(hello: Pipeline) -> None:
    assert_refused(hello.nox("bench", "--scenarios", "cached-5k-h3"), "unknown scenario 'cached-5k-h3'", "collatz")
    assert_refused(hello.nox("bench", "--trials", "0"), "--trials", "not a positive integer")
    assert not hello.work.exists()


@pytest.mark.refuses("two-builds-one-label")
def test_two_builds_of_one_label_are_refused_before_anything_runs(hello: Pipeline) -> None:
    true, false = shutil.which("true"), shutil.which("false")
    assert true and false
    proc = hello.nox(
        "bench", "--baseline", true, "--candidate", false, "--baseline-label", "x", "--candidate-label", "x"
    )
    assert_refused(proc, "two builds are labelled 'x'", "give --baseline-label or --candidate-label")
    assert not (hello.work / "bench" / "bin").exists()


@pytest.mark.refuses("given-binary-does-not-exist-not-executable")
def test_a_missing_binary_is_refused(hello: Pipeline, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tool"
    proc = hello.nox("bench", "--baseline", str(missing), "--candidate", str(missing))
    assert_refused(proc, "no such binary", str(missing))
    assert not hello.work.exists()  # refused before anything is installed or built
