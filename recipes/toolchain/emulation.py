"""A target of another architecture than the machine's: its linker, and its binaries run under qemu-user.

A profile counts what the code did, not how long it took: an instrumented aarch64 binary trained under
``qemu-aarch64`` on x86_64 records what it would record on an arm machine. So when ``PGO_TARGET``'s architecture is
not the host's, the plan's environment gets the target's linker (``CARGO_TARGET_<T>_LINKER``, unless the user or a
cargo config set one), cargo's runner for ``pgo-test`` (``CARGO_TARGET_<T>_RUNNER``) and ``QEMU_LD_PREFIX`` (the
target's sysroot, where its ``ld.so`` and libc are), and every place that runs the built binary (train, the
verify replay) puts :func:`launcher` before it. Emulation is slower: the workload's own time limits (phase
timeouts, readiness and stop limits) are multiplied by :data:`SLOWDOWN`; ``PGO_PHASE_TIMEOUT`` is taken as given.

On a machine of the target's architecture none of this applies: the same code runs the binary directly.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from recipes.errors import ToolchainError
from recipes.toolchain.rustflags import cargo_target_var

#: how much longer the workload's own time limits are under emulation (qemu-user runs compute-bound code
#: roughly 3 to 10 times slower than native; the factor leaves room for a loaded machine)
SLOWDOWN = 10.0


@dataclass(frozen=True)
class Arch:
    """What a foreign architecture needs: its qemu-user, the Debian cross linker and where its sysroot is."""

    name: str  # the triple's first part, and what ``platform.machine()`` says on such a machine
    qemu: str
    linker: str
    linker_package: str
    libc_package: str
    sysroot: str


ARCHES: dict[str, Arch] = {
    "aarch64": Arch(
        name="aarch64",
        qemu="qemu-aarch64",
        linker="aarch64-linux-gnu-gcc",
        linker_package="gcc-aarch64-linux-gnu",
        libc_package="libc6-dev-arm64-cross",
        sysroot="/usr/aarch64-linux-gnu",
    ),
}


def host_arch() -> str:
    """The machine's architecture, as a triple spells it (``x86_64``, ``aarch64``)."""
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


def triple_arch(triple: str) -> str:
    """``aarch64-unknown-linux-gnu`` -> ``aarch64``."""
    return triple.split("-", 1)[0]


def foreign(triple: str) -> Arch | None:
    """The architecture of ``triple`` when the machine is not of it and it is one this module runs (else None)."""
    arch = triple_arch(triple)
    return None if arch == host_arch() else ARCHES.get(arch)


def _configured(triple: str, key: str, configs: Iterable[Mapping[str, object]]) -> bool:
    tables = (targets.get(triple) for data in configs if isinstance(targets := data.get("target"), dict))
    return any(isinstance(table, dict) and key in table for table in tables)


def qemu_path(arch: Arch, env: Mapping[str, str]) -> str:
    """qemu-user's program for ``arch``, found on PATH, or one line naming the package."""
    found = shutil.which(arch.qemu, path=env.get("PATH", os.defpath))
    if found is None:
        raise ToolchainError(
            f"{arch.qemu} is not found: the {arch.name} binaries run under qemu-user on this {host_arch()} machine",
            "apt-get install -y qemu-user",
        )
    return found


def cross_env(
    triple: str, env: Mapping[str, str], configs: Sequence[Mapping[str, object]], *, zig_links: bool = False
) -> dict[str, str]:
    """The plan's environment for a foreign ``triple``: its linker found (or refused naming its package), cargo's
    runner and ``QEMU_LD_PREFIX``; ``env`` unchanged for a native target. ``configs``: the cargo config files'
    data (a ``[target.<triple>] linker`` or ``runner`` there is kept). ``zig_links``: the cargo command is cargo
    zigbuild, which links for the target itself (against the glibc of the target's suffix): no linker is set, or
    cargo would take it over zig's (and the glibc floor with it); the instrumented build's is
    ``PGO_GENERATE_LINKER``."""
    arch = foreign(triple)
    if arch is None:
        return dict(env)
    out = dict(env)
    qemu = qemu_path(arch, env)
    linker_var = cargo_target_var(triple, "LINKER")
    if not zig_links and not env.get(linker_var) and not _configured(triple, "linker", configs):
        linker = shutil.which(arch.linker, path=env.get("PATH", os.defpath))
        if linker is None:
            raise ToolchainError(
                f"no linker for {triple}: {arch.linker} is not found (set {linker_var} to another)",
                f"apt-get install -y {arch.linker_package} {arch.libc_package}",
            )
        out[linker_var] = linker
    runner_var = cargo_target_var(triple, "RUNNER")
    if not env.get(runner_var) and not _configured(triple, "runner", configs):
        out[runner_var] = qemu
    out.setdefault("QEMU_LD_PREFIX", arch.sysroot)
    return out


def launcher(triple: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """What goes before the built binary to run it: ``(qemu-aarch64,)`` for a foreign target, else nothing."""
    arch = foreign(triple)
    return () if arch is None else (qemu_path(arch, env),)


def slowdown(launch: Sequence[str]) -> float:
    """The factor of the workload's own time limits: :data:`SLOWDOWN` under emulation, else 1."""
    return SLOWDOWN if launch else 1.0
