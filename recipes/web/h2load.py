"""h2load (nghttp2-client): the command line of one run, and pure parsers of what it prints."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")

_REQUESTS = re.compile(
    r"^requests: (?P<total>\d+) total, (?P<started>\d+) started, (?P<done>\d+) done, (?P<succeeded>\d+) succeeded, "
    r"(?P<failed>\d+) failed, (?P<errored>\d+) errored, (?P<timeout>\d+) timeout$",
    re.MULTILINE,
)
_STATUS = re.compile(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx$", re.MULTILINE)
_PROTOCOL = re.compile(r"^Application protocol: (\S+)$", re.MULTILINE)
_FINISHED = re.compile(r"^finished in (?P<value>[\d.]+)(?P<unit>us|ms|s), (?P<rate>[\d.]+) req/s", re.MULTILINE)
_TRAFFIC = re.compile(
    r"^traffic: \S+ \((?P<total>\d+)\) total, \S+ \((?P<headers>\d+)\) headers \(space savings [^)]*\), "
    r"\S+ \((?P<data>\d+)\) data$",
    re.MULTILINE,
)
_PROGRESS = re.compile(r"^progress: (\d+)% done$")
_EXPECT = re.compile(r"^(ok|any|[2-5]xx|[1-5]\d\d)$")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class H2loadSummary:
    """The summary h2load prints at the end of a run."""

    total: int
    started: int
    done: int
    succeeded: int
    failed: int
    errored: int
    timeout: int
    status: dict[str, int] = field(default_factory=dict)
    protocol: str | None = None
    seconds: float | None = None
    rate: float | None = None
    #: bytes of response bodies h2load received (the ``data`` of its ``traffic:`` line), None without that line
    data_bytes: int | None = None

    def responses(self) -> int:
        """Responses that came with a status code."""
        return sum(self.status.values())


def rotated(urls: Sequence[str], first: int) -> list[str]:
    """``urls`` starting at ``first`` (modulo their number). Each h2load client asks for the URIs in order from the
    first, so a run whose clients make one request each asks only for the first: one-request runs take turns."""
    if not urls:
        return []
    k = first % len(urls)
    return [*urls[k:], *urls[:k]]


def h2load_argv(
    urls: Sequence[str],
    *,
    requests: int,
    connections: int,
    streams: int = 1,
    http1: bool = False,
    body: Path | None = None,
    headers: Sequence[str] = (),
    uri_file: Path | None = None,
    log_file: Path | None = None,
    threads: int = 1,
) -> list[str]:
    """One h2load run of exactly ``requests`` requests (never a duration). With ``uri_file`` the URLs are read
    from it (h2load -i: its lines are full URLs) and ``urls`` must be empty."""
    if requests < 1:
        raise ValueError(f"requests must be at least 1, got {requests}")
    if bool(urls) == (uri_file is not None):
        raise ValueError("give either urls or uri_file")
    argv = ["h2load", "-n", str(requests), "-c", str(max(1, min(connections, requests))), "-m", str(max(1, streams))]
    argv += ["-t", str(max(1, min(threads, connections)))]
    if http1:
        argv.append("--h1")
    if body is not None:
        argv += ["-d", str(body)]
    for header in headers:
        argv += ["-H", header]
    if log_file is not None:
        argv += ["--log-file", str(log_file)]
    if uri_file is not None:
        argv += ["-i", str(uri_file)]
    else:
        argv += list(urls)
    return argv


def parse_summary(text: str) -> H2loadSummary:
    """The ``requests:`` and ``status codes:`` lines (and protocol, time, rate when there). No requests line:
    ValueError (h2load refused its arguments or could not start)."""
    requests = _REQUESTS.search(text)
    if requests is None:
        raise ValueError("no 'requests: N total, …' line in h2load's output")
    counts = {k: int(v) for k, v in requests.groupdict().items()}
    status_match = _STATUS.search(text)
    status = dict(zip(STATUS_CLASSES, (int(g) for g in status_match.groups()), strict=True)) if status_match else {}
    protocol = _PROTOCOL.search(text)
    finished = _FINISHED.search(text)
    traffic = _TRAFFIC.search(text)
    seconds = float(finished["value"]) * _UNITS[finished["unit"]] if finished else None
    return H2loadSummary(
        **counts,
        status=status,
        protocol=protocol.group(1) if protocol else None,
        seconds=seconds,
        rate=float(finished["rate"]) if finished else None,
        data_bytes=int(traffic["data"]) if traffic else None,
    )


def parse_progress(line: str) -> int | None:
    """The percentage of a ``progress: 30% done`` line, else None."""
    match = _PROGRESS.match(line.strip())
    return int(match.group(1)) if match else None


def parse_log_codes(text: str) -> Counter[int]:
    """Status codes of an h2load ``--log-file`` (tab-separated: start time, status code, microseconds).
    Failed requests are logged with status -1."""
    rows = (line.split("\t") for line in text.splitlines())
    return Counter(int(parts[1]) for parts in rows if len(parts) >= 2 and parts[1].lstrip("-").isdigit())


def valid_expect(expect: str) -> bool:
    """``ok``, ``any``, a class (``4xx``) or a code (``403``)."""
    return _EXPECT.fullmatch(expect) is not None  # match: $ also matches before a final newline ("ok\n")


def needs_codes(expect: str) -> bool:
    """An exact status code can only be checked from the per-request log."""
    return expect[0].isdigit() and not expect.endswith("xx")


def check(summary: H2loadSummary, requested: int, expect: str, codes: Counter[int] | None = None) -> str | None:
    """Why the run does not pass, or None. It passes when every requested request completed (none errored
    or timed out) and every response is of the expected kind."""
    if summary.total != requested or summary.done != requested or summary.errored or summary.timeout:
        return (
            f"{summary.done} of {requested} requests done ({summary.started} started, {summary.errored} errored, "
            f"{summary.timeout} timed out)"
        )
    seen = summary.responses()
    if seen != requested:
        return f"{seen} status codes for {requested} requests (h2load counted {summary.status})"
    shown = ", ".join(f"{summary.status[c]} {c}" for c in STATUS_CLASSES if summary.status.get(c))
    if expect == "any":
        return None
    if expect == "ok":
        if summary.status.get("4xx") or summary.status.get("5xx"):
            return f"expected only 2xx/3xx, got {shown}"
        return None
    wanted = expect if expect.endswith("xx") else f"{expect[0]}xx"
    if summary.status.get(wanted, 0) != requested:
        return f"expected all {expect}, got {shown}"
    if wanted != expect:
        if codes is None:
            raise ValueError(f"expect = {expect!r} needs the per-request codes (--log-file)")
        if codes.get(int(expect), 0) != requested:
            top = ", ".join(f"{n} x {c}" for c, n in codes.most_common(4))
            return f"expected all {expect}, got {top}"
    return None


def mean_body(data_bytes: int, responses: int) -> float | None:
    """Mean bytes of body per response; None without responses."""
    return data_bytes / responses if responses else None


def check_mean_body(
    data_bytes: int | None, responses: int, minimum: int | None = None, maximum: int | None = None
) -> str | None:
    """Why the responses' mean body size (``data`` of h2load's traffic line over the responses) is out of
    ``[minimum, maximum]``, or None."""
    if minimum is None and maximum is None:
        return None
    if data_bytes is None:
        return "h2load printed no 'traffic: …' line to take the mean body size from"
    mean = mean_body(data_bytes, responses)
    if mean is None:
        return "no responses to take the mean body size of"
    figures = f"mean body {mean:,.0f} bytes ({data_bytes:,} bytes of data over {responses:,} responses)"
    if minimum is not None and mean < minimum:
        return f"{figures}, expected at least {minimum:,} (min_mean_body)"
    if maximum is not None and mean > maximum:
        return f"{figures}, expected at most {maximum:,} (max_mean_body)"
    return None
