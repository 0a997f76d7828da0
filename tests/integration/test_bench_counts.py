"""``nox -s bench -- --measure counts`` on the hello fixture's command scenarios (real valgrind, real builds):
the figures, two runs giving the same ones, the gate passing and failing, a scenario too short for a figure, a
binary valgrind cannot run, valgrind missing; and on tests/fixtures/bare-server (a server under callgrind, the
requests alone counted)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.workload import BUILTIN_PROFILES
from tests.conftest import Pipeline, assert_ok, assert_refused, written_records

pytestmark = pytest.mark.slow

FIGURES = ("instructions", "i1_misses", "ll_misses", "cond_mispredicts", "ind_mispredicts", "estimate")


def _results(pipeline: Pipeline) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pipeline.work / "bench" / "results.json").read_text())
    return data


def _medians(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, float]]:
    return {(s["name"], b): m for s in results["scenarios"] for b, m in s["medians"].items()}


@pytest.mark.refuses("counted-trial-under-1-000-000-instructions", "counts-gate-candidate-not-better-baseline-margin")
def test_counts_of_the_command_scenarios(hello: Pipeline, tmp_path: Path) -> None:
    cheap = ("--measure", "counts", "--trials", "2", "--scale", "0.05")  # one run per trial
    once = ("--measure", "counts", "--trials", "1", "--scale", "0.05")  # counts repeat exactly: one trial will do
    text = assert_ok(hello.nox("bench", *cheap))
    assert "bench: collatz: " in text and "(counts: 2 trials of 1 run under valgrind, 2 builds)" in text  # not 1 runs
    results = _results(hello)
    assert results["measure"] == "counts" and results["valgrind"]["version"].startswith("valgrind-3.")
    assert "--branch-sim=yes" in results["valgrind"]["cachegrind"]
    assert results["weights"] == {"instruction": 0.5, "l1_miss": 10.0, "ll_miss": 35.0, "mispredict": 17.0}
    by_name = {s["name"]: s for s in results["scenarios"]}
    assert list(by_name) == ["collatz", "primes-held-out", "collatz-held-out"]
    assert results["design"]["orders"] == [["baseline", "candidate"], ["candidate", "baseline"]]
    for scenario in by_name.values():
        assert scenario["valid"], scenario["problem"]
        assert [(t["build"], t["index"]) for t in scenario["trials"]] == [
            ("baseline", 1),
            ("candidate", 1),
            ("candidate", 2),
            ("baseline", 2),
        ]  # fmt: skip  (one design for both measures: the order rotated each round)
        for trial in scenario["trials"]:
            assert trial["done"] == 1 and len(trial["files"]) == 1 and Path(trial["files"][0]).is_file()
            assert trial["per_unit"]["instructions"] > 1_000_000
        for build in ("baseline", "candidate"):
            assert scenario["spreads"][build]["estimate"] < 0.001  # commands: the same counts every time
    # the held-out primes sieve does more work per run than the trained collatz 3000
    medians = _medians(results)
    assert (
        medians[("primes-held-out", "baseline")]["instructions"] > 10 * medians[("collatz", "baseline")]["instructions"]
    )
    markdown = (hello.work / "bench" / "results.md").read_text()
    assert "| collatz 3000 (as trained) (per run) | trained | plain |" in markdown
    assert "What the counts cannot show:" in markdown
    assert (hello.work / "bench" / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "collatz            estimate" in text and "spread" in text

    # the same builds again, given by path (no build): the same figures within 0.1 %
    plain, pgo = results["baseline_origin"], results["candidate_origin"]
    given = ("--baseline", plain, "--candidate", pgo, "--baseline-label", "plain", "--candidate-label", "PGO")
    assert_ok(hello.nox("bench", *once, *given))
    again = _medians(_results(hello))
    for key, figures in medians.items():
        for figure in FIGURES:
            assert again[key][figure] == pytest.approx(figures[figure], rel=0.001, abs=1), (key, figure)

    # the gate, by the estimate: margins on either side of what was measured
    trained = by_name["collatz"]["comparisons"][0]["differences"]["estimate"]
    worst_held = max(by_name[n]["comparisons"][0]["differences"]["estimate"] * 100 for n in by_name if n != "collatz")
    # the PGO build as the baseline, the plain one as the candidate when PGO lost: the trained gate needs a gain
    order = given if trained < 0 else ("--baseline", pgo, "--candidate", plain)
    gain = 100 * (-trained if trained < 0 else 1 - 1 / (1 + trained))  # the loser against the winner, or not
    assert gain > 0.5, "the two builds count alike on collatz: the gate has nothing to decide"
    passed = assert_ok(
        hello.nox("bench", *once, *order, "--scenarios", "collatz", "--gate-trained", f"{gain - 0.5:.2f}")
    )
    assert "gate passed:" in passed
    gate = _results(hello)["gate"]
    assert gate["trained_percent"] == pytest.approx(gain - 0.5, abs=0.01) and gate["verdicts"][0].startswith(
        "gate passed"
    )
    proc = hello.nox("bench", *once, *order, "--scenarios", "collatz", "--gate-trained", f"{gain + 0.5:.2f}")
    line = assert_refused(proc, "counts gate:", "on trained scenario collatz", "not at least")
    assert "Gate (by the estimate):" in (hello.work / "bench" / "results.md").read_text()  # written before it failed
    assert line.count("counts gate:") == 1
    held = ("--scenarios", "primes-held-out,collatz-held-out")
    assert_ok(hello.nox("bench", *once, *given, *held, "--gate-held-out", f"{max(worst_held, 0) + 0.5:.2f}"))
    if worst_held > 0.5:
        proc = hello.nox("bench", *once, *given, *held, "--gate-held-out", f"{worst_held - 0.5:.2f}")
        assert_refused(proc, "counts gate:", "held-out scenario", "worse by more than")

    # a profile-use knob measured: the work dir's profile built again with -disable-icp, a third build
    text = assert_ok(hello.nox("bench", "--measure", "counts", "--trials", "1", "--scale", "0.05",
                               "--profile-use-args=-disable-icp"))  # fmt: skip
    knob = _results(hello)
    assert [b["label"] for b in knob["builds"]] == ["plain", "PGO", "PGO -disable-icp"]
    assert knob["builds"][1]["origin"] == pgo and "/variant-target/disable-icp/" in knob["builds"][2]["origin"]
    variant_log = (hello.work / "logs" / "bench-variant-disable-icp-build.log").read_text()
    assert "-Cllvm-args=-disable-icp" in variant_log and "-Cprofile-use=" in variant_log
    # the bench built it: what compiled its C is known (hello has none), as for the plain and the PGO build
    assert [b["c_compilers"] for b in knob["builds"]] == ["no C", "no C", "no C"]
    assert "not known (a binary given by path)" not in (hello.work / "bench" / "results.md").read_text()
    assert "best by the estimate on the 2 held-out scenarios: " in text
    assert "held-out scenarios: " in (hello.work / "bench" / "results.md").read_text()

    # the training's other profile beside the PGO build: the PGO build read the partial one, so the whole one
    assert_ok(hello.nox("bench", *once, "--scenarios", "collatz", "--both-profiles"))
    both = _results(hello)
    assert [b["label"] for b in both["builds"]] == ["plain", "PGO", "PGO whole"]
    assert both["builds"][1]["origin"] == pgo and "/variant-target/profile-whole/" in both["builds"][2]["origin"]
    optimised = written_records(hello.work)["optimise"]
    assert optimised["partial"] is True
    whole_log = (hello.work / "logs" / "bench-variant-profile-whole-build.log").read_text()
    assert f"-Cprofile-use={hello.store / (optimised['whole_profile_sha256'] + '.profdata')}" in whole_log

    # a scenario too short for a figure: one line
    workload = tmp_path / "short.toml"
    workload.write_text(
        (BUILTIN_PROFILES / "hello.toml").read_text()
        + '\n[[bench.scenario]]\nname = "tiny"\ninstance = "cli"\nkind = "command"\nargs = ["words", "a"]\nruns = 1\n'
    )
    proc = hello.nox("bench", *once, *given, "--scenarios", "tiny", PGO_WORKLOAD=str(workload))
    assert_refused(proc, "scenarios invalid, first tiny:", "too short for a figure", "under 1,000,000")


@pytest.mark.refuses("build-uses-instruction-valgrind-does-not-know")
def test_a_binary_valgrind_cannot_run_is_refused(hello: Pipeline, tmp_path: Path) -> None:
    """A binary with an AVX-512 instruction (what a target-cpu build emits): valgrind 3.19 raises SIGILL in it."""
    source = tmp_path / "avx.c"
    source.write_text('int main(void) { __asm__ volatile("vpxord %%zmm1, %%zmm1, %%zmm1" ::: "xmm1"); return 0; }\n')
    binary = tmp_path / "avx512"
    subprocess.run(["gcc", "-O1", "-o", str(binary), str(source)], check=True)
    proc = hello.nox(
        "bench", "--measure", "counts", "--baseline", shutil.which("true") or "/bin/true", "--candidate", str(binary),
        "--scenarios", "collatz", "--trials", "1", "--scale", "0.05",
    )  # fmt: skip
    line = assert_refused(proc, "candidate: valgrind-3.", "does not know an instruction the binary uses", "AVX-512")
    assert "--measure cpu" in line and "0x62" in line


@pytest.mark.refuses("measure-counts-without-valgrind-callgrind-control-for")
def test_valgrind_missing_is_one_line_naming_the_package(hello: Pipeline, tmp_path: Path) -> None:
    """Every program of the PATH but valgrind's: refused before anything is installed or built."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not Path(directory).is_dir():
            continue
        for entry in Path(directory).iterdir():
            if "valgrind" not in entry.name and "callgrind" not in entry.name and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry)
    proc = hello.nox("bench", "--measure", "counts", PATH=str(bin_dir))
    assert_refused(proc, "valgrind is not on the PATH", "install the Debian package valgrind")
    assert not hello.work.exists()


