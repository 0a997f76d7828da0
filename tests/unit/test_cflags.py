"""The pure parts of recipes/toolchain/cflags.py: the variables cc-rs reads, the refusals made before a build, clang
found or
refused, and the C warnings of a real optimised build's log (``tests/data/cflags/``: cc-rs 1.11.3, clang 22)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, CommandFailed, ConfigError, EnvironmentRefused, ToolchainError
from recipes.results import CCrateRecord
from recipes.toolchain import cflags
from recipes.toolchain.cargo.log import profile_warnings
from recipes.toolchain.rustc import RustcInfo
from recipes.toolchain.rustflags import cargo_config_files

DATA = Path(__file__).resolve().parents[1] / "data" / "cflags"
RUSTC = RustcInfo(release="1.95.0", host="x86_64-unknown-linux-gnu", commit_hash="x", llvm_version="22.1.2")
HOST = RUSTC.host


def test_the_variables_cc_rs_reads_first_wins() -> None:
    assert cflags.env_names("CC", HOST, cross=False) == [
        "CC_x86_64-unknown-linux-gnu",
        "CC_x86_64_unknown_linux_gnu",
        "HOST_CC",
        "CC",
    ]
    assert cflags.env_names("CFLAGS", "aarch64-unknown-linux-gnu", cross=True)[2] == "TARGET_CFLAGS"
    assert cflags.target_var("CXXFLAGS", HOST) == "CXXFLAGS_x86_64_unknown_linux_gnu"


@pytest.mark.refuses("profile-flag-already-user-c-c-flags")
@pytest.mark.parametrize("flag", ["-fprofile-use=/p.profdata", "-fprofile-instr-generate", "-fprofile-sample-use=x"])
def test_a_profile_flag_in_the_users_flags_refused(flag: str) -> None:
    with pytest.raises(EnvironmentRefused) as caught:
        cflags.refuse_profile_flags({"TARGET_CXXFLAGS": f"-O2 {flag}"}, "aarch64-unknown-linux-gnu", cross=True)
    assert caught.value.message == f"TARGET_CXXFLAGS already holds profile flags ({flag})"
    cflags.refuse_profile_flags({"TARGET_CXXFLAGS": flag}, HOST, cross=False)  # not read for the host: no refusal


def _script(tmp_path: Path, name: str, version_line: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(0o755)
    return path


@pytest.mark.refuses("clang-c-profile-another-llvm-major-not")
def test_clang_of_rustcs_major_found_and_another_refused(tmp_path: Path) -> None:
    env = {"PATH": f"{tmp_path}{os.pathsep}/usr/bin"}
    found = cflags.find_clang(RUSTC, env, None)
    assert found is not None and cflags.clang_version([str(found)], env) is not None
    other = _script(tmp_path, "clang-14", "Debian clang version 14.0.6")
    _script(tmp_path, "clang++-14", "Debian clang version 14.0.6")
    with pytest.raises(ToolchainError) as caught:
        cflags.plan_c(RUSTC, env, HOST, setting=None, clang=str(other), zigbuild=False)
    assert caught.value.message.startswith(f"PGO_CLANG {other} is clang 14.0.6 but rustc 1.95.0 is LLVM 22.1.2")
    assert "apt-get install clang-22" in caught.value.hint
    not_clang = _script(tmp_path, "gcc-like", "gcc (Debian 12.2.0-14) 12.2.0")
    with pytest.raises(ToolchainError, match="is not clang"):
        cflags.check_major(str(not_clang), cflags.clang_version([str(not_clang)], env), RUSTC, "PGO_CLANG")


@pytest.mark.refuses("pgo-c-1-no-clang-rustc-major")
def test_no_clang_is_off_by_default_and_refused_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cflags, "LLVM_BIN", str(tmp_path / "llvm-{major}" / "bin"))  # no /usr/lib/llvm-22 here
    env = {"PATH": str(tmp_path)}
    plan = cflags.plan_c(RUSTC, env, HOST, setting=None, clang=None, zigbuild=False)
    assert not plan.enabled and plan.languages[0].off == "no clang-22 (apt-get install clang-22)"
    with pytest.raises(ToolchainError) as caught:
        cflags.plan_c(RUSTC, env, HOST, setting=True, clang=None, zigbuild=False)
    assert caught.value.message == "PGO_C=1 but no clang of LLVM 22 (rustc 1.95.0) is found"
    assert "apt-get install clang-22" in caught.value.hint


@pytest.mark.refuses("pgo-c-1-no-clang-rustc-major")
def test_the_users_compiler_kept_and_profiled_only_when_it_is_rustcs_clang(tmp_path: Path) -> None:
    gcc = _script(tmp_path, "gcc-like", "gcc (Debian 12.2.0-14) 12.2.0")
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin", "CC": str(gcc)}, HOST, setting=None, clang=None, zigbuild=False)
    c, cxx = plan.languages
    assert c.compiler is None and c.host == (str(gcc),) and c.off == f"CC={gcc} (yours) is not clang, not clang 22"
    assert cxx.compiler is not None and cxx.host == ("c++",)
    with pytest.raises(ToolchainError, match="PGO_C=1 but the C of build scripts cannot get the profile"):
        cflags.plan_c(RUSTC, {"PATH": "/usr/bin", "CC": str(gcc)}, HOST, setting=True, clang=None, zigbuild=False)
    off = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=True)
    assert not off.enabled and "zig's own clang" in (off.languages[0].off or "")
    cross = cflags.plan_c(
        RUSTC, {"PATH": "/usr/bin"}, "aarch64-unknown-linux-gnu", setting=None, clang=None, zigbuild=False
    )
    assert not cross.enabled and "is not the host" in (cross.languages[0].off or "")
    # each language's line names its own language (the C++ one said "its C" too: miniserve's aarch64 summary)
    assert [language.off for language in cross.languages] == [
        f"aarch64-unknown-linux-gnu is not the host: set PGO_C=1 to compile its {name} with clang 22 --target"
        for name in ("C", "C++")
    ]


def test_the_wrapper_gives_the_target_clang_and_the_host_its_own_compiler(tmp_path: Path) -> None:
    """The real script run with a recording compiler on each side: the host's never sees the profile flag."""
    record = tmp_path / "calls"
    for name in ("target-cc", "host-cc"):
        _script(tmp_path, name, "").write_text(f'#!/bin/sh\necho "{name} $*" >> {record}\n')
    lang = cflags.Language(
        "C", "CC", "CFLAGS", (str(tmp_path / "target-cc"),), (str(tmp_path / "host-cc"),), "22", None
    )
    plan = cflags.CPlan(HOST, (lang,), "auto", env={})
    env = cflags.c_env(
        plan, {"CFLAGS_x86_64_unknown_linux_gnu": "-DUSER"}, ["-fprofile-use=/s/p"], tmp_path, optimise=True
    )
    assert env["CFLAGS_x86_64_unknown_linux_gnu"] == "-DUSER -fprofile-use=/s/p"
    wrapper = env["CC_x86_64_unknown_linux_gnu"]
    for out_dir in (f"/t/{HOST}/release/build/x-0123456789abcdef/out", "/t/release/build/x-0123456789abcdef/out"):
        subprocess.run([wrapper, "-DUSER", "-fprofile-use=/s/p", "-c", "a.c"], env={"OUT_DIR": out_dir}, check=True)
    assert record.read_text().splitlines() == [
        "target-cc -DUSER -fprofile-use=/s/p -c a.c -mllvm -pgo-warn-missing-function",
        "host-cc -DUSER -c a.c",
    ]


