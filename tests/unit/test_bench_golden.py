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
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from recipes.bench import counts_report
from recipes.bench import cpu_report as report
from recipes.bench.meta import HeldOutJson, Meta
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


def _section_heads(text: str) -> list[str]:
    """The start of each section of a results.md (its first line after a blank one, 30 characters)."""
    lines = text.splitlines()
    return [lines[i][:30] for i in range(1, len(lines)) if not lines[i - 1] and lines[i]]


CPU_SECTIONS = [
    "- baseline (plain): `/tmp/harn",
    "| scenario | held out (rule) |",
    "CPU time per run for a command",
    "Flagged trials (the figures st",
    "Invalid scenarios:",
    "## Training coverage of the be",
    "The scenarios run once on the ",
    "Every function the bench execu",
    "## Who was busy (CPU seconds p",
    "| scenario | the runs | harnes",
]
COUNTS_SECTIONS = [
    "- baseline (baseline): `/tmp/h",
    "| scenario | held out | build ",
    "Medians of the trials, per run",
    "What the counts cannot show:",
    "Best by the estimate on the 1 ",
    "Worse than the baseline by the",
    "Gate (by the estimate):",
    "Invalid scenarios:",
]


@pytest.mark.parametrize(("run", "expected"), [("hello-cpu", CPU_SECTIONS), ("hello-counts-gated", COUNTS_SECTIONS)])
def test_an_invalid_scenario_is_a_row_and_a_section_in_the_measures_order(run: str, expected: list[str]) -> None:
    """The one Markdown writer puts a scenario that could not run in the table as one row and lists why in its
    section: after the flagged trials and before the coverage for CPU time, last (after the gate) for the counts."""
    captured = json.loads((GOLDEN / f"{run}-results.json").read_bytes())
    captured["scenarios"][1]["scenario_problem"] = "the server did not start"
    if captured.get("measure") == "counts":
        counts, meta = counts_report.from_json(captured)
        text = counts_report.markdown(counts, meta)
    else:
        cpu, meta = report.from_json(captured)
        text = report.markdown(cpu, meta)
    title = captured["scenarios"][1]["title"]
    assert f"\n| {title} (per run) | " in text
    assert text.count("| invalid | — |") == 1
    assert f"Invalid scenarios:\n- {title}: invalid: the server did not start\n" in text
    assert _section_heads(text) == expected


def _misfits(value: object, kind: object, where: str) -> list[str]:
    """Where ``value`` (a captured results.json's) is not what ``kind`` (a record of recipes.bench.meta) declares:
    a key it does not declare, or a value of another type."""
    if is_typeddict(kind):
        if not isinstance(value, dict):
            return [f"{where} is {type(value).__name__}, not an object"]
        hints = get_type_hints(kind)
        problems = [f"{where}.{key} is not declared" for key in value if key not in hints]
        return problems + [
            p for key in value if key in hints for p in _misfits(value[key], hints[key], f"{where}.{key}")
        ]
    if get_origin(kind) is list:
        (item,) = get_args(kind)
        if not isinstance(value, list):
            return [f"{where} is {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in _misfits(v, item, f"{where}[{i}]")]
    allowed = get_args(kind) or (kind,)  # a union (float | None) or one type
    number = float in allowed and isinstance(value, int) and not isinstance(value, bool)
    return (
        []
        if number or isinstance(value, tuple(type(None) if a is None else a for a in allowed))
        else [f"{where} is {value!r}, not {kind}"]
    )


@pytest.mark.parametrize("run", RUNS)
def test_the_captured_meta_is_what_its_records_declare(run: str) -> None:
    """Every key a real run wrote besides its scenarios (and each scenario's held-out status) is declared in the
    typed records the writers and readers share (recipes.bench.meta), with its type: a key written but not declared
    would be read by no one's type."""
    captured = json.loads((GOLDEN / f"{run}-results.json").read_bytes())
    heading = counts_report.HEADING if captured.get("measure") == "counts" else {}
    meta = {k: v for k, v in captured.items() if k != "scenarios" and k not in heading}
    problems = _misfits(meta, Meta, "meta")
    problems += [
        p for s in captured["scenarios"] for p in _misfits(s["held_out"], HeldOutJson, f"{s['name']}.held_out")
    ]
    assert problems == []


def test_a_key_or_type_the_records_do_not_declare_is_found() -> None:
    """The check above can fail: an undeclared key, a string for a number, a list item of another type."""
    meta = {"trials": "3", "extra": 1, "builds": [{"key": "baseline", "label": 2}], "gate": {"trained_percent": None}}
    assert _misfits(meta, Meta, "meta") == [
        "meta.extra is not declared",
        "meta.trials is '3', not <class 'int'>",
        "meta.builds[0].label is 2, not <class 'str'>",
    ]


def test_the_counts_chart_says_its_mispredictions_bar_is_both_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart's one bar of mispredictions adds the conditional and the indirect ones, which the table keeps
    apart: its legend says so (a new user on tokei read a +18.6 % bar against the table's -18.6 % cond.)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415  (the test extra has it)

    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)
    counts, meta = counts_report.from_json(json.loads((GOLDEN / "hello-counts-results.json").read_bytes()))
    counts_report.write_chart(tmp_path / "chart.png", counts, meta)
    (figure,) = figures
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert sorted(legend) == ["estimate", "instructions", "mispredicts (cond. + ind.)", "paired trials (estimate)"]
    assert (tmp_path / "chart.png").stat().st_size > 0
