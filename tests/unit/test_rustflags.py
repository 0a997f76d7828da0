from __future__ import annotations

from pathlib import Path

import pytest

from recipes.errors import ConfigError, EnvironmentRefused
from recipes.toolchain.rustflags import (
    env_with_rustflags,
    glibc_suffix,
    plan_rustflags,
    profile_flags_in,
    rust_triple,
    target_cpu_in,
    target_rustflags_var,
)

T = "x86_64-unknown-linux-gnu"
VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"


@pytest.mark.parametrize(
    ("target", "var"),
    [
        (T, VAR),
        ("x86_64-unknown-linux-gnu.2.28", VAR),
        ("aarch64-unknown-linux-musl", "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS"),
        ("thumbv7em-none-eabihf", "CARGO_TARGET_THUMBV7EM_NONE_EABIHF_RUSTFLAGS"),
    ],
)
def test_target_rustflags_var(target: str, var: str) -> None:
    assert target_rustflags_var(target) == var


def test_glibc_suffix() -> None:
    assert rust_triple("x86_64-unknown-linux-gnu.2.28") == T
    assert glibc_suffix("x86_64-unknown-linux-gnu.2.28") == "2.28"
    assert glibc_suffix(T) is None
    assert rust_triple("armv7-unknown-linux-gnueabihf.2.17") == "armv7-unknown-linux-gnueabihf"


@pytest.mark.parametrize(
    "flags",
    [
        ["-Cprofile-use=/x.profdata"],
        ["-C", "profile-generate=/tmp/p"],
        ["--codegen=profile-use=/x"],
        ["--codegen", "profile-sample-use=/x"],
        ["-Copt-level=3", "-Cprofile-generate"],
        ["-Zprofile-sample-use=/x.prof"],
        ["-Z", "profile-sample-use=/x.prof"],
        ["-Zprofile"],
        ["-Cprofile_use=/x.profdata"],  # rustc reads _ for - in an option's name
        ["--codegen", "profile_generate"],
        ["-Zprofile_sample_use=/x.prof"],
    ],
)
def test_profile_flags_found(flags: list[str]) -> None:
    assert profile_flags_in(flags)


def test_no_profile_flags() -> None:
    assert not profile_flags_in(["-Ctarget-cpu=x86-64", "--cfg", "profile", "-C", "opt-level=3"])
    assert not profile_flags_in(["-Zshare-generics", "-Z", "profiler-runtime=x", "-Zprofile-closures"])


def test_target_cpu_in() -> None:
    assert target_cpu_in(["-Ctarget-cpu=x86-64-v3"]) == "x86-64-v3"
    assert target_cpu_in(["-C", "target-cpu=native"]) == "native"
    # every spelling rustc takes (a wrapper's or a config's): the warning must not depend on the spelling
    assert target_cpu_in(["--codegen", "target-cpu=native"]) == "native"
    assert target_cpu_in(["--codegen=target-cpu=znver4"]) == "znver4"
    assert target_cpu_in(["-Ctarget_cpu=x86-64-v2"]) == "x86-64-v2"
    assert target_cpu_in(["-Ctarget-cpu=native", "-C", "target-cpu=x86-64"]) == "x86-64"  # the last one wins
    assert target_cpu_in(["--codegen", "opt-level=3", "-Ctarget-cpux=1"]) is None
    assert target_cpu_in(["-Copt-level=3"]) is None


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "cargo-home"
    home.mkdir(exist_ok=True)
    return {"CARGO_HOME": str(home), "HOME": str(tmp_path), **extra}


def _crate(tmp_path: Path, config: str) -> Path:
    crate = tmp_path / "ws" / "crate"
    (crate / ".cargo").mkdir(parents=True)
    (crate / ".cargo" / "config.toml").write_text(config)
    return crate


