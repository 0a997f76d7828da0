"""``kind = "http"`` phases: a fixed number of requests sent by h2load to the instance's server.

[[instance.phase]]
name = "cached-h2"
kind = "http"
requests = 100000          # times PGO_TRAIN_SCALE; never a duration
protocol = "h2"            # or "h1"
scheme = "https"           # or "http" (HTTP/2 over plain is h2c with prior knowledge)
paths = ["/page/a", "/page/b"]   # or path = "/page/a"
method = "GET"             # POST and PUT need body = "<file>"
headers = ["if-none-match: \\"x\\""]
connections = 8
streams = 10               # concurrent streams per connection (HTTP/2), pipelined requests (HTTP/1.1)
expect = "ok"              # "ok" (2xx/3xx), "any", a class "4xx" or a code "403"
max_mean_body = 2000       # bytes: the responses' mean body size (h2load's traffic data / responses) at most
min_mean_body = 100        # … and at least (a compression phase proves it got compressed responses)
upstream = "down"          # stop the [setup] upstream for this phase (dead-upstream errors)
timeout = 120              # seconds; default the workload's phase_timeout, PGO_PHASE_TIMEOUT or 300
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, ClassVar

from recipes import procs
from recipes.errors import TrainingFailed
from recipes.inputs import Table, fill
from recipes.runner import plural, quote, say, show
from recipes.web import h2load
from recipes.workload.fields import (
    header_method,
    parse_connections,
    parse_count,
    parse_expect,
    parse_headers,
    parse_paths,
    refuse_head_over_http1,
)
from recipes.workload.registry import Phase, PhaseContext, PhaseResult, register_phase

HEARTBEAT_SECONDS = 15.0
PROGRESS_STEPS = 10
POLL_SECONDS = 0.2


def url(ctx: PhaseContext, scheme: str, path: str) -> str:
    """Where a phase's request for ``path`` goes: the scheme and the server's port for it."""
    port = int(ctx.values["https_port" if scheme == "https" else "http_port"])
    return f"{scheme}://127.0.0.1:{port}{path}"


@dataclass(frozen=True)
class Watched:
    """A phase's h2load runs: its label, its log (emptied), its time limit and when it started (the deadline is
    the start plus the limit)."""

    label: str
    log: Path
    limit: float
    start: float

    @classmethod
    def begin(cls, ctx: PhaseContext, name: str, timeout: float | None) -> Watched:
        log = ctx.logs / f"train-{ctx.instance}-{name}.log"
        log.write_text("")
        return cls(f"phase {ctx.instance}/{name}", log, ctx.limit(timeout), time.monotonic())

    @property
    def deadline(self) -> float:
        return self.start + self.limit


class _Reader(threading.Thread):
    """Copies h2load's output to its log and keeps the last progress percentage."""

    def __init__(self, stream: Any, log: Path) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.log = log
        self.lines: list[str] = []
        self.percent = 0

    def run(self) -> None:
        with self.log.open("a", encoding="utf-8") as out:
            for raw in self.stream:
                line = raw.decode("utf-8", "replace")
                out.write(line)
                self.lines.append(line)
                percent = h2load.parse_progress(line)
                if percent is not None:
                    self.percent = percent


def run_h2load(
    ctx: PhaseContext, argv: list[str], watched: Watched, *, requests: int, quiet: bool = False
) -> h2load.H2loadSummary:
    """One h2load run with the phase's environment, watched: the server must stay up and the phase's deadline
    must hold. Prints done/total and the rate as h2load reports its progress."""
    label, log = watched.label, watched.log
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {quote(argv)}\n")
    if not quiet:
        say(f"  $ {quote(argv)}")
    try:
        proc = procs.spawn(argv, env=ctx.env, stdout=procs.PIPE, stderr=procs.STDOUT)
    except FileNotFoundError as exc:
        raise TrainingFailed(
            "h2load: command not found", "install nghttp2-client (apt-get install nghttp2-client)"
        ) from exc
    reader = _Reader(proc.stdout, log)
    reader.start()
    try:
        _watch(ctx, proc, reader, watched, requests=requests, quiet=quiet)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    server = ctx.server
    if server is not None and server.child.returncode is not None:
        raise server.died(f"during {label}")
    text = "".join(reader.lines)
    try:
        return h2load.parse_summary(text)
    except ValueError:
        last = text.strip().splitlines()[-1:] or ["(no output)"]
        raise TrainingFailed(
            f"{label}: h2load exited with code {proc.returncode} without a summary: {last[0]}", f"see {log}"
        ) from None