def test_the_c_warnings_of_a_real_optimised_build() -> None:
    log = (DATA / "cargo-optimise-c-stale.log").read_text()
    found = cflags.c_warnings(log)
    assert found.stale == {"csys": ["csrc/hot.c: csys_checksum"]}
    assert found.missing == {"csys": ["csrc/hot.c: csys_new"]}
    assert "-fprofile-use=/tmp/cx/store.profdata" in cflags.compile_commands(log)["csys"][0]
    rust = profile_warnings(log)  # the build script's warnings are not Rust's
    assert rust.stale == 0 and rust.missing == 0


def _crate(**extra: object) -> CCrateRecord:
    crate: CCrateRecord = {"crate": "zstd-sys", "objects": 3, "compilers": ["GCC: 12"], "profile_flags": False}
    crate.update(extra)  # type: ignore[typeddict-item]
    return crate


@pytest.mark.refuses("c-function-build-script-stale-hash-mismatch", "more-crates-whose-c-profile-flags-did")
def test_stale_c_and_the_unprofiled_ceiling_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match=r"the C of crate zstd-sys has 1 stale-profile warnings .* first: a.c: f"):
        cflags.check_c([_crate(stale=["a.c: f"])], None, tmp_path)
    cflags.check_c([_crate()], None, tmp_path)  # no ceiling: a warning only
    cflags.check_c([_crate()], 1, tmp_path)
    with pytest.raises(
        CheckFailed, match=r"did not reach the C of 1 crates \(zstd-sys\), more than PGO_MAX_UNPROFILED_C=0"
    ):
        cflags.check_c([_crate()], 0, tmp_path)
    plan = cflags.CPlan(HOST, (), "auto", env={})
    warning = cflags.unprofiled_warning([_crate()], plan) or ""
    assert warning.startswith("warning: the profile flags did not reach the C of zstd-sys (GCC: 12)"), warning
    assert cflags.unprofiled_warning([_crate(profile_flags=True)], plan) is None


@pytest.mark.refuses("flag-c-profile-work-dir-store-path")
def test_a_c_profile_flag_with_white_space_refused(tmp_path: Path) -> None:
    lang = cflags.Language("C", "CC", "CFLAGS", ("clang-22",), ("cc",), "22", None)
    with pytest.raises(ConfigError) as caught:
        cflags.c_env(cflags.CPlan(HOST, (lang,), "auto", env={}), {}, ["-fprofile-use=/a b/p"], tmp_path, optimise=True)
    assert caught.value.message.startswith("'-fprofile-use=/a b/p' contains white space, which CFLAGS cannot carry")


