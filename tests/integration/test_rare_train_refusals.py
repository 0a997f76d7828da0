"""Refusals of the HTTP training that a normal run never meets, made to happen against a real server (a plain
release build of tests/fixtures/bare-server), the real h2load and the real upstream backend on loopback.

The misbehaviour is the world's, not a stand-in's: the server started with SIGTERM ignored (a shell's
``trap '' TERM`` then ``exec``: the disposition survives the exec), h2load killed by a signal in the middle of
its run, the upstream backend's port taken by another process while the backend is down for a phase.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipes.errors import TrainingFailed
from recipes.train.resources import UpstreamBackend
from recipes.web import net
from recipes.workload import load_workload
from tests.conftest import clean_env, train_workload

pytestmark = [pytest.mark.slow, pytest.mark.server]


def _workload(tmp_path: Path, phases: str, *, instance: str = "", setup: str = "") -> Path:
    path = tmp_path / "workload.toml"
    path.write_text(
        f'[workload]\ndescription = "test"\n{setup}\n[[instance]]\nname = "srv"\nmode = "server"\n'
        f'args = ["{{http_port}}"]\n{instance}\n{phases}'
    )
    return path


def _children(name: str) -> list[int]:
    """The pids of this process's children called ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if comm == name and int(rest[1]) == os.getpid():
            found.append(int(entry.name))
    return found


def _pids_on(port: int) -> str:
    return subprocess.run(["ss", "-Htlnp", f"sport = :{port}"], capture_output=True, text=True, check=False).stdout


@pytest.mark.refuses("server-does-not-exit-after-sigterm")
def test_server_that_does_not_exit_after_sigterm_fails_and_is_killed(tmp_path: Path, bare_server: Path) -> None:
    stubborn = tmp_path / "stubborn-server"
    stubborn.write_text(f"#!/bin/sh\ntrap '' TERM\nexec {bare_server} \"$@\"\n")
    stubborn.chmod(0o755)
    phases = '[[instance.phase]]\nname = "health"\nkind = "http"\nprotocol = "h1"\npath = "/health"\nrequests = 20\n'
    started = time.monotonic()
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, _workload(tmp_path, phases, instance="stop_timeout = 1"), stubborn)
    assert caught.value.line().startswith("instance srv: the server did not exit within 1 s of SIGTERM")
    assert "it must stop gracefully so its profile gets written" in caught.value.line()
    assert "\n" not in caught.value.line()
    assert time.monotonic() - started < 20
    assert not _children("bare-server")  # killed and reaped, not left behind


@pytest.fixture
def h2load_killer() -> Iterator[list[int]]:
    """Kills (SIGKILL) the first h2load this process starts, once it has run for half a second; the pids killed."""
    killed: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set() and not killed:
            for pid in _children("h2load"):
                time.sleep(0.5)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    yield killed
    stop.set()
    thread.join(timeout=5)


@pytest.mark.refuses("h2load-exits-without-summary")
def test_h2load_killed_mid_run_fails_the_phase_without_a_summary(
    tmp_path: Path, bare_server: Path, h2load_killer: list[int]
) -> None:
    phases = (
        '[[instance.phase]]\nname = "long"\nkind = "http"\nprotocol = "h1"\npath = "/square/7"\n'
        "requests = 50000000\nconnections = 1\n"
    )
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, _workload(tmp_path, phases, instance="exit_on_sigterm = true"), bare_server)
    assert h2load_killer, "h2load was not killed: the phase ended first"
    line = caught.value.line()
    assert line.startswith("phase srv/long: h2load exited with code -9 without a summary: "), line
    assert "train-srv-long.log" in line and "\n" not in line


@pytest.mark.refuses("upstream-backend-exits-start")
@pytest.mark.parametrize(
    ("requests", "timeout", "said"),
    [
        # the phase passes, then the backend cannot start again
        (100000, 60, "the upstream backend exited with code 1 at start"),
        # the phase runs out of time: its error is the one told, and the backend is not started again
        (10**8, 1, "phase srv/dead-upstream: "),
    ],
    ids=["restart-fails", "phase-fails-first"],
)
def test_upstream_backend_whose_port_is_taken_while_it_is_down_fails_to_start_again(
    tmp_path: Path, bare_server: Path, requests: int, timeout: int, said: str
) -> None:
    phases = (
        '[[instance.phase]]\nname = "dead-upstream"\nkind = "http"\nprotocol = "h1"\npath = "/square/7"\n'
        f'requests = {requests}\nconnections = 1\nupstream = "down"\ntimeout = {timeout}\n'
    )
    log = tmp_path / "work" / "logs" / "upstream.log"
    taken: list[socket.socket] = []
    stop = threading.Event()

    def take_the_port() -> None:
        """Once the backend has said its port and then let go of it (stopped for the phase), listen on it."""
        port = None
        while not stop.is_set() and port is None:
            found = re.search(r"listening (\d+)", log.read_text()) if log.exists() else None
            port = int(found.group(1)) if found else None
            time.sleep(0.02)
        while not stop.is_set() and port is not None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                time.sleep(0.02)
                continue
            sock.listen()
            taken.append(sock)
            return

    thread = threading.Thread(target=take_the_port, daemon=True)
    thread.start()
    try:
        with pytest.raises(TrainingFailed) as caught:
            train_workload(
                tmp_path,
                _workload(tmp_path, phases, instance="exit_on_sigterm = true", setup="[setup]\nupstream = true\n"),
                bare_server,
            )
    finally:
        stop.set()
        thread.join(timeout=5)
        for sock in taken:
            sock.close()
    assert taken, "the upstream's port was never free to take"
    line = caught.value.line()
    assert line.startswith(said), line
    if "upstream backend" in said:
        assert "address already in use" in line.lower()


