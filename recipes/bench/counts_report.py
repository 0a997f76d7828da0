"""What the counted trials say (``--measure counts``): per run or request, against the baseline, the spread of
repeated trials, the CI gate, and the table (Markdown, JSON, PNG).

Pure but the writers. A trial's figures are its totals (valgrind's ``summary:``) over the runs that exited as
expected (or the requests h2load saw answered); a scenario's figure for a build is the median of its trials,
its difference the candidate's median over the baseline's minus one, and its spread (max - min) / median of a
build's trials: what repeating the same measurement moves.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recipes.bench.counts import FORMULA, LIMITATIONS, MIN_INSTRUCTIONS, WEIGHTS, Counts, estimate
from recipes.bench.cpu_report import (
    BASELINE,
    CANDIDATE,
    Judged,
    Page,
    Result,
    build_lines,
    draw_chart,
    invalid_section,
    markdown_of,
    percent,
    read_results,
    rounded,
    worse_lines,
    worse_section,
)
from recipes.bench.meta import GateMeta, HeldOutJson, Meta
from recipes.errors import BenchError, ConfigError

#: the figures of a build, in the table's order, and their headings
FIGURES = {
    "instructions": "instructions",
    "i1_misses": "I1 misses",
    "ll_misses": "LL misses (i + d)",
    "cond_mispredicts": "cond. mispredicts",
    "ind_mispredicts": "ind. mispredicts",
    "estimate": "est. cycles",
}
#: what a counts run's results.json says before its scenarios, after the run's meta
HEADING = {"measure": "counts", "weights": WEIGHTS, "formula": FORMULA}
#: a server's figures in its own binary (callgrind's objects): what the profile changes, without the C library
BINARY_FIGURES = {"binary_instructions": "in the binary: instructions", "binary_estimate": "in the binary: est. cycles"}


@dataclass
class CountTrial(Judged):
    """One counted trial of one build: valgrind's totals over what it did."""

    build: str  # BASELINE, CANDIDATE or CANDIDATE-n
    index: int
    asked: int  # runs (or requests) asked
    done: int  # runs that exited as expected (requests h2load saw answered)
    events: dict[str, int]
    files: list[str] = field(default_factory=list)  # the valgrind output files read
    wall: float = 0.0
    problem: str = ""
    binary_events: dict[str, int] | None = None  # a server's: the self cost of its own binary (not libc's)

    def per_unit(self) -> dict[str, float]:
        """Each figure per run (or request)."""
        figures = Counts(self.events).figures()
        if self.binary_events is not None:
            own = Counts(self.binary_events)
            figures.update(binary_instructions=float(own.instructions), binary_estimate=estimate(own))
        return {k: v / self.done if self.done else math.nan for k, v in figures.items()}

    def as_json(self) -> dict[str, Any]:
        per_unit = {k: rounded(v) for k, v in self.per_unit().items()}
        return {**asdict(self), "valid": self.valid, "per_unit": per_unit, "wall": round(self.wall, 3)}


def too_short(counts: Counts, what: str, unit: str) -> str:
    """Why a trial has no figure, or ``""``: it counted under :data:`MIN_INSTRUCTIONS` instructions."""
    if counts.instructions >= MIN_INSTRUCTIONS:
        return ""
    return (
        f"too short for a figure: {what} counted {counts.instructions:,} instructions, under {MIN_INSTRUCTIONS:,}; "
        f"raise --scale or the scenario's {'runs' if unit == 'run' else 'requests'}"
    )


