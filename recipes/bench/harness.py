"""The harness: builds run in turn, CPU time per request (or per run), in rounds of one trial of each build.

For each scenario (declared in the workload file, :mod:`recipes.workload.scenario_format`): the canary on the server's
core; then, for a server scenario, one server per build started from the scenario's instance (its args and
config template, pinned to the server's core by ``taskset``, every thread checked), each warmed up; then the
trials in rounds, one trial of each build a round, the builds' order rotated each round
(:mod:`recipes.bench.design`: baseline, A, B; A, B, baseline; B, baseline, A …), each a fixed request count sent
by h2load pinned to the other core; the servers stopped (SIGTERM, exit 0 expected); the canary again. A command
scenario runs the binary instead, pinned to the server's core, a fixed number of runs per trial.

A server trial's figure is the server's user and system time (``/proc/<pid>/stat``, all threads, exited ones
included), read before and after the trial, over the requests h2load saw answered. A command trial's figure is
the runs' user and system time from ``wait4`` over the runs. A trial where h2load saw one request fail, one
status outside what the scenario expects, or where a run exited otherwise than expected, is invalid, and so is
the scenario.

Its parts: :mod:`recipes.bench.settings` (the builds, the settings, the cores, the ``[setup]``),
:mod:`recipes.bench.servers` (start, check, stop), :mod:`recipes.bench.load` (h2load's runs and verdicts),
:mod:`recipes.bench.commands` (a command scenario's runs); here, the trials and the scenario runner.
"""

from __future__ import annotations

import resource
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recipes.bench import canary, design, procstat
from recipes.bench.commands import run_command, stdin_file
from recipes.bench.cpu_report import ScenarioResult, Trial, build_keys, write_json, write_markdown
from recipes.bench.load import load_argvs, run_loads, trial_problem
from recipes.bench.scenarios import held_out
from recipes.bench.servers import Server, start_server, stop_server, tail_line
from recipes.bench.settings import Build, Settings, Setup, instance_env, raise_open_files_limit, started_setup
from recipes.errors import PgoError
from recipes.procs import describe_exit
from recipes.runner import say
from recipes.workload import Scenario

SETTLE_SECONDS = 0.05  # after h2load exits, let the server close its connections before reading its time


# ---------------------------------------------------------------------------------------------- trials


def no_cpu_measured(cpu: float, whose: str, what: str) -> str:
    """Why a trial cannot be measured, or ``""``: CPU time is counted in clock ticks (10 ms), so a trial too short
    to see one has no CPU time per request to compare (and would divide by zero)."""
    if cpu > 0:
        return ""
    return (
        f"{whose} used no CPU time the kernel counts (it counts in {1000 / procstat.CLOCK_TICKS:g} ms ticks): too few "
        f"{what} to measure; raise --scale or the scenario's count"
    )


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(
    server: Server,
    scenario: Scenario,
    build: str,
    index: int,
    *,
    settings: Settings,
    setup: Setup,
    workdir: Path,
) -> Trial:
    """One trial: the server's CPU time around one h2load run of the scenario's request count."""
    argvs = load_argvs(scenario, server, scenario.count, workdir / f"{build}-uris.txt", setup.values)
    upstream_pid = setup.upstream_pid
    upstream0 = procstat.cpu_seconds(upstream_pid) if upstream_pid else None
    server0 = procstat.read_stat(server.pid)
    idle0 = procstat.core_idle(settings.server_core)
    harness0 = _self_cpu()
    run = run_loads(
        argvs,
        core=settings.load_core,
        env=settings.env,
        log=workdir / f"{build}-trial-{index}.log",
        timeout=settings.trial_timeout,
    )
    harness1 = _self_cpu()
    core_idle = (procstat.core_idle(settings.server_core) - idle0) / procstat.CLOCK_TICKS
    time.sleep(SETTLE_SECONDS)
    problem = trial_problem(run, scenario.count, scenario.expect)
    if not server.alive():
        problem = problem or f"the server exited with {server.child.returncode} during the trial"
        user_ticks = system_ticks = 0
    else:
        server1 = procstat.read_stat(server.pid)
        user_ticks, system_ticks = server1.utime - server0.utime, server1.stime - server0.stime
        problem = problem or no_cpu_measured(user_ticks + system_ticks, "the server", "requests")
    upstream_cpu = procstat.cpu_seconds(upstream_pid) - upstream0 if upstream_pid and upstream0 is not None else None
    trial = Trial(
        build=build,
        index=index,
        requests=scenario.count,
        answered=run.result.succeeded if run.result else 0,
        server_cpu=(user_ticks + system_ticks) / procstat.CLOCK_TICKS,
        server_user=user_ticks / procstat.CLOCK_TICKS,
        wall=run.wall,
        core_idle=core_idle,
        load_cpu=run.cpu,
        harness_cpu=harness1 - harness0,
        upstream_cpu=upstream_cpu,
        status=dict(run.result.status) if run.result else {},
        problem=problem,
    )
    _say_trial(scenario, server.build.label, trial)
    return trial


def _say_trial(scenario: Scenario, label: str, trial: Trial) -> None:
    if trial.valid:
        verdict = f"{design.duration(trial.us_per_request):>11}/{scenario.unit} ({trial.user_share * 100:.0f} % user)"
    else:
        verdict = f"INVALID: {trial.problem}"
    say(f"  {scenario.name} {label:>9} #{trial.index}: {verdict} ({trial.wall:.2f} s)")


