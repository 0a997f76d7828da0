"""What the trials say: medians, paired differences, the canary, and the table (Markdown, JSON, PNG).

Everything here is pure but the three writers, which write atomically (temp file + rename). The chart
needs matplotlib, which the ``bench`` session installs in its own venv; :func:`write_chart` runs there
(``python -m recipes.bench.report chart <results.json> <chart.png>``).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recipes.bench import canary
from recipes.errors import MissingInput
from recipes.files import write_atomically

BASELINE = "baseline"
CANDIDATE = "candidate"


@dataclass
class Trial:
    """One measured run of one build: the server's CPU time over the requests it answered."""

    build: str  # BASELINE or CANDIDATE
    index: int
    requests: int  # asked of the load generator
    answered: int  # requests it saw completed
    server_cpu: float  # seconds of user + system time of the server process, all threads
    wall: float  # seconds the load generator ran
    load_cpu: float = 0.0  # the load generator's own user + system seconds
    harness_cpu: float = 0.0  # this process's user + system seconds during the trial
    upstream_cpu: float | None = None  # the upstream backend's, where there is one
    server_user: float | None = None  # the user-time part of server_cpu (the rest is the kernel's)
    status: dict[str, int] = field(default_factory=dict)
    problem: str = ""  # why the trial is invalid; empty when it is valid

    @property
    def valid(self) -> bool:
        return not self.problem

    @property
    def us_per_request(self) -> float:
        return self.server_cpu / self.answered * 1e6 if self.answered else math.nan

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["us_per_request"] = None if math.isnan(self.us_per_request) else round(self.us_per_request, 3)
        data["valid"] = self.valid
        for key in ("server_cpu", "wall", "load_cpu", "harness_cpu"):
            data[key] = round(data[key], 6)
        return data


def trial_from_json(data: dict[str, Any]) -> Trial:
    keys = {f for f in Trial.__dataclass_fields__}
    return Trial(**{k: v for k, v in data.items() if k in keys})


@dataclass
class ScenarioResult:
    """Every trial of one scenario, both builds, and the canary around them."""

    name: str
    title: str
    trials: list[Trial]
    canary_before: float
    canary_after: float
    problem: str = ""  # set when the scenario could not run at all

    def of(self, build: str) -> list[Trial]:
        return [t for t in self.trials if t.build == build]

    @property
    def invalid_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.valid]

    @property
    def valid(self) -> bool:
        return not self.problem and not self.invalid_trials and bool(self.of(BASELINE)) and bool(self.of(CANDIDATE))

    @property
    def why_invalid(self) -> str:
        if self.problem:
            return self.problem
        bad = self.invalid_trials
        if bad:
            first = bad[0]
            where = f"{first.build} #{first.index}"
            return f"{len(bad)} of {len(self.trials)} trials invalid; first ({where}): {first.problem}"
        return "" if self.valid else "no trials"

    def median(self, build: str) -> float:
        return statistics.median(t.us_per_request for t in self.of(build))

    def paired_differences(self) -> list[float]:
        """Per trial index: candidate / baseline - 1 (negative: the candidate spends less CPU per request)."""
        base = {t.index: t.us_per_request for t in self.of(BASELINE)}
        cand = {t.index: t.us_per_request for t in self.of(CANDIDATE)}
        return [cand[i] / base[i] - 1 for i in sorted(base) if i in cand]

    @property
    def difference(self) -> float:
        """Median of the candidate over median of the baseline, minus one."""
        return self.median(CANDIDATE) / self.median(BASELINE) - 1

    @property
    def same_side(self) -> tuple[int, int]:
        """How many paired trials are on the side of zero of the median difference, out of how many."""
        diffs = self.paired_differences()
        sign = math.copysign(1, self.difference) if self.difference else 0
        return sum(1 for d in diffs if d and math.copysign(1, d) == sign), len(diffs)

    @property
    def canary_drift(self) -> float:
        return canary.drift(self.canary_before, self.canary_after)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "valid": self.valid,
            "problem": self.why_invalid,
            "scenario_problem": self.problem,
            "canary_before": round(self.canary_before, 6),
            "canary_after": round(self.canary_after, 6),
            "canary_drift": round(self.canary_drift, 6),
            "canary_flagged": canary.flagged(self.canary_drift),
            "trials": [t.as_json() for t in self.trials],
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
            )
        return data


def scenario_from_json(data: dict[str, Any]) -> ScenarioResult:
    return ScenarioResult(
        name=data["name"],
        title=data["title"],
        trials=[trial_from_json(t) for t in data["trials"]],
        canary_before=data["canary_before"],
        canary_after=data["canary_after"],
        problem=data.get("scenario_problem", ""),
    )


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
    text = f"{fraction * 100:+.1f} %"
    return text.replace("-", "\u2212")


