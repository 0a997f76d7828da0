"""``nox -s bench -- [options]``: the session's arguments, the builds, the run and its outcome.

Options (everything else goes to the pipeline's configuration, ``--out`` and friends):

    --baseline PATH        the baseline binary (default: the plain build of the tree, as `nox -s plain`)
    --candidate PATH       a candidate binary (default: the work dir's PGO binary, or the pipeline is run);
                           repeated, every one is measured against the baseline, in rounds, the order rotated
    --baseline-label TEXT  its name in the table (default: plain, or baseline with --baseline)
    --candidate-label TEXT (default: PGO, or candidate, candidate-2… with --candidate); one per --candidate
    --scenarios a,b        some of the workload's scenarios (default: all; ``[[bench.scenario]]``)
    --no-coverage          skip the coverage check (the scenarios once on the instrumented binary)
    --measure cpu|counts   CPU time (default), or valgrind's counts and an estimate of cycles from them
                           (recipes/bench/counts.py; no coverage check)
    --trials N             trials per scenario and build (default 5; 3 with --measure counts)
    --scale F              factor on every trial's request count (default 1; 0.1 with --measure counts)
    --gate-trained PCT     counts: fail unless every candidate's estimate is at least PCT % below the
                           baseline's on every trained scenario
    --profile-use-args=OPTS  the work dir's profile built again with these LLVM options (-Cllvm-args each), a
                           candidate after the PGO build or the --candidate builds (repeated: several;
                           e.g. =-disable-icp)
    --gate-held-out PCT    counts: fail if a candidate's estimate is more than PCT % above the baseline's on a
                           held-out (or partly trained) scenario
    --both-profiles        the work dir's training built from its other profile too, a candidate beside the
                           PGO build: the whole profile when the PGO build read the partial one (PGO_PARTIAL,
                           the default), the partial one when it read the whole (labels: PGO partial, PGO whole)
    --server-core N        the server's core (default: the last allowed); --load-core N the load's
    --upstream URL         proxy to this upstream instead of the Python backend the bench starts
    --trial-timeout S      seconds one trial may take (default 120)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from recipes.bench import builds, counting, counts_report, coverage, design, variants
from recipes.bench import cpu_report as report
from recipes.bench.counts_report import CountsResult, Gate, check_gate, raise_gate
from recipes.bench.harness import run_bench
from recipes.bench.meta import Meta
from recipes.bench.scenarios import held_out, require_scenarios, select
from recipes.bench.settings import Settings, choose_cores
from recipes.bench.timing import CpuTime
from recipes.claim import CrateIdentity, Held, claim
from recipes.config import MAX_SCALE, MAX_SECONDS, Config, load_config
from recipes.errors import BenchError, ConfigError
from recipes.inputs import user_path
from recipes.plan import BuildPlan, make_plan
from recipes.runner import quote
from recipes.stages import plain as plain_stage
from recipes.workdir import BenchDir, WorkDir
from recipes.workload import Scenario, Workload, load_workload, workload_path

DEFAULT_TRIALS = 5
#: counts repeat (a trial is what the same trial gives again, within its spread), and valgrind is ~50 times
#: slower: fewer trials, a tenth of the requests or runs
COUNTS_TRIALS = 3
COUNTS_SCALE = 0.1
MEASURES = ("cpu", "counts")
ResultT = TypeVar("ResultT", bound=report.Result[Any])


@dataclass(frozen=True)
class BenchArgs:
    baseline: Path | None
    candidates: tuple[Path, ...]
    baseline_label: str | None
    candidate_labels: tuple[str, ...]
    scenarios: str | None
    trials: int
    scale: float
    server_core: int | None
    load_core: int | None
    upstream: str | None
    trial_timeout: float
    coverage: bool = True
    measure: str = "cpu"
    gate: Gate = field(default_factory=Gate)
    variants: tuple[tuple[str, ...], ...] = ()
    both_profiles: bool = False

    @property
    def candidate(self) -> Path | None:
        return self.candidates[0] if self.candidates else None


def _number(
    kind: type[int] | type[float],
    what: str,
    least: float,
    below: float = math.inf,
    most: tuple[float, str] | None = None,
) -> Callable[[str], Any]:
    """An option's parser: its text as ``kind``, refused unless ``least <= value < below`` (nan, inf: refused too)
    and, with ``most`` (the largest value and what it counts), ``value <= most``."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
            fits = math.isfinite(value) and least <= value < below
        except ValueError:
            fits = False
        except OverflowError:  # an integer beyond any float: its text would fill the terminal
            raise argparse.ArgumentTypeError(f"a number of {len(text)} digits is too large for {what}") from None
        if not fits:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        if most is not None and value > most[0]:
            shown = text if len(text) <= 40 else f"a number of {len(text)} characters"
            raise argparse.ArgumentTypeError(f"{shown!r} is too large: at most {most[0]:g} {most[1]}")
        return value

    return parse


