"""The baseline-CPU check refuses a binary that runs on the build machine but not on an SSE2-only processor,
in the two ways a server fails there that an instruction fault does not show: ``--build-info`` fails under the
baseline model, and the server does not start under it.

The binaries are real programs run under the real qemu-user: a C program (gcc's default, baseline x86-64 code)
that asks the processor, by CPUID, whether it has SSE3, as a program that picks its code by CPU features does,
and gives up without it. The build machine has SSE3; qemu's baseline model does not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Pipeline, assert_refused, clean_env

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


@pytest.mark.refuses("cpu-baseline-build-info-fails-under-baseline")
def test_build_info_that_fails_under_the_baseline_cpu_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = _program(tmp_path, "needs-sse3-info", fail_build_info=True)
    assert subprocess.run([binary, "--build-info"], capture_output=True, check=False).returncode == 0  # natively
    line = assert_refused(
        hello.nox("cpu-baseline", "--binary", str(binary)), "needs-sse3-info --build-info got exit code 3 under -cpu "
    )
    assert "qemu64,-pni" in line
    assert "build-info.log" in line


@pytest.mark.refuses("cpu-baseline-server-does-not-start-under")
def test_server_that_does_not_start_under_the_baseline_cpu_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = _program(tmp_path, "needs-sse3-server", fail_build_info=False)
    line = assert_refused(
        hello.nox("cpu-baseline", "--binary", str(binary)), "needs-sse3-server did not start under -cpu qemu64,"
    )
    assert ": exit code 4: this server needs SSE3" in line
    assert "server.log" in line


#: a server that binds a loopback port of its own, says it the demo server's way, and answers each connection's
#: request with 200 when the processor has SSE3; without it, 503 or (CLOSE_WITHOUT_ANSWER) nothing at all
SERVER = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char OK[] = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
static const char BUSY[] = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

int main(int argc, char **argv) {
    __builtin_cpu_init();
    int newer = __builtin_cpu_supports("sse3");
    if (argc > 1 && strcmp(argv[1], "--build-info") == 0) {
        puts("target=x86_64-unknown-linux-gnu\ntarget_features=fxsr,sse,sse2");
        return 0;
    }
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, (struct sockaddr *)&addr, len) != 0 || listen(listener, 8) != 0) return 5;
    getsockname(listener, (struct sockaddr *)&addr, &len);
    printf("listening http=127.0.0.1:%d https=127.0.0.1:%d\n", ntohs(addr.sin_port), ntohs(addr.sin_port));
    fflush(stdout);
    for (;;) {
        int conn = accept(listener, NULL, NULL);
        if (conn < 0) return 6;
        char request[4096];
        if (read(conn, request, sizeof request) > 0 && (newer || !CLOSE_WITHOUT_ANSWER)) {
            const char *answer = newer ? OK : BUSY;
            if (write(conn, answer, strlen(answer)) < 0) return 7;
        }
        close(conn);
    }
}
"""


@pytest.mark.refuses("cpu-baseline-server-fails-request-answers-other")
@pytest.mark.parametrize(
    ("close_without_answer", "said"),
    [
        (False, r"HTTP/1\.1 http://127\.0\.0\.1:\d+/health: got '503 1\.1', expected '200 1\.1'"),
        (True, r"HTTP/1\.1 request http://127\.0\.0\.1:\d+/health failed under -cpu qemu64,\S+: curl"),
    ],
    ids=["answers-503", "answers-nothing"],
)
def test_server_that_fails_its_requests_under_the_baseline_cpu_refused(
    hello: Pipeline, tmp_path: Path, close_without_answer: bool, said: str
) -> None:
    source = tmp_path / "server.c"
    source.write_text(SERVER)
    binary = tmp_path / "busy-server"
    subprocess.run(
        ["gcc", "-O2", f"-DCLOSE_WITHOUT_ANSWER={int(close_without_answer)}", "-o", str(binary), str(source)],
        check=True,
    )
    assert subprocess.run([binary, "--build-info"], capture_output=True, check=False).returncode == 0
    line = assert_refused(hello.nox("cpu-baseline", "--binary", str(binary)))
    assert re.search(said, line), line
    assert "server.log" in line


def _old_qemu(tmp_path: Path, model: str) -> str:
    """A PATH whose ``qemu-x86_64`` is the real one, made to ignore ``-cpu`` and emulate ``model`` whatever it is
    asked, as a qemu without the model asked for would: the qemu this machine cannot install."""
    real = shutil.which("qemu-x86_64")
    assert real is not None
    folder = tmp_path / "old-qemu"
    folder.mkdir()
    wrapper = folder / "qemu-x86_64"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1" = "-cpu" ]; then shift 2; exec {real} -cpu {model} "$@"; fi\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return f"{folder}{os.pathsep}{clean_env()['PATH']}"


@pytest.mark.refuses("cpu-baseline-qemu-does-not-refuse-control")
def test_qemu_that_does_not_refuse_the_control_program_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = _program(tmp_path, "needs-sse3-server", fail_build_info=False)
    proc = hello.nox("cpu-baseline", "--binary", str(binary), PATH=_old_qemu(tmp_path, "max"))
    line = assert_refused(
        proc, "the emulation does not refuse sse3: the control program got exit code 0 under -cpu qemu64,"
    )
    assert "not SIGILL" in line


@pytest.mark.refuses("cpu-baseline-qemu-does-not-refuse-control")
def test_qemu_that_does_not_run_the_control_program_under_max_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = _program(tmp_path, "needs-sse3-server", fail_build_info=False)
    proc = hello.nox("cpu-baseline", "--binary", str(binary), PATH=_old_qemu(tmp_path, "qemu64,-pni"))
    assert_refused(proc, "the sse3 control program got killed by SIGILL", "under -cpu max, where it must run")