def _watch(
    ctx: PhaseContext, proc: procs.Spawned, reader: _Reader, watched: Watched, *, requests: int, quiet: bool
) -> None:
    """Until h2load exits: the server must stay up and the deadline hold (else the sockets and threads are shown
    and the phase fails); done/total and the rate said every 10 % or :data:`HEARTBEAT_SECONDS`."""
    label = watched.label
    started = shown_at = time.monotonic()
    shown = 0
    while proc.poll() is None:
        time.sleep(POLL_SECONDS)
        now = time.monotonic()
        server = ctx.server
        if server is not None and server.child.returncode is not None:
            raise server.died(f"during {label} ({reader.percent}% of {requests} requests done)")
        if now > watched.deadline:
            if server is not None:
                upstream = ctx.resources.get("upstream")
                show(server.dump([upstream.port] if upstream is not None else []))
            raise TrainingFailed(
                f"{label}: not finished within its time limit of {watched.limit:.0f} s "
                f"(h2load at {reader.percent}% of {requests} requests); sockets and threads are shown above",
                "a hung connection (see the ss output) or a slow machine: raise the phase's timeout or "
                "PGO_PHASE_TIMEOUT, or lower PGO_TRAIN_SCALE",
            )
        if not quiet and (reader.percent >= shown + 10 or now - shown_at > HEARTBEAT_SECONDS):
            shown, shown_at = reader.percent, now
            done = requests * reader.percent // 100
            rate = done / max(now - started, 1e-6)
            say(f"  {label}: {reader.percent}% ({done}/{requests}), {rate:,.0f} req/s")


@dataclass
class BodyTally:
    """Response body bytes and responses, summed over h2load runs (those without a traffic line: unknown)."""

    data_bytes: int | None = 0
    responses: int = 0

    def add(self, summary: h2load.H2loadSummary) -> None:
        self.responses += summary.responses()
        if self.data_bytes is not None and summary.data_bytes is not None:
            self.data_bytes += summary.data_bytes
        else:
            self.data_bytes = None


def run_batches(
    ctx: PhaseContext,
    argv_for: Callable[[int, Path | None, int], list[str]],
    watched: Watched,
    *,
    total: int,
    batch: int,
    expect: str,
    codes_log: Path | None,
    unit: str,
    bodies: BodyTally | None = None,
) -> tuple[int, dict[str, int]]:
    """``total`` requests as h2load runs of ``batch`` connections with ONE request each (``-c B -n B``): every
    request on a new connection. ``argv_for(count, codes log, run number)`` gives each run's command line. Each
    run must pass ``expect``. Returns (done, status classes); the runs' body bytes and responses are added to
    ``bodies``."""
    done = 0
    status = dict.fromkeys(h2load.STATUS_CLASSES, 0)
    start = time.monotonic()
    next_report = total / PROGRESS_STEPS
    runs = 0
    while done < total:
        count = min(batch, total - done)
        if codes_log is not None:
            codes_log.unlink(missing_ok=True)
        summary = run_h2load(ctx, argv_for(count, codes_log, runs), watched, requests=count, quiet=True)
        codes = h2load.parse_log_codes(codes_log.read_text()) if codes_log is not None else None
        problem = h2load.check(summary, count, expect, codes)
        if problem is not None:
            raise TrainingFailed(
                f"{watched.label}: batch of {count} connections after {done} {unit}: {problem}", f"see {watched.log}"
            )
        done += count
        runs += 1
        if bodies is not None:
            bodies.add(summary)
        for key, value in summary_status(summary).items():
            status[key] += value
        if done >= next_report or done == total:
            elapsed = time.monotonic() - start
            say(f"  {watched.label}: {done}/{total} {unit}, {done / max(elapsed, 1e-6):,.0f}/s")
            next_report = done + total / PROGRESS_STEPS
    return done, status


def codes_log_for(ctx: PhaseContext, name: str, expect: str) -> Path | None:
    """Where h2load logs each request's status, when ``expect`` is an exact code (removed first: h2load
    appends to it)."""
    if not h2load.needs_codes(expect):
        return None
    path = ctx.logs / f"train-{ctx.instance}-{name}-codes.tsv"
    path.unlink(missing_ok=True)
    return path


def summary_status(summary: h2load.H2loadSummary) -> dict[str, int]:
    return {k: summary.status.get(k, 0) for k in h2load.STATUS_CLASSES}


