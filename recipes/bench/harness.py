"""The harness: two builds served in turn, CPU time per request, the builds interleaved trial by trial.

For each scenario: the canary on the server's core; both servers started (``workers = 1``, pinned to the
server's core by ``taskset``, every thread checked); each warmed up; then trial 1 of the baseline, trial
1 of the candidate, trial 2 of the baseline … each a fixed request count sent by h2load pinned to the
other core; the servers stopped (SIGTERM, exit 0 expected); the canary again.

A trial's figure is the server's user + system time (``/proc/<pid>/stat``, all threads, exited ones
included), read before and after the trial, over the requests h2load saw answered. A trial where h2load
saw one request fail, or one status outside what the scenario expects, is invalid, and so is the
scenario.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from recipes import certs, docroot, h2load, net
from recipes.bench import canary, procstat
from recipes.bench.report import BASELINE, CANDIDATE, ScenarioResult, Trial, write_json, write_markdown
from recipes.bench.scenarios import Scenario
from recipes.errors import BenchError, ConfigError
from recipes.runner import quote, say
from recipes.train.resources import UpstreamBackend

START_TIMEOUT = 15.0
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
    baseline: Build
    candidate: Build
    scenarios: Sequence[Scenario]
    trials: int
    out: Path  # <work>/bench
    server_core: int
    load_core: int
    scale: float = 1.0
    upstream_url: str | None = None  # an upstream of your own (or a dead one, to see a scenario refused)
    trial_timeout: float = 120.0
    command: str = ""

    @property
    def builds(self) -> tuple[tuple[str, Build], ...]:
        return ((BASELINE, self.baseline), (CANDIDATE, self.candidate))

    def meta(self) -> dict[str, object]:
        return {
            "baseline": str(self.baseline.binary),
            "baseline_sha256": self.baseline.sha256,
            "baseline_label": self.baseline.label,
            "baseline_origin": self.baseline.origin,
            "candidate": str(self.candidate.binary),
            "candidate_sha256": self.candidate.sha256,
            "candidate_label": self.candidate.label,
            "candidate_origin": self.candidate.origin,
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


# ---------------------------------------------------------------------------------------------- fixtures


@dataclass
class Fixtures:
    """What the servers need, made once per run: a certificate, the document root, the upstream backend."""

    root: Path
    load_core: int
    upstream_url: str | None = None
    _cert: tuple[Path, Path] | None = None
    _docroot: Path | None = None
    _upstream: UpstreamBackend | None = None

    def cert(self) -> tuple[Path, Path]:
        if self._cert is None:
            made = certs.make_certs(["ecdsa"], self.root / "certs", env=os.environ, logs=self.root / "logs")
            self._cert = Path(made["ecdsa_cert"]), Path(made["ecdsa_key"])
        return self._cert

    def docroot(self) -> Path:
        if self._docroot is None:
            self._docroot = Path(docroot.make_docroot(self.root)["docroot"])
        return self._docroot

    def upstream(self) -> str:
        """The upstream's URL: the one given, or the Python backend, started once, on the load core."""
        if self.upstream_url is not None:
            return self.upstream_url
        if self._upstream is None:
            (port,) = net.free_ports(1)
            self.root.mkdir(parents=True, exist_ok=True)
            backend = UpstreamBackend(port, self.root / "upstream.log", dict(os.environ))
            backend.start()
            self._upstream = backend
            assert backend.proc is not None
            for thread in procstat.read_threads(backend.proc.pid):
                os.sched_setaffinity(thread.pid, {self.load_core})
        return f"http://{net.HOST}:{self._upstream.port}"

    def upstream_pid(self) -> int | None:
        if self._upstream is None or self._upstream.proc is None:
            return None
        return self._upstream.proc.pid

    def close(self) -> None:
        if self._upstream is not None:
            self._upstream.stop()
            self._upstream = None


