"""Loopback plumbing of the training: free ports, readiness polling, and what to print when a phase hangs."""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from recipes.runner import TimedOut, log_tail, query

HOST = "127.0.0.1"
#: bytes of a probed response's body read (and dropped) before the connection is closed
READ_LIMIT = 64 * 1024


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that were free a moment ago (all bound at once, then released)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass(frozen=True)
class Answer:
    """What one ``GET`` of a URL got: a status, or why there was none."""

    status: int | None
    reason: str = ""
    error: str | None = None

    def describe(self) -> str:
        """``404 Not Found``, or the error: ``connection refused``."""
        if self.status is not None:
            return f"{self.status} {self.reason}".strip()
        return self.error or "no answer"


def _describe_error(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, http.client.RemoteDisconnected):  # before ConnectionResetError, its base
        return "connection closed without a response"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, TimeoutError):
        return f"nothing within {timeout:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, http.client.BadStatusLine):
        return f"not an HTTP response: {str(exc)[:60]!r}"
    text = " ".join(str(exc).split())[:120]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def ask(url: str, timeout: float = 2.0) -> Answer:
    """``GET url`` (TLS unverified: the training's certificates are self-signed): its status, or the error."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(parts.hostname or HOST, port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname or HOST, port, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read(READ_LIMIT)  # a socket closed with unread data is reset: the server would log an error
        return Answer(response.status, response.reason)
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, error=_describe_error(exc, timeout))
    finally:
        conn.close()


#: a status other than 200 answered this long (and at least STEADY_PROBES times in a row) is the server's
#: final word: it is up, and will not change its mind
STEADY_SECONDS = 3.0
STEADY_PROBES = 5
#: statuses that say "not yet": waited for until the limit
NOT_YET = frozenset({503})


@dataclass(frozen=True)
class Readiness:
    """How polling a readiness URL ended: ready after ``seconds``, or not, with what the URL last answered."""

    ready: bool
    seconds: float
    last: Answer | None
    #: the server answered ``last.status`` steadily: polling stopped before the limit
    steady: bool = False

    def problem(self, url: str, limit: float) -> str:
        """What went wrong, for a message about a server that did not get ready (while it ran)."""
        last = self.last.describe() if self.last is not None else "not asked"
        if self.steady:
            return f"answered {url} with {last} for {self.seconds:.1f} s, expected 200"
        return f"did not answer {url} with 200 within {limit:g} s (last: {last})"


def poll_ready(url: str, limit: float, alive: Callable[[], bool], steady_seconds: float = STEADY_SECONDS) -> Readiness:
    """Poll ``url`` until it answers 200, ``limit`` runs out, ``alive()`` turns false, or the URL answers the
    same other status (not 503) for ``steady_seconds``."""
    interval = 0.05
    start = time.monotonic()
    last: Answer | None = None
    same_since, same_count = start, 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= limit or not alive():
            return Readiness(False, elapsed, last)
        answer = ask(url, timeout=max(0.1, min(2.0, limit - elapsed)))
        now = time.monotonic()
        if answer.status == 200:
            return Readiness(True, now - start, answer)
        if last is None or answer.status is None or answer.status != last.status:
            same_since, same_count = now, 0
        same_count += 1
        last = answer
        if (
            answer.status is not None
            and answer.status not in NOT_YET
            and same_count >= STEADY_PROBES
            and now - same_since >= steady_seconds
        ):
            return Readiness(False, now - start, last, steady=True)
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def socket_dump(ports: Iterable[int], env: Mapping[str, str]) -> str:
    """``ss -tinm`` (run with ``env``) of every TCP socket from or to ``ports`` (both ends of each loopback
    connection)."""
    wanted = sorted(set(ports))
    if not wanted:
        return "(no ports)"
    ports_filter = " or ".join(f"sport = :{p} or dport = :{p}" for p in wanted)
    argv = ["ss", "-tinm", f"( {ports_filter} )"]
    try:
        proc = query(argv, env=env, timeout=10)
    except (OSError, TimedOut) as exc:
        return f"(ss failed: {exc})"
    return proc.stdout.strip() or f"(no sockets on ports {', '.join(map(str, wanted))})"


def parse_task_stat(text: str) -> tuple[str, str]:
    """(thread name, state letter) of a ``/proc/<pid>/task/<tid>/stat`` line: ``tid (name) S …``."""
    open_paren = text.index("(")
    close_paren = text.rindex(")")
    return text[open_paren + 1 : close_paren], text[close_paren + 2 : close_paren + 3]


def thread_states(pid: int) -> str:
    """One line per thread of ``pid``: tid, state (R running, S sleeping, D disk wait, …), name, and where a
    sleeping one waits in the kernel (``/proc/…/wchan``: ``do_epoll_wait``, ``futex_wait_queue``; under qemu-user
    the emulated threads' own waits, as each is a thread of qemu's)."""
    lines = []
    try:
        tasks = sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda p: int(p.name))
    except OSError:
        return f"(process {pid} is gone)"
    for task in tasks:
        try:
            name, state = parse_task_stat((task / "stat").read_text())
        except (OSError, ValueError):
            continue
        try:
            wchan = (task / "wchan").read_text().strip()
        except OSError:
            wchan = ""
        lines.append(f"  {task.name:>8} {state} {name}" + (f"  in {wchan}" if wchan not in {"", "0"} else ""))
    return "\n".join(lines) or "(no threads)"


def hang_dump(ports: Iterable[int], pid: int | None, log: Path | None, env: Mapping[str, str]) -> str:
    """Everything worth seeing when a phase runs out of time: both ends' sockets (``ss`` run with ``env``), the
    server's threads and the tail of its log."""
    parts = [f"--- sockets (ss -tinm) on ports {', '.join(map(str, sorted(set(ports))))}:", socket_dump(ports, env)]
    if pid is not None:
        parts += [f"--- threads of the server (pid {pid}):", thread_states(pid)]
    if log is not None:
        parts += [f"--- tail of {log}:", log_tail(log)]
    return "\n".join(parts)
