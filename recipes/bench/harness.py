"""The harness: builds run in turn, in rounds of one trial of each build, by a measure (CPU time or counts).

For each scenario (declared in the workload file, :mod:`recipes.workload.scenario_format`): the measure's
canary, when it has one; then, for a server scenario, one server per build started from the scenario's instance
(its args and config template, pinned to the server's core by ``taskset``, every thread checked), each warmed up;
then the trials in rounds, one trial of each build a round, the builds' order rotated each round
(:mod:`recipes.bench.design`: baseline, A, B; A, B, baseline; B, baseline, A …), each a fixed request count sent
by h2load pinned to the other core; the servers stopped (SIGTERM, exit 0 expected); the canary again. A command
scenario runs the binary instead, pinned to the server's core, a fixed number of runs per trial
(:func:`recipes.bench.commands.run_command`, the one process loop). A trial where h2load saw one request fail, one
status outside what the scenario expects, or where a run exited otherwise than expected, is invalid, and so is
the scenario.

What a trial measures, and what its result says, is the measure's (:class:`Measure`): CPU time
(:class:`recipes.bench.timing.CpuTime`, the default) or valgrind's counts
(:class:`recipes.bench.counting.ValgrindCounts`, ``--measure counts``). Here, the one scenario runner and the
run loop, which writes results.json and results.md after each scenario, so a stopped run leaves its part.

Its parts: :mod:`recipes.bench.settings` (the builds, the settings, the cores, the ``[setup]``),
:mod:`recipes.bench.servers` (start, check, stop), :mod:`recipes.bench.load` (h2load's runs and verdicts),
:mod:`recipes.bench.commands` (a command scenario's runs).
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, TypedDict, TypeVar

from recipes.bench import canary
from recipes.bench.commands import build_runs, stdin_file
from recipes.bench.cpu_report import Result, build_keys, write_results
from recipes.bench.load import load_argvs, run_loads, trial_problem
from recipes.bench.meta import Coverage, HeldOutJson, Meta
from recipes.bench.scenarios import held_out
from recipes.bench.servers import Server, stop_server, tail_line
from recipes.bench.settings import Build, Place, Settings, Setup, instance_env, raise_open_files_limit, started_setup
from recipes.errors import PgoError
from recipes.procs import describe_exit
from recipes.runner import plural, say
from recipes.workload import Scenario

TrialT = TypeVar("TrialT")
ResultT = TypeVar("ResultT", bound=Result[Any])


class Measure(ABC, Generic[TrialT, ResultT]):
    """What one measure does in the scenario runner: its trials, its servers, its result and its table. What is
    not overridden is CPU time's: no canary, the servers stopped in their own time, no refusal that stops the run."""

    under = ""  # said after what a server or a run did under the measure (" under valgrind")
    called = ""  # said before a scenario's trials and builds ("counts: ")
    slowdown = 1.0  # the factor on --trial-timeout of a trial and of a server's warm-up
    warms_commands = True  # each build of a command scenario runs its warm-up before the trials
    heading: Mapping[str, object] = MappingProxyType({})  # results.json's keys after the run's, before its scenarios
    markdown: Callable[[Sequence[ResultT], Meta], str]  # the measure's table (results.md)

    def meta(self, settings: Settings) -> Meta:
        """The run's part of results.json."""
        return settings.meta()

    def canary(self, core: int) -> float | None:  # noqa: ARG002  (a measure's canary runs on the server's core)
        """The canary's time on ``core``, around a scenario, or None."""
        return None

    @abstractmethod
    def start(self, build: Build, key: str, at: Place) -> Server: ...

    @abstractmethod
    def server_trial(self, server: Server, key: str, index: int, at: Place) -> TrialT: ...

    @abstractmethod
    def command_trial(self, build: Build, key: str, index: int, at: Place, stdin: Path | None) -> TrialT: ...

    def stop_timeout(self, scenario: Scenario) -> float:
        return float(scenario.instance.options.stop_timeout)

    def last_words(self, server: Server, at: Place, key: str) -> str:  # noqa: ARG002  (the counts': valgrind's log)
        """What a server that exited otherwise than expected said last."""
        return tail_line(server.log)

    def fatal(self, error: PgoError) -> bool:  # noqa: ARG002  (the counts' refuse a binary valgrind cannot run)
        """Whether ``error`` stops the whole run rather than invalidating its scenario."""
        return False

    @abstractmethod
    def result(
        self, at: Place, trials: list[TrialT], problem: str, canaries: tuple[float | None, float | None]
    ) -> ResultT: ...


class ResultFields(TypedDict):
    """The fields of a scenario's :class:`~recipes.bench.cpu_report.Result` that either measure fills alike."""

    name: str
    title: str
    unit: str
    held_out: HeldOutJson | None
    builds: list[str]


