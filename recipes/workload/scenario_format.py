"""The format of the benchmark's scenarios, as the workload file declares them (``[[bench.scenario]]``,
profiles/README.md); what the bench does with them is :mod:`recipes.bench`'s.

A scenario runs against an instance: a ``[[bench.instance]]`` of the file, or one of its training
``[[instance]]`` tables (by name, with its args, config template, env and cwd; its phases are not run). Its
``kind`` is one of the training's: ``http`` and ``handshakes`` against a server instance (the server's CPU
time per request), ``command`` against a command instance (the child's CPU time per run). Each trial is a
fixed count (requests, handshakes or runs, never a duration), so a slow machine measures the same work as a
fast one; ``--scale`` multiplies the counts (the tests use tiny trials).
"""

from __future__ import annotations

from typing import TypedDict

from recipes.inputs import Table
from recipes.workload.fields import (
    parse_connections,
    parse_count,
    parse_expect,
    parse_headers,
    parse_path,
    parse_paths,
    parse_runs,
    refuse_head_over_http1,
)
from recipes.workload.model import Instance, Scenario

#: scenario kinds and the instance mode each runs against
KINDS = {"http": "server", "handshakes": "server", "command": "command"}
HOW_TO_ADD = "add a [[bench.scenario]] table (name, instance, kind: see 'Bench scenarios' in profiles/README.md)"


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
    count, fields = _kind_fields(table, kind)
    return Scenario(name, title, kind, instance, count, warmup, **fields, declared_held_out=table.boolean("held_out"))


class _KindFields(TypedDict, total=False):
    """The fields of a :class:`~recipes.workload.model.Scenario` its kind reads (the others keep their defaults)."""

    paths: tuple[str, ...]
    protocol: str
    scheme: str
    connections: int
    streams: int
    rps: int | None
    one_per_connection: bool
    headers: tuple[str, ...]
    expect: str
    args: tuple[str, ...]
    stdin: str | None
    cwd: str | None
    expect_exit: int


def _kind_fields(table: Table, kind: str) -> tuple[int, _KindFields]:
    """The scenario's count (runs, handshakes or requests) and the fields of its kind."""
    if kind == "command":
        runs = parse_runs(table)
        return runs, {
            "args": tuple(table.strings("args")),
            "stdin": table.string("stdin"),
            "cwd": table.string("cwd"),
            "expect_exit": table.exit_code("expect_exit"),
        }
    expect = parse_expect(table)
    if not expect.endswith("xx") and expect not in {"ok", "any"}:
        raise table.error("expect", f"{expect!r}: the bench checks classes of status", 'say "ok", "any" or "2xx"')
    if kind == "handshakes":
        path = parse_path(table)
        batch = parse_connections(table, "batch", 50)
        return parse_count(table, "handshakes"), {
            "paths": (path,),
            "protocol": table.string("protocol", "h1", choices=("h1", "h2")),
            "scheme": "https",
            "connections": batch,
            "one_per_connection": True,
            "expect": expect,
        }
    paths = tuple(parse_paths(table))
    headers = parse_headers(table)
    one_per_connection = bool(table.boolean("one_per_connection", default=False))
    rps = table.integer("rps", minimum=1)
    if rps is not None and one_per_connection:
        raise table.error("rps", "a rate and one_per_connection do not go together", "drop one of them")
    protocol = table.string("protocol", "h2", choices=("h1", "h2"))
    refuse_head_over_http1(table, headers, protocol)
    return parse_count(table, "requests"), {
        "paths": paths,
        "protocol": protocol,
        "scheme": table.string("scheme", "http", choices=("http", "https")),
        "connections": parse_connections(table, "connections", 4),
        "streams": table.integer("streams", 1, minimum=1),
        "rps": rps,
        "one_per_connection": one_per_connection,
        "headers": tuple(headers),
        "expect": expect,
    }
