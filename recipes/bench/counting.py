"""The counted trials (``--measure counts``): each build under valgrind, the counts read from its output files.

A command scenario: each trial is the scenario's runs, each under ``valgrind --tool=cachegrind`` (its own
process, pinned to the server's core, its output file and valgrind's log under ``bench/runs/<scenario>/``), the
totals of their ``summary:`` lines added. No warm-up: every run is a new process with cold simulated caches, the
same every time.

A server scenario: one server per build under ``valgrind --tool=callgrind``, pinned to the server's core as the
CPU bench pins it, warmed up under the simulation; then, trial by trial and build by build, ``callgrind_control
--zero``, the trial's requests from h2load on the other core, a wait until the server is quiet (its CPU time
stops moving: the connections it closes are part of the requests), ``callgrind_control --dump``; the dump's
totals over the requests answered, and those of the server's own binary apart (callgrind's objects: without the
C library and the loader). Start-up, warm-up and what the server does between trials are not counted. What still
varies (docs/bench/2026-12-03-counts-demo.md): glibc's allocator, whose free lists the interleaving of the
connections leaves in another state each trial (nearly all of the whole process's spread: hence the binary's
figures, which the gate judges), the framing of HTTP/2 streams the load generator's timing decides, the clock
(a header that gains a digit), and a pool thread started again after idling (its stack's first misses).

valgrind is ~50 times slower than the machine: the readiness limit and the trial limit are multiplied by
:data:`SLOWDOWN` and :data:`TRIAL_FACTOR`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes import procs
from recipes.bench import canary, procstat
from recipes.bench.commands import command_parts, stdin_file
from recipes.bench.counts import (
    CACHEGRIND,
    CALLGRIND,
    Counts,
    dump_trigger,
    find_tool,
    own_object,
    parse_objects,
    parse_totals,
    read_totals,
    refuse_unknown_instruction,
    version,
)
from recipes.bench.counts_report import CountsResult, CountTrial, Gate, too_short, write_json, write_markdown
from recipes.bench.cpu_report import build_keys
from recipes.bench.load import load_argvs, run_loads, trial_problem
from recipes.bench.scenarios import held_out
from recipes.bench.servers import Server, start_server, stop_server, tail_line
from recipes.bench.settings import Build, Settings, Setup, instance_env, raise_open_files_limit, started_setup
from recipes.errors import BenchError, PgoError
from recipes.inputs import read_text
from recipes.procs import describe_exit
from recipes.runner import TimedOut, log_tail, query, say
from recipes.workload import Scenario

SLOWDOWN = 50  # valgrind's, roughly: the readiness limit is the instance's times this
TRIAL_FACTOR = 5  # a counted trial may take --trial-timeout times this (a tenth of the count, 50 times slower)
STOP_LIMIT = 60.0  # seconds a server under valgrind may take to exit on SIGTERM (it writes its last dump)
QUIET_CHECKS = 3  # after a trial's requests, this many reads of the server's CPU time in a row without change
QUIET_INTERVAL = 0.1
QUIET_LIMIT = 5.0
CONTROL_TIMEOUT = 120.0


@dataclass(frozen=True)
class Tools:
    valgrind: Path
    callgrind_control: Path | None
    version: str

    def meta(self) -> dict[str, Any]:
        return {"version": self.version, "cachegrind": list(CACHEGRIND), "callgrind": list(CALLGRIND)}


def find_tools(environ: Mapping[str, str], scenarios: list[Scenario]) -> Tools:
    """valgrind, and callgrind_control when a server scenario is counted; one line naming the package if not."""
    valgrind = find_tool("valgrind", environ)
    control = find_tool("callgrind_control", environ) if any(s.kind != "command" for s in scenarios) else None
    return Tools(valgrind, control, version(valgrind, environ))


# ---------------------------------------------------------------------------------------------- commands


def count_command(
    build: Build,
    scenario: Scenario,
    key: str,
    index: int,
    *,
    settings: Settings,
    setup: Setup,
    workdir: Path,
    stdin: Path | None,
    tools: Tools,
) -> CountTrial:
    """One trial of a command scenario: its runs, each under cachegrind, their totals added."""
    env = instance_env(scenario.instance, settings.env, setup.values)
    args, cwd = command_parts(scenario, setup.values, env)
    deadline = time.monotonic() + settings.trial_timeout * TRIAL_FACTOR
    total = Counts({})
    files: list[str] = []
    done = 0
    leftovers: list[procs.Leftover] = []
    problem = ""
    start = time.perf_counter()
    with ExitStack() as stack:
        stack.enter_context(canary.pinned({settings.server_core}))
        out = stack.enter_context((workdir / f"{key}-trial-{index}.log").open("wb"))
        for number in range(1, scenario.count + 1):
            stem = workdir / f"{key}-trial-{index}-run-{number}"
            counted, vlog = stem.with_name(stem.name + ".cachegrind.out"), stem.with_name(stem.name + ".valgrind.log")
            argv = [
                str(tools.valgrind), *CACHEGRIND, f"--cachegrind-out-file={counted}", f"--log-file={vlog}",
                str(build.binary), *args,
            ]  # fmt: skip
            source = stack.enter_context(stdin.open("rb")) if stdin is not None else None
            proc, tag = procs.start_group(
                argv,
                env,
                cwd=cwd,
                stdin=source if source is not None else procs.DEVNULL,
                stdout=out,
                stderr=procs.STDOUT,
            )
            exited, returncode, _usage, left = procs.reap_group(proc, tag, deadline)
            leftovers += left
            if source is not None:
                source.close()
            log = read_text(vlog, "valgrind's log", BenchError, "valgrind did not start") if vlog.is_file() else ""
            refuse_unknown_instruction(build.label, build.binary, log, vlog, tools.version)
            if not exited:
                problem = f"run {number} of {scenario.count} did not finish within its limit under valgrind"
                break
            if returncode != scenario.expect_exit:
                problem = (
                    f"run {number} of {scenario.count} exited with {describe_exit(returncode)} under valgrind, "
                    f"expected {scenario.expect_exit} (see {vlog})"
                )
                break
            total = total + read_totals(counted)
            files.append(str(counted))
            done += 1
    if leftovers:
        say(f"scenario {scenario.name}: its runs {procs.leftovers_line(leftovers)}")
    if not problem:
        problem = too_short(total, f"a trial of {done} runs", "run")
    trial = CountTrial(
        key, index, scenario.count, done, dict(total.events), files, time.perf_counter() - start, problem
    )
    _say(scenario, build.label, trial)
    return trial


def _say(scenario: Scenario, label: str, trial: CountTrial) -> None:
    if trial.valid:
        figures = trial.per_unit()
        verdict = (
            f"{figures['instructions']:,.0f} instructions/{scenario.unit}, estimate {figures['estimate']:,.0f} cycles"
            + (f" (in the binary {figures['binary_estimate']:,.0f})" if "binary_estimate" in figures else "")
        )
    else:
        verdict = f"INVALID: {trial.problem}"
    say(f"  {scenario.name} {label:>9} #{trial.index}: {verdict} ({trial.wall:.1f} s)")


def _command_trials(
    scenario: Scenario, settings: Settings, setup: Setup, workdir: Path, tools: Tools
) -> list[CountTrial]:
    env = instance_env(scenario.instance, settings.env, setup.values)
    stdin = stdin_file(scenario, setup.values, env, workdir)
    return [
        count_command(
            build, scenario, key, index, settings=settings, setup=setup, workdir=workdir, stdin=stdin, tools=tools
        )
        for index, order in settings.rounds
        for key, build in order
    ]


# ---------------------------------------------------------------------------------------------- servers


def _control(tools: Tools, server: Server, *args: str, env: Mapping[str, str]) -> None:
    assert tools.callgrind_control is not None
    try:
        done = query([str(tools.callgrind_control), *args, str(server.pid)], env=env, timeout=CONTROL_TIMEOUT)
    except TimedOut as exc:
        raise BenchError(
            f"callgrind_control {' '.join(args)} {server.pid} ({server.build.label}) did not answer in "
            f"{CONTROL_TIMEOUT:.0f} s",
            "callgrind_control needs vgdb (valgrind's gdbserver) and ptrace allowed; is the machine overloaded?",
        ) from exc
    if done.returncode != 0 or "OK" not in done.stdout:
        said = " ".join((done.stdout + done.stderr).split())[:200]
        raise BenchError(
            f"callgrind_control {' '.join(args)} {server.pid} ({server.build.label}) failed: {said}",
            "callgrind_control needs vgdb (valgrind's gdbserver) and ptrace allowed",
        )


def wait_quiet(pid: int) -> float:
    """Wait until the process's CPU time stops moving (:data:`QUIET_CHECKS` reads in a row), at most
    :data:`QUIET_LIMIT` seconds; the seconds waited."""
    start = time.monotonic()
    last, same = -1, 0
    while time.monotonic() - start < QUIET_LIMIT and same < QUIET_CHECKS:
        stat = procstat.read_stat(pid)
        now = stat.utime + stat.stime
        same = same + 1 if now == last else 0
        last = now
        time.sleep(QUIET_INTERVAL)
    return time.monotonic() - start


def _dump_file(server_out: Path, trigger: str) -> Path:
    """The callgrind dump written for ``trigger`` (``<out>.1``, ``<out>.2`` …)."""
    for path in sorted(server_out.parent.glob(server_out.name + ".*"), key=lambda p: p.stat().st_mtime, reverse=True):
        if dump_trigger(read_text(path, "callgrind's dump", BenchError, "see the valgrind log")) == trigger:
            return path
    raise BenchError(f"callgrind wrote no dump {trigger!r} beside {server_out}", "see the valgrind log beside it")


def count_server(
    server: Server, scenario: Scenario, key: str, index: int, *, settings: Settings, setup: Setup, workdir: Path,
    tools: Tools,
) -> CountTrial:  # fmt: skip
    """One trial: zero, the requests, quiet, dump; the dump's totals over the requests answered."""
    argvs = load_argvs(scenario, server, scenario.count, workdir / f"{key}-uris.txt", setup.values)
    start = time.perf_counter()
    _control(tools, server, "--zero", env=settings.env)
    run = run_loads(
        argvs,
        core=settings.load_core,
        env=settings.env,
        log=workdir / f"{key}-trial-{index}.log",
        timeout=settings.trial_timeout * TRIAL_FACTOR,
    )
    problem = trial_problem(run, scenario.count, scenario.expect)
    events: dict[str, int] = {}
    files: list[str] = []
    binary_events: dict[str, int] | None = None
    answered = run.result.succeeded if run.result else 0
    if not server.alive():
        problem = problem or f"the server exited with {server.child.returncode} during the trial"
    else:
        wait_quiet(server.pid)
        trigger = f"{key}-trial-{index}"
        _control(tools, server, "--dump", trigger, env=settings.env)
        dump = _dump_file(workdir / f"{key}.callgrind.out", f"dump {trigger}")
        text = read_text(dump, "callgrind's dump", BenchError, "see the valgrind log beside it")
        counts = parse_totals(text, str(dump))
        events, files = dict(counts.events), [str(dump)]
        own = own_object(parse_objects(text, str(dump)), server.build.binary)
        binary_events = dict(own.events) if own is not None else None
        problem = problem or too_short(counts, f"a trial of {answered} requests", "request")
    trial = CountTrial(
        key, index, scenario.count, answered, events, files, time.perf_counter() - start, problem, binary_events
    )
    _say(scenario, server.build.label, trial)
    return trial


