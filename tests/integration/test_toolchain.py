"""The rustc that builds is the crate's (issue 35, items 1-2; issue 34, item 2): resolved where cargo runs, before
anything is built, from the crate's rust-toolchain.toml, ``+toolchain`` in PGO_CARGO, RUSTUP_TOOLCHAIN,
CARGO_BUILD_RUSTC or ``build.rustc``; its llvm-profdata of its own LLVM; recorded in report.json; a toolchain that is
not installed refused in one line. Real nox, cargo, rustup and Rust 1.94.0 (LLVM 21, installed with
``rustup toolchain install 1.94.0 --profile minimal -c llvm-tools``; the default toolchain here is another) on
copies of the fixtures ``pinned`` (hello's code, pinning 1.94.0) and ``hello``."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes.release.reproducible import tar_member
from tests.conftest import FIXTURES, Pipeline, assert_ok, assert_refused, clean_env, run_nox
from tests.integration.test_release import BASE, TAG, Release

pytestmark = pytest.mark.slow

PINNED = "1.94.0"


def _sysroot(toolchain: str) -> Path:
    out = subprocess.run(
        ["rustc", f"+{toolchain}", "--print", "sysroot"], env=clean_env(), capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def _report(work: Path) -> dict[str, Any]:
    data = json.loads((work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def _comment(binary: Path) -> str:
    return subprocess.run(["readelf", "-p", ".comment", str(binary)], capture_output=True, text=True, check=True).stdout


@dataclass(frozen=True)
class Pinned:
    pipeline: Pipeline
    text: str
    report: dict[str, Any]


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Pinned:
    """One ``nox -s pgo`` of the fixture that pins Rust 1.94.0, shared by the module (a few seconds)."""
    pipeline = Pipeline(tmp_path_factory.mktemp("pinned"), "pinned", workload="hello")
    text = assert_ok(pipeline.nox("pgo"))
    return Pinned(pipeline, text, _report(pipeline.work))


def test_a_pinned_toolchain_builds_merges_and_is_recorded(pinned: Pinned) -> None:
    sysroot = _sysroot(PINNED)
    toolchain_file = pinned.pipeline.crate_dir / "rust-toolchain.toml"
    for stage in ("instrument", "optimise"):
        record = pinned.report[stage]
        assert record["rustc"] == PINNED
        assert record["rustc_llvm"].startswith("21.")
        assert record["rustc_path"] == str(sysroot / "bin" / "rustc")
        assert record["rustc_source"] == f"rust-toolchain.toml at {toolchain_file}"
    merge = pinned.report["merge"]
    assert merge["llvm_profdata"].startswith(str(sysroot / "lib" / "rustlib")), merge["llvm_profdata"]
    assert merge["llvm_profdata_version"].startswith("21.")
    for binary in (pinned.report["instrument"]["binary"], pinned.report["optimise"]["binary"]):
        assert f"rustc version {PINNED}" in _comment(Path(binary))
    # the C profile's clang follows the same LLVM major: there is no clang-21 here, nor in Debian 12's apt, so the C
    # is left as it is, and the way out named is what is here: clang-22, the LLVM of another toolchain
    off = pinned.report["instrument"]["c_code"]["languages"]["C"]["off"]
    assert off.startswith(
        "no clang-21 (apt has no clang-21 here; clang-22 is here (/usr/bin/clang-22), of the LLVM "
    ), off
    assert "RUSTUP_TOOLCHAIN=" in off and "apt-get install" not in off


def test_c_that_no_clang_of_the_pinned_llvm_can_profile_is_said_before_the_build(tmp_path: Path) -> None:
    """csys (C by cc-rs) pinned to 1.94.0 (LLVM 21): its C stays unprofiled; that was said after the instrumented
    build, with `apt-get install clang-21`, a package Debian 12 does not have."""
    p = Pipeline(tmp_path, "csys", workload="hello")
    (p.crate_dir / "rust-toolchain.toml").write_text((FIXTURES / "pinned" / "rust-toolchain.toml").read_text())
    text = assert_ok(p.nox("instrument"))
    warning = next(line for line in text.splitlines() if "will stay unprofiled" in line)
    assert (
        "the C of csys, hostc (build scripts using cc or cmake) will stay unprofiled: no clang-21 (apt has no "
        in warning
    )
    assert "RUSTUP_TOOLCHAIN=" in warning and "apt-get install clang-21" not in text
    assert text.index(warning) < text.index("cargo clean")  # before anything is built


@pytest.mark.refuses("no-llvm-bolt-rustc-llvm-major")
def test_llvm_bolt_follows_the_pinned_llvm_major(tmp_path: Path) -> None:
    """bolt-22 is installed here, but the pinned rustc is LLVM 21: refused before anything is built."""
    p = Pipeline(tmp_path, "pinned", workload="hello")
    assert_refused(p.nox("pgo", PGO_BOLT="1"), f"no llvm-bolt of LLVM 21 (rustc {PINNED}) found")
    _not_built(p)


def test_plus_toolchain_in_pgo_cargo_builds_with_it_and_records_it(hello: Pipeline) -> None:
    assert_ok(hello.nox("instrument", PGO_CARGO=f"cargo +{PINNED} build"))
    record = _report(hello.work)["instrument"]
    assert (record["rustc"], record["rustc_source"]) == (PINNED, f"+{PINNED} in PGO_CARGO")
    assert record["cargo_command"] == ["cargo", f"+{PINNED}", "build"]
    assert f"rustc version {PINNED}" in _comment(Path(record["binary"]))


def test_cargo_build_rustc_and_build_rustc_are_followed_and_recorded(hello: Pipeline) -> None:
    rustc = _sysroot(PINNED) / "bin" / "rustc"
    assert_ok(hello.nox("instrument", CARGO_BUILD_RUSTC=str(rustc)))
    record = _report(hello.work)["instrument"]
    assert (record["rustc"], record["rustc_path"], record["rustc_source"]) == (PINNED, str(rustc), "CARGO_BUILD_RUSTC")
    assert f"rustc version {PINNED}" in _comment(Path(record["binary"]))
    config = hello.crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[build]\nrustc = "{rustc}"\n')
    assert_ok(hello.nox("instrument"))
    record = _report(hello.work)["instrument"]
    assert (record["rustc"], record["rustc_source"]) == (PINNED, f"build.rustc in {config}")


@pytest.mark.parametrize("source", ["RUSTC", "RUSTUP_TOOLCHAIN"])
def test_rustc_and_rustup_toolchain_are_followed_and_recorded(hello: Pipeline, source: str) -> None:
    """Issue 34 (item 2) found these two recorded rightly; kept so: the build's .comment and the record agree."""
    rustc = _sysroot(PINNED) / "bin" / "rustc"
    assert_ok(hello.nox("instrument", **{source: str(rustc) if source == "RUSTC" else PINNED}))
    record = _report(hello.work)["instrument"]
    assert (record["rustc"], record["rustc_path"], record["rustc_source"]) == (PINNED, str(rustc), source)
    assert record["rustc_llvm"].startswith("21.")
    assert f"rustc version {PINNED}" in _comment(Path(record["binary"]))


