"""The one command runner: explicit environment, the command printed shell-quoted, output to a log."""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CommandFailed, PgoError, ToolchainError

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


def show(text: str) -> None:
    """A block for a person to read as it is (a log's tail, a dump of sockets and threads): on stderr, flushed."""
    print(text, file=sys.stderr, flush=True)


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def log_tail(path: Path, lines: int = 30, *, joined: str | None = None) -> str:
    """The last ``lines`` lines of a log file, or ``joined`` by a separator on one line; a missing or empty
    log says so (on one line: nothing)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})" if joined is None else ""
    if joined is not None:
        return joined.join(text.strip().splitlines()[-lines:])
    return tail(text, lines) or "(empty log)"


#: cargo's status lines of a unit: ``   Compiling serde v1.0.200``, ``       Fresh libc v0.2.155 (…)``
_CARGO_UNIT = re.compile(r"^ {0,12}(Compiling|Fresh) (\S+) v(\S+)")
_CARGO_FINISHED = re.compile(r"^ {0,12}Finished ")
#: cargo's ``Running `…` `` lines: rustc and build script invocations (one line, or several when an argument or
#: a variable holds a newline, up to the line that ends with the closing backquote)
_INVOCATION = re.compile(r"^ {0,12}Running `")
PROGRESS_WIDTH = 160


def _plain_lines(stream: Iterable[bytes]) -> Iterator[str]:
    """The lines of a cargo log a person can read: without the command line (``$ …``), cargo's invocations
    (however many lines they span), its JSON messages and build scripts' ``[pkg 1.0.0] cargo:…`` output."""
    in_invocation = False
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if in_invocation:
            in_invocation = not line.endswith("`")
            continue
        if _INVOCATION.match(line):
            in_invocation = not line.rstrip().endswith("`") or line.rstrip().endswith("Running `")
            continue
        text = line.strip()
        if not text or text.startswith(("$ ", '{"reason":')) or re.match(r"^\[\S+ \S+\] ", text):
            continue
        yield line


def plural(count: int, unit: str) -> str:
    """``1 run``, ``2 runs``, ``0 phases``: a count and its unit, which agree (the progress and summary lines)."""
    return f"{count} {unit}" + ("" if count == 1 else "s")


def last_progress_line(log: Path) -> str:
    """What a growing log says is going on, for the heartbeat of a long command. For cargo: the crate it is
    compiling now and how many crates it has reported so far (compiled or fresh); once it has finished (tests
    running, say), how many it built and the last readable line. For another tool, its last readable line. Never
    a fragment of cargo's invocations."""
    compiling = fresh = 0
    current = ""
    finished = False
    last = ""
    try:
        with log.open("rb") as stream:
            for line in _plain_lines(stream):
                unit = _CARGO_UNIT.match(line)
                if unit is None:
                    last = line.strip()
                    finished = finished or _CARGO_FINISHED.match(line) is not None
                    continue
                finished = False
                if unit[1] == "Compiling":
                    compiling += 1
                    current = f"{unit[2]} v{unit[3]}"
                else:
                    fresh += 1
    except OSError:
        return "(no output yet)"
    units = compiling + fresh
    if not units:
        return last[:PROGRESS_WIDTH] or "(no output yet)"
    if finished:
        return f"{plural(units, 'crate')} built{f' ({fresh} fresh)' if fresh else ''}; {last}"[:PROGRESS_WIDTH]
    if not current:
        return f"{plural(units, 'crate')} so far, all fresh"
    return f"compiling {current} (crate {units} so far{f', {fresh} fresh' if fresh else ''})"[:PROGRESS_WIDTH]


#: the values of ``-C lto`` that mean none (cargo passes ``-C lto`` for ``lto = true``, ``-C lto=thin`` …)
NO_LTO = frozenset({"", "off", "no", "n", "false"})