@dataclass
class CountsResult(Result[CountTrial]):
    """Every counted trial of one scenario, every build."""

    name: str
    title: str
    trials: list[CountTrial]
    problem: str = ""  # the scenario could not run at all
    unit: str = "run"
    held_out: HeldOutJson | None = None
    builds: list[str] = field(default_factory=lambda: [BASELINE, CANDIDATE])

    @property
    def status(self) -> str:
        return str((self.held_out or {}).get("status", "?"))

    @property
    def figures(self) -> list[str]:
        """The figures its trials have: every one of :data:`FIGURES`, and a server's :data:`BINARY_FIGURES`."""
        own = bool(self.trials) and all(t.binary_events is not None for t in self.trials)
        return [*FIGURES, *(BINARY_FIGURES if own else ())]

    @property
    def judged(self) -> str:
        """The figure the gate and the best-build line judge: a server's estimate in its own binary (the C
        library's allocator is what varies between its trials, and the profile does not build it), else the
        estimate of the whole process."""
        return "binary_estimate" if "binary_estimate" in self.figures else "estimate"

    def values(self, build: str, figure: str) -> list[float]:
        return [t.per_unit()[figure] for t in self.of(build)]

    def median(self, build: str, figure: str) -> float:
        return statistics.median(self.values(build, figure))

    def difference(self, candidate: str, figure: str = "estimate") -> float:
        base = self.median(BASELINE, figure)
        return self.median(candidate, figure) / base - 1 if base else math.nan

    def spread(self, build: str, figure: str = "estimate") -> float:
        """(max - min) / median of the build's trials."""
        values = self.values(build, figure)
        middle = statistics.median(values)
        return (max(values) - min(values)) / middle if middle else 0.0

    def paired(self, candidate: str, figure: str = "estimate") -> list[float]:
        base = {t.index: t.per_unit()[figure] for t in self.of(BASELINE)}
        cand = {t.index: t.per_unit()[figure] for t in self.of(candidate)}
        return [cand[i] / base[i] - 1 for i in sorted(base) if i in cand and base[i]]

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            **self.head_json(),
            **self.verdict_json(),
            "trials": [t.as_json() for t in self.trials],
        }
        if self.valid:
            data["judged"] = self.judged
            data["medians"] = {b: {f: round(self.median(b, f), 3) for f in self.figures} for b in self.builds}
            data["spreads"] = {b: {f: round(self.spread(b, f), 6) for f in self.figures} for b in self.builds}
            data["comparisons"] = [
                {
                    "build": c,
                    "differences": {f: rounded(self.difference(c, f), 6) for f in self.figures},
                    "paired_estimate_differences": [round(d, 6) for d in self.paired(c)],
                }
                for c in self.candidates
            ]
        return data


def from_json(data: dict[str, Any]) -> tuple[list[CountsResult], Meta]:
    return read_results(data, CountsResult, CountTrial)


def best_on_held_out(results: Sequence[CountsResult], named: dict[str, str]) -> str:
    """With two or more candidates (``--profile-use-args``, or several ``--candidate``): the build with the lowest
    estimate on the held-out (and partly trained) scenarios, by the geometric mean of each one's estimate over the
    baseline's; ``""`` with one candidate or no valid held-out scenario."""
    chosen = [r for r in results if r.valid and r.status in {"held-out", "partly"}]
    if not chosen or len(chosen[0].candidates) < 2:
        return ""
    means = {BASELINE: 1.0}
    for candidate in chosen[0].candidates:
        means[candidate] = math.exp(sum(math.log(1 + r.difference(candidate, r.judged)) for r in chosen) / len(chosen))
    ranked = sorted(means, key=lambda b: means[b])
    text = ", ".join(f"{named.get(b, b)} {percent(means[b] - 1)}" for b in ranked)
    return (
        f"best by the estimate on the {len(chosen)} held-out scenarios: {named.get(ranked[0], ranked[0])} "
        f"(geometric mean against {named[BASELINE]}: {text})"
    )


def regressions(results: Sequence[CountsResult], named: dict[str, str]) -> list[str]:
    """The summary's lines on the scenarios, trained or held out, on which a candidate's estimate (the figure the
    gate judges) is above the baseline's, by any amount: counts are exact, a repeat counts the same. One line
    saying there is none. Said, never a failure: the gate judges the exit code."""

    def worse(result: CountsResult, candidate: str) -> str:
        difference = result.difference(candidate, result.judged)
        whole = (
            f"instructions {percent(result.difference(candidate, 'instructions'))}, cond. mispredicts "
            f"{percent(result.difference(candidate, 'cond_mispredicts'))}"
        )
        if result.judged != "binary_estimate":
            said = f"{_what(result)} {percent(difference)} per {result.unit} ({whole})"
            return said if difference > 0 else ""
        # a server: the binary's own figures, and the whole process's apart (its calls into the C library are the
        # build's doing too: dufs 0.47.0's zip download, +0.003 % in the binary and +6.5 % whole, in memcpy)
        estimate = result.difference(candidate, "estimate")
        spread = max(result.spread(b, "estimate") for b in (BASELINE, candidate))
        said = (
            f"{_what(result)} {exact_percent(difference)} per {result.unit} (in the binary: instructions "
            f"{exact_percent(result.difference(candidate, 'binary_instructions'))}; the whole process: estimate "
            f"{percent(estimate)}, {whole})"
        )
        if estimate > spread and estimate > difference:
            said += f"; the whole process's estimate is worse beyond its trials' spread ({spread * 100:.1f} %)"
        return said if difference > 0 or estimate > spread else ""

    return worse_lines(results, named, worse, "by the estimate")


# ---------------------------------------------------------------------------------------------- the gate


