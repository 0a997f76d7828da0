"""CPU time, the bench's default measure: per request (or per run), the server's or the runs' user and system time.

A server trial's figure is the server's user and system time (``/proc/<pid>/stat``, all threads, exited ones
included), read before and after the trial, over the requests h2load saw answered. A command trial's figure is
the runs' user and system time from ``wait4`` over the runs (:func:`recipes.bench.commands.run_command`). The
canary (:mod:`recipes.bench.canary`) runs on the server's core before and after each scenario.
:mod:`recipes.bench.harness` runs the scenarios; :mod:`recipes.bench.cpu_report` says what the trials say.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

from recipes.bench import canary, design, procstat
from recipes.bench import cpu_report as report
from recipes.bench.commands import build_runs
from recipes.bench.cpu_report import ScenarioResult, Trial
from recipes.bench.harness import Measure, result_fields
from recipes.bench.load import load_argvs, run_loads, trial_problem
from recipes.bench.servers import Server, start_server
from recipes.bench.settings import Build, Place
from recipes.runner import say
from recipes.workload import Scenario

SETTLE_SECONDS = 0.05  # after h2load exits, let the server close its connections before reading its time


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


def _say_trial(scenario: Scenario, label: str, trial: Trial) -> None:
    if trial.valid:
        verdict = f"{design.duration(trial.us_per_request):>11}/{scenario.unit} ({trial.user_share * 100:.0f} % user)"
    else:
        verdict = f"INVALID: {trial.problem}"
    say(f"  {scenario.name} {label:>9} #{trial.index}: {verdict} ({trial.wall:.2f} s)")


class CpuTime(Measure[Trial, ScenarioResult]):
    """The CPU time measure: the canary around each scenario, the servers as they are, the command scenarios
    warmed up first."""

    markdown = staticmethod(report.markdown)

    def canary(self, core: int) -> float | None:
        return canary.time_canary(core).wall

    def start(self, build: Build, key: str, at: Place) -> Server:
        return start_server(build, at, core=at.settings.server_core, name=key)

    def server_trial(self, server: Server, key: str, index: int, at: Place) -> Trial:
        """One trial: the server's CPU time around one h2load run of the scenario's request count."""
        scenario, settings, setup, workdir = at
        argvs = load_argvs(scenario, server, scenario.count, workdir / f"{key}-uris.txt", setup.values)
        upstream_pid = setup.upstream_pid
        upstream0 = procstat.cpu_seconds(upstream_pid) if upstream_pid else None
        server0 = procstat.read_stat(server.pid)
        idle0 = procstat.core_idle(settings.server_core)
        harness0 = _self_cpu()
        run = run_loads(argvs, at, workdir / f"{key}-trial-{index}.log")
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
        upstream_cpu = (
            procstat.cpu_seconds(upstream_pid) - upstream0 if upstream_pid and upstream0 is not None else None
        )
        trial = Trial(
            build=key,
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

    def command_trial(self, build: Build, key: str, index: int, at: Place, stdin: Path | None) -> Trial:
        """One trial of a command scenario: the runs' CPU time (user and system, from ``wait4``) per run."""
        scenario, _settings, _setup, workdir = at
        harness0 = _self_cpu()
        runs = build_runs(build, scenario.count, workdir / f"{key}-trial-{index}.log", at, stdin)
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

    def result(
        self, at: Place, trials: list[Trial], problem: str, canaries: tuple[float | None, float | None]
    ) -> ScenarioResult:
        scenario, before, after = at.scenario, *canaries
        assert before is not None and after is not None
        return ScenarioResult(
            trials=trials,
            canary_before=before,
            canary_after=after,
            problem=problem,
            kind=scenario.kind,
            paced=scenario.rps is not None,
            connections=scenario.connections,
            streams=scenario.streams,
            **result_fields(at),
        )