def test_a_releases_prefix_map_flags_reach_every_builds_target_c(tmp_path: Path) -> None:
    """``-ffile-prefix-map`` of the release's remap pairs, in their order, before the profile flag when the C is
    profiled (the wrapper drops them for the host's C) and in ``CFLAGS_<triple>`` alone when it is not."""
    pairs = [("/home/u/.cargo", "/cargo"), ("/home/u/src", "/build/src")]
    base = cflags.prefix_map_flags(pairs)
    assert base == ("-ffile-prefix-map=/home/u/.cargo=/cargo", "-ffile-prefix-map=/home/u/src=/build/src")
    lang = cflags.Language("C", "CC", "CFLAGS", ("clang-22",), ("cc",), "22", None)
    profiled = cflags.CPlan(HOST, (lang,), "auto", base_flags=base, env={})
    env = cflags.c_env(profiled, {}, ["-fprofile-use=/s/p"], tmp_path, optimise=False)
    assert env["CFLAGS_x86_64_unknown_linux_gnu"] == " ".join([*base, "-fprofile-use=/s/p"])
    plain = cflags.c_env(profiled, {}, [], tmp_path, optimise=False)  # the release's plain build: no profile flag
    assert plain["CFLAGS_x86_64_unknown_linux_gnu"] == " ".join(base)
    assert plain["CC_x86_64_unknown_linux_gnu"] == str(tmp_path / f"cc-{HOST}")
    off_c = cflags.Language("C", "CC", "CFLAGS", None, ("cc",), None, "PGO_C=0")
    off = cflags.CPlan(HOST, (off_c,), "off", base, env={})
    env = cflags.c_env(
        off, {"CXXFLAGS_x86_64_unknown_linux_gnu": "-DUSER"}, ["-fprofile-use=/s/p"], tmp_path, optimise=True
    )
    assert env == {
        "CFLAGS_x86_64_unknown_linux_gnu": " ".join(base),
        "CXXFLAGS_x86_64_unknown_linux_gnu": " ".join(["-DUSER", *base]),
    }
    bare = cflags.CPlan(HOST, off.languages, "off", env={})
    assert cflags.c_env(bare, {}, ["-x"], tmp_path, optimise=True) == {}


def test_the_clang_version_line_of_a_profiled_plan() -> None:
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False)
    line = plan.clang_line()
    assert line is not None and "clang version 22." in line and "\n" not in line
    assert cflags.clang_major_of(line) == 22 and cflags.clang_major_of("gcc (Debian 12.2.0-14) 12.2.0") is None
    off = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=False, clang=None, zigbuild=False)
    assert off.clang_line() is None


