"""The benchmark's scenarios, as the workload file declares them (``[[bench.scenario]]``, profiles/README.md).

A scenario runs against an instance: a ``[[bench.instance]]`` of the file, or one of its training
``[[instance]]`` tables (by name, with its args, config template, env and cwd; its phases are not run). Its
``kind`` is one of the training's: ``http`` and ``handshakes`` against a server instance (the server's CPU
time per request), ``command`` against a command instance (the child's CPU time per run). Each trial is a
fixed count (requests, handshakes or runs, never a duration), so a slow machine measures the same work as a
fast one; ``--scale`` multiplies the counts (the tests use tiny trials).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from recipes.errors import ConfigError
from recipes.schema import Table
from recipes.train.command import MAX_RUNS
from recipes.train.http import iter_paths, parse_expect

if TYPE_CHECKING:
    from recipes.workload import Instance, Workload

#: scenario kinds and the instance mode each runs against
KINDS = {"http": "server", "handshakes": "server", "command": "command"}
HOW_TO_ADD = "add a [[bench.scenario]] table (name, instance, kind: see 'Bench scenarios' in profiles/README.md)"


@dataclass(frozen=True)
class Scenario:
    """One row of the table: what runs against which instance, and how much of it makes a trial."""

    UNITS: ClassVar[dict[str, str]] = {"http": "request", "handshakes": "request", "command": "run"}

    name: str
    title: str
    kind: str  # "http", "handshakes" or "command"
    instance: Instance
    count: int  # requests, handshakes or runs per trial, at scale 1
    warmup: int | None = None  # the same before the trials (default: a 20th of a trial, 1 run for commands)
    # http and handshakes
    paths: tuple[str, ...] = ()
    protocol: str = "h1"  # "h1" or "h2"
    scheme: str = "http"  # "https": TLS (ALPN), the server's {https_port}
    connections: int = 1
    streams: int = 1  # concurrent streams per HTTP/2 connection, pipelined requests over HTTP/1.1
    rps: int | None = None  # per connection (h2load --rps)
    one_per_connection: bool = False  # every request on a new client: a full TLS handshake each
    headers: tuple[str, ...] = ()
    expect: str = "ok"
    # command
    args: tuple[str, ...] = ()
    stdin: str | None = None
    cwd: str | None = None
    expect_exit: int = 0
    declared_held_out: bool | None = None  # ``held_out = true|false``: overrides the comparison with the training

    @property
    def unit(self) -> str:
        return self.UNITS[self.kind]

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def requests(self) -> int:
        """The trial's count (requests, or runs of a command)."""
        return self.count

    def scaled(self, scale: float) -> Scenario:
        """The same scenario with ``scale`` times the count (at least one request per connection, one run)."""
        return replace(self, count=max(self.connections, math.ceil(self.count * scale)))

    @property
    def warmup_requests(self) -> int:
        """What is sent (or run) before the trials: fills caches, opens files, wakes pools, loads pages."""
        if self.warmup is not None:
            return self.warmup
        if self.kind == "command":
            return 1
        return max(self.connections, min(2000, self.count // 20))

    def texts(self) -> list[str]:
        """The strings that may hold placeholders."""
        return [*self.paths, *self.headers, *self.args, *(t for t in (self.stdin, self.cwd) if t is not None)]


def parse_scenario(table: Table, instances: dict[str, Instance]) -> Scenario:
    """One ``[[bench.scenario]]`` table; ``instances`` are those it may name (bench ones first)."""
    name = table.named("scenario")
    title = table.string("title", name)
    instance_name = table.string("instance", required=True, choices=instances)
    instance = instances[instance_name]
    kind = table.string("kind", required=True, choices=KINDS)
    if KINDS[kind] != instance.mode:
        raise table.error(
            "kind",
            f"a {kind!r} scenario runs against a {KINDS[kind]!r} instance, and {instance_name!r} is a "
            f"{instance.mode!r} one",
            f"name a mode = {KINDS[kind]!r} instance",
        )
    warmup = table.integer("warmup", minimum=0)
    scenario = _parse_kind(table, name, title, kind, instance, warmup)
    return replace(scenario, declared_held_out=table.boolean("held_out"))


def _parse_kind(table: Table, name: str, title: str, kind: str, instance: Instance, warmup: int | None) -> Scenario:
    if kind == "command":
        runs = table.integer("runs", 1, minimum=1)
        if runs > MAX_RUNS:
            raise table.error("runs", f"{runs} is too many", f"at most {MAX_RUNS}")
        return Scenario(
            name,
            title,
            kind,
            instance,
            runs,
            warmup,
            args=tuple(table.strings("args")),
            stdin=table.string("stdin"),
            cwd=table.string("cwd"),
            expect_exit=table.integer("expect_exit", 0),
        )
    expect = parse_expect(table)
    if not expect.endswith("xx") and expect not in {"ok", "any"}:
        raise table.error("expect", f"{expect!r}: the bench checks classes of status", 'say "ok", "any" or "2xx"')
    if kind == "handshakes":
        path = table.string("path", "/health")
        if not path.startswith("/"):
            raise table.error("path", f"{path!r} must start with /")
        batch = table.integer("batch", 50, minimum=1)
        return Scenario(
            name,
            title,
            kind,
            instance,
            table.integer("handshakes", required=True, minimum=1),
            warmup,
            paths=(path,),
            protocol=table.string("protocol", "h1", choices=("h1", "h2")),
            scheme="https",
            connections=batch,
            one_per_connection=True,
            expect=expect,
        )
    paths = tuple(iter_paths(table))
    if not paths:
        raise table.error("path", "missing", 'add path = "/…" or paths = ["/…", …]')
    headers = table.strings("headers")
    for header in headers:
        if ":" not in header.lstrip(":"):
            raise table.error("headers", f"{header!r} is not 'name: value'")
    one_per_connection = bool(table.boolean("one_per_connection", default=False))
    rps = table.integer("rps", minimum=1)
    if rps is not None and one_per_connection:
        raise table.error("rps", "a rate and one_per_connection do not go together", "drop one of them")
    return Scenario(
        name,
        title,
        kind,
        instance,
        table.integer("requests", required=True, minimum=1),
        warmup,
        paths=paths,
        protocol=table.string("protocol", "h2", choices=("h1", "h2")),
        scheme=table.string("scheme", "http", choices=("http", "https")),
        connections=table.integer("connections", 4, minimum=1),
        streams=table.integer("streams", 1, minimum=1),
        rps=rps,
        one_per_connection=one_per_connection,
        headers=tuple(headers),
        expect=expect,
    )


def require_scenarios(workload: Workload) -> tuple[Scenario, ...]:
    """The workload's scenarios; none is a one-line refusal saying how to add one."""
    if not workload.scenarios:
        raise ConfigError(f"{workload.path}: the workload declares no bench scenario", HOW_TO_ADD)
    return workload.scenarios


def select(names: str | None, scenarios: Sequence[Scenario]) -> list[Scenario]:
    """``a,b`` -> those scenarios in the order given; ``None`` or ``all`` -> every one."""
    if names is None or names.strip() in {"", "all"}:
        return list(scenarios)
    known = {s.name: s for s in scenarios}
    chosen = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in known:
            raise ConfigError(f"--scenarios: unknown scenario {name!r}", f"known: {', '.join(known)}")
        if known[name] not in chosen:
            chosen.append(known[name])
    if not chosen:
        raise ConfigError("--scenarios: no scenario named", f"known: {', '.join(known)}")
    return chosen


# ---------------------------------------------------------------------------------------------- held out


@dataclass(frozen=True)
class HeldOut:
    """Whether a scenario's requests (paths) or arguments also occur in the training."""

    trained: int  # of its paths (or its one argument list) this many occur in a training phase
    total: int
    rule: str = "paths"  # what decided: "paths" or "arguments" (compared with the training), or "declared"

    @property
    def status(self) -> str:
        if self.trained == 0:
            return "held-out"
        return "trained" if self.trained == self.total else "partly"

    def describe(self, unit: str) -> str:
        if self.status == "partly":
            return f"partly: {self.trained} of {self.total} {unit} in the training"
        return self.status

    def as_json(self) -> dict[str, object]:
        return {"status": self.status, "trained": self.trained, "total": self.total, "rule": self.rule}


def held_out(scenario: Scenario, workload: Workload) -> HeldOut:
    """Compare the scenario with every training phase: HTTP paths (of http and handshakes phases) as
    written, a command's arguments and standard input as a whole; a scenario's ``held_out = true|false`` decides
    instead (rule ``declared``)."""
    if scenario.declared_held_out is not None:
        total = 1 if scenario.kind == "command" else len(dict.fromkeys(scenario.paths))
        return HeldOut(0 if scenario.declared_held_out else total, total, "declared")
    phases = [phase for instance in workload.instances for phase in instance.phases]
    if scenario.kind == "command":
        runs = {(tuple(getattr(p, "args", ())), getattr(p, "stdin", None)) for p in phases if p.kind == "command"}
        return HeldOut(int((scenario.args, scenario.stdin) in runs), 1, "arguments")
    trained_paths: set[str] = set()
    for phase in phases:
        if phase.kind == "http":
            trained_paths.update(getattr(phase, "paths", ()))
        elif phase.kind == "handshakes":
            trained_paths.add(getattr(phase, "path", ""))
    distinct = list(dict.fromkeys(scenario.paths))
    return HeldOut(sum(1 for p in distinct if p in trained_paths), len(distinct))
