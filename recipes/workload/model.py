"""What a loaded workload is: its instances, its bench scenarios, the workload itself (frozen dataclasses)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from recipes.workload.registry import Phase


@dataclass(frozen=True)
class Instance:
    name: str
    mode: str
    options: Any
    env: dict[str, str]
    phases: tuple[Phase, ...]


@dataclass(frozen=True)
class Scenario:
    """One row of the bench's table: what runs against which instance, and how much of it makes a trial
    (``[[bench.scenario]]``: :mod:`recipes.workload.scenario_format`)."""

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


@dataclass(frozen=True)
class Workload:
    path: Path
    description: str
    min_functions: int | None
    max_missing: int | None
    phase_timeout: float | None
    instances: tuple[Instance, ...]
    #: the ``[setup]`` resources, in file order: (kind, options)
    resources: tuple[tuple[str, Any], ...] = ()
    #: the total functions of the build min_functions was measured on (the floor then scales with the total)
    min_functions_total: int | None = None
    #: ``[[bench.instance]]``: instances only the bench runs (no phases)
    bench_instances: tuple[Instance, ...] = ()
    #: ``[[bench.scenario]]``, in file order
    scenarios: tuple[Scenario, ...] = ()
