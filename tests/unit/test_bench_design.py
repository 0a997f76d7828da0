"""The bench's design and flags (recipes/bench/design.py, and their use in the table): the rotated order, the
busy and tick checks, totals that are the sum of their parts, the units and words of the table and summary."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from recipes.bench import cpu_report as report
from recipes.bench import design, procstat
from recipes.bench.cli import Outcome
from recipes.bench.cpu_report import BASELINE, CANDIDATE, ScenarioResult, Trial
from recipes.bench.meta import Meta
from recipes.errors import ProcStatError
from recipes.workdir import BenchDir

TICK = 1 / procstat.CLOCK_TICKS


def test_two_builds_alternate_and_three_take_every_position() -> None:
    assert design.rotated_orders(["b", "a"], 4) == [["b", "a"], ["a", "b"], ["b", "a"], ["a", "b"]]
    orders = design.rotated_orders(["b", "x", "y"], 6)
    assert orders[:3] == [["b", "x", "y"], ["x", "y", "b"], ["y", "b", "x"]]
    for build in "bxy":  # over each full rotation every build runs once in every position
        assert sorted(order.index(build) for order in orders[:3]) == [0, 1, 2]
        assert sorted(order.index(build) for order in orders[3:]) == [0, 1, 2]
    assert design.rotated_orders([], 3) == []


@pytest.mark.parametrize(
    ("us", "text"),
    [(17.2, "17.20 µs"), (0.5, "0.50 µs"), (166.4, "166 µs"), (5559.4, "5,559 µs"), (554292.0, "554.3 ms"),
     (1_234_567.0, "1,234.6 ms"), (math.nan, "—")],
)  # fmt: skip
def test_durations_read_as_in_the_readme(us: float, text: str) -> None:
    assert design.duration(us) == text


def test_plural_and_the_count_that_would_do() -> None:
    assert design.plural(1, "run") == "1 run" and design.plural(12000, "request") == "12,000 requests"
    # 0.33 s of CPU at 100 Hz is 33 ticks: 100 ticks take 1000 * 100 / 33 = 3031 requests, rounded up to 3,100
    assert design.count_that_would_do(1000, 0.33, 100) == 3100
    assert design.count_that_would_do(20, 0.0, 100) == 2000
    assert design.count_that_would_do(7, 0.5, 100) == 14


def test_busy_and_tick_checks() -> None:
    assert design.not_busy(0.3, 1.0, 100)  # 30 ticks at 0.3 CPU-s per wall-s
    assert not design.not_busy(0.9, 1.0, 100)
    assert not design.not_busy(0.05, 1.0, 100)  # 5 ticks: too coarse to judge the busyness; the tick flag says it
    assert design.too_short(0.99, 100) and not design.too_short(1.0, 100)
    assert design.mostly(3, 5) and not design.mostly(2, 4) and not design.mostly(0, 0)
    assert "h2load -m" in design.busy_fix("http", 8, 1) and "connections = 8 now" in design.busy_fix("http", 8, 1)
    assert "batch = 50" in design.busy_fix("handshakes", 50, 1)


def test_busy_leaves_out_what_others_ran_on_the_server_s_core(tmp_path: Path) -> None:
    # a server that used 0.4 s of a 1 s trial while a build took 0.55 s of the same core was kept busy: its core
    # idled 0.05 s; the same 0.4 s with the core idle for 0.6 s was not
    assert design.busy(0.4, 1.0, 0.05) == pytest.approx(0.889, abs=1e-3)
    assert not design.not_busy(0.4, 1.0, 100, core_idle=0.05)
    assert design.not_busy(0.4, 1.0, 100, core_idle=0.6)
    assert design.busy(0.4, 1.0) == pytest.approx(0.4)  # no idle time known (an old results.json): per wall second
    assert math.isnan(design.busy(0.0, 0.0, 0.0))
    stat = "cpu  10 0 5 900 7 0 0 0 0 0\ncpu0 5 0 2 400 3 0 0 0 0 0\ncpu1 5 0 3 500 4 1 1 0 0 0\nintr 1\n"
    assert procstat.parse_core_idle(stat, 1) == 504 and procstat.parse_core_idle(stat, 0) == 403
    with pytest.raises(ProcStatError, match="no cpu7 line"):
        procstat.parse_core_idle(stat, 7)
    (tmp_path / "stat").write_text(stat)
    assert procstat.core_idle(1, tmp_path) == 504
    assert procstat.core_idle(0) >= 0  # this machine's own /proc/stat


def trial(build: str, index: int, cpu: float, wall: float, *, user: float = 0.6, count: int = 1000) -> Trial:
    return Trial(build, index, count, count, cpu, wall, server_user=cpu * user)


def result(cpus: list[tuple[float, float]], wall: float, **kwargs: object) -> ScenarioResult:
    trials = []
    for i, (base, cand) in enumerate(cpus, 1):
        trials += [trial(BASELINE, i, base, wall), trial(CANDIDATE, i, cand, wall)]
    return ScenarioResult("s", "cached page", trials, 0.4, 0.4, **kwargs)  # type: ignore[arg-type]


META: Meta = {"baseline_label": "plain", "candidate_label": "PGO", "trials": 3, "server_core": 1, "load_core": 0}


@pytest.mark.refuses("server-scenario-whose-server-not-kept-busy")
def test_a_server_not_kept_busy_makes_its_scenario_invalid_in_one_line() -> None:
    idle = result([(2.0, 1.8)] * 3, wall=8.0, kind="http", connections=8)  # 0.25 CPU-s per wall-s, 200 ticks
    assert len(idle.not_busy) == 6 and not idle.valid
    line = idle.why_invalid
    assert line.startswith(
        "the server was not kept busy: 6 of 6 trials under 0.5 CPU seconds per second its core was free"
    )
    assert "(median 0.24)" in line and "more connections (connections = 8 now)" in line and "h2load -m" in line
    assert "\n" not in line
    paced = result([(2.0, 1.8)] * 3, wall=8.0, kind="http", paced=True)  # a fixed rate: idle by design
    assert paced.valid and not paced.not_busy
    command = result([(2.0, 1.8)] * 3, wall=8.0, kind="command", unit="run")  # a command waits on nobody
    assert command.valid and not command.not_busy


def test_a_server_that_waited_for_a_saturated_client_is_flagged_not_invalid() -> None:
    # the demo server's full TLS handshakes: the server at 0.31 of its core, h2load at 0.93 of its own; a client
    # handshake costs about a server one, so no scenario setting can load it harder from one core
    bound = result([(2.0, 1.8)] * 3, wall=8.0, kind="handshakes", connections=200)
    for t in bound.trials:
        t.load_cpu = 0.93 * t.wall
    assert len(bound.not_busy) == 6 and bound.valid and bound.load_bound == pytest.approx(0.93)
    assert "the load generator used 0.93 of its core, so the server waited for its client" in bound.busy_fix
    assert "flagged, not invalid" in report.markdown([bound], META)
    assert design.client_bound([0.5, 0.6], [1.0, 1.0]) is None  # a client with room to spare: the fix applies
    assert design.client_bound([], []) is None


def test_a_few_idle_trials_are_flagged_not_invalid() -> None:
    mixed = result([(2.0, 1.8), (2.0, 1.8), (2.0, 1.8)], wall=2.5, kind="http")
    mixed.trials[0].wall = 8.0  # one stalled trial of six
    assert mixed.valid and len(mixed.not_busy) == 1
    text = report.markdown([mixed], META)
    assert (
        "- cached page: 1 of 6 trials with the server under 0.5 CPU seconds per second its core was free "
        "(plain #1: 0.25)" in text
    )
    assert "| cached page | 0.72 | 0.25 ⚠ 0.72 0.80 0.72 0.80 0.72 |" in text
    data = mixed.as_json()
    assert data["not_busy_trials"] == ["baseline #1"] and data["server_busy"][0] == 0.25
    assert data["trials"][0]["busy"] == 0.25 and data["busy_min"] == design.BUSY_MIN


def test_trials_too_short_for_the_tick_are_flagged_with_the_count_that_would_do() -> None:
    short = result([(0.33, 0.30)] * 3, wall=0.4, kind="http")
    assert short.valid and len(short.too_short) == 6
    note = short.tick_note
    assert f"6 of 6 trials under {design.MIN_TICKS} ticks of CPU time" in note
    assert "its total (/proc counts in ticks) is coarser than 1 %" in note
    if procstat.CLOCK_TICKS == 100:
        assert "(1 s at 10 ms a tick, about 1 % resolution; median 0.32 s)" in note
        assert "3,200 requests per trial would do" in note
    runs = result([(0.33, 0.30)] * 3, wall=0.4, kind="command", unit="run")
    assert "its user/system split (tick-sampled)" in runs.tick_note and " runs per trial would do" in runs.tick_note
    long = result([(1.5, 1.4)] * 3, wall=1.6, kind="http")
    assert long.tick_note == "" and long.as_json()["too_short_trials"] == []


def test_the_total_is_the_sum_of_its_parts() -> None:
    """Medians of user and of system do not add up to the median of the totals; the table's total is their sum,
    so the two parts of the difference add up to it."""
    skewed = ScenarioResult(
        "s",
        "skewed",
        [
            Trial(BASELINE, 1, 1000, 1000, 1.0, 1.0, server_user=0.9),
            Trial(BASELINE, 2, 1000, 1000, 1.2, 1.2, server_user=0.5),
            Trial(BASELINE, 3, 1000, 1000, 1.4, 1.4, server_user=0.7),
            Trial(CANDIDATE, 1, 1000, 1000, 0.9, 0.9, server_user=0.4),
            Trial(CANDIDATE, 2, 1000, 1000, 1.1, 1.1, server_user=0.8),
            Trial(CANDIDATE, 3, 1000, 1000, 1.3, 1.3, server_user=0.6),
        ],
        0.4,
        0.4,
    )
    assert skewed.median_of_totals(BASELINE) == pytest.approx(1200.0)
    assert skewed.median(BASELINE) == pytest.approx(700.0 + 700.0)  # user median 700, system median 700
    user, system = skewed.parts_of(CANDIDATE)
    assert user + system == pytest.approx(skewed.difference_of(CANDIDATE))
    medians = skewed.as_json()["medians"][CANDIDATE]
    assert medians["user_us"] + medians["system_us"] == pytest.approx(medians["total_us"])


def test_a_command_table_speaks_of_runs_and_a_server_table_of_requests() -> None:
    command = result([(1.5, 1.4)] * 3, wall=1.6, kind="command", unit="run")
    command.held_out = {"status": "held-out", "trained": 0, "total": 1, "rule": "declared"}
    text = report.markdown([command], {**META, "design": {"orders": [["baseline", "candidate"]] * 3}})
    assert text.startswith("# CPU time per run: PGO vs plain\n")
    assert "the builds' order rotated each round" in text and "(plain, PGO / PGO, plain …)" not in text
    assert "the command's runs on core 1" in text
    for server_word in ("load generator", "h2load", "server in user space", "per request", "| server |"):
        assert server_word not in text, server_word
    assert "| cached page (per run) | held-out (declared) | plain | 900 µs | 600 µs | 1,500 µs |" in text
    assert "| the runs | harness | harness per run | runs in user space |" in text
    server = result([(1.5, 1.4)] * 3, wall=1.6, kind="http")
    text = report.markdown([server], META)
    assert text.startswith("# CPU time per request: PGO vs plain\n")
    assert "server on core 1, load generator (h2load) on core 0" in text and "per run" not in text


def test_the_summary_names_the_labels_and_adds_up(tmp_path: Path) -> None:
    two = result([(1.5, 1.2)] * 3, wall=1.6, kind="http", builds=[BASELINE, CANDIDATE])
    meta: Meta = {"builds": [{"key": BASELINE, "label": "release"}, {"key": CANDIDATE, "label": "LTO PGO"}]}
    (line, *_rest) = Outcome(BenchDir(tmp_path), [two], meta).summary_lines()
    assert "\u221220.0 % = user \u221212.0 % + system \u22128.0 % of release's 1,500 µs/request" in line, line
    assert line.endswith("[LTO PGO]") and "trained" not in line
    short = result([(0.33, 0.30)] * 3, wall=0.4, kind="http")
    lines = Outcome(BenchDir(tmp_path), [short], meta).summary_lines()
    assert lines[1].strip().startswith("flagged: 6 of 6 trials under 100 ticks"), lines


def test_the_chart_says_what_its_numbers_are(tmp_path: Path) -> None:
    runs = result([(1.5, 1.2)] * 3, wall=1.6, kind="command", unit="run")
    xlabel, title = report.chart_texts([runs], META)
    assert xlabel == "CPU time per run, PGO vs plain: change, % of plain's total"
    assert "their sum the total" in title and "each paired trial's total" in title
    assert report.chart_texts([result([(1.5, 1.2)], wall=1.6)], META)[0].startswith("CPU time per request, ")
    report.write_chart(tmp_path / "c.png", [runs], META)
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
