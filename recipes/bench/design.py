"""How a bench run is laid out and what its trials can be trusted for: pure, for the harness and the table.

- The order (:func:`rotated_orders`): trials run in rounds, one trial of every build a round, and the builds' order
  is rotated each round (round r starts with the build r - 1 places after the baseline), so over n rounds every
  build runs once in every position. A fixed order (baseline, A, B every round) puts whatever drifts within a round
  (a cache warmed by the previous build, a frequency step, a neighbour's burst) on one build more than another.
- The server's busyness (:data:`BUSY_MIN`): CPU seconds of the server per second its pinned core was free for it
  (the server's CPU time plus the core's idle time, from ``/proc/stat``; what other processes ran there is left
  out, so a build beside the bench does not read as an idle server). A server kept
  busy by the load on its own core measures 0.86 to 0.98 here (docs/worth.md); under half a CPU per wall
  second the core idles more than it serves, and the cost per request then mixes serving with waking up
  (keep-alive and delayed-ACK stalls, the scheduler's idle exits), differently from trial to trial. Half is far
  below the saturated figures and above the stalled ones the issue saw (under 0.5 at 8 HTTP/1.1 connections).
- The kernel's tick (:data:`MIN_TICKS`): /proc counts a server's CPU time in clock ticks (10 ms at USER_HZ 100),
  and the kernel splits any process's time into user and system at its ticks. Under 100 ticks a trial's figure
  is coarser than 1 % (one tick of 100), so the table flags it with the count that would reach 100 ticks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

#: the design's name in results.json
DESIGN = "rotation"
DESIGN_TEXT = "the builds' order rotated each round, round r starting r - 1 places on"

#: CPU seconds of the server per second its core was free for it, under which a server trial is flagged as not
#: kept busy
BUSY_MIN = 0.5
#: the busy figure's unit, as the table and the messages say it
BUSY_UNIT = "CPU seconds per second its core was free"
#: fewer ticks than this and the busy figure itself is too coarse to judge (±10 %): only the tick flag is raised
BUSY_JUDGED_TICKS = 10
#: ticks of CPU time per trial for a resolution of about 1 %
MIN_TICKS = 100


def rotated_orders(builds: Sequence[T], rounds: int) -> list[list[T]]:
    """Round r's order (r from 0): ``builds`` shifted by r; two builds alternate (A B, B A, A B …)."""
    n = len(builds)
    return [[builds[(r + i) % n] for i in range(n)] for r in range(rounds)] if n else []


def busy(cpu: float, wall: float, core_idle: float | None = None) -> float:
    """CPU seconds of the server per second its pinned core was free for it: ``cpu / (cpu + core_idle)``, the
    core's idle time during the trial being the time the server left unused. What other processes ran on that core
    is left out, so a loaded machine does not read as an idle server. Without the core's idle time (a command, an
    old results.json): CPU seconds per wall second. NaN without either."""
    if core_idle is not None:
        return cpu / (cpu + core_idle) if cpu + core_idle > 0 else math.nan
    return cpu / wall if wall > 0 else math.nan


def ticks(cpu: float, per_second: int) -> float:
    """``cpu`` seconds in clock ticks."""
    return cpu * per_second


def not_busy(cpu: float, wall: float, per_second: int, core_idle: float | None = None) -> bool:
    """A server trial whose server was not kept busy (and long enough to say so)."""
    return ticks(cpu, per_second) >= BUSY_JUDGED_TICKS and busy(cpu, wall, core_idle) < BUSY_MIN


def too_short(cpu: float, per_second: int) -> bool:
    """A trial of fewer than :data:`MIN_TICKS` ticks of CPU time."""
    return ticks(cpu, per_second) < MIN_TICKS


def count_that_would_do(count: int, cpu: float, per_second: int) -> int:
    """The trial's count that would take :data:`MIN_TICKS` ticks at the cost ``cpu`` seconds per ``count``, rounded
    up to two significant digits."""
    measured = ticks(cpu, per_second)
    if measured <= 0:
        return count * MIN_TICKS
    wanted = math.ceil(count * MIN_TICKS / measured)
    step = int(10 ** max(0, len(str(wanted)) - 2))
    return math.ceil(wanted / step) * step


def mostly(flagged: int, total: int) -> bool:
    """More than half."""
    return total > 0 and 2 * flagged > total


#: CPU seconds of the load generator per wall second from which its own core is flat out: a server left idle then
#: waits for its client (a full TLS handshake costs the client about what it costs the server), and more load from
#: that one core cannot help
LOAD_SATURATED = 0.85


def client_bound(load_cpu: Sequence[float], walls: Sequence[float]) -> float | None:
    """The load generator's median CPU seconds per wall second over the trials, when it is at least
    :data:`LOAD_SATURATED` (the trials were bound by the client, not by what the scenario asked); else None."""
    figures = [cpu / wall for cpu, wall in zip(load_cpu, walls, strict=True) if wall > 0]
    if not figures:
        return None
    median = statistics.median(figures)
    return median if median >= LOAD_SATURATED else None


def busy_fix(kind: str, connections: int, streams: int, load_bound: float | None = None) -> str:
    """What keeps a server busier, for a scenario of ``kind`` (nothing a scenario can give when the load generator
    was the bound: ``load_bound`` its CPU per wall second)."""
    if load_bound is not None:
        return (
            f"nothing from this scenario: the load generator used {load_bound:.2f} of its core, so the server waited "
            "for its client (a second load core, or a faster client, would keep it busy); flagged, not invalid"
        )
    if kind == "handshakes":
        return f"a larger batch (batch = {connections} handshakes at once now)"
    return (
        f"more connections (connections = {connections} now) or pipelining (streams = {streams} now: h2load -m, "
        "HTTP/1.1 pipelining or HTTP/2 streams)"
    )


def busy_refusal(flagged: Sequence[float], measured: int, kind: str, connections: int, streams: int) -> str:
    """Why a server scenario is invalid when most of its ``measured`` trials were not kept busy (``flagged``: their
    :func:`busy` figures): one line with the fix."""
    median = statistics.median(flagged)
    return (
        f"the server was not kept busy: {len(flagged)} of {measured} trials under {BUSY_MIN} {BUSY_UNIT} "
        f"(median {median:.2f}), so the figure mixes waiting with serving; give " + busy_fix(kind, connections, streams)
    )


def duration(us: float) -> str:
    """µs of CPU time as the README writes them: ``17.20 µs``, ``5,559 µs``, ``554.3 ms``; ``—`` for NaN."""
    if math.isnan(us):
        return "—"
    if abs(us) < 100:
        return f"{us:.2f} µs"
    if abs(us) < 100_000:
        return f"{us:,.0f} µs"
    return f"{us / 1000:,.1f} ms"


def plural(count: int, unit: str) -> str:
    """``1 run``, ``2 runs``, ``1,000 requests``."""
    return f"{count:,} {unit}" + ("" if count == 1 else "s")