@register_phase
@dataclass(eq=False)
class HttpPhase(Phase):
    kind: ClassVar[str] = "http"
    modes = ("server",)

    _: KW_ONLY
    requests: int
    protocol: str
    scheme: str
    paths: list[str]
    method: str
    body: str | None
    headers: list[str]
    connections: int
    streams: int
    expect: str
    upstream: str
    one_per_connection: bool
    min_mean_body: int | None = None
    max_mean_body: int | None = None

    @classmethod
    def parse(cls, table: Table, name: str, timeout: float | None) -> Phase:
        paths = parse_paths(table)
        method = table.string("method", "GET", choices=("GET", "POST", "PUT"))
        body = table.string("body")
        if method != "GET" and body is None:
            raise table.error("body", f"a {method} phase needs a body file", 'add body = "{bodies}/form-2k.txt"')
        if method == "GET" and body is not None:
            raise table.error("body", "a GET phase sends no body", 'set method = "POST"')
        headers = parse_headers(table)
        protocol = table.string("protocol", "h2", choices=("h1", "h2"))
        refuse_head_over_http1(table, headers, protocol)
        min_mean_body = table.integer("min_mean_body", minimum=0)
        max_mean_body = table.integer("max_mean_body", minimum=0)
        if min_mean_body is not None and max_mean_body is not None and min_mean_body > max_mean_body:
            raise table.error(
                "max_mean_body", f"{max_mean_body} is below min_mean_body = {min_mean_body}", "swap them?"
            )
        return cls(
            name,
            timeout,
            requests=parse_count(table, "requests"),
            protocol=protocol,
            scheme=table.string("scheme", "http", choices=("http", "https")),
            paths=paths,
            method=method,
            body=body,
            headers=headers,
            connections=parse_connections(table, "connections", 4),
            streams=table.integer("streams", 1, minimum=1),
            expect=parse_expect(table),
            upstream=table.string("upstream", "up", choices=("up", "down")),
            one_per_connection=table.boolean("one_per_connection", default=False),
            min_mean_body=min_mean_body,
            max_mean_body=max_mean_body,
        )

    def texts(self) -> list[str]:
        return [*self.paths, *self.headers, *([self.body] if self.body else [])]

    @property
    def sent_method(self) -> str:
        """The requests' method: PUT (its ``:method`` header goes last, so h2load takes it), else a ``:method: X``
        header's X (``headers = [":method: HEAD"]``), else ``method``."""
        if self.method == "PUT":
            return "PUT"
        return header_method(self.headers) or self.method

    def files(self) -> list[str]:
        return [self.body] if self.body else []

    def tools(self) -> dict[str, str]:
        return {"h2load": "nghttp2-client"}

    def needs(self) -> set[str]:
        return {"upstream"} if self.upstream == "down" else set()

    def _urls(self, ctx: PhaseContext, label: str, requests: int) -> list[str]:
        """The phase's URLs, filled; a warning when its connections reach only the first few."""
        urls = [url(ctx, self.scheme, fill(p, ctx.values)) for p in self.paths]
        if not self.one_per_connection and len(urls) > requests // self.connections:
            say(
                f"warning: {label}: {requests} requests over {self.connections} connections reach only the first "
                f"{max(requests // self.connections, 1)} of its {len(urls)} paths (h2load gives each connection the "
                "paths in order, from the first): raise requests, or lower connections"
            )
        return urls

    def _argv(
        self, ctx: PhaseContext, urls: list[str], count: int, connections: int, log_file: Path | None, first: int = 0
    ) -> list[str]:
        """h2load's command line; ``first``: the path the run's connections start at (a connection with one request
        asks only for the first path h2load is given, so one-request runs take turns at being first)."""
        headers = [fill(h, ctx.values) for h in self.headers]
        if self.method == "PUT":
            headers.append(":method: PUT")
        body = Path(fill(self.body, ctx.values)) if self.body else None  # checked by the runner (files())
        return h2load.h2load_argv(
            h2load.rotated(urls, first),
            requests=count,
            connections=connections,
            streams=self.streams,
            http1=self.protocol == "h1",
            body=body,
            headers=headers,
            log_file=log_file,
        )

    def run(self, ctx: PhaseContext) -> PhaseResult:
        requests = ctx.scaled(self.requests)
        watched = Watched.begin(ctx, self.name, self.timeout)
        label, log = watched.label, watched.log
        codes_log = codes_log_for(ctx, self.name, self.expect)
        urls = self._urls(ctx, label, requests)
        say(
            f"{label}: {plural(requests, self.sent_method + ' request')}, {self.protocol} over {self.scheme}, "
            f"{plural(len(self.paths), 'path')}, {plural(self.connections, 'connection')}"
            f"{' (a new one per request)' if self.one_per_connection else ''}, expect {self.expect}"
        )
        bodies = BodyTally()
        with ctx.resources["upstream"].down() if self.upstream == "down" else nullcontext():
            if self.one_per_connection:
                done, status = run_batches(
                    ctx,
                    lambda count, log_file, run: self._argv(ctx, urls, count, count, log_file, run),
                    watched,
                    total=requests,
                    batch=self.connections,
                    expect=self.expect,
                    codes_log=codes_log,
                    unit="requests",
                    bodies=bodies,
                )
                detail = f"{self.protocol}, one request per connection"
            else:
                argv = self._argv(ctx, urls, requests, self.connections, codes_log)
                summary = run_h2load(ctx, argv, watched, requests=requests)
                codes = h2load.parse_log_codes(codes_log.read_text()) if codes_log is not None else None
                problem = h2load.check(summary, requests, self.expect, codes)
                if problem is not None:
                    raise TrainingFailed(f"{label}: {problem}", f"see {log} and the server log")
                done, status = summary.done, summary_status(summary)
                bodies.add(summary)
                detail = f"{summary.protocol or '?'}, {summary.rate or 0:,.0f} req/s"
        seconds = time.monotonic() - watched.start
        problem = h2load.check_mean_body(bodies.data_bytes, bodies.responses, self.min_mean_body, self.max_mean_body)
        if problem is not None:
            raise TrainingFailed(f"{label}: {problem}", f"see {log}; check the phase's headers and the server's config")
        mean = h2load.mean_body(bodies.data_bytes or 0, bodies.responses)
        if mean is not None and bodies.data_bytes is not None:
            detail += f", mean body {mean:,.0f} B"
        return PhaseResult(self.name, self.kind, requests, done, seconds, status, detail)
