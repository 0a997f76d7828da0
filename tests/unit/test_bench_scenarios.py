from __future__ import annotations

import pytest

from recipes.bench.scenarios import BY_NAME, SCENARIOS, select
from recipes.errors import ConfigError


def test_every_scenario_has_a_unique_name_and_a_count() -> None:
    assert len(BY_NAME) == len(SCENARIOS) >= 12
    for scenario in SCENARIOS:
        assert scenario.requests >= scenario.connections
        assert scenario.protocol in {"h1", "h2"}
        assert not (scenario.one_per_connection and scenario.rps)


def test_select_keeps_the_order_given_and_drops_repeats() -> None:
    chosen = select("static-5k,cached-5k-h1,static-5k")
    assert [s.name for s in chosen] == ["static-5k", "cached-5k-h1"]
    assert select(None) == list(SCENARIOS)
    assert select("all") == list(SCENARIOS)


@pytest.mark.parametrize(
    ("names", "fragment"), [("cached-5k-h3", "unknown scenario 'cached-5k-h3'"), (",", "no scenario")]
)
def test_select_refuses(names: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        select(names)


def test_scaled_counts_never_fall_below_one_request_per_connection() -> None:
    big = BY_NAME["cached-5k-1024c"].scaled(0.0001)
    assert big.requests == 1024
    assert BY_NAME["cached-5k-h1"].scaled(0.5).requests == BY_NAME["cached-5k-h1"].requests // 2
    assert BY_NAME["cached-5k-h1"].warmup_requests == 2000
