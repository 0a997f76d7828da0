"""The one process manager of the pipeline: start a child with its output in a log, wait until it answers, signal
it, reap it, describe its exit, show the tail of its log, and kill whatever it left running.

The training's server instances (``recipes/train/server.py``) and command runs (``recipes/train/command.py``), the
bench's servers (``recipes/bench/servers.py``) and command runs (``recipes/bench/commands.py``), the baseline-CPU
check's server under emulation (``recipes/release/cpu.py``) and the training's upstream backend
(``recipes/train/resources.py``, running ``recipes/web/upstream.py``), a workload's setup commands and the tests
shard's ``cargo test`` (:func:`run_limited`) all run through this module; each says in its
own words what a failure means for it. The short-lived helpers that the caller waits for or kills itself (h2load in
an HTTP phase, ``recipes/train/http.py``, and the bench's load, ``recipes/bench/load.py``) start through
:func:`spawn`, in this process's session. Every child gets exactly the environment its caller gives.

Leftovers. Every child starts a session of its own (``start_new_session``: its own process group, whose id is
its pid) with ``PGO_PROCS_OWNER`` in its environment naming it, and this process is a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``, Linux): whatever the child's tree orphans, even after ``setsid`` or a double
fork, is re-parented to us, not to init. When the child has exited (it is left a zombie until then, so its group
id cannot be reused), :func:`sweep` takes our direct children that were not there when it started and are not
another live child of ours, keeps those of this child (in its group or session, else carrying its owner tag, or
no tag at all: the pipeline starts nothing else while a child stops), adds their descendants, and kills them
(SIGTERM, :data:`GRACE` seconds, SIGKILL), reaps those that are ours and returns them for the one line
:func:`leftovers_line`. A process that leaves the group, drops the owner tag from its environment while another
child of ours is live, and whose parent exits is the only one that can be attributed to the wrong child; a
process in another PID namespace, or one that ptrace re-parents, is out of reach.

The session's end. While a session runs (:func:`forwarding_signals`, which ``recipes/sessions.py`` wraps every
session in), SIGTERM and SIGHUP to nox (or to its process group, which does not hold the children's own sessions)
are forwarded to every child of this process, to the whole group of those that lead one, and then end the
session with :class:`Interrupted`, whose unwinding stops and reaps every child as a failure does;
whatever still runs then is killed and reaped (:func:`reap_children`). A SIGKILL cannot be caught: so each child
is recorded while it runs (:func:`recording_children`: a file per child in the work dir, its pid, its start time
(``/proc/<pid>/stat`` field 22) and its owner tag), and the next session in that work dir kills those still alive
whose start time matches (:func:`reclaim`), never a process that merely reuses a recorded pid.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NamedTuple, TypeAlias

from recipes.errors import PgoError
from recipes.files import write_atomically
from recipes.runner import HEARTBEAT_SECONDS, Heartbeat, log_tail, not_started, quote, say
from recipes.web import net

#: the environment variable that names the child a process was started under (inherited by what it starts)
OWNER_VARIABLE = "PGO_PROCS_OWNER"
#: seconds a leftover has between SIGTERM and SIGKILL
GRACE = 2.0
#: prctl(2)'s option that makes orphaned descendants re-parent to the caller
PR_SET_CHILD_SUBREAPER = 36
#: how many leftovers a line names (the count is always whole)
NAMED = 5
#: what a child's standard stream can be besides a file: a pipe to us, the null device, or (standard error only)
#: wherever its standard output goes; callers outside this module and the runner name them here
PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
#: a child's standard stream as :func:`spawn` takes it: :data:`PIPE`, :data:`DEVNULL`, :data:`STDOUT`, or a file
Stream: TypeAlias = int | IO[Any]

_serial = itertools.count(1)
#: the pids of this process's live children started here: never another child's leftovers
_live: set[int] = set()
#: the folder where each running child is recorded (:func:`recording_children`), or None
_registry: Path | None = None
#: the signal that is ending this session (:func:`forwarding_signals`), once one came
_ending: signal.Signals | None = None
#: the signals a session forwards to its children before it ends (SIGINT, Ctrl-C, too: it ended as nox's bare "Session
#: train interrupted.", the stage's record saying only that it did not finish)
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(BaseException):
    """The session was told to stop (SIGTERM, SIGHUP: a CI cancel, ``docker stop``, ``timeout``). Not a failure of
    the build, so not a :class:`~recipes.errors.PgoError`: no ``except PgoError`` (a bench scenario's, a phase's)
    nor ``except Exception`` takes it for one. The session catches it once its children are stopped and reaped,
    and ends with :meth:`line`; the record of the stage it ended is a failure in the same words."""

    def __init__(self, signal_name: str) -> None:
        self.signal_name = signal_name
        super().__init__(self.line())

    def line(self) -> str:
        """The session's last line."""
        return (
            f"interrupted by {self.signal_name}: stopped every process the session had started"
            " (run the session again; nothing it was doing was recorded as done)"
        )

    def error(self) -> PgoError:
        """The same words as a failure, for the record of the stage it ended."""
        return PgoError(self.line())


