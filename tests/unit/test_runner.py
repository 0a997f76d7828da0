"""The heartbeat of long commands (recipes/runner.py): what a growing cargo log says is going on, on real
captured logs (tests/data/cargo-*.log) cut at every line, and the heartbeat line of a real run."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipes import runner
from recipes.errors import CommandFailed, PgoError
from tests.conftest import DATA
from tests.faults import fill_up, small_tmpfs

CARGO_LOGS = sorted(DATA.glob("cargo-*.log"))

#: what only cargo's invocations and machine messages hold: never in a progress line
FRAGMENTS = ("CARGO_", "Running `", '"reason"', "--crate-name", "It says", "backslash", "rustc ", "cargo:")


@pytest.mark.parametrize(
    ("name", "line"),
    [
        # -v: two path dependencies fresh, the main crate compiled
        (
            "cargo-optimise-clean.log",
            "3 crates built (2 fresh); Finished `release` profile [optimized] target(s) in 0.19s",
        ),
        # -vv with a description of three lines (its invocations span several lines), and JSON messages
        ("cargo-optimise-described.log", "1 crate built; Finished `release` profile [optimized] target(s) in 0.66s"),
        ("cargo-optimise-json.log", "1 crate built; Finished `release` profile [optimized] target(s) in 1.07s"),
        ("cargo-build-renamed-json.log", "2 crates built; Finished `release` profile [optimized] target(s) in 1.85s"),
        # cargo test: once built, the tests' own output
        (
            "cargo-test-pass.log",
            "1 crate built; test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
            "finished in 0.08s",
        ),
    ],
)
def test_finished_logs(name: str, line: str) -> None:
    assert runner.last_progress_line(DATA / name) == line


def _cut(tmp_path: Path, name: str, lines: int) -> Path:
    """The log as it was while cargo had written its first ``lines`` lines."""
    text = (DATA / name).read_text(encoding="utf-8")
    log = tmp_path / name
    log.write_text("".join(text.splitlines(keepends=True)[:lines]), encoding="utf-8")
    return log


@pytest.mark.parametrize(
    ("name", "lines", "line"),
    [
        ("cargo-optimise-clean.log", 1, "(no output yet)"),  # only the command line
        ("cargo-optimise-clean.log", 2, "1 crate so far, all fresh"),  # nothing compiling (yet)
        ("cargo-optimise-clean.log", 4, "compiling multi-pgo v0.1.0 (crate 3 so far, 2 fresh)"),
        ("cargo-optimise-clean.log", 5, "compiling multi-pgo v0.1.0 (crate 3 so far, 2 fresh)"),
        # in the middle of a rustc invocation whose CARGO_PKG_DESCRIPTION spans three lines
        ("cargo-optimise-described.log", 4, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        ("cargo-optimise-described.log", 5, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        ("cargo-optimise-described.log", 6, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        # the build script's cargo: lines
        ("cargo-optimise-json.log", 15, "compiling described-pgo v0.1.0 (crate 1 so far)"),
        ("cargo-build-layered-touched.log", 3, "compiling shapes v0.1.0 (crate 2 so far, 1 fresh)"),
    ],
)
def test_growing_logs(tmp_path: Path, name: str, lines: int, line: str) -> None:
    assert runner.last_progress_line(_cut(tmp_path, name, lines)) == line


@pytest.mark.parametrize("name", [p.name for p in CARGO_LOGS])
def test_never_a_fragment_of_cargos_output(tmp_path: Path, name: str) -> None:
    """At every moment of every captured cargo run, the progress line is readable text, never a piece of an
    invocation (``' CARGO_PKG_HOMEPAGE='https://…``) nor of a JSON message."""
    count = len((DATA / name).read_text(encoding="utf-8").splitlines())
    seen = set()
    for lines in range(count + 1):
        line = runner.last_progress_line(_cut(tmp_path, name, lines))
        assert len(line) <= runner.PROGRESS_WIDTH
        assert not any(fragment in line for fragment in FRAGMENTS), (lines, line)
        seen.add(line)
    assert any(line.startswith("compiling ") for line in seen), seen


def test_the_old_fragment_is_gone() -> None:
    """The issue's example: the last line of a -vv log of a crate with a multi-line description is the tail of
    an invocation; a line-by-line reader showed it."""
    last = (DATA / "cargo-optimise-described.log").read_text().splitlines()[-2]
    assert last.startswith("' CARGO_PKG_HOMEPAGE=")
    assert "CARGO_" not in runner.last_progress_line(DATA / "cargo-optimise-described.log")


def test_other_tools_and_no_log(tmp_path: Path) -> None:
    log = tmp_path / "merge.log"
    log.write_text("$ llvm-profdata merge -o x.profdata a.profraw\nwarning: a.profraw: no data\n\n")
    assert runner.last_progress_line(log) == "warning: a.profraw: no data"
    assert runner.last_progress_line(tmp_path / "missing.log") == "(no output yet)"
    long_line = tmp_path / "long.log"
    long_line.write_text("x" * 1000 + "\n")
    assert runner.last_progress_line(long_line) == "x" * runner.PROGRESS_WIDTH


def test_heartbeat_of_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A command that prints a -vv cargo log up to a multi-line invocation, then works for a while."""
    monkeypatch.setattr(runner, "HEARTBEAT_SECONDS", 0.3)
    partial = _cut(tmp_path, "cargo-optimise-described.log", 5)
    done = runner.run(["sh", "-c", f"cat {partial}; sleep 1.2"], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "b.log")
    assert done.returncode == 0
    beats = [line for line in capfd.readouterr().err.splitlines() if line.startswith("pgo:   … ")]
    assert beats, "no heartbeat"
    assert all(beat.endswith(" s: compiling described-pgo v0.1.0 (crate 1 so far)") for beat in beats), beats


def test_a_build_scripts_missing_c_compiler_is_named_with_its_package() -> None:
    """The demo server for x86_64-unknown-linux-musl on a machine without musl-tools (ring's build script, a real
    cargo log's tail): the failure says which compiler and which package, not only "see the log"."""
    output = (DATA / "cc-rs-musl-no-compiler.log").read_text(encoding="utf-8")
    assert runner.known_cause(output) == (
        "a build script needs the C compiler x86_64-linux-musl-gcc, which is not installed (apt-get install musl-tools)"
    )
    assert runner.known_cause(output.replace("x86_64-linux-musl-gcc", "riscv64-unknown-elf-gcc")).endswith(
        "(install riscv64-unknown-elf-gcc or name a compiler in CC_<target>)"
    )
    # Debian's cross compilers, as cc-rs names them for aarch64 under PGO_CXX=0 (the system's C++, a full path)
    assert runner.known_cause(output.replace("x86_64-linux-musl-gcc", "riscv64-linux-gnu-gcc")).endswith(
        "the C compiler riscv64-linux-gnu-gcc, which is not installed (apt-get install gcc-riscv64-linux-gnu)"
    )
    assert runner.known_cause(output.replace("x86_64-linux-musl-gcc", "/usr/bin/aarch64-linux-gnu-g++")) == (
        "a build script needs the C++ compiler /usr/bin/aarch64-linux-gnu-g++, which is not installed "
        "(apt-get install g++-aarch64-linux-gnu)"
    )
    assert runner.known_cause(output.replace("x86_64-linux-musl-gcc", "my-clang++")).endswith(
        "the C++ compiler my-clang++, which is not installed (install my-clang++ or name a compiler in CXX_<target>)"
    )
    assert runner.known_cause("error[E0425]: cannot find value `x` in this scope") == ""


@pytest.mark.refuses("command-cargo-tool-exits-non-zero-exit")
def test_a_failed_run_names_the_known_cause(tmp_path: Path) -> None:
    """run() puts that cause on the failure's one line (a real process printing cc-rs's line and failing)."""
    line = 'error occurred in cc-rs: failed to find tool "x86_64-linux-musl-gcc": No such file'
    with pytest.raises(CommandFailed) as failed:
        runner.run(["sh", "-c", f"echo '{line}'; exit 101"], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "b.log")
    assert "failed with exit code 101: a build script needs the C compiler x86_64-linux-musl-gcc" in str(
        failed.value.line()
    )


def _fake_cargo(*rustcs: str) -> subprocess.Popen[bytes]:
    """A process tree as cargo's: each of ``rustcs`` the arguments of a rustc (``--crate-name``…) given to a
    process that sleeps, with no child while it compiles; one whose arguments start with ``link:`` runs a child
    named ``cc`` (``exec -a``), as rustc does while it links."""
    sleeper = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(30)'"
    parts = [
        f"bash -c 'exec -a cc sleep 30 & wait' rustc {args.removeprefix('link:')} &"
        if args.startswith("link:")
        else f"{sleeper} {args} &"
        for args in rustcs
    ]
    return subprocess.Popen(["bash", "-c", f"{' '.join(parts)} wait"], start_new_session=True)


def _units(proc: subprocess.Popen[bytes], count: int, *, linking: bool = False) -> list[runner.RustcUnit]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        units = runner.rustc_units(proc.pid)
        if len(units) == count and (not linking or any(u.linker for u in units)):
            return units
        time.sleep(0.02)
    raise AssertionError(runner.rustc_units(proc.pid))


@pytest.fixture
def stop_all() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_only_crate_still_building_is_named_with_what_it_does_and_for_how_long(
    tmp_path: Path, stop_all: list[subprocess.Popen[bytes]]
) -> None:
    """The issue's example: after the last other crate, a fat-LTO build of the binary runs for minutes while the
    log still names the last crate cargo started (memchr)."""
    log = tmp_path / "build.log"
    log.write_text("   Compiling serde v1.0.0\n   Compiling memchr v2.8.3\n")
    stop_all.append(lto := _fake_cargo("--crate-name demo_server --crate-type bin -C lto"))
    assert _units(lto, 1) == [runner.RustcUnit("demo_server", "yes", "")]
    heartbeat = runner.Heartbeat(log, lto.pid)
    assert heartbeat.line(100.0) == (
        "optimising demo_server (codegen, fat LTO) for 0 s, the only crate still building (crate 2 so far)"
    )
    assert heartbeat.line(160.0).startswith("optimising demo_server (codegen, fat LTO) for 60 s,")
    stop_all.append(link := _fake_cargo("link:--crate-name demo_server -C lto=thin"))
    assert _units(link, 1, linking=True) == [runner.RustcUnit("demo_server", "thin", "cc")]
    assert runner.Heartbeat(log, link.pid).line(0.0).startswith("linking demo_server (cc) for 0 s")
    stop_all.append(two := _fake_cargo("--crate-name a -Clto=off", "--crate-name b"))
    assert [unit.state() for unit in _units(two, 2)] == ["optimising a (codegen)", "optimising b (codegen)"]
    assert runner.Heartbeat(log, two.pid).line(0.0) == "compiling memchr v2.8.3 (crate 2 so far)"  # the log's
    log.write_text(log.read_text() + "    Finished `release` profile [optimized] target(s) in 1.0s\n")
    assert runner.Heartbeat(log, lto.pid).line(0.0).startswith("2 crates built; Finished")  # cargo's word, once done


#: where cargo runs the build script of a package (``build/<pkg>-<16 hex>/build-script-build``)
_SCRIPT = "/tmp/x/target/release/build/{}-0123456789abcdef/build-script-build"


def _fake_build(*processes: str) -> subprocess.Popen[bytes]:
    """A process tree as cargo's while build scripts run: ``script:<pkg>`` a process named as the build script of
    ``<pkg>`` (``exec -a``, sleep), ``script+make:<pkg>`` one that runs a child named ``make``; any other entry
    the arguments of a rustc, as :func:`_fake_cargo`'s."""
    sleeper = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(30)'"
    parts = []
    for entry in processes:
        kind, _, package = entry.partition(":")
        if kind == "script":
            parts.append(f"(exec -a {_SCRIPT.format(package)} sleep 30) &")
        elif kind == "script+make":
            parts.append(f"(exec -a {_SCRIPT.format(package)} bash -c 'exec -a make sleep 30 & wait') &")
        else:
            parts.append(f"{sleeper} {entry} &")
    return subprocess.Popen(["bash", "-c", f"{' '.join(parts)} wait"], start_new_session=True)


def _programs(pid: int) -> list[str]:
    """The argv[0] of every process below ``pid``."""
    found, todo = [], runner._children(pid)
    while todo:
        child = todo.pop()
        found += runner._cmdline(child)[:1]
        todo += runner._children(child)
    return sorted(found)


def _started(proc: subprocess.Popen[bytes], *programs: str) -> list[str]:
    """Once exactly ``programs`` (argv[0], ``script:<pkg>`` the build script of ``<pkg>``, ``rustc`` the fake
    one) run below ``proc``, each past its exec: the packages of the build scripts among them."""
    wanted = sorted(
        _SCRIPT.format(name.removeprefix("script:"))
        if name.startswith("script:")
        else sys.executable
        if name == "rustc"
        else name
        for name in programs
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _programs(proc.pid) != wanted:
        time.sleep(0.02)
    assert _programs(proc.pid) == wanted
    return runner.build_scripts(proc.pid)


def test_the_build_scripts_running_when_no_rustc_is_are_named_with_for_how_long(
    tmp_path: Path, stop_all: list[subprocess.Popen[bytes]]
) -> None:
    """The new user's fd build: jemalloc-sys's build script ran configure and make for two minutes while the log
    named the last crate cargo started (normpath, the 63rd); a build script's own children (make) are its
    package's, and the file rustc writes while it compiles one (``deps/build_script_build-<hash>``) is not one."""
    log = tmp_path / "build.log"
    log.write_text("".join(f"   Compiling c{i} v0.1.0\n" for i in range(62)) + "   Compiling normpath v1.3.0\n")
    assert runner.last_progress_line(log) == "compiling normpath v1.3.0 (crate 63 so far)"
    deps = "/tmp/x/target/release/deps/build_script_build-0123456789abcdef"  # a build script, compiled
    stop_all.append(jemalloc := _fake_build("script+make:jemalloc-sys"))
    assert _started(jemalloc, "script:jemalloc-sys", "make") == ["jemalloc-sys"]
    heartbeat = runner.Heartbeat(log, jemalloc.pid)
    assert heartbeat.line(100.0) == "running the build script of jemalloc-sys for 0 s (crate 63 so far)"
    assert heartbeat.line(180.0) == "running the build script of jemalloc-sys for 80 s (crate 63 so far)"
    stop_all.append(two := _fake_build("script:ring", "script+make:jemalloc-sys"))
    assert _started(two, "script:ring", "script:jemalloc-sys", "make") == ["jemalloc-sys", "ring"]
    assert runner.Heartbeat(log, two.pid).line(0.0) == (
        "running the build scripts of jemalloc-sys, ring for 0 s (crate 63 so far)"
    )
    stop_all.append(
        compiled := subprocess.Popen(["bash", "-c", f"(exec -a {deps} sleep 30) & wait"], start_new_session=True)
    )
    assert _started(compiled, deps) == []
    assert runner.Heartbeat(log, compiled.pid).line(0.0) == "compiling normpath v1.3.0 (crate 63 so far)"


def test_a_build_script_beside_a_rustc_keeps_the_line_of_the_rustc_or_the_log(
    tmp_path: Path, stop_all: list[subprocess.Popen[bytes]]
) -> None:
    """While rustcs run too, the line is the only rustc's, or the log's. A new user's bat 0.26.1: for two
    minutes libgit2-sys's build script compiled libgit2's C while the line called serde_json, regex, crossterm…
    in turn "the only crate still building" (crates 93 to 155 of 168): beside a build script, it says so."""
    log = tmp_path / "build.log"
    log.write_text("   Compiling serde v1.0.0\n   Compiling memchr v2.8.3\n")
    stop_all.append(one := _fake_build("script:jemalloc-sys", "--crate-name a"))
    assert _started(one, "script:jemalloc-sys", "rustc") == ["jemalloc-sys"]
    assert _units(one, 1) == [runner.RustcUnit("a", "", "")]
    heartbeat = runner.Heartbeat(log, one.pid)
    assert heartbeat.line(100.0) == (
        "optimising a (codegen) for 0 s, beside the build script of jemalloc-sys for 0 s (crate 2 so far)"
    )
    assert heartbeat.line(140.0) == (
        "optimising a (codegen) for 40 s, beside the build script of jemalloc-sys for 40 s (crate 2 so far)"
    )
    stop_all.append(two := _fake_build("script+make:jemalloc-sys", "--crate-name a", "--crate-name b"))
    assert _started(two, "script:jemalloc-sys", "make", "rustc", "rustc") == ["jemalloc-sys"]
    assert runner.Heartbeat(log, two.pid).line(0.0) == "compiling memchr v2.8.3 (crate 2 so far)"
    log.write_text(log.read_text() + "    Finished `release` profile [optimized] target(s) in 1.0s\n")
    assert runner.Heartbeat(log, one.pid).line(0.0).startswith("2 crates built; Finished")  # cargo's word, once done


# --- query: a short command's output, with exactly the environment given ---------------------------------


def _tool(directory: Path, name: str, body: str) -> Path:
    """A shell script ``name`` in ``directory`` running ``body``."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_query_returns_the_exit_status_and_both_streams_with_exactly_the_env_given() -> None:
    done = runner.query(
        ["sh", "-c", 'echo "out $PGO_QUERY_TEST ${HOME:-no home}"; echo err >&2; exit 3'],
        env={"PATH": "/usr/bin:/bin", "PGO_QUERY_TEST": "given"},
    )
    assert done == runner.Output(
        ("sh", "-c", 'echo "out $PGO_QUERY_TEST ${HOME:-no home}"; echo err >&2; exit 3'), 3, "out given no home\n",
        "err\n",
    )  # fmt: skip


def test_query_finds_the_program_on_the_path_of_the_env_given_not_its_own(tmp_path: Path) -> None:
    _tool(tmp_path / "mine", "pgo-query-tool", "echo mine")
    _tool(tmp_path / "other", "pgo-query-tool", "echo other")
    env = {**os.environ, "PATH": f"{tmp_path / 'mine'}:/usr/bin:/bin"}
    assert runner.query(["pgo-query-tool"], env=env).stdout == "mine\n"
    with pytest.raises(FileNotFoundError):
        runner.query(["pgo-query-tool"], env={"PATH": "/usr/bin:/bin"})


def test_query_reads_its_stdin_from_nothing_and_replaces_bytes_that_are_not_utf8() -> None:
    done = runner.query(["sh", "-c", r"cat; printf 'a\377b'"], env={"PATH": "/usr/bin:/bin"})
    assert (done.returncode, done.stdout) == (0, "a\ufffdb")


def test_query_out_of_time_kills_the_child_and_says_so(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(runner.TimedOut) as timed_out:
        runner.query(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"], env={"PATH": "/usr/bin:/bin"}, timeout=0.5)
    assert time.monotonic() - started < 10
    assert "timed out after 0.5 seconds" in str(timed_out.value)
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


def test_query_of_a_child_killed_by_a_signal_is_negative() -> None:
    assert runner.query(["sh", "-c", "kill -9 $$"], env={"PATH": "/usr/bin:/bin"}).returncode == -signal.SIGKILL


def test_capture_runs_with_the_env_given_and_refuses_a_failure_in_one_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PGO_QUERY_TEST": "given"}
    assert runner.capture(["sh", "-c", "echo $PGO_QUERY_TEST"], env=env) == "given\n"
    with pytest.raises(CommandFailed) as failed:
        runner.capture(["sh", "-c", "echo first >&2; echo last >&2; exit 2"], env=env)
    assert failed.value.line() == "sh -c 'echo first >&2; echo last >&2; exit 2' failed with exit code 2: last"
    with pytest.raises(PgoError) as missing:
        runner.capture(["pgo-no-such-tool"], env=env)
    assert missing.value.line() == "pgo-no-such-tool: command not found (install it or put it on PATH)"
    with pytest.raises(PgoError) as nowhere:
        runner.capture(["true"], env=env, cwd=tmp_path / "gone")
    assert nowhere.value.line().startswith(f"cannot run true: working directory {tmp_path / 'gone'} does not exist")


def test_a_command_that_fails_where_its_log_filled_the_disk_says_so(tmp_path: Path) -> None:
    # a real full filesystem: the command's output (its log) cannot be written whole, and the command fails as a
    # build does when its target dir or records are full; the line names the cause, not only the exit code
    with small_tmpfs(tmp_path / "full", size="1m") as mnt:
        fill_up(mnt, leave=16 * 1024)
        script = "import sys; sys.stdout.write('x' * 200000); sys.stdout.flush(); sys.exit(101)"
        with pytest.raises(CommandFailed) as caught:
            runner.run(
                [sys.executable, "-c", script], env=dict(os.environ), log=mnt / "logs" / "x.log", what="the build"
            )
        assert caught.value.message.startswith("the build failed with exit code 101: No space left on device:")
        assert f"bytes free in {mnt / 'logs'} (free space in PGO_OUT" in caught.value.message
    done = tmp_path / "ok"
    with pytest.raises(CommandFailed) as caught:
        runner.run([sys.executable, "-c", "raise SystemExit(3)"], env=dict(os.environ), log=done / "y.log")
    assert "No space" not in caught.value.message  # a disk with room: the exit code alone
