"""Shards: one profile from several trainings, each a workload file with a weight (``PGO_WORKLOAD=main,breadth``,
``PGO_WEIGHTS=main=9,breadth=1``).

A shard is a name (its workload file's stem), a workload, a weight, its own folder of ``.profraw`` under the work
dir and its own ``.profdata`` (:class:`recipes.workdir.WorkDir`: ``shards/<name>/``). Each shard is merged alone
first and checked; then the shards are merged with the integer weights :func:`integer_weights` chooses, so that each
shard's share of the merged profile's total count is the share asked, as closely as integers allow.

``llvm-profdata merge --weighted-input=W,FILE`` multiplies every count of FILE by W. Unweighted, each shard counts in
proportion to its own total, so a long shard outweighs a short one: the weights are first normalised by each
shard's total count (``llvm-profdata show``'s ``Total count``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from recipes.config import TESTS_SHARD, Config, shard_name
from recipes.errors import ConfigError
from recipes.workload import Workload, load_workload, workload_path

#: the largest weight ``llvm-profdata merge --weighted-input`` takes (a 64-bit unsigned integer)
MAX_WEIGHT = 2**64 - 1
#: the largest total count a shard's profile can have (llvm-profdata's counters and their sum are 64-bit unsigned)
MAX_TOTAL = 2**64 - 1
#: weights further apart than this are beyond llvm-profdata whatever the shards' totals (:func:`refuse_far_apart`)
MAX_APART = MAX_WEIGHT * MAX_TOTAL
#: the largest multiplier :func:`integer_weights` tries (the smallest weight is then at most this)
MAX_MULTIPLIER = 1000
#: the shares reached are good enough when each is within this of the share asked (0.05 percentage points)
TOLERANCE = 0.0005


@dataclass(frozen=True)
class Shard:
    """One training of a sharded profile: its name (the workload file's stem), its workload, its weight as given
    (1 when none is). The reserved shard ``tests`` (:data:`recipes.config.TESTS_SHARD`) has no workload: it runs
    the crate's own test suite (recipes/stages/tests_shard.py)."""

    name: str
    workload: Workload | None
    weight: float

    @property
    def is_tests(self) -> bool:
        return self.workload is None

    @property
    def source(self) -> str:
        """What the shard trains on, in words: its workload file, or the crate's own tests."""
        return str(self.workload.path) if self.workload is not None else "the crate's own tests, cargo test"


def plan_shards(config: Config) -> tuple[Shard, ...]:
    """The configured shards, each workload parsed (a missing or bad file is refused before anything is built);
    empty without shards (one workload)."""
    weights = dict(config.weights)
    shards = tuple(
        Shard(shard_name(text), _shard_workload(config, text), weights.get(shard_name(text), 1.0))
        for text in config.shards
    )
    refuse_far_apart(shards, config.source("weights"))
    return shards


def _shard_workload(config: Config, text: str) -> Workload | None:
    """A shard's workload, parsed; none for the reserved shard ``tests``, which a workload file of that name in
    profiles/ would make ambiguous (refused)."""
    if text != TESTS_SHARD:
        return load_workload(workload_path(config.project_dir, text))
    clash = workload_path(config.project_dir, text)
    if clash.is_file():
        raise ConfigError(
            f"{config.source('workload')}: the shard {TESTS_SHARD} is reserved for the crate's "
            f"own test suite, and {clash} is a workload file of that name",
            f"rename {clash} (and its shard in PGO_WORKLOAD), so that {TESTS_SHARD} names the crate's tests alone",
        )
    return None


def _times(ratio: Fraction) -> str:
    """``1e+320``: a ratio of weights in three digits, however large (a float holds no more than 1.8e308)."""
    exponent = math.log10(ratio.numerator) - math.log10(ratio.denominator)
    whole = math.floor(exponent)
    mantissa = 10 ** (exponent - whole)
    if mantissa >= 9.995:  # rounds up to 10
        mantissa, whole = 1.0, whole + 1
    return f"{mantissa:.3g}e+{whole:02d}"


def _number(weight: float) -> str:
    """A weight as it was given: ``1e-320``, ``1000``, ``2.5`` (the shortest text of the float)."""
    return repr(weight).removesuffix(".0")


def refuse_far_apart(shards: Sequence[Shard], source: str) -> None:
    """Refuse, before anything is built, weights so far apart that whatever the trainings' total counts (known only
    after them) a shard's integer weight in the merge would be beyond llvm-profdata's :data:`MAX_WEIGHT`: the merge
    weighs shard ``i`` in proportion to ``s_i / T_i``, the smallest weight is 1 and a total ``T`` is between 1 and
    :data:`MAX_TOTAL`, so the largest weight is at least ``(s_max / s_min) / MAX_TOTAL``. Before, the training ran
    first, and then the merge stopped (``PGO_WEIGHTS=main=1e-300``: :func:`refuse_heavy`), or a weight as small as
    a subnormal (``main=1e-320``) ended in a ZeroDivisionError. Closer weights can still be refused after the
    training, by the totals (:func:`refuse_heavy`)."""
    if len(shards) < 2:
        return
    light = min(shards, key=lambda shard: shard.weight)
    heavy = max(shards, key=lambda shard: shard.weight)
    ratio = Fraction(heavy.weight) / Fraction(light.weight)
    if ratio > MAX_APART:
        raise ConfigError(
            f"{source}: the weights of {heavy.name} ({_number(heavy.weight)}) and {light.name} "
            f"({_number(light.weight)}) are "
            f"{_times(ratio)} times apart: whatever the trainings' total counts, the merge would weigh {heavy.name} "
            f"beyond the largest weight llvm-profdata takes ({MAX_WEIGHT})",
            f"ask for weights at most {float(MAX_APART):.3g} times apart in PGO_WEIGHTS (or weights in [tool.pgo])",
        )


def workload_shards(shards: Sequence[Shard]) -> list[tuple[Shard, Workload]]:
    """The shards that run a workload file, with it (every shard but ``tests``)."""
    return [(shard, shard.workload) for shard in shards if shard.workload is not None]


def asked_shares(weights: Sequence[float]) -> list[float]:
    """Each shard's share of the profile asked: its weight over the sum of the weights."""
    total = math.fsum(weights)
    return [w / total for w in weights]


def reached_shares(weights: Sequence[int], totals: Sequence[int]) -> list[float]:
    """Each shard's share of the merged total count with ``weights``: ``W_i·T_i / Σ W_j·T_j`` (merging adds the
    weighted counts, so the merged total is that sum)."""
    weighted = [w * t for w, t in zip(weights, totals, strict=True)]
    return [x / sum(weighted) for x in weighted]


def integer_weights(shares: Sequence[float], totals: Sequence[int]) -> list[int]:
    """The integer weights of ``llvm-profdata merge --weighted-input`` that give each shard (total count ``T_i``)
    the share ``s_i`` of the merged total.

    The exact weights are proportional to ``q_i = s_i / T_i``, scaled so the smallest is 1. The rounding: for a
    multiplier ``m`` from 1 to :data:`MAX_MULTIPLIER`, each weight is ``m·q_i`` rounded to the nearest integer
    (halves up, at least 1); the first ``m`` whose every share reached is within :data:`TOLERANCE` (0.05
    percentage points) of the share asked is taken, else the ``m`` whose largest error is the smallest (the first
    of equals). Equal shares of equal totals thus get weights of 1, and one shard alone gets 1."""
    if not totals or any(t <= 0 for t in totals):
        raise ValueError("every shard needs a total count above 0")
    exact = [s / t for s, t in zip(shares, totals, strict=True)]
    smallest = min(exact)
    ratios = [q / smallest for q in exact]
    best: tuple[float, list[int]] | None = None
    for multiplier in range(1, MAX_MULTIPLIER + 1):
        weights = [max(1, math.floor(multiplier * r + 0.5)) for r in ratios]
        error = max(abs(a - b) for a, b in zip(reached_shares(weights, totals), shares, strict=True))
        if error <= TOLERANCE:
            return weights
        if best is None or error < best[0]:
            best = (error, weights)
    assert best is not None
    return best[1]


def refuse_heavy(names: Sequence[str], weights: Sequence[int], shares: Sequence[float]) -> None:
    """Refuse integer weights llvm-profdata cannot take: shares asked so far apart (``PGO_WEIGHTS=main=1e-300``),
    or of shards whose total counts are, that one shard's weight is beyond :data:`MAX_WEIGHT`. Before, the merge
    ran and failed with llvm-profdata's "input weight must be a positive integer"."""
    heaviest = max(range(len(weights)), key=lambda i: weights[i])
    if weights[heaviest] > MAX_WEIGHT:
        asked = ", ".join(f"{name} {share:.3g}" for name, share in zip(names, shares, strict=True))
        raise ConfigError(
            f"the shares asked ({asked}) need the shard {names[heaviest]} weighed {float(weights[heaviest]):.3g} "
            f"times, beyond the largest weight llvm-profdata takes ({MAX_WEIGHT})",
            "ask for shares less far apart in PGO_WEIGHTS (or weights in [tool.pgo])",
        )


def weighted_inputs(weights: Sequence[int], profiles: Sequence[Path]) -> list[str]:
    """The ``--weighted-input=W,FILE`` arguments of the merge."""
    return [f"--weighted-input={w},{p}" for w, p in zip(weights, profiles, strict=True)]