#: the most trials of each build: their order is made whole before the first (--trials 1e20 filled the memory)
MAX_TRIALS = 1000
_trials = _number(int, "a positive integer", 1e-12, most=(MAX_TRIALS, "trials"))
#: the bench's factor on each trial's count, bounded as the training's (PGO_TRAIN_SCALE)
_scale = _number(float, "a positive number", 1e-12, most=(MAX_SCALE, "times each scenario's count"))
_seconds = _number(float, "a positive number", 1e-12, most=(MAX_SECONDS, "seconds (a week)"))
_percent = _number(float, "a percentage from 0 to 100", 0, 100)
_core = _number(int, "a core number", 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nox -s bench --", add_help=False, exit_on_error=False, allow_abbrev=False)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--candidate", type=Path, action="append", default=[])
    parser.add_argument("--baseline-label")
    parser.add_argument("--candidate-label", action="append", default=[])
    parser.add_argument("--no-coverage", action="store_true")
    parser.add_argument("--scenarios")
    parser.add_argument("--trials", type=_trials)
    parser.add_argument("--scale", type=_scale)
    parser.add_argument("--measure", choices=MEASURES, default="cpu")
    parser.add_argument("--gate-trained", type=_percent)
    parser.add_argument("--gate-held-out", type=_percent)
    parser.add_argument("--profile-use-args", action="append", default=[])
    parser.add_argument("--both-profiles", action="store_true")
    parser.add_argument("--server-core", type=_core)
    parser.add_argument("--load-core", type=_core)
    parser.add_argument("--upstream")
    parser.add_argument("--trial-timeout", type=_seconds, default=120.0)
    return parser


def parse_args(posargs: Sequence[str], base: Path | None = None) -> tuple[BenchArgs, list[str]]:
    """The bench's own options, and the rest (for :func:`recipes.config.load_config`); a relative ``--baseline``
    or ``--candidate`` is taken from ``base`` (the project nox was invoked from), not from nox's own directory."""
    where = base if base is not None else Path.cwd()
    try:
        namespace, rest = _parser().parse_known_args(list(posargs))
    except argparse.ArgumentError as exc:
        raise ConfigError(f"session arguments: {exc}", "see `nox -s bench` in docs/worth.md for the options") from exc
    candidates = tuple(user_path(str(c), where, "--candidate").resolve() for c in namespace.candidate)
    labels = tuple(namespace.candidate_label)
    if len(labels) > max(1, len(candidates)):
        raise ConfigError(
            f"{len(labels)} --candidate-label for {len(candidates) or 'the default'} candidate(s)",
            "give one --candidate-label per --candidate",
        )
    counts = namespace.measure == "counts"
    gate = Gate(namespace.gate_trained, namespace.gate_held_out)
    if gate.on and not counts:
        raise ConfigError(
            "--gate-trained and --gate-held-out judge the counts",
            "add --measure counts (CPU time is too noisy to gate)",
        )
    # beside --candidate too: the work dir's profile built again with the options, after the given candidates
    # (a knob's build beside PGO builds of other trainings, in one run)
    knobs = tuple(variants.parse_variant(text) for text in namespace.profile_use_args)
    default_trials, default_scale = (COUNTS_TRIALS, COUNTS_SCALE) if counts else (DEFAULT_TRIALS, 1.0)
    args = BenchArgs(
        baseline=user_path(str(namespace.baseline), where, "--baseline").resolve() if namespace.baseline else None,
        candidates=candidates,
        baseline_label=namespace.baseline_label,
        candidate_labels=labels,
        scenarios=namespace.scenarios,
        trials=namespace.trials if namespace.trials is not None else default_trials,
        scale=namespace.scale if namespace.scale is not None else default_scale,
        server_core=namespace.server_core,
        load_core=namespace.load_core,
        upstream=namespace.upstream,
        trial_timeout=namespace.trial_timeout,
        coverage=not namespace.no_coverage and not counts,
        measure=namespace.measure,
        gate=gate,
        variants=knobs,
        both_profiles=namespace.both_profiles,
    )
    return args, rest


