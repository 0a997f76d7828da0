"""``nox -s bench -- [options]``: the session's arguments, the builds, the run and its outcome.

Options (everything else goes to the pipeline's configuration, ``--out`` and friends):

    --baseline PATH        the baseline binary (default: the plain build of the tree)
    --candidate PATH       the candidate binary (default: the work dir's PGO binary, or the pipeline is run)
    --baseline-label TEXT  its name in the table (default: plain, or baseline with --baseline)
    --candidate-label TEXT (default: PGO, or candidate with --candidate)
    --scenarios a,b        some scenarios (default: all; see recipes/bench/scenarios.py)
    --trials N             trials per scenario and build (default 5)
    --scale F              factor on every trial's request count (default 1)
    --server-core N        the server's core (default: the last allowed); --load-core N the load's
    --upstream URL         proxy to this upstream instead of the Python backend the bench starts
    --trial-timeout S      seconds one trial may take (default 120)
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes import stages
from recipes.bench import builds, report
from recipes.bench.harness import Settings, choose_cores, run_bench
from recipes.bench.scenarios import SCENARIOS, select
from recipes.config import load_config
from recipes.errors import BenchError, ConfigError

DEFAULT_TRIALS = 5


@dataclass(frozen=True)
class BenchArgs:
    baseline: Path | None
    candidate: Path | None
    baseline_label: str | None
    candidate_label: str | None
    scenarios: str | None
    trials: int
    scale: float
    server_core: int | None
    load_core: int | None
    upstream: str | None
    trial_timeout: float


def _number(text: str, kind: type[int] | type[float], what: str) -> float:
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if value < (0 if what == "a core number" else 1e-12):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def _positive_int(text: str) -> int:
    return int(_number(text, int, "a positive integer"))


def _positive_float(text: str) -> float:
    return _number(text, float, "a positive number")


def _core(text: str) -> int:
    return int(_number(text, int, "a core number"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nox -s bench --", add_help=False, exit_on_error=False, allow_abbrev=False)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--candidate", type=Path)
    parser.add_argument("--baseline-label")
    parser.add_argument("--candidate-label")
    parser.add_argument("--scenarios")
    parser.add_argument("--trials", type=_positive_int, default=DEFAULT_TRIALS)
    parser.add_argument("--scale", type=_positive_float, default=1.0)
    parser.add_argument("--server-core", type=_core)
    parser.add_argument("--load-core", type=_core)
    parser.add_argument("--upstream")
    parser.add_argument("--trial-timeout", type=_positive_float, default=120.0)
    return parser


def parse_args(posargs: Sequence[str]) -> tuple[BenchArgs, list[str]]:
    """The bench's own options, and the rest (for :func:`recipes.config.load_config`)."""
    try:
        namespace, rest = _parser().parse_known_args(list(posargs))
    except argparse.ArgumentError as exc:
        raise ConfigError(f"session arguments: {exc}", "see `nox -s bench` in the README for the options") from exc
    select(namespace.scenarios)  # unknown names refused before anything is built
    args = BenchArgs(
        baseline=namespace.baseline.expanduser().resolve() if namespace.baseline else None,
        candidate=namespace.candidate.expanduser().resolve() if namespace.candidate else None,
        baseline_label=namespace.baseline_label,
        candidate_label=namespace.candidate_label,
        scenarios=namespace.scenarios,
        trials=namespace.trials,
        scale=namespace.scale,
        server_core=namespace.server_core,
        load_core=namespace.load_core,
        upstream=namespace.upstream,
        trial_timeout=namespace.trial_timeout,
    )
    return args, rest


@dataclass(frozen=True)
class Outcome:
    """Where the results went, and what they say."""

    out: Path
    results: list[report.ScenarioResult]

    @property
    def json(self) -> Path:
        return self.out / "results.json"

    @property
    def markdown(self) -> Path:
        return self.out / "results.md"

    @property
    def chart(self) -> Path:
        return self.out / "chart.png"

    def summary_lines(self) -> list[str]:
        lines = []
        for result in self.results:
            drift = report.percent(result.canary_drift)
            if result.valid:
                same, total = result.same_side
                lines.append(
                    f"{result.name:18} {report.percent(result.difference):>9}  same side {same}/{total}  canary {drift}"
                )
            else:
                lines.append(f"{result.name:18}   invalid  {result.why_invalid}")
        lines += [f"table  {self.markdown}", f"json   {self.json}", f"chart  {self.chart}"]
        return lines

    def check(self) -> None:
        """A run with an invalid scenario fails (after everything is written)."""
        bad = [r for r in self.results if not r.valid]
        if bad:
            raise BenchError(
                f"{len(bad)} of {len(self.results)} scenarios invalid, first {bad[0].name}: {bad[0].why_invalid}",
                f"see {self.markdown} and the logs in {self.out / 'runs'}",
            )


def run(project_dir: Path, environ: Mapping[str, str], posargs: Sequence[str]) -> Outcome:
    """Build (or take) the two binaries, run the scenarios, write the table."""
    args, rest = parse_args(posargs)
    config = load_config(project_dir, environ, rest)
    out = config.out / "bench"
    server_core, load_core = choose_cores(set(os.sched_getaffinity(0)), args.server_core, args.load_core)
    plan = stages.make_plan(config, environ) if args.baseline is None or args.candidate is None else None
    if args.candidate is not None:
        candidate_binary, candidate_label = args.candidate, args.candidate_label or "candidate"
    else:
        assert plan is not None
        candidate_binary, candidate_label = builds.build_pgo(plan), args.candidate_label or "PGO"
    if args.baseline is not None:
        baseline_binary, baseline_label = args.baseline, args.baseline_label or "baseline"
    else:
        assert plan is not None
        baseline_binary, baseline_label = builds.build_plain(plan), args.baseline_label or "plain"
    if baseline_label == candidate_label:
        raise ConfigError(f"both builds are labelled {baseline_label!r}", "give --baseline-label or --candidate-label")
    settings = Settings(
        baseline=builds.frozen_copy(baseline_binary, out / "bin", baseline_label),
        candidate=builds.frozen_copy(candidate_binary, out / "bin", candidate_label),
        scenarios=select(args.scenarios, SCENARIOS),
        trials=args.trials,
        out=out,
        server_core=server_core,
        load_core=load_core,
        scale=args.scale,
        upstream_url=args.upstream,
        trial_timeout=args.trial_timeout,
        command=shlex.join(["nox", "-s", "bench", *(["--", *posargs] if posargs else [])]),
    )
    return Outcome(out, run_bench(settings))
