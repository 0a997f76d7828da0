"""The health gate (recipes/llvm/health.py) on real captures in tests/data/carry/: hello 0.1.0's profile as the
reference; a training of the same workload, of version 0.1.1 (every name renamed by cargo's hash), and of half the
workload (its words and checksum phases: 6 of its 11 raw profiles)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.config import Config
from recipes.errors import CheckFailed
from recipes.llvm import health, profdata

DATA = Path(__file__).resolve().parents[1] / "data" / "carry"


def _records(name: str) -> dict[str, int]:
    return profdata.parse_record_counts((DATA / f"{name}.show.txt").read_text())


def test_the_same_training_loses_nothing() -> None:
    found = health.compare(_records("hello-legacy-0.1.0"), _records("hello-legacy-0.1.0"))
    assert (found.lost_share, found.lost_functions, found.total_ratio) == (0.0, 0, 1.0)
    assert found.executed == found.reference_executed == 41
    health.refuse_lost(found, Config.max_lost, "the default", "kept.profdata")


def test_a_reference_of_the_version_before_is_matched_by_name_without_hashes() -> None:
    """0.1.1's training against 0.1.0's profile: every name differs by its hash, the functions are the same."""
    found = health.compare(_records("hello-legacy-0.1.1"), _records("hello-legacy-0.1.0"))
    assert found.lost_share == 0.0 and found.lost_functions == 0


def test_half_the_workload_is_refused_naming_what_it_did_not_run() -> None:
    found = health.compare(_records("hello-half"), _records("hello-legacy-0.1.0"))
    assert found.lost_share == 90.13 and found.lost_functions == 8 and found.total_ratio < 0.01
    assert found.only_reference[0] == ("_ZN9hello_pgo13collatz_stepsE", 81.13)
    with pytest.raises(CheckFailed) as refused:
        health.refuse_lost(found, 25.0, "the default", "kept.profdata")
    line = refused.value.line()
    assert line.startswith(
        "the merged profile lost 90.13 % of the reference's count, more than PGO_MAX_LOST=25 % (the default): "
        "8 functions kept.profdata executed did not run, the largest: _ZN9hello_pgo13collatz_stepsE 81.13 %"
    )
    health.refuse_lost(found, 95.0, "PGO_MAX_LOST", "kept.profdata")  # a ceiling above it: taken
    assert "90.13 % of its count in functions this training did not run" in health.health_line(found, "kept")
