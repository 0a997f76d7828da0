"""recipes.release.cpu: the parsers and decisions of the baseline-CPU check (the emulation itself: integration)."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from recipes import report
from recipes.errors import CheckFailed, ConfigError, MissingInput, ToolchainError
from recipes.release import cpu
from recipes.results import CpuBaselineResult
from recipes.store import sha256_file
from recipes.toolchain import emulation
from recipes.toolchain.rustflags import RustflagsPlan, target_cpu_warning
from tests.conftest import DATA


def test_rustc_default_features_of_the_target() -> None:
    text = (DATA / "rustc-print-cfg.txt").read_text()
    assert cpu.parse_rustc_cfg_features(text) == ("fxsr", "sse", "sse2")


def test_rustc_features_of_x86_64_v3() -> None:
    features = cpu.parse_rustc_cfg_features((DATA / "rustc-print-cfg-x86-64-v3.txt").read_text())
    assert {"avx2", "bmi2", "fma", "sse4.2"} <= set(features)
    assert ",".join(features).startswith("avx,avx2,")


def test_build_info() -> None:
    info = cpu.parse_build_info("target=x86_64-unknown-linux-gnu\ntarget_features=sse2,fxsr,sse\n")
    assert info == cpu.BuildInfo("x86_64-unknown-linux-gnu", ("fxsr", "sse", "sse2"))


def test_build_info_of_the_demo_server_equals_rustc_defaults() -> None:
    info = cpu.parse_build_info((DATA / "demo-server-build-info.txt").read_text())
    defaults = cpu.parse_rustc_cfg_features((DATA / "rustc-print-cfg.txt").read_text())
    assert info == cpu.BuildInfo("x86_64-unknown-linux-gnu", defaults)
    cpu.check_build_info(info, defaults, Path("demo-server"))


def test_build_info_of_an_x86_64_v3_demo_server_is_refused() -> None:
    """A demo server built with -Ctarget-cpu=x86-64-v3 stamps what rustc --print cfg says for that cpu."""
    info = cpu.parse_build_info((DATA / "demo-server-build-info-x86-64-v3.txt").read_text())
    v3 = cpu.parse_rustc_cfg_features((DATA / "rustc-print-cfg-x86-64-v3.txt").read_text())
    assert info.target_features == v3
    with pytest.raises(CheckFailed) as caught:
        cpu.check_build_info(info, ("fxsr", "sse", "sse2"), Path("demo-server"))
    assert "beyond them: avx,avx2,bmi1,bmi2,cmpxchg16b,f16c,fma,lzcnt,movbe,popcnt,sse3," in caught.value.line()


def test_build_info_of_a_musl_build_passes_without_crt_static() -> None:
    """rustc's defaults for musl include crt-static (a linkage, not an instruction set); a build script's
    CARGO_CFG_TARGET_FEATURE does not (the demo server for musl stamped fxsr,sse,sse2): that is no refusal, and
    an instruction-set feature beyond the defaults still is."""
    defaults = cpu.parse_rustc_cfg_features((DATA / "rustc-print-cfg-musl.txt").read_text())
    assert defaults == ("crt-static", "fxsr", "sse", "sse2")
    info = cpu.parse_build_info("target=x86_64-unknown-linux-musl\ntarget_features=fxsr,sse,sse2\n")
    cpu.check_build_info(info, defaults, Path("demo-server"))
    with pytest.raises(CheckFailed, match="beyond them: avx2"):
        cpu.check_build_info(cpu.BuildInfo(info.target, (*info.target_features, "avx2")), defaults, Path("d"))


@pytest.mark.refuses("cpu-baseline-build-info-prints-no-target")
def test_build_info_without_its_lines() -> None:
    with pytest.raises(CheckFailed, match="printed no target= and target_features= lines"):
        cpu.parse_build_info("usage: hello-pgo collatz N\n")


def test_build_info_equal_to_the_defaults_passes() -> None:
    info = cpu.parse_build_info("target=x86_64-unknown-linux-gnu\ntarget_features=fxsr,sse,sse2\n")
    cpu.check_build_info(info, ("fxsr", "sse", "sse2"), Path("demo-server"))


@pytest.mark.refuses("cpu-baseline-built-for-other-target-features")
def test_build_info_of_an_x86_64_v3_build_is_refused() -> None:
    built = cpu.parse_rustc_cfg_features((DATA / "rustc-print-cfg-x86-64-v3.txt").read_text())
    info = cpu.BuildInfo("x86_64-unknown-linux-gnu", built)
    with pytest.raises(CheckFailed) as caught:
        cpu.check_build_info(info, ("fxsr", "sse", "sse2"), Path("/x/demo-server"))
    line = caught.value.line()
    assert "demo-server was built for target features avx,avx2," in line
    assert "not rustc's defaults for x86_64-unknown-linux-gnu (fxsr,sse,sse2)" in line
    assert "beyond them: avx,avx2,bmi1" in line
    assert "no -Ctarget-cpu" in line


@pytest.mark.refuses("cpu-baseline-built-for-other-target-features")
def test_build_info_missing_a_default_is_refused() -> None:
    info = cpu.BuildInfo("x86_64-unknown-linux-gnu", ("fxsr", "sse"))
    with pytest.raises(CheckFailed, match="without: sse2"):
        cpu.check_build_info(info, ("fxsr", "sse", "sse2"), Path("demo-server"))


@pytest.mark.parametrize(
    ("line", "addresses"),
    [
        ("listening http=127.0.0.1:8080 https=127.0.0.1:8443", {"http": "127.0.0.1:8080", "https": "127.0.0.1:8443"}),
        ("starting up", {}),
        ("", {}),
    ],
)
def test_listening_line(line: str, addresses: dict[str, str]) -> None:
    assert cpu.parse_listening(line) == addresses


def test_baseline_model_switches_off_everything_after_sse2() -> None:
    assert cpu.BASELINE_CPU.startswith("qemu64,-pni,-cx16,-lahf-lm,")
    for feature in ("avx", "avx2", "sse4.2", "popcnt", "ssse3", "bmi2", "fma"):
        assert f",-{feature}" in cpu.BASELINE_CPU


@pytest.mark.parametrize(
    ("returncode", "text"),
    [
        (0, "exit code 0"),
        (3, "exit code 3"),
        (-4, "killed by SIGILL (illegal instruction)"),
        (-15, "killed by SIGTERM"),
    ],
)
def test_describe_exit(returncode: int, text: str) -> None:
    assert cpu.describe_exit(returncode) == text


@pytest.mark.refuses("cpu-baseline-unknown-session-argument")
def test_posargs() -> None:
    assert cpu.parse_cpu_args([]) == cpu.CpuArgs(None, None)
    parsed = cpu.parse_cpu_args(["--binary", "/bin/true", "--run", "primes", "--fast"])
    assert parsed == cpu.CpuArgs(Path("/bin/true"), ("primes", "--fast"))
    with pytest.raises(ConfigError, match="unknown argument '--cpu'"):
        cpu.parse_cpu_args(["--cpu", "max"])


@pytest.mark.refuses("cpu-baseline-unknown-session-argument")
@pytest.mark.parametrize(
    ("posargs", "message"),
    [
        # taken for --binary before
        (["--b", "/bin/true"], r"--b is an abbreviation of --binary \(write --binary whole\)"),
        # argparse's usage and exit 2 before (--= could be --binary or --run)
        (["--=x"], r"unknown argument '--=x'"),
        # the work dir's optimised binary before
        (["--binary", ""], r"--binary needs a path"),
        # OSError ENAMETOOLONG from is_file() before: a traceback
        (["--binary", "b" * 300], r"--binary: 'b+…' holds a name of 300 bytes"),
        # a folder named ~nosuchuser before; ~ is now expanded as in the other paths given
        (["--binary", "~nosuchuser/hello"], r"--binary: '~nosuchuser/hello' starts with ~nosuchuser"),
    ],
)
def test_bad_posargs_are_one_line(posargs: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cpu.parse_cpu_args(posargs)


@pytest.mark.refuses("cpu-baseline-work-dir-names-no-optimised", "cpu-baseline-last-optimised-build-failed-checks")
def test_no_optimised_binary_in_the_work_dir(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    with pytest.raises(MissingInput, match="names no optimised binary"):
        cpu.default_binary(report.parse(path, {}), tmp_path)
    with pytest.raises(MissingInput, match="names no optimised binary"):
        cpu.default_binary(report.parse(path, {"optimise": {"failed": "optimise did not finish"}}), tmp_path)
    with pytest.raises(MissingInput, match="failed its checks"):
        cpu.default_binary(report.parse(path, {"optimise": {"binary": "/x", "failed": "stale"}}), tmp_path)
    captured = json.loads((DATA / "report-demo-server-bolt.json").read_text())["optimise"]
    own = tmp_path / "optimised" / "y"
    own.parent.mkdir()
    own.write_bytes(b"the checked copy")
    succeeded = report.parse(path, {"optimise": {**captured, "binary": str(own), "binary_sha256": sha256_file(own)}})
    assert cpu.default_binary(succeeded, tmp_path) == own


@pytest.mark.refuses("recorded-path-not-the-work-dirs")
def test_an_optimised_binary_report_json_names_elsewhere_or_changed_is_not_run(tmp_path: Path) -> None:
    """report.json may be garbage or hand-edited: cpu-baseline runs only the work dir's own checked copy."""
    path = tmp_path / "report.json"
    captured = json.loads((DATA / "report-demo-server-bolt.json").read_text())["optimise"]
    elsewhere = report.parse(path, {"optimise": {**captured, "binary": "/x/y"}})
    own = tmp_path / "optimised" / "y"
    with pytest.raises(CheckFailed, match=rf"report.json names /x/y as the optimised binary, not {own}"):
        cpu.default_binary(elsewhere, tmp_path)
    own.parent.mkdir()
    own.write_bytes(b"another program")
    changed = report.parse(path, {"optimise": {**captured, "binary": str(own)}})
    with pytest.raises(CheckFailed, match="changed since optimise checked it"):
        cpu.default_binary(changed, tmp_path)


