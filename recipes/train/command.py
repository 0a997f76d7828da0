"""``mode = "command"`` instances and ``kind = "command"`` phases: run the binary, check its exit code.

Each run is its own process group (``recipes.procs.start_group``): when a run ends (or its phase runs out of time)
whatever it left running, grandchildren and processes that left its group included, is killed. In the training a run
that left something running is refused (``LEFTOVER_HINT`` says why); replaying (verify), the phase says so in one
line. Its output goes to ``<logs>/train-<instance>-<phase>.log`` as the phase's
``output`` says: ``"tail"`` (default) keeps the last :data:`TAIL_BYTES` of it, ``"keep"`` all of it,
``"discard"`` none; a run that fails adds the last :data:`STDERR_TAIL_BYTES` of its stderr to the log, and its
last line to the refusal, whatever ``output`` says.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, ClassVar

from recipes import procs
from recipes.errors import ConfigError, TrainingFailed
from recipes.inputs import Table, fill, home_expanded, is_dir
from recipes.procs import piped
from recipes.runner import plural, quote, say
from recipes.workload.fields import parse_runs
from recipes.workload.registry import (
    InstanceMode,
    Phase,
    PhaseContext,
    PhaseResult,
    register_mode,
    register_phase,
)

#: how much of a phase's output ``output = "tail"`` keeps in its log
TAIL_BYTES = 64 * 1024
OUTPUT_CHOICES = ("tail", "keep", "discard")
#: how much of a failed run's stderr its phase's log ends with, whatever ``output`` says
STDERR_TAIL_BYTES = 4096
#: how much of its last line the refusal quotes
STDERR_LINE_CHARS = 200
#: a Rust program's panic: ``thread 'main' (5858) panicked at src/main.rs:9:5:`` (the thread's id since Rust
#: 1.90), its message on the lines after it
_PANIC = re.compile(r"^thread '[^']*'(?: \(\d+\))? panicked at (?P<place>.+?):?$")
#: what Rust's runtime writes after a panic's message: the backtrace, its frames, and the notes on RUST_BACKTRACE
_AFTER_PANIC = re.compile(r"^(stack backtrace:|note: |\d+: |at \S)")
#: the hint of a training run (or server) that left processes running
LEFTOVER_HINT = (
    "a process still running after the program exited could write a .profraw while the merge reads them, or be "
    "killed in the middle of writing one: make it wait for (or stop) what it starts before it exits"
)
#: ``{env:NAME}``: NAME as a shell variable name
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvironmentValues(str):
    """The value of the ``env`` placeholder: ``{env:NAME}`` is NAME in the phase's environment.

    A ``str`` (so it fits the placeholder values) whose format spec is the variable's name; an unset
    variable is a one-line refusal naming the phase and the variable.
    """

    environ: Mapping[str, str]
    where: str

    def __new__(cls, environ: Mapping[str, str], where: str) -> EnvironmentValues:
        value = super().__new__(cls, "")
        value.environ = environ
        value.where = where
        return value

    def __format__(self, spec: str) -> str:
        if not spec:
            raise ConfigError(f"{self.where}: {{env}} names no variable", "write {env:NAME}")
        if spec not in self.environ:
            raise ConfigError(
                f"{self.where}: {{env:{spec}}}: {spec} is not set in the environment",
                f"export {spec}=… before running nox, or give it in the instance's env table",
            )
        return self.environ[spec]


def filled(text: str, ctx: PhaseContext, where: str) -> str:
    """``text`` with the instance's placeholders and ``{env:NAME}`` filled."""
    return fill(text, {**ctx.values, "env": EnvironmentValues(ctx.env, where)})


def working_dir(text: str, ctx: PhaseContext, where: str) -> Path:
    """A ``cwd`` setting, filled; relative to the project. It must be an existing directory."""
    path = home_expanded(Path(filled(text, ctx, where)))
    if not path.is_absolute():
        path = Path(ctx.values["project"]) / path
    if not is_dir(path):
        raise ConfigError(f"{where}: cwd {path} is not a directory", "create it, or fix cwd in the workload")
    return path


@dataclass(frozen=True)
class CommandOptions:
    cwd: str | None = None


@register_mode
class CommandMode(InstanceMode[CommandOptions]):
    """The binary is run by each phase, as many times as it says: for command-line tools."""

    kind = "command"
    fills: ClassVar[frozenset[str]] = frozenset({"env"})

    def parse(self, table: Table) -> CommandOptions:
        return CommandOptions(cwd=table.string("cwd"))

    def placeholders(self) -> set[str]:
        return set()

    def texts(self, options: CommandOptions) -> list[str]:
        return [options.cwd] if options.cwd is not None else []

    def session(self, options: CommandOptions, ctx: PhaseContext) -> AbstractContextManager[PhaseContext]:
        """Nothing to start: the phases' context with the instance's working directory."""
        where = f"instance {ctx.instance}"
        cwd = working_dir(options.cwd, ctx, where) if options.cwd is not None else Path(ctx.values["project"])
        return nullcontext(replace(ctx, cwd=cwd))