def test_a_release_with_plus_toolchain_records_the_rustc_that_built(tmp_path: Path) -> None:
    """``PGO_CARGO="cargo +1.94.0 build"`` (issue 34, item 2: the manifest and the provenance named the default
    rustc): the manifest's toolchain, the llvm-profdata that merged, the provenance's rustc and the shipped binary's
    .comment are all 1.94.0's, and ``verify --rebuild`` (the same +1.94.0, from the manifest) gives the binary."""
    release = Release.new(tmp_path).made(PGO_CARGO=f"cargo +{PINNED} build")
    manifest = release.manifest()
    sysroot = _sysroot(PINNED)
    toolchain = manifest["toolchain"]
    assert (
        toolchain["rustc_vV"]
        == subprocess.run(
            [str(sysroot / "bin" / "rustc"), "-vV"], env=clean_env(), capture_output=True, text=True, check=True
        ).stdout
    )
    assert toolchain["rustc"].startswith(f"rustc {PINNED} (commit ") and "LLVM 21." in toolchain["rustc"]
    assert toolchain["cargo"].startswith(f"cargo {PINNED} ")
    assert toolchain["llvm_profdata"].startswith("LLVM 21.") and str(sysroot) in toolchain["llvm_profdata"]
    assert manifest["cargo_command"] == ["cargo", f"+{PINNED}", "build"]
    statement = json.loads((release.dist / f"{BASE}-pgo.tar.gz.intoto.json").read_text())
    deps = {d["name"]: d for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert deps["rustc"]["uri"] == f"pkg:generic/rustc@{PINNED}"
    assert deps["rustc"]["annotations"]["llvm_version"].startswith("21.")
    assert deps["cargo"]["uri"] == f"pkg:generic/cargo@{PINNED}"
    binary = tmp_path / "hello-pgo"
    binary.write_bytes(tar_member(release.dist / f"{BASE}-pgo.tar.gz", f"{BASE}-pgo/hello-pgo"))
    assert f"rustc version {PINNED}" in _comment(binary)
    text = assert_ok(run_nox("verify", release.env(PGO_OUT=str(tmp_path / "again")), [TAG, "--rebuild"]))
    assert f"match     {manifest['artefacts']['pgo']['file']}" in text


def _not_built(p: Pipeline) -> None:
    assert not (p.crate_dir / "target").exists()
    assert not (p.work / "generate-target").exists()


@pytest.mark.refuses("rust-toolchain-not-installed")
def test_a_pinned_toolchain_that_is_not_installed_is_one_line_naming_it_the_file_and_the_directory(
    tmp_path: Path,
) -> None:
    p = Pipeline(tmp_path, "pinned", workload="hello")
    toolchain_file = p.crate_dir / "rust-toolchain.toml"
    toolchain_file.write_text('[toolchain]\nchannel = "1.2.3"\n')
    line = assert_refused(
        p.nox("pgo", RUST_BACKTRACE="1", RUSTUP_AUTO_INSTALL="0"),
        "Rust toolchain 1.2.3-",
        "is not installed",
        f"rust-toolchain.toml at {toolchain_file}",
        f"for the crate in {p.crate_dir}",
        f"cd {p.crate_dir} && rustup toolchain install 1.2.3-",
        "--profile minimal -c llvm-tools",
    )
    assert "<unknown>" not in line
    _not_built(p)


@pytest.mark.refuses("rust-toolchain-not-installed")
@pytest.mark.parametrize(
    ("extra", "who"),
    [
        ({"RUSTUP_TOOLCHAIN": "nonexistent"}, "RUSTUP_TOOLCHAIN"),
        ({"PGO_CARGO": "cargo +nonexistent build"}, "+nonexistent in PGO_CARGO"),
    ],
)
def test_a_toolchain_variable_or_plus_that_is_not_installed_is_one_line(
    hello: Pipeline, extra: dict[str, str], who: str
) -> None:
    line = assert_refused(
        hello.nox("instrument", RUST_BACKTRACE="1", RUSTUP_AUTO_INSTALL="0", **extra),
        f"Rust toolchain nonexistent is not installed: {who} chooses it for the crate in {hello.crate_dir}",
        "rustup toolchain install nonexistent",
    )
    assert "<unknown>" not in line
    _not_built(hello)


@pytest.mark.refuses("rust-toolchain-install-incomplete")
def test_a_pinned_toolchain_whose_install_was_interrupted_names_the_file_and_the_install(hello: Pipeline) -> None:
    """rustup's toolchain folder with cargo and no rustc (an install cut short), under a RUSTUP_HOME of the test's
    own: `rustc --print sysroot` said only rustup's "Missing manifest in toolchain '1.93.0-…'"."""
    host = subprocess.run(["rustc", "-vV"], env=clean_env(), capture_output=True, text=True, check=True).stdout
    toolchain = f"1.93.0-{host.split('host: ', 1)[1].split()[0]}"
    home = hello.root / "rustup"
    cargo = home / "toolchains" / toolchain / "bin" / "cargo"
    cargo.parent.mkdir(parents=True)
    cargo.write_text("#!/bin/sh\nexit 1\n")
    cargo.chmod(0o755)
    toolchain_file = hello.crate_dir / "rust-toolchain.toml"
    toolchain_file.write_text('[toolchain]\nchannel = "1.93.0"\n')
    line = assert_refused(
        hello.nox("instrument", RUSTUP_HOME=str(home), RUSTUP_AUTO_INSTALL="0", RUST_BACKTRACE="1"),
        f"Rust toolchain {toolchain} (chosen by rust-toolchain.toml at {toolchain_file}) for the crate in "
        f"{hello.crate_dir} cannot run rustc: rustup says \"Missing manifest in toolchain '{toolchain}'\"",
        f"(install it again: cd {hello.crate_dir} && rustup toolchain install {toolchain} --profile minimal",
    )
    assert "Stack backtrace" not in line and "<unknown>" not in line
    _not_built(hello)


@pytest.mark.refuses("rustup-cannot-choose-toolchain")
def test_a_toolchain_file_rustup_cannot_parse_is_one_line(hello: Pipeline) -> None:
    (hello.crate_dir / "rust-toolchain.toml").write_text("garbage ][\n")
    line = assert_refused(
        hello.nox("instrument", RUST_BACKTRACE="1"),
        f"rustup cannot choose a Rust toolchain for the crate in {hello.crate_dir}",
        "could not parse override file",
    )
    assert "<unknown>" not in line
    _not_built(hello)


@pytest.mark.refuses("rustc-program-not-found")
def test_a_rustc_that_is_no_program_is_one_line(hello: Pipeline) -> None:
    assert_refused(
        hello.nox("instrument", CARGO_BUILD_RUSTC="no-such-rustc"),
        "CARGO_BUILD_RUSTC names rustc no-such-rustc, which is no program here",
    )
    _not_built(hello)


@pytest.mark.refuses("merge-another-rustc-than-instrumented")
def test_a_merge_that_resolves_another_rustc_than_the_instrumented_build_is_refused(hello: Pipeline) -> None:
    assert_ok(hello.nox("instrument", PGO_CARGO=f"cargo +{PINNED} build"))
    assert_ok(hello.nox("train"))
    line = assert_refused(
        hello.nox("merge"), f"the instrumented build was made by rustc {PINNED} (LLVM 21.", "+1.94.0 in PGO_CARGO"
    )
    assert "and merge resolves rustc 1.95" in line
    assert not (hello.work / "hello-pgo.profdata").exists()
