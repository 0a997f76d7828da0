"""What the trials say: medians, paired differences, the canary, and the table (Markdown, JSON, PNG).

Everything here is pure but the three writers, which write atomically (temp file + rename). The chart
needs matplotlib, which the ``bench`` session installs in its own venv; :func:`write_chart` runs there
(``python -m recipes.bench.chart <results.json> <chart.png>``).
"""

from __future__ import annotations

import json
import math
import statistics
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from recipes.bench import canary, design, procstat
from recipes.bench.meta import BuildMeta, Coverage, HeldOutJson, Meta
from recipes.errors import MissingInput
from recipes.files import atomic_output, write_atomically
from recipes.workdir import BenchDir

BASELINE = "baseline"
CANDIDATE = "candidate"


def build_keys(count: int) -> tuple[str, ...]:
    """The keys of ``count`` builds in the trials: the baseline, the candidate, then candidate-2, candidate-3…"""
    if count < 2:
        raise ValueError(f"a comparison needs at least two builds, got {count}")
    return (BASELINE, CANDIDATE, *(f"{CANDIDATE}-{n}" for n in range(2, count)))


class Judged:
    """A trial of either measure (:class:`Trial`, the counts' ``CountTrial``), as its scenario judges it: valid
    unless it has a problem."""

    build: str
    index: int
    problem: str

    @property
    def valid(self) -> bool:
        return not self.problem


JudgedT = TypeVar("JudgedT", bound=Judged)
RecordT = TypeVar("RecordT")
TabledT = TypeVar("TabledT", bound="Result[Any]")


def from_fields(kind: type[RecordT], data: dict[str, Any]) -> RecordT:
    """A dataclass (a trial of either measure) from its JSON: its own fields, the figures derived from them left."""
    keys = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    return kind(**{k: v for k, v in data.items() if k in keys})


class Result(ABC, Generic[JudgedT]):
    """What a scenario's result is, of either measure (:class:`ScenarioResult`, the counts' ``CountsResult``): its
    trials by build, and whether they all stand; as the one Markdown writer (:func:`markdown_of`), the one
    results.json writer (:func:`to_json`) and the charts (:func:`chart_rows`) have it."""

    name: str
    title: str
    trials: list[JudgedT]
    problem: str  # set when the scenario could not run at all
    unit: str  # what a trial's count counts: "request" or "run"
    held_out: HeldOutJson | None
    builds: list[str]

    @property
    def candidates(self) -> list[str]:
        return self.builds[1:]

    def of(self, build: str) -> list[JudgedT]:
        return [t for t in self.trials if t.build == build]

    @property
    def invalid_trials(self) -> list[JudgedT]:
        return [t for t in self.trials if not t.valid]

    @property
    def measure_problem(self) -> str:
        """Why the measure itself finds the trials wanting (CPU time: a server not kept busy), or ``""``."""
        return ""

    @property
    def valid(self) -> bool:
        return (
            not self.problem
            and not self.invalid_trials
            and all(self.of(b) for b in self.builds)
            and not self.measure_problem
        )

    @property
    def why_invalid(self) -> str:
        if self.problem:
            return self.problem
        if bad := self.invalid_trials:
            where = f"{bad[0].build} #{bad[0].index}"
            return f"{len(bad)} of {len(self.trials)} trials invalid; first ({where}): {bad[0].problem}"
        if self.measure_problem:
            return self.measure_problem
        return "" if self.valid else "no trials"

    def head_json(self) -> dict[str, Any]:
        """The keys results.json has first for a scenario of either measure."""
        return {"name": self.name, "title": self.title, "unit": self.unit, "held_out": self.held_out,
                "builds": self.builds}  # fmt: skip

    def verdict_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "problem": self.why_invalid, "scenario_problem": self.problem}

    @abstractmethod
    def as_json(self) -> dict[str, Any]: ...


@dataclass
class Trial(Judged):
    """One measured trial of one build: the CPU time of the server (or of the command's runs) over what it did."""

    build: str  # BASELINE, CANDIDATE or CANDIDATE-n
    index: int
    requests: int  # asked of the load generator (or runs asked of a command)
    answered: int  # requests it saw completed (runs that exited as expected)
    server_cpu: float  # seconds of user + system time of the server process, all threads (or of the runs)
    wall: float  # seconds the load generator (or the runs) took
    load_cpu: float = 0.0  # the load generator's own user + system seconds
    harness_cpu: float = 0.0  # this process's user + system seconds during the trial
    upstream_cpu: float | None = None  # the upstream backend's, where there is one
    server_user: float | None = None  # the user-time part of server_cpu (the rest is the kernel's)
    core_idle: float | None = None  # seconds the server's pinned core sat idle during the load (servers)
    status: dict[str, int] = field(default_factory=dict)
    problem: str = ""  # why the trial is invalid; empty when it is valid

    @property
    def us_per_request(self) -> float:
        return self.server_cpu / self.answered * 1e6 if self.answered else math.nan

    @property
    def user_us(self) -> float:
        """User time per request (or run), µs; NaN when the split is unknown."""
        return self.server_user / self.answered * 1e6 if self.answered and self.server_user is not None else math.nan

    @property
    def system_us(self) -> float:
        """System (kernel) time per request (or run), µs."""
        return self.us_per_request - self.user_us

    @property
    def user_share(self) -> float:
        return self.server_user / self.server_cpu if self.server_user is not None and self.server_cpu else math.nan

    @property
    def busy(self) -> float:
        """CPU seconds of the server per second its pinned core could give it (see :func:`design.busy`)."""
        return design.busy(self.server_cpu, self.wall, self.core_idle)

    @property
    def ticks(self) -> float:
        """The trial's CPU time in the kernel's clock ticks."""
        return design.ticks(self.server_cpu, procstat.CLOCK_TICKS)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("us_per_request", "user_us", "system_us"):
            data[key] = rounded(getattr(self, key))
        data.update(valid=self.valid, busy=rounded(self.busy, 4), ticks=round(self.ticks, 1))
        for key in ("server_cpu", "wall", "load_cpu", "harness_cpu"):
            data[key] = round(data[key], 6)
        return data


