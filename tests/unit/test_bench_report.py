from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from recipes.bench import chart
from recipes.bench import cpu_report as report
from recipes.bench.cpu_report import BASELINE, CANDIDATE, ScenarioResult, Trial
from recipes.bench.meta import CCoverage, Coverage, Meta
from recipes.files import write_atomically


def trial(build: str, index: int, us: float, *, problem: str = "", answered: int = 1000) -> Trial:
    return Trial(
        build=build,
        index=index,
        requests=1000,
        answered=answered,
        server_cpu=us * answered / 1e6,
        wall=2.0,
        load_cpu=1.9,
        harness_cpu=0.01,
        status={"2xx": answered},
        problem=problem,
    )


def scenario(base: list[float], cand: list[float], **kwargs: object) -> ScenarioResult:
    trials = []
    for i, (b, c) in enumerate(zip(base, cand, strict=True), start=1):
        trials += [trial(BASELINE, i, b), trial(CANDIDATE, i, c)]
    return ScenarioResult("s", "a scenario", trials, 0.40, float(kwargs.get("after", 0.41)))  # type: ignore[arg-type]


def test_medians_difference_and_same_side() -> None:
    result = scenario([10.0, 11.0, 10.5, 12.0, 10.0], [7.0, 7.5, 8.0, 10.5, 10.2])
    assert result.valid
    assert result.median(BASELINE) == pytest.approx(10.5)
    assert result.median(CANDIDATE) == pytest.approx(8.0)
    assert result.difference == pytest.approx(8.0 / 10.5 - 1)
    assert result.paired_differences()[0] == pytest.approx(-0.3)
    assert result.same_side == (4, 5)  # the last pair went the other way
    assert result.canary_drift == pytest.approx(0.025)


def test_invalid_trial_makes_the_scenario_invalid() -> None:
    result = scenario([10.0, 10.0], [9.0, 9.0])
    result.trials[3] = trial(CANDIDATE, 2, 9.0, problem="status codes 1000 5xx; expected 1000 2xx")
    assert not result.valid
    assert "1 of 4 trials invalid" in result.why_invalid
    assert "candidate #2" in result.why_invalid
    data = result.as_json()
    assert data["valid"] is False
    assert "difference" not in data
    text = report.markdown([result], {"baseline_label": "plain", "candidate_label": "PGO"})
    assert "| a scenario (per request) | — | invalid |" in text
    assert "expected 1000 2xx" in text


def test_a_trial_that_answered_nothing_has_no_figure() -> None:
    assert math.isnan(trial(BASELINE, 1, 1.0, answered=0).us_per_request)


def test_percent_uses_a_real_minus() -> None:
    assert report.percent(-0.3304) == "\u221233.0 %"
    assert report.percent(0.012) == "+1.2 %"


def test_markdown_flags_canary_drift() -> None:
    calm = scenario([10.0] * 3, [8.0] * 3, after=0.404)
    noisy = scenario([10.0] * 3, [8.0] * 3, after=0.5)
    noisy.name, noisy.title = "n", "noisy one"
    text = report.markdown([calm, noisy], {"baseline_label": "plain", "candidate_label": "PGO", "trials": 3})
    assert "| a scenario (per request) | — | plain | — | — | 10.00 µs | | | | | +1.0 % |" in text
    assert "| | | PGO | — | — | 8.00 µs | \u221220.0 % | — | — | 3/3 | |" in text
    assert "| noisy one (per request) | — | plain | — | — | 10.00 µs | | | | | +25.0 % ⚠ |" in text
    assert "Canary above tolerance in 1 of 2 scenarios: noisy one." in text
    assert "| scenario | held out (rule) | build | user | system | total (user + system) | difference |" in text


def test_overhead_says_who_was_busy() -> None:
    busy = report.overhead(scenario([10.0], [8.0]))
    assert busy["load_generator"] == pytest.approx(0.95)
    assert busy["harness"] == pytest.approx(0.005)
    assert busy["upstream"] is None


def write_json(path: Path, results: list[ScenarioResult], meta: Mapping[str, object]) -> None:
    """The one results.json writer's file (:func:`recipes.bench.cpu_report.to_json`), as the bench writes it."""
    write_atomically(path, json.dumps(report.to_json(results, meta), indent=2, ensure_ascii=False) + "\n")


def test_json_round_trip(tmp_path: Path) -> None:
    results = [scenario([10.0, 11.0], [9.0, 9.5])]
    meta = {"trials": 2, "baseline_label": "plain", "candidate_label": "PGO"}
    write_json(tmp_path / "r.json", results, meta)
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["scenarios"][0]["same_side"] == 2
    back, back_meta = report.from_json(data)
    assert back_meta == meta
    assert back[0].difference == pytest.approx(results[0].difference)
    assert [t.us_per_request for t in back[0].trials] == pytest.approx([t.us_per_request for t in results[0].trials])
    assert not list(tmp_path.glob(".*.tmp"))


def test_chart_is_a_png(tmp_path: Path) -> None:
    """matplotlib is in the test extra (and the bench session's venv)."""
    bad = scenario([10.0], [9.0])
    bad.trials[1].problem = "502"
    bad.title = "broken"
    report.write_chart(tmp_path / "chart.png", [scenario([10.0, 11.0], [9.0, 9.5]), bad], {"candidate_label": "PGO"})
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_command_line() -> None:
    assert chart.main(["nonsense"]) == 2


def test_user_share_of_the_server() -> None:
    result = scenario([10.0, 10.0], [8.0, 8.0])
    for t in result.trials:
        t.server_user = t.server_cpu * 0.25
    assert report.overhead(result)["server_user_share"] == pytest.approx(0.25)
    assert "| 25 % |" in report.markdown([result], {})