def _plan(base: tuple[str, ...], config_flags: tuple[str, ...] = ()) -> RustflagsPlan:
    return RustflagsPlan("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS", base, (), config_flags)


def test_target_cpu_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert target_cpu_warning(_plan(("--cfg", "x"))) is None
    assert capsys.readouterr().err == ""
    assert target_cpu_warning(_plan(("-Ctarget-cpu=x86-64-v3",))) == "x86-64-v3"
    assert "warning: the build's flags set target-cpu=x86-64-v3" in capsys.readouterr().err
    assert target_cpu_warning(_plan((), ("-C", "target-cpu=native"))) == "native"


@pytest.mark.refuses("cpu-baseline-no-qemu-qemu-x86-64")
def test_no_qemu_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(
        ToolchainError, match=r"qemu-x86_64 not found: the baseline-CPU check needs it \(apt-get install qemu"
    ):
        cpu.check_qemu({"PATH": str(tmp_path)})


@pytest.mark.refuses("cpu-baseline-qemu-cannot-be-run")
@pytest.mark.parametrize(
    ("content", "mode", "reason"),
    [(b"#!/bin/sh\necho qemu\n", 0o644, "Permission denied"), (b"\x00\x01 not a program", 0o755, "Exec format error")],
    ids=["no-execute-bit", "not-a-program"],
)
def test_a_qemu_that_cannot_be_run_is_one_line_naming_it(
    tmp_path: Path, content: bytes, mode: int, reason: str
) -> None:
    """Was "cannot write qemu-x86_64: Permission denied (free space there or choose another PGO_OUT)"."""
    qemu = tmp_path / "qemu-x86_64"
    qemu.write_bytes(content)
    qemu.chmod(mode)
    with pytest.raises(ToolchainError) as caught:
        cpu.check_qemu({"PATH": str(tmp_path)})
    assert caught.value.line() == (
        f"qemu-x86_64 on PATH cannot be run: {reason} (reinstall qemu-user with apt-get install qemu-user, or put a "
        "working qemu-x86_64 first on PATH)"
    )