def test_an_assembled_object_is_counted_but_not_judged(tmp_path: Path) -> None:
    """ring's build script assembles .S files beside its C, and some of its C files define no function: an
    object whose .comment names no compiler, or that has no function, has no profile to take, and must not make
    the crate's instrumented C read as unprofiled (or its assembly functions as without profile data)."""
    out = tmp_path / "target" / HOST / "release" / "build" / "ring-0123456789abcdef" / "out"
    out.mkdir(parents=True)
    (tmp_path / "a.s").write_text(".text\n.globl asm_f\n.type asm_f,@function\nasm_f: ret\n")
    (tmp_path / "b.c").write_text("int c_g(int x) { return x + 1; }\n")
    subprocess.run(["clang-22", "-c", str(tmp_path / "a.s"), "-o", str(out / "a.o")], check=True)
    subprocess.run(["clang-22", "-fprofile-generate", "-c", str(tmp_path / "b.c"), "-o", str(out / "b.o")], check=True)
    (tmp_path / "t.c").write_text("const int c_table[4] = {1, 2, 3, 4};\n")  # no function: no counters
    subprocess.run(["clang-22", "-fprofile-generate", "-c", str(tmp_path / "t.c"), "-o", str(out / "t.o")], check=True)
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False)
    (crate,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-fprofile-generate")
    assert crate["crate"] == "ring" and crate["objects"] == 3 and crate["profile_flags"], crate
    assert cflags.ASSEMBLED in crate["compilers"]
    (optimised,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-x", records=["c_g"])
    assert optimised["functions_with_profile"] == ["c_g"] and optimised["functions_without_profile"] == []
    (out / "b.o").unlink()  # assembled objects and a table alone: nothing took the profile
    (alone,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-fprofile-generate")
    assert not alone["profile_flags"]


def test_another_builds_out_dir_in_a_shared_target_dir_is_not_read(tmp_path: Path) -> None:
    """The optimised build's target dir (``target/``) is shared: after a ``PGO_C=0`` run (gcc's pcre2-sys) it holds
    that build's ``OUT_DIR`` beside this one's, and ripgrep's pcre2-sys read as 'the profile flags did not reach
    it'. Of a package whose ``OUT_DIR`` the build's log names (the binary's ``-L native=``), only that one is read."""
    build = tmp_path / "target" / HOST / "release" / "build"
    ours, other, unnamed = (
        build / d / "out" for d in ("csys-0123456789abcdef", "csys-fedcba9876543210", "zsys-1111111111111111")
    )
    for out in (ours, other, unnamed):
        out.mkdir(parents=True)
    (tmp_path / "f.c").write_text("int c_f(int x) { return x * 3; }\n")
    subprocess.run(["clang-22", "-fprofile-generate", "-c", str(tmp_path / "f.c"), "-o", str(ours / "f.o")], check=True)
    subprocess.run(["gcc", "-O2", "-c", str(tmp_path / "f.c"), "-o", str(other / "f.o")], check=True)
    subprocess.run(
        ["clang-22", "-fprofile-generate", "-c", str(tmp_path / "f.c"), "-o", str(unnamed / "f.o")], check=True
    )
    log = f"     Running `rustc --crate-name app src/main.rs -L native={ours} -L dependency=/x`\n"
    assert cflags.out_dirs_named(log, build) == {"csys-0123456789abcdef"}
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False)
    csys, zsys = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text=log, flag="-fprofile-generate")
    assert csys["crate"] == "csys" and csys["objects"] == 1 and csys["profile_flags"], csys
    assert csys["compilers"] == [cflags.read_object(ours / "f.o").compiler]  # type: ignore[union-attr]
    assert zsys["objects"] == 1 and zsys["profile_flags"]  # a package the log does not name: all of its OUT_DIRs
    # without the log's word, both of csys's OUT_DIRs are read, and gcc's object makes it unprofiled
    both, _ = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-fprofile-generate")
    assert both["objects"] == 2 and not both["profile_flags"]


@pytest.mark.refuses("c-cxx-headers-missing-for-target")
@pytest.mark.skipif(
    Path("/usr/aarch64-linux-gnu/include/c++").is_dir(), reason="the arm64 C++ headers are installed here"
)
def test_cxx_without_the_targets_headers_refused_under_pgo_c_with_the_package() -> None:
    """aarch64 with PGO_C=1: clang++-22 --target finds no C++ headers (libstdc++-12-dev-arm64-cross is not
    installed): the real compiler's probe (an ``#include <new>``) refuses it before anything is built, naming the
    package; without PGO_C=1 a cross target's C is left alone anyway, and the C alone (no header) compiles."""
    env = {"PATH": "/usr/bin"}
    with pytest.raises(ToolchainError) as caught:
        cflags.plan_c(RUSTC, env, "aarch64-unknown-linux-gnu", setting=True, clang=None, zigbuild=False)
    # 'new' file not found, or (gcc-aarch64-linux-gnu installed) 'bits/c++config.h' file not found
    message = caught.value.message
    assert message.startswith(
        "PGO_C=1 but /usr/bin/clang++-22 cannot compile C++ for aarch64-unknown-linux-gnu: fatal error: '"
    ), message
    assert message.endswith("' file not found (no C++ standard library headers)"), message
    assert caught.value.hint.startswith("`apt-get install libstdc++-12-dev-arm64-cross`, or give CXX=")
    assert caught.value.hint.endswith(", or PGO_CXX=0 to leave the C++ unprofiled (the C keeps the profile)")
    assert (
        cflags.probe(
            "C", ["clang-22"], "aarch64-unknown-linux-gnu", cross=True, env=env, rustc=RUSTC, what="clang", strict=True
        )
        is None
    )
    off = cflags.probe(
        "C++", ["clang++-22"], "aarch64-unknown-linux-gnu", cross=True, env=env, rustc=RUSTC, what="clang", strict=False
    )
    assert off is not None and off.endswith(
        "(no C++ standard library headers): `apt-get install libstdc++-12-dev-arm64-cross`"
    ), off


@pytest.mark.refuses("profile-flag-already-user-c-c-flags", "response-file-c-flags-cannot-read")
def test_response_files_read_for_profile_flags(tmp_path: Path) -> None:
    (tmp_path / "a.rsp").write_text('-O2 "-DNAME=a b" @sub/b.rsp\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.rsp").write_text("-Wall\n")  # nested: relative to the file that names it
    cflags.refuse_profile_flags({"CFLAGS": "@a.rsp"}, HOST, cross=False, cwd=tmp_path)
    (tmp_path / "sub" / "b.rsp").write_text("-Wall -fprofile-generate\n")
    with pytest.raises(EnvironmentRefused) as caught:
        cflags.refuse_profile_flags({"CFLAGS": "@a.rsp"}, HOST, cross=False, cwd=tmp_path)
    assert caught.value.message == f"CFLAGS already holds profile flags (-fprofile-generate in {tmp_path}/sub/b.rsp)"
    (tmp_path / "loop.rsp").write_text("@loop.rsp\n")
    with pytest.raises(EnvironmentRefused, match="response files nested deeper than 16"):
        cflags.refuse_profile_flags({"CXXFLAGS": "@loop.rsp"}, HOST, cross=False, cwd=tmp_path)
    with pytest.raises(EnvironmentRefused, match=r"CC names the response file .*/none.rsp, which cannot be read"):
        cflags.refuse_profile_flags({"CC": "clang-22 @none.rsp"}, HOST, cross=False, cwd=tmp_path)
    os.mkfifo(tmp_path / "fifo.rsp")  # read before, and waited forever for a writer: the session hung
    with pytest.raises(EnvironmentRefused, match=r"fifo.rsp, which cannot be read \(not a file: a fifo, socket"):
        cflags.refuse_profile_flags({"CFLAGS": "@fifo.rsp"}, HOST, cross=False, cwd=tmp_path)
    cflags.refuse_profile_flags({"CRATE_CC_NO_DEFAULTS": "1", "CC": "ccache clang-22"}, HOST, cross=False)


@pytest.mark.refuses("c-object-of-clang-wrapper-not-clang")
def test_each_objects_language_and_compiler_from_cc_rs_commands(tmp_path: Path) -> None:
    log = (DATA / "cargo-optimise-c-stale.log").read_text()
    commands = cflags.compile_commands(log)["csys"]
    cxx = [*commands[0][:-3], "/t/out/b-mix.o", "-c", "csrc/mix.cpp"]  # cc-rs's command of a C++ file
    found = cflags.object_languages([*commands, cxx], HOST)
    assert found["/t/out/b-mix.o"] == ("C++", False), found
    assert sorted(lang for lang, _ in found.values()) == ["C", "C++"], found
    assert not any(wrapped for _, wrapped in found.values())  # /tmp/cx/wrap-cc: not the pipeline's script
    renamed = [[f"/w/bin/cc-{HOST}", *cmd[1:]] for cmd in commands]
    assert all(wrapped for _, wrapped in cflags.object_languages(renamed, HOST).values())
    with pytest.raises(CheckFailed) as caught:
        cflags.check_c([_crate(not_clang=["/t/out/a-hot.o: GCC: (Debian 12.2.0-14) 12.2.0"])], None, tmp_path)
    assert caught.value.message == (
        "the C object /t/out/a-hot.o of crate zstd-sys was compiled by 'GCC: (Debian 12.2.0-14) 12.2.0': the "
        "compiler given as clang of rustc's LLVM is not clang"
    )


@pytest.mark.refuses("profile-flag-already-user-c-c-flags")
def test_a_profile_flag_in_a_cargo_configs_env_table_refused(tmp_path: Path) -> None:
    """cargo gives its config's ``[env]`` to every build script: cc-rs reads ``CC`` there as from the environment."""
    config = tmp_path / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text('[env]\nCFLAGS = "-O2"\nCC = { value = "clang-22 -fprofile-generate=/tmp/x", force = true }\n')
    (file,) = cargo_config_files(tmp_path, {"HOME": str(tmp_path / "home")})
    with pytest.raises(EnvironmentRefused) as caught:
        cflags.refuse_config_env_profile_flags([file], HOST, cross=False, cwd=tmp_path)
    assert caught.value.message == f"CC in [env] of {config} already holds profile flags (-fprofile-generate=/tmp/x)"
    config.write_text('[env]\nCFLAGS = "-O2"\nCC = "clang-22"\n')
    (file,) = cargo_config_files(tmp_path, {"HOME": str(tmp_path / "home")})
    cflags.refuse_config_env_profile_flags([file], HOST, cross=False, cwd=tmp_path)


def _lang(name: str, crates: tuple[str, ...] | None = None, chosen_by: str = "PGO_C=1") -> cflags.Language:
    var, flags_var, compiler, host = (
        ("CC", "CFLAGS", "/usr/bin/clang-22", "cc")
        if name == "C"
        else ("CXX", "CXXFLAGS", "/usr/bin/clang++-22", "c++")
    )
    return cflags.Language(name, var, flags_var, (compiler,), (host,), "22.1.8", None, crates, chosen_by)


@pytest.mark.refuses("build-script-c-profile-clang-cannot-build")
def test_a_build_scripts_cxx_that_clang_cannot_build_refused_in_one_line(tmp_path: Path) -> None:
    """cargo's log of fixture cxxsys's instrumented build (cc-rs 1.11.3, clang++-22 without libc++'s headers): its
    build script added -stdlib=libc++, which clang++ accepts, and `#include <new>` was not found."""
    log = DATA / "cargo-instrument-cxx-libcxx.log"
    plan = cflags.CPlan(HOST, (_lang("C"), _lang("C++")), "auto", env={})
    with pytest.raises(CommandFailed) as caught:
        cflags.refuse_clang_cannot_build(plan, log)
    assert caught.value.message == (
        "the C++ of crate cxxsys's build script does not build with /usr/bin/clang++-22 (clang of rustc's LLVM, the "
        "profile's compiler): csrc/table.cpp: 'new' file not found, with -stdlib=libc++, which its build script gives "
        "when the compiler accepts it (clang++ does, g++ does not) and this clang has no libc++ headers"
    )
    assert caught.value.hint.startswith("PGO_CXX=0 leaves the C++ to the system's c++, unprofiled, and the C profiled")
    assert "PGO_C=<the packages but cxxsys>" in caught.value.hint and "libc++-22-dev" in caught.value.hint
    assert "\n" not in caught.value.line()
    # the wrapper gave cxxsys's C++ to the build's own compiler (a list without it): not the profile's clang's doing
    listed = cflags.CPlan(HOST, (_lang("C", ("plainc",)), _lang("C++", ("plainc",))), "on", env={})
    cflags.refuse_clang_cannot_build(listed, log)
    # another failure (no cc-rs command of the wrapper in the log), or no log: cargo's own line stands
    other = tmp_path / "other.log"
    other.write_text('error: could not compile `x` (bin "x") due to 1 previous error\n')
    cflags.refuse_clang_cannot_build(plan, other)
    cflags.refuse_clang_cannot_build(plan, tmp_path / "missing.log")


def test_the_published_unrar_ng_sys_refused_alike() -> None:
    """An excerpt of ouch 0.8.3's instrumented build (unrar-ng-sys 0.7.6, whose build script gives
    ``flag_if_supported("-stdlib=libc++")``; its cc-rs says ``LC_ALL="C"`` before the compiler)."""
    plan = cflags.CPlan(HOST, (_lang("C"), _lang("C++")), "auto", env={})
    with pytest.raises(CommandFailed) as caught:
        cflags.refuse_clang_cannot_build(plan, DATA / "cargo-instrument-unrar-ng-sys-excerpt.log")
    assert caught.value.message.startswith(
        "the C++ of crate unrar-ng-sys's build script does not build with /usr/bin/clang++-22 (clang of rustc's LLVM, "
        "the profile's compiler): vendor/unrar/os.hpp: 'new' file not found, with -stdlib=libc++,"
    ), caught.value.message


def test_a_list_of_packages_gives_clang_to_those_alone(tmp_path: Path) -> None:
    """PGO_C=plainc: the wrapper runs clang for plainc's target C only (CARGO_PKG_NAME); another package's target C
    goes to the build's own compiler with the release's prefix map but without the profile flags; the host's C
    without either."""
    out = tmp_path / "bin"
    out.mkdir()
    seen = tmp_path / "seen"
    for name in ("fakeclang", "fakecc"):
        (out / name).write_text(f'#!/bin/sh\necho {name} "$@" >> {seen}\n')
        (out / name).chmod(0o755)
    compilers = (str(out / "fakeclang"),), (str(out / "fakecc"),)
    lang = cflags.Language("C", "CC", "CFLAGS", *compilers, "22", None, ("plainc",), "PGO_C=plainc")
    plan = cflags.CPlan(HOST, (lang,), "on", base_flags=("-ffile-prefix-map=/a=/b",), env={})
    env = cflags.c_env(plan, {"PATH": os.defpath}, ["-fprofile-use=/s/p"], tmp_path / "w", optimise=True)
    wrapper = env["CC_x86_64_unknown_linux_gnu"]
    flags = env["CFLAGS_x86_64_unknown_linux_gnu"].split()
    assert flags == ["-ffile-prefix-map=/a=/b", "-fprofile-use=/s/p"]
    target_out = f"/t/{HOST}/release/build/x-0123456789abcdef/out"
    for pkg, out_dir in (("plainc", target_out), ("cxxsys", target_out), ("plainc", "/t/release/build/y/out")):
        subprocess.run(
            [wrapper, *flags, "-c", "f.c"],
            env={"PATH": os.defpath, "OUT_DIR": out_dir, "CARGO_PKG_NAME": pkg},
            check=True,
        )
    assert seen.read_text().splitlines() == [
        "fakeclang -ffile-prefix-map=/a=/b -fprofile-use=/s/p -c f.c -mllvm -pgo-warn-missing-function",
        "fakecc -ffile-prefix-map=/a=/b -c f.c",
        "fakecc -c f.c",
    ]


def test_pgo_cxx_off_leaves_the_cxx_to_the_system_and_says_so() -> None:
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, cxx=False, clang=None, zigbuild=False)
    c, cxx = plan.languages
    assert c.compiler is not None and cxx.compiler is None and cxx.off == "PGO_CXX=0"
    assert cflags.choice_line(plan) == (
        "warning: the C++ of build scripts is compiled by the system's c++, unprofiled (PGO_CXX=0); the profiled: C by "
        f"{c.compiler[0]}"
    )
    assert plan.record([])["languages"]["C++"] == {
        "compiler": None,
        "version": None,
        "profiled": False,
        "off": "PGO_CXX=0",
    }
    listed = cflags.plan_c(
        RUSTC, {"PATH": "/usr/bin"}, HOST, setting=("plainc", "zstd-sys"), clang=None, zigbuild=False
    )
    assert [lang.crates for lang in listed.languages] == [("plainc", "zstd-sys")] * 2
    assert listed.profiles("plainc") and not listed.profiles("cxxsys") and listed.setting == "on"
    assert listed.left_out("cxxsys") == ["C: not in PGO_C=plainc,zstd-sys", "C++: not in PGO_C=plainc,zstd-sys"]
    assert listed.record([])["languages"]["C"]["crates"] == ["plainc", "zstd-sys"]
    assert cflags.choice_line(listed) == (
        "warning: the C and C++ of plainc, zstd-sys only are profiled (PGO_C=plainc,zstd-sys), the other packages' "
        f"compiled by cc and c++, unprofiled; the profiled: C by {listed.languages[0].compiler[0]}, C++ by "  # type: ignore[index]
        f"{listed.languages[1].compiler[0]}"  # type: ignore[index]
    )
    assert (
        cflags.choice_line(cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False))
        is None
    )