@pytest.mark.refuses("phase-file-gone-when-runs")
def test_a_body_file_gone_when_its_phase_runs_fails_the_phase(tmp_path: Path, bare_server: Path) -> None:
    body = tmp_path / "body.txt"
    body.write_text("a-b-c")
    phases = (
        '[[instance.phase]]\nname = "post"\nkind = "http"\nprotocol = "h1"\nmethod = "POST"\n'
        f'path = "/words/a-b"\nbody = "{body}"\nrequests = 10\n'
    )
    workload = load_workload(_workload(tmp_path, phases, instance="exit_on_sigterm = true"))  # the file is there
    body.unlink()
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, workload, bare_server)
    assert caught.value.line() == f"phase srv/post: no file {body} (fix the path in the workload)"
    assert not (tmp_path / "work" / "logs" / "train-srv-post.log").exists()  # no h2load run
    assert not _children("bare-server")


@pytest.mark.refuses("h2load-not-found-when-phase-runs")
def test_h2load_gone_from_path_when_the_phase_runs_fails_the_phase(
    tmp_path: Path, bare_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    phases = '[[instance.phase]]\nname = "health"\nkind = "http"\nprotocol = "h1"\npath = "/health"\nrequests = 10\n'
    workload = _workload(tmp_path, phases)  # (no exit_on_sigterm: its shim needs cc from PATH)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # h2load is looked up on this process's PATH when the phase starts
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, workload, bare_server)
    assert caught.value.line() == (
        "h2load: command not found (install nghttp2-client (apt-get install nghttp2-client))"
    )
    assert not _children("bare-server")


@pytest.mark.refuses("batch-one-request-connections-fails")
def test_a_batch_of_one_request_connections_that_fails_fails_the_phase(tmp_path: Path, bare_server: Path) -> None:
    """``one_per_connection``: the requests go as batches of new connections, each checked; these get 404s."""
    phases = (
        '[[instance.phase]]\nname = "fresh"\nkind = "http"\nprotocol = "h1"\npath = "/missing"\nexpect = "ok"\n'
        "requests = 40\none_per_connection = true\n"
    )
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, _workload(tmp_path, phases, instance="exit_on_sigterm = true"), bare_server)
    line = caught.value.line()
    assert line.startswith("phase srv/fresh: batch of "), line
    assert "connections after 0 requests: " in line and "train-srv-fresh.log" in line


@pytest.mark.refuses("batch-one-request-connections-fails")
def test_one_request_connections_ask_for_every_path(tmp_path: Path, bare_server: Path) -> None:
    """A connection with one request asks h2load only for the first path: the batches take turns at which path is
    first, so the second path (a 404 here) is asked for too, and fails the phase that expects ok."""
    phases = (
        '[[instance.phase]]\nname = "fresh"\nkind = "http"\nprotocol = "h1"\npaths = ["/square/3", "/missing"]\n'
        'expect = "ok"\nrequests = 40\nconnections = 4\none_per_connection = true\n'
    )
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, _workload(tmp_path, phases, instance="exit_on_sigterm = true"), bare_server)
    assert caught.value.line().startswith("phase srv/fresh: batch of 4 connections after 4 requests: ")


def test_paths_that_requests_per_connection_cannot_reach_are_warned_of(
    tmp_path: Path, bare_server: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    phases = (
        '[[instance.phase]]\nname = "wide"\nkind = "http"\nprotocol = "h1"\n'
        'paths = ["/square/1", "/square/2", "/square/3"]\nrequests = 8\nconnections = 4\n'
    )
    train_workload(tmp_path, _workload(tmp_path, phases, instance="exit_on_sigterm = true"), bare_server)
    assert (
        "warning: phase srv/wide: 8 requests over 4 connections reach only the first 2 of its 3 paths"
        in capfd.readouterr().err
    )


@pytest.mark.refuses("upstream-backend-does-not-listen-time")
def test_upstream_backend_that_does_not_listen_in_time_is_stopped_and_refused(tmp_path: Path) -> None:
    """A backend slow to start (here: a ``sitecustomize`` that sleeps before Python runs the backend) is not
    waited for past its limit, and is not left running."""
    slow = tmp_path / "slow-start"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text("import time\n\ntime.sleep(60)\n")
    (port,) = net.free_ports(1)
    backend = UpstreamBackend(port, tmp_path / "upstream.log", clean_env({"PYTHONPATH": str(slow)}))
    started = time.monotonic()
    with pytest.raises(TrainingFailed) as caught:
        backend.start(limit=2.0)
    assert time.monotonic() - started < 20
    line = caught.value.line()
    assert line == f"the upstream backend did not listen on port {port} in 2 s (see {tmp_path / 'upstream.log'})"
    assert backend.child is None
    assert not _children("python3") and not _children(Path(sys.executable).name)
