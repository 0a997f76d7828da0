"""The exit_on_sigterm shim (recipes/train/sigterm.py): built with the system's C compiler, refused without one."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from recipes.errors import ToolchainError
from recipes.train import sigterm
from tests.conftest import clean_env

#: a server's own SIGTERM handler installed in main, calling the one it replaced first as signal-hook-registry does
#: (tokio::signal, actix-rt); its own stop: "own stop", exit code 3; with argv[1] "none", no handler of its own
CHAINING = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous;
static volatile sig_atomic_t stopping = 0;

static void own(int signum) {
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signum);
    }
    stopping = 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "none") != 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = own;
        sigemptyset(&action.sa_mask);
        sigaction(SIGTERM, &action, &previous);
    }
    puts("listening");
    fflush(stdout);
    while (!stopping) {
        usleep(10000);
    }
    puts("own stop");
    return 3;
}
"""


@pytest.mark.refuses("exit-sigterm-no-c-compiler-for-shim")
def test_no_c_compiler_for_the_shim_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"exit_on_sigterm needs a C compiler \(cc\) .*apt-get install -y gcc, or"):
        sigterm.shim(tmp_path / "shim", {"PATH": str(tmp_path)})
    assert not (tmp_path / "shim").exists()


def test_the_shim_is_built_with_cc(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    library = sigterm.shim(tmp_path / "shim", {"PATH": "/usr/bin:/bin"})
    assert library.is_file() and library.suffix == ".so"


def _stopped(program: Path, library: Path, *args: str) -> tuple[int, str]:
    """``program`` started with the shim preloaded, sent SIGTERM once it is up: its exit status and output."""
    env = sigterm.preload_env(clean_env(), library)
    with subprocess.Popen([str(program), *args], env=env, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "listening\n"
        time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=20)
        return child.returncode, out


def test_the_shim_defers_to_a_servers_own_handler_even_one_that_calls_it(tmp_path: Path) -> None:
    """Without a handler of its own the server exits 0 by the shim; with one that calls the handler it replaced
    first (as tokio and actix-web servers' do, through signal-hook-registry), the server's own stop runs and the
    shim's exit(0) does not, from inside that signal handler."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    library = sigterm.shim(tmp_path / "shim", {"PATH": "/usr/bin:/bin"})
    source = tmp_path / "chaining.c"
    source.write_text(CHAINING)
    program = tmp_path / "chaining"
    subprocess.run(["cc", "-O1", "-o", str(program), str(source)], check=True, env=clean_env())
    assert _stopped(program, library, "none") == (0, "")  # the shim's exit(0)
    assert _stopped(program, library) == (3, "own stop\n")  # the server's own stop