@pytest.mark.refuses("cpu-baseline-no-binary-path")
def test_no_binary_to_check_refused(tmp_path: Path) -> None:
    with pytest.raises(MissingInput, match=rf"no binary at {tmp_path / 'hello-pgo'} \(build it first"):
        cpu.check_binary(tmp_path / "hello-pgo", tmp_path / "work", {"PATH": "/usr/bin:/bin"})
    assert not (tmp_path / "work").exists()


@pytest.mark.refuses(
    "cpu-baseline-binary-not-executable",
    "cpu-baseline-binary-not-elf-script-only",
    "cpu-baseline-binary-cannot-read-machine-cannot",
)
def test_a_binary_that_is_not_a_program_is_refused_before_qemu(tmp_path: Path) -> None:
    """Not executable, not ELF (nor a script), a script to run under qemu, a directory: one line each, before the
    controls run (no work dir made); an ELF file this machine cannot run is one line when it is run."""
    env = {"PATH": "/usr/bin:/bin"}
    data = tmp_path / "hello-pgo"
    data.write_bytes(b"\x00\x01 not a program")
    with pytest.raises(MissingInput) as caught:
        cpu.check_binary(data, tmp_path / "work", env)
    assert caught.value.line() == f"{data} is not executable (chmod +x it, or pass --binary the program cargo built)"
    data.chmod(0o755)
    with pytest.raises(CheckFailed) as failed:
        cpu.check_binary(data, tmp_path / "work", env)
    assert failed.value.line() == (
        f"{data} is not an ELF binary (it starts with b'\\x00\\x01 n') "
        "(qemu-user emulates ELF binaries only: pass --binary the program cargo built)"
    )
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho target=x86_64\n")
    script.chmod(0o755)
    with pytest.raises(CheckFailed, match=r"script is not an ELF binary \(it starts with b'#!/b'\) \(qemu-user"):
        cpu.check_binary(script, tmp_path / "work", env, args=["x"])
    with pytest.raises(MissingInput, match=rf"no binary at {tmp_path} \(build it first"):
        cpu.check_binary(tmp_path, tmp_path / "work", env)
    assert not (tmp_path / "work").exists()
    data.write_bytes(b"\x7fELF" + b"\x00" * 60)  # an ELF header of no machine
    with pytest.raises(CheckFailed) as failed:
        cpu.check_binary(data, tmp_path / "work", env)
    assert failed.value.line() == (
        f"{data} cannot be run: Exec format error (pass --binary the program cargo built for this machine)"
    )


