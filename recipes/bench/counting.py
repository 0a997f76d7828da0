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

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recipes.bench import counts_report, procstat
from recipes.bench.commands import Runs, build_runs
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
from recipes.bench.counts_report import CountsResult, CountTrial, Gate, too_short
from recipes.bench.harness import Measure, result_fields
from recipes.bench.load import load_argvs, run_loads, trial_problem
from recipes.bench.meta import Meta
from recipes.bench.servers import Server, start_server, tail_line
from recipes.bench.settings import Build, Place, Settings
from recipes.errors import BenchError, PgoError
from recipes.inputs import read_text
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


def find_tools(environ: Mapping[str, str], scenarios: list[Scenario]) -> Tools:
    """valgrind, and callgrind_control when a server scenario is counted; one line naming the package if not."""
    valgrind = find_tool("valgrind", environ)
    control = find_tool("callgrind_control", environ) if any(s.kind != "command" for s in scenarios) else None
    return Tools(valgrind, control, version(valgrind, environ))


# ---------------------------------------------------------------------------------------------- commands


@dataclass
class Cachegrind(Runs):
    """A command trial's runs, each under cachegrind (its output file and valgrind's log beside the trial's log),
    their totals added."""

    tools: Tools
    build: Build
    stem: Path  # <workdir>/<key>-trial-<index>
    total: Counts = field(default_factory=lambda: Counts({}))
    files: list[str] = field(default_factory=list)
    under = " under valgrind"

    def _files(self, number: int) -> tuple[Path, Path]:
        """Run ``number``'s output file and valgrind's log."""
        stem = self.stem.with_name(f"{self.stem.name}-run-{number}")
        return stem.with_name(stem.name + ".cachegrind.out"), stem.with_name(stem.name + ".valgrind.log")

    def argv(self, number: int, argv: list[str]) -> list[str]:
        counted, vlog = self._files(number)
        return [
            str(self.tools.valgrind), *CACHEGRIND, f"--cachegrind-out-file={counted}", f"--log-file={vlog}", *argv
        ]  # fmt: skip

    def ended(self, number: int) -> None:
        vlog = self._files(number)[1]
        log = read_text(vlog, "valgrind's log", BenchError, "valgrind did not start") if vlog.is_file() else ""
        refuse_unknown_instruction(self.build.label, self.build.binary, log, vlog, self.tools.version)

    def counted(self, number: int) -> None:
        counted = self._files(number)[0]
        self.total = self.total + read_totals(counted)
        self.files.append(str(counted))

    def limit(self, timeout: float) -> str:  # noqa: ARG002  (the interface: no seconds under valgrind)
        return "its limit under valgrind"

    def see(self, number: int, log: Path) -> Path:  # noqa: ARG002  (the interface: valgrind's log instead)
        return self._files(number)[1]


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


# ---------------------------------------------------------------------------------------------- servers


def _control(tools: Tools, server: Server, *args: str, env: Mapping[str, str]) -> None:
    assert tools.callgrind_control is not None
    what = f"callgrind_control {' '.join(args)} {server.pid} ({server.build.label})"
    try:
        done = query([str(tools.callgrind_control), *args, str(server.pid)], env=env, timeout=CONTROL_TIMEOUT)
    except TimedOut as exc:
        raise BenchError(
            f"{what} did not answer in {CONTROL_TIMEOUT:.0f} s",
            "callgrind_control needs vgdb (valgrind's gdbserver) and ptrace allowed; is the machine overloaded?",
        ) from exc
    if done.returncode != 0 or "OK" not in done.stdout:
        said = " ".join((done.stdout + done.stderr).split())[:200]
        raise BenchError(
            f"{what} failed: {said}", "callgrind_control needs vgdb (valgrind's gdbserver) and ptrace allowed"
        )


def wait_quiet(pid: int) -> None:
    """Wait until the process's CPU time stops moving (:data:`QUIET_CHECKS` reads in a row), at most
    :data:`QUIET_LIMIT` seconds."""
    start = time.monotonic()
    last, same = -1, 0
    while time.monotonic() - start < QUIET_LIMIT and same < QUIET_CHECKS:
        now = procstat.read_stat(pid).cpu_ticks
        same = same + 1 if now == last else 0
        last = now
        time.sleep(QUIET_INTERVAL)


