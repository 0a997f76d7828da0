"""The one process manager, on real child processes (a Python one-liner stands in for a server)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recipes import procs
from recipes.runner import log_tail
from tests.conftest import clean_env

#: prints a line, then waits for SIGTERM and exits with the status given as its argument
SERVER = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(int(sys.argv[1])))
print("listening", flush=True)
while True:
    time.sleep(0.05)
"""

#: ignores SIGTERM
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("listening", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize(
    ("returncode", "numbered", "named"),
    [
        (0, "exit code 0", "exit code 0"),
        (3, "exit code 3", "exit code 3"),
        (-9, "signal 9 (SIGKILL)", "killed by SIGKILL"),
        (-4, "signal 4 (SIGILL)", "killed by SIGILL (illegal instruction)"),
        (-99, "signal 99 (?)", "killed by signal 99"),
    ],
)
def test_describe_exit(returncode: int, numbered: str, named: str) -> None:
    assert procs.describe_exit(returncode) == numbered
    assert procs.describe_exit(returncode, numbered=False) == named


def _listening(log: Path) -> bool:
    return log.is_file() and "listening" in log.read_text()


def test_start_wait_stop_reap(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with procs.Child.start([sys.executable, "-c", SERVER, "0"], env=clean_env(), log=log) as child:
        assert child.alive() and child.returncode is None
        assert child.wait_for(lambda: _listening(log), 20)
        assert child.stop(20) == 0
        assert not child.alive() and child.returncode == 0
        assert child.tail() == "listening"
    assert child.returncode == 0  # leaving the block does not touch an ended child


def test_exit_status_after_sigterm_and_the_log_appended(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("earlier run\n")
    child = procs.Child.start([sys.executable, "-c", SERVER, "3"], env=clean_env(), log=log, append=True)
    with child:
        assert child.wait_for(lambda: "listening" in log.read_text(), 20)
        assert child.stop_or_kill(20) == 3
    assert log.read_text() == "earlier run\nlistening\n"
    assert log_tail(log, 5, joined=" | ") == "earlier run | listening"


def test_a_child_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with procs.Child.start([sys.executable, "-c", STUBBORN], env=clean_env(), log=log) as child:
        assert child.wait_for(lambda: _listening(log), 20)
        started = time.monotonic()
        assert child.stop(0.5) is None  # still running
        assert child.alive() and time.monotonic() - started < 5
        assert child.stop_or_kill(0.5) == -signal.SIGKILL
        assert procs.describe_exit(-signal.SIGKILL) == "signal 9 (SIGKILL)"


#: on SIGTERM, a graceful stop that takes its time (the seconds given as its argument), then exit code 0
LINGERING = """
import signal, sys, time
def linger(*_):
    time.sleep(float(sys.argv[1]))
    sys.exit(0)
signal.signal(signal.SIGTERM, linger)
print("listening", flush=True)
while True:
    time.sleep(0.05)
"""


def test_a_long_stop_is_told_every_interval_while_it_runs(tmp_path: Path) -> None:
    """The progress of a stop: called every ``every`` seconds while the child still runs, with the seconds
    waited; not once more after it exits; every interval until the limit when it does not."""
    log = tmp_path / "server.log"
    with procs.Child.start([sys.executable, "-c", LINGERING, "0.75"], env=clean_env(), log=log) as child:
        assert child.wait_for(lambda: _listening(log), 20)
        waited: list[float] = []
        assert child.stop(20, progress=waited.append, every=0.2) == 0
    assert 2 <= len(waited) <= 4, waited  # 0.2, 0.4, 0.6 (and 0.8 on a loaded machine) s of a 0.75 s stop
    assert waited == sorted(waited) and all(w >= 0.2 * (i + 1) for i, w in enumerate(waited)), waited
    with procs.Child.start([sys.executable, "-c", STUBBORN], env=clean_env(), log=log) as child:
        assert child.wait_for(lambda: _listening(log), 20)
        waited = []
        assert child.stop(0.5, progress=waited.append, every=0.2) is None
        assert len(waited) == 2 and child.alive()  # 0.2 and 0.4 s; at 0.5 s the limit, not a tick
        assert child.stop(0.1) is None  # no progress asked for: none told
    assert child.returncode == -signal.SIGKILL


def test_leaving_the_block_kills_a_running_child(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError),
        procs.Child.start([sys.executable, "-c", STUBBORN], env=clean_env(), log=tmp_path / "log") as child,
    ):
        raise RuntimeError("a phase failed")
    assert child.returncode == -signal.SIGKILL


def test_wait_for_gives_up_when_the_child_exits(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with procs.Child.start([sys.executable, "-c", "raise SystemExit(5)"], env=clean_env(), log=log) as child:
        started = time.monotonic()
        assert not child.wait_for(lambda: False, 30)
        assert time.monotonic() - started < 20
        assert child.returncode == 5


def test_standard_output_through_a_pipe(tmp_path: Path) -> None:
    log = tmp_path / "log"
    argv = [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"]
    with procs.Child.start(argv, env=clean_env(), log=log, pipe_stdout=True) as child:
        assert child.proc.stdout is not None
        assert child.proc.stdout.read() == b"out\n"
        assert child.stop(20) == 0
    assert log.read_text() == "err\n"


def test_log_tail_of_missing_and_empty_logs(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "none") == f"(no log at {tmp_path / 'none'})"
    assert log_tail(tmp_path / "none", joined=" | ") == ""
    (tmp_path / "empty").write_text("")
    assert log_tail(tmp_path / "empty") == "(empty log)"


# --- what a child leaves running ------------------------------------------------------------------------------


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    proc = procs.read_process(pid)
    return proc is not None and proc.running


def _daemon_server(tmp_path: Path, start: str) -> list[str]:
    """A shell "server" that starts ``start`` (which writes the daemon's pid to ``daemon.pid``), says it listens,
    and exits 0 on SIGTERM, leaving the daemon running."""
    pid_file = tmp_path / "daemon.pid"
    script = f"{start.format(pid=pid_file)}\ntrap 'exit 0' TERM\necho listening\nwhile :; do wait; done\n"
    return ["/bin/sh", "-c", script]


def _started(log: Path, pid_file: Path) -> bool:
    """The server listens and its daemon runs ``sleep`` (the fork has exec'd: the name in the line is sure)."""
    if not (_listening(log) and pid_file.is_file() and pid_file.read_text().strip().isdigit()):
        return False
    daemon = procs.read_process(int(pid_file.read_text()))
    return daemon is not None and daemon.name == "sleep"


@pytest.mark.parametrize(
    "start",
    [
        pytest.param("sleep 300 & echo $! > {pid}", id="in-its-group"),
        pytest.param("setsid sleep 300 & echo $! > {pid}", id="setsid"),
        pytest.param("(sleep 300 & echo $! > {pid})", id="double-fork"),
        pytest.param("(setsid sleep 300 & echo $! > {pid}) & wait", id="double-fork-and-setsid"),
        pytest.param("(env -i setsid sleep 300 & echo $! > {pid}) & wait", id="setsid-without-environment"),
    ],
)
def test_what_a_server_leaves_running_is_killed_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], start: str
) -> None:
    log, pid_file = tmp_path / "server.log", tmp_path / "daemon.pid"
    with procs.Child.start(_daemon_server(tmp_path, start), env=clean_env(), log=log, label="test server") as child:
        assert child.wait_for(lambda: _started(log, pid_file), 20)
        daemon = int(pid_file.read_text())
        assert _running(daemon)
        assert child.stop(20) == 0
        assert not _running(daemon), f"the daemon {daemon} still runs"
        assert procs.read_process(daemon) is None  # reaped, not a zombie of ours
    assert child.leftovers == [procs.Leftover(daemon, "sleep")]
    err = capsys.readouterr().err
    assert err == f"pgo: test server left 1 process running (pid {daemon}: sleep); killed them\n"


def test_a_leftover_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    log, pid_file = tmp_path / "server.log", tmp_path / "daemon.pid"
    start = "sh -c \"trap '' TERM; exec sleep 300\" & echo $! > {pid}"
    with procs.Child.start(_daemon_server(tmp_path, start), env=clean_env(), log=log) as child:
        assert child.wait_for(lambda: _started(log, pid_file), 20)
        daemon = int(pid_file.read_text())
        started = time.monotonic()
        assert child.stop(20) == 0
        assert procs.GRACE <= time.monotonic() - started < procs.GRACE + 10
    assert procs.read_process(daemon) is None
    assert child.leftovers == [procs.Leftover(daemon, "sleep")]


def test_held_leftovers_are_the_callers_to_tell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, pid_file, first = tmp_path / "server.log", tmp_path / "daemon.pid", tmp_path / "first.pid"
    argv = _daemon_server(tmp_path, f"sleep 300 & echo $! > {first}; sleep 301 & echo $! > {{pid}}")

    def both_started() -> bool:  # both forks have exec'd sleep (a loaded machine: one may still be sh)
        text = first.read_text().strip() if first.is_file() else ""
        daemon = procs.read_process(int(text)) if text.isdigit() else None
        return _started(log, pid_file) and daemon is not None and daemon.name == "sleep"

    with procs.Child.start(argv, env=clean_env(), log=log) as child:
        child.hold_leftovers = True
        assert child.wait_for(both_started, 20)
        assert child.stop(20) == 0
        line = child.take_leftovers()
        assert line is not None and line.startswith("left 2 processes running (pid ")
        assert line.endswith(": sleep); killed them") and line.count(": sleep") == 2
        assert child.take_leftovers() is None
    assert capsys.readouterr().err == ""  # taken: not said again at close


def test_a_killed_child_that_held_its_leftovers_says_them_at_close(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, pid_file = tmp_path / "server.log", tmp_path / "daemon.pid"
    with (
        pytest.raises(RuntimeError),
        procs.Child.start(
            _daemon_server(tmp_path, "setsid sleep 300 & echo $! > {pid}"), env=clean_env(), log=log
        ) as child,
    ):
        child.hold_leftovers = True
        assert child.wait_for(lambda: _started(log, pid_file), 20)
        raise RuntimeError("a phase failed")
    daemon = int(pid_file.read_text())
    assert child.returncode == -signal.SIGKILL and not _running(daemon)
    assert capsys.readouterr().err == f"pgo: sh left 1 process running (pid {daemon}: sleep); killed them\n"


def test_another_childs_processes_and_ours_from_before_are_left_alone(tmp_path: Path) -> None:
    """Two children at once (a server and the upstream backend): stopping one kills only what it left, not the
    other child, not what the other left, not a child of ours from before."""
    mine_from_before = subprocess.Popen(["sleep", "300"])
    try:
        first_log, first_pid = tmp_path / "first.log", tmp_path / "first" / "daemon.pid"
        second_log, second_pid = tmp_path / "second.log", tmp_path / "second" / "daemon.pid"
        first_pid.parent.mkdir()
        second_pid.parent.mkdir()
        start = "(setsid sleep 300 & echo $! > {pid}) & wait"
        first = procs.Child.start(_daemon_server(first_pid.parent, start), env=clean_env(), log=first_log)
        with (
            first,
            procs.Child.start(_daemon_server(second_pid.parent, start), env=clean_env(), log=second_log) as second,
        ):
            assert first.wait_for(lambda: _started(first_log, first_pid), 20)
            assert second.wait_for(lambda: _started(second_log, second_pid), 20)
            first_daemon, second_daemon = int(first_pid.read_text()), int(second_pid.read_text())
            # both daemons are children of this process now, both in sessions of their own
            assert {first_daemon, second_daemon} <= procs.children_of(os.getpid())
            assert first.stop(20) == 0
            assert first.leftovers == [procs.Leftover(first_daemon, "sleep")]
            assert second.alive() and _running(second_daemon) and mine_from_before.poll() is None
            assert second.stop(20) == 0
            assert second.leftovers == [procs.Leftover(second_daemon, "sleep")]
        assert not _running(first_daemon) and not _running(second_daemon)
        assert mine_from_before.poll() is None
    finally:
        mine_from_before.kill()
        mine_from_before.wait()


def test_a_child_that_leaves_nothing_reports_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    with procs.Child.start([sys.executable, "-c", SERVER, "0"], env=clean_env(), log=log) as child:
        assert child.wait_for(lambda: _listening(log), 20)
        assert child.stop(20) == 0
    assert child.leftovers == [] and capsys.readouterr().err == ""


def test_reap_group_of_a_run(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    argv = ["/bin/sh", "-c", f"setsid sleep 300 & echo $! > {pid_file}; sleep 301 & echo $! >> {pid_file}; exit 4"]
    proc, tag = procs.start_group(argv, clean_env(), stdin=subprocess.DEVNULL)
    reaped = procs.reap_group(proc, tag, time.monotonic() + 20)
    assert reaped.exited and reaped.returncode == 4 == proc.returncode
    assert {left.pid for left in reaped.leftovers} == {int(pid) for pid in pid_file.read_text().split()}
    assert not any(_running(left.pid) for left in reaped.leftovers)


def test_leftovers_line_names_the_first_few() -> None:
    left = [procs.Leftover(pid, "worker") for pid in range(100, 107)]
    assert procs.leftovers_line(left[:1]) == "left 1 process running (pid 100: worker); killed them"
    assert procs.leftovers_line(left) == (
        "left 7 processes running (pid 100: worker, pid 101: worker, pid 102: worker, pid 103: worker, "
        "pid 104: worker, …); killed them"
    )


def test_this_process_is_a_child_subreaper() -> None:
    """prctl(PR_GET_CHILD_SUBREAPER) says so; and the children listing agrees with a scan of /proc."""
    assert procs.become_subreaper()
    flag = ctypes.c_int(0)
    assert ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value == 1
    with subprocess.Popen(["sleep", "300"]) as proc:
        listed = procs.children_of(os.getpid())
        proc.kill()
    assert proc.pid in listed
    assert listed >= {p.pid for p in procs.all_processes().values() if p.ppid == os.getpid() and p.pid != proc.pid}


# --- spawn and wait_usage: a short-lived helper with exactly the environment given ----------------------------


def test_spawn_runs_with_exactly_the_env_given_its_output_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "helper.log"
    with log.open("wb") as out:
        proc = procs.spawn(
            ["sh", "-c", 'echo "out $PGO_SPAWN_TEST ${HOME:-no home}"; echo err >&2; cat'],
            env={"PATH": "/usr/bin:/bin", "PGO_SPAWN_TEST": "given"},
            stdout=out,
            stderr=procs.STDOUT,
        )
    waited = procs.wait_usage(proc, time.monotonic() + 30)
    assert waited.exited and waited.returncode == 0 == proc.returncode
    assert log.read_text() == "out given no home\nerr\n"  # stdin: nothing, so cat ends at once


def test_spawn_finds_the_program_on_the_path_of_the_env_given(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "pgo-spawn-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho mine\n")
    tool.chmod(0o755)
    proc = procs.spawn(
        ["pgo-spawn-tool"], env={"PATH": f"{tool.parent}:/usr/bin:/bin"}, stdout=procs.PIPE, stderr=procs.STDOUT
    )
    with procs.piped(proc.stdout) as stream:
        assert stream.read() == b"mine\n"
    assert procs.wait_usage(proc, time.monotonic() + 30).returncode == 0
    with pytest.raises(FileNotFoundError):
        procs.spawn(["pgo-spawn-tool"], env={"PATH": "/usr/bin:/bin"}, stdout=procs.DEVNULL, stderr=procs.DEVNULL)


def test_wait_usage_gives_the_cpu_time_of_the_child() -> None:
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    proc = procs.spawn([sys.executable, "-c", burn], env=clean_env(), stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    waited = procs.wait_usage(proc, time.monotonic() + 60)
    assert waited.exited and waited.returncode == 0
    assert waited.usage.ru_utime + waited.usage.ru_stime >= 0.3


def test_wait_usage_kills_a_child_still_running_at_its_deadline() -> None:
    proc = procs.spawn(["sleep", "30"], env=clean_env(), stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    started = time.monotonic()
    waited = procs.wait_usage(proc, started + 0.3)
    assert time.monotonic() - started < 10
    assert (waited.exited, waited.returncode) == (False, -signal.SIGKILL)
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)  # reaped


def test_a_running_child_is_recorded_and_its_record_goes_when_it_is_reaped(tmp_path: Path) -> None:
    folder = tmp_path / "children"
    with procs.recording_children(folder):
        child = procs.Child.start([sys.executable, "-c", SERVER, "0"], env=clean_env(), log=tmp_path / "log")
        with child:
            record = (folder / str(child.pid)).read_text().split()
            started = procs.read_process(child.pid)
            assert started is not None
            assert record[:2] == [str(child.pid), str(started.started)]
            assert record[2].startswith(f"{os.getpid():010d}.")
    assert not list(folder.iterdir())


def test_reclaim_kills_a_recorded_child_still_running_and_never_a_reused_pid(tmp_path: Path) -> None:
    """A record whose pid runs with the recorded start time is an orphan (killed); one whose pid now has another
    start time is another process (spared); the records go either way."""
    folder = tmp_path / "children"
    folder.mkdir()
    orphan = subprocess.Popen([sys.executable, "-c", SERVER, "0"], stdout=subprocess.PIPE, start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", SERVER, "0"], stdout=subprocess.PIPE, start_new_session=True)
    try:
        for proc in (orphan, stranger):
            assert proc.stdout is not None
            proc.stdout.readline()
        orphan_stat, stranger_stat = procs.read_process(orphan.pid), procs.read_process(stranger.pid)
        assert orphan_stat is not None and stranger_stat is not None
        (folder / str(orphan.pid)).write_text(f"{orphan.pid} {orphan_stat.started} 0.0-3\n")  # a session gone
        (folder / str(stranger.pid)).write_text(f"{stranger.pid} {stranger_stat.started - 1} 0.0-4\n")
        (folder / "garbage").write_text("not a record")
        left = procs.reclaim(folder)
        assert [(left.pid, left.name) for left in left] == [(orphan.pid, orphan_stat.name)]
        assert orphan.wait(timeout=10) == 0  # its SIGTERM handler exits 0
        assert stranger.poll() is None
        assert not list(folder.iterdir())
    finally:
        for proc in (orphan, stranger):
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def test_reclaim_of_a_folder_that_is_not_there_is_nothing(tmp_path: Path) -> None:
    assert procs.reclaim(tmp_path / "absent") == []


def test_reclaim_passes_over_what_is_not_a_record(tmp_path: Path) -> None:
    """A fifo among the records was read, and the next session in the work dir waited forever for a writer;
    garbage, a folder and a fifo are no record of a child: nothing to kill, and they go as any record."""
    folder = tmp_path / "children"
    folder.mkdir()
    (folder / "garbage").write_text("not a record")
    (folder / "folder").mkdir()
    os.mkfifo(folder / "fifo")
    assert procs.reclaim(folder) == []


def test_reclaim_leaves_the_children_of_a_session_still_running(tmp_path: Path) -> None:
    """Two sessions in one work dir at once: the second does not take the first's running children for orphans."""
    folder = tmp_path / "children"
    with procs.recording_children(folder):
        child = procs.Child.start([sys.executable, "-c", SERVER, "0"], env=clean_env(), log=tmp_path / "log")
        with child:
            assert procs.reclaim(folder) == []
            assert child.alive()
            assert (folder / str(child.pid)).is_file()


# --- a program that cannot be started: one line, whatever the door ------------------------------------------------


@pytest.mark.refuses("program-cannot-start")
def test_a_program_that_cannot_start_is_one_line_through_every_door(tmp_path: Path) -> None:
    """Before, procs and the runner raised any OSError but E2BIG as it was: a workload's setup command that removed
    the trained binary left the next phase's start a FileNotFoundError's traceback; a file without its x bit, or a
    folder, a PermissionError's."""
    from recipes.errors import PgoError  # noqa: PLC0415
    from recipes.runner import run  # noqa: PLC0415

    env = {"PATH": "/usr/bin:/bin"}
    gone = tmp_path / "generate-target" / "hello-pgo"
    plain = tmp_path / "data.txt"
    plain.write_text("not a program\n")
    lines = {
        gone: f"cannot run {gone}: there is no such file (it was removed, or never made)",
        plain: f"cannot run {plain}: Permission denied",
        tmp_path: f"cannot run {tmp_path}: Permission denied",
    }

    def start(door: str, program: Path) -> object:
        argv = [str(program)]
        if door == "start_group":
            return procs.start_group(argv, env, stdout=procs.DEVNULL)
        if door == "Child":
            return procs.Child.start(argv, env=env, log=tmp_path / "child.log")
        if door == "spawn":
            return procs.spawn(argv, env=env, stdout=procs.DEVNULL, stderr=procs.DEVNULL)
        return run(argv, env=env, log=tmp_path / "run.log")

    for program, line in lines.items():
        for door in ("start_group", "Child", "spawn", "run"):
            with pytest.raises(PgoError) as refused:
                start(door, program)
            assert refused.value.message == line, door
    with pytest.raises(PgoError) as missing:  # a command by name, and a working directory, as they were
        procs.start_group(["pgo-no-such-tool"], env, stdout=procs.DEVNULL)
    assert missing.value.line() == "pgo-no-such-tool: command not found (install it or put it on PATH)"
    with pytest.raises(PgoError) as nowhere:
        procs.start_group([str(plain)], env, cwd=tmp_path / "gone", stdout=procs.DEVNULL)
    assert nowhere.value.message == f"cannot run {plain}: working directory {tmp_path / 'gone'} does not exist"