BARE_WORKLOAD = """
[workload]
description = "bare-server under callgrind"
min_functions = 1

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
requests = 100

[[bench.scenario]]
name = "square"
instance = "srv"
kind = "http"
protocol = "h1"
path = "/square/12345"
requests = 2000
connections = 4
"""


def test_counts_of_a_server_only_its_requests(tmp_path: Path) -> None:
    """bare-server (a thread per connection, no SIGTERM handler) under callgrind: warm-up and start-up not counted,
    the requests alone, repeatable to well under 1 % (the same binary as both builds: the same figures)."""
    pipeline = Pipeline(tmp_path, "bare-server", workload=str(tmp_path / "bare.toml"))
    (tmp_path / "bare.toml").write_text(BARE_WORKLOAD)
    subprocess.run(
        ["cargo", "build", "--release", "-q", "--manifest-path", str(pipeline.manifest)], check=True, env=pipeline.env()
    )
    binary = pipeline.crate_dir / "target" / "release" / "bare-server"
    proc = pipeline.nox(
        "bench", "--measure", "counts", "--baseline", str(binary), "--candidate", str(binary),
        "--baseline-label", "one", "--candidate-label", "two", "--trials", "3", "--scale", "1",
    )  # fmt: skip
    assert_ok(proc)
    scenario = _results(pipeline)["scenarios"][0]
    assert scenario["valid"], scenario["problem"]
    assert scenario["unit"] == "request"
    assert len(scenario["trials"]) == 6
    for trial in scenario["trials"]:
        assert trial["done"] == 2000 and len(trial["files"]) == 1
        dump = Path(trial["files"][0]).read_text()
        assert f"desc: Trigger: dump {trial['build']}-trial-{trial['index']}" in dump
        # what the server does per request (parse a request line, headers, format an answer): thousands of
        # instructions, not the millions of its start-up and of valgrind's
        assert 500 < trial["per_unit"]["instructions"] < 100_000
        # the server's own binary apart from libc: most of what the server executes, and what the gate judges
        assert 0.3 < trial["per_unit"]["binary_instructions"] / trial["per_unit"]["instructions"] < 1
    assert scenario["judged"] == "binary_estimate"
    for build in ("baseline", "candidate"):
        spreads = scenario["spreads"][build]
        # instructions repeat to 0.1 %; the estimate moves with a few last-level misses (35 cycles each) of the
        # stacks of the threads it starts for each connection: measured 0.7-1.0 %
        assert spreads["instructions"] < 0.001 and spreads["binary_instructions"] < 0.001, spreads
        assert spreads["estimate"] < 0.03 and spreads["binary_estimate"] < 0.03, spreads
    difference = scenario["comparisons"][0]["differences"]["instructions"]
    assert abs(difference) < 0.01  # the same binary twice


