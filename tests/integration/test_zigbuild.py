"""The release toolchain on the hello fixture: cargo zigbuild with a glibc floor, the instrumented link by cc,
the glibc ceiling, and the refusal of a mix of cargo commands between the stages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recipes.llvm import elf
from recipes.toolchain import zig
from tests.conftest import Pipeline, assert_ok, assert_refused

pytestmark = pytest.mark.slow

TRIPLE = "x86_64-unknown-linux-gnu"
ZIGBUILD = {"PGO_CARGO": "cargo zigbuild", "PGO_GENERATE_LINKER": "cc", "PGO_TARGET": f"{TRIPLE}.2.28"}


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def _zig_env(**extra: str) -> dict[str, str]:
    env = zig.zigbuild_env(os.environ, scripts=zig.scripts_dir(), python=sys.executable)
    env.pop("RUSTFLAGS", None)
    return {**env, **extra}


def _zigbuild(p: Pipeline, target_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    argv = ["cargo", "zigbuild", "--release", "--target", f"{TRIPLE}.2.28", "--target-dir", str(target_dir)]
    return subprocess.run(
        [*argv, "--manifest-path", str(p.manifest)],
        cwd=p.crate_dir,
        env=_zig_env(**extra),
        capture_output=True,
        text=True,
        check=False,
    )


def test_zigbuild_pgo_needs_at_most_glibc_2_28_and_passes_the_baseline_check(hello: Pipeline, tmp_path: Path) -> None:
    assert_ok(hello.nox("pgo", PGO_MAX_GLIBC="2.28", **ZIGBUILD))
    report = _report(hello)
    optimised = report["optimise"]
    binary = Path(optimised["binary"])
    # the glibc suffix is cargo-zigbuild's: the target dir, the binary and cargo clean use the plain triple
    assert Path(optimised["built_binary"]) == hello.crate_dir / "target" / TRIPLE / "release" / "hello-pgo"
    assert binary == hello.work / "optimised" / "hello-pgo"  # the checked copy
    assert optimised["target"] == f"{TRIPLE}.2.28"
    assert optimised["max_glibc"] == elf.max_glibc(binary) == "2.28"
    # GLIBC_2.3.4 is among its needs: compared as strings, it would look like the highest
    assert "GLIBC_2.3.4" in elf.needed_versions(binary)["libc.so.6"]
    assert optimised["zigbuild"] == report["instrument"]["zigbuild"]
    assert set(optimised["zigbuild"]) == {"cargo_zigbuild", "zig"}
    assert optimised["target_cpu"] is None
    assert optimised["crate_metadata"] == report["instrument"]["crate_metadata"]
    # the instrumented build linked with cc (given last, it wins over cargo-zigbuild's -C linker), the optimised by zig
    instrumented = next(
        line
        for line in (hello.work / "logs" / "instrument-build.log").read_text().splitlines()
        if "--crate-name hello_pgo" in line
    )
    assert "zigcc-x86_64-unknown-linux-gnu.2.28" in instrumented
    assert instrumented.rstrip("`").endswith("-Clinker=cc")
    main = next(
        line
        for line in (hello.work / "logs" / "optimise-build.log").read_text().splitlines()
        if "--crate-name hello_pgo" in line
    )
    assert "zigcc-x86_64-unknown-linux-gnu.2.28" in main
    assert "-Clinker=cc" not in main
    # the plain artefact, built the same way without a profile, needs the same glibc
    plain = _zigbuild(hello, tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert elf.check_same_libc(tmp_path / "plain" / TRIPLE / "release" / "hello-pgo", binary) == "glibc 2.28"
    # and the PGO binary runs on a processor with SSE2 and nothing later
    text = assert_ok(hello.nox("cpu-baseline", "--run", "primes", "1000"))
    assert "ran: primes 1000: exit code 0" in text
    assert _report(hello)["cpu_baseline"]["binary_sha256"] == optimised["binary_sha256"]


@pytest.mark.refuses("cargo-zigbuild-without-pgo-generate-linker-for")
def test_zig_refuses_the_instrumented_link_so_the_pipeline_asks_for_cc(hello: Pipeline, tmp_path: Path) -> None:
    extra = {k: v for k, v in ZIGBUILD.items() if k != "PGO_GENERATE_LINKER"}
    assert_refused(
        hello.nox("pgo", **extra), "cargo zigbuild cannot link the instrumented binary", "PGO_GENERATE_LINKER=cc"
    )
    assert not (hello.work / "logs" / "instrument-build.log").exists()
    assert not (hello.work / "logs" / "install-zigbuild.log").exists(), "refused before anything is installed"
    # why: zig's linker driver takes `-u __llvm_profile_runtime` for a file name
    var = f"CARGO_TARGET_{TRIPLE.upper().replace('-', '_')}_RUSTFLAGS"
    direct = _zigbuild(hello, tmp_path / "direct", **{var: f"-Cprofile-generate={tmp_path / 'profraw'}"})
    assert direct.returncode != 0
    assert "__llvm_profile_runtime" in direct.stderr


@pytest.mark.refuses("glibc-suffix-target-plain-cargo-build")
def test_glibc_suffix_with_plain_cargo_refused(hello: Pipeline) -> None:
    line = assert_refused(hello.nox("instrument", PGO_TARGET=f"{TRIPLE}.2.28"), "has a glibc suffix (.2.28)")
    assert "only cargo zigbuild understands" in line
    assert not (hello.work / "logs" / "instrument-build.log").exists()


@pytest.mark.refuses("binary-needs-newer-glibc-pgo-max-glibc")
def test_native_build_over_the_glibc_ceiling_refused(hello: Pipeline) -> None:
    # this machine has glibc 2.36: a native link needs 2.34 (__libc_start_main)
    assert_refused(hello.nox("pgo", PGO_MAX_GLIBC="2.28"), "hello-pgo needs GLIBC_2.34, newer than PGO_MAX_GLIBC=2.28")
    optimised = _report(hello)["optimise"]
    assert optimised["max_glibc"] == "2.34"
    assert (hello.work / "rejected" / "hello-pgo").is_file()


@pytest.mark.refuses("builds-made-different-cargo-commands")
def test_mixed_cargo_commands_refused_whatever_the_metadata_says(hello: Pipeline) -> None:
    """Instrumented by plain cargo, optimised by cargo zigbuild: refused, though hello's metadata matches."""
    for stage in ("instrument", "train", "merge"):
        assert_ok(hello.nox(stage))
    line = assert_refused(hello.nox("optimise", PGO_CARGO="cargo zigbuild"), "the instrumented build was made by")
    assert "'cargo build' and this one by 'cargo zigbuild'" in line
    assert "same PGO_CARGO" in line
    report = _report(hello)
    # the identity check alone would have let it through: this crate has no dependencies to change
    assert report["optimise"]["crate_metadata"] == report["instrument"]["crate_metadata"]
    assert report["optimise"]["stale_profile_warnings"] == 0
    assert (hello.work / "rejected" / "hello-pgo").is_file()
