"""Keys the phase kinds and the bench scenarios read alike: an HTTP ``path`` or ``paths``, a handshakes' ``path``,
``headers``, an ``expect``, a command's ``runs``, the counts' ceiling and that of the connections open at once."""

from __future__ import annotations

import resource
from collections.abc import Iterable
from pathlib import Path

from recipes.inputs import Table
from recipes.web import h2load

#: the most runs, requests or handshakes a phase (or a scenario) may ask for (times PGO_TRAIN_SCALE, it is still a
#: count, never a duration)
MAX_RUNS = 2**31 - 1

#: the local ports a loopback client may take (each of h2load's connections holds one)
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def parse_expect(table: Table) -> str:
    expect: str = table.string("expect", "ok")
    if not h2load.valid_expect(expect):
        raise table.error("expect", f"{expect!r} is not ok, any, a class like 4xx or a code like 403")
    return expect


def parse_runs(table: Table) -> int:
    runs: int = table.integer("runs", 1, minimum=1)
    if runs > MAX_RUNS:
        raise table.error("runs", f"{runs} is too many", f"at most {MAX_RUNS}")
    return runs


def parse_count(table: Table, key: str) -> int:
    """A phase's or scenario's ``requests`` or ``handshakes``: at least 1, at most :data:`MAX_RUNS`."""
    count: int = table.integer(key, required=True, minimum=1)
    if count > MAX_RUNS:
        raise table.error(key, f"{count} is too many", f"at most {MAX_RUNS}")
    return count


def parse_connections(table: Table, key: str, default: int, port_range: Path = PORT_RANGE) -> int:
    """``connections`` (or a handshakes' ``batch``): the connections one h2load run holds open at once. Refused
    where this machine cannot have so many open: h2load and the server each need a file descriptor per connection
    (both inherit the session's limit of open files, which every session raises to the hard one:
    :func:`recipes.procs.open_files_to_hard_limit`), and each of h2load's connections a local port. Past either,
    h2load counts the connections it could not open as errored requests, after the whole build (seen: 30000
    connections under a limit of 20000 against dufs 0.47.0 left 10006 errored and 6003 answered 5xx)."""
    connections: int = table.integer(key, default, minimum=1)
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if files != resource.RLIM_INFINITY and connections >= files:
        raise table.error(
            key,
            f"{connections} connections cannot be open at once here: h2load and the server each need a file "
            f"descriptor per connection, and the hard limit of open files (ulimit -Hn) is {files}",
            f"lower {key} well below {files}, or raise the hard limit",
        )
    try:
        low, high = (int(word) for word in port_range.read_text().split())
    except (OSError, ValueError):  # not Linux's /proc: the file descriptors alone
        return connections
    if connections > high - low + 1:
        raise table.error(
            key,
            f"{connections} connections cannot be open at once here: each takes a local port, and "
            f"{port_range} gives {high - low + 1} ({low} to {high})",
            f"lower {key} to at most {high - low + 1}",
        )
    return connections


def parse_paths(table: Table) -> list[str]:
    """``path`` or ``paths``, one at least, each starting with /."""
    path = table.string("path")
    paths = table.strings("paths")
    if path is not None and paths:
        raise table.error("paths", "give path or paths, not both")
    for item in [path] if path is not None else paths:
        if not item.startswith("/"):
            raise table.error("path", f"{item!r} must start with /")
    if path is None and not paths:
        raise table.error("path", "missing", 'add path = "/…" or paths = ["/…", …]')
    return [path] if path is not None else paths


def parse_path(table: Table) -> str:
    """A handshakes' ``path`` (default ``/health``), starting with /."""
    path: str = table.string("path", "/health")
    if not path.startswith("/"):
        raise table.error("path", f"{path!r} must start with /")
    return path


def parse_headers(table: Table) -> list[str]:
    headers = table.strings("headers")
    for header in headers:
        if ":" not in header.lstrip(":"):
            raise table.error("headers", f"{header!r} is not 'name: value'")
    return headers


def header_method(headers: Iterable[str]) -> str | None:
    """The method a ``:method: X`` header gives the requests (h2load's override of its own; the last one wins), or
    None."""
    method = None
    for header in headers:
        if header.startswith(":"):
            name, _, value = header[1:].partition(":")
            if name.strip().lower() == "method" and value.strip():
                method = value.strip()
    return method


def refuse_head_over_http1(table: Table, headers: Iterable[str], protocol: str) -> None:
    """h2load's HTTP/1.1 client does not know a HEAD response has no body: it waits for the ``content-length`` bytes
    the headers announce, and every request runs out of time (seen on dufs 0.47.0: HTTP/2 ends the stream)."""
    if protocol == "h1" and (header_method(headers) or "").upper() == "HEAD":
        raise table.error(
            "headers",
            "HEAD over HTTP/1.1: h2load waits for the body the response's content-length announces, and the "
            "requests never complete",
            'send HEAD requests over HTTP/2: protocol = "h2"',
        )