@dataclass(frozen=True)
class Gate:
    """``--gate-trained PCT``: every trained scenario's estimate at least PCT % below the baseline's;
    ``--gate-held-out PCT``: no held-out (or partly trained) scenario's estimate more than PCT % above it."""

    trained: float | None = None  # per cent
    held_out: float | None = None

    @property
    def on(self) -> bool:
        return self.trained is not None or self.held_out is not None

    def as_json(self) -> GateMeta:
        return {"trained_percent": self.trained, "held_out_percent": self.held_out}


#: the held-out statuses (recipes.bench.scenarios.HeldOut) each gate judges
GATED = {"trained": {"trained"}, "held-out": {"held-out", "partly"}}


def check_gate_kinds(gate: Gate, statuses: Sequence[str]) -> None:
    """A gate with none of its scenarios among those chosen is refused (before anything is built)."""
    for margin, kind in ((gate.trained, "trained"), (gate.held_out, "held-out")):
        if margin is not None and not GATED[kind] & set(statuses):
            raise ConfigError(
                f"--gate-{kind} {margin:g}: none of the scenarios measured is {kind}",
                f"measure a {kind} scenario (--scenarios), or drop --gate-{kind}",
            )


def check_gate(gate: Gate, results: Sequence[CountsResult], named: dict[str, str]) -> list[str]:
    """What the gate says, one line per verdict; the first failure is raised (after the table is written)."""
    lines: list[str] = []
    failures: list[str] = []
    valid = [r for r in results if r.valid]
    check_gate_kinds(gate, [r.status for r in valid])
    for margin, kind in ((gate.trained, "trained"), (gate.held_out, "held-out")):
        if margin is None:
            continue
        for result in (r for r in valid if r.status in GATED[kind]):
            for candidate in result.candidates:
                diff = result.difference(candidate, result.judged)
                who = f"{named.get(candidate, candidate)} vs {named[BASELINE]} on {kind} scenario {result.name}"
                if kind == "trained" and diff > -margin / 100:
                    failures.append(f"{who}: {_what(result)} {percent(diff)}, not at least {margin:g} % better")
                elif kind == "held-out" and diff > margin / 100:
                    failures.append(f"{who}: {_what(result)} {percent(diff)}, worse by more than {margin:g} %")
                else:
                    lines.append(f"gate passed: {who}: {_what(result)} {percent(diff)} (margin {margin:g} %)")
    return [*lines, *(f"gate FAILED: {f}" for f in failures)]


def exact_percent(fraction: float) -> str:
    """:func:`percent`, but a difference that one decimal would round to 0.0 keeps three (``+0.003 %``): a figure
    named worse is never written ``+0.0 %``."""
    if fraction != 0 and abs(fraction) < 0.0005:
        return f"{fraction * 100:+.3f} %".replace("-", "\u2212")
    return percent(fraction)


def _what(result: CountsResult) -> str:
    return "estimate in the binary" if result.judged == "binary_estimate" else "estimate"


def raise_gate(verdicts: Sequence[str], markdown: Path) -> None:
    failed = [v for v in verdicts if v.startswith("gate FAILED: ")]
    if failed:
        raise BenchError(
            f"counts gate: {failed[0].removeprefix('gate FAILED: ')}"
            + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""),
            f"see {markdown}",
        )


# ---------------------------------------------------------------------------------------------- the table


def human(value: float) -> str:
    """``176_490_000`` -> ``176.49 M``; ``8_112`` -> ``8.11 k``; ``340`` -> ``340``."""
    if math.isnan(value):
        return "—"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.2f} {suffix}"
    return f"{value:.1f}" if value != int(value) else f"{int(value)}"


#: every figure of the table, the whole process's then the binary's alone
_COLUMNS = {**FIGURES, **BINARY_FIGURES}

#: what the table's columns mean, under it
LEGEND = (
    "Medians of the trials, per run (a command: its runs under cachegrind, each a process of its own) or per "
    "request (a server under callgrind: only what it executed between the zero before a trial's requests and "
    "the dump after them, start-up and warm-up not counted). In parentheses: the candidate's median over the "
    "baseline's, minus one. I1: first-level instruction cache; LL: the last level (instruction and data "
    "misses); mispredicts: simulated branch mispredictions, conditional and indirect. In the binary (servers): "
    "the same counts of the server's own executable alone, without the C library and the loader (callgrind's "
    "objects): what the profile changes, and what repeats; most of what varies between a server's trials is "
    "glibc's allocator, whose free lists the interleaving of connections leaves in another state each time. "
    "Spread: (max - min) / median of the build's trials' estimates (in the binary for a server, whole in "
    "brackets), what repeating the measurement moved; the gate judges the same figure. Held out: whether the "
    "scenario's paths (or arguments) occur in the training workload."
)


