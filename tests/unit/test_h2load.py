"""h2load's command line and the parsers of its output, on output captured from real runs (tests/data/h2load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.web import h2load
from tests.conftest import DATA

H2LOAD = DATA / "h2load"


def _read(name: str) -> str:
    return (H2LOAD / name).read_text()


@pytest.mark.parametrize(
    ("name", "total", "done", "succeeded", "errored", "status", "protocol"),
    [
        ("h1-plain-ok.txt", 20000, 20000, 20000, 0, (20000, 0, 0, 0), "http/1.1"),
        ("h1-plain-500.txt", 100, 100, 0, 0, (0, 0, 0, 100), "http/1.1"),
        ("h1-refused.txt", 10, 0, 0, 10, (0, 0, 0, 0), None),
        ("h1-mixed.txt", 12, 12, 4, 0, (4, 0, 4, 4), "http/1.1"),
        ("h2c-refused-by-h1-server.txt", 10, 0, 0, 10, (0, 0, 0, 0), "h2c"),
        # from the demo server
        ("h2-tls-cached.txt", 5000, 5000, 5000, 0, (5000, 0, 0, 0), "h2"),
        ("h1-tls-proxied.txt", 2000, 2000, 2000, 0, (2000, 0, 0, 0), "http/1.1"),
        ("h2-tls-handshakes.txt", 50, 50, 50, 0, (50, 0, 0, 0), "h2"),
        ("h2c-413.txt", 20, 20, 0, 0, (0, 0, 20, 0), "h2c"),
        ("h1-413-connection-closed.txt", 20, 2, 0, 18, (0, 0, 2, 0), "http/1.1"),
    ],
)
def test_parse_summary(
    name: str,
    total: int,
    done: int,
    succeeded: int,
    errored: int,
    status: tuple[int, int, int, int],
    protocol: str | None,
) -> None:
    summary = h2load.parse_summary(_read(name))
    assert (summary.total, summary.done, summary.succeeded, summary.errored) == (total, done, succeeded, errored)
    assert summary.status == dict(zip(h2load.STATUS_CLASSES, status, strict=True))
    assert summary.protocol == protocol


def test_parse_summary_time_and_rate() -> None:
    summary = h2load.parse_summary(_read("h1-plain-ok.txt"))
    assert summary.seconds == pytest.approx(0.22195)
    assert summary.rate == pytest.approx(90109.98)


def test_parse_summary_refuses_output_without_summary() -> None:
    with pytest.raises(ValueError, match="no 'requests: N total"):
        h2load.parse_summary(_read("bad-uri.txt"))


def test_parse_progress() -> None:
    lines = _read("h1-plain-ok.txt").splitlines()
    percents = [p for p in map(h2load.parse_progress, lines) if p is not None]
    assert percents == list(range(10, 101, 10))
    assert h2load.parse_progress("finished in 221.95ms") is None


def test_parse_log_codes() -> None:
    codes = h2load.parse_log_codes(_read("h1-mixed-codes.tsv"))
    assert codes == {200: 4, 503: 4, 404: 4}


@pytest.mark.parametrize(
    ("name", "requested", "expect", "problem"),
    [
        ("h1-plain-ok.txt", 20000, "ok", None),
        ("h1-plain-ok.txt", 20000, "2xx", None),
        ("h1-plain-ok.txt", 20000, "any", None),
        ("h1-plain-ok.txt", 20001, "ok", "20000 of 20001 requests done"),
        ("h1-plain-ok.txt", 20000, "4xx", "expected all 4xx, got 20000 2xx"),
        ("h1-plain-500.txt", 100, "ok", "expected only 2xx/3xx, got 100 5xx"),
        ("h1-plain-500.txt", 100, "5xx", None),
        ("h1-plain-500.txt", 100, "any", None),
        ("h1-refused.txt", 10, "any", "0 of 10 requests done (0 started, 10 errored"),
        ("h1-mixed.txt", 12, "ok", "expected only 2xx/3xx, got 4 2xx, 4 4xx, 4 5xx"),
        ("h1-mixed.txt", 12, "any", None),
        ("h2c-413.txt", 20, "4xx", None),
        ("h2c-413.txt", 20, "ok", "expected only 2xx/3xx, got 20 4xx"),
        ("h1-413-connection-closed.txt", 20, "4xx", "2 of 20 requests done (4 started, 18 errored"),
        ("h2-tls-cached.txt", 5000, "ok", None),
    ],
)
def test_check(name: str, requested: int, expect: str, problem: str | None) -> None:
    found = h2load.check(h2load.parse_summary(_read(name)), requested, expect)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_check_exact_code_needs_and_uses_the_log() -> None:
    summary = h2load.parse_summary(_read("h1-plain-500.txt"))
    with pytest.raises(ValueError, match="needs the per-request codes"):
        h2load.check(summary, 100, "500")
    assert h2load.check(summary, 100, "500", h2load.parse_log_codes("1\t500\t3\n" * 100)) is None
    problem = h2load.check(summary, 100, "500", h2load.parse_log_codes("1\t500\t3\n" * 60 + "1\t503\t3\n" * 40))
    assert problem == "expected all 500, got 60 x 500, 40 x 503"


@pytest.mark.parametrize(
    ("expect", "valid", "codes"),
    [("ok", True, False), ("any", True, False), ("4xx", True, False), ("403", True, True), ("502", True, True)],
)
def test_expect_values(expect: str, valid: bool, codes: bool) -> None:
    assert h2load.valid_expect(expect) is valid
    assert h2load.needs_codes(expect) is codes


@pytest.mark.parametrize("expect", ["OK", "6xx", "40", "2xxx", "fine", "", "ok\n", "500\n"])
def test_bad_expect_values(expect: str) -> None:
    assert not h2load.valid_expect(expect)


def test_argv_http1_post_with_headers(tmp_path: Path) -> None:
    body = tmp_path / "body"
    argv = h2load.h2load_argv(
        ["https://127.0.0.1:8443/api/a"],
        requests=1000,
        connections=8,
        http1=True,
        body=body,
        headers=["x-a: 1"],
    )
    assert argv == [
        "h2load", "-n", "1000", "-c", "8", "-m", "1", "-t", "1", "--h1", "-d", str(body), "-H", "x-a: 1",
        "https://127.0.0.1:8443/api/a",
    ]  # fmt: skip


def test_argv_http2_streams_and_connections_never_above_requests(tmp_path: Path) -> None:
    argv = h2load.h2load_argv(
        ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"], requests=3, connections=50, streams=10, log_file=tmp_path
    )
    assert argv[:8] == ["h2load", "-n", "3", "-c", "3", "-m", "10", "-t"]
    assert "--h1" not in argv
    assert argv[-4:] == ["--log-file", str(tmp_path), "http://127.0.0.1:1/a", "http://127.0.0.1:1/b"]


def test_argv_refuses_nonsense(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        h2load.h2load_argv(["http://x/"], requests=0, connections=1)
    with pytest.raises(ValueError, match="either urls or uri_file"):
        h2load.h2load_argv(["http://x/"], requests=1, connections=1, uri_file=tmp_path)
    assert h2load.h2load_argv([], requests=1, connections=1, uri_file=tmp_path)[-2:] == ["-i", str(tmp_path)]


@pytest.mark.parametrize(
    ("name", "data_bytes", "responses", "mean"),
    [
        ("h2-tls-cached.txt", 25675000, 5000, 5135.0),  # the demo server's cached 5 KB pages, over h2
        ("h1-plain-ok.txt", 980000, 20000, 49.0),
        ("h1-mixed.txt", 296, 12, 296 / 12),
        ("h1-413-connection-closed.txt", 46, 2, 23.0),  # 2 responses of 20 requests
        ("h1-refused.txt", 0, 0, None),
    ],
)
def test_traffic_data_and_mean_body(name: str, data_bytes: int, responses: int, mean: float | None) -> None:
    summary = h2load.parse_summary(_read(name))
    assert (summary.data_bytes, summary.responses()) == (data_bytes, responses)
    assert h2load.mean_body(data_bytes, responses) == mean


def test_no_traffic_line_no_data_bytes() -> None:
    text = "\n".join(line for line in _read("h1-plain-ok.txt").splitlines() if not line.startswith("traffic:"))
    assert h2load.parse_summary(text).data_bytes is None


@pytest.mark.parametrize(
    ("minimum", "maximum", "problem"),
    [
        (None, None, None),
        (5000, 6000, None),
        (5135, 5135, None),
        (None, 2000, "mean body 5,135 bytes (25,675,000 bytes of data over 5,000 responses), expected at most 2,000"),
        (6000, None, "mean body 5,135 bytes (25,675,000 bytes of data over 5,000 responses), expected at least 6,000"),
    ],
)
def test_check_mean_body(minimum: int | None, maximum: int | None, problem: str | None) -> None:
    summary = h2load.parse_summary(_read("h2-tls-cached.txt"))
    found = h2load.check_mean_body(summary.data_bytes, summary.responses(), minimum, maximum)
    assert found == (None if problem is None else f"{problem} ({'max' if maximum == 2000 else 'min'}_mean_body)")


def test_check_mean_body_without_figures() -> None:
    assert (
        h2load.check_mean_body(None, 10, 1, None)
        == "h2load printed no 'traffic: …' line to take the mean body size from"
    )
    assert h2load.check_mean_body(0, 0, None, 100) == "no responses to take the mean body size of"
    assert h2load.check_mean_body(None, 10) is None  # no limits: nothing to check
