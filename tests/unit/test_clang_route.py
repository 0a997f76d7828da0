"""Where a clang of rustc's LLVM can come from when none is here (recipes/toolchain/clang_route.py): the verdict on
facts (apt's answer, the clangs and toolchains installed), the facts read from stand-ins of a PATH, of Debian's
/usr/lib/llvm-N and of a rustup home, apt's real answer, and the line said before the build (cflags)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recipes.toolchain import cflags, clang_route
from recipes.toolchain.rustc import RustcInfo
from tests.conftest import clean_env

PINNED = RustcInfo(release="1.94.0", host="x86_64-unknown-linux-gnu", commit_hash="x", llvm_version="21.1.8")
STABLE = RustcInfo(release="1.95.0", host="x86_64-unknown-linux-gnu", commit_hash="y", llvm_version="22.1.2")
OLD = RustcInfo(release="1.70.0", host="x86_64-unknown-linux-gnu", commit_hash="z", llvm_version="16.0.2")


def test_apt_has_its_package_and_the_plain_hint_stays() -> None:
    assert clang_route.route(PINNED, installable=True, clangs={}, toolchains={}) == "apt-get install clang-21"
    assert clang_route.route(PINNED, installable=None, clangs={}, toolchains={}) == "apt-get install clang-21"


def test_no_package_names_the_toolchain_whose_llvm_has_its_clang_here() -> None:
    # it used to say `apt-get install clang-21` on Debian 12, which has no such package (issue 48, item 7)
    clangs = {22: Path("/usr/bin/clang-22"), 14: Path("/usr/lib/llvm-14/bin/clang")}
    toolchains = {"1.70.0-x86_64": OLD, "1.94.0-x86_64": PINNED, "stable-x86_64": STABLE}
    said = clang_route.route(PINNED, installable=False, clangs=clangs, toolchains=toolchains)
    assert said == (
        "apt has no clang-21 here; clang-22 is here (/usr/bin/clang-22), of the LLVM of the toolchain stable-x86_64 "
        "(rustc 1.95.0): RUSTUP_TOOLCHAIN=stable-x86_64 builds the crate with it, "
        "or give PGO_CLANG=<a clang of LLVM 21>"
    )


def test_no_package_and_no_toolchain_of_a_clang_here() -> None:
    said = clang_route.route(PINNED, installable=False, clangs={14: Path("/x/clang")}, toolchains={"a": PINNED})
    assert said.startswith(
        "apt has no clang-21 here, and no toolchain here is of the LLVM of clang-14: give PGO_CLANG="
    )
    bare = clang_route.route(PINNED, installable=False, clangs={}, toolchains={})
    assert bare.startswith("apt has no clang-21 here, nor any clang: give PGO_CLANG=<a clang of LLVM 21>")


def test_apts_answer_for_a_package_it_has_and_one_it_has_not() -> None:
    env = clean_env()
    assert clang_route.apt_has("clang-22", env) is True  # CONTRIBUTING.md installs it
    assert clang_route.apt_has("clang-no-such-package", env) is False
    assert clang_route.apt_has("clang-22", {"PATH": "/nonexistent"}) is None  # no apt: the plain hint


def _program(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{text}'\n")
    path.chmod(0o755)
    return path


def test_the_clangs_and_toolchains_here_are_read(tmp_path: Path) -> None:
    bin_dir, llvm = tmp_path / "bin", tmp_path / "lib"
    _program(bin_dir / "clang-22", "clang")
    _program(bin_dir / "clang-tidy-22", "not a clang")
    _program(llvm / "llvm-14" / "bin" / "clang", "clang")
    (llvm / "llvm-15" / "bin").mkdir(parents=True)  # llvm-15's tools without its clang
    assert clang_route.installed_clangs({"PATH": str(bin_dir)}, llvm) == {
        22: bin_dir / "clang-22",
        14: llvm / "llvm-14" / "bin" / "clang",
    }
    toolchains = tmp_path / "rustup" / "toolchains"
    vv = "rustc {0}\nhost: x86_64-unknown-linux-gnu\nrelease: {0}\nLLVM version: {1}"
    _program(toolchains / "1.94.0-x86_64" / "bin" / "rustc", vv.format("1.94.0", "21.1.8"))
    _program(toolchains / "stable-x86_64" / "bin" / "rustc", vv.format("1.95.0", "22.1.2"))
    _program(toolchains / "broken" / "bin" / "cargo", "cargo")  # an interrupted install: no rustc
    found = clang_route.sibling_toolchains(toolchains / "1.94.0-x86_64", {"PATH": os.defpath})
    assert {name: info.llvm_major for name, info in found.items()} == {"1.94.0-x86_64": 21, "stable-x86_64": 22}
    assert clang_route.sibling_toolchains(tmp_path / "usr", {}) == {}  # not rustup's: none named


def test_the_line_before_the_build_names_the_packages_with_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cflags, "LLVM_BIN", str(tmp_path / "llvm-{major}" / "bin"))  # no /usr/lib/llvm-N here
    plan = cflags.plan_c(PINNED, {"PATH": str(tmp_path)}, PINNED.host, setting=None, clang=None, zigbuild=False)
    assert cflags.missing_clang_line(plan, []) is None  # no package compiles C: nothing to say
    line = cflags.missing_clang_line(plan, ["csys", "zstd-sys"])
    assert line == (
        "warning: the C of csys, zstd-sys (build scripts using cc or cmake) will stay unprofiled: "
        "no clang-21 (apt-get install clang-21)"
    )
    off = cflags.plan_c(PINNED, {"PATH": str(tmp_path)}, PINNED.host, setting=False, clang=None, zigbuild=False)
    assert cflags.missing_clang_line(off, ["csys"]) is None  # PGO_C=0: the user's choice, said elsewhere