@functools.cache
def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (once; Linux only): whether it is one."""
    if sys.platform != "linux":
        return False
    return bool(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def session_tag() -> str:
    """``<pid>.<start time>`` of this process: with the start time, a reused pid names another."""
    pid = os.getpid()
    proc = read_process(pid)
    # fixed width: every child's environment is the same size whatever the pid, start time and serial (valgrind's
    # counts of one binary move with the size of its environment: the bench's runs must not)
    return f"{pid:010d}.{proc.started if proc else 0:016d}"


def _alive_session(owner: str) -> bool:
    """Whether the session of an owner tag (``<pid>.<start time>-<serial>``) still runs: its children are its own
    to stop, not orphans (another session in the work dir at once)."""
    pid, _, started = owner.partition("-")[0].partition(".")
    if not pid.isdigit():
        return False
    proc = read_process(int(pid))
    return proc is not None and proc.running and started.isdigit() and proc.started == int(started)


def _record(pid: int, owner: str) -> None:
    """Record the running child ``pid`` in the session's folder (if any): ``<pid> <start time> <owner tag>``."""
    if _registry is None or (proc := read_process(pid)) is None:
        return
    with suppress(OSError):  # a full disk: the child runs unrecorded rather than not at all
        write_atomically(_registry / str(pid), f"{pid} {proc.started} {owner}\n")


def _unrecord(pid: int) -> None:
    if _registry is not None:
        with suppress(OSError):
            (_registry / str(pid)).unlink(missing_ok=True)


@contextmanager
def recording_children(folder: Path) -> Iterator[None]:
    """While the block runs, every child started here is recorded in ``folder`` (one file each, gone once it is
    reaped), for :func:`reclaim` in the next session when this one is killed."""
    global _registry  # noqa: PLW0603  (one process-wide setting, for the session's length)
    before, _registry = _registry, folder
    try:
        yield
    finally:
        try:
            if _ending is not None:  # interrupted: a child started just then may have no caller to reap it
                reap_children()
        finally:
            _registry = before