@dataclass
class ScenarioResult(Result[Trial]):
    """Every trial of one scenario, every build, and the canary around them."""

    name: str
    title: str
    trials: list[Trial]
    canary_before: float
    canary_after: float
    problem: str = ""  # set when the scenario could not run at all
    unit: str = "request"  # what a trial's count counts: "request" or "run"
    held_out: HeldOutJson | None = None
    builds: list[str] = field(default_factory=lambda: [BASELINE, CANDIDATE])
    kind: str = ""  # the scenario's kind: "http", "handshakes" or "command" ("": from its unit)
    paced: bool = False  # a fixed request rate (h2load --rps): the server is idle between requests by design
    connections: int = 1
    streams: int = 1

    @property
    def server(self) -> bool:
        """A server scenario (its figure is the server's, from /proc), not a command's."""
        return self.unit == "request"

    @property
    def measured(self) -> list[Trial]:
        return [t for t in self.trials if t.valid]

    @property
    def not_busy(self) -> list[Trial]:
        """The valid trials of a server scenario whose server was not kept busy (none when paced by design)."""
        if not self.server or self.paced:
            return []
        return [t for t in self.measured if design.not_busy(t.server_cpu, t.wall, procstat.CLOCK_TICKS, t.core_idle)]

    @property
    def too_short(self) -> list[Trial]:
        """The valid trials of fewer than :data:`recipes.bench.design.MIN_TICKS` ticks of CPU time."""
        return [t for t in self.measured if design.too_short(t.server_cpu, procstat.CLOCK_TICKS)]

    @property
    def load_bound(self) -> float | None:
        """The load generator's median CPU per wall second over the trials whose server was not kept busy, when it
        was flat out (:func:`recipes.bench.design.client_bound`): the client was the bound."""
        flagged = self.not_busy  # none: client_bound has no figure, None
        return design.client_bound([t.load_cpu for t in flagged], [t.wall for t in flagged])

    @property
    def busy_fix(self) -> str:
        return design.busy_fix(self.kind or "http", self.connections, self.streams, self.load_bound)

    @property
    def measure_problem(self) -> str:
        """Why the scenario is invalid for a server not kept busy in most of its trials, or ``""`` (also when the
        load generator was flat out: the server waited for a client that could go no faster)."""
        flagged, measured = self.not_busy, self.measured
        if not design.mostly(len(flagged), len(measured)) or self.load_bound is not None:
            return ""
        return design.busy_refusal(
            [t.busy for t in flagged], len(measured), self.kind or "http", self.connections, self.streams
        )

    @property
    def tick_note(self) -> str:
        """The trials too short for the kernel's tick, and the count that would do, or ``""``."""
        short = self.too_short
        if not short:
            return ""
        count = max(t.requests for t in self.trials)
        cpu = statistics.median(t.server_cpu for t in short)
        what = "its total (/proc counts in ticks)" if self.server else "its user/system split (tick-sampled)"
        tick_ms = 1000 / procstat.CLOCK_TICKS
        return (
            f"{len(short)} of {len(self.measured)} trials under {design.MIN_TICKS} ticks of CPU time "
            f"({design.MIN_TICKS * tick_ms / 1000:g} s at {tick_ms:g} ms a tick, about 1 % resolution; median "
            f"{cpu:.2f} s): {what} is coarser than 1 %; "
            f"{design.plural(design.count_that_would_do(count, cpu, procstat.CLOCK_TICKS), self.unit)} per trial "
            "would do (the scenario's count, or --scale)"
        )

    def median_of_totals(self, build: str) -> float:
        """The median of the trials' totals (user + system per request of each trial)."""
        return statistics.median(t.us_per_request for t in self.of(build))

    def median(self, build: str) -> float:
        """The total per request (or run): the median user time plus the median system time, so that the parts
        a reader adds make the total; the median of the trials' totals where the split is unknown."""
        total = self.median_user(build) + self.median_system(build)
        return self.median_of_totals(build) if math.isnan(total) else total

    def median_user(self, build: str) -> float:
        return statistics.median(t.user_us for t in self.of(build))

    def median_system(self, build: str) -> float:
        return statistics.median(t.system_us for t in self.of(build))

    def paired_differences(self, candidate: str = CANDIDATE) -> list[float]:
        """Per trial index: candidate / baseline - 1 (negative: the candidate spends less CPU per request)."""
        base = {t.index: t.us_per_request for t in self.of(BASELINE)}
        cand = {t.index: t.us_per_request for t in self.of(candidate)}
        return [cand[i] / base[i] - 1 for i in sorted(base) if i in cand]

    def spread(self, build: str) -> float:
        """(max - min) / median of the build's trials' CPU time per request (or run): what repeating moved."""
        values = [t.us_per_request for t in self.of(build)]
        middle = statistics.median(values) if values else 0.0
        return (max(values) - min(values)) / middle if middle else 0.0

    def difference_of(self, candidate: str) -> float:
        """Median of the candidate over median of the baseline, minus one."""
        return self.median(candidate) / self.median(BASELINE) - 1

    def parts_of(self, candidate: str) -> tuple[float, float]:
        """The change of the user and of the system time per request, each as a share of the baseline's total:
        their sum is :meth:`difference_of` (the total is the sum of the two medians)."""
        base = self.median(BASELINE)
        return (
            (self.median_user(candidate) - self.median_user(BASELINE)) / base,
            (self.median_system(candidate) - self.median_system(BASELINE)) / base,
        )

    @property
    def difference(self) -> float:
        return self.difference_of(CANDIDATE)

    def same_side_of(self, candidate: str) -> tuple[int, int]:
        """How many paired trials are on the side of zero of the median difference, out of how many."""
        diffs = self.paired_differences(candidate)
        difference = self.difference_of(candidate)
        sign = math.copysign(1, difference) if difference else 0
        return sum(1 for d in diffs if d and math.copysign(1, d) == sign), len(diffs)

    @property
    def same_side(self) -> tuple[int, int]:
        return self.same_side_of(CANDIDATE)

    @property
    def canary_drift(self) -> float:
        return canary.drift(self.canary_before, self.canary_after)

    @property
    def held_out_text(self) -> str:
        if not self.held_out:
            return "—"
        what = "paths" if self.server else "arguments"
        if self.held_out.get("status") == "partly":
            return f"partly ({self.held_out.get('trained')} of {self.held_out.get('total')} {what} trained)"
        return f"{self.held_out.get('status', '?')} ({self.held_out.get('rule', what)})"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            **self.head_json(),
            "kind": self.kind,
            "paced": self.paced,
            "connections": self.connections,
            "streams": self.streams,
            **self.verdict_json(),
            "canary_before": round(self.canary_before, 6),
            "canary_after": round(self.canary_after, 6),
            "canary_drift": round(self.canary_drift, 6),
            "canary_flagged": canary.flagged(self.canary_drift),
            "trials": [t.as_json() for t in self.trials],
            "server_busy": [rounded(t.busy, 4) for t in self.trials] if self.server else None,
            "busy_min": design.BUSY_MIN,
            "not_busy_trials": [f"{t.build} #{t.index}" for t in self.not_busy],
            "min_ticks": design.MIN_TICKS,
            "too_short_trials": [f"{t.build} #{t.index}" for t in self.too_short],
            "tick_note": self.tick_note,
        }
        if self.valid:
            same, total = self.same_side
            data.update(
                baseline_us_per_request=round(self.median(BASELINE), 3),
                candidate_us_per_request=round(self.median(CANDIDATE), 3),
                difference=round(self.difference, 6),
                paired_differences=[round(d, 6) for d in self.paired_differences()],
                median_paired_difference=round(statistics.median(self.paired_differences()), 6),
                same_side=same,
                paired_trials=total,
                overhead=overhead(self),
                medians={
                    b: {
                        "user_us": rounded(self.median_user(b)),
                        "system_us": rounded(self.median_system(b)),
                        "total_us": rounded(self.median(b)),  # user_us + system_us
                        "median_of_totals_us": rounded(self.median_of_totals(b)),
                    }
                    for b in self.builds
                },
                comparisons=[self._comparison(c) for c in self.candidates],
            )
        return data

    def _comparison(self, candidate: str) -> dict[str, Any]:
        (user, system), (same, total) = self.parts_of(candidate), self.same_side_of(candidate)
        return {
            "build": candidate,
            "difference": round(self.difference_of(candidate), 6),
            "user_part": rounded(user, 6),
            "system_part": rounded(system, 6),
            "paired_differences": [round(d, 6) for d in self.paired_differences(candidate)],
            "same_side": same,
            "paired_trials": total,
        }


