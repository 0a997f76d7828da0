"""The baseline-CPU check under qemu-user on the hello fixture: a baseline build passes, an x86-64-v3 one dies
with SIGILL, and the emulation's own controls prove it refuses what it should."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.release import cpu
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env

pytestmark = pytest.mark.slow

TRIPLE = "x86_64-unknown-linux-gnu"
VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def test_controls_die_under_the_baseline_model_and_run_under_max(tmp_path: Path) -> None:
    results = cpu.check_controls(tmp_path, dict(os.environ))
    assert results == {
        name: {"baseline": "killed by SIGILL (illegal instruction)", "max": "exit code 0"} for name in ("sse3", "avx2")
    }
    assert not list(tmp_path.glob("*.core"))


@pytest.mark.refuses("cpu-baseline-command-dies-sigill-under-baseline")
def test_x86_64_v3_pgo_build_is_reported_and_fails_the_check(hello: Pipeline) -> None:
    text = assert_ok(hello.nox("pgo", **{VAR: "-Ctarget-cpu=x86-64-v3"}))
    assert "warning: the build's flags set target-cpu=x86-64-v3" in text
    assert "the flags set target-cpu=x86-64-v3: not a baseline release build" in text
    optimised = _report(hello)["optimise"]
    assert optimised["target_cpu"] == "x86-64-v3"
    assert optimised["rustflags"].startswith("-Ctarget-cpu=x86-64-v3 -Cprofile-use=")
    line = assert_refused(hello.nox("cpu-baseline", "--run", "primes", "100"), "hello-pgo died with SIGILL")
    assert "under an SSE2-only CPU (-cpu qemu64,-pni," in line
    assert "no -Ctarget-cpu or -Ctarget-feature" in line
    # natively the same binary runs: it is the processor model, not the arguments
    native = subprocess.run([optimised["binary"], "primes", "100"], capture_output=True, text=True, check=True)
    assert native.stdout.strip() == "primes: 25"


@pytest.mark.refuses("cpu-baseline-command-fails-under-baseline-cpu")
def test_baseline_build_passes_and_a_failing_command_is_reported(hello: Pipeline, tmp_path: Path) -> None:
    target_dir = tmp_path / "plain"
    subprocess.run(
        ["cargo", "build", "--release", "--target", TRIPLE, "--target-dir", str(target_dir)],
        cwd=hello.crate_dir,
        env=clean_env(),
        check=True,
        capture_output=True,
    )
    binary = target_dir / TRIPLE / "release" / "hello-pgo"
    text = assert_ok(hello.nox("cpu-baseline", "--binary", str(binary), "--run", "collatz", "500"))
    assert "ran: collatz 500: exit code 0" in text
    assert "controls: sse3 killed by SIGILL (illegal instruction) (max: exit code 0)" in text
    # not recorded in the work dir's report: that binary is not the work dir's
    assert not (hello.work / "report.json").exists()
    line = assert_refused(hello.nox("cpu-baseline", "--binary", str(binary), "--run", "fail"))
    assert "hello-pgo fail got exit code 3 under -cpu qemu64" in line
    assert "(natively: exit code 3)" in line


@pytest.mark.refuses(
    "cpu-baseline-unknown-session-argument",
    "cpu-baseline-work-dir-names-no-optimised",
    "cpu-baseline-build-info-fails-natively",
)
def test_a_binary_that_is_not_a_server_needs_its_arguments(hello: Pipeline, tmp_path: Path) -> None:
    assert_refused(hello.nox("cpu-baseline"), "names no optimised binary", "--binary PATH")
    line = assert_refused(hello.nox("cpu-baseline", "--binary", "/bin/true", "--cpu", "max"), "unknown argument")
    assert "--cpu" in line
    script = tmp_path / "not-a-server"
    script.write_text("#!/bin/sh\necho usage >&2\nexit 2\n")
    script.chmod(0o755)
    line = assert_refused(hello.nox("cpu-baseline", "--binary", str(script)), "--build-info got exit code 2")
    assert "--run ARG" in line
