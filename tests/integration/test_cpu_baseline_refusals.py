"""The baseline-CPU check refuses a binary that runs on the build machine but not on an SSE2-only processor,
in the two ways a server fails there that an instruction fault does not show: ``--build-info`` fails under the
baseline model, and the server does not start under it.

The binaries are real programs run under the real qemu-user: a C program (gcc's default, baseline x86-64 code)
that asks the processor, by CPUID, whether it has SSE3, as a program that picks its code by CPU features does,
and gives up without it. The build machine has SSE3; qemu's baseline model does not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import Pipeline, assert_refused

#: ``--build-info`` as the demo server prints it; a server (``--config FILE``) that exits 4 without SSE3;
#: with FAIL_BUILD_INFO, ``--build-info`` exits 3 without SSE3 as well
PROGRAM = r"""
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    __builtin_cpu_init();
    int newer = __builtin_cpu_supports("sse3");
    if (argc > 1 && strcmp(argv[1], "--build-info") == 0) {
        if (FAIL_BUILD_INFO && !newer) {
            fputs("needs SSE3\n", stderr);
            return 3;
        }
        puts("target=x86_64-unknown-linux-gnu\ntarget_features=fxsr,sse,sse2");
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "--config") == 0 && !newer) {
        fputs("this server needs SSE3\n", stderr);
        return 4;
    }
    return 2;
}
"""


def _program(tmp_path: Path, name: str, *, fail_build_info: bool) -> Path:
    source = tmp_path / "program.c"
    source.write_text(PROGRAM)
    binary = tmp_path / name
    subprocess.run(
        ["gcc", "-O2", f"-DFAIL_BUILD_INFO={int(fail_build_info)}", "-o", str(binary), str(source)], check=True
    )
    return binary


def _sse3_here() -> bool:
    return " pni " in Path("/proc/cpuinfo").read_text().replace("\n", " ")


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _sse3_here(), reason="the build machine has no SSE3")]


def test_build_info_that_fails_under_the_baseline_cpu_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = _program(tmp_path, "needs-sse3-info", fail_build_info=True)
    assert subprocess.run([binary, "--build-info"], capture_output=True, check=False).returncode == 0  # natively
    line = assert_refused(
        hello.nox("cpu-baseline", "--binary", str(binary)), "needs-sse3-info --build-info got exit code 3 under -cpu "
    )
    assert "qemu64,-pni" in line
    assert "build-info.log" in line


def test_server_that_does_not_start_under_the_baseline_cpu_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = _program(tmp_path, "needs-sse3-server", fail_build_info=False)
    line = assert_refused(
        hello.nox("cpu-baseline", "--binary", str(binary)), "needs-sse3-server did not start under -cpu qemu64,"
    )
    assert ": exit code 4: this server needs SSE3" in line
    assert "server.log" in line
