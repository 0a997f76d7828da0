"""The other aarch64 Linux targets from this x86_64 machine, on hello: ``aarch64-unknown-linux-musl`` (a static
binary, trained under qemu-aarch64 with no sysroot) and ``cargo zigbuild`` with a glibc floor
(``aarch64-unknown-linux-gnu.2.28``: zig links the optimised binary, the cross gcc the instrumented one); and the
refusals of an instrumented link that cannot work for aarch64, before anything is built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

from recipes.llvm import elf
from recipes.toolchain import emulation
from tests.conftest import Pipeline, assert_ok, assert_refused, run_nox
from tests.integration.test_release import TAG, Release

GNU = "aarch64-unknown-linux-gnu"
MUSL = "aarch64-unknown-linux-musl"


def _installed() -> set[str]:
    if shutil.which("rustup") is None:
        return set()
    done = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=False)
    return set(done.stdout.split())


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(emulation.host_arch() != "x86_64", reason="these tests cross from x86_64 to aarch64"),
    pytest.mark.skipif(
        not {GNU, MUSL} <= _installed()
        or shutil.which("aarch64-linux-gnu-gcc") is None
        or shutil.which("qemu-aarch64") is None,
        reason=f"needs `rustup target add {GNU} {MUSL}`, gcc-aarch64-linux-gnu and qemu-user (.ci/run installs them)",
    ),
]


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def _elf(path: Path) -> tuple[str, set[str]]:
    """e_machine and the program header types of ``path``."""
    with path.open("rb") as stream:
        file = ELFFile(stream)
        return str(file.header["e_machine"]), {segment["p_type"] for segment in file.iter_segments()}


def _qemu_run(binary: Path, *args: str, sysroot: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "QEMU_LD_PREFIX"}
    if sysroot:
        env["QEMU_LD_PREFIX"] = "/usr/aarch64-linux-gnu"
    done = subprocess.run(["qemu-aarch64", str(binary), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_musl_for_aarch64_is_static_trained_under_qemu_and_runs_without_a_sysroot(hello: Pipeline) -> None:
    text = assert_ok(hello.nox("pgo", PGO_TARGET=MUSL, PGO_MAX_GLIBC="2.17"))
    report = _report(hello)
    assert "phase cli/collatz: 3 runs of collatz 3000 in " in text and " under qemu-aarch64" in text
    assert report["merge"]["executed_functions"] >= 5
    binary = Path(report["optimise"]["binary"])
    machine, segments = _elf(binary)
    assert machine == "EM_AARCH64"
    assert "PT_INTERP" not in segments  # static: no dynamic loader, so no sysroot is needed to run it
    assert report["optimise"]["max_glibc"] is None  # no glibc ceiling for a static binary, PGO_MAX_GLIBC or not
    assert "static, needs no glibc" in text
    assert report["optimise"]["verify"]["requests"] == report["train"]["requests"]  # replayed under qemu
    assert _qemu_run(binary, "primes", "100", sysroot=False).strip() == "primes: 25"


def test_zigbuild_for_aarch64_links_against_the_glibc_floor(hello: Pipeline) -> None:
    """Without the fix this tests, the plan's cross linker (aarch64-linux-gnu-gcc) took over zig's link too, and
    the optimised binary needed Debian 12's GLIBC_2.34: refused by PGO_MAX_GLIBC=2.28."""
    text = assert_ok(
        hello.nox(
            "pgo",
            PGO_TARGET=f"{GNU}.2.28",
            PGO_CARGO="cargo zigbuild",
            PGO_GENERATE_LINKER="aarch64-linux-gnu-gcc",
            PGO_MAX_GLIBC="2.28",
        )
    )
    report = _report(hello)
    instrumented, optimised = Path(report["instrument"]["binary"]), Path(report["optimise"]["binary"])
    assert _elf(instrumented)[0] == _elf(optimised)[0] == "EM_AARCH64"
    assert "-Clinker=aarch64-linux-gnu-gcc" in report["instrument"]["rustflags"]
    assert elf.max_glibc(instrumented) == "2.34"  # Debian's cross glibc: linked by gcc, it runs only here
    assert report["optimise"]["max_glibc"] == elf.max_glibc(optimised) == "2.28"  # linked by zig, for 2.28
    assert report["optimise"]["zigbuild"] == report["instrument"]["zigbuild"]
    assert "glibc 2.28" in text
    assert _qemu_run(optimised, "primes", "100", sysroot=True).strip() == "primes: 25"