@dataclass(frozen=True)
class ResultFiles(Generic[ResultT]):
    """A bench run's folder, the files it writes there, its results and the run's meta."""

    out: BenchDir
    results: list[ResultT]
    meta: Meta

    @property
    def json(self) -> Path:
        return self.out.results_json

    @property
    def markdown(self) -> Path:
        return self.out.results_md

    @property
    def chart(self) -> Path:
        return self.out.chart

    def check(self) -> None:
        """A run with an invalid scenario fails (after everything is written), of either measure."""
        bad = [r for r in self.results if not r.valid]
        if bad:
            raise BenchError(
                f"{len(bad)} of {len(self.results)} scenarios invalid, first {bad[0].name}: {bad[0].why_invalid}",
                f"see {self.markdown} and the logs in {self.out.runs}",
            )


@dataclass(frozen=True)
class Outcome(ResultFiles[report.ScenarioResult]):
    """Where the results went, and what they say."""

    def summary_lines(self) -> list[str]:
        named = report.labels(self.meta, self.results[0].builds if self.results else ())
        base = named.get(report.BASELINE, report.BASELINE)
        lines = []
        for result in self.results:
            drift = report.percent(result.canary_drift)
            if result.valid:
                for candidate in result.candidates:
                    same, total = result.same_side_of(candidate)
                    user, system = result.parts_of(candidate)
                    lines.append(
                        f"{result.name:18} {report.percent(result.difference_of(candidate)):>9} = user "
                        f"{report.percent(user)} + system {report.percent(system)} of {base}'s "
                        f"{design.duration(result.median(report.BASELINE))}/{result.unit}  same side {same}/{total}  "
                        f"canary {drift}  {result.held_out_text}  [{named.get(candidate, candidate)}]"
                    )
                # the flags of a valid scenario: trials too short for the tick, a server not kept busy
                if result.tick_note:
                    lines.append(f"{'':18} flagged: {result.tick_note}")
                if result.not_busy:
                    lines.append(
                        f"{'':18} flagged: {len(result.not_busy)} of {len(result.measured)} trials with the server "
                        f"under {design.BUSY_MIN} {design.BUSY_UNIT}; give {result.busy_fix}"
                    )
            else:
                lines.append(f"{result.name:18}   invalid  {result.why_invalid}")
        worse = report.regressions(self.results, named)
        lines += [*worse, *report.held_out_hint(worse)]
        lines += [f"table  {self.markdown}", f"json   {self.json}", f"chart  {self.chart}"]
        return lines