# --- the baseline of each architecture -------------------------------------------------------------------


def _elf_header(machine: int) -> bytes:
    """A 64-bit little-endian ELF header of ``machine`` (243: RISC-V), no sections: what pyelftools reads."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    return ident + struct.pack("<HHIQQQIHHHHHH", 2, machine, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)


def test_the_baseline_is_chosen_by_the_binarys_architecture() -> None:
    assert cpu.baseline_for(Path("x"), "x86_64") is cpu.X86_64
    assert cpu.baseline_for(Path("x"), None) is cpu.X86_64  # not ELF: a script run natively
    assert cpu.baseline_for(Path("x"), "aarch64") is cpu.AARCH64
    # x86-64's as it was: the module constants, the same controls
    assert (cpu.X86_64.qemu, cpu.X86_64.cpu, cpu.X86_64.newer_cpu) == (cpu.QEMU, cpu.BASELINE_CPU, "max")
    assert [c.name for c in cpu.X86_64.controls] == ["sse3", "avx2"]
    assert (cpu.AARCH64.qemu, cpu.AARCH64.cpu, cpu.AARCH64.newer_cpu) == ("qemu-aarch64", "cortex-a53", "max")
    assert [c.name for c in cpu.AARCH64.controls] == ["lse", "dotprod"]
    assert all("-static" in c.flags for c in cpu.AARCH64.controls)
    assert (cpu.AARCH64.described, cpu.AARCH64.beyond) == ("an Armv8.0 CPU", "beyond Armv8.0-A")


@pytest.mark.refuses("cpu-baseline-binary-architecture-without-baseline-neither")
def test_a_binary_of_an_architecture_without_a_baseline_is_refused_in_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "riscv-server"
    binary.write_bytes(_elf_header(243))
    binary.chmod(0o755)
    with pytest.raises(ConfigError) as caught:
        cpu.check_binary(binary, tmp_path / "work", {"PATH": "/usr/bin:/bin"}, args=["x"])
    assert caught.value.line() == (
        f"{binary} is an EM_RISCV binary: the baseline-CPU check is of x86-64 binaries (qemu64) and aarch64 ones "
        "(cortex-a53), EM_RISCV is not checked (check it on an x86_64 or aarch64 binary of the same source, or "
        "leave the check out for this target)"
    )
    assert not (tmp_path / "work").exists()


def test_an_aarch64_binary_gets_the_sysroot_unless_it_is_set() -> None:
    assert cpu.baseline_env(cpu.AARCH64, {"PATH": "/bin"}) == {
        "PATH": "/bin",
        "QEMU_LD_PREFIX": "/usr/aarch64-linux-gnu",
    }
    assert cpu.baseline_env(cpu.AARCH64, {"QEMU_LD_PREFIX": "/mine"}) == {"QEMU_LD_PREFIX": "/mine"}
    assert cpu.baseline_env(cpu.X86_64, {"PATH": "/bin"}) == {"PATH": "/bin"}


def test_a_foreign_binary_runs_under_the_newer_model_where_a_native_one_runs_as_it_is() -> None:
    native, other = (cpu.X86_64, cpu.AARCH64) if emulation.host_arch() == "x86_64" else (cpu.AARCH64, cpu.X86_64)
    assert cpu._launch(native) == []
    assert cpu._launch(other) == [other.qemu, "-cpu", "max"]


@pytest.mark.refuses("cpu-baseline-built-for-other-target-features")
def test_rustc_default_features_of_aarch64() -> None:
    """rustc's defaults for aarch64-unknown-linux-gnu are neon alone, as a build script's CARGO_CFG_TARGET_FEATURE
    says (measured: ``neon``; ``lse,neon`` with -Ctarget-feature=+lse): no linkage feature to set aside."""
    defaults = cpu.parse_rustc_cfg_features((DATA / "rustc-print-cfg-aarch64.txt").read_text())
    assert defaults == ("neon",)
    info = cpu.parse_build_info("target=aarch64-unknown-linux-gnu\ntarget_features=neon\n")
    cpu.check_build_info(info, defaults, Path("demo-server"))
    with pytest.raises(CheckFailed) as caught:
        cpu.check_build_info(cpu.BuildInfo(info.target, ("lse", "neon")), defaults, Path("demo-server"))
    assert "not rustc's defaults for aarch64-unknown-linux-gnu (neon): beyond them: lse (" in caught.value.line()


@pytest.mark.refuses("cpu-baseline-no-qemu-qemu-x86-64", "cpu-baseline-no-aarch64-linux-gnu-gcc")
def test_no_aarch64_qemu_or_compiler_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as caught:
        cpu.check_qemu({"PATH": str(tmp_path)}, cpu.AARCH64)
    assert caught.value.line() == (
        "qemu-aarch64 not found: the baseline-CPU check needs it (apt-get install qemu-user)"
    )
    with pytest.raises(ToolchainError) as caught:
        cpu.check_controls(tmp_path, {"PATH": str(tmp_path)}, cpu.AARCH64)
    assert caught.value.line() == (
        "aarch64-linux-gnu-gcc not found: the baseline-CPU check of aarch64 binaries builds its control programs "
        "with it (apt-get install gcc-aarch64-linux-gnu)"
    )
    assert not list(tmp_path.iterdir())


def _result(arch: str | None) -> CpuBaselineResult:
    result = CpuBaselineResult(
        binary=Path("/w/hello-pgo"),
        qemu="qemu-x86_64 version 7.2.22",
        cpu=cpu.BASELINE_CPU,
        controls={"sse3": {"baseline": "killed by SIGILL (illegal instruction)", "max": "exit code 0"}},
        command={"args": ["primes", "100"], "exit": "exit code 0"},
    )
    if arch is not None:
        baseline = cpu.BASELINES[arch]
        result = replace(result, arch=arch, qemu_program=baseline.qemu, cpu=baseline.cpu)
    return result


def test_summary_names_the_model_and_the_qemu() -> None:
    x86 = f"cpu-baseline /w/hello-pgo passed under qemu-x86_64 -cpu {cpu.BASELINE_CPU}"
    assert cpu.summary_lines(_result(None))[0] == x86  # a record of before the arch was recorded
    assert cpu.summary_lines(_result("x86_64"))[0] == x86
    lines = cpu.summary_lines(_result("aarch64"))
    assert lines[0] == (
        "cpu-baseline /w/hello-pgo passed under qemu-aarch64 -cpu cortex-a53 (an Armv8.0 CPU: nothing beyond Armv8.0-A)"
    )
    assert lines[-1] == "  ran: primes 100: exit code 0"