def test_zigbuild_for_aarch64_without_a_cross_generate_linker_refused_before_any_build(hello: Pipeline) -> None:
    zigbuild = {"PGO_TARGET": f"{GNU}.2.28", "PGO_CARGO": "cargo zigbuild"}
    assert_refused(
        hello.nox("pgo", **zigbuild),
        "cargo zigbuild cannot link the instrumented binary",
        "set PGO_GENERATE_LINKER=aarch64-linux-gnu-gcc (the instrumented aarch64 binary runs under qemu-aarch64",
    )
    assert_refused(
        hello.nox("instrument", PGO_GENERATE_LINKER="cc", **zigbuild),
        "PGO_GENERATE_LINKER=cc links for x86_64, not for aarch64-unknown-linux-gnu",
        "set PGO_GENERATE_LINKER=aarch64-linux-gnu-gcc (apt-get install -y gcc-aarch64-linux-gnu",
    )
    assert not (hello.work / "generate-target").exists()


def test_bolt_for_aarch64_musl_refused_naming_the_instrumentation_runtime(hello: Pipeline) -> None:
    """llvm-bolt-22 of this machine reads aarch64, but its instrumentation runtime is x86_64's: `llvm-bolt
    -instrument` of an aarch64 hello linked with --emit-relocs fails with "linking object with arch x86_64 into
    context with arch aarch64"."""
    assert_refused(
        hello.nox("pgo", PGO_TARGET=MUSL, PGO_BOLT="1"),
        f"PGO_BOLT=1 is not supported for aarch64 (PGO_TARGET={MUSL}): the BOLT stage is checked on x86_64 only; "
        "llvm-bolt's instrumentation runtime on this x86_64 machine is of its own architecture",
    )
    assert not (hello.work / "generate-target").exists()


@pytest.mark.parametrize(
    ("triple", "generate_linker", "cpu"),
    [(GNU, "aarch64-linux-gnu-gcc", "cortex-a53"), ("x86_64-unknown-linux-gnu", "cc", "qemu64,-pni")],
)
def test_a_zigbuild_release_with_a_glibc_floor_is_verified_and_rebuilt_byte_for_byte(
    triple: str, generate_linker: str, cpu: str, tmp_path: Path
) -> None:
    """The release's own toolchain (release.yml's legs): cargo zigbuild against glibc 2.28, for aarch64 trained under
    qemu, both binaries checked on the target's baseline CPU; verify --rebuild in another work dir gives the PGO
    binary byte for byte."""
    zigbuild = {"PGO_CARGO": "cargo zigbuild", "PGO_GENERATE_LINKER": generate_linker, "PGO_MAX_GLIBC": "2.28"}
    release = Release.new(tmp_path).made("--target", f"{triple}.2.28", **zigbuild)
    manifest = json.loads((release.dist / f"hello-pgo-{TAG}-{triple}-manifest.json").read_text())
    assert manifest["target"] == f"{triple}.2.28" and manifest["libc"] == "glibc 2.28"
    assert manifest["cpu_baseline"]["cpu"].startswith(cpu)
    assert manifest["cargo_command"] == ["cargo", "zigbuild"]
    text = assert_ok(run_nox("verify", release.env(PGO_OUT=str(tmp_path / "w"), **zigbuild), [TAG, "--rebuild"]))
    pgo = manifest["artefacts"]["pgo"]
    assert f"match     {pgo['binary']}  rebuilt {pgo['binary_sha256']}" in text and "mismatch" not in text
