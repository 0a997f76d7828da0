"""The training's progress lines: a phase's status counts in words."""

from __future__ import annotations

from recipes.train.trainer import status_words


def test_a_commands_count_of_expected_exits_reads_as_a_count_not_an_exit_status() -> None:
    """``exit_ok`` counts the runs that exited with the expected status: `(exited as expected: 3)` read as if the
    runs had exited with 3 (a new user's tokei)."""
    assert status_words({"exit_ok": 3}) == " (3 runs exited as expected)"
    assert status_words({"exit_ok": 1}) == " (1 run exited as expected)"


def test_http_status_classes_keep_their_keys_and_zero_counts_are_left_out() -> None:
    assert status_words({"2xx": 1500, "3xx": 0, "4xx": 3}) == " (2xx: 1,500, 4xx: 3)"
    assert status_words({"2xx": 0}) == ""
    assert status_words({}) == ""
