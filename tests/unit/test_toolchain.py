from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from recipes.errors import ToolchainError
from recipes.toolchain import zig
from recipes.toolchain.cargo.invocation import build_argv
from recipes.toolchain.cargo.metadata import CrateInfo
from recipes.toolchain.rustc import (
    RustcInfo,
    find_profdata,
    parse_llvm_version,
    parse_rustc_vv,
    resolve_rustc,
    split_toolchain,
)
from tests.conftest import DATA


def test_parse_rustc_vv_real_output() -> None:
    info = parse_rustc_vv((DATA / "rustc-vV.txt").read_text())
    assert info.release == "1.95.0"
    assert info.host == "x86_64-unknown-linux-gnu"
    assert info.llvm_version.startswith("22.")
    assert info.llvm_major == 22


@pytest.mark.refuses("rustc-vv-lacks-field-llvm-version-host")
def test_parse_rustc_vv_refuses_output_without_llvm() -> None:
    with pytest.raises(ToolchainError, match="LLVM version"):
        parse_rustc_vv("rustc 1.0\nrelease: 1.0\nhost: x86_64-unknown-linux-gnu\n")


@pytest.mark.parametrize(
    ("name", "expected"),
    [("llvm-profdata-22-version.txt", "22.1.8"), ("llvm-profdata-14-version.txt", "14.0.6")],
)
def test_parse_llvm_version_real_output(name: str, expected: str) -> None:
    assert parse_llvm_version((DATA / name).read_text()) == expected


@pytest.mark.refuses("tool-version-names-no-llvm-version")
def test_parse_llvm_version_refuses_garbage() -> None:
    with pytest.raises(ToolchainError, match=r"cannot read an LLVM version from llvm-profdata --version"):
        parse_llvm_version("hello")


def _needs(program: str, package: str) -> pytest.MarkDecorator:
    """Skip where the Debian package is not installed (the integration tests need it; `nox -s tests` says so)."""
    return pytest.mark.skipif(shutil.which(program) is None, reason=f"{package} not installed")


@pytest.mark.refuses("tool-version-names-no-llvm-version")
@_needs("strip", "binutils")
def test_the_version_of_a_tool_that_is_not_llvms_is_refused() -> None:
    """What GNU strip says given where llvm-strip was expected: a version, but no LLVM one."""
    text = subprocess.run(["strip", "--version"], capture_output=True, text=True, check=True).stdout
    with pytest.raises(
        ToolchainError, match=r"cannot read an LLVM version from llvm-strip --version \(is it llvm-strip"
    ):
        parse_llvm_version(text, "llvm-strip")


def _info(major: int) -> RustcInfo:
    return RustcInfo(release="1.95.0", host="x86_64-unknown-linux-gnu", commit_hash="x", llvm_version=f"{major}.1.2")


@_needs("llvm-profdata-22", "llvm-22")
def test_find_profdata_prefers_rustc_major(tmp_path: Path) -> None:
    tool = find_profdata(_info(22), tmp_path, {"PATH": "/usr/bin:/bin"}, None)
    assert tool.llvm_major == 22


@_needs("llvm-profdata-14", "llvm-14")
def test_find_profdata_refuses_another_major_naming_both() -> None:
    with pytest.raises(ToolchainError) as caught:
        find_profdata(_info(22), Path("/nonexistent"), {"PATH": "/usr/bin"}, "/usr/bin/llvm-profdata-14")
    message = caught.value.line()
    assert "LLVM 14.0.6" in message
    assert "LLVM 22.1.2" in message
    assert "apt-get install llvm-22" in message


@pytest.mark.refuses("no-llvm-profdata-rustc-llvm-major")
def test_find_profdata_none_of_the_major(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="no llvm-profdata of LLVM 99"):
        find_profdata(_info(99), tmp_path, {"PATH": str(tmp_path)}, None)


@pytest.mark.refuses("pgo-llvm-profdata-no-such-program")
def test_find_profdata_explicit_missing() -> None:
    with pytest.raises(ToolchainError, match="no such program"):
        find_profdata(_info(22), Path("/nonexistent"), {"PATH": "/usr/bin"}, "/no/such/llvm-profdata")


@pytest.mark.refuses("pgo-llvm-profdata-no-such-program")
@pytest.mark.parametrize("name", ["x" * 300, "/usr/bin/" + "y" * 256])
def test_find_profdata_explicit_name_no_file_can_have(name: str) -> None:
    # OSError ENAMETOOLONG from Path.is_file() before: a traceback
    with pytest.raises(ToolchainError, match=r"PGO_LLVM_PROFDATA=.*: no such program"):
        find_profdata(_info(22), Path("/nonexistent"), {"PATH": "/usr/bin"}, name)


@pytest.mark.refuses("rustc-program-not-found")
@pytest.mark.parametrize("program", ["~nosuchuser/bin/rustc", "/opt/" + "r" * 300 + "/rustc"])
def test_a_rustc_path_no_file_can_have_is_no_program(tmp_path: Path, program: str) -> None:
    # RuntimeError of Path.expanduser, OSError ENAMETOOLONG of Path.is_file, before: tracebacks
    with pytest.raises(ToolchainError, match=rf"RUSTC names rustc {re.escape(program)}, which is no program here"):
        resolve_rustc(tmp_path, {"PATH": "/usr/bin", "RUSTC": program}, [])


# --- +toolchain in PGO_CARGO ------------------------------------------------------------------------------------


def test_split_toolchain_takes_the_plus_word_after_cargo_only() -> None:
    assert split_toolchain(("cargo", "+1.94.0", "build")) == ("1.94.0", ["cargo", "build"])
    assert split_toolchain(("cargo", "build", "+x")) == (None, ["cargo", "build", "+x"])
    assert split_toolchain(("cargo", "zigbuild")) == (None, ["cargo", "zigbuild"])


def test_a_plus_toolchain_keeps_the_subcommand_of_zigbuild_and_cargo_test() -> None:
    assert zig.uses_zigbuild(("cargo", "+1.94.0", "zigbuild"))
    assert not zig.uses_zigbuild(("cargo", "+1.94.0", "build"))
    assert zig.cargo_test_argv(("cargo", "+1.94.0", "build", "--offline")) == ["cargo", "+1.94.0", "test", "--offline"]
    assert zig.cargo_test_argv(("cargo", "+1.94.0", "zigbuild")) == ["cargo-zigbuild", "test"]


def test_build_argv_with_a_subcommand_keeps_the_plus_toolchain(tmp_path: Path) -> None:
    crate = CrateInfo(tmp_path / "Cargo.toml", "p", tmp_path, "p", ("p",), tmp_path / "target")
    argv = build_argv(
        ("cargo", "+1.94.0", "build"),
        crate=crate,
        target="x86_64-unknown-linux-gnu",
        features=(),
        locked=False,
        target_dir=None,
        subcommand="test",
    )
    assert argv[:3] == ["cargo", "+1.94.0", "test"]


@pytest.mark.refuses("no-llvm-profdata-rustc-llvm-major")
def test_no_profdata_of_a_rustup_toolchain_names_its_llvm_tools_component(tmp_path: Path) -> None:
    sysroot = tmp_path / "toolchains" / "1.94.0-x86_64-unknown-linux-gnu"
    with pytest.raises(ToolchainError) as refused:
        find_profdata(_info(99), sysroot, {"PATH": str(tmp_path)}, None)
    assert "rustup component add llvm-tools --toolchain 1.94.0-x86_64-unknown-linux-gnu" in refused.value.line()
