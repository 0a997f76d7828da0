"""``nox -s bench`` of a server (a plain release build of tests/fixtures/bare-server on loopback, given as both
builds): results.md, the summary and the chart in a server's words and units, the busy check per trial, the
rotated order of three builds, a declared held-out marking; and the refusal of a ``held_out`` that is no boolean.
The command workload's words are checked in tests/integration/test_bench.py (hello)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recipes.bench import cpu_report as report_lib
from recipes.bench import design
from tests.conftest import Pipeline, assert_ok, assert_refused
from tests.integration.test_rare_bench_refusals import _bench

pytestmark = pytest.mark.slow

#: bare-server, its training of one path, and two bench scenarios: one by the path rule (trained), one declared
#: held out although its path is trained (a user means the request's shape). Pipelined over 4 connections, so the
#: server's core is kept busy, and enough requests that a trial's server CPU time spans several of the kernel's
#: 10 ms ticks (4,000 could end before the first: the trial invalid, as it should be, and the test failed).
WORKLOAD = """
[workload]
description = "bare-server, two bench scenarios"

[[instance]]
name = "srv"
mode = "server"
args = ["{http_port}"]
ready = "http://127.0.0.1:{http_port}/health"
exit_on_sigterm = true

[[instance.phase]]
name = "square"
kind = "http"
protocol = "h1"
path = "/square/12345"
requests = 10

[[bench.scenario]]
name = "square"
title = "a square"
instance = "srv"
kind = "http"
protocol = "h1"
path = "/square/12345"
requests = 12000
connections = 4
streams = 8

[[bench.scenario]]
name = "square-declared"
title = "a square, declared held out"
instance = "srv"
kind = "http"
protocol = "h1"
path = "/square/12345"
held_out = true
requests = 12000
connections = 4
streams = 8
"""


def test_a_server_bench_speaks_of_requests_and_rotates_three_builds(bare_server: Path, tmp_path: Path) -> None:
    workload = tmp_path / "words.toml"
    workload.write_text(WORKLOAD)
    p = Pipeline(tmp_path, "bare-server", workload=str(workload))
    proc = _bench(
        p,
        ["--baseline", str(bare_server), "--candidate", str(bare_server), "--candidate", str(bare_server),
         "--baseline-label", "release", "--candidate-label", "again", "--candidate-label", "third",
         "--trials", "3", "--no-coverage"],
    )  # fmt: skip
    results = json.loads((p.work / "bench" / "results.json").read_text())
    markdown = (p.work / "bench" / "results.md").read_text()
    text = proc.stdout + proc.stderr
    by_name = {s["name"]: s for s in results["scenarios"]}
    orders = [["baseline", "candidate", "candidate-2"], ["candidate", "candidate-2", "baseline"]]
    orders.append(["candidate-2", "baseline", "candidate"])
    assert results["design"] == {"name": "rotation", "description": design.DESIGN_TEXT, "orders": orders}
    for scenario in by_name.values():
        assert [[t["build"] for t in scenario["trials"]][i : i + 3] for i in (0, 3, 6)] == orders
        # the server's CPU per wall second of every trial, judged against the threshold
        assert len(scenario["server_busy"]) == 9 and all(0 <= b <= 1.5 for b in scenario["server_busy"]), scenario
        assert scenario["busy_min"] == design.BUSY_MIN and scenario["min_ticks"] == design.MIN_TICKS
        assert scenario["held_out"]["rule"] == ("declared" if scenario["name"] == "square-declared" else "paths")
    assert by_name["square-declared"]["held_out"]["status"] == "held-out"
    assert by_name["square"]["held_out"]["status"] == "trained"
    if any(not s["valid"] for s in by_name.values()):  # a loaded machine: said in one line naming the fix
        line = assert_refused(proc, "scenarios invalid")
        # the server kept waiting, or a trial over before the kernel's first 10 ms tick of the server's CPU time
        assert ("the server was not kept busy" in line and "h2load -m" in line) or (
            "used no CPU time the kernel counts" in line and "raise --scale" in line
        ), line
        return
    assert_ok(proc)
    assert markdown.startswith("# CPU time per request: again, third vs release\n")
    assert "(release, again, third / again, third, release / third, release, again)" in markdown
    assert "server on core" in markdown and "load generator (h2load) on core" in markdown
    assert "| a square (per request) | trained (paths) | release |" in markdown
    assert "| a square, declared held out (per request) | held-out (declared) | release |" in markdown
    assert "| scenario | server | server per trial | load generator (h2load) |" in markdown
    assert "per run" not in markdown and "the runs" not in markdown
    assert re.search(r"\| release \| [\d,.]+ µs \| [\d,.]+ µs \| [\d,.]+ µs \|", markdown), markdown
    summary = [line for line in text.splitlines() if line.startswith("nox > square")]
    assert len(summary) == 4 and sum("[again]" in line for line in summary) == 2, summary
    assert all("µs/request" in line and " = user " in line for line in summary), summary
    assert "[candidate" not in text and "runs" not in "\n".join(summary)
    assert "uv binary not found" not in text.split("Running session bench", 1)[1]
    xlabel, _ = report_lib.chart_texts(*report_lib.from_json(results))
    assert xlabel == "CPU time per request, again, third vs release: change, % of release's total"
    assert (p.work / "bench" / "chart.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.refuses("scenario-held-out-not-true-false")
def test_a_held_out_that_is_not_a_boolean_is_refused_before_anything_runs(tmp_path: Path) -> None:
    workload = tmp_path / "bad.toml"
    workload.write_text(WORKLOAD.replace("held_out = true", 'held_out = "yes"'))
    p = Pipeline(tmp_path, "bare-server", workload=str(workload))
    proc = _bench(p, ["--baseline", "/bin/true", "--candidate", "/bin/true", "--no-coverage"])
    assert_refused(
        proc, f"{workload} [bench] [[scenario]] 'square-declared': held_out: expected true or false, got str 'yes'"
    )
    assert not (p.work / "bench").exists()