def markdown(results: Sequence[ScenarioResult], meta: dict[str, Any]) -> str:
    """The table for a person (and for the README)."""
    base, cand = meta.get("baseline_label", BASELINE), meta.get("candidate_label", CANDIDATE)
    lines = [
        f"# CPU time per request: {cand} vs {base}",
        "",
        f"- baseline ({base}): `{meta.get('baseline', '?')}`",
        f"- candidate ({cand}): `{meta.get('candidate', '?')}`",
        f"- {meta.get('trials', '?')} trials per scenario and build, interleaved trial by trial; "
        f"server on core {meta.get('server_core', '?')}, load generator on core {meta.get('load_core', '?')}",
        f"- command: `{meta.get('command', '?')}`",
        "",
        f"| scenario | {base} µs/req (median) | {cand} µs/req (median) | difference | "
        "trials on the same side of zero | canary drift |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    for result in results:
        drift = result.canary_drift
        drift_text = percent(drift) + (" ⚠" if canary.flagged(drift) else "")
        if result.valid:
            same, total = result.same_side
            lines.append(
                f"| {result.title} | {result.median(BASELINE):.2f} | {result.median(CANDIDATE):.2f} | "
                f"{percent(result.difference)} | {same}/{total} | {drift_text} |"
            )
        else:
            lines.append(f"| {result.title} | invalid | invalid | — | — | {drift_text} |")
            notes.append(f"- {result.title}: invalid: {result.why_invalid}")
    flagged = [r.title for r in results if canary.flagged(r.canary_drift)]
    lines.append("")
    lines.append(
        "Difference: the candidate's median over the baseline's, minus one (negative: less CPU per request). "
        "Same side: paired trials (trial i of each build) whose difference has the sign of the median's. "
        f"Canary: a fixed SHA-256 loop on the server's core before and after the scenario; ⚠ above "
        f"{canary.TOLERANCE * 100:.0f} %."
    )
    if flagged:
        lines.append(f"Canary above tolerance in {len(flagged)} of {len(results)} scenarios: {', '.join(flagged)}.")
    if notes:
        lines += ["", "Invalid scenarios:", *notes]
    lines += [
        "",
        "## Who was busy (CPU seconds per wall second during the trials, medians)",
        "",
        "| scenario | server | load generator (h2load) | harness | upstream | harness µs/req | server in user space |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        busy = overhead(result)
        user = busy["server_user_share"]
        share = "—" if user is None else f"{user * 100:.0f} %"

        def fmt(value: float | None) -> str:
            return "—" if value is None else f"{value:.2f}"

        lines.append(
            f"| {result.title} | {fmt(busy['server'])} | {fmt(busy['load_generator'])} | {fmt(busy['harness'])} | "
            f"{fmt(busy['upstream'])} | {fmt(busy['harness_cpu_per_request_us'])} | "
            f"{share} |"
        )
    return "\n".join(lines) + "\n"


def to_json(results: Sequence[ScenarioResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {**meta, "scenarios": [r.as_json() for r in results]}


def from_json(data: dict[str, Any]) -> tuple[list[ScenarioResult], dict[str, Any]]:
    meta = {k: v for k, v in data.items() if k != "scenarios"}
    return [scenario_from_json(s) for s in data["scenarios"]], meta


def write_markdown(path: Path, results: Sequence[ScenarioResult], meta: dict[str, Any]) -> None:
    write_atomically(path, markdown(results, meta))


def write_json(path: Path, results: Sequence[ScenarioResult], meta: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(to_json(results, meta), indent=2, ensure_ascii=False) + "\n")


def write_chart(path: Path, results: Sequence[ScenarioResult], meta: dict[str, Any]) -> None:
    """A PNG: per scenario the median difference as a bar and each paired trial as a point."""
    try:
        import matplotlib  # noqa: PLC0415  (only the bench session's venv has it)
    except ImportError as exc:
        raise MissingInput("matplotlib is not installed here", "run the chart in `nox -s bench`'s venv") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    shown = [r for r in results if r.valid]
    height = max(2.5, 0.45 * len(results) + 1.5)
    figure, axes = plt.subplots(figsize=(9, height))
    labels = []
    for row, result in enumerate(reversed(list(results))):
        labels.append(result.title + ("" if result.valid else " (invalid)"))
        if result not in shown:
            continue
        colour = "tab:green" if result.difference < 0 else "tab:red"
        axes.barh(row, result.difference * 100, color=colour, alpha=0.35, height=0.6)
        points = [d * 100 for d in result.paired_differences()]
        axes.scatter(points, [row] * len(points), color=colour, s=14, zorder=3)
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_yticks(range(len(labels)), labels)
    axes.set_xlabel(
        f"CPU time per request, {meta.get('candidate_label', CANDIDATE)} vs {meta.get('baseline_label', BASELINE)} (%)"
    )
    axes.set_title("Median difference (bar) and each paired trial (points)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
    figure.savefig(tmp, dpi=110)
    plt.close(figure)
    os.replace(tmp, path)


def main(argv: Sequence[str]) -> int:
    """``python -m recipes.bench.report chart RESULTS.json CHART.png`` (run by the bench session's venv)."""
    if len(argv) != 3 or argv[0] != "chart":
        print("usage: python -m recipes.bench.report chart RESULTS.json CHART.png", file=sys.stderr)
        return 2
    results, meta = from_json(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
    write_chart(Path(argv[2]), results, meta)
    print(f"chart: {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
