"""The training's plumbing: /proc task stat lines, deterministic files, readiness polling (real servers
on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from recipes.web import docroot, net
from tests.conftest import clean_env

# real lines of /proc/<pid>/task/<tid>/stat (the second: a process whose name holds spaces and parentheses)
TASK_STAT = [
    ("28913 (python3) S 28870 28870 6538 0 -1 4194368 4 6555 0 0 0", ("python3", "S")),
    ("13669 (srv (x) 1) R 13665 13665 7335 0 -1 4194304 3130 6560 7 0 3 2 3 1 20 0 3 0", ("srv (x) 1", "R")),
    ("7 (tokio-runtime-w) D 1 1 1 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 5 0", ("tokio-runtime-w", "D")),
]


@pytest.mark.parametrize(("line", "parsed"), TASK_STAT)
def test_parse_task_stat(line: str, parsed: tuple[str, str]) -> None:
    assert net.parse_task_stat(line) == parsed


def test_free_ports_are_distinct() -> None:
    ports = net.free_ports(5)
    assert len(set(ports)) == 5
    assert all(1024 <= p <= 65535 for p in ports)


def test_thread_states_of_this_process_and_of_none() -> None:
    own_name = Path(f"/proc/{os.getpid()}/comm").read_text().strip()  # python3, or pytest when run as a script
    states = net.thread_states(os.getpid())
    assert f" R {own_name}" in states  # this thread is running while it reads its own state
    assert "is gone" in net.thread_states(2**22 + 12345)


def test_thread_states_say_where_a_sleeping_thread_waits() -> None:
    """``/proc/<pid>/task/<tid>/wchan``: a child sleeping in nanosleep waits in the kernel's hrtimer_nanosleep
    (where the kernel hides it, ``0``, nothing is added)."""
    with subprocess.Popen(["sleep", "30"], env=clean_env()) as child:
        try:
            deadline = time.monotonic() + 10
            while net.parse_task_stat(Path(f"/proc/{child.pid}/stat").read_text())[1] != "S":
                assert time.monotonic() < deadline
                time.sleep(0.01)
            states = net.thread_states(child.pid)
            assert f"{child.pid:>8} S sleep" in states
            if Path(f"/proc/{child.pid}/wchan").read_text().strip() not in {"", "0"}:
                assert "  in hrtimer_nanosleep" in states or "  in do_nanosleep" in states, states
        finally:
            child.kill()


def test_docroot_is_deterministic(tmp_path: Path) -> None:
    first = docroot.make_docroot(tmp_path / "a")
    second = docroot.make_docroot(tmp_path / "b")
    for name, size in docroot.DOCROOT_FILES.items():
        one, two = Path(first["docroot"]) / name, Path(second["docroot"]) / name
        assert one.stat().st_size == size
        assert one.read_bytes() == two.read_bytes()
    attack = (Path(first["bodies"]) / "attack.txt").read_text()
    assert "<script>" in attack
    assert "union select" in attack
    digest = hashlib.sha256((Path(first["docroot"]) / "index.html").read_bytes()).hexdigest()
    assert digest == hashlib.sha256(docroot.content("index.html", 5 * 1024)).hexdigest()


def test_profiles_readme_lists_the_docroot_files() -> None:
    """profiles/README.md's tables of what ``[setup] docroot = true`` makes are the files and sizes made."""
    text = (Path(__file__).resolve().parents[2] / "profiles" / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## `[setup] docroot`\n", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([\w./-]+)` \| ([\d,]+) \|", section, re.MULTILINE))
    listed = {name: int(size.replace(",", "")) for name, size in rows.items()}
    made = {**docroot.DOCROOT_FILES, **{name: size for name, (size, _) in docroot.BODY_FILES.items()}}
    assert listed == made


class _Answers(BaseHTTPRequestHandler):
    """Answers every GET with the server's ``status`` (``None``: closes the connection without a word)."""

    def do_GET(self) -> None:
        status = self.server.status  # type: ignore[attr-defined]
        if status is None:
            self.close_connection = True
            return
        body = b"x"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[ThreadingHTTPServer]:
    """A real HTTP server on 127.0.0.1 in a thread; set ``.status`` to what it answers."""
    server = ThreadingHTTPServer((net.HOST, 0), _Answers)
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _url(server: ThreadingHTTPServer, path: str = "/health") -> str:
    return f"http://{net.HOST}:{server.server_address[1]}{path}"


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port bound but never listening: connections to it are refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((net.HOST, 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_ask_says_what_answered(answering: ThreadingHTTPServer, refusing_port: int) -> None:
    assert net.ask(_url(answering)).describe() == "200 OK"
    answering.status = 404  # type: ignore[attr-defined]
    assert net.ask(_url(answering)) == net.Answer(404, "Not Found")
    assert net.ask(_url(answering)).status == 404
    answering.status = None  # type: ignore[attr-defined]
    assert net.ask(_url(answering)).describe() == "connection closed without a response"
    refused = net.ask(f"http://{net.HOST}:{refusing_port}/health")
    assert (refused.status, refused.describe()) == (None, "connection refused")


def wait_ready(url: str, limit: float, alive: Callable[[], bool]) -> float | None:
    """Poll ``url`` until it answers 200; the seconds it took, or None when it did not (see :func:`poll_ready`)."""
    result = net.poll_ready(url, limit, alive)
    return result.seconds if result.ready else None


def test_ready_when_it_answers_200(answering: ThreadingHTTPServer) -> None:
    result = net.poll_ready(_url(answering), 10, lambda: True)
    assert result.ready
    assert result.last == net.Answer(200, "OK")
    took = wait_ready(_url(answering), 10, lambda: True)
    assert took is not None and took < 10


def test_a_steady_404_fails_fast_and_says_so(answering: ThreadingHTTPServer) -> None:
    answering.status = 404  # type: ignore[attr-defined]
    started = time.monotonic()
    result = net.poll_ready(_url(answering), 60, lambda: True)
    took = time.monotonic() - started
    assert (result.ready, result.steady) == (False, True)
    assert result.last is not None and result.last.describe() == "404 Not Found"
    assert net.STEADY_SECONDS <= took < net.STEADY_SECONDS + 3  # not the 60 s limit


def test_503_is_waited_for_until_the_limit(answering: ThreadingHTTPServer) -> None:
    answering.status = 503  # type: ignore[attr-defined]
    result = net.poll_ready(_url(answering), 1.0, lambda: True, steady_seconds=0.2)
    assert (result.ready, result.steady) == (False, False)
    assert result.seconds >= 1.0
    assert result.last is not None and result.last.status == 503


def test_a_server_that_becomes_ready_is_not_failed_by_its_early_404s(answering: ThreadingHTTPServer) -> None:
    answering.status = 404  # type: ignore[attr-defined]
    timer = threading.Timer(1.0, lambda: setattr(answering, "status", 200))
    timer.start()
    try:
        result = net.poll_ready(_url(answering), 30, lambda: True)
    finally:
        timer.cancel()
    assert result.ready
    assert 1.0 <= result.seconds < net.STEADY_SECONDS


def test_a_refused_port_is_waited_for_and_reported(refusing_port: int) -> None:
    result = net.poll_ready(f"http://{net.HOST}:{refusing_port}/health", 1.0, lambda: True, steady_seconds=0.2)
    assert (result.ready, result.steady) == (False, False)
    assert result.seconds >= 1.0
    assert result.last is not None and result.last.describe() == "connection refused"


def test_a_dead_server_stops_the_polling(refusing_port: int) -> None:
    result = net.poll_ready(f"http://{net.HOST}:{refusing_port}/health", 60, lambda: False)
    assert not result.ready
    assert result.seconds < 1


def test_readiness_problem_says_what_the_url_answered_and_for_how_long() -> None:
    answer = net.Answer(status=404, reason="Not Found")
    steady = net.Readiness(ready=False, seconds=3.14, last=answer, steady=True)
    assert steady.problem("http://h/ready", 60) == "answered http://h/ready with 404 Not Found for 3.1 s, expected 200"
    waited = net.Readiness(ready=False, seconds=60.2, last=None)
    said = waited.problem("http://h/ready", 60)
    assert said == "did not answer http://h/ready with 200 within 60 s (last: not asked)"


def test_the_socket_dump_runs_the_ss_of_the_env_given(tmp_path: Path) -> None:
    """ss found on the PATH of the instance's environment, not this process's; none there is said in the dump."""
    fake = tmp_path / "ss"
    fake.write_text('#!/bin/sh\necho "the instance\'s ss: $*"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    assert net.socket_dump([8080], env) == "the instance's ss: -tinm ( sport = :8080 or dport = :8080 )"
    assert net.socket_dump([8080], {"PATH": str(tmp_path / "none")}).startswith("(ss failed: [Errno 2] ")
    assert net.socket_dump([], env) == "(no ports)"
    dump = net.hang_dump([8080], None, None, env)
    assert dump == "--- sockets (ss -tinm) on ports 8080:\nthe instance's ss: -tinm ( sport = :8080 or dport = :8080 )"
