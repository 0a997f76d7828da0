from __future__ import annotations

import os

import pytest

from recipes.bench import canary


def test_loop_is_deterministic() -> None:
    assert canary.sha256_loop(3) == canary.sha256_loop(3)
    assert canary.sha256_loop(3) != canary.sha256_loop(4)


def test_time_canary_runs_on_the_core_and_puts_affinity_back() -> None:
    before = os.sched_getaffinity(0)
    core = max(before)
    timing = canary.time_canary(core, iterations=200)
    assert timing.wall > 0
    assert timing.cpu > 0
    assert timing.digest == canary.sha256_loop(200)
    assert os.sched_getaffinity(0) == before


@pytest.mark.parametrize(
    ("before", "after", "drift", "flagged"),
    [(1.0, 1.0, 0.0, False), (1.0, 1.03, 0.03, False), (1.0, 1.031, 0.031, True), (2.0, 1.9, -0.05, True)],
)
def test_drift_and_tolerance(before: float, after: float, drift: float, flagged: bool) -> None:
    assert canary.drift(before, after) == pytest.approx(drift)
    assert canary.flagged(canary.drift(before, after)) is flagged


def test_drift_refuses_a_zero_time() -> None:
    with pytest.raises(ValueError, match="positive"):
        canary.drift(0.0, 1.0)
