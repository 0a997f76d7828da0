"""The /proc stat parser, on lines captured from a real process (tests/data/bench/).

The capture: a Python process named ``srv (x) 1`` (spaces and parentheses in its comm) burned 0.5 s of
CPU in a thread that then exited, and 0.2 s in each of two threads still alive when the lines were read.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest

from recipes.bench import procstat
from recipes.bench.procstat import ProcStat, parse_stat
from recipes.errors import ProcStatError
from tests.conftest import DATA

PROCESS = (DATA / "bench" / "proc-stat.txt").read_text()
THREADS = (DATA / "bench" / "proc-task-stat.txt").read_text()


def parse_stat_lines(text: str) -> list[ProcStat]:
    """Several stat lines (one per thread, as ``cat /proc/<pid>/task/*/stat`` prints them)."""
    return [parse_stat(line) for line in text.splitlines() if line.strip()]


def test_process_line() -> None:
    stat = parse_stat(PROCESS)
    assert stat.pid == 13669
    assert stat.comm == "srv (x) 1"
    assert stat.state == "R"
    assert (stat.utime, stat.stime) == (89, 6)
    assert stat.num_threads == 3
    assert stat.starttime == 988445
    assert stat.processor == 1
    assert stat.cpu_seconds(100) == pytest.approx(0.95)


def test_thread_lines() -> None:
    threads = parse_stat_lines(THREADS)
    assert [t.pid for t in threads] == [13669, 13727, 13728]
    assert {t.comm for t in threads} == {"srv (x) 1"}
    assert [t.cpu_ticks for t in threads] == [5, 19, 19]
    assert [t.state for t in threads] == ["R", "S", "S"]


def test_process_time_includes_exited_threads() -> None:
    """The process line has the exited thread's ~50 ticks that no live thread's line has."""
    process = parse_stat(PROCESS).cpu_ticks
    live = sum(t.cpu_ticks for t in parse_stat_lines(THREADS))
    assert process - live >= 45


@pytest.mark.refuses("proc-stat-line-not-one")
@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("", "not a /proc stat line"),
        ("123 comm R 1 2 3", "not a /proc stat line"),
        ("123 (short) R 1 2 3", "fields"),
        ("123 (x) R " + " ".join(["x"] * 50), "non-numeric"),
    ],
)
def test_refuses_what_is_not_a_stat_line(line: str, fragment: str) -> None:
    with pytest.raises(ProcStatError, match=fragment):
        parse_stat(line)


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(b"x" * 65536).digest()


def test_read_stat_of_this_process_counts_an_exited_thread() -> None:
    before = procstat.read_stat(os.getpid()).cpu_ticks
    worker = threading.Thread(target=_burn, args=(0.3,))
    worker.start()
    worker.join()
    after = procstat.read_stat(os.getpid())
    assert after.cpu_ticks - before >= 25
    assert os.getpid() in {t.pid for t in procstat.read_threads(os.getpid())}


@pytest.mark.refuses("measured-process-gone")
def test_gone_process_is_refused() -> None:
    with pytest.raises(ProcStatError, match="gone"):
        procstat.read_stat(2**22 + 12345)
