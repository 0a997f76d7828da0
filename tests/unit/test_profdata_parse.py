from __future__ import annotations

import pytest

from recipes.errors import ToolchainError
from recipes.profdata import parse_overlap, parse_show
from tests.conftest import DATA


def test_parse_show_real_output() -> None:
    summary = parse_show((DATA / "profdata-show.txt").read_text())
    assert summary.total_functions == 56
    assert summary.executed_functions == 49


def test_parse_show_without_executed_line_counts_zero() -> None:
    assert parse_show("Total functions: 3\n").executed_functions == 0


def test_parse_show_refuses_empty() -> None:
    with pytest.raises(ToolchainError):
        parse_show("")


def test_parse_overlap_real_output() -> None:
    assert parse_overlap((DATA / "profdata-overlap.txt").read_text()) == 100.0
