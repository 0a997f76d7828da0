"""``exit_on_sigterm = true``: a server with no SIGTERM handler of its own still writes its profile.

An instrumented binary writes its ``.profraw`` when it exits normally (LLVM's profile runtime registers an
``atexit`` handler); a server that installs no handler for SIGTERM is killed by it, and writes nothing. Many
small servers are like that. For them the training preloads a tiny shared library (``LD_PRELOAD``) whose
constructor makes SIGTERM call ``exit(0)``: the ``atexit`` handlers run, the profile is written, the exit
status is 0. A server that installs its own handler later replaces this one, and keeps its own behaviour; one whose
handler calls the one it replaced first (signal-hook-registry does: tokio::signal, actix-rt) finds it doing nothing,
as it checks in the handler that it is still SIGTERM's handler (``sigaction`` is async-signal-safe).
A static binary (musl) does not load preloads: it must handle SIGTERM itself.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping
from pathlib import Path

from recipes.errors import ToolchainError
from recipes.files import atomic_output
from recipes.llvm.elf import elf_arch
from recipes.runner import run
from recipes.toolchain.emulation import ARCHES, Arch

SOURCE = r"""
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void pgo_exit_on_sigterm(int signum) {
    struct sigaction current;
    /* A handler the server installed since, which calls this one first (signal-hook-registry chains so: tokio::signal,
       actix-rt), is the server's own way to stop: then this one does nothing, or it would exit() from inside the
       signal handler on whichever thread took the signal, while the runtime's threads run, before the server's own
       stop. */
    if (sigaction(signum, NULL, &current) == 0 && current.sa_handler != pgo_exit_on_sigterm) {
        return;
    }
    exit(0); /* runs the atexit handlers: the instrumented binary writes its profile */
}

__attribute__((constructor)) static void pgo_install_sigterm_exit(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = pgo_exit_on_sigterm;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
}
"""


def shim(directory: Path, env: Mapping[str, str], arch: Arch | None = None) -> Path:
    """The shared library (built once per source, with the system's C compiler) in ``directory``; for a binary of
    another architecture (``arch``, run under qemu-user), with that architecture's cross compiler."""
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    library = directory / f"pgo-exit-on-sigterm-{digest}{'-' + arch.name if arch else ''}.so"
    if library.is_file():
        return library
    if arch is not None:
        compiler = shutil.which(arch.linker, path=env.get("PATH"))
        if not compiler:
            raise ToolchainError(
                f"exit_on_sigterm needs {arch.linker} to build its SIGTERM shim for the {arch.name} binary",
                f"apt-get install -y {arch.linker_package}",
            )
    else:
        compiler = (
            env.get("CC") or shutil.which("cc", path=env.get("PATH")) or shutil.which("gcc", path=env.get("PATH"))
        )
    if not compiler:
        raise ToolchainError(
            "exit_on_sigterm needs a C compiler (cc) to build its SIGTERM shim", "apt-get install -y gcc, or set CC"
        )
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"pgo-exit-on-sigterm-{digest}.c"
    source.write_text(SOURCE, encoding="utf-8")
    with atomic_output(library) as temp:
        run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(temp), str(source)],
            env=env,
            log=directory / "pgo-exit-on-sigterm.log",
            what="the SIGTERM shim's compile",
        )
    return library


def preload_env(env: Mapping[str, str], library: Path, *, emulated: bool = False) -> dict[str, str]:
    """``env`` with ``library`` first in ``LD_PRELOAD`` (a preload already there is kept after it). ``emulated``:
    the binary runs under qemu-user, which is itself a program of the host: the preload goes to the emulated
    program's environment only (``QEMU_SET_ENV``)."""
    result = dict(env)
    if emulated:
        result["QEMU_SET_ENV"] = ",".join(filter(None, [env.get("QEMU_SET_ENV", ""), f"LD_PRELOAD={library}"]))
        return result
    result["LD_PRELOAD"] = " ".join(filter(None, [str(library), env.get("LD_PRELOAD", "")]))
    return result


def target_arch(binary: Path, launcher: tuple[str, ...]) -> Arch | None:
    """The architecture the shim is built for: the binary's when it runs under qemu-user, else the host's (None)."""
    return ARCHES.get(elf_arch(binary)) if launcher else None
