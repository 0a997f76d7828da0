"""``nox -s bench`` on the demo server's PGO binary (the shared ``demo_pgo`` build), at tiny trial sizes: server
scenarios declared in profiles/demo-server.toml.

The binary is compared with itself: two servers of one build, interleaved, measured like two builds.
One scenario proxies to a dead upstream, so its every trial gets 502 where 2xx is expected: the trials
are invalid, the scenario says so, the session fails, and everything is written all the same.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from recipes.web import net
from tests.conftest import assert_ok, assert_refused, clean_env, run_nox
from tests.e2e.conftest import DemoPgo

pytestmark = [pytest.mark.slow, pytest.mark.server]

TRIALS = 2


@pytest.mark.refuses("scenario-invalid")
def test_bench_two_servers_interleaved_and_a_dead_upstream_refused(demo_pgo: DemoPgo, tmp_path: Path) -> None:
    (dead_port,) = net.free_ports(1)
    work = tmp_path / "work"
    proc = run_nox(
        "bench",
        clean_env({"PGO_OUT": str(work)}),
        [
            "--baseline",
            str(demo_pgo.binary),
            "--candidate",
            str(demo_pgo.binary),
            "--baseline-label",
            "PGO",
            "--candidate-label",
            "PGO again",
            "--scenarios",
            "static-5k,tls-handshake,proxied-5k",
            "--trials",
            str(TRIALS),
            "--scale",
            "0.02",
            "--upstream",
            f"http://127.0.0.1:{dead_port}",
        ],
        timeout=600,
    )
    line = assert_refused(proc, "1 of 3 scenarios invalid, first proxied-5k", "expected all 2xx", "5xx")
    assert "see " in line
    bench = work / "bench"
    results = json.loads((bench / "results.json").read_text())
    by_name = {s["name"]: s for s in results["scenarios"]}
    assert list(by_name) == ["static-5k", "tls-handshake", "proxied-5k"]
    assert results["baseline_sha256"] == results["candidate_sha256"]
    cores = sorted(os.sched_getaffinity(0))  # the defaults on any machine: the last core serves, the first loads
    assert (results["server_core"], results["load_core"]) == (cores[-1], cores[0])

    dead = by_name["proxied-5k"]
    assert dead["valid"] is False
    assert len(dead["trials"]) == 2 * TRIALS
    for trial in dead["trials"]:
        assert trial["valid"] is False
        assert "5xx" in trial["problem"] and "expected all 2xx" in trial["problem"], trial
        assert trial["status"]["5xx"] == trial["requests"]

    for name in ("static-5k", "tls-handshake"):
        scenario = by_name[name]
        assert scenario["valid"] is True, scenario["problem"]
        trials = scenario["trials"]
        assert [(t["build"], t["index"]) for t in trials] == [
            ("baseline", 1),
            ("candidate", 1),
            ("candidate", 2),
            ("baseline", 2),
        ]  # in rounds, the order rotated each round
        for trial in trials:
            assert trial["answered"] == trial["requests"] >= 1
            assert trial["us_per_request"] > 0
            assert trial["status"] == {"2xx": trial["requests"], "3xx": 0, "4xx": 0, "5xx": 0}
            assert trial["load_cpu"] > 0
            # /proc counts CPU in clock ticks (10 ms): one short trial can see no user tick at all
            assert trial["user_us"] >= 0 and trial["system_us"] >= 0
            assert trial["user_us"] + trial["system_us"] == pytest.approx(trial["us_per_request"], abs=0.01)
        assert any(t["user_us"] > 0 for t in trials), trials  # the user-space part is measured
        assert scenario["paired_trials"] == TRIALS
        assert scenario["canary_before"] > 0 and scenario["canary_after"] > 0
        busy = scenario["overhead"]
        assert busy["harness"] < busy["load_generator"], busy  # the harness is not what limits the load

    # held out: the training requests /static/index.html and /health, never /page/bench
    assert [by_name[n]["held_out"]["status"] for n in by_name] == ["trained", "trained", "held-out"]
    assert "skipped" in results["coverage"]  # builds given by path: not the work dir's
    markdown = (bench / "results.md").read_text()
    assert results["design"]["orders"] == [["baseline", "candidate"], ["candidate", "baseline"]]
    assert "| proxied, no cache (per request) | held-out (paths) | invalid |" in markdown
    assert "| files from disk (per request) | trained (paths) | PGO |" in markdown
    assert "| | | PGO again |" in markdown
    assert "## Who was busy" in markdown
    assert (bench / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # each server was configured from the workload's bench instance (one worker), its scratch dir (the access
    # log) removed after the scenario
    config = (bench / "runs" / "static-5k" / "baseline.toml").read_text()
    assert "workers = 1" in config
    assert not (bench / "runs" / "static-5k" / "baseline").exists()


def test_the_coverage_check_of_a_server_scenario(demo_pgo: DemoPgo) -> None:
    """The work dir's PGO binary as the candidate: the scenario runs once on the work dir's instrumented server,
    its profile is merged and compared with the training's; the hottest untrained functions are demangled."""
    root = demo_pgo.work.parent
    env = clean_env(
        {
            "PGO_OUT": str(demo_pgo.work),
            "PGO_PROFILE_STORE": str(root / "store"),
            "CARGO_TARGET_DIR": str(root / "target"),
        }
    )
    posargs = ["--baseline", str(demo_pgo.binary), "--baseline-label", "PGO copy", "--scenarios", "cached-5k-h2"]
    proc = run_nox("bench", env, [*posargs, "--trials", "1", "--scale", "0.01"], timeout=600)
    text = assert_ok(proc)
    assert "coverage: edge profile overlap with the training" in text
    results = json.loads((demo_pgo.work / "bench" / "results.json").read_text())
    coverage = results["coverage"]
    assert coverage["problems"] == [], coverage
    assert 0 < coverage["overlap_percent"] < 100  # the bench's one path and protocol are not the training's mix
    assert Path(coverage["bench_profile"]).is_file()
    assert coverage["bench_functions"] > 1000
    hot = coverage["untrained_hot_functions"]
    assert len(hot) <= 10 and all(not f["function"].startswith("_ZN") and f["count"] > 0 for f in hot), hot
    assert results["scenarios"][0]["held_out"]["status"] == "held-out"


