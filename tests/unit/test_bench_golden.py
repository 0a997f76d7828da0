"""results.json and results.md written again from captured bench runs are the captured files, byte for byte.

The captures in tests/data/bench/golden are the files of real runs (``nox -s bench`` and
``nox -s bench -- --measure counts``): hello's three command scenarios (CPU time with its coverage check, counts
with and without a gate) and bare-server's HTTP scenario (CPU time and callgrind's counts, the same binary as both
builds; two candidates and a gate that fails). Each is read back as the bench reads a results.json, written by
the bench's writers, and compared: the harness's refactors keep what a run writes. results.json keeps seconds to
six places, so a figure derived from them can move in its last digit when read back: bare-cpu's JSON is the live
run's written once again (its canary drift and harness time per request, one digit each; its Markdown is the live
run's as it was), a fixed point of reading and writing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.bench import counts_report
from recipes.bench import cpu_report as report
from recipes.workdir import BenchDir
from tests.conftest import DATA

GOLDEN = DATA / "bench" / "golden"
RUNS = sorted(p.name.removesuffix("-results.json") for p in GOLDEN.glob("*-results.json"))


def _write(captured: dict[str, object], out: BenchDir) -> None:
    """The run's results, read back, written as the bench writes them after each scenario."""
    if captured.get("measure") == "counts":
        counts, meta = counts_report.from_json(captured)
        report.write_results(out, counts, meta, counts_report.markdown, counts_report.HEADING)
    else:
        cpu, meta = report.from_json(captured)
        report.write_results(out, cpu, meta, report.markdown)


def test_every_measure_and_kind_is_captured() -> None:
    assert RUNS == ["bare-counts", "bare-cpu", "hello-counts", "hello-counts-gated", "hello-cpu"]


@pytest.mark.parametrize("run", RUNS)
def test_results_are_written_again_byte_for_byte(run: str, tmp_path: Path) -> None:
    json_bytes = (GOLDEN / f"{run}-results.json").read_bytes()
    out = BenchDir(tmp_path)
    out.results_json.parent.mkdir(parents=True, exist_ok=True)
    _write(json.loads(json_bytes), out)
    assert out.results_json.read_bytes() == json_bytes
    assert out.results_md.read_bytes() == (GOLDEN / f"{run}-results.md").read_bytes()
