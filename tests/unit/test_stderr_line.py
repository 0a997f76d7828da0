"""The line a failed training run's refusal quotes from its stderr (captured from a real Rust program's panic,
rustc 1.95, with RUST_BACKTRACE=1 and =0)."""

from __future__ import annotations

from recipes.train.command import telling_line
from tests.conftest import DATA

#: what both captures panicked with
PANIC = 'panicked at p.rs:2:83: called `Result::unwrap()` on an `Err` value: "Failed to parse CSS selector: (x)"'


def test_a_panic_with_its_backtrace_is_quoted_by_its_message_not_the_note_after_it() -> None:
    """Found on htmlq 0.4.0: the refusal quoted 'note: Some details are omitted, run with `RUST_BACKTRACE=full`…'."""
    text = (DATA / "rust-panic-backtrace.txt").read_text()
    assert text.rstrip().endswith("for a verbose backtrace.")
    assert telling_line(text) == PANIC


def test_a_panic_without_its_backtrace_is_quoted_by_its_message() -> None:
    text = (DATA / "rust-panic.txt").read_text()
    assert text.rstrip().endswith("environment variable to display a backtrace")
    assert telling_line(text) == PANIC


def test_other_stderr_is_quoted_by_its_last_line() -> None:
    assert telling_line("warming up\nAssertion failed: n > 0 (main.c: main: 12)\n\n") == (
        "Assertion failed: n > 0 (main.c: main: 12)"
    )
    assert telling_line("") == ""
    # a panic of an older Rust says its message on its own line; a panic without message is its line
    assert telling_line("thread 'main' panicked at 'boom', src/main.rs:2:5\nnote: run with `RUST_BACKTRACE=1`") == (
        "thread 'main' panicked at 'boom', src/main.rs:2:5"
    )
