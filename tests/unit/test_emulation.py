"""recipes/toolchain/emulation.py: which targets run under qemu-user on this machine, the plan's environment for them
(the
linker found, or one line naming its package; a linker or runner the user or a cargo config gives is kept), the
launcher and the slowdown of the phase limits; and the architecture of real ELF files (gcc and aarch64-linux-gnu-gcc
builds)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, ToolchainError
from recipes.llvm import elf
from recipes.toolchain import cflags, emulation
from recipes.toolchain.rustc import RustcInfo
from recipes.train import sigterm
from recipes.workload.registry import PhaseContext

TARGET = "aarch64-unknown-linux-gnu"
LINKER = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER"
RUNNER = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER"

pytestmark = pytest.mark.skipif(emulation.host_arch() != "x86_64", reason="written for an x86_64 machine")


def _bin(tmp_path: Path, *names: str) -> dict[str, str]:
    """A PATH holding only executable stand-ins named ``names`` (their contents are never run here)."""
    directory = tmp_path / "bin"
    directory.mkdir(exist_ok=True)
    for name in names:
        program = directory / name
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
    return {"PATH": str(directory)}


def test_only_a_target_of_another_architecture_is_foreign() -> None:
    assert emulation.triple_arch(TARGET) == "aarch64"
    assert emulation.foreign("x86_64-unknown-linux-gnu") is None
    assert emulation.foreign("x86_64-unknown-linux-gnu.2.28") is None
    arch = emulation.foreign(TARGET)
    assert arch is not None and arch.qemu == "qemu-aarch64" and arch.sysroot == "/usr/aarch64-linux-gnu"
    assert emulation.foreign("riscv64gc-unknown-linux-gnu") is None  # not one this module runs


def test_cross_env_sets_the_linker_runner_and_sysroot(tmp_path: Path) -> None:
    env = _bin(tmp_path, "qemu-aarch64", "aarch64-linux-gnu-gcc")
    out = emulation.cross_env(TARGET, env, [])
    assert out[LINKER] == str(tmp_path / "bin" / "aarch64-linux-gnu-gcc")
    assert out[RUNNER] == str(tmp_path / "bin" / "qemu-aarch64")
    assert out["QEMU_LD_PREFIX"] == "/usr/aarch64-linux-gnu"
    assert emulation.cross_env("x86_64-unknown-linux-gnu", env, []) == env  # native: unchanged
    assert emulation.launcher(TARGET, env) == (str(tmp_path / "bin" / "qemu-aarch64"),)
    assert emulation.launcher("x86_64-unknown-linux-gnu", env) == ()


def test_cargo_zigbuild_links_for_the_target_itself(tmp_path: Path) -> None:
    """No linker for cargo zigbuild: cargo would take it over zig's, and the glibc floor of the target with it."""
    env = _bin(tmp_path, "qemu-aarch64", "aarch64-linux-gnu-gcc")
    out = emulation.cross_env(TARGET, env, [], zig_links=True)
    assert LINKER not in out
    assert out[RUNNER] == str(tmp_path / "bin" / "qemu-aarch64") and out["QEMU_LD_PREFIX"] == "/usr/aarch64-linux-gnu"
    assert emulation.cross_env(TARGET, _bin(tmp_path, "qemu-aarch64"), [], zig_links=True)  # no cross gcc needed


def test_a_linker_or_runner_given_by_the_user_or_a_cargo_config_is_kept(tmp_path: Path) -> None:
    env = {**_bin(tmp_path, "qemu-aarch64"), LINKER: "my-ld", "QEMU_LD_PREFIX": "/opt/sysroot"}
    out = emulation.cross_env(TARGET, env, [])  # no aarch64-linux-gnu-gcc on PATH: the user's linker is used
    assert out[LINKER] == "my-ld" and out["QEMU_LD_PREFIX"] == "/opt/sysroot"
    configs = [{"target": {TARGET: {"linker": "cfg-ld", "runner": "cfg-run"}}}]
    out = emulation.cross_env(TARGET, {"PATH": env["PATH"]}, configs)
    assert LINKER not in out and RUNNER not in out


