"""The one command runner: explicit environment, the command printed shell-quoted, output to a log."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CommandFailed, ToolchainError

TAIL_LINES = 25


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
    try:
        with log.open("w", encoding="utf-8") as out:
            out.write(f"$ {quote(argv)}\n")
            out.flush()
            proc = subprocess.run(
                argv,
                env=dict(env),
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
    except FileNotFoundError as exc:
        raise ToolchainError(f"{argv[0]}: command not found", "install it or put it on PATH") from exc
    done = Completed(argv, proc.returncode, log)
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
