"""The canary: a fixed SHA-256 loop on the server's core, timed before and after each scenario.

The work is always the same (one fixed 64 KiB buffer hashed a fixed number of times), so a change in
its time is a change of the machine: another process on that core, a frequency step, a noisy neighbour.
Interleaving the builds puts such drift on both alike; the canary says how much there was.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

BUFFER = bytes(range(256)) * 256  # 64 KiB, the same bytes every run
ITERATIONS = 12_000  # about 0.4 s on this machine's cores (SHA-NI)
TOLERANCE = 0.03  # drift above 3 % is flagged


@contextmanager
def pinned(cores: set[int]) -> Iterator[None]:
    """Run the calling thread on ``cores`` for the duration of the block, then put its affinity back."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def sha256_loop(iterations: int = ITERATIONS) -> str:
    """Hash :data:`BUFFER` ``iterations`` times, each round over the previous digest and the buffer."""
    digest = b""
    for _ in range(iterations):
        digest = hashlib.sha256(digest + BUFFER).digest()
    return digest.hex()


@dataclass(frozen=True)
class CanaryTime:
    """One timing of the loop: wall seconds (what contention shows in) and the thread's CPU seconds."""

    wall: float
    cpu: float
    digest: str


def time_canary(core: int, iterations: int = ITERATIONS) -> CanaryTime:
    """The loop on ``core``."""
    with pinned({core}):
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        digest = sha256_loop(iterations)
        wall1, cpu1 = time.perf_counter(), time.thread_time()
    return CanaryTime(wall=wall1 - wall0, cpu=cpu1 - cpu0, digest=digest)


def drift(before: float, after: float) -> float:
    """Relative change of the canary's time, as a fraction (0.05 = 5 % slower after)."""
    if before <= 0:
        raise ValueError(f"a canary time must be positive, got {before}")
    return (after - before) / before


def flagged(value: float) -> bool:
    return round(abs(value), 9) > TOLERANCE
