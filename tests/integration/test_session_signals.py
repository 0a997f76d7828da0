"""Children die with the session: SIGTERM to nox's process group (a CI cancel, ``docker stop``, ``timeout``) during
a hanging command phase and during a server phase stops every process the pipeline started, which /proc then
shows gone, and the session ends in one line with the train record a failure; a SIGKILL'd train leaves its
child running, and the next session in that work dir kills it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, Pipeline, assert_ok, assert_refused, nox_argv, start_nox

pytestmark = [pytest.mark.slow]

#: a command phase that runs far longer than any test: collatz up to 10^11 on the instrumented hello
HANGING_COMMAND = """[workload]
description = "a command phase that does not end in the test's time"

[[instance]]
name = "cli"
mode = "command"

[[instance.phase]]
name = "forever"
kind = "command"
args = ["collatz", "100000000000"]
"""

#: the bare server trained by one HTTP phase of far more requests than the test waits for
HANGING_SERVER = """[workload]
description = "a server phase that does not end in the test's time"

[[instance]]
name = "srv"
mode = "server"
args = ["{http_port}"]
exit_on_sigterm = true

[[instance.phase]]
name = "endless"
kind = "http"
protocol = "h1"
path = "/square/12345"
requests = 100000000
"""


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _running(pid: int) -> bool:
    return _state(pid) not in {None, "Z", "X"}


def _tagged_by(nox_pid: int) -> list[int]:
    """The running processes whose owner tag names the nox process ``nox_pid`` (the pipeline's children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"PGO_PROCS_OWNER={nox_pid}.".encode() in environ and _running(int(entry.name)):
            found.append(int(entry.name))
    return found


def _recorded_children(work: Path, within: float = 120) -> list[int]:
    """The pids the session recorded in ``<work>/children`` once there is one (the child it is running)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        folder = work / "children"
        pids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
        if pids and all(_running(pid) for pid in pids):
            return pids
        time.sleep(0.1)
    raise AssertionError(f"no child recorded in {work / 'children'} within {within} s")


def _instrumented(tmp_path_factory: pytest.TempPathFactory, fixture: str, workload: str) -> Pipeline:
    root = tmp_path_factory.mktemp(f"{fixture}-signals")
    path = root / "hang.toml"
    path.write_text(workload)
    pipeline = Pipeline(root, fixture, workload=str(path))
    assert_ok(pipeline.nox("instrument"))
    return pipeline


@pytest.fixture(scope="module")
def hello_hanging(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """hello instrumented once, with a workload whose one command phase does not end in a test's time."""
    return _instrumented(tmp_path_factory, "hello", HANGING_COMMAND)


def _terminated(pipeline: Pipeline, sig: signal.Signals, *, group: bool) -> subprocess.CompletedProcess[str]:
    """``nox -s train`` started in a group of its own, ``sig`` sent (to its group, else to nox alone) once the
    pipeline's child runs: its end."""
    nox = subprocess.Popen(  # merge after it: skipped, not run on a training that did not finish
        [*nox_argv("train"), "merge"],
        cwd=REPO,
        env=pipeline.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        children = _recorded_children(pipeline.work)
        (os.killpg if group else os.kill)(nox.pid, sig)
        out, _ = nox.communicate(timeout=60)
    finally:
        if nox.poll() is None:
            os.killpg(nox.pid, signal.SIGKILL)
            nox.wait()
    for pid in children:
        assert not _running(pid), f"the pipeline's child {pid} outlived the session"
    assert _tagged_by(nox.pid) == []
    return subprocess.CompletedProcess(nox.args, nox.returncode, out, "")


@pytest.mark.refuses("session-interrupted-sigterm-sighup")
@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGTERM, True), (signal.SIGHUP, False), (signal.SIGINT, True)],
    ids=["sigterm-to-group", "sighup-to-nox", "sigint-to-group"],  # SIGINT: Ctrl-C, nox's bare "interrupted." before
)
def test_a_signal_during_a_command_phase_stops_the_run_and_fails_the_train_record(
    hello_hanging: Pipeline, sig: signal.Signals, group: bool
) -> None:
    started = time.monotonic()
    ended = _terminated(hello_hanging, sig, group=group)
    assert time.monotonic() - started < 120
    line = assert_refused(ended, f"interrupted by {sig.name}: stopped every process the session had started")
    assert line.count("interrupted") == 1
    assert f"Session merge skipped: not run: an earlier session of this nox run was interrupted by {sig.name}" in (
        ended.stdout
    )
    train = json.loads((hello_hanging.work / "report.json").read_text())["train"]
    assert train["failed"].startswith(f"interrupted by {sig.name}"), train
    assert not [p for p in (hello_hanging.work / "children").iterdir() if not p.name.startswith(".")]


def test_a_sigkilled_train_leaves_its_child_which_the_next_session_kills(hello_hanging: Pipeline) -> None:
    nox = start_nox("train", hello_hanging.env(), start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        (orphan,) = _recorded_children(hello_hanging.work)
    finally:
        os.killpg(nox.pid, signal.SIGKILL)  # nox's group: the child, in a session of its own, is not in it
        nox.wait()
    try:
        assert _running(orphan), "the SIGKILL should have left the instrumented run running"
        later = hello_hanging.nox("merge")  # any session of this work dir: merge then refuses the unfinished train
        text = later.stdout + later.stderr
        assert "Traceback" not in text
        assert f"that was killed left 1 process running (pid {orphan}: hello-pgo); killed them" in text, text[-3000:]
        deadline = time.monotonic() + 10
        while _running(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(orphan)
        assert not [p for p in (hello_hanging.work / "children").iterdir() if not p.name.startswith(".")]
    finally:
        if _running(orphan):
            os.kill(orphan, signal.SIGKILL)


@pytest.mark.server
@pytest.mark.refuses("session-interrupted-sigterm-sighup")
def test_sigterm_to_the_group_during_a_server_phase_stops_server_and_load(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    server = _instrumented(tmp_path_factory, "bare-server", HANGING_SERVER)
    nox = start_nox("train", server.env(PGO_PHASE_TIMEOUT="600"), start_new_session=True)
    try:
        _recorded_children(server.work)
        deadline = time.monotonic() + 60
        while len(_recorded_children(server.work)) < 2 and time.monotonic() < deadline:  # the server and h2load
            time.sleep(0.1)
        children = _recorded_children(server.work)
        os.killpg(nox.pid, signal.SIGTERM)
        out, _ = nox.communicate(timeout=60)
    finally:
        if nox.poll() is None:
            os.killpg(nox.pid, signal.SIGKILL)
            nox.wait()
    assert len(children) == 2, children
    for pid in children:
        assert not _running(pid), f"the pipeline's child {pid} outlived the session"
    assert _tagged_by(nox.pid) == []
    assert_refused(subprocess.CompletedProcess(nox.args, nox.returncode, out, ""), "interrupted by SIGTERM")
    train = json.loads((server.work / "report.json").read_text())["train"]
    assert train["failed"].startswith("interrupted by SIGTERM"), train
