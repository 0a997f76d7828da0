"""Server instances trained against a tiny real HTTP/1.1 server (Python's http.server in its own process, on
127.0.0.1): what a readiness failure says and how soon, a docroot of the user's own files, and the mean body size
an http phase may check (h2load's traffic figures). No demo server build: the "binary" is that script."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from recipes import procs
from recipes.errors import TrainingFailed
from recipes.results import WorkloadRun
from tests.conftest import train_workload

# no marker: neither a cargo build (slow) nor the demo server (server); about 15 s with real h2load runs

#: GET /health answers the status given as its third argument; any other path is a file under the folder of the
#: second, gzip-compressed when the request accepts gzip; DELETE answers 204 and appends its method to methods.log in
#: that folder; SIGTERM: exit 0
SERVER = """
import gzip, signal, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

port, root, health = int(sys.argv[1]), Path(sys.argv[2]).resolve(), int(sys.argv[3])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        path = self.path.split("?")[0]
        file = (root / path.lstrip("/")).resolve()
        if path == "/health":
            status, body = health, b"health\\n"
        elif file.is_file() and root in file.parents:
            status, body = 200, file.read_bytes()
        else:
            status, body = 404, b"no such file\\n"
        compressed = status == 200 and "gzip" in self.headers.get("accept-encoding", "")
        if compressed:
            body = gzip.compress(body, mtime=0)
        self.send_response(status)
        if compressed:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):
        with open(root / "methods.log", "a") as log:
            log.write(self.command + "\\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, format, *args):
        pass


signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
print(f"listening {port}", flush=True)
server.serve_forever()
"""


def server_binary(tmp_path: Path) -> Path:
    script = tmp_path / "tiny_server.py"
    script.write_text(SERVER)
    binary = tmp_path / "tiny-server"
    binary.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    binary.chmod(0o755)
    return binary


HEALTH_PHASE = """
[[instance.phase]]
name = "health"
kind = "http"
protocol = "h1"
path = "/health"
requests = 5
"""


def workload(
    tmp_path: Path, *, health: int = 200, setup: str = "docroot = true", server: str = "", phases: str = HEALTH_PHASE
) -> Path:
    path = tmp_path / "workload.toml"
    path.write_text(
        f"""
[workload]
description = "a tiny Python server"

[setup]
{setup}

[[instance]]
name = "tiny"
mode = "server"
args = ["{{http_port}}", "{{docroot}}", "{health}"]
{server}

{phases}
"""
    )
    return path


def train(tmp_path: Path, workload_path: Path, binary: Path) -> WorkloadRun:
    return train_workload(tmp_path, workload_path, binary, timeout=60)


def test_a_server_that_answers_200_is_trained(tmp_path: Path) -> None:
    report = train(tmp_path, workload(tmp_path), server_binary(tmp_path))
    assert [(p["name"], p["done"], p["status"]["2xx"]) for p in report.phases] == [("health", 5, 5)]


@pytest.mark.refuses("readiness-url-steadily-answers-other-200")
def test_a_readiness_url_answering_404_fails_fast_saying_so(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    with pytest.raises(TrainingFailed) as caught:
        train(tmp_path, workload(tmp_path, health=404), server_binary(tmp_path))
    took = time.monotonic() - started
    assert took < 20, took  # not the 60 s ready_timeout
    message = caught.value.line()
    assert "\n" not in message
    assert (
        caught.value.message.startswith("instance tiny: the server answered http://127.0.0.1:")
        and "/health with 404 Not Found for " in message
        and "expected 200" in message
    ), message
    assert "set ready = to a URL it answers with 200" in caught.value.hint
    err = capfd.readouterr().err
    assert err.count("--- tail of the server log") == 1
    assert "listening" in err  # its first line: the probes left no error in the server's log


@pytest.mark.refuses("readiness-url-not-answered-200-ready-timeout")
def test_a_readiness_port_that_refuses_waits_the_timeout_and_says_so(tmp_path: Path) -> None:
    # the server listens on {http_port}; the readiness URL is {https_port}, where nothing listens
    text = 'ready = "http://127.0.0.1:{https_port}/health"\nready_timeout = 2'
    started = time.monotonic()
    with pytest.raises(TrainingFailed) as caught:
        train(tmp_path, workload(tmp_path, server=text), server_binary(tmp_path))
    assert 2 <= time.monotonic() - started < 15
    assert caught.value.message.endswith("/health with 200 within 2 s (last: connection refused)"), caught.value.message
    assert "raise ready_timeout" in caught.value.hint


COMPRESSED = """
[[instance.phase]]
name = "compressed"
kind = "http"
protocol = "h1"
paths = ["/index.html", "/docs/b.html"]
requests = 40
headers = ["accept-encoding: gzip"]
{limits}
"""


@pytest.mark.refuses("mean-body-size-out-min-mean-body")
def test_mean_body_proves_compression(tmp_path: Path) -> None:
    """index.html (5120 bytes) and docs/b.html (2400): 3760 bytes a response uncompressed, far less gzipped."""
    binary = server_binary(tmp_path)
    ok = COMPRESSED.format(limits="min_mean_body = 100\nmax_mean_body = 3000")
    report = train(tmp_path, workload(tmp_path, phases=ok), binary)
    assert "mean body" in report.phases[0]["detail"]
    plain = ok.replace('headers = ["accept-encoding: gzip"]\n', "")
    with pytest.raises(TrainingFailed) as caught:
        train(tmp_path, workload(tmp_path, phases=plain), binary)
    assert caught.value.message == (
        "phase tiny/compressed: mean body 3,760 bytes (150,400 bytes of data over 40 responses), "
        "expected at most 3,000 (max_mean_body)"
    )
    too_small = COMPRESSED.format(limits="min_mean_body = 3700")
    with pytest.raises(
        TrainingFailed, match=r"phase tiny/compressed: mean body [\d,]+ bytes .* expected at least 3,700"
    ):
        train(tmp_path, workload(tmp_path, phases=too_small), binary)


@pytest.mark.refuses("mean-body-size-out-min-mean-body")
def test_mean_body_over_one_request_per_connection(tmp_path: Path) -> None:
    """Summed over the five h2load runs of 8 connections, each connection's one request the run's first path: the
    runs take turns, index.html (5120 bytes) first in three of them and docs/b.html (2400) in two, so
    (3 x 8 x 5120 + 2 x 8 x 2400) / 40 = 4032 a response. (It was 5120 while every run asked for index.html alone.)"""
    phases = COMPRESSED.format(limits="one_per_connection = true\nconnections = 8\nmax_mean_body = 3000")
    with pytest.raises(TrainingFailed, match=r"mean body 4,032 bytes \(161,280 bytes of data over 40 responses\)"):
        train(
            tmp_path,
            workload(tmp_path, phases=phases.replace('headers = ["accept-encoding: gzip"]\n', "")),
            server_binary(tmp_path),
        )


def test_docroot_of_the_users_own_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "css").mkdir(parents=True)
    (site / "css" / "main.css").write_text("b" * 777)
    phases = """
[[instance.phase]]
name = "own"
kind = "http"
protocol = "h1"
path = "/css/main.css"
requests = 10
min_mean_body = 777
max_mean_body = 777

[[instance.phase]]
name = "generated-is-not-there"
kind = "http"
protocol = "h1"
path = "/index.html"
requests = 10
expect = "404"

[[instance.phase]]
name = "bodies-are-made"
kind = "http"
protocol = "h1"
method = "POST"
body = "{bodies}/form-2k.txt"
path = "/css/main.css"
requests = 10
expect = "501"
"""
    report = train(tmp_path, workload(tmp_path, setup='docroot = "site"', phases=phases), server_binary(tmp_path))
    assert [p["done"] for p in report.phases] == [10, 10, 10]
    assert sorted(site.rglob("*")) == [site / "css", site / "css" / "main.css"]  # nothing written into it
    # {bodies} is made anyway: h2load sent form-2k.txt (the tiny server does not know POST: 501)


def daemonizing_binary(tmp_path: Path) -> Path:
    """The tiny server, started by a wrapper that first starts a daemon of its own (``setsid``: another
    session), whose pid it writes to ``daemon.pid``."""
    binary = server_binary(tmp_path)
    wrapper = tmp_path / "daemonizing-server"
    pid_file = tmp_path / "daemon.pid"
    wrapper.write_text(f'#!/bin/sh\nsetsid sleep 300 & echo $! > {pid_file}\nexec {binary} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _daemon(tmp_path: Path) -> int:
    return int((tmp_path / "daemon.pid").read_text())


@pytest.mark.refuses("training-server-leaves-processes-running-after-exits")
def test_a_server_that_leaves_a_daemon_is_refused_in_the_training(tmp_path: Path) -> None:
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, workload(tmp_path), daemonizing_binary(tmp_path), timeout=60, profraw=True)
    daemon = _daemon(tmp_path)
    assert procs.read_process(daemon) is None, f"the daemon {daemon} is still there"
    assert (
        caught.value.message == f"instance tiny: the server left 1 process running (pid {daemon}: sleep); killed them"
    )
    assert "could write a .profraw while the merge reads them" in caught.value.hint


def test_a_server_that_leaves_a_daemon_replayed_is_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    report = train(tmp_path, workload(tmp_path), daemonizing_binary(tmp_path))
    assert [(p["name"], p["done"]) for p in report.phases] == [("health", 5)]
    daemon = _daemon(tmp_path)
    assert procs.read_process(daemon) is None
    err = capfd.readouterr().err
    assert f"pgo: instance tiny: the server left 1 process running (pid {daemon}: sleep); killed them\n" in err


def test_a_method_header_names_the_requests_method(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``headers = [":method: DELETE"]``: h2load sends DELETE, and the phase's line says so (it said "5 GET requests"
    of dufs 0.47.0's HEAD phase, ``:method: HEAD`` over HTTP/2)."""
    phases = """
[[instance.phase]]
name = "delete"
kind = "http"
protocol = "h1"
path = "/gone.txt"
headers = [":method: DELETE"]
requests = 5
connections = 1
expect = "204"
"""
    site = tmp_path / "site"
    site.mkdir()
    report = train(tmp_path, workload(tmp_path, setup='docroot = "site"', phases=phases), server_binary(tmp_path))
    assert [(p["name"], p["done"]) for p in report.phases] == [("delete", 5)]
    assert (site / "methods.log").read_text() == "DELETE\n" * 5
    err = capfd.readouterr().err
    assert "phase tiny/delete: 5 DELETE requests, h1 over http, 1 path, 1 connection, expect 204\n" in err, err