def _start_counted(build: Build, scenario: Scenario, key: str, settings: Settings, setup: Setup, workdir: Path,
                   tools: Tools) -> Server:  # fmt: skip
    vlog = workdir / f"{key}.valgrind.log"
    wrapper = [
        str(tools.valgrind), *CALLGRIND, f"--callgrind-out-file={workdir / f'{key}.callgrind.out'}",
        f"--log-file={vlog}",
    ]  # fmt: skip
    try:
        return start_server(
            build,
            scenario,
            core=settings.server_core,
            values=setup.values,
            env=settings.env,
            workdir=workdir,
            shims=settings.out.sigterm,
            name=key,
            wrapper=wrapper,
            ready_timeout=scenario.instance.options.ready_timeout * SLOWDOWN,
        )
    except BenchError:
        if vlog.is_file():
            log = read_text(vlog, "valgrind's log", BenchError, "see the server's log")
            refuse_unknown_instruction(build.label, build.binary, log, vlog, tools.version)
        raise


def _server_trials(
    scenario: Scenario, settings: Settings, setup: Setup, workdir: Path, tools: Tools, servers: dict[str, Server]
) -> list[CountTrial]:
    for key, build in settings.keyed:
        servers[key] = _start_counted(build, scenario, key, settings, setup, workdir, tools)
    for key, server in servers.items():
        warm = run_loads(
            load_argvs(scenario, server, scenario.warmup_requests, workdir / f"{key}-uris.txt", setup.values),
            core=settings.load_core,
            env=settings.env,
            log=workdir / f"{key}-warmup.log",
            timeout=settings.trial_timeout * TRIAL_FACTOR,
        )
        why = trial_problem(warm, scenario.warmup_requests, scenario.expect)
        if why:
            say(f"  {scenario.name}: the warm-up of {server.build.label} did not pass: {why}")
    return [
        count_server(server, scenario, key, index, settings=settings, setup=setup, workdir=workdir, tools=tools)
        for index, order in settings.rounds
        for key, _ in order
        for server in (servers[key],)
    ]