class CountsPage(Page[CountsResult]):
    """The counts' words on the one Markdown writer's page (:class:`recipes.bench.cpu_report.Page`)."""

    def heading(self) -> list[str]:
        meta, named = self.meta, self.named
        valgrind = meta.get("valgrind", {})
        return [
            f"# Counts per run or request: {self.candidates_named} vs {named[BASELINE]} "
            f"({valgrind.get('version', 'valgrind')})",
            "",
            *build_lines(meta.get("builds", []), named, meta),
            f"- {meta.get('trials', '?')} trials per scenario and build, in rounds, "
            f"{(meta.get('design') or {}).get('description', 'interleaved')}; commands: "
            f"`valgrind {' '.join(valgrind.get('cachegrind', []))}`; servers: "
            f"`valgrind {' '.join(valgrind.get('callgrind', []))}`, the requests only (zeroed and dumped by "
            "callgrind_control around each trial)",
            f"- estimate of cycles: {FORMULA}",
            f"- command: `{meta.get('command', '?')}`",
            "",
            "| scenario | held out | build | " + " | ".join(_COLUMNS.values()) + " | spread |",
            "| --- | --- | --- | " + " | ".join("---:" for _ in _COLUMNS) + " | ---: |",
        ]

    def invalid_row(self, result: CountsResult) -> str:
        return f"| {self.title(result)} | {_held(result)} | invalid |" + " — |" * (len(_COLUMNS) + 1)

    def rows(self, result: CountsResult) -> list[str]:
        rows = []
        for number, build in enumerate(result.builds):
            cells = [
                human(result.median(build, figure))
                + (f" ({percent(result.difference(build, figure))})" if build != BASELINE else "")
                if figure in result.figures
                else "—"
                for figure in _COLUMNS
            ]
            spread = f"{result.spread(build, result.judged) * 100:.2f} %"
            if result.judged != "estimate":
                spread += f" (whole: {result.spread(build) * 100:.2f} %)"
            rows.append(
                f"| {self.title(result) if number == 0 else ''} | {_held(result) if number == 0 else ''} | "
                f"{self.named.get(build, build)} | " + " | ".join(cells) + f" | {spread} |"
            )
        return rows

    def sections(self, flags: list[str], invalid: list[str]) -> list[list[str]]:  # noqa: ARG002  (no flags)
        best = best_on_held_out(self.results, self.named)
        gate = self.meta.get("gate")
        verdicts = gate.get("verdicts") if isinstance(gate, dict) else None
        return [
            [LEGEND],
            ["What the counts cannot show:", *(f"- {line}" for line in LIMITATIONS)],
            [best[0].upper() + best[1:] + "."] if best else [],
            worse_section(
                regressions(self.results, self.named), "Worse than the baseline by the estimate (counts are exact):"
            ),
            ["Gate (by the estimate):", *(f"- {v}" for v in verdicts)] if verdicts else [],
            invalid_section(invalid),
        ]


def markdown(results: Sequence[CountsResult], meta: Meta) -> str:
    """The table for a person (:func:`recipes.bench.cpu_report.markdown_of`, the one writer)."""
    return markdown_of(CountsPage(results, meta))


def _held(result: CountsResult) -> str:
    return str((result.held_out or {}).get("status", "—"))


def write_chart(path: Path, results: Sequence[CountsResult], meta: Meta) -> None:
    """A PNG: per scenario and candidate the change of instructions, of mispredictions and of the estimate
    (bars), and each paired trial's change of the estimate (points)."""
    # the mispredictions' bar is their sum, and its legend says so (the table has the two apart)
    summed = "mispredicts (cond. + ind.)"
    bars = (("instructions", "tab:blue", 0.25), (summed, "tab:orange", 0.0), ("estimate", "tab:green", -0.25))

    def draw(axes: Any, row: int, shown: CountsResult, candidate: str, legend: Callable[[str], str | None]) -> None:
        for name, colour, offset in bars:
            if name == summed:
                base = shown.median(BASELINE, "cond_mispredicts") + shown.median(BASELINE, "ind_mispredicts")
                cand = shown.median(candidate, "cond_mispredicts") + shown.median(candidate, "ind_mispredicts")
                value = cand / base - 1 if base else 0.0
            else:
                value = shown.difference(candidate, name)
            axes.barh(row + offset, value * 100, height=0.23, color=colour, alpha=0.6, label=legend(name))
        points = [d * 100 for d in shown.paired(candidate)]
        axes.scatter(points, [row - 0.25] * len(points), color="black", s=10, zorder=3,
                     label=legend("paired trials (estimate)"))  # fmt: skip

    page = CountsPage(results, meta)
    texts = (
        f"change per run or request, {page.candidates_named} vs {page.named[BASELINE]}, % (valgrind's simulation)",
        "Instructions, branch mispredictions and the estimate of cycles (medians)",
    )
    draw_chart(path, page, 0.6, draw, texts)
