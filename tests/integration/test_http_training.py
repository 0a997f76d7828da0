"""The HTTP training against the real demo server (a plain release build, made once per module): the shipped
workload's expectations hold, and every way a phase or an instance can fail fails with its reason."""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from pathlib import Path

import pytest

from recipes.errors import ConfigError, TrainingFailed
from recipes.train.resources import UpstreamBackend
from recipes.web import net
from recipes.web.certs import make_certs
from recipes.workload import load_workload
from tests.conftest import REPO, assert_refused, clean_env, run_nox, train_workload

pytestmark = [pytest.mark.slow, pytest.mark.server]

MANIFEST = REPO / "examples" / "demo-server" / "Cargo.toml"
PLAIN_TARGET_DIR = REPO / "target" / "tests-demo-server-plain"

CONFIG = """
[server]
http = "127.0.0.1:{http_port}"
https = "127.0.0.1:{https_port}"
workers = 2

[tls]
cert = "{ecdsa_cert}"
key = "{ecdsa_key}"

[access_log]
enabled = true
path = "{instance_dir}/access.log"

[cache]
enabled = true
max_entries = 1000
max_object_bytes = 1048576
ttl_seconds = 60

[proxy]
upstream = "{upstream}"
timeout_ms = 5000

[files]
root = "{docroot}"

[waf]
enabled = true
max_body_bytes = 524288
"""


