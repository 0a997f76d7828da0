"""``kind = "handshakes"`` phases: full TLS handshakes, one request per new connection.

    [[instance.phase]]
    name = "handshakes"
    kind = "handshakes"
    handshakes = 2000          # times PGO_TRAIN_SCALE
    batch = 50                 # connections opened at once by one h2load run (h2load -c B -n B)
    protocol = "h1"            # or "h2" (ALPN)
    path = "/health"
    expect = "ok"

Each h2load run opens ``batch`` connections and sends exactly one request on each (``-c B -n B``); every
connection is a new client with its own TLS state, and h2load keeps no session cache, so each is a full
handshake (no resumption).
"""

from __future__ import annotations

import time
from dataclasses import KW_ONLY, dataclass
from typing import ClassVar

from recipes.inputs import Table, fill
from recipes.runner import say
from recipes.train.http import Watched, codes_log_for, run_batches, url
from recipes.web import h2load
from recipes.workload.fields import parse_connections, parse_count, parse_expect, parse_path
from recipes.workload.registry import Phase, PhaseContext, PhaseResult, register_phase


@register_phase
@dataclass(eq=False)
class HandshakesPhase(Phase):
    kind: ClassVar[str] = "handshakes"
    modes = ("server",)

    _: KW_ONLY
    handshakes: int
    batch: int
    protocol: str
    path: str
    expect: str

    @classmethod
    def parse(cls, table: Table, name: str, timeout: float | None) -> Phase:
        path = parse_path(table)
        return cls(
            name,
            timeout,
            handshakes=parse_count(table, "handshakes"),
            batch=parse_connections(table, "batch", 50),
            protocol=table.string("protocol", "h1", choices=("h1", "h2")),
            path=path,
            expect=parse_expect(table),
        )

    def tools(self) -> dict[str, str]:
        return {"h2load": "nghttp2-client"}

    def texts(self) -> list[str]:
        return [self.path]

    def run(self, ctx: PhaseContext) -> PhaseResult:
        handshakes = ctx.scaled(self.handshakes)
        where = url(ctx, "https", fill(self.path, ctx.values))
        watched = Watched.begin(ctx, self.name, self.timeout)
        say(f"{watched.label}: {handshakes} full TLS handshakes ({self.protocol}), {self.batch} connections at a time")
        done, status = run_batches(
            ctx,
            lambda count, log_file, _run: h2load.h2load_argv(
                [where], requests=count, connections=count, http1=self.protocol == "h1", log_file=log_file
            ),
            watched,
            total=handshakes,
            batch=self.batch,
            expect=self.expect,
            codes_log=codes_log_for(ctx, self.name, self.expect),
            unit="handshakes",
        )
        seconds = time.monotonic() - watched.start
        return PhaseResult(
            self.name, self.kind, handshakes, done, seconds, status, f"{self.protocol}, batch {self.batch}"
        )
