"""The one command runner: explicit environment, the command printed shell-quoted, output to a log."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CommandFailed, ToolchainError

TAIL_LINES = 25
HEARTBEAT_SECONDS = 20.0


@dataclass(frozen=True)
class Completed:
    """A finished command: its exit code and where its output went."""

    argv: tuple[str, ...]
    returncode: int
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def quote(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def say(message: str) -> None:
    """Progress for a person: one line on stderr, flushed."""
    print(f"pgo: {message}", file=sys.stderr, flush=True)


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def last_progress_line(log: Path) -> str:
    """The last line of a growing log that says what is going on (cargo's Compiling lines, say)."""
    try:
        with log.open("rb") as stream:
            stream.seek(max(0, log.stat().st_size - 8192))
            lines = stream.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no output yet)"
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("Running `"):
            return text[:160]
    return "(no output yet)"


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    cwd: Path | None = None,
    check: bool = True,
    what: str = "",
) -> Completed:
    """Run ``argv`` with exactly ``env``, stdout and stderr to ``log``.

    With ``check`` a non-zero exit raises :class:`CommandFailed` after printing the log's tail.
    """
    argv = tuple(str(a) for a in argv)
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"$ {quote(argv)}")
    say(f"  log: {log}")
    started = time.monotonic()
    try:
        with log.open("w", encoding="utf-8") as out:
            out.write(f"$ {quote(argv)}\n")
            out.flush()
            proc = subprocess.Popen(
                argv, env=dict(env), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
            try:
                while True:
                    try:
                        returncode = proc.wait(timeout=HEARTBEAT_SECONDS)
                        break
                    except subprocess.TimeoutExpired:
                        say(f"  … {time.monotonic() - started:.0f} s: {last_progress_line(log)}")
            except BaseException:
                proc.kill()
                proc.wait()
                raise
    except FileNotFoundError as exc:
        raise ToolchainError(f"{argv[0]}: command not found", "install it or put it on PATH") from exc
    done = Completed(argv, returncode, log)
    if check and proc.returncode != 0:
        print(tail(done.output()), file=sys.stderr, flush=True)
        name = what or Path(argv[0]).name
        raise CommandFailed(f"{name} failed with exit code {proc.returncode}", f"see {log}")
    return done


def capture(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a short query command and return its stdout; a failure is a :class:`CommandFailed`."""
    argv = tuple(str(a) for a in argv)
    try:
        proc = subprocess.run(
            argv,
            env=None if env is None else dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ToolchainError(f"{argv[0]}: command not found", "install it or put it on PATH") from exc
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CommandFailed(f"{quote(argv)} failed with exit code {proc.returncode}: {first}")
    return proc.stdout