def test_counts_of_the_demo_server_repeat(demo_pgo: DemoPgo, tmp_path: Path) -> None:
    """`--measure counts` on a cached row, the demo PGO binary against itself: only the requests counted (between
    callgrind's zero and dump), the server's own binary apart from libc, both builds alike."""
    work = tmp_path / "work"
    proc = run_nox(
        "bench",
        clean_env({"PGO_OUT": str(work)}),
        ["--measure", "counts", "--baseline", str(demo_pgo.binary), "--candidate", str(demo_pgo.binary),
         "--baseline-label", "PGO", "--candidate-label", "PGO again", "--scenarios", "cached-5k-h1",
         "--trials", "2", "--scale", "0.03"],
        timeout=900,
    )  # fmt: skip
    assert_ok(proc)
    scenario = json.loads((work / "bench" / "results.json").read_text())["scenarios"][0]
    assert scenario["valid"], scenario["problem"]
    assert scenario["judged"] == "binary_estimate"
    for trial in scenario["trials"]:
        assert trial["done"] == 3000
        assert 2_000 < trial["per_unit"]["binary_instructions"] < trial["per_unit"]["instructions"] < 200_000
    # the binary's instructions repeat (measured 0.1-0.2 % apart at this size); its estimate less so: the misses
    # and mispredictions of its code move with glibc's allocator's paths between it (measured 1.0-2.3 %)
    for build in ("baseline", "candidate"):
        assert scenario["spreads"][build]["binary_instructions"] < 0.01, scenario["spreads"]
        assert scenario["spreads"][build]["binary_estimate"] < 0.05, scenario["spreads"]
    assert abs(scenario["comparisons"][0]["differences"]["binary_instructions"]) < 0.01