@pytest.fixture(scope="module")
def demo_release() -> Path:
    """A plain (non-instrumented) release build of examples/demo-server, in the tests' own target dir."""
    env = clean_env({"CARGO_TARGET_DIR": str(PLAIN_TARGET_DIR)})
    argv = ["cargo", "build", "--release", "--locked", "--manifest-path", str(MANIFEST)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    binary = PLAIN_TARGET_DIR / "release" / "demo-server"
    assert binary.is_file()
    return binary


def workload_file(tmp_path: Path, phases: str, *, args: str = '["--config", "{config}"]', config: str = CONFIG) -> Path:
    text = f'''
[workload]
description = "test"

[setup]
certs = ["ecdsa"]
docroot = true
upstream = true

[[instance]]
name = "srv"
mode = "server"
args = {args}
config = """{config}"""
{phases}
'''
    path = tmp_path / "workload.toml"
    path.write_text(text)
    return path


def test_shipped_workload_holds_on_the_real_server(tmp_path: Path, demo_release: Path) -> None:
    """Every expectation of profiles/demo-server.toml (status classes and codes) is what the server answers."""
    report = train_workload(tmp_path, REPO / "profiles" / "demo-server.toml", demo_release, scale=0.005)
    assert len(report.phases) == 2 * len(load_workload(REPO / "profiles" / "demo-server.toml").instances[0].phases)
    for phase in report.phases:
        assert phase["done"] == phase["requests"], phase


@pytest.mark.refuses("status-codes-other-expect")
def test_5xx_where_ok_is_expected_fails(tmp_path: Path, demo_release: Path, capfd: pytest.CaptureFixture[str]) -> None:
    phases = """
[[instance.phase]]
name = "errors"
kind = "http"
protocol = "h1"
paths = ["/api/a", "/error/500"]
requests = 200
"""
    with pytest.raises(TrainingFailed, match=r"phase srv/errors: expected only 2xx/3xx, got 100 2xx, 100 5xx"):
        train_workload(tmp_path, workload_file(tmp_path, phases), demo_release)
    assert "--- tail of the server log" in capfd.readouterr().err


@pytest.mark.refuses("status-codes-other-expect")
def test_wrong_exact_code_fails(tmp_path: Path, demo_release: Path) -> None:
    phases = """
[[instance.phase]]
name = "blocked"
kind = "http"
protocol = "h2"
path = "/api/a"
requests = 50
expect = "403"
"""
    with pytest.raises(TrainingFailed, match=r"phase srv/blocked: expected all 403, got 50 2xx"):
        train_workload(tmp_path, workload_file(tmp_path, phases), demo_release)


@pytest.mark.refuses("http-phase-does-not-finish-time-sockets")
@pytest.mark.parametrize(
    ("phase_timeout", "override"),
    [(2, None), (600, 2.0)],  # the phase's own limit; PGO_PHASE_TIMEOUT over a phase's own limit
)
def test_phase_out_of_time_prints_sockets_threads_and_log(
    tmp_path: Path, demo_release: Path, capfd: pytest.CaptureFixture[str], phase_timeout: int, override: float | None
) -> None:
    phases = f"""
[[instance.phase]]
name = "slow"
kind = "http"
protocol = "h1"
path = "/slow/x"
requests = 100000
connections = 1
timeout = {phase_timeout}
"""
    started = time.monotonic()
    with pytest.raises(TrainingFailed, match=r"phase srv/slow: not finished within its time limit of 2 s") as caught:
        train_workload(tmp_path, workload_file(tmp_path, phases), demo_release, timeout=override)
    assert time.monotonic() - started < 30
    err = capfd.readouterr().err
    assert "--- sockets (ss -tinm)" in err
    assert "ESTAB" in err  # the hung phase's connections, from both ends
    assert "--- threads of the server" in err
    assert "--- tail of" in err
    assert "PGO_PHASE_TIMEOUT" in caught.value.hint


@pytest.mark.refuses("server-exits-during-phase")
def test_server_killed_mid_phase_fails_with_its_signal(
    tmp_path: Path, demo_release: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # the "binary" is a wrapper that becomes the server (exec keeps the pid) and has it killed after a second
    wrapper = tmp_path / "crashing-server"
    wrapper.write_text(f'#!/bin/sh\n(sleep 1.5; kill -9 $$) &\nexec {demo_release} "$@"\n')
    wrapper.chmod(0o755)
    phases = """
[[instance.phase]]
name = "long"
kind = "http"
protocol = "h1"
path = "/slow/x"
requests = 100000
connections = 2
"""
    with pytest.raises(
        TrainingFailed, match=r"instance srv: the server exited with signal 9 \(SIGKILL\) during phase srv/long"
    ):
        train_workload(tmp_path, workload_file(tmp_path, phases), wrapper)
    assert "--- tail of the server log" in capfd.readouterr().err


@pytest.mark.refuses("server-exits-before-ready")
def test_server_that_exits_at_start_fails_with_its_exit_code(
    tmp_path: Path, demo_release: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    phases = """
[[instance.phase]]
name = "never"
kind = "http"
path = "/health"
requests = 1
"""
    bad = CONFIG.replace("workers = 2", "workers = 2\nno_such_key = 1")
    with pytest.raises(
        TrainingFailed, match=r"the server exited with exit code 2 before it answered http://127.0.0.1:\d+/health"
    ):
        train_workload(tmp_path, workload_file(tmp_path, phases, config=bad), demo_release)
    assert "no_such_key" in capfd.readouterr().err  # its own one line, from the log's tail


@pytest.mark.refuses("server-exits-non-zero-signal-after-sigterm")
def test_server_that_stops_badly_fails_with_its_exit_code(tmp_path: Path, demo_release: Path) -> None:
    # a wrapper that passes SIGTERM on to the real server, then exits 3 itself
    wrapper = tmp_path / "bad-exit-server"
    wrapper.write_text(
        f'#!/bin/sh\n{demo_release} "$@" &\nchild=$!\n'
        "trap 'kill -TERM $child; wait $child; exit 3' TERM\nwait $child\n"
    )
    wrapper.chmod(0o755)
    phases = """
[[instance.phase]]
name = "health"
kind = "http"
path = "/health"
requests = 20
"""
    with pytest.raises(TrainingFailed, match=r"the server exited with exit code 3 after SIGTERM, expected exit code 0"):
        train_workload(tmp_path, workload_file(tmp_path, phases), wrapper)


@pytest.mark.refuses("instance-writes-no-profraw")
def test_non_instrumented_binary_writes_no_profile(tmp_path: Path, demo_release: Path) -> None:
    phases = """
[[instance.phase]]
name = "health"
kind = "http"
path = "/health"
requests = 20
"""
    with pytest.raises(TrainingFailed, match=r"instance srv wrote no .profraw"):
        train_workload(tmp_path, workload_file(tmp_path, phases), demo_release, profraw=True)


def test_every_phase_kind_and_expectation_passes(tmp_path: Path, demo_release: Path) -> None:
    phases = """
[[instance.phase]]
name = "h2-tls"
kind = "http"
scheme = "https"
paths = ["/page/a", "/page/b"]
requests = 300
streams = 8

[[instance.phase]]
name = "post-blocked"
kind = "http"
protocol = "h1"
method = "POST"
body = "{bodies}/attack.txt"
path = "/api/login"
requests = 40
expect = "403"

[[instance.phase]]
name = "dead"
kind = "http"
path = "/api/x"
requests = 30
expect = "502"
upstream = "down"

[[instance.phase]]
name = "after-dead"
kind = "http"
path = "/api/x"
requests = 30

[[instance.phase]]
name = "tls"
kind = "handshakes"
handshakes = 60
batch = 25
protocol = "h2"
"""
    report = train_workload(tmp_path, workload_file(tmp_path, phases), demo_release)
    status = {p["name"]: p["status"] for p in report.phases}
    assert status["h2-tls"]["2xx"] == 300
    assert status["post-blocked"]["4xx"] == 40
    assert status["dead"]["5xx"] == 30
    assert status["after-dead"]["2xx"] == 30  # the upstream is back
    assert status["tls"]["2xx"] == 60
    assert report.requests == 300 + 40 + 30 + 30 + 60


def test_exact_codes_are_counted_per_run(tmp_path: Path, demo_release: Path) -> None:
    """h2load appends to its --log-file: a second run in the same work dir must not count the first's codes."""
    phases = """
[[instance.phase]]
name = "blocked"
kind = "http"
path = "/api/a?q=%3Cscript%3E"
requests = 30
expect = "403"

[[instance.phase]]
name = "too-large"
kind = "http"
method = "POST"
body = "{bodies}/large-1m.bin"
path = "/api/upload"
requests = 30
connections = 10
one_per_connection = true
expect = "413"
"""
    workload = workload_file(tmp_path, phases)
    for _ in range(2):
        report = train_workload(tmp_path, workload, demo_release)
        assert [p["status"]["4xx"] for p in report.phases] == [30, 30]


@pytest.mark.refuses("mean-body-size-out-min-mean-body")
def test_mean_body_of_the_demo_servers_files_over_h2_and_h1(tmp_path: Path, demo_release: Path) -> None:
    """h2load's traffic data is the bodies' bytes over HTTP/2 (TLS) and HTTP/1.1 alike: /static/index.html is
    5,120 bytes, /static/style.css 1,800 (recipes/web/docroot.py); the demo server does not compress. 96 requests
    over 4 connections: each cycles through the two paths 12 times."""
    phases = """
[[instance.phase]]
name = "h2-tls"
kind = "http"
scheme = "https"
paths = ["/static/index.html", "/static/style.css"]
requests = 96
streams = 4
min_mean_body = 3460
max_mean_body = 3460

[[instance.phase]]
name = "h1"
kind = "http"
protocol = "h1"
path = "/static/index.html"
requests = 50
min_mean_body = 5120
max_mean_body = 5120
"""
    report = train_workload(tmp_path, workload_file(tmp_path, phases), demo_release)
    assert [p["detail"].rsplit(", ", 1)[1] for p in report.phases] == ["mean body 3,460 B", "mean body 5,120 B"]
    compressed = phases.replace("max_mean_body = 5120", "max_mean_body = 2000").replace("min_mean_body = 5120\n", "")
    with pytest.raises(
        TrainingFailed,
        match=r"^phase srv/h1: mean body 5,120 bytes \(256,000 bytes of data over 50 responses\), "
        r"expected at most 2,000 \(max_mean_body\)",
    ):
        train_workload(tmp_path, workload_file(tmp_path, compressed), demo_release)


def test_scale_applies_to_every_count(tmp_path: Path, demo_release: Path) -> None:
    phases = """
[[instance.phase]]
name = "a"
kind = "http"
path = "/health"
requests = 1000

[[instance.phase]]
name = "b"
kind = "handshakes"
handshakes = 400
"""
    report = train_workload(tmp_path, workload_file(tmp_path, phases), demo_release, scale=0.01)
    assert [p["requests"] for p in report.phases] == [10, 4]


def test_upstream_backend_serves_and_restarts(tmp_path: Path) -> None:
    (port,) = net.free_ports(1)
    backend = UpstreamBackend(port, tmp_path / "upstream.log", clean_env())
    backend.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for path, status, cache, size in [
            ("/page/x", 200, "public, max-age=300", None),
            ("/api/x", 200, "no-store", None),
            ("/img/y", 200, "public, max-age=300", 200 * 1024),
            ("/large/z", 200, "no-store", 1024 * 1024),
            ("/error/503", 503, "no-store", None),
            ("/nothing", 404, "no-store", None),
        ]:
            conn.request("GET", path)  # one keep-alive connection for all
            response = conn.getresponse()
            body = response.read()
            assert (response.status, response.getheader("cache-control")) == (status, cache), path
            assert size is None or len(body) == size
        conn.request("POST", "/api/echo", body=b"x" * 777)
        assert b'"body_length":777' in conn.getresponse().read()
        conn.close()
        with backend.down():
            assert net.ask(f"http://127.0.0.1:{port}/api/x").status is None
        assert net.ask(f"http://127.0.0.1:{port}/api/x").status == 200
    finally:
        backend.stop()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /api/x HTTP/1.1\r\ncontent-length: abc\r\n\r\n",
        b"POST /api/x HTTP/1.1\r\ncontent-length: -5\r\n\r\nxxxxx",
        b"POST /api/x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n",
        b"GET /api/x\r\n\r\n",
    ],
    ids=["length-not-a-number", "length-negative", "chunk-size-not-hex", "request-line-of-two-words"],
)
def test_upstream_backend_answers_a_request_it_cannot_read_400(tmp_path: Path, request_bytes: bytes) -> None:
    """A server under training that sends the upstream a malformed request gets a 400 and a closed connection, as
    from any HTTP server; the upstream's log holds no traceback, and it goes on serving."""
    (port,) = net.free_ports(1)
    log = tmp_path / "upstream.log"
    backend = UpstreamBackend(port, log, clean_env())
    backend.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request_bytes)
            answer = b""
            while chunk := sock.recv(65536):  # until the upstream closes the connection
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:80]
        assert b"connection: close" in answer
        assert net.ask(f"http://127.0.0.1:{port}/api/x").status == 200
    finally:
        backend.stop()
    assert "Traceback" not in log.read_text()