class Output:
    """What a phase keeps of its runs' output: all, the last ``TAIL_BYTES``, or nothing (but its size); and,
    whatever the mode, the last :data:`STDERR_TAIL_BYTES` of the current run's stderr, which the log ends with when
    the run failed (:meth:`failed`) and some output was dropped: the reason a program gives is never in what was
    discarded. stdout and stderr are two pipes: in the log they interleave by the chunk, as on a terminal."""

    def __init__(self, mode: str, log: IO[bytes]) -> None:
        self.mode = mode
        self.log = log
        self.total = 0
        self.tail = bytearray()
        self.stderr = bytearray()  # the current run's
        self.failed_run: int | None = None
        self.lock = threading.Lock()
        #: a failed write of the log (a full disk): the output is drained and dropped from then on
        self.error: OSError | None = None

    def start_run(self) -> None:
        with self.lock:
            self.stderr.clear()

    def write_stderr(self, chunk: bytes) -> None:
        self.write(chunk)
        with self.lock:
            self.stderr += chunk
            if len(self.stderr) > 2 * STDERR_TAIL_BYTES:
                del self.stderr[:-STDERR_TAIL_BYTES]

    def failed(self, run: int) -> str:
        """Mark run ``run`` (1-based) failed: the log ends with its stderr's tail (its last
        :data:`STDERR_TAIL_BYTES`). Returns that tail's telling line (for the refusal), or ""."""
        self.failed_run = run
        with self.lock:
            tail = bytes(self.stderr[-STDERR_TAIL_BYTES:]).decode("utf-8", errors="replace")
        return telling_line(tail)[:STDERR_LINE_CHARS]

    def write(self, chunk: bytes) -> None:
        with self.lock:
            self.total += len(chunk)
            if self.mode == "keep" and self.error is None:
                try:
                    self.log.write(chunk)
                except OSError as exc:
                    self.error = exc
            elif self.mode == "tail":
                self.tail += chunk
                if len(self.tail) > 2 * TAIL_BYTES:
                    del self.tail[:-TAIL_BYTES]

    def close(self, runs: int) -> None:
        """Write what was kept, and say what was not (a failed write is kept in :attr:`error`)."""
        with self.lock:
            try:
                if self.mode == "tail":
                    kept = bytes(self.tail[-TAIL_BYTES:])
                    if len(kept) < self.total:
                        note = (
                            f"[{self.total} bytes of output from {plural(runs, 'run')}: the last {len(kept)} follow]\n"
                        )
                        self.log.write(note.encode())
                    self.log.write(kept)
                elif self.mode == "discard":
                    self.log.write(f"[{self.total} bytes of output from {plural(runs, 'run')}, discarded]\n".encode())
                kept_err = bytes(self.stderr[-STDERR_TAIL_BYTES:])
                dropped = self.mode == "discard" or (self.mode == "tail" and self.total > TAIL_BYTES)
                if self.failed_run is not None and kept_err and dropped:
                    note = f"[the end of run {self.failed_run}'s stderr ({len(kept_err)} bytes), which failed:]\n"
                    self.log.write(b"\n" + note.encode() + kept_err + (b"" if kept_err.endswith(b"\n") else b"\n"))
                self.log.flush()
            except OSError as exc:
                self.error = self.error or exc


