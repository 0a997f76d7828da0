"""recipes.toolchain.zig: what cargo zigbuild needs, and the refusals that come before any build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recipes.errors import ConfigError, ToolchainError
from recipes.toolchain import zig

ZIGBUILD = ("cargo", "zigbuild")
PLAIN = ("cargo", "build")


@pytest.mark.refuses("glibc-suffix-target-plain-cargo-build")
def test_glibc_suffix_needs_zigbuild() -> None:
    with pytest.raises(ConfigError) as caught:
        zig.check_target(PLAIN, "x86_64-unknown-linux-gnu.2.28")
    assert "has a glibc suffix (.2.28), which only cargo zigbuild understands" in caught.value.line()
    assert 'PGO_CARGO="cargo zigbuild"' in caught.value.line()
    zig.check_target(ZIGBUILD, "x86_64-unknown-linux-gnu.2.28")
    zig.check_target(PLAIN, "x86_64-unknown-linux-gnu")


@pytest.mark.refuses("cargo-zigbuild-without-pgo-generate-linker-for")
def test_zigbuild_cannot_link_the_instrumented_binary() -> None:
    with pytest.raises(ConfigError) as caught:
        zig.check_generate_linker(ZIGBUILD, None)
    assert "-u __llvm_profile_runtime" in caught.value.line()
    assert "PGO_GENERATE_LINKER=cc" in caught.value.line()
    zig.check_generate_linker(ZIGBUILD, "cc")
    zig.check_generate_linker(PLAIN, None)


def test_the_instrumented_link_for_aarch64_needs_the_cross_linker() -> None:
    aarch64 = "aarch64-unknown-linux-gnu"
    with pytest.raises(ConfigError) as caught:
        zig.check_generate_linker(ZIGBUILD, None, aarch64)
    assert "set PGO_GENERATE_LINKER=aarch64-linux-gnu-gcc (the instrumented aarch64 binary runs under qemu-aarch64" in (
        caught.value.line()
    )
    for host_compiler in ("cc", "/usr/bin/gcc", "clang"):
        for cargo in (ZIGBUILD, PLAIN):
            with pytest.raises(ConfigError) as caught:
                zig.check_generate_linker(cargo, host_compiler, aarch64)
            assert f"PGO_GENERATE_LINKER={host_compiler} links for x86_64, not for {aarch64}" in caught.value.line()
    zig.check_generate_linker(ZIGBUILD, "aarch64-linux-gnu-gcc", aarch64)
    zig.check_generate_linker(PLAIN, None, aarch64)
    zig.check_generate_linker(ZIGBUILD, "cc", "x86_64-unknown-linux-gnu")  # the machine's own architecture


def test_zigbuild_env_is_a_new_dict(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin:/bin"}
    env = zig.zigbuild_env(base, scripts=tmp_path, python="/opt/py/bin/python3")
    assert base == {"PATH": "/usr/bin:/bin"}
    assert env["PATH"] == f"/usr/bin:/bin:{tmp_path}"
    assert env["CARGO_ZIGBUILD_PYTHON_PATH"] == "/opt/py/bin/python3"
    again = zig.zigbuild_env({**env, "CARGO_ZIGBUILD_PYTHON_PATH": "/mine"}, scripts=tmp_path, python="/x")
    assert again["PATH"] == env["PATH"]
    assert again["CARGO_ZIGBUILD_PYTHON_PATH"] == "/mine"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python without ziglang and without pip: what a fresh machine may have."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def test_missing_tools(tmp_path: Path, bare_python: Path) -> None:
    empty = {"PATH": str(tmp_path)}
    assert zig.missing_tools(empty, str(bare_python)) == ["cargo-zigbuild", "ziglang"]
    fake = tmp_path / "cargo-zigbuild"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert zig.missing_tools(empty, str(bare_python)) == ["ziglang"]


@pytest.mark.refuses("cargo-zigbuild-ziglang-missing-installing-them-failed")
def test_failed_install_is_one_line_naming_the_command(tmp_path: Path, bare_python: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    with pytest.raises(ToolchainError) as caught:
        zig.ensure_zigbuild(env, logs=tmp_path / "logs", python=str(bare_python), scripts=tmp_path / "scripts")
    line = caught.value.line()
    assert "PGO_CARGO='cargo zigbuild' needs cargo-zigbuild and ziglang, and installing them failed" in line
    assert "pip install cargo-zigbuild ziglang" in line
    assert (tmp_path / "logs" / "install-zigbuild.log").is_file()


@pytest.mark.parametrize(
    ("cargo", "argv"),
    [
        (PLAIN, ["cargo", "test"]),
        (ZIGBUILD, ["cargo-zigbuild", "test"]),
        (("cargo", "build", "--frozen"), ["cargo", "test", "--frozen"]),
    ],
)
def test_cargo_test_argv(cargo: tuple[str, ...], argv: list[str]) -> None:
    assert zig.cargo_test_argv(cargo) == argv
