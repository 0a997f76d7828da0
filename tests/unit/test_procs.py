"""The one process manager, on real child processes (a Python one-liner stands in for a server)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from recipes import procs
from recipes.runner import log_tail
from tests.conftest import clean_env

#: prints a line, then waits for SIGTERM and exits with the status given as its argument
SERVER = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(int(sys.argv[1])))
print("listening", flush=True)
while True:
    time.sleep(0.05)
"""

#: ignores SIGTERM
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("listening", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize(
    ("returncode", "numbered", "named"),
    [
        (0, "exit code 0", "exit code 0"),
        (3, "exit code 3", "exit code 3"),
        (-9, "signal 9 (SIGKILL)", "killed by SIGKILL"),
        (-4, "signal 4 (SIGILL)", "killed by SIGILL (illegal instruction)"),
        (-99, "signal 99 (?)", "killed by signal 99"),
    ],
)
def test_describe_exit(returncode: int, numbered: str, named: str) -> None:
    assert procs.describe_exit(returncode) == numbered
    assert procs.describe_exit(returncode, numbered=False) == named


def _listening(log: Path) -> bool:
    return log.is_file() and "listening" in log.read_text()


def test_start_wait_stop_reap(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with procs.Child.start([sys.executable, "-c", SERVER, "0"], env=clean_env(), log=log) as child:
        assert child.alive() and child.returncode is None
        assert child.wait_for(lambda: _listening(log), 20)
        assert child.stop(20) == 0
        assert not child.alive() and child.returncode == 0
        assert child.tail() == "listening"
    assert child.returncode == 0  # leaving the block does not touch an ended child


def test_exit_status_after_sigterm_and_the_log_appended(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("earlier run\n")
    child = procs.Child.start([sys.executable, "-c", SERVER, "3"], env=clean_env(), log=log, append=True)
    with child:
        assert child.wait_for(lambda: "listening" in log.read_text(), 20)
        assert child.stop_or_kill(20) == 3
    assert log.read_text() == "earlier run\nlistening\n"
    assert log_tail(log, 5, joined=" | ") == "earlier run | listening"


def test_a_child_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with procs.Child.start([sys.executable, "-c", STUBBORN], env=clean_env(), log=log) as child:
        assert child.wait_for(lambda: _listening(log), 20)
        started = time.monotonic()
        assert child.stop(0.5) is None  # still running
        assert child.alive() and time.monotonic() - started < 5
        assert child.stop_or_kill(0.5) == -signal.SIGKILL
        assert procs.describe_exit(-signal.SIGKILL) == "signal 9 (SIGKILL)"


def test_leaving_the_block_kills_a_running_child(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError),
        procs.Child.start([sys.executable, "-c", STUBBORN], env=clean_env(), log=tmp_path / "log") as child,
    ):
        raise RuntimeError("a phase failed")
    assert child.returncode == -signal.SIGKILL


def test_wait_for_gives_up_when_the_child_exits(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with procs.Child.start([sys.executable, "-c", "raise SystemExit(5)"], env=clean_env(), log=log) as child:
        started = time.monotonic()
        assert not child.wait_for(lambda: False, 30)
        assert time.monotonic() - started < 20
        assert child.returncode == 5


def test_standard_output_through_a_pipe(tmp_path: Path) -> None:
    log = tmp_path / "log"
    argv = [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"]
    with procs.Child.start(argv, env=clean_env(), log=log, pipe_stdout=True) as child:
        assert child.proc.stdout is not None
        assert child.proc.stdout.read() == b"out\n"
        assert child.stop(20) == 0
    assert log.read_text() == "err\n"


def test_log_tail_of_missing_and_empty_logs(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "none") == f"(no log at {tmp_path / 'none'})"
    assert log_tail(tmp_path / "none", joined=" | ") == ""
    (tmp_path / "empty").write_text("")
    assert log_tail(tmp_path / "empty") == "(empty log)"