def test_certificates_are_ecdsa_and_rsa(tmp_path: Path) -> None:
    values = make_certs(["ecdsa", "rsa"], tmp_path, env=clean_env(), logs=tmp_path / "logs")
    ecdsa = subprocess.run(
        ["openssl", "x509", "-noout", "-text", "-in", values["ecdsa_cert"]], capture_output=True, text=True, check=True
    )
    rsa = subprocess.run(
        ["openssl", "x509", "-noout", "-text", "-in", values["rsa_cert"]], capture_output=True, text=True, check=True
    )
    assert "prime256v1" in ecdsa.stdout
    assert "rsaEncryption" in rsa.stdout
    assert "IP Address:127.0.0.1" in rsa.stdout
    assert Path(values["rsa_key"]).stat().st_mode & 0o077 == 0


@pytest.mark.refuses("unknown-value-kind-mode-output-phases-from", "file-does-not-exist")
def test_bad_workload_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    bad = workload_file(tmp_path, '\n[[instance.phase]]\nname = "x"\nkind = "htpp"\npath = "/"\nrequests = 1\n')
    env = clean_env({"PGO_OUT": str(tmp_path / "work"), "PGO_WORKLOAD": str(bad)})
    line = assert_refused(run_nox("pgo", env, timeout=300), "kind: unknown value 'htpp'", "did you mean 'http'")
    assert str(bad) in line
    assert not (tmp_path / "work" / "generate-target").exists()
    missing = workload_file(
        tmp_path,
        '\n[[instance.phase]]\nname = "x"\nkind = "http"\nmethod = "POST"\n'
        'body = "{workload_dir}/no-such-body.bin"\npath = "/"\nrequests = 1\n',
    )
    assert_refused(run_nox("pgo", env, timeout=300), "no file", "no-such-body.bin")
    with pytest.raises(ConfigError, match=r"no-such-body\.bin"):
        load_workload(missing)