@pytest.mark.refuses("pgo-c-list-another-target")
def test_a_list_of_packages_for_another_target_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        cflags.plan_c(
            RUSTC,
            {"PATH": "/usr/bin"},
            "aarch64-unknown-linux-gnu",
            setting=None,
            cxx=("zstd-sys",),
            clang=None,
            zigbuild=False,
        )
    assert caught.value.message.startswith(
        "PGO_CXX=zstd-sys names packages for aarch64-unknown-linux-gnu, which is not the host x86_64-unknown-linux-gnu"
    )
    assert "PGO_CXX=1" in caught.value.hint


def test_a_crate_a_list_leaves_out_is_not_counted_as_unprofiled() -> None:
    crates: list[CCrateRecord] = [
        {"crate": "cxxsys", "objects": 2, "compilers": ["GCC: x"], "profile_flags": False, "chosen": False},
        {"crate": "plainc", "objects": 1, "compilers": ["clang version 22.1.8"], "profile_flags": True},
    ]
    assert cflags.unprofiled(crates) == []
    cflags.check_c(crates, 0, Path("log"))


def test_a_crate_of_cxx_alone_under_pgo_cxx_off_is_unprofiled_by_choice(tmp_path: Path) -> None:
    """ouch's unrar-ng-sys compiles C++ only: under PGO_CXX=0 all of it is g++'s by choice, not C the profile
    flags failed to reach (cc-rs's command read from the build script's ``output``, as cargo keeps it)."""
    build = tmp_path / "target" / HOST / "release" / "build" / "unrar-ng-sys-0123456789abcdef"
    (build / "out").mkdir(parents=True)
    source = tmp_path / "dll.cpp"
    source.write_text("int unrar_f(int x) { return x * 5; }\n")
    obj = build / "out" / "0abc-dll.o"
    subprocess.run(["g++", "-O2", "-c", str(source), "-o", str(obj)], check=True)
    (build / "output").write_text(f'running: "c++" "-O2" "-o" "{obj}" "-c" "{source}"\ncargo:rustc-link-lib=x\n')
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, cxx=False, clang=None, zigbuild=False)
    for records in (None, ["unrar_f"]):
        (crate,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-fprofile-use", records=records)
        assert crate["crate"] == "unrar-ng-sys" and crate["chosen"] is False and not crate["profile_flags"], crate
        assert set(crate["languages"]) == {"C++"} and cflags.unprofiled([crate]) == [], crate
    assert crate["functions_with_profile"] == [] and crate["functions_without_profile"] == ["_Z7unrar_fi"], crate
    assert cflags.unprofiled_warning([crate], plan) is None


def test_an_object_rustc_made_in_an_out_dir_is_not_c(tmp_path: Path) -> None:
    """arrayvec 0.4's build script probes rustc with ``rustc --emit=obj -``, leaving ``rust_out.o`` in its OUT_DIR
    (a new user's tokei 12.1.2): it is Rust, so no C code of the crate, unprofiled or not; a C object beside it is."""
    build = tmp_path / "x86_64-unknown-linux-gnu" / "release" / "build"
    probe, mixed = build / "arrayvec-0123456789abcdef" / "out", build / "csys-fedcba9876543210" / "out"
    for out in (probe, mixed):
        out.mkdir(parents=True)
        subprocess.run(
            [
                "rustc",
                "--crate-name",
                "rust_out",
                "--crate-type",
                "bin",
                "--emit=obj",
                "-o",
                str(out / "rust_out.o"),
                "-",
            ],
            input="fn main() { let _ = 1u8; }",
            text=True,
            check=True,
        )
    (mixed / "c.c").write_text("int twice(int x) { return 2 * x; }\n")
    subprocess.run(["gcc", "-c", "-o", str(mixed / "c.o"), str(mixed / "c.c")], check=True)
    assert cflags.read_object(probe / "rust_out.o").compiler.startswith("rustc version ")  # type: ignore[union-attr]
    found = cflags.c_objects(tmp_path, "x86_64-unknown-linux-gnu")
    assert list(found) == ["csys"]
    assert [(o.path.name, o.functions) for o in found["csys"]] == [("c.o", ("twice",))]


def test_only_the_objects_a_build_script_links_are_counted(tmp_path: Path) -> None:
    """jemalloc-sys runs jemalloc's configure and make, which compile each file three times (``.o``, ``.pic.o``
    and ``.sym.o``, this to list its symbols) and link only ``libjemalloc_pic.a``: a new user's fd-find read 606
    C functions "without profile data", 580 of them from objects never linked. Where the script links static
    libraries of its OUT_DIR, only their members count; a script that links none from there keeps every object."""
    out = tmp_path / "target" / HOST / "release" / "build" / "jemalloc-sys-0123456789abcdef" / "out"
    (out / "build" / "lib").mkdir(parents=True)
    (tmp_path / "a.c").write_text("int je_arena_get(int x) { return x + 1; }\n")
    (tmp_path / "b.c").write_text("int je_base_alloc_of_a_name_longer_than_sixteen(int x) { return x * 2; }\n")
    objects = {
        "arena.pic.o": ("a.c", "-DX=1"),
        "arena.sym.o": ("a.c", "-Dje_arena_get=arena_get"),  # the symbols' listing: the unprefixed name
        "base_of_a_long_member_name.pic.o": ("b.c", "-DX=1"),
    }
    for name, (source, define) in objects.items():
        subprocess.run(["clang-22", define, "-c", str(tmp_path / source), "-o", str(out / name)], check=True)
    archive = out / "build" / "lib" / "libjemalloc_pic.a"
    members = [str(out / "arena.pic.o"), str(out / "base_of_a_long_member_name.pic.o")]
    subprocess.run(["ar", "crs", str(archive), *members], check=True)
    listed = subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True, check=True).stdout.split()
    assert (
        sorted(cflags.archive_members(archive)) == sorted(listed) == ["arena.pic.o", "base_of_a_long_member_name.pic.o"]
    )
    assert cflags.archive_members(out / "arena.pic.o") == []  # not an archive
    every = cflags.c_objects(tmp_path / "target", HOST)["jemalloc-sys"]
    assert len(every) == 3  # no output beside the OUT_DIR yet: every object
    (out.parent / "output").write_text(
        "cargo:rustc-link-lib=static=jemalloc_pic\n"
        f"cargo:rustc-link-search=native={out / 'build' / 'lib'}\n"
        "cargo:rustc-link-arg=-pthread\n"
    )
    assert cflags.linked_members(out) == {"arena.pic.o", "base_of_a_long_member_name.pic.o"}
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False)
    (crate,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-x", records=["je_arena_get"])
    assert crate["objects"] == 2, crate
    assert crate["functions_with_profile"] == ["je_arena_get"], crate
    assert crate["functions_without_profile"] == ["je_base_alloc_of_a_name_longer_than_sixteen"], crate
    (out.parent / "output").write_text("cargo:rustc-link-lib=dylib=jemalloc_pic\n")  # not a static library of its own
    assert cflags.linked_members(out) == set() and len(cflags.c_objects(tmp_path / "target", HOST)["jemalloc-sys"]) == 3


@pytest.mark.refuses("c-function-build-script-stale-hash-mismatch")
def test_clangs_warnings_printed_by_a_build_script_that_runs_it_are_read(tmp_path: Path) -> None:
    """A build script that runs the compiler itself (jemalloc-sys's configure and make) leaves clang's warnings on
    its stderr, which cargo -vv prints as ``[pkg ver] warning: …``, not as cc-rs's ``warning: pkg@ver: warning:
    …``: a new user's fd-find had 642 of them unread, and a stale C function would not have refused the build."""
    log = (
        "[jemalloc-sys 0.5.4+5.3.0-patched] warning: src/arena.c: no profile data available for function "
        "arena_nthreads_get Hash = 742261418966908927 up to 0 count discarded [-Wbackend-plugin]\n"
        "[jemalloc-sys 0.5.4+5.3.0-patched] warning: src/tcache.c: function control flow change detected (hash "
        "mismatch) je_tcache_alloc Hash = 1234 [-Wbackend-plugin]\n"
        "[jemalloc-sys 0.5.4+5.3.0-patched] cargo:warning=detect_compiler_family.c:2:9: warning: clang\n"
        "warning: csys@0.1.0: warning: csrc/hot.c: no profile data available for function csys_new\n"
    )
    found = cflags.c_warnings(log)
    assert found.stale == {"jemalloc-sys": ["src/tcache.c: je_tcache_alloc"]}
    assert found.missing == {"csys": ["csrc/hot.c: csys_new"], "jemalloc-sys": ["src/arena.c: arena_nthreads_get"]}
    crate = _crate(crate="jemalloc-sys", profile_flags=True, stale=found.stale["jemalloc-sys"])
    with pytest.raises(CheckFailed, match=r"the C of crate jemalloc-sys has 1 stale-profile warnings .* first: src/tc"):
        cflags.check_c([crate], None, tmp_path)


def test_clangs_warnings_kept_in_a_fresh_build_scripts_stderr_are_read(tmp_path: Path) -> None:
    """cargo prints a build script's stderr only when it runs: an optimised build that finds jemalloc-sys fresh (the
    same profile again, after a refusal) has none of clang's warnings in its log, so they are read from the
    ``stderr`` file cargo keeps beside the ``OUT_DIR``; rustc's of a build script's probe (autocfg) are not C."""
    out = tmp_path / "target" / HOST / "release" / "build" / "jemalloc-sys-0123456789abcdef" / "out"
    out.mkdir(parents=True)
    (tmp_path / "t.c").write_text("int je_tcache_alloc(int x) { return x + 1; }\n")
    subprocess.run(["clang-22", "-c", str(tmp_path / "t.c"), "-o", str(out / "tcache.pic.o")], check=True)
    (out.parent / "stderr").write_text(
        "checking for gcc... clang\n"
        "warning: src/tcache.c: function control flow change detected (hash mismatch) je_tcache_alloc Hash = 1\n"
        "warning: probe1.0a1b-cgu.0: function control flow change detected (hash mismatch) _ZN5probe1f Hash = 2\n"
    )
    log = "       Fresh jemalloc-sys v0.5.4+5.3.0-patched\n"
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False)
    (crate,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text=log, flag="-x", records=["je_tcache_alloc"])
    assert crate["stale"] == ["src/tcache.c: je_tcache_alloc"], crate