@dataclass(frozen=True)
class CountsOutcome(ResultFiles[CountsResult]):
    """Where the counts went, what they say, and the gate's verdicts."""

    verdicts: list[str]

    def summary_lines(self) -> list[str]:
        named = report.labels(self.meta, self.results[0].builds if self.results else ())
        lines = []
        for result in self.results:
            if not result.valid:
                lines.append(f"{result.name:18}   invalid  {result.why_invalid}")
                continue
            for candidate in result.candidates:
                judged = result.judged
                own = (
                    f"  in the binary {report.percent(result.difference(candidate, judged))}"
                    if judged != "estimate"
                    else ""
                )
                lines.append(
                    f"{result.name:18} estimate {report.percent(result.difference(candidate)):>8}{own}  instructions "
                    f"{report.percent(result.difference(candidate, 'instructions'))}  mispredicts "
                    f"{report.percent(result.difference(candidate, 'cond_mispredicts'))} cond. "
                    f"{report.percent(result.difference(candidate, 'ind_mispredicts'))} ind.  spread "
                    f"{max(result.spread(b, judged) for b in result.builds) * 100:.2f} %  {result.status}"
                    + (f"  [{named.get(candidate, candidate)}]" if len(result.candidates) > 1 else "")
                )
        best = counts_report.best_on_held_out(self.results, named)
        lines += [best] if best else []
        worse = counts_report.regressions(self.results, named)
        lines += [*worse, *report.held_out_hint(worse)]
        lines += self.verdicts
        lines += [f"table  {self.markdown}", f"json   {self.json}", f"chart  {self.chart}"]
        return lines

    def check(self) -> None:
        """An invalid scenario fails the run, then a gate that failed (after everything is written)."""
        super().check()
        raise_gate(self.verdicts, self.markdown)


def bench_workload(config: Config, environ: Mapping[str, str]) -> Workload:
    """The configured workload; by default ``profiles/<bin>.toml``, which needs the crate's metadata: then the
    plan's, parsed when it was made."""
    if config.workload is None:
        return make_plan(config, environ, instruments=False, profdata=False, bolt=False).require_workload()
    return load_workload(workload_path(config.project_dir, config.workload))


def check(project_dir: Path, environ: Mapping[str, str], posargs: Sequence[str]) -> list[Scenario]:
    """Everything that can be refused before anything is installed or built: the arguments, the workload, its
    scenarios (none: one line saying how to add one), the names given to ``--scenarios`` and the binaries given."""
    args, rest = parse_args(posargs, project_dir)
    config = load_config(project_dir, environ, rest)
    workload = bench_workload(config, environ)
    chosen = select(args.scenarios, require_scenarios(workload))
    given = [("baseline", args.baseline)] if args.baseline is not None else []
    builds.check_native_target(config.target, args.measure)
    for label, binary in [*given, *(("candidate", c) for c in args.candidates)]:
        builds.check_executable(binary, label)
        builds.check_native(binary, label, args.measure)
    if args.measure == "counts":
        counts_report.check_gate_kinds(args.gate, [held_out(s, workload).status for s in chosen])
        counting.find_tools(environ, chosen)
    return chosen


def _labels(args: BenchArgs, defaults: Sequence[str]) -> list[str]:
    return [args.candidate_labels[i] if i < len(args.candidate_labels) else d for i, d in enumerate(defaults)]


def work_dir(project_dir: Path, environ: Mapping[str, str], posargs: Sequence[str]) -> Path:
    """The work dir the bench's posargs and configuration name (its children are recorded there)."""
    _args, rest = parse_args(posargs, project_dir)
    return load_config(project_dir, environ, rest).out


def run(project_dir: Path, environ: Mapping[str, str], posargs: Sequence[str]) -> Outcome | CountsOutcome:
    """Build (or take) the binaries, run the scenarios (and the coverage check), write the table; the work dir
    held for the whole run (recipes/claim.py), its records those of this crate when it builds or takes one."""
    args, rest = parse_args(posargs, project_dir)
    config = load_config(project_dir, environ, rest)
    with claim(config.out, "bench") as held:
        return _run(args, config, environ, posargs, held)


def _identified(plan: BuildPlan, held: Held) -> BuildPlan:
    held.identify(CrateIdentity.of(plan.crate, plan.target, plan.config.features))
    return plan