def measure_command(
    build: Build,
    scenario: Scenario,
    key: str,
    index: int,
    *,
    settings: Settings,
    setup: Setup,
    workdir: Path,
    stdin: Path | None,
) -> Trial:
    """One trial of a command scenario: the runs' CPU time (user and system, from ``wait4``) per run."""
    env = instance_env(scenario.instance, settings.env, setup.values)
    harness0 = _self_cpu()
    runs = run_command(
        build.binary,
        scenario,
        scenario.count,
        core=settings.server_core,
        values=setup.values,
        env=env,
        log=workdir / f"{key}-trial-{index}.log",
        stdin=stdin,
        timeout=settings.trial_timeout,
    )
    trial = Trial(
        build=key,
        index=index,
        requests=scenario.count,
        answered=runs.done,
        server_cpu=runs.user + runs.system,
        server_user=runs.user,
        wall=runs.wall,
        harness_cpu=_self_cpu() - harness0,
        problem=runs.problem or no_cpu_measured(runs.user + runs.system, "the runs", "runs"),
    )
    _say_trial(scenario, build.label, trial)
    return trial


# ---------------------------------------------------------------------------------------------- scenarios


def run_scenario(scenario: Scenario, settings: Settings, setup: Setup) -> ScenarioResult:
    workdir = settings.out.run(scenario.name)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    say(
        f"bench: {scenario.name}: {scenario.title} ({settings.trials} trials of {scenario.count} "
        f"{scenario.unit}s, {len(settings.builds)} builds)"
    )
    before = canary.time_canary(settings.server_core)
    trials: list[Trial] = []
    problem = ""
    servers: dict[str, Server] = {}
    try:
        if scenario.kind == "command":
            trials = _command_trials(scenario, settings, setup, workdir)
        else:
            for key, build in settings.keyed:
                servers[key] = start_server(
                    build,
                    scenario,
                    core=settings.server_core,
                    values=setup.values,
                    env=settings.env,
                    workdir=workdir,
                    shims=settings.out.sigterm,
                    name=key,
                )
            for key, server in servers.items():
                warm = run_loads(
                    load_argvs(scenario, server, scenario.warmup_requests, workdir / f"{key}-uris.txt", setup.values),
                    core=settings.load_core,
                    env=settings.env,
                    log=workdir / f"{key}-warmup.log",
                    timeout=settings.trial_timeout,
                )
                why = trial_problem(warm, scenario.warmup_requests, scenario.expect)
                if why:  # said, not decisive: the trials themselves are judged
                    say(f"  {scenario.name}: the warm-up of {server.build.label} did not pass: {why}")
            for index, order in settings.rounds:
                for key, _ in order:
                    trials.append(
                        measure(servers[key], scenario, key, index, settings=settings, setup=setup, workdir=workdir)
                    )
    except PgoError as error:
        problem = error.line()
        say(f"  {scenario.name}: INVALID: {problem}")
    finally:
        for server in servers.values():
            code = stop_server(server, scenario.instance.options.stop_timeout)
            if code != 0 and not problem:
                problem = (
                    f"{server.build.label} exited with {describe_exit(code)} on SIGTERM (expected 0): "
                    f"{tail_line(server.log)}"
                )
            shutil.rmtree(server.instance_dir, ignore_errors=True)  # access logs and the like: not kept
    after = canary.time_canary(settings.server_core)
    marking = held_out(scenario, settings.workload)
    return ScenarioResult(
        scenario.name,
        scenario.title,
        trials,
        before.wall,
        after.wall,
        problem,
        unit=scenario.unit,
        held_out=marking.as_json(),
        builds=list(build_keys(len(settings.builds))),
        kind=scenario.kind,
        paced=scenario.rps is not None,
        connections=scenario.connections,
        streams=scenario.streams,
    )


def _command_trials(scenario: Scenario, settings: Settings, setup: Setup, workdir: Path) -> list[Trial]:
    env = instance_env(scenario.instance, settings.env, setup.values)
    stdin = stdin_file(scenario, setup.values, env, workdir)
    for key, build in settings.keyed:
        warm = run_command(
            build.binary,
            scenario,
            scenario.warmup_requests,
            core=settings.server_core,
            values=setup.values,
            env=env,
            log=workdir / f"{key}-warmup.log",
            stdin=stdin,
            timeout=settings.trial_timeout,
        )
        if warm.problem:
            say(f"  {scenario.name}: the warm-up of {build.label} did not pass: {warm.problem}")
    trials = []
    for index, order in settings.rounds:
        for key, build in order:
            trials.append(
                measure_command(
                    build, scenario, key, index, settings=settings, setup=setup, workdir=workdir, stdin=stdin
                )
            )
    return trials


@contextmanager
def _load_side(core: int) -> Iterator[None]:
    """This process on the load generator's core (so it never competes with the server), then back."""
    with canary.pinned({core}):
        yield


def run_bench(
    settings: Settings, coverage: Callable[[Settings, Setup], dict[str, Any]] | None = None
) -> list[ScenarioResult]:
    """Every scenario (after ``coverage``, the coverage check, when given); the JSON and Markdown are rewritten
    after each one, so a stopped run leaves its part."""
    raise_open_files_limit()
    scenarios = [s.scaled(settings.scale) for s in settings.scenarios]
    results: list[ScenarioResult] = []
    meta: dict[str, Any] = settings.meta()
    with started_setup(settings) as setup, _load_side(settings.load_core):
        if coverage is not None:
            meta["coverage"] = coverage(settings, setup)
        for scenario in scenarios:
            results.append(run_scenario(scenario, settings, setup))
            write_json(settings.out.results_json, results, meta)
            write_markdown(settings.out.results_md, results, meta)
    return results