def test_static_c_functions_of_one_name_in_two_files_are_two_functions(tmp_path: Path) -> None:
    """bat 0.26.1's Oniguruma (onig_sys) defines ``static`` functions of one name in each encoding's file
    (``mbc_enc_len``, ``code_to_mbc``…), and the binary links only some of the files: clang warned of 170 functions
    without profile data, and the summary said 91, counting names, not functions (568 functions, 489 names), and a
    static function of a file never linked as with profile data when another file's of its name had it. A real
    training here: ``used.c`` is linked and run, ``unused.c`` compiled beside it and never linked; each defines a
    ``static`` ``helper``. The profile names a static function ``<source>;<name>``, the source as cc-rs's command
    gave it to clang; an object no command names (jemalloc's make) is matched by its file's stem."""
    out = tmp_path / "target" / HOST / "release" / "build" / "encsys-0123456789abcdef" / "out"
    out.mkdir(parents=True)
    (tmp_path / "src").mkdir()
    for name, entry in (("used", "enc_used"), ("unused", "enc_unused")):
        (tmp_path / "src" / f"{name}.c").write_text(
            f"static __attribute__((noinline)) int helper(int x) {{ return x * 3 + {len(name)}; }}\n"
            f"int {entry}(int x) {{ return helper(x) + 1; }}\n"
        )
    (tmp_path / "main.c").write_text(
        "int enc_used(int);\nint main(int argc, char **argv) { return enc_used(argc) == 0; }\n"
    )
    flags = ["clang-22", "-O2", "-fprofile-generate", "-c"]
    commands = []
    for name in ("used", "unused"):
        obj = out / f"0123456789abcdef-{name}.o"
        argv = [*flags, "-o", str(obj), f"src/{name}.c"]
        subprocess.run(argv, cwd=tmp_path, check=True)
        commands.append(f"[encsys 0.1.0] running: {' '.join(argv)}")
    subprocess.run([*flags, "-o", str(tmp_path / "main.o"), "main.c"], cwd=tmp_path, check=True)
    program = tmp_path / "program"
    subprocess.run(
        [
            "clang-22",
            "-fprofile-generate",
            "-o",
            str(program),
            str(tmp_path / "main.o"),
            str(out / "0123456789abcdef-used.o"),
        ],
        check=True,
    )
    raw = tmp_path / "p.profraw"
    subprocess.run([str(program)], env={"LLVM_PROFILE_FILE": str(raw)}, check=True)
    subprocess.run(["llvm-profdata-22", "merge", "-o", str(tmp_path / "p.profdata"), str(raw)], check=True)
    shown = subprocess.run(
        ["llvm-profdata-22", "show", "--all-functions", str(tmp_path / "p.profdata")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    records = [line.strip()[:-1] for line in shown.splitlines() if line.startswith("  ") and line.endswith(":")]
    assert "src/used.c;helper" in records and not any("unused" in r for r in records), records
    plan = cflags.plan_c(RUSTC, {"PATH": "/usr/bin"}, HOST, setting=None, clang=None, zigbuild=False)
    (crate,) = cflags.c_crates(
        plan, RUSTC, tmp_path / "target", log_text="\n".join(commands), flag="-fprofile-generate", records=records
    )
    assert crate["functions_with_profile"] == ["enc_used", "src/used.c;helper"], crate
    assert crate["functions_without_profile"] == ["enc_unused", "src/unused.c;helper"], crate
    # without cc-rs's commands (a build script that runs clang itself): the object's stem finds its source
    (made,) = cflags.c_crates(plan, RUSTC, tmp_path / "target", log_text="", flag="-x", records=records)
    assert made["functions_with_profile"] == ["enc_used", "src/used.c;helper"], made
    assert made["functions_without_profile"] == ["0123456789abcdef-unused.o;helper", "enc_unused"], made
