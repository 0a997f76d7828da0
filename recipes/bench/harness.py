"""The harness: builds run in turn, CPU time per request (or per run), interleaved trial by trial.

For each scenario (declared in the workload file, :mod:`recipes.bench.scenarios`): the canary on the server's
core; then, for a server scenario, one server per build started from the scenario's instance (its args and
config template, pinned to the server's core by ``taskset``, every thread checked), each warmed up; then trial
1 of the baseline, trial 1 of each candidate, trial 2 of the baseline … each a fixed request count sent by
h2load pinned to the other core; the servers stopped (SIGTERM, exit 0 expected); the canary again. A command
scenario runs the binary instead, pinned to the server's core, a fixed number of runs per trial.

A server trial's figure is the server's user and system time (``/proc/<pid>/stat``, all threads, exited ones
included), read before and after the trial, over the requests h2load saw answered. A command trial's figure is
the runs' user and system time from ``wait4`` over the runs. A trial where h2load saw one request fail, one
status outside what the scenario expects, or where a run exited otherwise than expected, is invalid, and so is
the scenario.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes import h2load, net
from recipes.bench import canary, procstat
from recipes.bench.report import ScenarioResult, Trial, build_keys, write_json, write_markdown
from recipes.bench.scenarios import Scenario, held_out
from recipes.errors import BenchError, ConfigError, PgoError
from recipes.procs import Child, describe_exit
from recipes.runner import log_tail, quote, say
from recipes.schema import fill
from recipes.train import sigterm
from recipes.train.base import RESOURCES, ResourceContext
from recipes.train.command import EnvironmentValues, reap_group
from recipes.train.resources import UpstreamBackend
from recipes.workload import Instance, Workload

STOP_TIMEOUT = 15.0
SETTLE_SECONDS = 0.05  # after h2load exits, let the server close its connections before reading its time


@dataclass(frozen=True)
class Build:
    """One binary to measure, and what to call it in the table."""

    label: str
    binary: Path
    sha256: str = ""
    origin: str = ""  # where the binary was copied from


@dataclass(frozen=True)
class Settings:
    builds: tuple[Build, ...]  # the baseline first, then each candidate
    scenarios: Sequence[Scenario]
    trials: int
    out: Path  # <work>/bench
    server_core: int
    load_core: int
    workload: Workload
    project_dir: Path
    crate_dir: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # what the binaries and the setup start from
    scale: float = 1.0
    upstream_url: str | None = None  # an upstream of your own (or a dead one, to see a scenario refused)
    trial_timeout: float = 120.0
    command: str = ""

    @property
    def keyed(self) -> tuple[tuple[str, Build], ...]:
        return tuple(zip(build_keys(len(self.builds)), self.builds, strict=True))

    def meta(self) -> dict[str, object]:
        base, cand = self.builds[0], self.builds[1]
        return {
            "baseline": str(base.binary),
            "baseline_sha256": base.sha256,
            "baseline_label": base.label,
            "baseline_origin": base.origin,
            "candidate": str(cand.binary),
            "candidate_sha256": cand.sha256,
            "candidate_label": cand.label,
            "candidate_origin": cand.origin,
            "builds": [
                {"key": key, "label": b.label, "binary": str(b.binary), "sha256": b.sha256, "origin": b.origin}
                for key, b in self.keyed
            ],
            "workload": str(self.workload.path),
            "trials": self.trials,
            "scale": self.scale,
            "server_core": self.server_core,
            "load_core": self.load_core,
            "canary_iterations": canary.ITERATIONS,
            "command": self.command,
        }


def choose_cores(allowed: set[int], server: int | None = None, load: int | None = None) -> tuple[int, int]:
    """The server's core and the load generator's: two different ones of those this process may use.

    Default: the last allowed core for the server, the first for the load (core 0 takes more interrupts).
    """
    cores = sorted(allowed)
    if len(cores) < 2:
        raise BenchError(
            f"the benchmark needs two cores (server and load generator apart) and may use only {cores}",
            "run it on a machine (or a CPU set) with at least two cores",
        )
    server = cores[-1] if server is None else server
    load = next(c for c in cores if c != server) if load is None else load
    for name, core in (("--server-core", server), ("--load-core", load)):
        if core not in allowed:
            raise ConfigError(f"{name} {core}: not a core this process may use", f"one of {cores}")
    if server == load:
        raise ConfigError(f"--server-core and --load-core are both {server}", "give them two different cores")
    return server, load


def raise_open_files_limit() -> None:
    """1024 connections need more than the usual soft limit of 1024 descriptors (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


# ---------------------------------------------------------------------------------------------- setup


@dataclass
class Setup:
    """The workload's ``[setup]`` resources, started once for the whole run, and the placeholders they give."""

    values: dict[str, str]
    upstream_pid: int | None = None


@contextmanager
def started_setup(settings: Settings) -> Iterator[Setup]:
    """Start the workload's ``[setup]`` (the upstream backend pinned to the load core); ``--upstream`` replaces
    ``{upstream}``."""
    scratch = settings.out / "setup"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    values = {
        "work": str(scratch),
        "workload_dir": str(settings.workload.path.parent),
        "project": str(settings.project_dir),
        "crate": str(settings.crate_dir or settings.project_dir),
    }
    setup = Setup(values)
    with ExitStack() as stack:
        for kind, options in settings.workload.resources:
            live = stack.enter_context(
                RESOURCES[kind].start(options, ResourceContext(scratch, settings.out / "logs", dict(settings.env)))
            )
            values.update(live.values)
            child = live.handle.child if isinstance(live.handle, UpstreamBackend) else None
            if child is not None:
                for thread in procstat.read_threads(child.pid):
                    os.sched_setaffinity(thread.pid, {settings.load_core})
                setup.upstream_pid = child.pid
        if settings.upstream_url is not None:
            values["upstream"] = settings.upstream_url
            setup.upstream_pid = None
        yield setup


def instance_env(instance: Instance, base: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env.update({k: fill(v, dict(values)) for k, v in instance.env.items()})
    return env


# ---------------------------------------------------------------------------------------------- servers


@dataclass
class Server:
    """One running build of the server, pinned to its core."""

    build: Build
    child: Child
    http_port: int
    https_port: int
    log: Path
    instance_dir: Path

    @property
    def pid(self) -> int:
        return self.child.pid

    def base_url(self, *, tls: bool) -> str:
        return f"https://127.0.0.1:{self.https_port}" if tls else f"http://127.0.0.1:{self.http_port}"

    def alive(self) -> bool:
        return self.child.alive()


def start_server(
    build: Build,
    scenario: Scenario,
    *,
    core: int | None,
    values: Mapping[str, str],
    env: Mapping[str, str],
    workdir: Path,
    name: str,
) -> Server:
    """Start ``build`` as the scenario's instance says (on ``core``, or unpinned); wait until it is ready."""
    options = scenario.instance.options
    http_port, https_port = net.free_ports(2)
    instance_dir = workdir / name
    instance_dir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{name}.toml"
    filled = {
        **values,
        "http_port": str(http_port),
        "https_port": str(https_port),
        "instance_dir": str(instance_dir),
        "config": str(config),
    }
    if options.config is not None:
        config.write_text(fill(options.config, filled), encoding="utf-8")
    log = workdir / f"{name}.log"
    pin = ["taskset", "-c", str(core)] if core is not None else []
    argv = [*pin, str(build.binary), *(fill(a, filled) for a in options.args)]
    server_env = instance_env(scenario.instance, env, filled)
    if options.exit_on_sigterm:
        server_env = sigterm.preload_env(server_env, sigterm.shim(workdir.parent.parent / "sigterm", server_env))
    say(f"  $ {quote(argv)}")
    child = Child.start(argv, env=server_env, log=log)
    server = Server(build, child, http_port, https_port, log, instance_dir)
    ready = fill(options.ready, filled)
    if not child.wait_ready(ready, options.ready_timeout).ready:
        code = stop_server(server)
        raise BenchError(
            f"{build.label} ({build.binary}) did not answer {ready} with 200 within {options.ready_timeout:g} s "
            f"({'exited with ' + describe_exit(code) if code is not None else 'killed'}): {_log_tail(log)}",
            f"see {log}",
        )
    if core is not None:
        _check_pinned(server, core)
    return server


def _log_tail(path: Path, lines: int = 5) -> str:
    return log_tail(path, lines, joined=" | ")


def _check_pinned(server: Server, core: int) -> None:
    affinities = procstat.thread_affinities(server.pid)
    stray = {tid: sorted(cpus) for tid, cpus in affinities.items() if cpus != {core}}
    if not affinities or stray:
        stop_server(server)
        raise BenchError(
            f"{server.build.label}: threads not pinned to core {core}: {stray or 'none found'}",
            "taskset must be the util-linux one",
        )


def stop_server(server: Server, limit: float = STOP_TIMEOUT) -> int:
    """SIGTERM, then the exit code (a kill after the timeout gives a negative one)."""
    return server.child.stop_or_kill(limit)


# ---------------------------------------------------------------------------------------------- load


@dataclass(frozen=True)
class LoadRun:
    """One h2load run: what it said, and the CPU it used."""

    argv: tuple[str, ...]
    returncode: int
    wall: float
    cpu: float
    output: str
    result: h2load.H2loadSummary | None
    timed_out: bool = False


def load_argvs(
    scenario: Scenario, server: Server, requests: int, uri_file: Path, values: Mapping[str, str] | None = None
) -> list[list[str]]:
    """h2load's command lines for ``requests`` requests: a fixed count, one thread (one core).

    One run, except with ``one_per_connection`` (and handshakes): h2load resumes its TLS session when it
    reconnects (a "connection: close" run costs the server the same with an RSA key as with an ECDSA one), so
    every request gets a fresh client instead, in runs of ``-c B -n B`` (B = the scenario's connections).
    """
    base = server.base_url(tls=scenario.tls)
    known = dict(values or {})
    urls = [f"{base}{fill(path, known)}" for path in scenario.paths]
    # each h2load client asks for the URIs in order from the first: with one request per client, the runs take
    # turns at which path is first (a file of the URIs for each turn), so every path is asked for
    turns = len(urls) if scenario.one_per_connection and len(urls) > 1 else 1
    uri_files = [uri_file if turn == 0 else uri_file.with_name(f"{uri_file.name}.{turn}") for turn in range(turns)]
    if len(urls) > 1:
        for turn, path in enumerate(uri_files):
            path.write_text("".join(f"{url}\n" for url in h2load.rotated(urls, turn)), encoding="utf-8")
    if scenario.one_per_connection:
        batches = [scenario.connections] * (requests // scenario.connections)
        if requests % scenario.connections:
            batches.append(requests % scenario.connections)
    else:
        batches = [requests]
    argvs = []
    for run, count in enumerate(batches):
        argv = h2load.h2load_argv(
            urls if len(urls) == 1 else [],
            requests=count,
            connections=count if scenario.one_per_connection else scenario.connections,
            streams=scenario.streams,
            http1=scenario.protocol == "h1",
            headers=[fill(h, known) for h in scenario.headers],
            uri_file=uri_files[run % turns] if len(urls) > 1 else None,
            threads=1,
        )
        if scenario.rps is not None:
            argv[1:1] = ["--rps", str(scenario.rps)]  # per connection: the whole run at connections x rps req/s
        argvs.append(argv)
    return argvs


def run_load(argv: Sequence[str], *, core: int, log: Path, deadline: float) -> LoadRun:
    """One h2load run on ``core``, killed at ``deadline`` (monotonic); its own CPU time from ``wait4``."""
    full = ["taskset", "-c", str(core), *argv]
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    timed_out = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            timed_out = True
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text(encoding="utf-8", errors="replace")
    try:
        parsed: h2load.H2loadSummary | None = h2load.parse_summary(output)
    except ValueError:
        parsed = None
    return LoadRun(tuple(full), proc.returncode, wall, usage.ru_utime + usage.ru_stime, output, parsed, timed_out)


def add_summaries(summaries: Sequence[h2load.H2loadSummary]) -> h2load.H2loadSummary:
    """The summary of several runs taken as one."""
    status: dict[str, int] = {}
    for summary in summaries:
        for key, value in summary.status.items():
            status[key] = status.get(key, 0) + value
    return h2load.H2loadSummary(
        total=sum(s.total for s in summaries),
        started=sum(s.started for s in summaries),
        done=sum(s.done for s in summaries),
        succeeded=sum(s.succeeded for s in summaries),
        failed=sum(s.failed for s in summaries),
        errored=sum(s.errored for s in summaries),
        timeout=sum(s.timeout for s in summaries),
        status=status,
        protocol=summaries[0].protocol if summaries else None,
        seconds=sum(s.seconds or 0.0 for s in summaries),
    )


def run_loads(argvs: Sequence[Sequence[str]], *, core: int, log: Path, timeout: float) -> LoadRun:
    """The runs of one trial in turn, as one: CPU and wall time added, counts added; stops at the first
    run that fails or has no summary (the sum of counts then says what was missing)."""
    deadline = time.monotonic() + timeout
    runs: list[LoadRun] = []
    for number, argv in enumerate(argvs):
        run = run_load(
            argv, core=core, log=log if len(argvs) == 1 else log.with_suffix(f".{number}.log"), deadline=deadline
        )
        runs.append(run)
        if run.timed_out or run.result is None or run.returncode != 0:
            break
    if len(runs) == 1:
        return runs[0]
    parsed = [r.result for r in runs if r.result is not None]
    failed = next((r for r in runs if r.timed_out or r.result is None or r.returncode != 0), runs[-1])
    return LoadRun(
        argv=failed.argv,
        returncode=failed.returncode,
        wall=sum(r.wall for r in runs),
        cpu=sum(r.cpu for r in runs),
        output=failed.output,
        result=add_summaries(parsed) if len(parsed) == len(runs) else None,
        timed_out=failed.timed_out,
    )


def trial_problem(run: LoadRun, requests: int, expect: str) -> str:
    """Why a trial does not count, or ``""``: every request done and answered with the expected status."""
    if run.timed_out:
        return f"h2load did not finish within {run.wall:.0f} s and was killed"
    if run.result is None:
        last = run.output.strip().splitlines()[-1:] or ["no output"]
        return f"h2load exited with {run.returncode} and no summary: {last[0][:160]}"
    why = h2load.check(run.result, requests, expect)
    if why:
        return why
    if run.returncode != 0:
        return f"h2load exited with {run.returncode}"
    return ""


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
    harness0 = _self_cpu()
    run = run_loads(
        argvs, core=settings.load_core, log=workdir / f"{build}-trial-{index}.log", timeout=settings.trial_timeout
    )
    harness1 = _self_cpu()
    time.sleep(SETTLE_SECONDS)
    problem = trial_problem(run, scenario.count, scenario.expect)
    if not server.alive():
        problem = problem or f"the server exited with {server.child.returncode} during the trial"
        user_ticks = system_ticks = 0
    else:
        server1 = procstat.read_stat(server.pid)
        user_ticks, system_ticks = server1.utime - server0.utime, server1.stime - server0.stime
    upstream_cpu = procstat.cpu_seconds(upstream_pid) - upstream0 if upstream_pid and upstream0 is not None else None
    trial = Trial(
        build=build,
        index=index,
        requests=scenario.count,
        answered=run.result.succeeded if run.result else 0,
        server_cpu=(user_ticks + system_ticks) / procstat.CLOCK_TICKS,
        server_user=user_ticks / procstat.CLOCK_TICKS,
        wall=run.wall,
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
        verdict = f"{trial.us_per_request:10.2f} µs/{scenario.unit} ({trial.user_share * 100:.0f} % user)"
    else:
        verdict = f"INVALID: {trial.problem}"
    say(f"  {scenario.name} {label:>9} #{trial.index}: {verdict} ({trial.wall:.2f} s)")


# ---------------------------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class CommandRuns:
    """``count`` runs of a command: how many did what was expected, and their CPU time from ``wait4``."""

    done: int
    user: float
    system: float
    wall: float
    problem: str = ""


def command_parts(scenario: Scenario, values: Mapping[str, str], env: Mapping[str, str]) -> tuple[list[str], Path]:
    """The scenario's arguments and working directory, placeholders and ``{env:NAME}`` filled."""
    where = f"scenario {scenario.name}"
    known = {**values, "env": EnvironmentValues(env, where)}
    args = [fill(a, known) for a in scenario.args]
    cwd_text = scenario.cwd if scenario.cwd is not None else scenario.instance.options.cwd
    cwd = Path(values["project"]) if cwd_text is None else Path(fill(cwd_text, known)).expanduser()
    if not cwd.is_absolute():
        cwd = Path(values["project"]) / cwd
    if not cwd.is_dir():
        raise ConfigError(f"{where}: cwd {cwd} is not a directory", "create it, or fix cwd in the workload")
    return args, cwd


def run_command(
    binary: Path,
    scenario: Scenario,
    count: int,
    *,
    core: int | None,
    values: Mapping[str, str],
    env: Mapping[str, str],
    log: Path,
    stdin: Path | None,
    timeout: float,
) -> CommandRuns:
    """``count`` runs of ``binary`` (each in its own process group, on ``core``), their CPU time added up."""
    args, cwd = command_parts(scenario, values, env)
    argv = [str(binary), *args]
    deadline = time.monotonic() + timeout
    user = system = 0.0
    done = 0
    problem = ""
    start = time.perf_counter()
    with ExitStack() as stack:
        if core is not None:
            stack.enter_context(canary.pinned({core}))  # the children inherit the core
        out = stack.enter_context(log.open("wb"))
        for number in range(1, count + 1):
            source = stack.enter_context(stdin.open("rb")) if stdin is not None else None
            proc = subprocess.Popen(
                argv,
                env=dict(env),
                cwd=cwd,
                stdin=source if source is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            exited, returncode, usage = reap_group(proc, deadline)
            if source is not None:
                source.close()
            user += usage.ru_utime
            system += usage.ru_stime
            if not exited:
                problem = f"run {number} of {count} did not finish within {timeout:g} s and was killed"
                break
            if returncode != scenario.expect_exit:
                problem = (
                    f"run {number} of {count} exited with {describe_exit(returncode)}, "
                    f"expected {scenario.expect_exit} (see {log})"
                )
                break
            done += 1
    return CommandRuns(done, user, system, time.perf_counter() - start, problem)


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
        problem=runs.problem,
    )
    _say_trial(scenario, build.label, trial)
    return trial


def stdin_file(scenario: Scenario, values: Mapping[str, str], env: Mapping[str, str], workdir: Path) -> Path | None:
    """The scenario's ``stdin``, filled, in a file every run reads from the start."""
    if scenario.stdin is None:
        return None
    path = workdir / "stdin.txt"
    known = {**values, "env": EnvironmentValues(env, f"scenario {scenario.name}")}
    path.write_text(fill(scenario.stdin, known), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- scenarios


def run_scenario(scenario: Scenario, settings: Settings, setup: Setup) -> ScenarioResult:
    workdir = settings.out / "runs" / scenario.name
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
                    name=key,
                )
            for key, server in servers.items():
                warm = run_loads(
                    load_argvs(scenario, server, scenario.warmup_requests, workdir / f"{key}-uris.txt", setup.values),
                    core=settings.load_core,
                    log=workdir / f"{key}-warmup.log",
                    timeout=settings.trial_timeout,
                )
                why = trial_problem(warm, scenario.warmup_requests, scenario.expect)
                if why:  # said, not decisive: the trials themselves are judged
                    say(f"  {scenario.name}: the warm-up of {server.build.label} did not pass: {why}")
            for index in range(1, settings.trials + 1):
                for key, server in servers.items():
                    trials.append(
                        measure(server, scenario, key, index, settings=settings, setup=setup, workdir=workdir)
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
                    f"{_log_tail(server.log)}"
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
    for index in range(1, settings.trials + 1):
        for key, build in settings.keyed:
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
            write_json(settings.out / "results.json", results, meta)
            write_markdown(settings.out / "results.md", results, meta)
    return results