# ---------------------------------------------------------------------------------------------- scenarios


def count_scenario(scenario: Scenario, settings: Settings, setup: Setup, tools: Tools) -> CountsResult:
    workdir = settings.out.run(scenario.name)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    say(
        f"bench: {scenario.name}: {scenario.title} (counts: {settings.trials} trials of {scenario.count} "
        f"{scenario.unit}s under valgrind, {len(settings.builds)} builds)"
    )
    trials: list[CountTrial] = []
    problem = ""
    servers: dict[str, Server] = {}
    try:
        if scenario.kind == "command":
            trials = _command_trials(scenario, settings, setup, workdir, tools)
        else:
            trials = _server_trials(scenario, settings, setup, workdir, tools, servers)
    except PgoError as error:
        if "does not know an instruction" in error.message:
            raise
        problem = error.line()
        say(f"  {scenario.name}: INVALID: {problem}")
    finally:
        for key, server in servers.items():
            code = stop_server(server, max(STOP_LIMIT, scenario.instance.options.stop_timeout))
            if code != 0 and not problem:
                problem = (
                    f"{server.build.label} exited with {describe_exit(code)} on SIGTERM under valgrind (expected 0): "
                    f"{tail_line(server.log) or log_tail(workdir / f'{key}.valgrind.log', 3, joined=' | ')}"
                )
            shutil.rmtree(server.instance_dir, ignore_errors=True)
    return CountsResult(
        scenario.name,
        scenario.title,
        trials,
        problem,
        unit=scenario.unit,
        held_out=held_out(scenario, settings.workload).as_json(),
        builds=list(build_keys(len(settings.builds))),
    )


@contextmanager
def _load_side(core: int) -> Iterator[None]:
    with canary.pinned({core}):
        yield


def run_counts(settings: Settings, tools: Tools, gate: Gate) -> tuple[list[CountsResult], dict[str, Any]]:
    """Every scenario counted; the JSON and Markdown rewritten after each one."""
    raise_open_files_limit()
    scenarios = [s.scaled(settings.scale) for s in settings.scenarios]
    results: list[CountsResult] = []
    meta: dict[str, Any] = settings.meta()
    meta.update(valgrind=tools.meta(), gate=gate.as_json())
    meta.pop("canary_iterations", None)  # no canary: the counts do not move with the machine's load
    with started_setup(settings) as setup, _load_side(settings.load_core):
        for scenario in scenarios:
            results.append(count_scenario(scenario, settings, setup, tools))
            write_json(settings.out.results_json, results, meta)
            write_markdown(settings.out.results_md, results, meta)
    return results, meta