def split(result: ScenarioResult, user_share: dict[str, float]) -> ScenarioResult:
    for t in result.trials:
        t.server_user = t.server_cpu * user_share[t.build]
    return result


def test_user_and_system_time_apart() -> None:
    """Baseline 10 µs (8 user, 2 system), candidate 8 µs (6 user, 2 system): all of the gain is user time."""
    result = split(scenario([10.0] * 3, [8.0] * 3), {BASELINE: 0.8, CANDIDATE: 0.75})
    assert result.median_user(BASELINE) == pytest.approx(8.0)
    assert result.median_system(BASELINE) == pytest.approx(2.0)
    assert result.median_user(CANDIDATE) == pytest.approx(6.0)
    user, system = result.parts_of(CANDIDATE)
    assert user == pytest.approx(-0.2)
    assert system == pytest.approx(0.0)
    text = report.markdown([result], {"baseline_label": "plain", "candidate_label": "PGO"})
    assert "| a scenario (per request) | — | plain | 8.00 µs | 2.00 µs | 10.00 µs |" in text
    assert "| | | PGO | 6.00 µs | 2.00 µs | 8.00 µs | \u221220.0 % | \u221220.0 % | +0.0 % | 3/3 | |" in text
    data = result.as_json()
    assert data["medians"]["baseline"] == {
        "user_us": 8.0,
        "system_us": 2.0,
        "total_us": 10.0,
        "median_of_totals_us": 10.0,
    }
    assert data["comparisons"][0]["user_part"] == pytest.approx(-0.2)
    assert data["trials"][0]["user_us"] == 8.0 and data["trials"][0]["system_us"] == 2.0


def test_several_candidates_against_one_baseline(tmp_path: Path) -> None:
    keys = report.build_keys(3)
    assert keys == ("baseline", "candidate", "candidate-2")
    trials = []
    for i in (1, 2):
        trials += [trial("baseline", i, 10.0), trial("candidate", i, 8.0), trial("candidate-2", i, 7.0)]
    result = ScenarioResult("s", "three", trials, 0.4, 0.4, builds=list(keys), unit="run")
    result.held_out = {"status": "partly", "trained": 1, "total": 2}
    assert result.valid and result.candidates == ["candidate", "candidate-2"]
    assert result.difference_of("candidate-2") == pytest.approx(-0.3)
    assert result.same_side_of("candidate-2") == (2, 2)
    meta: Meta = {
        "builds": [
            {"key": "baseline", "label": "plain", "binary": "/p"},
            {"key": "candidate", "label": "PGO", "binary": "/q"},
            {"key": "candidate-2", "label": "PGO+BOLT", "binary": "/r"},
        ]
    }
    text = report.markdown([result], meta)
    assert "# CPU time per run: PGO, PGO+BOLT vs plain" in text
    assert "| three (per run) | partly (1 of 2 arguments trained) | plain |" in text
    assert "| | | PGO+BOLT | — | — | 7.00 µs | \u221230.0 % |" in text
    assert "- candidate (PGO+BOLT): `/r`" in text
    data = report.to_json([result], meta)
    assert [c["build"] for c in data["scenarios"][0]["comparisons"]] == ["candidate", "candidate-2"]
    back, _ = report.from_json(data)
    assert back[0].builds == list(keys) and back[0].unit == "run" and back[0].held_out == result.held_out
    report.write_chart(tmp_path / "c.png", [result], meta)
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="at least two builds"):
        report.build_keys(1)


def test_the_coverage_section() -> None:
    coverage: Coverage = {
        "instrumented": "/w/i",
        "bench_profile": "/w/b.profdata",
        "overlap_percent": 72.539,
        "bench_functions": 26,
        "bench_functions_untrained": 1,
        "untrained_hot_functions": [{"function": "hello::primes", "symbol": "_ZN5hello6primes", "count": 4300}],
        "problems": ["x: run 1 of 2 exited with exit code 3, expected 0"],
    }
    text = report.markdown([scenario([10.0], [9.0])], {"coverage": coverage})
    assert "edge profile overlap **72.539 %**" in text
    assert "1 of the 26 functions the bench executed were never executed in training" in text
    assert "| `hello::primes` | 4,300 |" in text
    assert "not as expected on the instrumented binary: x: run 1 of 2" in text
    skipped = report.markdown([scenario([10.0], [9.0])], {"coverage": {"skipped": "no instrumented binary"}})
    assert "Not measured: no instrumented binary." in skipped


def test_the_coverage_section_counts_the_c_functions() -> None:
    c_code: CCoverage = {"functions": 4, "with_training_counts": 2, "without_training_counts": 2, "bench_executed": 2}
    coverage: Coverage = {"overlap_percent": 99.0, "c_code": {**c_code, "bench_untrained": ["csys_cold"], "crates": []}}
    text = report.markdown([scenario([10.0], [9.0])], {"coverage": coverage})
    assert (
        "The C and C++ of build scripts: 4 functions, 2 with counts in the training's profile, 2 without; the bench "
        "executed 2, 1 of them never in training (`csys_cold`)." in text
    )
    assert "C and C++ of build scripts" not in report.markdown([scenario([10.0], [9.0])], {"coverage": {}})


@pytest.mark.refuses("chart-without-matplotlib")
def test_chart_without_matplotlib_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside the bench session's venv (matplotlib not importable: None in sys.modules makes import fail)."""
    write_json(tmp_path / "r.json", [scenario([10.0], [9.0])], {})
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert chart.main(["chart", str(tmp_path / "r.json"), str(tmp_path / "c.png")]) == 1
    err = capsys.readouterr().err
    assert err == "chart: matplotlib is not installed here (run the chart in `nox -s bench`'s venv)\n"
    assert not (tmp_path / "c.png").exists()
