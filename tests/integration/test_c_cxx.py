"""C++ the profile's clang++ cannot build, and the C and C++ profiled by package or by language, on the fixture
``cxxsys``: a build script that compiles C and C++ with cc-rs and adds ``-stdlib=libc++`` when the compiler accepts
it (clang++-22 does, g++ does not; no libc++ headers are installed here), and a dependency, ``plainc``, with C of
its own. Real cargo, cc-rs 1.11.3, clang-22, gcc and llvm-profdata-22."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.toolchain.cflags import read_object
from tests.conftest import Pipeline, assert_ok, assert_refused, written_records

pytestmark = pytest.mark.slow

CLANG = "Debian clang version 22."


def _crate(record: Any, name: str) -> Any:
    return next(c for c in record["c_code"]["crates"] if c["crate"] == name)


def _lines(text: str, prefix: str) -> list[str]:
    return [line.split("> ", 1)[-1] for line in text.splitlines() if line.split("> ", 1)[-1].startswith(prefix)]


@pytest.mark.refuses("build-script-c-profile-clang-cannot-build")
def test_the_default_build_refused_naming_the_crate_the_compiler_the_header_and_the_flag(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path, "cxxsys")
    line = assert_refused(pipeline.nox("pgo"))
    assert "the C++ of crate cxxsys's build script does not build with /usr/bin/clang++-22" in line, line
    assert "csrc/table.cpp: 'new' file not found, with -stdlib=libc++" in line, line
    assert "PGO_CXX=0 leaves the C++ to the system's c++" in line and "PGO_C=<the packages but cxxsys>" in line, line
    assert "apt-get install libc++-22-dev" in line and "exit code 101" not in line, line
    assert not (pipeline.work / "optimised").exists()
    # the plain build (nox -s plain, the bench's) compiles the C as the PGO build would: refused alike
    line = assert_refused(pipeline.nox("plain"))
    assert "the C++ of crate cxxsys's build script does not build with /usr/bin/clang++-22" in line, line
    # a list that names cxxsys asks for its C++ by clang++ too
    line = assert_refused(pipeline.nox("instrument", PGO_C="cxxsys,plainc"))
    assert "the C++ of crate cxxsys's build script does not build with" in line, line


def test_pgo_cxx_off_profiles_the_c_and_leaves_the_cxx_on_gxx(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path, "cxxsys")
    text = assert_ok(pipeline.nox("pgo", PGO_CXX="0"))
    (warning,) = [line for line in text.splitlines() if "PGO_CXX=0" in line and "warning:" in line]
    assert "the C++ of build scripts is compiled by the system's c++, unprofiled (PGO_CXX=0)" in warning, warning
    records = written_records(pipeline.work)
    # the instrumented objects: the C by clang-22 with counters, the C++ by g++ without
    build = pipeline.work / "generate-target" / "x86_64-unknown-linux-gnu" / "release" / "build"
    objects = {p.name.split("-", 1)[1]: read_object(p) for p in build.glob("cxxsys-*/out/*.o")}
    assert objects["codec.o"] is not None and objects["codec.o"].instrumented, objects
    assert objects["codec.o"].compiler.startswith(CLANG), objects
    assert objects["table.o"] is not None and not objects["table.o"].instrumented, objects
    assert objects["table.o"].compiler.startswith("GCC:"), objects
    inst = _crate(records["instrument"], "cxxsys")
    assert inst["profile_flags"] is True and inst["languages"]["C++"][0].startswith("GCC:"), inst
    crate = _crate(records["optimise"], "cxxsys")
    assert crate["profile_flags"] is True and crate["functions_with_profile"] == ["cxxsys_codec"], crate
    assert "cxxsys_table" in crate["functions_without_profile"], crate
    assert _crate(records["optimise"], "plainc")["functions_with_profile"] == ["plainc_mix"]
    assert records["optimise"]["c_code"]["languages"]["C++"]["off"] == "PGO_CXX=0"
    # a c code line of each crate in each build: which compiler built its C and its C++
    (inst_line,) = [line for line in _lines(text, "c code      cxxsys:") if "functions" not in line]
    assert re.fullmatch(
        rf"c code      cxxsys: C by {re.escape(CLANG)}\S+ \(.*\); C\+\+ by GCC: .*; profiled; C\+\+ not profiled: "
        r"PGO_CXX=0",
        inst_line,
    ), inst_line
    (opt_line,) = [line for line in _lines(text, "c code      cxxsys:") if "functions" in line]
    assert opt_line.startswith("c code      cxxsys: 1 C/C++ functions with profile data, 1 without (C by "), opt_line
    assert opt_line.endswith("; C++ not profiled: PGO_CXX=0"), opt_line
    shown = subprocess.run(
        ["llvm-profdata-22", "show", "--all-functions", str(records["merge"]["profile"])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "  cxxsys_codec:" in shown and "  plainc_mix:" in shown and "cxxsys_table" not in shown


def test_pgo_c_list_profiles_the_listed_packages_alone(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path, "cxxsys")
    text = assert_ok(pipeline.nox("pgo", PGO_C="plainc"))
    assert "warning: the C and C++ of plainc only are profiled (PGO_C=plainc), the other packages' compiled by cc " in (
        text
    )
    assert "the profile flags did not reach" not in text  # a package the list leaves out is no surprise
    records = written_records(pipeline.work)
    plainc, cxxsys = _crate(records["optimise"], "plainc"), _crate(records["optimise"], "cxxsys")
    assert plainc["profile_flags"] and plainc["functions_with_profile"] == ["plainc_mix"], plainc
    assert all(c.startswith(CLANG) for c in plainc["compilers"]), plainc
    assert not cxxsys["profile_flags"] and cxxsys["chosen"] is False, cxxsys
    assert all(c.startswith("GCC:") for c in cxxsys["compilers"]) and cxxsys["not_clang"] == [], cxxsys
    assert records["optimise"]["c_code"]["languages"]["C"]["crates"] == ["plainc"]
    (opt,) = [line for line in _lines(text, "c code      cxxsys:") if "functions" in line]
    assert re.fullmatch(
        r"c code      cxxsys: 0 C/C\+\+ functions with profile data, 2 without \(C by GCC: .*; C\+\+ by GCC: .*\); "
        r"not profiled: not among the packages profiled \(plainc\)",
        opt,
    ), opt
    # the plain build compiles each package's C as the PGO build did, without the profile: its summary says so
    plain = assert_ok(pipeline.nox("plain", PGO_C="plainc"))
    (line,) = _lines(plain, "c code      plainc:")
    assert line.startswith(f"c code      plainc: C by {CLANG}") and "profiled" not in line, line
    (line,) = _lines(plain, "c code      cxxsys:")
    assert line.startswith("c code      cxxsys: C by GCC: ") and "C++ by GCC: " in line, line
    assert written_records(pipeline.work)["plain"]["c_code"]["crates"][0]["crate"] == "cxxsys"


@pytest.mark.refuses("release-pgo-c-list-or-pgo-cxx")
@pytest.mark.parametrize(("name", "value"), [("PGO_C", "plainc"), ("PGO_CXX", "0")])
def test_a_release_with_a_list_or_pgo_cxx_refused_before_anything(tmp_path: Path, name: str, value: str) -> None:
    pipeline = Pipeline(tmp_path, "cxxsys")
    line = assert_refused(pipeline.nox("release", "v0.1.0", **{name: value}))
    assert f"{name}={value}: a release profiles the C and C++ of build scripts all alike or not at all" in line, line
    assert "release with PGO_C=1 or PGO_C=0 and without PGO_CXX" in line, line
    assert not pipeline.work.exists()


@pytest.mark.refuses("pgo-c-list-package-not-build-script")
@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("PGO_C", "plainc,plainsc", "PGO_C=plainc,plainsc: plainsc is not a package of this build"),
        ("PGO_CXX", "cc", "PGO_CXX=cc: cc has no build script: it compiles no C or C++"),
    ],
)
def test_a_list_naming_a_package_without_c_refused_before_anything(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    pipeline = Pipeline(tmp_path, "cxxsys")
    line = assert_refused(pipeline.nox("instrument", **{name: value}), words)
    assert "the packages with a build script (the C and C++ there is to profile): cxxsys, plainc" in line, line
    assert not (pipeline.work / "generate-target").exists()