def rounded(value: float, digits: int = 3) -> float | None:
    """``value`` rounded for results.json; None for NaN."""
    return None if math.isnan(value) else round(value, digits)


def overhead(result: ScenarioResult) -> dict[str, float | None]:
    """Who was busy during the trials: CPU seconds per wall second (1.0 = one core flat out), medians.

    The load generator near 1.0 and the harness near 0 say the load generator is the bottleneck of the
    load side, not this process; the server's figure says how loaded its core was.
    """

    def med(values: Sequence[float]) -> float | None:
        return round(statistics.median(values), 4) if values else None

    trials = [t for t in result.trials if t.wall > 0]
    upstream = [t.upstream_cpu / t.wall for t in trials if t.upstream_cpu is not None]
    user = [t.server_user / t.server_cpu for t in trials if t.server_user is not None and t.server_cpu > 0]
    return {
        "server_user_share": med(user),
        "server": med([t.server_cpu / t.wall for t in trials]),
        "load_generator": med([t.load_cpu / t.wall for t in trials]),
        "harness": med([t.harness_cpu / t.wall for t in trials]),
        "upstream": med(upstream),
        "harness_cpu_per_request_us": med([t.harness_cpu / t.answered * 1e6 for t in trials if t.answered]),
    }


def percent(fraction: float) -> str:
    """``-0.123`` -> ``\u221212.3 %`` (a real minus sign, as in the reference's table)."""
    return f"{fraction * 100:+.1f} %".replace("-", "\u2212")