@register_phase
@dataclass(eq=False)
class CommandPhase(Phase):
    """Run ``<binary> <args…>`` ``runs`` times; each run must exit with ``expect_exit``."""

    kind = "command"
    modes = ("command",)
    fills: ClassVar[frozenset[str]] = frozenset({"env"})

    args: list[str]
    runs: int
    expect_exit: int
    stdin: str | None
    cwd: str | None = None
    output: str = "tail"

    @classmethod
    def parse(cls, table: Table, name: str, timeout: float | None) -> Phase:
        runs = parse_runs(table)
        return cls(
            name,
            timeout,
            args=table.strings("args"),
            runs=runs,
            expect_exit=table.exit_code("expect_exit"),
            stdin=table.string("stdin"),
            cwd=table.string("cwd"),
            output=table.string("output", "tail", choices=OUTPUT_CHOICES),
        )

    def texts(self) -> list[str]:
        return [*self.args, *([self.stdin] if self.stdin is not None else []), *([self.cwd] if self.cwd else [])]

    def _filled(self, ctx: PhaseContext, where: str) -> tuple[list[str], bytes | None, Path]:
        """The run's command line, stdin and working directory, placeholders filled."""
        argv = ctx.argv([filled(a, ctx, where) for a in self.args])
        stdin = filled(self.stdin, ctx, where).encode() if self.stdin is not None else None
        default_cwd = ctx.cwd or Path(ctx.values["project"])
        return argv, stdin, working_dir(self.cwd, ctx, where) if self.cwd is not None else default_cwd

    def run(self, ctx: PhaseContext) -> PhaseResult:
        where = f"phase {ctx.instance}/{self.name}"
        runs = ctx.scaled(self.runs)
        argv, stdin, cwd = self._filled(ctx, where)
        limit = ctx.limit(self.timeout)
        start = time.monotonic()
        deadline = start + limit
        log = ctx.logs / f"train-{ctx.instance}-{self.name}.log"
        done = started = 0
        leftovers: list[procs.Leftover] = []
        shown = quote(argv[len(ctx.launcher) + 1 :]) or "(no arguments)"  # a selector "a, b" is one word
        under = f" under {Path(ctx.launcher[0]).name}" if ctx.launcher else ""
        say(f"{where}: {plural(runs, 'run')} of {shown} in {cwd}{under}")
        with log.open("wb", buffering=0) as out:
            output = Output(self.output, out)
            try:
                for index in range(runs):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    started += 1
                    output.start_run()
                    returncode, left = run_in_own_group(
                        argv, env=ctx.env, cwd=cwd, stdin=stdin, timeout=remaining, sink=output
                    )
                    if returncode is None:
                        leftovers += left
                        break
                    if left and not ctx.verifying:  # the training's profiles: see LEFTOVER_HINT
                        raise TrainingFailed(
                            f"{where}: run {index + 1} of {runs} {procs.leftovers_line(left)}", LEFTOVER_HINT
                        )
                    leftovers += left
                    if returncode != self.expect_exit:
                        reason = output.failed(index + 1)
                        raise TrainingFailed(
                            f"{where}: run {index + 1} of {runs} exited with "
                            f"{f'signal {-returncode}' if returncode < 0 else f'exit code {returncode}'}, "
                            f"expected {self.expect_exit}" + (f"; its stderr ends: {reason}" if reason else ""),
                            f"see {log}",
                        )
                    done += 1
            finally:
                output.close(started)  # also when a run failed: the log's tail ends with that run's output
                if leftovers:
                    say(f"{where}: its runs {procs.leftovers_line(leftovers)}")
            if output.error is not None:
                raise TrainingFailed(
                    f"{where}: its log {log} could not be written: {output.error.strerror}",
                    'free space on that filesystem, or set output = "discard" for the phase',
                )
        seconds = time.monotonic() - start
        if done < runs:
            raise TrainingFailed(
                f"{where}: only {done} of {runs} runs finished within {limit:g} s (a run still going was killed, "
                "with every process it started)",
                "raise the phase's timeout (or PGO_PHASE_TIMEOUT), or lower its runs",
            )
        return PhaseResult(self.name, self.kind, runs, done, seconds, {"exit_ok": done})


def telling_line(stderr: str) -> str:
    """The line of a failed run's stderr that says why, for its refusal: a Rust panic's place and message (not
    the backtrace or the RUST_BACKTRACE note the runtime writes after it), else the last line; "" when empty."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        panic = _PANIC.match(lines[index])
        if panic is not None:
            message = list(itertools.takewhile(lambda line: not _AFTER_PANIC.match(line), lines[index + 1 :]))
            return f"panicked at {panic.group('place')}: {' '.join(message)}" if message else lines[index]
    return lines[-1] if lines else ""


def run_in_own_group(
    argv: list[str], *, env: Mapping[str, str], cwd: Path, stdin: bytes | None, timeout: float, sink: Output
) -> tuple[int | None, list[procs.Leftover]]:
    """Run ``argv`` in a new session (its own process group), its output (stdout and stderr) to ``sink``.

    Returns its exit status (negative: the signal), or None when it ran out of ``timeout``, and what it left
    running. Either way, every process it left (children, grandchildren, those that left its group) is killed
    before this returns: out of time at once with SIGKILL, else by :func:`recipes.procs.sweep`; the process is
    reaped only after that, so its pid (the group's id) cannot have been reused.
    """
    proc, tag = procs.start_group(
        argv,
        env,
        cwd=cwd,
        stdin=procs.PIPE if stdin is not None else procs.DEVNULL,
        stdout=procs.PIPE,
        stderr=procs.PIPE,
    )
    threads = [
        threading.Thread(target=_drain, args=(piped(proc.stdout), sink.write), daemon=True),
        threading.Thread(target=_drain, args=(piped(proc.stderr), sink.write_stderr), daemon=True),
    ]
    if stdin is not None:
        threads.append(threading.Thread(target=_feed, args=(piped(proc.stdin), stdin), daemon=True))
    for thread in threads:
        thread.start()
    try:
        reaped = procs.reap_group(proc, tag, time.monotonic() + timeout)
    finally:
        for thread in threads:
            thread.join(timeout=10)  # a process that left the group could hold the pipe open
    return (reaped.returncode if reaped.exited else None), reaped.leftovers


def _drain(pipe: IO[bytes], sink: Callable[[bytes], None]) -> None:
    with pipe:
        while chunk := os.read(pipe.fileno(), 65536):
            sink(chunk)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        with pipe:
            pipe.write(data)
    except BrokenPipeError:
        pass  # the program did not read all of its input: its exit status says whether that is fine
