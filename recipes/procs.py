"""The one process manager for the servers the pipeline runs: start a child with its output in a log, wait
until it answers, signal it, reap it, describe its exit, show the tail of its log.

The training's server instances (``recipes/train/server.py``), the bench's servers
(``recipes/bench/servers.py``), the baseline-CPU check's server under emulation (``recipes/cpu.py``) and the
training's upstream backend (``recipes/train/resources.py``) all run through :class:`Child`; each says in its own
words what a failure means for it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from recipes import net
from recipes.runner import log_tail


def describe_exit(returncode: int, *, numbered: bool = True) -> str:
    """How a child ended: ``exit code 3``; a signal as ``signal 9 (SIGKILL)``, or with ``numbered=False`` as
    ``killed by SIGILL (illegal instruction)``."""
    if returncode >= 0:
        return f"exit code {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "?" if numbered else f"signal {number}"
    if numbered:
        return f"signal {number} ({name})"
    return f"killed by {name}" + (" (illegal instruction)" if number == signal.SIGILL else "")


def piped(stream: IO[bytes] | None) -> IO[bytes]:
    """A child's standard stream that was asked for as a pipe (``subprocess.PIPE``); None there is a bug."""
    if stream is None:
        raise ValueError("the process was started without a pipe for this stream")
    return stream


@dataclass
class Child:
    """A started child process whose output goes to ``log`` (standard output too unless ``pipe_stdout``)."""

    argv: list[str]
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        cwd: Path | None = None,
        append: bool = False,
        pipe_stdout: bool = False,
    ) -> Child:
        """Start ``argv`` (standard input closed); its standard error, and its output unless ``pipe_stdout``,
        go to ``log`` (truncated, or appended to)."""
        with log.open("ab" if append else "wb") as out:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env),
                stdout=subprocess.PIPE if pipe_stdout else out,
                stderr=out if pipe_stdout else subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
            )
        return cls(list(argv), proc, log)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stdout(self) -> IO[bytes]:
        """Its standard output, when started with ``pipe_stdout``."""
        return piped(self.proc.stdout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status once it has ended (negative: the signal), else None."""
        return self.proc.poll()

    def wait_ready(self, url: str, limit: float) -> net.Readiness:
        """Poll ``url`` until it answers 200, while the child lives, for at most ``limit`` seconds."""
        return net.poll_ready(url, limit, self.alive)

    def wait_for(self, ready: Callable[[], bool], limit: float, interval: float = 0.05) -> bool:
        """Poll ``ready()`` while the child lives, for at most ``limit`` seconds: whether it came true."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            if ready():
                return True
            time.sleep(interval)
        return False

    def stop(self, limit: float, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Send ``sig`` (if it still runs) and reap it: its exit status, or None when it did not end within
        ``limit`` seconds (it is then still running: see :meth:`kill`)."""
        if self.alive():
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def stop_or_kill(self, limit: float, sig: signal.Signals = signal.SIGTERM) -> int:
        """:meth:`stop`, then SIGKILL when it did not end in time: the exit status (negative when killed)."""
        code = self.stop(limit, sig)
        return self.kill() if code is None else code

    def kill(self) -> int:
        """SIGKILL (if it still runs) and reap: the exit status."""
        if self.alive():
            self.proc.kill()
        return self.proc.wait()

    def tail(self, lines: int = 30, *, joined: str | None = None) -> str:
        return log_tail(self.log, lines, joined=joined)

    def close(self) -> None:
        """Never leave it behind: killed if still running, reaped, its pipe closed."""
        self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