def build_lines(entries: Sequence[BuildMeta], named: dict[str, str], meta: Meta) -> list[str]:
    """The table's lines on the builds, of either measure: each one's role, label and binary (and its C
    compilers, where ``meta["builds"]`` recorded them), and a warning when the builds whose C compilers are known
    had their C compiled by different ones: the comparison then mixes the compiler with the profile."""
    lines = []
    for entry in entries:
        role = "baseline" if entry.get("key") == BASELINE else "candidate"
        c_code = entry.get("c_compilers")  # missing in a result of a bench that did not record it
        lines.append(
            f"- {role} ({named.get(entry.get('key', ''), entry.get('key'))}): `{entry.get('binary', '?')}`"
            + (f"; its C and C++: {c_code or 'not known (a binary given by path)'}" if "c_compilers" in entry else "")
        )
    known = {str(b.get("c_compilers")) for b in meta.get("builds", []) if isinstance(b, dict) and b.get("c_compilers")}
    compilers = {
        tuple(sorted(part.split(": ", 1)[-1] for part in text.split("; "))) for text in known if text != "no C"
    }
    if len(compilers) > 1:
        lines.append(
            "- ⚠ the builds' C and C++ were compiled by different compilers: their difference is not the profile's "
            "alone"
        )
    return lines


def regressions(results: Sequence[ScenarioResult], named: dict[str, str]) -> list[str]:
    """The summary's lines on the scenarios, trained or held out, on which a candidate spends more CPU time per
    request (or run) than the baseline beyond the trials' spread (the larger of the two builds'), with the figure;
    one line saying there is none. They are said, never a failure: ``--gate-trained`` judges the exit code."""

    def worse(result: ScenarioResult, candidate: str) -> str:
        difference = result.difference_of(candidate)
        spread = max(result.spread(BASELINE), result.spread(candidate))
        said = f"CPU time {percent(difference)} per {result.unit}, beyond the trials' spread ({spread * 100:.1f} %)"
        return said if difference > spread else ""

    return worse_lines(results, named, worse, "beyond the trials' spread")


def worse_lines(
    results: Sequence[TabledT], named: dict[str, str], worse: Callable[[TabledT, str], str], by: str
) -> list[str]:
    """The summary's ``worse:`` lines of either measure, a line per valid scenario and candidate that ``worse``
    finds worse (its words, else ``""``); one line saying there is none (``by``: by what)."""
    base = named.get(BASELINE, BASELINE)
    valid = [r for r in results if r.valid]
    lines = []
    for result in valid:
        for candidate in result.candidates:
            said = worse(result, candidate)
            if said:
                status = str((result.held_out or {}).get("status", ""))  # "" when unknown
                status = "partly trained" if status == "partly" else status
                lines.append(
                    f"worse: {named.get(candidate, candidate)} vs {base} on {status + ' ' if status else ''}scenario "
                    f"{result.name}: {said}"
                )
    if not lines and valid:
        lines.append(f"worse than {base} {by}: none of the {len(valid)} valid scenarios")
    return lines


#: what to do about a held-out scenario made worse, said once under the ``worse:`` lines (docs/worth.md: the cold
#: inlining thresholds at 225 met both aims on ripgrep and dufs, and kept too little of the trained gains on jaq,
#: grex and simple-http-server)
HELD_OUT_HINT = (
    "held out and worse: PGO compiles what the training never ran as cold, and LLVM inlines less there; train it (a "
    "phase that runs it), or measure the cold inlining thresholds at 225: --profile-use-args='-inline-cold-callsite-"
    "threshold=225 -inlinecold-threshold=225' (docs/worth.md, held-out paths)"
)


