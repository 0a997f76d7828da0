"""The plan's checks before anything is built: the target triple (real rustc) and the profile store."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.config import Config, load_config
from recipes.errors import ConfigError, StoreError
from recipes.toolchain import preflight
from recipes.toolchain.rustflags import RustflagsPlan
from tests.conftest import clean_env

HOST = "x86_64-unknown-linux-gnu"


def _config(tmp_path: Path, **env: str) -> Config:
    (tmp_path / "pyproject.toml").write_text("[tool.pgo]\n")
    return load_config(tmp_path, env)


@pytest.mark.parametrize("target", [HOST, f"{HOST}.2.28", "aarch64-unknown-linux-gnu", "wasm32-unknown-unknown"])
def test_known_targets_pass(target: str) -> None:
    preflight.check_target_triple(target, clean_env())


@pytest.mark.refuses("pgo-target-target-release-several-not-target")
@pytest.mark.parametrize(
    ("target", "suggestion"),
    [
        ("x86_64-unknown-linux-gun", f"did you mean {HOST}?"),
        ("x86_64-unknown-linux-gun.2.28", f"did you mean {HOST}.2.28?"),
        ("aarch64-linux-gnu", "did you mean aarch64-unknown-linux-gnu?"),
        ("not-a-triple", "did you mean "),
    ],
)
def test_unknown_target_refused_with_the_nearest(target: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as caught:
        preflight.check_target_triple(target, clean_env())
    line = caught.value.line()
    assert line.startswith(f"PGO_TARGET={target} is not a target this rustc knows")
    assert suggestion in line
    assert "rustc --print target-list" in line


def test_target_list_is_this_rustcs() -> None:
    known = preflight.target_list(clean_env())
    assert HOST in known
    assert len(known) > 100


def test_custom_target_specs_are_left_to_rustc(tmp_path: Path) -> None:
    preflight.check_target_triple(str(tmp_path / "my-board.json"), clean_env())
    (tmp_path / "my-board.json").write_text("{}")
    preflight.check_target_triple("my-board", clean_env({"RUST_TARGET_PATH": str(tmp_path)}))
    with pytest.raises(ConfigError, match="PGO_TARGET=my-board is not"):
        preflight.check_target_triple("my-board", clean_env())


def test_store_root_configured_or_default(tmp_path: Path) -> None:
    configured = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "s"))
    assert preflight.store_root(configured, "hello") == tmp_path / "s"
    default = _config(tmp_path)
    assert preflight.store_root(default, "hello") == Path("/tmp/hello-pgo")
    assert preflight.store_root(default, None) is None


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
def test_check_refuses_an_unsafe_store_before_anything(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    config = _config(tmp_path, PGO_PROFILE_STORE=str(shared / "store"))
    with pytest.raises(StoreError, match=f"inside {shared}, which its group and others may write"):
        preflight.check(config, clean_env(), HOST)
    assert not (shared / "store").exists()


@pytest.mark.refuses("pgo-target-target-release-several-not-target")
def test_check_refuses_an_unknown_target(tmp_path: Path) -> None:
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"))
    with pytest.raises(ConfigError, match="PGO_TARGET=not-a-triple is not"):
        preflight.check(config, clean_env(), "not-a-triple")


def test_check_of_a_good_plan_creates_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"))
    preflight.check(config, clean_env(), HOST, bin_name="hello")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


@pytest.mark.refuses("cargo-zigbuild-without-pgo-generate-linker-for")
def test_zigbuild_needs_a_generate_linker_only_where_it_instruments(tmp_path: Path) -> None:
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"), PGO_CARGO="cargo zigbuild")
    with pytest.raises(ConfigError, match="cargo zigbuild cannot link the instrumented binary"):
        preflight.check(config, clean_env(), HOST)
    preflight.check(config, clean_env(), HOST, instruments=False)  # optimise, pgo-test, rebuild


@pytest.mark.refuses("pgo-generate-linker-names-no-program")
@pytest.mark.parametrize("linker", ["no-such-linker", "/usr/bin/no-such-linker", "/etc/passwd", "x" * 300])
def test_a_generate_linker_that_is_no_program_is_refused_before_anything(tmp_path: Path, linker: str) -> None:
    # before: cargo clean and the instrumented build ran, and failed at the link (rustc: linker `…` not found)
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"), PGO_GENERATE_LINKER=linker)
    with pytest.raises(ConfigError, match=rf"PGO_GENERATE_LINKER={linker}: no such program, and the instrumented"):
        preflight.check(config, clean_env(), HOST)
    preflight.check(config, clean_env(), HOST, instruments=False)  # optimise links with the build's own linker


@pytest.mark.parametrize("linker", ["cc", "/usr/bin/cc", "tools/my-linker"])
def test_a_generate_linker_that_is_a_program_or_relative_passes(tmp_path: Path, linker: str) -> None:
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"), PGO_GENERATE_LINKER=linker)
    preflight.check(config, clean_env(), HOST)


@pytest.mark.refuses("work-dir-store-inside-one-another-one")
@pytest.mark.parametrize(
    ("out", "store", "said"),
    [
        ("store/work", "store", "the work dir PGO_OUT={out} is inside the profile store {store}"),
        ("work", "work/store", "the profile store {store} is inside the work dir PGO_OUT={out}"),
        ("same", "same", "the work dir PGO_OUT={out} is the profile store {store}"),
    ],
    ids=["work-in-store", "store-in-work", "same"],
)
def test_work_dir_and_store_inside_one_another_refused(tmp_path: Path, out: str, store: str, said: str) -> None:
    config = _config(tmp_path, PGO_OUT=str(tmp_path / out), PGO_PROFILE_STORE=str(tmp_path / store))
    with pytest.raises(ConfigError) as caught:
        preflight.check(config, clean_env(), HOST)
    expected = said.format(out=tmp_path / out, store=tmp_path / store)
    assert caught.value.line() == f"{expected} (give PGO_OUT and PGO_PROFILE_STORE paths outside one another)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


@pytest.mark.refuses("work-dir-store-inside-one-another-one")
def test_work_dir_inside_the_store_behind_a_symlink_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    (tmp_path / "alias").symlink_to(store)
    with pytest.raises(ConfigError) as caught:
        preflight.check_apart(tmp_path / "alias" / "work", store)
    assert caught.value.line().startswith(
        f"the work dir PGO_OUT={tmp_path / 'alias' / 'work'} is inside the profile store {store} "
        f"(as symlinks resolve them: {store / 'work'} and {store})"
    )
    preflight.check_apart(tmp_path / "work", store)  # beside one another: fine
    preflight.check_apart(tmp_path / "store-work", store)  # a common prefix of the names is not inside


# --- the target's standard library -----------------------------------------------------------------------------

NOT_INSTALLED = "riscv64gc-unknown-linux-gnu"  # a target rustc knows whose std no toolchain here has


@pytest.mark.refuses("target-standard-library-not-installed")
def test_a_target_whose_std_is_not_installed_is_refused_naming_rustup_target_add(tmp_path: Path) -> None:
    # it used to be "instrumented build failed (see log)", after cargo clean, at the first crate: can't find core
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"))
    env = clean_env({"RUSTUP_TOOLCHAIN": "stable"})
    with pytest.raises(ConfigError) as caught:
        preflight.check(config, env, NOT_INSTALLED, bin_name="hello")
    line = caught.value.line()
    assert line.startswith(f"PGO_TARGET={NOT_INSTALLED}: the standard library for {NOT_INSTALLED} is not installed")
    assert f"rustlib/{NOT_INSTALLED}/lib: no such directory" in line
    assert line.endswith(f"(install it: rustup target add --toolchain stable {NOT_INSTALLED})")


def test_an_installed_target_and_a_std_built_by_cargo_pass(tmp_path: Path) -> None:
    config = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"))
    preflight.check_target_installed("x86_64-unknown-linux-musl", clean_env(), config)  # installed (CONTRIBUTING.md)
    preflight.check_target_installed(f"{HOST}.2.28", clean_env(), config)  # zigbuild's suffix: the host's std
    with pytest.raises(ConfigError):
        preflight.check_target_installed(NOT_INSTALLED, clean_env(), config)
    (tmp_path / ".cargo").mkdir()
    (tmp_path / ".cargo" / "config.toml").write_text('[unstable]\nbuild-std = ["std", "panic_abort"]\n')
    preflight.check_target_installed(NOT_INSTALLED, clean_env(), config)  # cargo builds std: rustc's to judge
    (tmp_path / ".cargo" / "config.toml").unlink()
    preflight.check_target_installed(NOT_INSTALLED, clean_env({"CARGO_UNSTABLE_BUILD_STD": "std"}), config)
    zbuild = _config(tmp_path, PGO_PROFILE_STORE=str(tmp_path / "store"), PGO_CARGO="cargo build -Zbuild-std")
    preflight.check_target_installed(NOT_INSTALLED, clean_env(), zbuild)


def test_the_verdict_on_a_sysroots_files() -> None:
    libdir = Path("/sysroot/lib/rustlib") / NOT_INSTALLED / "lib"
    assert preflight.std_missing(NOT_INSTALLED, libdir, ["libcore-0123.rlib", "libstd-0123.rlib"], "1.94.0") is None
    half = preflight.std_missing(NOT_INSTALLED, libdir, ["libstd-0123.so"], None)
    assert half is not None
    assert f"{libdir}: no libcore-*.rlib there" in half.message
    assert "is not installed in this rustc" in half.message
    assert half.hint.startswith(f"install the rust-std component for {NOT_INSTALLED} into this rustc's sysroot")
    suffixed = preflight.std_missing(f"{NOT_INSTALLED}.2.28", libdir, [], "1.94.0")
    assert suffixed is not None
    assert suffixed.message.startswith(f"PGO_TARGET={NOT_INSTALLED}.2.28 ({NOT_INSTALLED}): ")
    assert suffixed.hint == f"install it: rustup target add --toolchain 1.94.0 {NOT_INSTALLED}"


# --- rustflags rustc will not take -------------------------------------------------------------------------------

#: what rustc 1.95.0 says of -Cllvm-args=-inline-thresold=225 (stderr, as captured)
UNKNOWN_LLVM = (
    "rustc -Cllvm-args=\"...\" with: Unknown command line argument '-inline-thresold=225'.  Try: 'rustc "
    '-Cllvm-args="..." with --help\'\nrustc -Cllvm-args="..." with: Did you mean \'--inline-threshold=225\'?\n'
)
VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"


def _flags(env: dict[str, str], base: tuple[str, ...] = (), target: tuple[str, ...] = ()) -> RustflagsPlan:
    return RustflagsPlan(VAR, (*env.get(VAR, "").split(), *base), ("c.toml [build] rustflags",) if base else (), target)


@pytest.mark.refuses("rustflags-rustc-refuses")
def test_the_verdict_on_what_rustc_said() -> None:
    # it used to be "cargo clean failed (see log)", the log saying why
    unknown = preflight.rustflags_refused(VAR, UNKNOWN_LLVM)
    assert unknown.message == f"{VAR}: LLVM has no option -inline-thresold=225 (-Cllvm-args=-inline-thresold=225)"
    assert unknown.hint.startswith("did you mean --inline-threshold=225? fix or remove it")
    codegen = preflight.rustflags_refused("c.toml [build] rustflags", "error: unknown codegen option: `no-such`\n\n")
    assert codegen.line() == (
        "c.toml [build] rustflags: rustc refuses these flags: unknown codegen option: `no-such` "
        "(fix or remove it: every build would fail at its first step)"
    )


@pytest.mark.refuses("rustflags-rustc-refuses")
def test_each_source_of_flags_is_asked_of_real_rustc(tmp_path: Path) -> None:
    good = {VAR: "-Cllvm-args=-inline-threshold=225 -Cdebuginfo=1"}
    preflight.check_rustflags(_flags(good), HOST, clean_env(good), tmp_path)
    preflight.check_rustflags(_flags({}), HOST, clean_env(), tmp_path)  # no flags: nothing asked
    bad = {VAR: "-Cllvm-args=-inline-thresold=225"}
    with pytest.raises(ConfigError, match=f"^{VAR}: LLVM has no option -inline-thresold=225 "):
        preflight.check_rustflags(_flags(bad), HOST, clean_env(bad), tmp_path)
    with pytest.raises(ConfigError, match=r"^c.toml \[build\] rustflags: rustc refuses these flags: unknown codegen"):
        preflight.check_rustflags(_flags({}, base=("-Cno-such=1",)), HOST, clean_env(), tmp_path)
    with pytest.raises(ConfigError, match=rf"^\[target.{HOST}\] rustflags of the cargo config: LLVM has no option"):
        preflight.check_rustflags(_flags({}, target=("-Cllvm-args=-no-such",)), HOST, clean_env(), tmp_path)