@pytest.mark.refuses("callgrind-control-cannot-zero-dump-server")
def test_callgrind_control_on_a_process_not_under_valgrind_is_refused(tmp_path: Path) -> None:
    from recipes.bench.counting import Tools, _control  # noqa: PLC0415
    from recipes.bench.servers import Server  # noqa: PLC0415
    from recipes.bench.settings import Build  # noqa: PLC0415
    from recipes.errors import BenchError  # noqa: PLC0415
    from recipes.procs import Child  # noqa: PLC0415

    control = shutil.which("callgrind_control")
    valgrind = shutil.which("valgrind")
    assert control and valgrind
    child = Child.start(["sleep", "30"], env=dict(os.environ), log=tmp_path / "sleep.log")
    try:
        server = Server(Build("plain", Path("/bin/sleep")), child, 0, 0, tmp_path / "sleep.log", tmp_path)
        with pytest.raises(BenchError) as refused:
            tools = Tools(Path(valgrind), Path(control), "valgrind-3.19.0")
            _control(tools, server, "--zero", env=dict(os.environ))
        assert refused.value.line().startswith(f"callgrind_control --zero {child.pid} (plain) failed: ")
        assert "needs vgdb" in refused.value.line()
    finally:
        child.kill()


@pytest.mark.refuses("gate-no-scenario-kind-among-those-chosen")
def test_a_gate_without_its_scenarios_is_refused_before_anything_is_built(hello: Pipeline) -> None:
    proc = hello.nox("bench", "--measure", "counts", "--scenarios", "primes-held-out", "--gate-trained", "1")
    assert_refused(proc, "--gate-trained 1: none of the scenarios measured is trained", "--scenarios")
    assert not hello.work.exists()