@dataclass(frozen=True)
class RustcUnit:
    """A rustc that a running cargo has started: its crate, whether it does LTO, the linker it runs (if any)."""

    crate: str
    lto: str  # the value of -C lto (yes, fat, thin, off, ...), "" without
    linker: str  # the program of a process it started (cc, ld, ...), "" while it compiles

    def state(self) -> str:
        if self.linker:
            return f"linking {self.crate} ({self.linker})"
        lto = "" if self.lto in NO_LTO else ", thin LTO" if self.lto == "thin" else ", fat LTO"
        return f"optimising {self.crate} (codegen{lto})"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
    except OSError:
        pass  # gone, or a thread that ended while listed
    return found


def _crate_name(argv: Sequence[str]) -> str | None:
    return next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--crate-name"), None)


def _codegen(argv: Sequence[str], key: str) -> str | None:
    """The value of ``-C key=value`` or ``-Ckey=value`` (``-C key`` alone: ``yes``), else None."""
    for i, arg in enumerate(argv):
        if arg == "-C" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("-C") and len(arg) > 2:
            value = arg[2:]
        else:
            continue
        name, eq, setting = value.partition("=")
        if name == key:
            return setting if eq else "yes"
    return None


def rustc_units(pid: int) -> list[RustcUnit]:
    """The rustc processes below ``pid`` (a cargo), from /proc: one per crate (a wrapper or rustup's proxy and the
    rustc it runs carry the same arguments: the deepest counts), with the linker it is running."""
    units: dict[str, RustcUnit] = {}
    todo = _children(pid)
    while todo:
        child = todo.pop()
        argv = _cmdline(child)
        crate = _crate_name(argv)
        below = _children(child)
        todo += below
        if crate is None:
            continue
        linkers = [Path(a[0]).name for a in map(_cmdline, below) if a and _crate_name(a) is None]
        units[crate] = RustcUnit(crate, _codegen(argv, "lto") or "", linkers[0] if linkers else "")
    return sorted(units.values(), key=lambda unit: unit.crate)


#: a build script that cargo runs: ``<target>/…/build/<pkg>-<16 hex>/build-script-<name>``, its package ``<pkg>``
#: (not ``deps/build_script_build-<hash>``, the file rustc writes while it compiles one)
_BUILD_SCRIPT = re.compile(r"(?:^|/)build/(?P<package>[^/]+)-[0-9a-f]{16}/build-script-[^/]+$")


def _build_script_package(pid: int, argv: Sequence[str]) -> str | None:
    """The package of a build script running as ``pid`` (its argv[0], else its executable), else None."""
    match = _BUILD_SCRIPT.search(argv[0]) if argv else None
    if match is None:
        try:
            match = _BUILD_SCRIPT.search(str(Path(f"/proc/{pid}/exe").readlink()).removesuffix(" (deleted)"))
        except OSError:
            return None  # gone, or not ours to read
    return match["package"] if match else None


def build_scripts(pid: int) -> list[str]:
    """The packages whose build script is running below ``pid`` (a cargo), from /proc, sorted. What a build
    script runs (configure, make, cc) is below it: its package is the build script's."""
    packages: set[str] = set()
    todo = _children(pid)
    while todo:
        child = todo.pop()
        package = _build_script_package(child, _cmdline(child))
        if package is None:
            todo += _children(child)
        else:
            packages.add(package)
    return sorted(packages)