def held_out_hint(lines: Sequence[str]) -> list[str]:
    """:data:`HELD_OUT_HINT` when a ``worse:`` line is of a held-out or partly trained scenario, else nothing."""
    held = (" on held-out scenario ", " on partly trained scenario ")
    worse = [line for line in lines if line.startswith("worse: ")]
    return [HELD_OUT_HINT] if any(h in line for line in worse for h in held) else []


def labels(meta: Meta, builds: Sequence[str]) -> dict[str, str]:
    """Each build's label: from ``meta["builds"]``, else the baseline's and candidate's labels, else the key."""
    known = {b["key"]: b["label"] for b in meta.get("builds", []) if isinstance(b, dict) and "key" in b}
    known.setdefault(BASELINE, meta.get("baseline_label", BASELINE))
    known.setdefault(CANDIDATE, meta.get("candidate_label", CANDIDATE))
    return {b: str(known.get(b, b)) for b in builds}


def per_what(results: Sequence[ScenarioResult]) -> str:
    """``request``, ``run`` or ``request or run``: what the scenarios' figures are per."""
    units = list(dict.fromkeys(r.unit for r in results)) or ["request"]
    return " or ".join(units)


def _orders_text(meta: Meta, named: dict[str, str]) -> str:
    orders = (meta.get("design") or {}).get("orders") or []
    if not orders:
        return ""
    first = orders[: len(orders[0])]  # one full rotation
    shown = " / ".join(", ".join(named.get(k, k) for k in order) for order in first)
    return f" ({shown}{' …' if len(orders) > len(first) else ''})"


class Page(ABC, Generic[TabledT]):
    """A measure's words on the one Markdown writer's page (:func:`markdown_of`), of its ``results`` and the run's
    ``meta`` (results.json's, its builds ``named`` by :func:`labels`)."""

    def __init__(self, results: Sequence[TabledT], meta: Meta) -> None:
        self.results = results
        self.meta = meta
        self.builds = results[0].builds if results else [BASELINE, CANDIDATE]
        self.named = labels(meta, self.builds)
        self.candidates_named = ", ".join(self.named[b] for b in self.builds[1:])  # the heading's "PGO, … vs plain"

    @abstractmethod
    def heading(self) -> list[str]:
        """The title, the builds and how the trials ran, down to the table's head and separator."""

    def flags(self, result: TabledT) -> list[str]:  # noqa: ARG002  (a page's own)
        """What to read a scenario's figures with (its trials too short to split, or not kept busy): none."""
        return []

    @abstractmethod
    def rows(self, result: TabledT) -> list[str]:
        """A valid scenario's rows: the baseline's, then each candidate's."""

    @abstractmethod
    def invalid_row(self, result: TabledT) -> str: ...

    @staticmethod
    def title(result: TabledT) -> str:
        """A scenario's cell of the table: its title and what its figures are per."""
        return f"{result.title} (per {result.unit})"

    @abstractmethod
    def sections(self, flags: list[str], invalid: list[str]) -> list[list[str]]:
        """The sections under the table, in order; an empty one is left out (:func:`invalid_section`)."""


def markdown_of(page: Page[Any]) -> str:
    """The one Markdown writer of results.md, of either measure (``page``: its words): the heading, a table of
    a row per build of each scenario (one row when it is invalid), then the page's sections."""
    lines = page.heading()
    flags: list[str] = []
    invalid: list[str] = []
    for result in page.results:
        flags += page.flags(result)
        if result.valid:
            lines += page.rows(result)
        else:
            lines.append(page.invalid_row(result))
            invalid.append(f"- {result.title}: invalid: {result.why_invalid}")
    for section in page.sections(flags, invalid):
        if section:
            lines += ["", *section]
    return "\n".join(lines) + "\n"


def invalid_section(invalid: list[str]) -> list[str]:
    """The invalid scenarios and why, under the table (none: no section)."""
    return ["Invalid scenarios:", *invalid] if invalid else []


def worse_section(lines: list[str], heading: str) -> list[str]:
    """The scenarios a candidate made worse (:func:`regressions`' ``worse:`` lines), under ``heading``."""
    worse = [line.removeprefix("worse: ") for line in lines if line.startswith("worse: ")]
    return [heading, *(f"- {line}" for line in worse)] if worse else []