def server_config(scenario: Scenario, *, http_port: int, https_port: int, fixtures: Fixtures, access_log: Path) -> str:
    """The demo server's configuration TOML for one scenario."""
    cert, key = fixtures.cert()
    lines = [
        "[server]",
        f'http = "127.0.0.1:{http_port}"',
        f'https = "127.0.0.1:{https_port}"',
        "workers = 1",
        "",
        "[tls]",
        f"cert = {_toml_str(cert)}",
        f"key = {_toml_str(key)}",
        "",
        "[access_log]",
        f"enabled = {'true' if scenario.access_log else 'false'}",
        f"path = {_toml_str(access_log)}",
        "",
        "[cache]",
        f"enabled = {'true' if scenario.cache else 'false'}",
        "max_entries = 10000",
        f"max_object_bytes = {1 << 20}",
        "ttl_seconds = 86400",
        "",
    ]
    if scenario.upstream:
        lines += ["[proxy]", f"upstream = {_toml_str(fixtures.upstream())}", "timeout_ms = 5000", ""]
    if scenario.files:
        lines += ["[files]", f"root = {_toml_str(fixtures.docroot())}", ""]
    return "\n".join(lines)


def _toml_str(value: object) -> str:
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------------- servers


@dataclass
class Server:
    """One running build of the server, pinned to its core."""

    build: Build
    proc: subprocess.Popen[bytes]
    http_port: int
    https_port: int
    log: Path
    access_log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def base_url(self, tls: bool) -> str:
        return f"https://127.0.0.1:{self.https_port}" if tls else f"http://127.0.0.1:{self.http_port}"

    def alive(self) -> bool:
        return self.proc.poll() is None


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def start_server(
    build: Build, scenario: Scenario, *, core: int, fixtures: Fixtures, workdir: Path, name: str
) -> Server:
    """Start ``build`` for ``scenario`` on ``core``; wait for its ``listening`` line and /health."""
    http_port, https_port = net.free_ports(2)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{name}.toml"
    access_log = workdir / f"{name}-access.log"
    config.write_text(
        server_config(scenario, http_port=http_port, https_port=https_port, fixtures=fixtures, access_log=access_log),
        encoding="utf-8",
    )
    log = workdir / f"{name}.log"
    argv = ["taskset", "-c", str(core), str(build.binary), "--config", str(config)]
    say(f"  $ {quote(argv)}")
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = Server(build, proc, http_port, https_port, log, access_log)
    if net.wait_ready(f"{server.base_url(False)}/health", START_TIMEOUT, server.alive) is None:
        code = stop_server(server)
        raise BenchError(
            f"{build.label} ({build.binary}) did not answer /health within {START_TIMEOUT:.0f} s "
            f"(exited with {code}): {_log_tail(log)}",
            f"see {log}",
        )
    _check_pinned(server, core)
    return server


def _check_pinned(server: Server, core: int) -> None:
    affinities = procstat.thread_affinities(server.pid)
    stray = {tid: sorted(cpus) for tid, cpus in affinities.items() if cpus != {core}}
    if not affinities or stray:
        stop_server(server)
        raise BenchError(
            f"{server.build.label}: threads not pinned to core {core}: {stray or 'none found'}",
            "taskset must be the util-linux one",
        )


def stop_server(server: Server) -> int:
    """SIGTERM, then the exit code (a kill after the timeout gives a negative one)."""
    if server.alive():
        server.proc.send_signal(signal.SIGTERM)
    try:
        return server.proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        return server.proc.wait()


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


