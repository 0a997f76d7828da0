"""``PGO_TARGET=aarch64-unknown-linux-gnu nox -s pgo`` on this x86_64 machine: the cross build of both binaries
(Debian's ``gcc-aarch64-linux-gnu`` links them), the instrumented binary trained under the real ``qemu-aarch64``
(a command workload: hello; a server workload: bare-server, its SIGTERM shim built for aarch64), the merge of
aarch64 ``.profraw`` by llvm-profdata, the optimised aarch64 ELF checked and replayed under qemu; and the refusals:
no cross linker, no qemu-user, PGO_BOLT=1, the bench of an aarch64 binary; and the baseline-CPU check of aarch64
binaries under ``qemu-aarch64 -cpu cortex-a53`` (Armv8.0-A): it passes hello and refuses an LSE build of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from recipes.release import cpu
from recipes.toolchain import emulation
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env

TARGET = "aarch64-unknown-linux-gnu"
SYSROOT = "/usr/aarch64-linux-gnu"


def _target_installed() -> bool:
    if shutil.which("rustup") is None:
        return False
    done = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=False)
    return TARGET in done.stdout.split()


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(emulation.host_arch() != "x86_64", reason="these tests cross from x86_64 to aarch64"),
    pytest.mark.skipif(
        not _target_installed()
        or shutil.which("aarch64-linux-gnu-gcc") is None
        or shutil.which("qemu-aarch64") is None,
        reason=f"needs `rustup target add {TARGET}`, gcc-aarch64-linux-gnu and qemu-user (.ci/run installs them)",
    ),
]


def _machine(path: Path) -> str:
    with path.open("rb") as stream:
        return str(ELFFile(stream).header["e_machine"])


def _sections(path: Path) -> set[str]:
    with path.open("rb") as stream:
        return {section.name for section in ELFFile(stream).iter_sections()}


@pytest.fixture(scope="module")
def hello_aarch64(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pipeline, str]:
    pipeline = Pipeline(tmp_path_factory.mktemp("hello-aarch64"), "hello")
    return pipeline, assert_ok(pipeline.nox("pgo", PGO_TARGET=TARGET))


def test_hello_for_aarch64_is_trained_under_qemu_and_prints_what_the_x86_64_build_prints(
    hello_aarch64: tuple[Pipeline, str], tmp_path: Path
) -> None:
    pipeline, text = hello_aarch64
    report = json.loads((pipeline.work / "report.json").read_text())
    assert report["instrument"]["target"] == TARGET
    instrumented = Path(report["instrument"]["binary"])
    assert _machine(instrumented) == "EM_AARCH64" and "__llvm_prf_cnts" in _sections(instrumented)
    # trained under qemu-aarch64: every instance wrote its .profraw, llvm-profdata merged them
    assert report["train"]["profraw_files"] >= 1
    assert report["merge"]["executed_functions"] >= 5
    assert f"C of build scripts: unprofiled for {TARGET} (a cross target" in text
    assert "phase cli/collatz: 3 runs of collatz 3000 in " in text and " under qemu-aarch64" in text
    binary = Path(report["optimise"]["binary"])
    assert _machine(binary) == "EM_AARCH64"
    assert "__llvm_prf_cnts" not in _sections(binary)  # not instrumented
    assert report["optimise"]["max_glibc"] is not None  # the glibc ceiling read from the aarch64 ELF
    assert report["optimise"]["verify"]["requests"] == report["train"]["requests"]  # replayed under qemu
    # the x86_64 build of the same source prints the same
    target_dir = tmp_path / "native"
    subprocess.run(
        [
            "cargo",
            "build",
            "--release",
            "--quiet",
            "--manifest-path",
            str(pipeline.manifest),
            "--target-dir",
            str(target_dir),
        ],
        check=True,
        env=clean_env(),
    )
    native = target_dir / "release" / "hello-pgo"
    assert _machine(native) == "EM_X86_64"
    env = clean_env({"QEMU_LD_PREFIX": SYSROOT})
    for args in (["collatz", "3000"], ["words", "the quick brown fox The Dog"], ["primes", "20000"], ["checksum", "x"]):
        here = subprocess.run([str(native), *args], capture_output=True, text=True, check=True, env=env).stdout
        there = subprocess.run(
            ["qemu-aarch64", str(binary), *args], capture_output=True, text=True, check=True, env=env
        ).stdout
        assert here and here == there, args


@pytest.mark.refuses(
    "bench-binary-another-architecture-machine-cpu-time", "bench-pgo-target-another-architecture-machine"
)
def test_the_bench_refuses_an_aarch64_binary_for_cpu_time_and_for_counts(hello_aarch64: tuple[Pipeline, str]) -> None:
    pipeline, _ = hello_aarch64
    report = json.loads((pipeline.work / "report.json").read_text())
    binary = report["optimise"]["binary"]
    line = assert_refused(pipeline.nox("bench", "--baseline", binary, "--candidate", binary), "is an aarch64 binary")
    assert "this machine is x86_64: CPU time under emulation says nothing of the binary" in line
    line = assert_refused(
        pipeline.nox("bench", "--measure", "counts", "--baseline", binary, "--candidate", binary),
        "is an aarch64 binary",
    )
    assert "valgrind runs binaries of the machine's architecture only" in line
    line = assert_refused(pipeline.nox("bench", PGO_TARGET=TARGET), f"PGO_TARGET={TARGET} builds aarch64 binaries")
    assert "CPU time under emulation says nothing" in line


def test_the_aarch64_controls_die_under_cortex_a53_and_run_under_max(tmp_path: Path) -> None:
    results = cpu.check_controls(tmp_path, clean_env(), cpu.AARCH64)
    assert results == {
        name: {"baseline": "killed by SIGILL (illegal instruction)", "max": "exit code 0"}
        for name in ("lse", "dotprod")
    }
    assert not list(tmp_path.glob("*core*"))


def test_hello_for_aarch64_passes_the_baseline_cpu_check_under_cortex_a53(hello_aarch64: tuple[Pipeline, str]) -> None:
    pipeline, _ = hello_aarch64
    text = assert_ok(pipeline.nox("cpu-baseline", "--run", "primes", "100"))
    assert "passed under qemu-aarch64 -cpu cortex-a53 (an Armv8.0 CPU: nothing beyond Armv8.0-A)" in text
    assert (
        "controls: lse killed by SIGILL (illegal instruction) (max: exit code 0), "
        "dotprod killed by SIGILL (illegal instruction) (max: exit code 0)"
    ) in text
    assert "ran: primes 100: exit code 0" in text
    report = json.loads((pipeline.work / "report.json").read_text())
    recorded = report["cpu_baseline"]
    assert (recorded["cpu"], recorded["arch"], recorded["qemu_program"]) == ("cortex-a53", "aarch64", "qemu-aarch64")
    assert recorded["qemu"].startswith("qemu-aarch64 version ")
    assert recorded["binary"] == report["optimise"]["binary"]


def _hello_for_aarch64(pipeline: Pipeline, target_dir: Path, rustflags: str) -> Path:
    """hello with its ``atomics`` feature (``count N``: an atomic add in its own code) built for aarch64."""
    env = {"CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER": "aarch64-linux-gnu-gcc"}
    subprocess.run(
        [
            "cargo",
            "build",
            "--release",
            "--quiet",
            "--features",
            "atomics",
            "--target",
            TARGET,
            "--manifest-path",
            str(pipeline.manifest),
            "--target-dir",
            str(target_dir),
        ],
        check=True,
        env=clean_env({**env, "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS": rustflags}),
    )
    return target_dir / TARGET / "release" / "hello-pgo"


@pytest.mark.refuses("cpu-baseline-command-dies-sigill-under-baseline", "cpu-baseline-command-fails-under-baseline-cpu")
def test_an_lse_build_dies_with_sigill_under_cortex_a53(hello_aarch64: tuple[Pipeline, str], tmp_path: Path) -> None:
    """The proof the check can fail: ``count 100`` built with +lse executes an Armv8.1 ``ldadd`` (qemu's own
    disassembly shows it at the fault); the same source and command built without it passes."""
    pipeline, _ = hello_aarch64
    plain = _hello_for_aarch64(pipeline, tmp_path / "plain", "")
    lse = _hello_for_aarch64(pipeline, tmp_path / "lse", "-Ctarget-feature=+lse")
    assert "ran: count 100: exit code 0" in assert_ok(
        pipeline.nox("cpu-baseline", "--binary", str(plain), "--run", "count", "100")
    )
    line = assert_refused(
        pipeline.nox("cpu-baseline", "--binary", str(lse), "--run", "count", "100"),
        "hello-pgo died with SIGILL (illegal instruction) under an Armv8.0 CPU (-cpu cortex-a53): it uses "
        "instructions beyond Armv8.0-A",
    )
    assert "no -Ctarget-cpu or -Ctarget-feature" in line
    # under a newer processor the same binary runs: the model refused an instruction, the program is sound
    newer = subprocess.run(
        ["qemu-aarch64", "-cpu", "max", str(lse), "count", "100"],
        capture_output=True,
        text=True,
        check=True,
        env=clean_env({"QEMU_LD_PREFIX": SYSROOT}),
    )
    assert newer.stdout == "count: 5050\n"
    # a command that fails otherwise: its exit under the newer model stands in for a native run
    line = assert_refused(pipeline.nox("cpu-baseline", "--binary", str(plain), "--run", "fail"))
    assert "hello-pgo fail got exit code 3 under -cpu cortex-a53 (under -cpu max: exit code 3)" in line


#: a static aarch64 program that says what it was built for (FEATURES) as the demo server does, and exits 4 when
#: started as a server
SERVER = r"""
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--build-info") == 0) {
        puts("target=aarch64-unknown-linux-gnu\ntarget_features=" FEATURES);
        return 0;
    }
    fputs("this server only says what it was built for\n", stderr);
    return 4;
}
"""


@pytest.mark.refuses("cpu-baseline-built-for-other-target-features", "cpu-baseline-server-does-not-start-under")
def test_an_aarch64_servers_build_info_is_read_under_emulation(hello: Pipeline, tmp_path: Path) -> None:
    source = tmp_path / "server.c"
    source.write_text(SERVER)
    for name, features in (("baseline-server", "neon"), ("lse-server", "lse,neon")):
        subprocess.run(
            [
                "aarch64-linux-gnu-gcc",
                "-O2",
                "-static",
                f'-DFEATURES="{features}"',
                "-o",
                str(tmp_path / name),
                str(source),
            ],
            check=True,
        )
    # its --build-info (read under -cpu max: it cannot run natively here) is rustc's defaults: then started
    line = assert_refused(hello.nox("cpu-baseline", "--binary", str(tmp_path / "baseline-server")))
    assert "baseline-server did not start under -cpu cortex-a53: exit code 4: this server only says" in line
    line = assert_refused(
        hello.nox("cpu-baseline", "--binary", str(tmp_path / "lse-server")),
        "lse-server was built for target features lse,neon, not rustc's defaults for aarch64-unknown-linux-gnu "
        "(neon): beyond them: lse",
    )


@pytest.mark.server
def test_a_server_is_trained_under_qemu(tmp_path: Path) -> None:
    server = Pipeline(tmp_path, "bare-server")
    assert_ok(server.nox("pgo", PGO_TARGET=TARGET, PGO_TRAIN_SCALE="0.2"))
    report = json.loads((server.work / "report.json").read_text())
    assert report["train"]["profraw_files"] == 1  # SIGTERM reached the shim (built for aarch64) inside qemu
    assert report["merge"]["executed_functions"] >= 20
    assert _machine(Path(report["optimise"]["binary"])) == "EM_AARCH64"
    assert report["optimise"]["verify"]["requests"] == report["train"]["requests"]
    assert list((server.work / "bin").glob("pgo-exit-on-sigterm-*-aarch64.so"))


def _path_without(tmp_path: Path, *names: str) -> str:
    """PATH as the tests have it, with /usr/bin replaced by a copy of its links lacking ``names``."""
    usr_bin = tmp_path / "usr-bin"
    usr_bin.mkdir()
    for entry in os.scandir("/usr/bin"):
        if not any(entry.name.startswith(name) for name in names):
            (usr_bin / entry.name).symlink_to(entry.path)
    keep = [d for d in os.environ["PATH"].split(os.pathsep) if os.path.realpath(d) != "/usr/bin"]
    return os.pathsep.join([*keep, str(usr_bin)])


@pytest.mark.refuses("aarch64-target-x86-64-no-cross-linker")
def test_no_cross_linker_is_refused_naming_its_package(hello: Pipeline, tmp_path: Path) -> None:
    path = _path_without(tmp_path, "aarch64-linux-gnu-")
    line = assert_refused(
        hello.nox("pgo", PGO_TARGET=TARGET, PATH=path), f"no linker for {TARGET}: aarch64-linux-gnu-gcc is not found"
    )
    assert "apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross" in line
    assert not hello.work.joinpath("generate-target").exists()  # refused before anything was built


@pytest.mark.refuses("aarch64-target-x86-64-no-qemu-aarch64")
def test_no_qemu_is_refused_naming_qemu_user(hello: Pipeline, tmp_path: Path) -> None:
    line = assert_refused(
        hello.nox("pgo", PGO_TARGET=TARGET, PATH=_path_without(tmp_path, "qemu-aarch64")), "qemu-aarch64 is not found"
    )
    assert "apt-get install -y qemu-user" in line


@pytest.mark.refuses("pgo-bolt-1-for-target-not-x86")
def test_bolt_for_aarch64_is_refused_before_anything_is_built(hello: Pipeline) -> None:
    assert_refused(
        hello.nox("pgo", PGO_TARGET=TARGET, PGO_BOLT="1"),
        "PGO_BOLT=1 is not supported for aarch64",
        "checked on x86_64 only",
    )
    assert not hello.work.joinpath("generate-target").exists()


def test_the_test_suite_of_an_aarch64_build_runs_under_qemu_as_cargos_runner(tmp_path: Path) -> None:
    """The harnesses run under qemu-aarch64 (cargo's runner): the library's unit tests and doc-tests pass. The
    ``cli`` harness spawns the built binary itself (``CARGO_BIN_EXE_…``): the kernel runs that aarch64 program only
    with qemu registered in binfmt_misc (Debian's qemu-user-binfmt), which this machine may lack; without it those
    tests fail (exit 127: glibc hands the unknown executable to sh) and the stage refuses, naming them."""
    from tests.integration.test_pgo_test import WORKLOAD  # noqa: PLC0415  (the fixture crate's own workload)

    workload = tmp_path / "tested.toml"
    workload.write_text(WORKLOAD)
    tested = Pipeline(tmp_path, "tested", workload=str(workload))
    done = tested.nox("pgo", PGO_TARGET=TARGET, PGO_TEST="1")
    log = (tested.work / "logs" / "test.log").read_text()
    assert f"--target {TARGET}" in log and "qemu-aarch64 " in log  # cargo ran each harness under its runner
    listed = json.loads((tested.work / "report.json").read_text())["test"]["suites"]
    suites = {s["name"]: s for s in listed}
    assert suites["doc-tests tested_pgo"]["passed"] == 1 and suites["doc-tests tested_pgo"]["failed"] == 0
    assert any(s["name"] == "tested_pgo" and s["passed"] == 5 and s["failed"] == 0 for s in listed)  # the lib's
    if Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        assert "9 passed, 0 failed, 1 ignored" in assert_ok(done)
    else:
        assert suites["-p tested-pgo --test cli"]["failed"] == 3
        assert_refused(done, "the test suite compiled with the profile failed: 3 of")


def _csys_c_only(tmp_path: Path) -> Pipeline:
    """csys without its C++ (no arm64 C++ headers are needed): a hot loop in C, compiled by cc-rs."""
    pipeline = Pipeline(tmp_path, "csys")
    build = pipeline.crate_dir / "build.rs"
    build.write_text("\n".join(line for line in build.read_text().splitlines() if "mix.cpp" not in line) + "\n")
    main = pipeline.crate_dir / "src" / "main.rs"
    text = main.read_text().replace("    fn csys_cpp_sum(n: u32) -> u32;\n", "")
    main.write_text(text.replace("unsafe { csys_cpp_sum(rounds) }", "(0..rounds).fold(0u32, u32::wrapping_add)"))
    return pipeline


@pytest.mark.refuses("c-function-build-script-stale-hash-mismatch")
def test_the_c_of_an_aarch64_build_is_trained_under_qemu_and_its_stale_profile_refused(tmp_path: Path) -> None:
    """PGO_C=1 for aarch64: clang-22 --target compiles csys's C with the profile flags, the training under qemu
    writes its counts into the one profile, the optimised C uses them; then the C changed is refused as stale."""
    pipeline = _csys_c_only(tmp_path / "trained")
    output = assert_ok(pipeline.nox("pgo", PGO_TARGET=TARGET, PGO_C="1", PGO_CXX="0"))
    assert "c code      csys: 2 C/C++ functions with profile data, 0 without (C by Debian clang version 22." in output
    report = json.loads((pipeline.work / "report.json").read_text())
    crate = next(c for c in report["optimise"]["c_code"]["crates"] if c["crate"] == "csys")
    assert "csys_checksum" in crate["functions_with_profile"] and crate["stale"] == [], crate
    assert _machine(Path(report["optimise"]["binary"])) == "EM_AARCH64"
    objects = list((pipeline.work / "generate-target" / TARGET / "release" / "build").glob("csys-*/out/**/*hot.o"))
    assert objects and all(_machine(o) == "EM_AARCH64" for o in objects), objects
    profile = report["merge"]["profile"]

    again = _csys_c_only(tmp_path / "changed")
    hot = again.crate_dir / "csrc" / "hot.c"
    text = hot.read_text()
    step = "h = mix_step(h, i * 7u + 1u);"
    hot.write_text(text.replace(step, step + "\n            if (h == 7u) h = 1u;"))
    assert hot.read_text() != text
    line = assert_refused(again.nox("optimise", PGO_TARGET=TARGET, PGO_C="1", PGO_CXX="0", PGO_PROFDATA=profile))
    assert "the C of crate csys has 1 stale-profile warnings (hash mismatch), first: csrc/hot.c: csys_checksum" in line