def _dump_file(server_out: Path, trigger: str) -> Path:
    """The callgrind dump written for ``trigger`` (``<out>.1``, ``<out>.2`` …)."""
    for path in sorted(server_out.parent.glob(server_out.name + ".*"), key=lambda p: p.stat().st_mtime, reverse=True):
        if dump_trigger(read_text(path, "callgrind's dump", BenchError, "see the valgrind log")) == trigger:
            return path
    raise BenchError(f"callgrind wrote no dump {trigger!r} beside {server_out}", "see the valgrind log beside it")


class ValgrindCounts(Measure[CountTrial, CountsResult]):
    """The counts measure: the builds under valgrind, no canary (the counts do not move with the machine's load),
    no warm-up of a command (every run starts with cold simulated caches), an instruction valgrind does not know
    stopping the whole run."""

    under = " under valgrind"
    called = "counts: "
    slowdown = float(TRIAL_FACTOR)
    warms_commands = False
    heading = counts_report.HEADING
    markdown = staticmethod(counts_report.markdown)

    def __init__(self, tools: Tools, gate: Gate) -> None:
        self.tools = tools
        self.gate = gate

    def meta(self, settings: Settings) -> Meta:
        meta = settings.meta()
        meta["valgrind"] = {"version": self.tools.version, "cachegrind": list(CACHEGRIND), "callgrind": list(CALLGRIND)}
        meta["gate"] = self.gate.as_json()
        meta.pop("canary_iterations", None)  # no canary: the counts do not move with the machine's load
        return meta

    def start(self, build: Build, key: str, at: Place) -> Server:
        scenario, settings, _setup, workdir = at
        vlog = workdir / f"{key}.valgrind.log"
        wrapper = [
            str(self.tools.valgrind), *CALLGRIND, f"--callgrind-out-file={workdir / f'{key}.callgrind.out'}",
            f"--log-file={vlog}",
        ]  # fmt: skip
        try:
            return start_server(
                build,
                at,
                core=settings.server_core,
                name=key,
                wrapper=wrapper,
                ready_timeout=scenario.instance.options.ready_timeout * SLOWDOWN,
            )
        except BenchError:
            if vlog.is_file():
                log = read_text(vlog, "valgrind's log", BenchError, "see the server's log")
                refuse_unknown_instruction(build.label, build.binary, log, vlog, self.tools.version)
            raise

    def server_trial(self, server: Server, key: str, index: int, at: Place) -> CountTrial:
        """One trial: zero, the requests, quiet, dump; the dump's totals over the requests answered."""
        scenario, settings, setup, workdir = at
        argvs = load_argvs(scenario, server, scenario.count, workdir / f"{key}-uris.txt", setup.values)
        start = time.perf_counter()
        _control(self.tools, server, "--zero", env=settings.env)
        run = run_loads(argvs, at, workdir / f"{key}-trial-{index}.log", TRIAL_FACTOR)
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
            _control(self.tools, server, "--dump", trigger, env=settings.env)
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

    def command_trial(self, build: Build, key: str, index: int, at: Place, stdin: Path | None) -> CountTrial:
        """One trial of a command scenario: its runs, each under cachegrind, their totals added."""
        scenario, _settings, _setup, workdir = at
        counted = Cachegrind(self.tools, build, workdir / f"{key}-trial-{index}")
        runs = build_runs(build, scenario.count, workdir / f"{key}-trial-{index}.log", at, stdin, TRIAL_FACTOR, counted)
        problem = runs.problem or too_short(counted.total, f"a trial of {runs.done} runs", "run")
        trial = CountTrial(
            key, index, scenario.count, runs.done, dict(counted.total.events), counted.files, runs.wall, problem
        )
        _say(scenario, build.label, trial)
        return trial

    def stop_timeout(self, scenario: Scenario) -> float:
        return float(max(STOP_LIMIT, scenario.instance.options.stop_timeout))

    def last_words(self, server: Server, at: Place, key: str) -> str:
        return tail_line(server.log) or log_tail(at.workdir / f"{key}.valgrind.log", 3, joined=" | ")

    def fatal(self, error: PgoError) -> bool:
        return "does not know an instruction" in error.message

    def result(
        self,
        at: Place,
        trials: list[CountTrial],
        problem: str,
        canaries: tuple[float | None, float | None],  # noqa: ARG002  (no canary)
    ) -> CountsResult:
        return CountsResult(trials=trials, problem=problem, **result_fields(at))