def _recorded(entry: Path) -> tuple[int, int, str] | None:
    """A record of :func:`_record`: pid, start time and owner tag, or None when it is not one."""
    try:
        if not entry.is_file():  # a fifo would be read forever (a hang of the next session, before)
            return None
        pid, started, owner = entry.read_text(encoding="utf-8").split()
        return int(pid), int(started), owner
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def reclaim(folder: Path) -> list[Leftover]:
    """Kill (SIGTERM, :data:`GRACE` seconds, SIGKILL) every child recorded in ``folder`` by a session that was
    killed before it could stop them, and still running: the process at the recorded pid only when its start time
    is the recorded one (a pid reused by another process is never touched), with its process group and whatever
    carries its owner tag. The records go; those of a session still running (its pid and start time) stay, and
    its children with them. What was killed, by pid."""
    try:
        entries = [entry for entry in folder.iterdir() if not entry.name.startswith(".")]
    except OSError:
        return []
    table = all_processes()
    spared = {os.getpid(), os.getppid()}
    picked: dict[int, Process] = {}
    for entry in entries:
        record = _recorded(entry)
        if record is not None and _alive_session(record[2]):
            continue  # a live session's child: it stops its own
        proc = table.get(record[0]) if record is not None else None
        if record is not None and proc is not None and proc.running and proc.started == record[1]:
            picked[proc.pid] = proc
            picked.update({p.pid: p for p in table.values() if p.pgrp == proc.pid and p.running})
            picked.update({p.pid: p for p in table.values() if p.running and owner_of(p.pid) == record[2]})
        with suppress(OSError):
            entry.unlink()
    for pid in spared:
        picked.pop(pid, None)
    _terminate(set(picked))
    return [Leftover(pid, proc.name) for pid, proc in sorted(picked.items())]


def _forward(signum: int, _frame: object) -> None:
    """The session's handler of :data:`FORWARDED`: the signal to every child (to the group of one that leads its
    own), then, the first time, :class:`Interrupted` raised to end the session."""
    global _ending  # noqa: PLW0603  (one per process: the session is ending)
    sig = signal.Signals(signum)
    for pid in children_of(os.getpid()):
        proc = read_process(pid)
        with suppress(ProcessLookupError, PermissionError):
            if proc is not None and proc.pgrp == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
    if _ending is None:
        _ending = sig
        raise Interrupted(sig.name)


def reap_children() -> list[Leftover]:
    """Kill (SIGTERM, :data:`GRACE` seconds, SIGKILL) and reap every child of this process still there, with the
    groups they lead: the last word of an interrupted session. Those that were running, by pid."""
    left = []
    for pid in sorted(children_of(os.getpid())):
        proc = read_process(pid)
        if proc is None:
            continue
        if proc.running:
            left.append(Leftover(pid, proc.name))
        group = {p.pid for p in all_processes().values() if p.pgrp == pid} if proc.pgrp == pid else set()
        _terminate({pid} | group)
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        _unrecord(pid)
    return left


def open_files_to_hard_limit() -> int:
    """This process's limit of open files (``ulimit -n``) raised to its hard limit, as Go's runtime does for its
    programs, and the limit now in force: every child inherits it, so an HTTP phase's h2load and the server under
    training can each hold the phase's ``connections`` past a shell's common soft limit of 1024 (a workload asking
    past the hard limit is refused when it is loaded: ``workload.fields.parse_connections``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # an unlimited hard limit is past the kernel's nr_open: left as it was
        return soft
    return hard


@contextmanager
def forwarding_signals() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM, SIGHUP and SIGINT are forwarded to the children and end the
    session with :class:`Interrupted`; after an interruption, nothing the session started is left running."""
    global _ending  # noqa: PLW0603
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    become_subreaper()  # what a child orphans (rustc when cargo is stopped) stays ours to forward to and reap
    previous = {sig: signal.signal(sig, _forward) for sig in FORWARDED}
    _ending = None
    try:
        yield
    finally:
        try:
            if _ending is not None:
                reap_children()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            _ending = None


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


@dataclass(frozen=True)
class Process:
    """One line of ``/proc/<pid>/stat``: what a leftover is and where it belongs."""

    pid: int
    name: str
    state: str
    ppid: int
    pgrp: int
    session: int
    #: when it started, in clock ticks after boot (``/proc/<pid>/stat`` field 22): with the pid, it names one process
    started: int = 0

    @property
    def running(self) -> bool:
        return self.state not in {"Z", "X"}


