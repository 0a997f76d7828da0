"""Loopback plumbing of the training: free ports, readiness polling, and what to print when a phase hangs."""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import urlsplit

from recipes.runner import tail

HOST = "127.0.0.1"


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


def probe(url: str, timeout: float = 2.0) -> int | None:
    """The status of ``GET url`` (TLS unverified: the training's certificates are self-signed), None when
    nothing answers."""
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
    try:
        conn.request("GET", parts.path or "/")
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return status


def wait_ready(url: str, limit: float, alive: Callable[[], bool], interval: float = 0.05) -> float | None:
    """Poll ``url`` until it answers 200; the seconds it took, or None when ``limit`` ran out or ``alive()``
    turned false first."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if not alive():
            return None
        if probe(url, timeout=min(2.0, limit)) == 200:
            return time.monotonic() - start
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)
    return None


def socket_dump(ports: Iterable[int]) -> str:
    """``ss -tinm`` of every TCP socket from or to ``ports`` (both ends of each loopback connection)."""
    wanted = sorted(set(ports))
    if not wanted:
        return "(no ports)"
    ports_filter = " or ".join(f"sport = :{p} or dport = :{p}" for p in wanted)
    argv = ["ss", "-tinm", f"( {ports_filter} )"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(ss failed: {exc})"
    return proc.stdout.strip() or f"(no sockets on ports {', '.join(map(str, wanted))})"


def parse_task_stat(text: str) -> tuple[str, str]:
    """(thread name, state letter) of a ``/proc/<pid>/task/<tid>/stat`` line: ``tid (name) S …``."""
    open_paren = text.index("(")
    close_paren = text.rindex(")")
    return text[open_paren + 1 : close_paren], text[close_paren + 2 : close_paren + 3]


def thread_states(pid: int) -> str:
    """One line per thread of ``pid``: tid, name, state (R running, S sleeping, D disk wait, …)."""
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
        lines.append(f"  {task.name:>8} {state} {name}")
    return "\n".join(lines) or "(no threads)"


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return tail(text, lines) or "(empty log)"


def hang_dump(ports: Iterable[int], pid: int | None, log: Path | None) -> str:
    """Everything worth seeing when a phase runs out of time: both ends' sockets, the server's threads and
    the tail of its log."""
    parts = [f"--- sockets (ss -tinm) on ports {', '.join(map(str, sorted(set(ports))))}:", socket_dump(ports)]
    if pid is not None:
        parts += [f"--- threads of the server (pid {pid}):", thread_states(pid)]
    if log is not None:
        parts += [f"--- tail of {log}:", log_tail(log)]
    return "\n".join(parts)