class CpuPage(Page[ScenarioResult]):
    """CPU time's words on the page (:class:`Page`)."""

    def heading(self) -> list[str]:
        results, meta, named = self.results, self.meta, self.named
        lines = [f"# CPU time per {per_what(results)}: {self.candidates_named} vs {named[BASELINE]}", ""]
        lines += build_lines(
            meta.get("builds", [])
            or [
                {"key": BASELINE, "binary": meta.get("baseline", "?")},
                {"key": CANDIDATE, "binary": meta.get("candidate", "?")},
            ],
            named,
            meta,
        )
        core, trials = meta.get("server_core", "?"), meta.get("trials")
        where = []
        if any(r.server for r in results):
            where.append(f"server on core {core}, load generator (h2load) on core {meta.get('load_core', '?')}")
        if any(not r.server for r in results):
            where.append(f"the command's runs on core {core}")
        return [
            *lines,
            f"- {design.plural(trials, 'trial') if isinstance(trials, int) else '? trials'} per scenario and build, "
            f"in rounds of one trial of each build, {design.DESIGN_TEXT}{_orders_text(meta, named)}; "
            f"{'; '.join(where)}",
            f"- command: `{meta.get('command', '?')}`",
            "",
            "| scenario | held out (rule) | build | user | system | total (user + system) | difference | user part | "
            "system part | trials on the same side of zero | canary drift |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]

    def flags(self, result: ScenarioResult) -> list[str]:
        flags = [f"- {result.title}: {result.tick_note}."] if result.tick_note else []
        if result.not_busy and not result.measure_problem:
            flags.append(
                f"- {result.title}: {len(result.not_busy)} of {len(result.measured)} trials with the server under "
                f"{design.BUSY_MIN} {design.BUSY_UNIT} ("
                + ", ".join(f"{self.named.get(t.build, t.build)} #{t.index}: {t.busy:.2f}" for t in result.not_busy)
                + f"); give {result.busy_fix}."
            )
        return flags

    def invalid_row(self, result: ScenarioResult) -> str:
        dashes = " — |" * 7
        return f"| {self.title(result)} | {result.held_out_text} | invalid |{dashes} {_drift(result)} |"

    def rows(self, result: ScenarioResult) -> list[str]:
        named = self.named
        rows = [
            f"| {self.title(result)} | {result.held_out_text} | {named[BASELINE]} | "
            f"{design.duration(result.median_user(BASELINE))} | {design.duration(result.median_system(BASELINE))} | "
            f"{design.duration(result.median(BASELINE))} | | | | | {_drift(result)} |"
        ]
        for candidate in result.candidates:
            user, system = result.parts_of(candidate)
            same, total = result.same_side_of(candidate)
            rows.append(
                f"| | | {named.get(candidate, candidate)} | {design.duration(result.median_user(candidate))} | "
                f"{design.duration(result.median_system(candidate))} | {design.duration(result.median(candidate))} | "
                f"{percent(result.difference_of(candidate))} | {_percent_or_dash(user)} | "
                f"{_percent_or_dash(system)} | {same}/{total} | |"
            )
        return rows

    def sections(self, flags: list[str], invalid: list[str]) -> list[list[str]]:
        results = self.results
        legend = [_legend(results)]
        flagged = [r.title for r in results if canary.flagged(r.canary_drift)]
        if flagged:
            legend.append(
                f"Canary above tolerance in {len(flagged)} of {len(results)} scenarios: {', '.join(flagged)}."
            )
        coverage = self.meta.get("coverage")
        return [
            legend,
            worse_section(regressions(results, self.named), "Worse than the baseline beyond the trials' spread:"),
            ["Flagged trials (the figures stand, read them with this):", *flags] if flags else [],
            invalid_section(invalid),
            coverage_markdown(coverage) if isinstance(coverage, dict) else [],
            busy_markdown(results),
        ]


def markdown(results: Sequence[ScenarioResult], meta: Meta) -> str:
    """The table for a person (and for the README)."""
    return markdown_of(CpuPage(results, meta))


def _drift(result: ScenarioResult) -> str:
    return percent(result.canary_drift) + (" ⚠" if canary.flagged(result.canary_drift) else "")


def _legend(results: Sequence[ScenarioResult]) -> str:
    """What the table's columns mean, under it."""
    source = []
    if any(r.server for r in results):
        source.append("per request for a server (all its threads, from /proc)")
    if any(not r.server for r in results):
        source.append("per run for a command (wait4)")
    return (
        f"CPU time {' and '.join(source)}: user is the median of the trials' user time, system the median of their "
        "system (kernel) time, total their sum; a profile can only shrink the user part. "
        "The kernel splits a process's run time into user and system time by sampling at its timer ticks: over "
        "trials of a few ticks the split is noise (raise the scenario's count or --scale). "
        "Difference: the candidate's total over the baseline's, minus one (negative: less CPU); user part and "
        "system part: each one's change as a share of the baseline's total, so the two parts add up to the "
        "difference. "
        "Same side: paired trials (trial i of each build, their totals) whose difference has the sign of the "
        "difference. "
        "Held out: whether the scenario's "
        + (
            "paths"
            if all(r.server for r in results)
            else "arguments"
            if not any(r.server for r in results)
            else "paths (or arguments)"
        )
        + " occur in the training workload (rule: paths or arguments compared), or as the scenario declares it "
        "(held_out = true or false; rule: declared). "
        f"Canary: a fixed SHA-256 loop on the measured core before and after the scenario; ⚠ above "
        f"{canary.TOLERANCE * 100:.0f} %."
    )


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _us(value: float | None) -> str:
    return "—" if value is None else design.duration(value)


def busy_markdown(results: Sequence[ScenarioResult]) -> list[str]:
    """Who was busy: CPU seconds per wall second, medians; a server's figure per trial, flagged under
    :data:`recipes.bench.design.BUSY_MIN`."""
    lines = ["## Who was busy (CPU seconds per wall second during the trials, medians)"]
    servers = [r for r in results if r.server]
    commands = [r for r in results if not r.server]
    if servers:
        lines += [
            "",
            f"The server's figure per trial, in the order run, is its {design.BUSY_UNIT} (its CPU time over its CPU "
            "time plus its pinned core's idle time: what other processes ran there is left out); "
            f"⚠ under {design.BUSY_MIN} (not kept busy: a scenario "
            "with most of its trials so is invalid), · for a fixed rate (idle between requests by design) or a "
            f"trial under {design.BUSY_JUDGED_TICKS} ticks.",
            "",
            "| scenario | server | server per trial | load generator (h2load) | harness | upstream "
            "| harness per request | server in user space |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for result in servers:
            busy = overhead(result)
            share = "—" if busy["server_user_share"] is None else f"{busy['server_user_share'] * 100:.0f} %"
            flagged = {id(t) for t in result.not_busy}
            judged = not result.paced
            per_trial = " ".join(
                f"{t.busy:.2f}"
                + (" ⚠" if id(t) in flagged else "" if judged and t.ticks >= design.BUSY_JUDGED_TICKS else " ·")
                for t in result.trials
                if t.wall > 0
            )
            lines.append(
                f"| {result.title} | {_fmt(busy['server'])} | {per_trial or '—'} | {_fmt(busy['load_generator'])} | "
                f"{_fmt(busy['harness'])} | {_fmt(busy['upstream'])} | {_us(busy['harness_cpu_per_request_us'])} | "
                f"{share} |"
            )
    if commands:
        lines += [
            "",
            "| scenario | the runs | harness | harness per run | runs in user space |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for result in commands:
            busy = overhead(result)
            share = "—" if busy["server_user_share"] is None else f"{busy['server_user_share'] * 100:.0f} %"
            lines.append(
                f"| {result.title} | {_fmt(busy['server'])} | {_fmt(busy['harness'])} | "
                f"{_us(busy['harness_cpu_per_request_us'])} | {share} |"
            )
    return lines


def _percent_or_dash(value: float) -> str:
    return "—" if math.isnan(value) else percent(value)


#: the C functions the bench ran and the training did not, named in the report
TOP_C = 10


def coverage_markdown(coverage: Coverage) -> list[str]:
    """The coverage check's section: the overlap of the bench's profile with the training's, the hot functions
    the training never ran."""
    if "skipped" in coverage:
        return ["## Training coverage of the bench", "", f"Not measured: {coverage['skipped']}."]
    lines = [
        "## Training coverage of the bench",
        "",
        f"The scenarios run once on the instrumented binary (`{coverage.get('instrumented', '?')}`), their profile "
        f"merged (`{coverage.get('bench_profile', '?')}`) and compared with the training's "
        f"(`llvm-profdata overlap`): edge profile overlap **{coverage.get('overlap_percent', '?')} %** "
        f"(100 %: the bench runs the code the training ran, in the same proportions). "
        f"{coverage.get('bench_functions_untrained', '?')} of the {coverage.get('bench_functions', '?')} functions "
        "the bench executed were never executed in training.",
    ]
    c_code = coverage.get("c_code")
    if c_code:
        untrained = c_code.get("bench_untrained") or []
        lines += [
            "",
            f"The C and C++ of build scripts: {c_code.get('functions', '?')} functions, "
            f"{c_code.get('with_training_counts', '?')} with counts in the training's profile, "
            f"{c_code.get('without_training_counts', '?')} without; the bench executed "
            f"{c_code.get('bench_executed', '?')}, {len(untrained)} of them never in training"
            + (f" ({', '.join(f'`{f}`' for f in untrained[:TOP_C])})" if untrained else "")
            + ".",
        ]
    for problem in coverage.get("problems") or []:
        lines.append(f"- not as expected on the instrumented binary: {problem}")
    missed = coverage.get("untrained_hot_functions") or []
    if missed:
        lines += [
            "",
            f"The {len(missed)} hottest functions of the bench that the training never executed "
            "(sum of their counters in the bench's profile):",
            "",
            "| function | bench counts |",
            "| --- | ---: |",
        ]
        lines += [f"| `{f['function']}` | {f['count']:,} |" for f in missed]
    else:
        lines += ["", "Every function the bench executed was executed by the training too."]
    return lines


def to_json(
    results: Sequence[Result[Any]], meta: Mapping[str, object], heading: Mapping[str, object] | None = None
) -> dict[str, Any]:
    """results.json: the run's meta, the measure's ``heading`` (the counts': :data:`counts_report.HEADING`), the
    scenarios."""
    return {**meta, **(heading or {}), "scenarios": [r.as_json() for r in results]}


def read_results(data: dict[str, Any], kind: type[TabledT], trial: type[Any]) -> tuple[list[TabledT], Meta]:
    """A results.json of either measure: each scenario a ``kind`` of ``trial`` records (:func:`from_fields`: a key
    missing in an older one takes the field's default; its problem is ``scenario_problem``, not the verdict's), and
    the run's meta."""
    meta = cast("Meta", {k: v for k, v in data.items() if k != "scenarios"})  # as written, unchecked
    scenarios = [
        {**s, "problem": s.get("scenario_problem", ""), "trials": [from_fields(trial, t) for t in s["trials"]]}
        for s in data["scenarios"]
    ]
    return [from_fields(kind, s) for s in scenarios], meta


def from_json(data: dict[str, Any]) -> tuple[list[ScenarioResult], Meta]:
    return read_results(data, ScenarioResult, Trial)


def write_results(
    out: BenchDir,
    results: Sequence[TabledT],
    meta: Meta,
    markdown: Callable[[Sequence[TabledT], Meta], str],
    heading: Mapping[str, object] | None = None,
) -> None:
    """The one writer of results.json (:func:`to_json`) and results.md (``markdown``: the measure's table), of
    either measure."""
    write_atomically(out.results_json, json.dumps(to_json(results, meta, heading), indent=2, ensure_ascii=False) + "\n")
    write_atomically(out.results_md, markdown(results, meta))


def chart_rows(results: Sequence[TabledT], named: dict[str, str]) -> list[tuple[str, TabledT | None, str]]:
    """A chart's rows: (label, the result or None when it is invalid, the candidate), one per scenario and
    candidate, the candidate named (``named``: :func:`labels`) when there are several."""
    rows: list[tuple[str, TabledT | None, str]] = []
    for result in results:
        for candidate in result.candidates:
            label = result.title + (f" — {named.get(candidate, candidate)}" if len(result.candidates) > 1 else "")
            rows.append((label if result.valid else label + " (invalid)", result if result.valid else None, candidate))
    return rows


def draw_chart(
    path: Path,
    page: Page[TabledT],
    row_height: float,
    draw: Callable[[Any, int, TabledT, str, Callable[[str], str | None]], None],
    texts: tuple[str, str],
) -> None:
    """A PNG of either measure (``page``: its results, its builds named), a row per scenario and candidate
    (:func:`chart_rows`), the invalid ones empty: ``draw`` draws a valid row (the axes, its position, its result and
    candidate, and what labels a mark in the legend: its text on the first row drawn, None after); ``texts``: the x
    axis's label and the title."""
    try:
        import matplotlib  # noqa: PLC0415  (only the bench session's venv has it)
    except ImportError as exc:
        raise MissingInput("matplotlib is not installed here", "run the chart in `nox -s bench`'s venv") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = chart_rows(page.results, page.named)
    figure, axes = plt.subplots(figsize=(12, max(2.5, row_height * len(rows) + 1.8)))
    drawn = False
    for row, (_label, shown, candidate) in enumerate(reversed(rows)):
        if shown is not None:
            draw(axes, row, shown, candidate, (lambda _: None) if drawn else (lambda text: text))
            drawn = True
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_yticks(range(len(rows)), [label for label, _, _ in reversed(rows)])
    axes.set_xlabel(texts[0])
    axes.set_title(texts[1])
    if drawn:
        axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    with atomic_output(path, suffix=".png") as tmp:  # savefig takes the format from the suffix
        figure.savefig(tmp, dpi=110)
    plt.close(figure)


def chart_texts(results: Sequence[ScenarioResult], meta: Meta) -> tuple[str, str]:
    """The chart's axis label and title: what its numbers are, in the words of the scenarios' kind."""
    page = CpuPage(results, meta)
    base = page.named[BASELINE]
    return (
        f"CPU time per {per_what(results)}, {page.candidates_named} vs {base}: change, % of {base}'s total",
        "User and system parts (bars, medians), their sum the total (|); each paired trial's total (points)",
    )


def write_chart(path: Path, results: Sequence[ScenarioResult], meta: Meta) -> None:
    """A PNG: per scenario and candidate the change of the user time and of the system time (two bars, each as a
    share of the baseline's total), their sum (the total difference, a mark) and each paired trial's total
    difference as a point."""

    def draw(axes: Any, row: int, shown: ScenarioResult, candidate: str, legend: Callable[[str], str | None]) -> None:
        user, system = shown.parts_of(candidate)
        user = 0.0 if math.isnan(user) else user
        system = 0.0 if math.isnan(system) else system
        axes.barh(row + 0.17, user * 100, color="tab:blue", alpha=0.55, height=0.32, label=legend("user time"))
        axes.barh(
            row - 0.17, system * 100, color="tab:orange", alpha=0.55, height=0.32,
            label=legend("system time"),
        )  # fmt: skip
        axes.scatter(
            [(user + system) * 100], [row], color="black", marker="|", s=260, zorder=4,
            label=legend("total (user + system)"),
        )  # fmt: skip
        points = [d * 100 for d in shown.paired_differences(candidate)]
        colour = "tab:green" if shown.difference_of(candidate) < 0 else "tab:red"
        axes.scatter(points, [row] * len(points), color=colour, s=14, zorder=3, label=legend("paired trials (total)"))

    draw_chart(path, CpuPage(results, meta), 0.45, draw, chart_texts(results, meta))