def _run(
    args: BenchArgs, config: Config, environ: Mapping[str, str], posargs: Sequence[str], held: Held
) -> Outcome | CountsOutcome:
    workload = bench_workload(config, environ)
    scenarios = select(args.scenarios, require_scenarios(workload))
    out = WorkDir(config.out).bench
    server_core, load_core = choose_cores(set(os.sched_getaffinity(0)), args.server_core, args.load_core)
    builds.check_native_target(config.target, args.measure)
    # made once, and only when a build is needed; with the workload parsed above, not parsed again
    plan = functools.cache(lambda: _identified(make_plan(config, environ, workload=workload), held))
    #: what compiled each build's C, where this run knows it (the work dir's PGO build, the plain build it makes)
    c_compilers: dict[Path, str] = {}
    if args.candidates:
        defaults = ["candidate", *(f"candidate-{n}" for n in range(2, len(args.candidates) + 1))]
        candidates = list(zip(args.candidates, _labels(args, defaults), strict=True))
    else:
        candidates = [(builds.build_pgo(plan()), _labels(args, ["PGO"])[0])]
        c_compilers[candidates[0][0]] = builds.pgo_c_compilers(plan().work)
    if args.both_profiles:  # after the PGO build (made above, or the work dir's), from its training's other profile
        profile, which = variants.other_profile(plan())
        built = variants.build_variant(plan(), (), profile, name=f"profile-{which}")
        c_compilers[built] = variants.variant_c_compilers(plan(), (), name=f"profile-{which}")
        candidates.append((built, f"PGO {which}"))
    for options in args.variants:
        variant = variants.build_variant(plan(), options)
        c_compilers[variant] = variants.variant_c_compilers(plan(), options)
        candidates.append((variant, variants.label(options)))
    if args.baseline is not None:
        baseline_binary, baseline_label = args.baseline, args.baseline_label or "baseline"
    else:
        baseline_binary, baseline_label = plain_stage.compared(plan()).binary, args.baseline_label or "plain"
        c_compilers[baseline_binary] = builds.plain_c_compilers(plan())
    every = [baseline_label, *(label for _, label in candidates)]
    twice = next((label for label in every if every.count(label) > 1), None)
    if twice is not None:
        raise ConfigError(f"two builds are labelled {twice!r}", "give --baseline-label or --candidate-label")
    frozen = [
        dataclasses.replace(builds.frozen_copy(binary, out.bin, label), c_compilers=c_compilers.get(binary, ""))
        for binary, label in [(baseline_binary, baseline_label), *candidates]
    ]
    for build in frozen:
        builds.check_native(build.binary, build.label, args.measure)
    settings = Settings(
        builds=tuple(frozen),
        scenarios=scenarios,
        trials=args.trials,
        out=out,
        server_core=server_core,
        load_core=load_core,
        workload=workload,
        project_dir=config.project_dir,
        crate_dir=config.manifest.parent,
        env=dict(environ),
        scale=args.scale,
        upstream_url=args.upstream,
        trial_timeout=args.trial_timeout,
        phase_timeout=config.phase_timeout,
        command=quote(["nox", "-s", "bench", *(["--", *posargs] if posargs else [])]),
    )
    if args.measure == "counts":
        counted = counting.ValgrindCounts(counting.find_tools(environ, scenarios), args.gate)
        results, meta = run_bench(settings, counted)
        verdicts = check_gate(args.gate, results, report.labels(meta, results[0].builds)) if args.gate.on else []
        if verdicts:
            meta["gate"] = args.gate.as_json() | {"verdicts": verdicts}
            report.write_results(out, results, meta, counted.markdown, counted.heading)
        return CountsOutcome(out, results, meta, verdicts)
    check_coverage = None
    if args.coverage and args.candidates:
        check_coverage = coverage.checker_for_given(config, [binary for binary, _ in candidates], plan)
    elif args.coverage:
        check_coverage = coverage.checker(plan())
    return Outcome(out, run_bench(settings, CpuTime(), check_coverage)[0], settings.meta())
