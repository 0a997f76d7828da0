"""A tokio server (tests/fixtures/tokio-server: a multi-threaded runtime, SIGTERM handled by ``tokio::signal``, the
shape of actix-web and axum servers) built instrumented for aarch64 once per module and trained under the real
``qemu-aarch64`` (issue 35: an actix-web server that stopped in 0.34 s natively did not exit within 600 s of SIGTERM
under qemu): it stops promptly and writes its ``.profraw``; a server that takes its time to stop is told about
while the training waits; with ``exit_on_sigterm = true`` its own stop runs, not the shim's exit; one that does not
stop within the limit is refused in words that say what differs under emulation, and killed."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from recipes.errors import TrainingFailed
from recipes.toolchain import emulation
from recipes.train import server
from tests.conftest import Pipeline, assert_ok, clean_env, train_workload
from tests.integration.test_aarch64 import SYSROOT, TARGET, _target_installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.server,
    pytest.mark.skipif(emulation.host_arch() != "x86_64", reason="these tests cross from x86_64 to aarch64"),
    pytest.mark.skipif(
        not _target_installed()
        or shutil.which("aarch64-linux-gnu-gcc") is None
        or shutil.which("qemu-aarch64") is None,
        reason=f"needs `rustup target add {TARGET}`, gcc-aarch64-linux-gnu and qemu-user (.ci/run installs them)",
    ),
]


def _workload(path: Path, *, linger_ms: int = 0, instance: str = "") -> Path:
    """Two small phases against the server; ``linger_ms``: how long it takes to stop after SIGTERM."""
    path.write_text(
        '[workload]\ndescription = "tokio-server under qemu"\nmin_functions = 5\n\n'
        f'[[instance]]\nname = "srv"\nmode = "server"\nargs = ["{{http_port}}", "{linger_ms}"]\n{instance}\n'
        '[[instance.phase]]\nname = "square"\nkind = "http"\nprotocol = "h1"\npath = "/square/12345"\n'
        "requests = 200\n\n"
        '[[instance.phase]]\nname = "missing"\nkind = "http"\nprotocol = "h1"\npath = "/no/such/page"\n'
        'requests = 50\nexpect = "404"\n'
    )
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pipeline, str]:
    """tokio-server built instrumented for aarch64 (``nox -s instrument``) and trained under qemu (``nox -s
    train``), as a user runs them."""
    root = tmp_path_factory.mktemp("tokio-aarch64")
    pipeline = Pipeline(root, "tokio-server", workload=str(_workload(root / "tokio-server.toml")))
    assert_ok(pipeline.nox("instrument", PGO_TARGET=TARGET))
    return pipeline, assert_ok(pipeline.nox("train", PGO_TARGET=TARGET))


def _instrumented(pipeline: Pipeline) -> Path:
    return Path(json.loads((pipeline.work / "report.json").read_text())["instrument"]["binary"])


def test_the_tokio_server_under_qemu_stops_promptly_on_sigterm_and_writes_its_profile(
    trained: tuple[Pipeline, str],
) -> None:
    pipeline, text = trained
    report = json.loads((pipeline.work / "report.json").read_text())
    assert report["train"]["profraw_files"] == 1  # exited 0 under qemu: the profile runtime's atexit ran
    assert report["train"]["requests"] == 250
    assert re.search(r"instance srv: starting \S*qemu-aarch64 \S+/tokio-server \d+ 0 ", text), text[-3000:]
    stopped = re.search(r"instance srv: stopped in ([0-9.]+) s \(exit code 0\)", text)
    assert stopped, text[-3000:]
    assert float(stopped.group(1)) < 5  # natively a few ms; never near the 600 s limit under emulation
    assert "waiting for the server" not in text  # under STOP_PROGRESS_EVERY: no progress line
    log = (pipeline.work / "logs" / "train-srv-server.log").read_text()
    assert "tokio-server: SIGTERM, stopping" in log and "tokio-server: stopped" in log


def test_a_server_that_takes_its_time_to_stop_under_qemu_is_told_about(
    trained: tuple[Pipeline, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """It lingers 2.5 s after SIGTERM (a graceful drain): the stop's progress line every second here (every
    ``STOP_PROGRESS_EVERY`` = 10 s in a real training), then it exits 0 and its profile is written."""
    pipeline, _ = trained
    monkeypatch.setattr(server, "STOP_PROGRESS_EVERY", 1.0)
    run = train_workload(
        tmp_path,
        _workload(tmp_path / "linger.toml", linger_ms=2500),
        _instrumented(pipeline),
        profraw=True,
        launcher=emulation.launcher(TARGET, clean_env()),
        env={"QEMU_LD_PREFIX": SYSROOT},
    )
    assert run.profraw_files == 1
    err = capfd.readouterr().err
    told = re.findall(r"instance srv: waiting for the server \(pid \d+\) to exit after SIGTERM: (\d+) s of 600 s", err)
    assert told[:2] == ["1", "2"] and len(told) <= 4, err[-3000:]  # 1 s, 2 s (3 s on a loaded machine)
    assert re.search(r"instance srv: stopped in [2-9]\.\d\d s \(exit code 0\)", err), err[-3000:]


def test_with_exit_on_sigterm_the_tokio_servers_own_stop_runs_under_qemu(
    trained: tuple[Pipeline, str], tmp_path: Path
) -> None:
    """``exit_on_sigterm = true`` on a server with a SIGTERM handler of its own: tokio's (signal-hook-registry)
    calls the handler it replaced, the shim's, first; the shim does nothing then, and the server's own stop runs,
    rather than exit(0) from inside the signal handler on whichever emulated thread took it."""
    pipeline, _ = trained
    run = train_workload(
        tmp_path,
        _workload(tmp_path / "shim.toml", instance="exit_on_sigterm = true"),
        _instrumented(pipeline),
        profraw=True,
        launcher=emulation.launcher(TARGET, clean_env()),
        env={"QEMU_LD_PREFIX": SYSROOT},
    )
    assert run.profraw_files == 1
    assert list((tmp_path / "work" / "bin").glob("pgo-exit-on-sigterm-*-aarch64.so"))  # the shim was preloaded
    log = (tmp_path / "work" / "logs" / "train-srv-server.log").read_text()
    assert "tokio-server: SIGTERM, stopping (linger 0 ms)" in log and "tokio-server: stopped" in log, log


@pytest.mark.refuses("server-does-not-exit-after-sigterm-under-emulation")
def test_a_server_that_does_not_stop_under_qemu_is_refused_saying_what_differs(
    trained: tuple[Pipeline, str], tmp_path: Path
) -> None:
    """``stop_timeout = 0.2`` is 2 s under emulation (10 times longer); the server lingers a minute: killed after
    2 s, and the line names qemu, the stretched limit, the lost profile, the kept build and what to try."""
    pipeline, _ = trained
    binary = _instrumented(pipeline)
    started = time.monotonic()
    with pytest.raises(TrainingFailed) as caught:
        train_workload(
            tmp_path,
            _workload(tmp_path / "stubborn.toml", linger_ms=60_000, instance="stop_timeout = 0.2"),
            binary,
            profraw=True,
            launcher=emulation.launcher(TARGET, clean_env()),
            env={"QEMU_LD_PREFIX": SYSROOT},
        )
    line = caught.value.line()
    assert line.startswith(
        "instance srv: the server did not exit within 2 s of SIGTERM under qemu-aarch64 "
        "(stop_timeout 0.2 s, 10 times longer under emulation)"
    ), line
    assert (
        "killing it lost this instance's .profraw, written only at exit, but the instrumented build is kept: "
        "nox -s train trains it again" in line
    )
    qemu = emulation.launcher(TARGET, clean_env())[0]
    assert re.search(
        rf"try it by hand: QEMU_LD_PREFIX={re.escape(SYSROOT)} {re.escape(qemu)} {re.escape(str(binary))} \d+ 60000, "
        "then kill -TERM its pid; ",
        line,
    ), line
    assert "\n" not in line
    assert time.monotonic() - started < 60  # killed at the limit, not after its linger
    assert not list((tmp_path / "profraw").glob("*.profraw"))
