"""The `tests` session's decision: which system programs the selected tests need (noxfile.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import noxfile
from tests.conftest import REPO


@pytest.mark.parametrize(
    "posargs",
    [
        ["tests/unit"],
        ["tests/unit", "-q"],
        ["-q", "./tests/unit/"],
        ["tests/unit/test_cpu.py::test_x[a-b]", "tests/unit/test_zig.py"],
        [str(REPO / "tests" / "unit")],
        ["-k", "four", "tests/unit"],
        ["-m", "not server", "tests/unit/test_runner.py"],
        ["--ignore", "tests/unit/test_elf.py", "tests/unit"],
    ],
)
def test_unit_tests_alone_need_no_program(posargs: list[str]) -> None:
    assert noxfile.selects_only_unit_tests(posargs, REPO)
    assert noxfile.missing_test_programs(posargs, which=lambda _: None) == {}


@pytest.mark.parametrize(
    "posargs",
    [
        [],  # the whole suite (testpaths)
        ["-q"],
        ["-m", "not server"],
        ["-k", "tests/unit"],  # an option's value, not a path: still the whole suite
        ["tests"],
        ["tests/unit", "tests/integration/test_trust.py"],
        ["tests/integration/test_trust.py", "-k", "four"],
        ["tests/unit/../e2e"],
        ["--ignore", "tests/e2e"],
        ["--deselect", "tests/unit/test_elf.py"],
    ],
)
def test_other_selections_need_the_programs(posargs: list[str]) -> None:
    assert not noxfile.selects_only_unit_tests(posargs, REPO)
    missing = noxfile.missing_test_programs(posargs, which=lambda _: None)
    assert missing == noxfile.TEST_PROGRAMS


def test_only_missing_programs_are_named() -> None:
    found = {
        "cargo",
        "gcc",
        "strip",
        "openssl",
        "curl",
        "ss",
        "llvm-profdata-22",
        "llvm-bolt-22",
        "clang-22",
        "valgrind",
        "qemu-aarch64",
        "aarch64-linux-gnu-gcc",
        "skopeo",
        "umoci",
    }
    missing = noxfile.missing_test_programs([], which=lambda p: f"/usr/bin/{p}" if p in found else None)
    assert missing == {"llvm-profdata-14": "llvm-14", "h2load": "nghttp2-client", "qemu-x86_64": "qemu-user"}
    assert noxfile.missing_programs_message(missing) == (
        "the tests need llvm-profdata-14, h2load, qemu-x86_64: "
        "apt-get update && apt-get install -y llvm-14 nghttp2-client qemu-user"
    )


def test_missing_cargo_points_to_rustup() -> None:
    message = noxfile.missing_programs_message({"cargo": noxfile.TEST_PROGRAMS["cargo"], "gcc": "gcc"})
    assert message.startswith("the tests need cargo, gcc: apt-get update && apt-get install -y gcc")
    assert message.endswith("(and cargo: https://rustup.rs)")


def test_root_is_the_noxfile_folder() -> None:
    assert Path(noxfile.__file__).resolve().parent == REPO
    assert noxfile.selects_only_unit_tests(["tests/unit"])


def test_ci_runs_the_readmes_test_command_which_installs_every_package_the_tests_need() -> None:
    printed = subprocess.run(
        ["bash", str(REPO / ".ci" / "run"), "--print"], capture_output=True, text=True, check=True
    ).stdout
    readme = (REPO / "README.md").read_text()
    assert printed.strip() and printed in readme  # the README's own lines, continuation lines and all
    words = printed.replace("\\\n", " ").split()
    assert words[-3:] == ["nox", "-s", "tests"]
    assert "install" in words and "x86_64-unknown-linux-musl" in words
    assert (
        "aarch64-unknown-linux-gnu" in words and "libc6-dev-arm64-cross" in words
    )  # tests/integration/test_aarch64.py
    assert "aarch64-unknown-linux-musl" in words  # tests/integration/test_aarch64_variants.py
    for program, package in noxfile.TEST_PROGRAMS.items():
        assert program == "cargo" or package in words, f"the README's test command does not install {package}"


def test_the_coverage_floor_is_the_whole_suites() -> None:
    assert noxfile.coverage_report_args([]) == []  # .ci/run: the floor of pyproject.toml
    assert noxfile.coverage_report_args(["tests/unit", "-q"]) == ["--fail-under=0"]
    assert noxfile.coverage_report_args(["-x"]) == ["--fail-under=0"]
