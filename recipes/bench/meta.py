"""What results.json says besides its scenarios, as typed records: the run's meta (its builds, design, cores,
command), the counts' valgrind and gate, the training's coverage of the bench, a scenario's held-out status.

Every record is ``total=False``: results.json is read back by the charts and the tests as it was written by any
earlier version, with the keys it had then, so a reader says what it shows for a key that is missing.
"""

from __future__ import annotations

from typing import TypedDict


class BuildMeta(TypedDict, total=False):
    """One build of the run: its key in the trials (``baseline``, ``candidate``, ``candidate-2``…) and what it is."""

    key: str
    label: str
    binary: str
    sha256: str
    origin: str
    c_compilers: str  # what compiled its C and C++ ("" when not known: a binary given by path)


class DesignMeta(TypedDict, total=False):
    """How the trials were ordered (:mod:`recipes.bench.design`): rotated rounds of one trial of each build."""

    name: str
    description: str
    orders: list[list[str]]


class ValgrindMeta(TypedDict, total=False):
    """The counts' valgrind and its tools' options."""

    version: str
    cachegrind: list[str]
    callgrind: list[str]


class GateMeta(TypedDict, total=False):
    """The counts' gate: its margins (percent of the estimate, or None when off) and, once judged, its verdicts."""

    trained_percent: float | None
    held_out_percent: float | None
    verdicts: list[str]


class HotFunction(TypedDict):
    """A function the bench executed and the training never did, with its counts in the bench's profile."""

    function: str  # demangled
    symbol: str
    count: int


class CCrateCoverage(TypedDict):
    """One build script's C and C++ functions in the training's and the bench's profiles."""

    crate: str
    functions: int
    with_training_counts: int
    without_training_counts: int
    bench_executed: int
    bench_untrained: list[str]


class CCoverage(TypedDict, total=False):
    """The C and C++ of all build scripts: :class:`CCrateCoverage`'s figures summed, and each crate's."""

    functions: int
    with_training_counts: int
    without_training_counts: int
    bench_executed: int
    bench_untrained: list[str]
    crates: list[CCrateCoverage]


class Coverage(TypedDict, total=False):
    """The training's coverage of the bench (:mod:`recipes.bench.coverage`), or why it was ``skipped``."""

    skipped: str
    instrumented: str
    training_profile: str
    bench_profile: str
    overlap_percent: float
    bench_functions: int
    bench_functions_untrained: int
    untrained_hot_functions: list[HotFunction]
    problems: list[str]
    c_code: CCoverage


class HeldOutJson(TypedDict, total=False):
    """A scenario against the training (:class:`recipes.bench.scenarios.HeldOut`); ``rule`` is missing in the
    results of a bench older than it."""

    status: str  # "trained", "held-out" or "partly"
    trained: int
    total: int
    rule: str  # "paths", "arguments" or "declared"


class Meta(TypedDict, total=False):
    """The run: its builds (the first two also by role, as results.json had them before ``builds``), how the trials
    ran, and what the measure adds (``valgrind`` and ``gate`` for counts, ``coverage`` when checked)."""

    baseline: str
    baseline_sha256: str
    baseline_label: str
    baseline_origin: str
    candidate: str
    candidate_sha256: str
    candidate_label: str
    candidate_origin: str
    builds: list[BuildMeta]
    workload: str
    trials: int
    design: DesignMeta
    scale: float
    server_core: int
    load_core: int
    canary_iterations: int
    command: str
    valgrind: ValgrindMeta
    gate: GateMeta
    coverage: Coverage
