"""The health gate: a new profile against a reference (the profile the crate keeps, or the last release's), before
anything is built from it.

A training that silently lost part of its workload (raw profiles truncated or missing, a phase that stopped early,
a server that answered errors) still merges into a valid profile; its floor of executed functions may still hold.
What it lost shows against a good profile of the same crate: the functions the reference executed and this one did
not, weighed by the reference's counts. Functions are matched by name without cargo's hashes
(:func:`recipes.llvm.carry.symbol_key`), so a reference of an earlier version of the crate serves too. The share is
of counts, so it does not depend on the training's scale; the total counts are compared too, but only said (a
scaled training has other totals).

The default ceiling (Config.max_lost), 25 % of the reference's count lost: in the case that motivates the gate (vscode#331672), two of
four raw profiles were truncated and the total count fell from 218.6 G to 35.0 G, 84 % lost, and startup got slower
by 47-87 ms; a training of the same workload loses nothing (the same functions run), and one of the next version
loses what was edited or removed, a few percent on the crates measured here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from recipes.errors import CheckFailed
from recipes.llvm.carry import readable, symbol_key


@dataclass(frozen=True)
class Health:
    """A profile against its reference, by the executed functions and their counts."""

    executed: int
    reference_executed: int
    total_count: int
    reference_total_count: int
    lost_functions: int  # the functions the reference executed and this profile did not
    lost_share: float  # of the reference's count, in those functions, in %
    only_reference: tuple[tuple[str, float], ...]  # the largest of them: (function, share of the reference's count)

    @property
    def total_ratio(self) -> float:
        return self.total_count / self.reference_total_count if self.reference_total_count else 1.0


def compare(counts: Mapping[str, int], reference: Mapping[str, int], *, largest: int = 3) -> Health:
    """The new profile's counts by record name (:func:`recipes.llvm.profdata.record_counts`) against the
    reference's."""
    executed = {symbol_key(name) for name, count in counts.items() if count > 0}
    theirs: dict[str, int] = {}
    for name, count in reference.items():
        if count > 0:
            key = symbol_key(name)
            theirs[key] = theirs.get(key, 0) + count
    total = sum(theirs.values())
    lost = sorted(((key, count) for key, count in theirs.items() if key not in executed), key=lambda kv: -kv[1])
    return Health(
        executed=len(executed),
        reference_executed=len(theirs),
        total_count=sum(counts.values()),
        reference_total_count=total,
        lost_functions=len(lost),
        lost_share=round(100.0 * sum(c for _, c in lost) / total, 2) if total else 0.0,
        only_reference=tuple((readable(key), round(100.0 * c / total, 2)) for key, c in lost[:largest] if total),
    )


def refuse_lost(health: Health, ceiling: float, source: str, reference: str) -> None:
    """Refuse a profile that lost more than ``ceiling`` % of the reference's count."""
    if health.lost_share <= ceiling:
        return
    names = ", ".join(f"{name} {share:g} %" for name, share in health.only_reference)
    raise CheckFailed(
        f"the merged profile lost {health.lost_share:g} % of the reference's count, more than PGO_MAX_LOST={ceiling:g} "
        f"% ({source}): {health.lost_functions} functions {reference} executed did not run, the largest: {names}",
        "see whether the training ran whole (its phases, its raw profiles), then train again; or give a newer good "
        "profile as PGO_REFERENCE, or raise PGO_MAX_LOST",
    )


def health_line(health: Health, reference: str) -> str:
    """The comparison in one line."""
    return (
        f"merge: against {reference}: {health.executed} functions executed ({health.reference_executed} there), "
        f"total count {health.total_ratio:.3g} times its, {health.lost_share:g} % of its count in functions this "
        "training did not run"
    )
