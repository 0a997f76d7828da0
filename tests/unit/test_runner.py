"""The heartbeat of long commands (recipes/runner.py): what a growing cargo log says is going on, on real
captured logs (tests/data/cargo-*.log) cut at every line, and the heartbeat line of a real run."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes import runner
from recipes.errors import CommandFailed
from tests.conftest import DATA

CARGO_LOGS = sorted(DATA.glob("cargo-*.log"))

#: what only cargo's invocations and machine messages hold: never in a progress line
FRAGMENTS = ("CARGO_", "Running `", '"reason"', "--crate-name", "It says", "backslash", "rustc ", "cargo:")


@pytest.mark.parametrize(
    ("name", "line"),
    [
        # -v: two path dependencies fresh, the main crate compiled
        (
            "cargo-optimise-clean.log",
            "3 crates built (2 fresh); Finished `release` profile [optimized] target(s) in 0.19s",
        ),
        # -vv with a description of three lines (its invocations span several lines), and JSON messages
        ("cargo-optimise-described.log", "1 crate built; Finished `release` profile [optimized] target(s) in 0.66s"),
        ("cargo-optimise-json.log", "1 crate built; Finished `release` profile [optimized] target(s) in 1.07s"),
        ("cargo-build-renamed-json.log", "2 crates built; Finished `release` profile [optimized] target(s) in 1.85s"),
        # cargo test: once built, the tests' own output
        (
            "cargo-test-pass.log",
            "1 crate built; test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
            "finished in 0.08s",
        ),
    ],
)
def test_finished_logs(name: str, line: str) -> None:
    assert runner.last_progress_line(DATA / name) == line


def _cut(tmp_path: Path, name: str, lines: int) -> Path:
    """The log as it was while cargo had written its first ``lines`` lines."""
    text = (DATA / name).read_text(encoding="utf-8")
    log = tmp_path / name
    log.write_text("".join(text.splitlines(keepends=True)[:lines]), encoding="utf-8")
    return log


@pytest.mark.parametrize(
    ("name", "lines", "line"),
    [
        ("cargo-optimise-clean.log", 1, "(no output yet)"),  # only the command line
        ("cargo-optimise-clean.log", 2, "1 crate so far, all fresh"),  # nothing compiling (yet)
        ("cargo-optimise-clean.log", 4, "compiling multi-pgo v0.1.0 (crate 3 so far, 2 fresh)"),
        ("cargo-optimise-clean.log", 5, "compiling multi-pgo v0.1.0 (crate 3 so far, 2 fresh)"),
        # in the middle of a rustc invocation whose CARGO_PKG_DESCRIPTION spans three lines
        ("cargo-optimise-described.log", 4, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        ("cargo-optimise-described.log", 5, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        ("cargo-optimise-described.log", 6, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        # the build script's cargo: lines
        ("cargo-optimise-json.log", 15, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        ("cargo-build-layered-touched.log", 3, "compiling shapes v0.1.0 (crate 2 so far, 1 fresh)"),
    ],
)
def test_growing_logs(tmp_path: Path, name: str, lines: int, line: str) -> None:
    assert runner.last_progress_line(_cut(tmp_path, name, lines)) == line


@pytest.mark.parametrize("name", [p.name for p in CARGO_LOGS])
def test_never_a_fragment_of_cargos_output(tmp_path: Path, name: str) -> None:
    """At every moment of every captured cargo run, the progress line is readable text, never a piece of an
    invocation (``' CARGO_PKG_HOMEPAGE='https://…``) nor of a JSON message."""
    count = len((DATA / name).read_text(encoding="utf-8").splitlines())
    seen = set()
    for lines in range(count + 1):
        line = runner.last_progress_line(_cut(tmp_path, name, lines))
        assert len(line) <= runner.PROGRESS_WIDTH
        assert not any(fragment in line for fragment in FRAGMENTS), (lines, line)
        seen.add(line)
    assert any(line.startswith("compiling ") for line in seen), seen


def test_the_old_fragment_is_gone() -> None:
    """The issue's example: the last line of a -vv log of a crate with a multi-line description is the tail of
    an invocation; a line-by-line reader showed it."""
    last = (DATA / "cargo-optimise-described.log").read_text().splitlines()[-2]
    assert last.startswith("' CARGO_PKG_HOMEPAGE=")
    assert "CARGO_" not in runner.last_progress_line(DATA / "cargo-optimise-described.log")


def test_other_tools_and_no_log(tmp_path: Path) -> None:
    log = tmp_path / "merge.log"
    log.write_text("$ llvm-profdata merge -o x.profdata a.profraw\nwarning: a.profraw: no data\n\n")
    assert runner.last_progress_line(log) == "warning: a.profraw: no data"
    assert runner.last_progress_line(tmp_path / "missing.log") == "(no output yet)"
    long_line = tmp_path / "long.log"
    long_line.write_text("x" * 1000 + "\n")
    assert runner.last_progress_line(long_line) == "x" * runner.PROGRESS_WIDTH


def test_heartbeat_of_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A command that prints a -vv cargo log up to a multi-line invocation, then works for a while."""
    monkeypatch.setattr(runner, "HEARTBEAT_SECONDS", 0.3)
    partial = _cut(tmp_path, "cargo-optimise-described.log", 5)
    done = runner.run(["sh", "-c", f"cat {partial}; sleep 1.2"], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "b.log")
    assert done.returncode == 0
    beats = [line for line in capfd.readouterr().err.splitlines() if line.startswith("pgo:   … ")]
    assert beats, "no heartbeat"
    assert all(beat.endswith(" s: compiling described-pgo v0.1.0 (crate 1 so far)") for beat in beats), beats


def test_a_build_scripts_missing_c_compiler_is_named_with_its_package() -> None:
    """The demo server for x86_64-unknown-linux-musl on a machine without musl-tools (ring's build script, a real
    cargo log's tail): the failure says which compiler and which package, not only "see the log"."""
    output = (DATA / "cc-rs-musl-no-compiler.log").read_text(encoding="utf-8")
    assert runner.known_cause(output) == (
        "a build script needs the C compiler x86_64-linux-musl-gcc, which is not installed (apt-get install musl-tools)"
    )
    assert runner.known_cause(output.replace("x86_64-linux-musl-gcc", "riscv64-linux-gnu-gcc")).endswith(
        "(install riscv64-linux-gnu-gcc or name a compiler in CC_<target>)"
    )
    assert runner.known_cause("error[E0425]: cannot find value `x` in this scope") == ""


def test_a_failed_run_names_the_known_cause(tmp_path: Path) -> None:
    """run() puts that cause on the failure's one line (a real process printing cc-rs's line and failing)."""
    line = 'error occurred in cc-rs: failed to find tool "x86_64-linux-musl-gcc": No such file'
    with pytest.raises(CommandFailed) as failed:
        runner.run(["sh", "-c", f"echo '{line}'; exit 101"], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "b.log")
    assert "failed with exit code 101: a build script needs the C compiler x86_64-linux-musl-gcc" in str(
        failed.value.line()
    )
