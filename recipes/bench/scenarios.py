"""The benchmark's scenarios: the rows of the reference's table that the demo server can serve.

Each trial is a fixed request count (never a duration), so a slow machine measures the same work as a
fast one. The counts are chosen so that a trial takes a few seconds on this project's 2-core machine;
``--scale`` multiplies them (the tests use tiny trials).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from recipes.errors import ConfigError

#: the paths the scenarios request: the upstream backend (recipes/upstream.py) serves /page/ (5 KB,
#: cacheable), /img/ (200 KB, cacheable) and /api/ (small, no-store); the document root /static/
DOC_5K = "/page/bench"
DOC_200K = "/img/bench"
STATIC_5K = "/static/index.html"
STATIC_10M = "/static/download.bin"
SITE_PATHS = (
    "/page/index",
    "/page/about",
    "/page/bench?lang=en",
    "/img/logo",
    "/api/items",
    "/api/cart?id=7",
    STATIC_5K,
    "/static/style.css",
    "/static/docs/a.html",
    "/health",
    "/page/index",
)


@dataclass(frozen=True)
class Scenario:
    """One row of the table: how the server is configured and how h2load loads it."""

    name: str
    title: str
    paths: tuple[str, ...]
    requests: int  # per trial, at scale 1
    connections: int = 32
    streams: int = 1  # concurrent streams per HTTP/2 connection
    protocol: str = "h1"  # "h1" or "h2" (h2c prior knowledge without TLS, ALPN h2 with it)
    tls: bool = False
    rps: int | None = None  # per connection (h2load --rps)
    one_per_connection: bool = False  # every request on a new client: a full TLS handshake each
    access_log: bool = False
    cache: bool = True
    upstream: bool = False  # needs the upstream backend
    files: bool = False  # needs the document root
    expect: str = "2xx"

    def scaled(self, scale: float) -> Scenario:
        """The same scenario with ``scale`` times the requests (at least one per connection)."""
        requests = max(self.connections, math.ceil(self.requests * scale))
        return replace(self, requests=requests)

    @property
    def warmup_requests(self) -> int:
        """Requests sent before the trials (fills the cache, opens the files, wakes the pools)."""
        return max(self.connections, min(2000, self.requests // 20))


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("cached-5k-h1", "cached 5 KB document, HTTP/1.1", (DOC_5K,), 100_000, upstream=True),
    Scenario("cached-5k-h1-log", "the same, access log on", (DOC_5K,), 80_000, upstream=True, access_log=True),
    Scenario(
        "cached-5k-h2",
        "the same over HTTP/2",
        (DOC_5K,),
        150_000,
        protocol="h2",
        connections=8,
        streams=16,
        upstream=True,
    ),
    Scenario("cached-5k-1024c", "the same at 1024 connections", (DOC_5K,), 100_000, connections=1024, upstream=True),
    Scenario(
        "cached-5k-rate",
        "the same at a fixed 10k req/s",
        (DOC_5K,),
        30_000,
        connections=20,
        rps=500,
        upstream=True,
    ),
    Scenario("proxied-5k", "proxied, no cache", (DOC_5K,), 30_000, connections=16, cache=False, upstream=True),
    Scenario("site-mix", "the example site, mixed paths", SITE_PATHS, 80_000, upstream=True, files=True),
    Scenario(
        "site-mix-log",
        "the same, access log on",
        SITE_PATHS,
        60_000,
        upstream=True,
        files=True,
        access_log=True,
    ),
    Scenario("static-5k", "files from disk", (STATIC_5K,), 30_000, files=True),
    Scenario(
        "tls-handshake",
        "full TLS handshake per request",
        ("/health",),
        3_000,
        connections=200,
        tls=True,
        one_per_connection=True,
    ),
    Scenario("cached-200k", "cached 200 KB object", (DOC_200K,), 25_000, connections=16, upstream=True),
    Scenario("download-10m", "10 MiB download", (STATIC_10M,), 300, connections=4, files=True),
)
BY_NAME = {s.name: s for s in SCENARIOS}


def select(names: str | None, scenarios: Sequence[Scenario] = SCENARIOS) -> list[Scenario]:
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