def load_argvs(scenario: Scenario, server: Server, requests: int, uri_file: Path) -> list[list[str]]:
    """h2load's command lines for ``requests`` requests: a fixed count, one thread (one core).

    One run, except with ``one_per_connection``: h2load resumes its TLS session when it reconnects (a
    "connection: close" run costs the server the same with an RSA key as with an ECDSA one), so every
    request gets a fresh client instead, in runs of ``-c B -n B`` (B = the scenario's connections).
    """
    base = server.base_url(scenario.tls)
    urls = [f"{base}{path}" for path in scenario.paths]
    if len(urls) > 1:
        uri_file.write_text("".join(f"{url}\n" for url in urls), encoding="utf-8")
    if scenario.one_per_connection:
        batches = [scenario.connections] * (requests // scenario.connections)
        if requests % scenario.connections:
            batches.append(requests % scenario.connections)
    else:
        batches = [requests]
    argvs = []
    for count in batches:
        argv = h2load.h2load_argv(
            urls if len(urls) == 1 else [],
            requests=count,
            connections=count if scenario.one_per_connection else scenario.connections,
            streams=scenario.streams,
            http1=scenario.protocol == "h1",
            uri_file=uri_file if len(urls) > 1 else None,
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
    fixtures: Fixtures,
    workdir: Path,
) -> Trial:
    """One trial: the server's CPU time around one h2load run of the scenario's request count."""
    argvs = load_argvs(scenario, server, scenario.requests, workdir / f"{build}-uris.txt")
    upstream_pid = fixtures.upstream_pid() if scenario.upstream else None
    upstream0 = procstat.cpu_seconds(upstream_pid) if upstream_pid else None
    server0 = procstat.read_stat(server.pid)
    harness0 = _self_cpu()
    run = run_loads(
        argvs, core=settings.load_core, log=workdir / f"{build}-trial-{index}.log", timeout=settings.trial_timeout
    )
    harness1 = _self_cpu()
    time.sleep(SETTLE_SECONDS)
    problem = trial_problem(run, scenario.requests, scenario.expect)
    if not server.alive():
        problem = problem or f"the server exited with {server.proc.returncode} during the trial"
        user_ticks = system_ticks = 0
    else:
        server1 = procstat.read_stat(server.pid)
        user_ticks, system_ticks = server1.utime - server0.utime, server1.stime - server0.stime
    upstream_cpu = procstat.cpu_seconds(upstream_pid) - upstream0 if upstream_pid and upstream0 is not None else None
    trial = Trial(
        build=build,
        index=index,
        requests=scenario.requests,
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
    verdict = f"{trial.us_per_request:8.2f} µs/req" if trial.valid else f"INVALID: {problem}"
    say(f"  {scenario.name} {server.build.label:>9} #{index}: {verdict} ({run.wall:.1f} s)")
    return trial


def run_scenario(scenario: Scenario, settings: Settings, fixtures: Fixtures) -> ScenarioResult:
    workdir = settings.out / "runs" / scenario.name
    workdir.mkdir(parents=True, exist_ok=True)
    say(f"bench: {scenario.name}: {scenario.title} ({settings.trials} trials of {scenario.requests} requests)")
    before = canary.time_canary(settings.server_core)
    trials: list[Trial] = []
    problem = ""
    servers: dict[str, Server] = {}
    try:
        for build, binary in settings.builds:
            servers[build] = start_server(
                binary, scenario, core=settings.server_core, fixtures=fixtures, workdir=workdir, name=build
            )
        for build, server in servers.items():
            warm = run_loads(
                load_argvs(scenario, server, scenario.warmup_requests, workdir / f"{build}-uris.txt"),
                core=settings.load_core,
                log=workdir / f"{build}-warmup.log",
                timeout=settings.trial_timeout,
            )
            why = trial_problem(warm, scenario.warmup_requests, scenario.expect)
            if why:  # said, not decisive: the trials themselves are judged
                say(f"  {scenario.name}: the warm-up of {server.build.label} did not pass: {why}")
        for index in range(1, settings.trials + 1):
            for build, server in servers.items():
                trials.append(
                    measure(server, scenario, build, index, settings=settings, fixtures=fixtures, workdir=workdir)
                )
    except BenchError as error:
        problem = error.line()
        say(f"  {scenario.name}: INVALID: {problem}")
    finally:
        for server in servers.values():
            code = stop_server(server)
            if code != 0 and not problem:
                problem = f"{server.build.label} exited with {code} on SIGTERM (expected 0): {_log_tail(server.log)}"
            server.access_log.unlink(missing_ok=True)
    after = canary.time_canary(settings.server_core)
    return ScenarioResult(scenario.name, scenario.title, trials, before.wall, after.wall, problem)


@contextmanager
def _load_side(core: int) -> Iterator[None]:
    """This process on the load generator's core (so it never competes with the server), then back."""
    with canary.pinned({core}):
        yield


def run_bench(settings: Settings) -> list[ScenarioResult]:
    """Every scenario; the JSON and Markdown are rewritten after each one, so a stopped run leaves its part."""
    raise_open_files_limit()
    scenarios = [s.scaled(settings.scale) for s in settings.scenarios]
    results: list[ScenarioResult] = []
    fixtures = Fixtures(settings.out / "fixtures", settings.load_core, settings.upstream_url)
    try:
        with _load_side(settings.load_core):
            for scenario in scenarios:
                results.append(run_scenario(scenario, settings, fixtures))
                write_json(settings.out / "results.json", results, settings.meta())
                write_markdown(settings.out / "results.md", results, settings.meta())
    finally:
        fixtures.close()
    return results