@pytest.mark.refuses("aarch64-target-x86-64-no-cross-linker", "aarch64-target-x86-64-no-qemu-aarch64")
def test_no_cross_linker_and_no_qemu_each_one_line_naming_the_package(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as raised:
        emulation.cross_env(TARGET, _bin(tmp_path, "qemu-aarch64"), [])
    assert f"no linker for {TARGET}: aarch64-linux-gnu-gcc is not found" in raised.value.line()
    assert "apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross" in raised.value.line()
    with pytest.raises(ToolchainError) as raised:
        emulation.launcher(TARGET, {"PATH": str(tmp_path / "empty")})
    assert "qemu-aarch64 is not found" in raised.value.line()
    assert "apt-get install -y qemu-user" in raised.value.line()


def test_the_phase_limits_allow_for_emulation_but_pgo_phase_timeout_is_taken_as_given(tmp_path: Path) -> None:
    ctx = PhaseContext(tmp_path / "b", "i", {}, {}, tmp_path, 1.0, 300.0, False)
    assert ctx.limit(None) == 300.0 and ctx.limit(20.0) == 20.0
    assert ctx.argv(["x"]) == [str(tmp_path / "b"), "x"]
    slow = PhaseContext(
        tmp_path / "b", "i", {}, {}, tmp_path, 1.0, 300.0, False, launcher=("qemu-aarch64",), slowdown=10.0
    )
    assert slow.limit(None) == 3000.0 and slow.limit(20.0) == 200.0
    assert slow.argv(["x"]) == ["qemu-aarch64", str(tmp_path / "b"), "x"]
    given = PhaseContext(tmp_path / "b", "i", {}, {}, tmp_path, 1.0, 5.0, False, timeout_override=5.0, slowdown=10.0)
    assert given.limit(20.0) == 5.0
    assert emulation.slowdown(("qemu-aarch64",)) == emulation.SLOWDOWN and emulation.slowdown(()) == 1.0


@pytest.mark.refuses("file-whose-architecture-asked-not-elf")
@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu is not installed")
def test_the_architecture_of_real_elf_files(tmp_path: Path) -> None:
    source = tmp_path / "main.c"
    source.write_text("int main(void) { return 0; }\n")
    for compiler, arch in (("gcc", "x86_64"), ("aarch64-linux-gnu-gcc", "aarch64")):
        program = tmp_path / compiler
        subprocess.run([compiler, "-o", str(program), str(source)], check=True)
        assert elf.elf_arch(program) == arch
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(CheckFailed, match="is not an ELF binary"):
        elf.elf_arch(script)


def test_the_c_of_a_cross_target_is_said_to_stay_unprofiled() -> None:
    rustc = RustcInfo(release="1.95.0", host="x86_64-unknown-linux-gnu", commit_hash="x", llvm_version="22.1.2")
    env = {"PATH": os.defpath}
    cross = cflags.plan_c(rustc, env, TARGET, setting=None, clang=None, zigbuild=False)
    line = cflags.cross_line(cross, rustc)
    assert line is not None and f"unprofiled for {TARGET} (a cross target: not the host x86_64" in line
    native = cflags.plan_c(rustc, env, rustc.host, setting=None, clang=None, zigbuild=False)
    assert cflags.cross_line(native, rustc) is None
    off = cflags.plan_c(rustc, env, TARGET, setting=False, clang=None, zigbuild=False)
    assert cflags.cross_line(off, rustc) is None  # PGO_C=0 says so itself


@pytest.mark.refuses("exit-sigterm-for-emulated-server-no-cross")
def test_no_cross_compiler_for_the_sigterm_shim_of_an_aarch64_server_is_refused(tmp_path: Path) -> None:
    arch = emulation.ARCHES["aarch64"]
    with pytest.raises(ToolchainError) as raised:
        sigterm.shim(tmp_path / "shim", {"PATH": str(tmp_path / "empty"), "CC": "gcc"}, arch)
    assert "exit_on_sigterm needs aarch64-linux-gnu-gcc to build its SIGTERM shim" in raised.value.line()
    assert "apt-get install -y gcc-aarch64-linux-gnu" in raised.value.line()


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu is not installed")
def test_the_sigterm_shim_of_an_aarch64_server_is_an_aarch64_library_given_to_qemus_program(tmp_path: Path) -> None:
    arch = emulation.ARCHES["aarch64"]
    library = sigterm.shim(tmp_path / "shim", dict(os.environ), arch)
    assert library.name.endswith("-aarch64.so") and elf.elf_arch(library) == "aarch64"
    assert sigterm.shim(tmp_path / "shim", dict(os.environ)) != library  # the host's is another file
    env = sigterm.preload_env({"QEMU_SET_ENV": "A=1"}, library, emulated=True)
    assert env == {"QEMU_SET_ENV": f"A=1,LD_PRELOAD={library}"}  # not the host's LD_PRELOAD (qemu is a host program)


def test_a_file_whose_header_is_not_elf_has_no_architecture(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_bytes(b"\x7fELF" + b"\x00" * 60)
    assert elf.elf_arch_or_none(broken) is None
    assert elf.elf_arch_or_none(tmp_path / "missing") is None