class Heartbeat:
    """The progress line of a long command: what its log says, and for a cargo whose only rustc left is one
    crate's (the binary's codegen, LTO and link take minutes after the last other crate), what that rustc is
    doing and for how long, and the build scripts running beside it (libgit2-sys's cc-rs compiles libgit2's C for
    two minutes while other crates' rustcs come and go: that rustc is then not the only crate still building);
    with no rustc left, the build scripts still running (jemalloc-sys's configure and make take minutes) and for
    how long."""

    def __init__(self, log: Path, pid: int) -> None:
        self.log, self.pid = log, pid
        self.since: dict[str, float] = {}

    def line(self, now: float) -> str:
        text = last_progress_line(self.log)
        if not text.startswith("compiling "):
            return text
        units = rustc_units(self.pid)
        count = re.search(r"\((crate \d+ so far[^)]*)\)", text)
        so_far = count[1] if count else ""
        if not units:
            return self._build_scripts_line(now, so_far) or text
        if len(units) != 1:
            return text
        state = units[0].state()
        started = self.since.setdefault(state, now)
        scripts = self._build_scripts(now)
        beside = f"beside {scripts}" if scripts else "the only crate still building"
        line = f"{state} for {now - started:.0f} s, {beside} ({so_far})"
        return line[:PROGRESS_WIDTH]

    def _build_scripts_line(self, now: float, so_far: str) -> str:
        """With no rustc left, the build scripts running (jemalloc-sys's configure and make), for how long the
        longest has run; "" when none is."""
        scripts = self._build_scripts(now)
        if not scripts:
            return ""
        line = f"running {scripts} ({so_far})"
        return line[:PROGRESS_WIDTH]

    def _build_scripts(self, now: float) -> str:
        """``the build script of jemalloc-sys for 80 s``: the build scripts running, for how long the longest has
        run; "" when none is."""
        packages = build_scripts(self.pid)
        if not packages:
            return ""
        started = min(self.since.setdefault(f"the build script of {package}", now) for package in packages)
        scripts = "build script" if len(packages) == 1 else "build scripts"
        return f"the {scripts} of {', '.join(packages)} for {now - started:.0f} s"


#: cc-rs (the C compiler of a build script: ring, zstd-sys, …) found no compiler for the target
_CC_TOOL = re.compile(r'error occurred in cc-rs: failed to find tool "(?P<tool>[^"]+)"')
#: the Debian package of a target's C compiler that cc-rs looks for
_CC_PACKAGES = {
    "x86_64-linux-musl-gcc": "musl-tools",
    "musl-gcc": "musl-tools",
    "cc": "gcc",
    "gcc": "gcc",
    "c++": "g++",
    "g++": "g++",
}
#: a Debian cross compiler (``aarch64-linux-gnu-g++``): its package is the driver's name, then the triple
_CROSS_COMPILER = re.compile(r"(?P<triple>[\w.]+-linux-gnu\w*)-(?P<driver>gcc|g\+\+)")


def known_cause(output: str) -> str:
    """A failed build's cause that a line can say, with its fix (a missing C compiler of a build script), or ""."""
    match = _CC_TOOL.search(output)
    if match is None:
        return ""
    tool = match["tool"]
    name = Path(tool).name
    cross = _CROSS_COMPILER.fullmatch(name)
    package = _CC_PACKAGES.get(name) or (f"{cross['driver']}-{cross['triple']}" if cross else None)
    language, variable = ("C++", "CXX") if name.endswith("++") else ("C", "CC")
    fix = f"apt-get install {package}" if package else f"install {tool} or name a compiler in {variable}_<target>"
    return f"a build script needs the {language} compiler {tool}, which is not installed ({fix})"


#: free bytes under which a failed command's folder is called full: its log could not be written whole, and a
#: build that writes beside it (cargo's target dir, the RUSTC shim's records) fails for that, not for its code
FULL_BELOW = 64 * 1024


