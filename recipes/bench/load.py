"""The load on a bench server: h2load's command lines for a scenario, its runs (pinned to the load generator's
core, their CPU time from ``wait4``), their summaries added up, and whether a trial counts."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes import procs
from recipes.bench.servers import Server
from recipes.bench.settings import Place
from recipes.errors import BenchError
from recipes.inputs import fill
from recipes.web import h2load
from recipes.workload import Scenario


@dataclass(frozen=True)
class LoadRun:
    """One h2load run: what it said, and the CPU it used."""

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
    batches = [requests]
    if scenario.one_per_connection:
        full, rest = divmod(requests, scenario.connections)
        batches = [scenario.connections] * full + ([rest] if rest else [])
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


def run_load(argv: Sequence[str], *, core: int, env: Mapping[str, str], log: Path, deadline: float) -> LoadRun:
    """One h2load run on ``core`` with ``env``, killed at ``deadline`` (monotonic); its own CPU time from
    ``wait4``."""
    full = ["taskset", "-c", str(core), *argv]
    start = time.perf_counter()
    with log.open("wb") as out:
        try:
            proc = procs.spawn(full, env=env, stdout=out, stderr=procs.STDOUT)
        except FileNotFoundError as exc:  # taskset itself: h2load's absence is taskset's exit status
            raise BenchError(
                "taskset is not found: the bench pins its load generator to a core of its own with it",
                "apt-get install util-linux (or put taskset on PATH)",
            ) from exc
    waited = procs.wait_usage(proc, deadline)
    wall = time.perf_counter() - start
    usage = waited.usage
    output = log.read_text(encoding="utf-8", errors="replace")
    try:
        parsed: h2load.H2loadSummary | None = h2load.parse_summary(output)
    except ValueError:
        parsed = None
    return LoadRun(waited.returncode, wall, usage.ru_utime + usage.ru_stime, output, parsed, not waited.exited)


def add_summaries(summaries: Sequence[h2load.H2loadSummary]) -> h2load.H2loadSummary:
    """The summary of several runs taken as one."""
    status: dict[str, int] = {}
    for summary in summaries:
        for key, value in summary.status.items():
            status[key] = status.get(key, 0) + value
    counts = ("total", "started", "done", "succeeded", "failed", "errored", "timeout")
    return h2load.H2loadSummary(
        **{key: sum(getattr(s, key) for s in summaries) for key in counts},
        status=status,
        protocol=summaries[0].protocol if summaries else None,
        seconds=sum(s.seconds or 0.0 for s in summaries),
    )


def run_loads(argvs: Sequence[Sequence[str]], at: Place, log: Path, factor: float = 1.0) -> LoadRun:
    """The runs of one trial (or warm-up) of the scenario in turn, as one, on the load generator's core, within
    ``factor`` times --trial-timeout: CPU and wall time added, counts added; stops at the first run that fails or
    has no summary (the sum of counts then says what was missing)."""
    deadline = time.monotonic() + at.settings.trial_timeout * factor
    runs: list[LoadRun] = []
    for number, argv in enumerate(argvs):
        run = run_load(
            argv,
            core=at.settings.load_core,
            env=at.settings.env,
            log=log if len(argvs) == 1 else log.with_suffix(f".{number}.log"),
            deadline=deadline,
        )
        runs.append(run)
        if run.timed_out or run.result is None or run.returncode != 0:
            break
    if len(runs) == 1:
        return runs[0]
    parsed = [r.result for r in runs if r.result is not None]
    failed = runs[-1]  # the loop stops at the first run that failed: the last one, if any did
    return LoadRun(
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
