from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from recipes.bench import report
from recipes.bench.report import BASELINE, CANDIDATE, ScenarioResult, Trial


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
    assert "| a scenario | invalid | invalid |" in text
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
    assert "| a scenario | 10.00 | 8.00 | \u221220.0 % | 3/3 | +1.0 % |" in text
    assert "| noisy one | 10.00 | 8.00 | \u221220.0 % | 3/3 | +25.0 % ⚠ |" in text
    assert "Canary above tolerance in 1 of 2 scenarios: noisy one." in text
    assert "| plain µs/req (median) | PGO µs/req (median) |" in text


def test_overhead_says_who_was_busy() -> None:
    busy = report.overhead(scenario([10.0], [8.0]))
    assert busy["load_generator"] == pytest.approx(0.95)
    assert busy["harness"] == pytest.approx(0.005)
    assert busy["upstream"] is None


def test_json_round_trip(tmp_path: Path) -> None:
    results = [scenario([10.0, 11.0], [9.0, 9.5])]
    meta = {"trials": 2, "baseline_label": "plain", "candidate_label": "PGO"}
    report.write_json(tmp_path / "r.json", results, meta)
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


def test_chart_command_line(tmp_path: Path) -> None:
    assert report.main(["nonsense"]) == 2


def test_user_share_of_the_server() -> None:
    result = scenario([10.0, 10.0], [8.0, 8.0])
    for t in result.trials:
        t.server_user = t.server_cpu * 0.25
    assert report.overhead(result)["server_user_share"] == pytest.approx(0.25)
    assert "| 25 % |" in report.markdown([result], {})