def disk_full(folder: Path) -> str:
    """Why a command failed when the filesystem of ``folder`` (its log's) is full, or ""."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return ""
    if free >= FULL_BELOW:
        return ""
    return f"No space left on device: {free} bytes free in {folder} (free space in PGO_OUT or choose another)"


def too_long(argv: Sequence[str], env: Mapping[str, str], exc: OSError) -> PgoError:
    """The refusal of a program the kernel would not start with these arguments and environment (E2BIG: an
    argument or variable over 128 KiB, or all of them over the system's limit), or ``exc`` itself when not that."""
    if exc.errno != errno.E2BIG:
        raise exc
    size = sum(len(os.fsencode(a)) + 1 for a in argv) + sum(len(os.fsencode(f"{k}={v}")) + 1 for k, v in env.items())
    longest = max((*argv, *env.values()), key=len)
    return CommandFailed(
        f"cannot start {Path(argv[0]).name}: its arguments and environment are {size} bytes, the longest "
        f"{len(os.fsencode(longest))}, more than the system takes ({exc.strerror})",
        "shorten the workload's args or env, or the setting that fills them (an argument or variable is at most "
        "131072 bytes): give a long input through stdin or a file",
    )


def not_found(argv: Sequence[str], cwd: Path | None, exc: FileNotFoundError) -> PgoError:
    """What a :class:`FileNotFoundError` of starting ``argv`` in ``cwd`` means: the working directory is missing
    (the error names it, or it is not a directory), or else the command is."""
    if cwd is not None and (exc.filename in {str(cwd), cwd} or not Path(cwd).is_dir()):
        return CommandFailed(
            f"cannot run {argv[0]}: working directory {cwd} does not exist", "create it, or give an existing one"
        )
    return ToolchainError(f"{argv[0]}: command not found", "install it or put it on PATH")


def not_started(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, exc: OSError) -> PgoError:
    """The one line of any :class:`OSError` of starting ``argv`` in ``cwd``: arguments too long (:func:`too_long`),
    a missing command or working directory (:func:`not_found`), a program given by its path that is not there (gone
    since the session started: removed by a workload's setup command, say), or what the system said (no execute
    permission, not a program this machine runs). Before, all but the first two were the OSError's traceback."""
    if exc.errno == errno.E2BIG:
        return too_long(argv, env, exc)
    program = str(argv[0])
    if isinstance(exc, FileNotFoundError) and "/" in program and not Path(cwd or ".", program).exists():
        if cwd is not None and not Path(cwd).is_dir():
            return not_found(argv, cwd, exc)
        return CommandFailed(
            f"cannot run {program}: there is no such file (it was removed, or never made)",
            "whatever removed it ran after the session started (a workload's setup command, a test, another "
            "process): leave it in place, and run the session again",
        )
    if isinstance(exc, FileNotFoundError):
        return not_found(argv, cwd, exc)
    return CommandFailed(
        f"cannot run {program}: {exc.strerror or exc}",
        "give a program this machine runs, with its execute permission (chmod +x), or build it again",
    )


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
            heartbeat = Heartbeat(log, proc.pid)
            try:
                while True:
                    try:
                        returncode = proc.wait(timeout=HEARTBEAT_SECONDS)
                        break
                    except subprocess.TimeoutExpired:
                        now = time.monotonic()
                        say(f"  … {now - started:.0f} s: {heartbeat.line(now)}")
            except BaseException:
                proc.kill()
                proc.wait()
                raise
    except OSError as exc:  # E2BIG, EACCES: a traceback before
        raise not_started(argv, env, cwd, exc) from None
    done = Completed(argv, returncode, log)
    if check and proc.returncode != 0:
        show(tail(done.output()))
        name = what or Path(argv[0]).name
        cause = known_cause(done.output()) or disk_full(log.parent)
        raise CommandFailed(
            f"{name} failed with exit code {proc.returncode}{f': {cause}' if cause else ''}", f"see {log}"
        )
    return done


#: a :func:`query` out of its time (subprocess's own: its message names the command and the limit); the child is
#: killed and reaped before it is raised
TimedOut = subprocess.TimeoutExpired


@dataclass(frozen=True)
class Output:
    """A finished short command: its exit status (negative: the signal) and what it wrote, decoded (bytes that are
    not UTF-8 replaced)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def query(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None, timeout: float | None = None
) -> Output:
    """Run a short command with exactly ``env`` (its ``PATH`` finds the program), standard input closed, and
    return its exit status and output whatever the status; nothing is printed. Not starting raises the
    :class:`OSError` (:func:`not_found` says what it means); out of ``timeout`` seconds, :data:`TimedOut`."""
    argv = tuple(str(a) for a in argv)
    proc = subprocess.run(
        argv,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )
    return Output(argv, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def capture(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None) -> str:
    """Run a short query command with exactly ``env`` and return its stdout; a failure is a
    :class:`CommandFailed`."""
    argv = tuple(str(a) for a in argv)
    try:
        proc = query(argv, env=env, cwd=cwd)
    except FileNotFoundError as exc:
        raise not_found(argv, cwd, exc) from exc
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CommandFailed(f"{quote(argv)} failed with exit code {proc.returncode}: {first}")
    return proc.stdout
