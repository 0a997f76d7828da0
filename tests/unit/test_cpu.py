"""recipes.cpu: the parsers and decisions of the baseline-CPU check (the emulation itself: integration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes import cpu
from recipes.errors import CheckFailed, ConfigError, MissingInput, ToolchainError
from recipes.rustflags import RustflagsPlan, target_cpu_warning
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


def test_build_info_without_its_lines() -> None:
    with pytest.raises(CheckFailed, match="printed no target= and target_features= lines"):
        cpu.parse_build_info("usage: hello-pgo collatz N\n")


def test_build_info_equal_to_the_defaults_passes() -> None:
    info = cpu.parse_build_info("target=x86_64-unknown-linux-gnu\ntarget_features=fxsr,sse,sse2\n")
    cpu.check_build_info(info, ("fxsr", "sse", "sse2"), Path("demo-server"))


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


def test_posargs() -> None:
    assert cpu.parse_cpu_args([]) == cpu.CpuArgs(None, None)
    parsed = cpu.parse_cpu_args(["--binary", "/bin/true", "--run", "primes", "--fast"])
    assert parsed == cpu.CpuArgs(Path("/bin/true"), ("primes", "--fast"))
    with pytest.raises(ConfigError, match="unknown argument '--cpu'"):
        cpu.parse_cpu_args(["--cpu", "max"])


def test_no_optimised_binary_in_the_work_dir(tmp_path: Path) -> None:
    with pytest.raises(MissingInput, match="names no optimised binary"):
        cpu.default_binary({}, tmp_path)
    with pytest.raises(MissingInput, match="failed its checks"):
        cpu.default_binary({"optimise": {"binary": "/x", "failed": "stale"}}, tmp_path)
    assert cpu.default_binary({"optimise": {"binary": "/x/y"}}, tmp_path) == Path("/x/y")


def _plan(base: tuple[str, ...], config_flags: tuple[str, ...] = ()) -> RustflagsPlan:
    return RustflagsPlan("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS", base, (), config_flags)


def test_target_cpu_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert target_cpu_warning(_plan(("--cfg", "x"))) is None
    assert capsys.readouterr().err == ""
    assert target_cpu_warning(_plan(("-Ctarget-cpu=x86-64-v3",))) == "x86-64-v3"
    assert "warning: the build's flags set target-cpu=x86-64-v3" in capsys.readouterr().err
    assert target_cpu_warning(_plan((), ("-C", "target-cpu=native"))) == "native"


def test_no_qemu_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(
        ToolchainError, match=r"qemu-x86_64 not found: the baseline-CPU check needs it \(apt-get install qemu"
    ):
        cpu.check_qemu({"PATH": str(tmp_path)})


def test_no_binary_to_check_refused(tmp_path: Path) -> None:
    with pytest.raises(MissingInput, match=rf"no binary at {tmp_path / 'hello-pgo'} \(build it first"):
        cpu.check_binary(tmp_path / "hello-pgo", tmp_path / "work", {"PATH": "/usr/bin:/bin"})
    assert not (tmp_path / "work").exists()


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