def result_fields(at: Place) -> ResultFields:
    """What a scenario's result says of it, of either measure: its name, title, unit, held-out status and builds."""
    scenario, settings = at.scenario, at.settings
    return {
        "name": scenario.name,
        "title": scenario.title,
        "unit": scenario.unit,
        "held_out": held_out(scenario, settings.workload).as_json(),
        "builds": list(build_keys(len(settings.builds))),
    }


def run_scenario(measure: Measure[TrialT, ResultT], scenario: Scenario, settings: Settings, setup: Setup) -> ResultT:
    """One scenario's trials, every build; its servers stopped whatever happened. A refusal invalidates the
    scenario (the trials measured before it are kept), unless the measure says it stops the run."""
    at = Place(scenario, settings, setup, settings.out.run(scenario.name))
    shutil.rmtree(at.workdir, ignore_errors=True)
    at.workdir.mkdir(parents=True)
    say(
        f"bench: {scenario.name}: {scenario.title} ({measure.called}{plural(settings.trials, 'trial')} of "
        f"{plural(scenario.count, scenario.unit)}{measure.under}, {len(settings.builds)} builds)"
    )
    before = measure.canary(settings.server_core)
    trials: list[TrialT] = []
    problem = ""
    servers: dict[str, Server] = {}
    try:
        if scenario.kind == "command":
            _command_trials(measure, at, trials)
        else:
            _server_trials(measure, at, trials, servers)
    except PgoError as error:
        if measure.fatal(error):
            raise
        problem = error.line()
        say(f"  {scenario.name}: INVALID: {problem}")
    finally:
        for key, server in servers.items():
            code = stop_server(server, measure.stop_timeout(scenario))
            if code != 0 and not problem:
                problem = (
                    f"{server.build.label} exited with {describe_exit(code)} on SIGTERM{measure.under} (expected 0): "
                    f"{measure.last_words(server, at, key)}"
                )
            shutil.rmtree(server.instance_dir, ignore_errors=True)  # access logs and the like: not kept
    after = measure.canary(settings.server_core)
    return measure.result(at, trials, problem, (before, after))


def _command_trials(measure: Measure[TrialT, ResultT], at: Place, trials: list[TrialT]) -> None:
    scenario, settings, setup, workdir = at
    stdin = stdin_file(scenario, setup.values, instance_env(scenario.instance, settings.env, setup.values), workdir)
    for key, build in settings.keyed if measure.warms_commands else ():
        warm = build_runs(build, scenario.warmup_requests, workdir / f"{key}-warmup.log", at, stdin)
        if warm.problem:
            say(f"  {scenario.name}: the warm-up of {build.label} did not pass: {warm.problem}")
    for index, order in settings.rounds:
        for key, build in order:
            trials.append(measure.command_trial(build, key, index, at, stdin))


def _server_trials(
    measure: Measure[TrialT, ResultT], at: Place, trials: list[TrialT], servers: dict[str, Server]
) -> None:
    scenario, settings, setup, workdir = at
    for key, build in settings.keyed:
        servers[key] = measure.start(build, key, at)
    for key, server in servers.items():
        argvs = load_argvs(scenario, server, scenario.warmup_requests, workdir / f"{key}-uris.txt", setup.values)
        warm = run_loads(argvs, at, workdir / f"{key}-warmup.log", measure.slowdown)
        why = trial_problem(warm, scenario.warmup_requests, scenario.expect)
        if why:  # said, not decisive: the trials themselves are judged
            say(f"  {scenario.name}: the warm-up of {server.build.label} did not pass: {why}")
    for index, order in settings.rounds:
        for key, _ in order:
            trials.append(measure.server_trial(servers[key], key, index, at))


def run_bench(
    settings: Settings,
    measure: Measure[TrialT, ResultT],
    coverage: Callable[[Settings, Setup], Coverage] | None = None,
) -> tuple[list[ResultT], Meta]:
    """Every scenario (after ``coverage``, the coverage check, when given), and the run's meta; results.json and
    results.md are rewritten after each one, so a stopped run leaves its part."""
    raise_open_files_limit()
    scenarios = [s.scaled(settings.scale) for s in settings.scenarios]
    results: list[ResultT] = []
    meta = measure.meta(settings)
    # this process on the load generator's core (so it never competes with the server)
    with started_setup(settings) as setup, canary.pinned({settings.load_core}):
        if coverage is not None:
            meta["coverage"] = coverage(settings, setup)
        for scenario in scenarios:
            results.append(run_scenario(measure, scenario, settings, setup))
            write_results(settings.out, results, meta, measure.markdown, measure.heading)
    return results, meta