@pytest.mark.refuses("rustflags-cargo-encoded-rustflags-set-even-empty")
@pytest.mark.parametrize("name", ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"])
def test_global_rustflags_refused_even_empty(tmp_path: Path, name: str) -> None:
    with pytest.raises(EnvironmentRefused, match=f"{name} is set"):
        plan_rustflags(T, tmp_path, _env(tmp_path, **{name: ""}))


def test_existing_target_flags_stay_first(tmp_path: Path) -> None:
    plan = plan_rustflags(T, tmp_path, _env(tmp_path, **{VAR: "--remap-path-prefix=/a=/b -Ctarget-cpu=x86-64"}))
    env = env_with_rustflags({}, plan, ["-Cprofile-use=/s/x.profdata"])
    assert env[VAR] == "--remap-path-prefix=/a=/b -Ctarget-cpu=x86-64 -Cprofile-use=/s/x.profdata"


@pytest.mark.refuses("per-target-variable-cargo-config-build-target")
def test_profile_flags_in_the_base_refused(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentRefused, match="already holds profile flags"):
        plan_rustflags(T, tmp_path, _env(tmp_path, **{VAR: "-Cprofile-use=/old.profdata"}))


def test_build_rustflags_carried_over(tmp_path: Path) -> None:
    crate = _crate(tmp_path, '[build]\nrustflags = ["--cfg", "hello_config"]\n')
    plan = plan_rustflags(T, crate, _env(tmp_path))
    assert plan.base == ("--cfg", "hello_config")
    assert plan.carried_from and "config.toml" in plan.carried_from[0]


def test_build_rustflags_of_a_parent_directory_and_cargo_home(tmp_path: Path) -> None:
    crate = _crate(tmp_path, "")
    (tmp_path / "ws" / ".cargo").mkdir()
    (tmp_path / "ws" / ".cargo" / "config.toml").write_text('[build]\nrustflags = "--cfg parent"\n')
    env = _env(tmp_path)
    Path(env["CARGO_HOME"], "config.toml").write_text('[build]\nrustflags = ["--cfg", "home"]\n')
    plan = plan_rustflags(T, crate, env)
    assert plan.base == ("--cfg", "parent", "--cfg", "home")


def test_build_rustflags_not_carried_when_target_flags_replace_them(tmp_path: Path) -> None:
    # The plain build already ignores [build] rustflags here: carrying them would change the build.
    crate = _crate(tmp_path, f'[build]\nrustflags = ["--cfg", "b"]\n[target.{T}]\nrustflags = ["--cfg", "t"]\n')
    plan = plan_rustflags(T, crate, _env(tmp_path))
    assert plan.base == ()
    assert plan.config_target_flags == ("--cfg", "t")


@pytest.mark.refuses("target-cfg-table-makes-unknowable-whether-build")
def test_build_rustflags_with_cfg_target_refused(tmp_path: Path) -> None:
    crate = _crate(tmp_path, '[build]\nrustflags = ["--cfg", "b"]\n[target.\'cfg(unix)\']\nrustflags = ["-Cx"]\n')
    with pytest.raises(EnvironmentRefused, match="cannot tell whether"):
        plan_rustflags(T, crate, _env(tmp_path))


@pytest.mark.refuses("per-target-variable-cargo-config-build-target")
def test_profile_flags_in_cargo_config_refused(tmp_path: Path) -> None:
    crate = _crate(tmp_path, '[build]\nrustflags = ["-Cprofile-generate=/tmp/x"]\n')
    with pytest.raises(EnvironmentRefused, match="already holds profile flags"):
        plan_rustflags(T, crate, _env(tmp_path))


@pytest.mark.refuses("per-target-variable-cargo-config-build-target")
@pytest.mark.parametrize("cfg", ["cfg(unix)", 'cfg(target_os = \\"linux\\")', "cfg(windows)"])
def test_profile_flags_in_a_cfg_target_table_refused(tmp_path: Path, cfg: str) -> None:
    """cargo joins the rustflags of every ``[target.'cfg(…)']`` table that matches to the per-target variable's,
    so a profile flag there reaches rustc beside the pipeline's; one that may not match is refused all the same."""
    crate = _crate(tmp_path, f'[target."{cfg}"]\nrustflags = ["-Cprofile-use=/elsewhere/x.profdata"]\n')
    with pytest.raises(EnvironmentRefused) as caught:
        plan_rustflags(T, crate, _env(tmp_path))
    line = caught.value.line()
    assert f"[target.'{cfg.replace(chr(92), '')}'] rustflags already holds profile flags" in line
    assert "-Cprofile-use=/elsewhere/x.profdata" in line


def test_cargo_build_rustflags_env_carried(tmp_path: Path) -> None:
    plan = plan_rustflags(T, tmp_path, _env(tmp_path, CARGO_BUILD_RUSTFLAGS="--cfg e"))
    assert plan.base == ("--cfg", "e")


def test_env_builder_is_pure(tmp_path: Path) -> None:
    base = {"PATH": "/bin"}
    plan = plan_rustflags(T, tmp_path, _env(tmp_path))
    env = env_with_rustflags(base, plan, ["-Cprofile-generate=/w/profraw"])
    assert base == {"PATH": "/bin"}
    assert env[VAR] == "-Cprofile-generate=/w/profraw"


def test_carried_build_rustflag_with_white_space_refused(tmp_path: Path) -> None:
    crate = _crate(tmp_path, '[build]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    config = crate / ".cargo" / "config.toml"
    with pytest.raises(EnvironmentRefused) as caught:
        plan_rustflags(T, crate, _env(tmp_path))
    line = caught.value.line()
    assert f"{config} [build] rustflags has the entry 'x=\"a b\"', which contains white space" in line
    assert f"into {VAR}, which cargo splits on white space" in line
    assert f"write it without spaces, or move the rustflags to [target.{T}] rustflags" in line


def test_build_rustflag_with_white_space_not_carried_is_fine(tmp_path: Path) -> None:
    # [target.<triple>] rustflags replace [build] rustflags in the plain build too: nothing is carried
    crate = _crate(tmp_path, f'[build]\nrustflags = ["x y"]\n[target.{T}]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    plan = plan_rustflags(T, crate, _env(tmp_path))
    assert plan.base == ()
    assert plan.config_target_flags == ("--cfg", 'x="a b"')


def test_string_build_rustflags_are_split_as_cargo_splits_them(tmp_path: Path) -> None:
    crate = _crate(tmp_path, '[build]\nrustflags = "--cfg   spaced"\n')
    assert plan_rustflags(T, crate, _env(tmp_path)).base == ("--cfg", "spaced")


def test_existing_target_variable_is_taken_as_cargo_splits_it(tmp_path: Path) -> None:
    plan = plan_rustflags(T, tmp_path, _env(tmp_path, **{VAR: '--cfg  x="a   -Copt-level=3'}))
    assert plan.base == ("--cfg", 'x="a', "-Copt-level=3")


@pytest.mark.refuses("cargo-config-file-not-valid-toml")
def test_a_cargo_config_that_is_not_toml_refused(tmp_path: Path) -> None:
    crate = _crate(tmp_path, "[build\nrustflags = []\n")
    config = crate / ".cargo" / "config.toml"
    with pytest.raises(ConfigError, match=rf"{config}: not valid TOML: .*cargo cannot read it either"):
        plan_rustflags(T, crate, _env(tmp_path))


@pytest.mark.refuses("cargo-config-file-not-utf-8-text")
def test_a_cargo_config_that_is_not_utf8_refused(tmp_path: Path) -> None:
    crate = _crate(tmp_path, "[build]\nrustflags = []\n")
    config = crate / ".cargo" / "config.toml"
    config.write_bytes(b"# r\xe9glages\n[build]\nrustflags = []\n")
    with pytest.raises(ConfigError) as caught:
        plan_rustflags(T, crate, _env(tmp_path))
    assert caught.value.line() == (
        f"the cargo config {config} is not UTF-8 text (byte 0xe9 on line 1, offset 3) "
        "(save it as UTF-8 text; cargo cannot read it either)"
    )


@pytest.mark.refuses("cargo-config-rustflags-not-string-list-strings")
@pytest.mark.parametrize(
    ("config", "where"),
    [
        ("[build]\nrustflags = 3\n", r"\[build\] rustflags"),
        ('[build]\nrustflags = ["--cfg", 1]\n', r"\[build\] rustflags"),
        (f'[target.{T}]\nrustflags = {{ cfg = "x" }}\n', rf"\[target\.{T}\] rustflags"),
    ],
)
def test_cargo_config_rustflags_of_another_type_refused(tmp_path: Path, config: str, where: str) -> None:
    crate = _crate(tmp_path, config)
    with pytest.raises(ConfigError, match=rf"{where}: rustflags must be a string or a list of strings"):
        plan_rustflags(T, crate, _env(tmp_path))


@pytest.mark.refuses("flag-pipeline-adds-work-dir-store-path")
def test_a_profile_flag_with_white_space_refused(tmp_path: Path) -> None:
    """The work dir (or store) path is on the flag the pipeline adds; cargo would split the variable there."""
    plan = plan_rustflags(T, tmp_path, _env(tmp_path))
    flag = f"-Cprofile-generate={tmp_path}/my work/profraw"
    with pytest.raises(ConfigError, match=rf"{VAR} cannot carry \(use a work dir and profile store whose paths"):
        env_with_rustflags({"PATH": "/bin"}, plan, [flag])
