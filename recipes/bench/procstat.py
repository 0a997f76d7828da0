"""CPU time of a process from ``/proc``: a pure parser of ``stat`` lines, and the few reads around it.

``/proc/<pid>/stat`` of a process (its thread group leader) gives the user and system time of the whole
process: every live thread *and* every thread that has already exited. ``/proc/<pid>/task/<tid>/stat``
gives one thread's own share, which is what a per-thread breakdown needs (and what misses exited
threads). The times are in clock ticks (``SC_CLK_TCK``, 100 on Linux).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import ProcStatError

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """The fields of one ``stat`` line the benchmark uses (field numbers as in proc(5))."""

    pid: int  # (1)
    comm: str  # (2) without the parentheses; may hold spaces and parentheses itself
    state: str  # (3)
    utime: int  # (14) user time, clock ticks
    stime: int  # (15) system time, clock ticks
    num_threads: int  # (20)
    starttime: int  # (22) clock ticks after boot
    processor: int  # (39) CPU last run on

    @property
    def cpu_ticks(self) -> int:
        return self.utime + self.stime

    def cpu_seconds(self, ticks_per_second: int = CLOCK_TICKS) -> float:
        return self.cpu_ticks / ticks_per_second


def parse_stat(line: str) -> ProcStat:
    """One line of ``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat``.

    ``comm`` is found between the first ``(`` and the *last* ``)``: a process may name itself ``a) (b``.
    """
    text = line.strip()
    open_at = text.find("(")
    close_at = text.rfind(")")
    if open_at < 1 or close_at < open_at:
        raise ProcStatError(f"not a /proc stat line: {text[:80]!r}", "expected 'PID (comm) STATE …'")
    rest = text[close_at + 1 :].split()
    # rest[0] is field 3 (state), so field n is rest[n - 3]
    if len(rest) < 39 - 2:
        raise ProcStatError(f"a /proc stat line with {len(rest) + 2} fields: {text[:80]!r}", "expected at least 39")
    try:
        return ProcStat(
            pid=int(text[:open_at]),
            comm=text[open_at + 1 : close_at],
            state=rest[0],
            utime=int(rest[14 - 3]),
            stime=int(rest[15 - 3]),
            num_threads=int(rest[20 - 3]),
            starttime=int(rest[22 - 3]),
            processor=int(rest[39 - 3]),
        )
    except ValueError as exc:
        raise ProcStatError(f"a /proc stat line with a non-numeric field: {text[:80]!r}", str(exc)) from exc


def read_stat(pid: int) -> ProcStat:
    """The process's own stat line: the CPU time of all its threads, exited ones included."""
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text(encoding="utf-8"))
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise ProcStatError(f"process {pid} is gone", "it exited before its CPU time was read") from exc


def read_threads(pid: int) -> list[ProcStat]:
    """One stat per live thread of the process (exited threads are not there: use :func:`read_stat`)."""
    threads = []
    task = Path(f"/proc/{pid}/task")
    try:
        tids = sorted(task.iterdir(), key=lambda p: int(p.name))
    except FileNotFoundError as exc:
        raise ProcStatError(f"process {pid} is gone", "it exited before its threads were read") from exc
    for tid in tids:
        try:
            threads.append(parse_stat((tid / "stat").read_text(encoding="utf-8")))
        except FileNotFoundError:
            continue  # the thread exited between the listing and the read
    return threads


def cpu_seconds(pid: int) -> float:
    """User + system seconds of the whole process so far."""
    return read_stat(pid).cpu_seconds()


def parse_core_idle(text: str, core: int) -> int:
    """Clock ticks core ``core`` has spent idle (``idle`` + ``iowait`` of its ``cpuN`` line of ``/proc/stat``)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == f"cpu{core}":
            try:
                return int(fields[4]) + int(fields[5])
            except (IndexError, ValueError):
                break
    raise ProcStatError(f"/proc/stat has no cpu{core} line with idle and iowait times", "is /proc mounted?")


def core_idle(core: int, proc: Path = Path("/proc")) -> int:
    """Clock ticks ``core`` has spent idle since boot."""
    try:
        text = (proc / "stat").read_text()
    except OSError as exc:
        raise ProcStatError(f"cannot read {proc / 'stat'}: {exc.strerror or exc}", "is /proc mounted?") from exc
    return parse_core_idle(text, core)


def thread_affinities(pid: int) -> dict[int, frozenset[int]]:
    """The CPUs each live thread of ``pid`` may run on."""
    found: dict[int, frozenset[int]] = {}
    for thread in read_threads(pid):
        try:
            found[thread.pid] = frozenset(os.sched_getaffinity(thread.pid))
        except ProcessLookupError:
            continue
    return found