def read_process(pid: int) -> Process | None:
    """``/proc/<pid>/stat`` parsed, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    name = head.partition("(")[2]
    return Process(pid, name, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def all_processes() -> dict[int, Process]:
    listed = (read_process(int(entry.name)) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return {proc.pid: proc for proc in listed if proc is not None}


def children_of(pid: int) -> set[int]:
    """The children of ``pid`` (every thread's), from ``/proc/<pid>/task/*/children``, else a scan of /proc."""
    tasks = Path(f"/proc/{pid}/task")
    found: set[int] = set()
    try:
        for task in tasks.iterdir():
            found.update(int(child) for child in (task / "children").read_text().split())
    except FileNotFoundError:
        return {proc.pid for proc in all_processes().values() if proc.ppid == pid}
    except OSError:
        pass  # a thread that ended while listed
    return found


def owner_of(pid: int) -> str | None:
    """The ``PGO_PROCS_OWNER`` a process was started with, or None (not set, or its environment unreadable)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = f"{OWNER_VARIABLE}=".encode()
    tags = (
        entry[len(prefix) :].decode("utf-8", "replace") for entry in environ.split(b"\0") if entry.startswith(prefix)
    )
    return next(tags, None)


@dataclass(frozen=True)
class Leftover:
    """A process still running after the child it belongs to had exited (killed since)."""

    pid: int
    name: str

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.name}"


def leftovers_line(left: Sequence[Leftover]) -> str:
    """``left 2 processes running (pid 41: sleep, pid 42: sleep); killed them`` (the first :data:`NAMED`)."""
    named = ", ".join(str(p) for p in left[:NAMED]) + (", …" if len(left) > NAMED else "")
    return f"left {len(left)} process{'' if len(left) == 1 else 'es'} running ({named}); killed them"


@dataclass(frozen=True)
class Ticket:
    """What identifies the processes of one started child: its owner tag and our children before it started."""

    owner: str
    before: frozenset[int]


def ticket(env: Mapping[str, str]) -> tuple[Ticket, dict[str, str]]:
    """A new ticket, and ``env`` with its owner tag: call it right before starting the child."""
    become_subreaper()
    owner = f"{session_tag()}-{next(_serial):08d}"
    return Ticket(owner, frozenset(children_of(os.getpid()))), {**env, OWNER_VARIABLE: owner}


def sweep(group: int, ticket: Ticket) -> list[Leftover]:
    """Kill (SIGTERM, :data:`GRACE` seconds, SIGKILL) and reap every process the exited child ``group`` (its pid, its
    group's id) left behind, as the module's docstring says; the running ones, by pid."""
    found: dict[int, Leftover] = {}
    me = os.getpid()
    for _ in range(10):  # a killed leftover's own orphans are re-parented to us: look again
        fresh = children_of(me) - ticket.before - _live - {group} - set(found)
        listed = [proc for pid in fresh if (proc := read_process(pid))]  # this child's: its group, session or tag
        picked = {p.pid: p for p in listed if group in {p.pgrp, p.session} or owner_of(p.pid) in {None, ticket.owner}}
        if not picked:
            break
        table = all_processes()
        grew = True
        while grew:  # their descendants, wherever they moved
            more = {p.pid: p for p in table.values() if p.ppid in picked and p.pid not in picked and p.pid not in _live}
            picked.update(more)
            grew = bool(more)
        running = {pid: proc for pid, proc in picked.items() if proc.running}
        found.update({pid: Leftover(pid, proc.name) for pid, proc in running.items()})
        _terminate(set(picked))
    return sorted(found.values(), key=lambda left: left.pid)


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _settle(pids: set[int], until: float) -> set[int]:
    """Reap those of ``pids`` that are our exited children, until none runs or ``until`` passes: those still
    running."""
    me = os.getpid()
    while True:
        running = set()
        for pid in pids:
            proc = read_process(pid)
            if proc is None:
                continue
            if proc.running:
                running.add(pid)
            elif proc.ppid == me:
                with suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not running or time.monotonic() >= until:
            return running
        time.sleep(0.02)


def _terminate(pids: set[int]) -> None:
    _signal(pids, signal.SIGTERM)
    stubborn = _settle(pids, time.monotonic() + GRACE)
    _signal(stubborn, signal.SIGKILL)
    _settle(pids, time.monotonic() + 5)


def _exit_status(pid: int, *, block: bool) -> int | None:
    """The exit status of our child ``pid`` once it has exited (negative: the signal), leaving it unreaped (a
    zombie keeps its group's id ours); None while it runs."""
    flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    result = os.waitid(os.P_PID, pid, flags)
    if result is None:
        return None
    return result.si_status if result.si_code == os.CLD_EXITED else -result.si_status


def wait_unreaped(pid: int, deadline: float) -> int | None:
    """Wait until our child ``pid`` exits or ``deadline`` (monotonic) passes, leaving it a zombie: its exit
    status, or None."""
    delay = 0.0005
    while True:
        if (status := _exit_status(pid, block=False)) is not None:
            return status
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)


class Reaped(NamedTuple):
    """A run of :func:`reap_group`: whether it exited in time, its exit status (negative: the signal), its
    resource usage (``wait4``: its CPU time and its waited-for children's) and what it left running."""

    exited: bool
    returncode: int
    usage: resource.struct_rusage
    leftovers: list[Leftover]


#: a child :func:`spawn` started, for the type of a parameter outside this module (which may not import subprocess)
Spawned: TypeAlias = "subprocess.Popen[bytes]"


def _popen(
    argv: Sequence[str], env: Mapping[str, str], *, missing: bool = False, **popen: Any
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen``; a program that cannot be started is one line (:func:`recipes.runner.not_started`: too
    long arguments, a missing program or working directory, a file that is not a program), not the OSError's
    traceback (the trained binary removed by a setup command was one). With ``missing``, a command by name that is
    not found raises the :class:`FileNotFoundError` as it is, for a caller that names the tool and its package."""
    try:
        return subprocess.Popen(list(argv), env=dict(env), **popen)
    except OSError as exc:
        if missing and isinstance(exc, FileNotFoundError) and "/" not in str(argv[0]):
            raise
        raise not_started(argv, env, popen.get("cwd"), exc) from None


def spawn(argv: Sequence[str], *, env: Mapping[str, str], stdout: Stream, stderr: Stream) -> subprocess.Popen[bytes]:
    """Start a short-lived helper (h2load, a load generator) with exactly ``env`` (its ``PATH`` finds the program)
    in this process's session, its streams as given (standard input closed): the caller waits for it
    (:func:`wait_usage`) or kills it. A command by name not found on ``PATH`` raises the :class:`FileNotFoundError`
    (the caller names the package); any other failure to start is one line."""
    proc = _popen(argv, env, missing=True, stdin=DEVNULL, stdout=stdout, stderr=stderr)
    _record(proc.pid, f"{session_tag()}-{0:08d}")  # no tag in its environment: 0, which no child of ticket() has
    return proc


class Waited(NamedTuple):
    """A run of :func:`wait_usage`: whether it exited before the deadline, its exit status (negative: the signal)
    and its resource usage (``wait4``: its CPU time and its waited-for children's)."""

    exited: bool
    returncode: int
    usage: resource.struct_rusage


def wait_usage(proc: subprocess.Popen[bytes], deadline: float) -> Waited:
    """Wait for ``proc`` (from :func:`spawn`) until it exits or ``deadline`` (monotonic) passes, then SIGKILL it;
    reaped either way, with its resource usage."""
    exited = True
    while not (waited := os.wait4(proc.pid, os.WNOHANG))[0]:
        if time.monotonic() > deadline:
            exited = False
            proc.kill()
            waited = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    _pid, status, usage = waited
    proc.returncode = os.waitstatus_to_exitcode(status)
    _unrecord(proc.pid)
    return Waited(exited, proc.returncode, usage)


def start_group(argv: Sequence[str], env: Mapping[str, str], **popen: Any) -> tuple[subprocess.Popen[bytes], Ticket]:
    """``argv`` started in a session of its own with an owner tag (for a run that :func:`reap_group` ends)."""
    tag, tagged = ticket(env)
    proc = _popen(argv, tagged, start_new_session=True, **popen)
    _record(proc.pid, tag.owner)
    return proc, tag


def reap_group(proc: subprocess.Popen[bytes], tag: Ticket, deadline: float) -> Reaped:
    """Wait for ``proc`` (from :func:`start_group`) until it exits or ``deadline`` (monotonic) passes. Out of
    time: it and its group are killed with SIGKILL at once; then (either way) what it left is swept
    (:func:`sweep`), and only after that is it reaped, so its group's id cannot have been reused."""
    exited = False
    try:
        exited = wait_unreaped(proc.pid, deadline) is not None
    finally:
        if not exited:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _exit_status(proc.pid, block=True)
        left = sweep(proc.pid, tag)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        _unrecord(proc.pid)
    return Reaped(exited, proc.returncode, usage, left)


@dataclass
class Child:
    """A started child process whose output goes to ``log`` (standard output too unless ``pipe_stdout``).

    ``label`` names it in the leftovers line (``pgo: <label> left 1 process running (pid 42: sleep); killed
    them``), said when it is reaped; with :attr:`hold_leftovers` set the line is left to the caller
    (:meth:`take_leftovers`), and said at :meth:`close` when the caller did not take it."""

    argv: list[str]
    proc: subprocess.Popen[bytes]
    log: Path
    label: str
    tag: Ticket
    leftovers: list[Leftover] = field(default_factory=list)
    hold_leftovers: bool = False
    told: bool = False

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
        label: str | None = None,
    ) -> Child:
        """Start ``argv`` (standard input closed, a session of its own); its standard error, and its output
        unless ``pipe_stdout``, go to ``log`` (truncated, or appended to)."""
        with log.open("ab" if append else "wb") as out:
            proc, tag = start_group(
                argv,
                env,
                stdout=PIPE if pipe_stdout else out,
                stderr=out if pipe_stdout else STDOUT,
                stdin=DEVNULL,
                cwd=cwd,
            )
        _live.add(proc.pid)
        return cls(list(argv), proc, log, label or Path(argv[0]).name, tag)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stdout(self) -> IO[bytes]:
        """Its standard output, when started with ``pipe_stdout``."""
        return piped(self.proc.stdout)

    def alive(self) -> bool:
        return self.returncode is None

    @property
    def returncode(self) -> int | None:
        """The exit status once it has ended (negative: the signal), else None."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        return _exit_status(self.pid, block=False)

    def wait_ready(self, url: str, limit: float) -> net.Readiness:
        """Poll ``url`` until it answers 200, while the child lives, for at most ``limit`` seconds."""
        return net.poll_ready(url, limit, self.alive)

    def wait_for(self, ready: Callable[[], bool], limit: float) -> bool:
        """Poll ``ready()`` while the child lives, for at most ``limit`` seconds: whether it came true."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            if ready():
                return True
            time.sleep(0.05)
        return False

    def wait(self, limit: float, progress: Callable[[float], None] | None = None, every: float = 10.0) -> int | None:
        """Wait at most ``limit`` seconds for it to exit: its exit status once it has (it and what it left are
        then reaped), else None. ``progress``: called with the seconds waited every ``every`` seconds it still
        runs (a long wait is not silent)."""
        if self.proc.returncode is None:
            started = time.monotonic()
            deadline = started + limit
            tick = started + every
            while wait_unreaped(self.pid, min(deadline, tick) if progress else deadline) is None:
                if progress is None or time.monotonic() >= deadline:
                    return None
                progress(time.monotonic() - started)
                tick += every
        return self._reap()

    def stop(self, limit: float, progress: Callable[[float], None] | None = None, every: float = 10.0) -> int | None:
        """Send SIGTERM (if it still runs) and reap it: its exit status, or None when it did not end within
        ``limit`` seconds (it is then still running: see :meth:`kill`); ``progress`` and ``every`` as in
        :meth:`wait`."""
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)  # not Popen.send_signal: its poll() would reap the child before its group
        return self.wait(limit, progress, every)

    def stop_or_kill(self, limit: float) -> int:
        """:meth:`stop`, then SIGKILL when it did not end in time: the exit status (negative when killed)."""
        code = self.stop(limit)
        return self.kill() if code is None else code

    def kill(self) -> int:
        """SIGKILL (if it still runs) and reap: the exit status."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        if self.proc.returncode is None:
            _exit_status(self.pid, block=True)
        return self._reap()

    def _reap(self) -> int:
        """Sweep what the exited child left (:func:`sweep`), then reap it (once)."""
        if self.proc.returncode is None:
            self.leftovers = sweep(self.pid, self.tag)
            _pid, status = os.waitpid(self.pid, 0)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            _live.discard(self.pid)
            _unrecord(self.pid)
            if self.leftovers and not self.hold_leftovers:
                self.say_leftovers()
        return self.proc.returncode

    def say_leftovers(self) -> None:
        """The leftovers line, once: ``pgo: <label> left N processes running (…); killed them``."""
        if (line := self.take_leftovers()) is not None:
            say(f"{self.label} {line}")

    def take_leftovers(self) -> str | None:
        """With :attr:`hold_leftovers`: the leftovers line (``left N processes running (…); killed them``) for
        the caller to tell (as a refusal), or None; it is then not said again."""
        if not self.leftovers or self.told:
            return None
        self.told = True
        return leftovers_line(self.leftovers)

    def tail(self, lines: int = 30, *, joined: str | None = None) -> str:
        return log_tail(self.log, lines, joined=joined)

    def close(self) -> None:
        """Never leave it behind: killed if still running, reaped with what it left, its pipe closed."""
        self.kill()
        self.say_leftovers()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class Ran(NamedTuple):
    """A run of :func:`run_limited`: its exit status (negative: the signal), or None when it ran out of its limit
    (killed), and what it left running (killed too)."""

    returncode: int | None
    leftovers: list[Leftover]


def run_limited(
    argv: Sequence[str], *, env: Mapping[str, str], log: Path, cwd: Path | None, limit: float, label: str
) -> Ran:
    """Run ``argv`` as :func:`recipes.runner.run` does (the command said shell-quoted, its output to ``log``, a
    progress line every :data:`~recipes.runner.HEARTBEAT_SECONDS`), but as the training runs its phases: in a
    session of its own, killed with every process it started when it runs past ``limit`` seconds, and what it
    left running killed when it exits (:func:`sweep`: setsid daemons too). For a workload's setup command and the
    tests shard's ``cargo test``, which ran without either before; the caller says what the result means."""
    argv = [str(a) for a in argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"$ {quote(argv)}")
    say(f"  log: {log}")
    log.write_text(f"$ {quote(argv)}\n", encoding="utf-8")
    with Child.start(argv, env=env, log=log, cwd=cwd, append=True, label=label) as child:
        child.hold_leftovers = True
        heartbeat = Heartbeat(log, child.pid)

        def beat(seconds: float) -> None:
            say(f"  … {seconds:.0f} s: {heartbeat.line(time.monotonic())}")

        code = child.wait(limit, beat, HEARTBEAT_SECONDS)
        if code is None:  # out of time: its group at once, as a phase's (reap_group); the sweep finds the rest
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.kill()
        child.told = True  # the caller tells them
        return Ran(code, child.leftovers)
