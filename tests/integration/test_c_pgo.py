"""The C and C++ of build scripts in the profile, on the fixture ``csys`` (a hot loop in C and one in C++ built by
cc-rs, and ``hostc``, a build-dependency whose C runs in the build script on the host), with real cargo, cc-rs,
clang-22 and llvm-profdata-22.

One ``nox -s pgo`` is shared by the module (``trained``); a test that builds again takes its own copy of the
crate and builds it from that run's profile (``PGO_PROFDATA``), without training."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes import report
from recipes.results import as_json
from recipes.toolchain.cflags import read_object
from recipes.toolchain.rustc import rustc_info
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env, written_records

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Trained:
    pipeline: Pipeline
    output: str
    report: Any

    @property
    def profile(self) -> Path:
        return Path(self.report["merge"]["profile"])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    pipeline = Pipeline(tmp_path_factory.mktemp("csys"), "csys")
    output = assert_ok(pipeline.nox("pgo"))
    return Trained(pipeline, output, written_records(pipeline.work))


def _crate(record: Any, name: str = "csys") -> Any:
    return next(c for c in record["c_code"]["crates"] if c["crate"] == name)


def _host_triple() -> str:
    return rustc_info(clean_env()).host


def test_the_merged_profile_lists_the_c_functions_with_counts(trained: Trained) -> None:
    shown = subprocess.run(
        ["llvm-profdata-22", "show", "--all-functions", "--counts", str(trained.profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"^  csys_checksum:\n(?:    .*\n)*?    Block counts: \[(?P<counts>[\d, ]+)\]", shown, re.M)
    assert found, shown
    counts = [int(n) for n in found.group("counts").split(", ")]
    assert sum(counts) >= 3 * 200_000, counts  # three runs of 200,000 rounds: the loop's blocks were counted
    assert "  csys_cpp_sum:" in shown  # the C++ too


def test_the_optimised_build_reports_the_c_functions_used(trained: Trained) -> None:
    inst = _crate(trained.report["instrument"])
    assert inst["profile_flags"] is True and inst["objects"] == 2, inst
    crate = _crate(trained.report["optimise"])
    assert crate["profile_flags"] is True, crate
    assert {"csys_checksum", "csys_cpp_sum"} <= set(crate["functions_with_profile"]), crate
    assert crate["stale"] == [] and crate["missing"] == [], crate
    assert all("clang version 22." in c for c in crate["compilers"]), crate
    languages = trained.report["optimise"]["c_code"]["languages"]
    assert languages["C"]["profiled"] and languages["C"]["version"].startswith("22."), languages
    assert trained.report["optimise"]["c_code"]["setting"] == "auto"  # on by default: clang-22 is there
    assert "c code      csys: 3 C/C++ functions with profile data, 0 without (C by Debian clang version 22." in (
        trained.output
    )
    assert set(crate["languages"]) == {"C", "C++"} and crate["not_clang"] == [], crate
    log = (trained.pipeline.work / "logs" / "optimise-build.log").read_text()
    assert f'"-fprofile-use={trained.report["optimise"]["store_path"]}"' in log  # cc-rs's command, the store path


def test_the_build_scripts_own_c_on_the_host_is_not_instrumented(trained: Trained) -> None:
    """cc-rs reads CC_<triple> for the host's build scripts too when the target is the host: hostc's C (a
    build-dependency) must still be compiled by the host's compiler, without the profile flags."""
    target = trained.pipeline.crate_dir / "target"
    for build in (trained.pipeline.work / "generate-target", target):
        objects = sorted((build / "release" / "build").glob("hostc-*/out/*.o"))
        assert objects, build
        for path in objects:
            seen = read_object(path)
            assert seen is not None and not seen.instrumented, path
            assert seen.compiler.startswith("GCC:"), seen  # cc, as without the pipeline
    assert [c["crate"] for c in trained.report["optimise"]["c_code"]["crates"]] == ["csys"]
    assert _host_triple() == trained.report["optimise"]["target"]


def _again(trained: Trained, tmp_path: Path, session: str = "optimise", **extra: str) -> tuple[Pipeline, Any]:
    pipeline = Pipeline(tmp_path, "csys")
    done = pipeline.nox(session, PGO_PROFDATA=str(trained.profile), **extra)
    return pipeline, done


@pytest.mark.refuses("c-function-build-script-stale-hash-mismatch")
def test_a_c_function_changed_after_training_refused_as_stale(trained: Trained, tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path, "csys")
    hot = pipeline.crate_dir / "csrc" / "hot.c"
    text = hot.read_text()
    changed = text.replace(
        "h = mix_step(h, i * 7u + 1u);", "h = mix_step(h, i * 7u + 1u);\n            if (h == 7u) h = 1u;"
    )
    assert changed != text
    hot.write_text(changed)
    line = assert_refused(pipeline.nox("optimise", PGO_PROFDATA=str(trained.profile)))
    assert "the C of crate csys has 1 stale-profile warnings (hash mismatch), first: csrc/hot.c: csys_checksum" in line
    assert "train again on this tree" in line


#: csys's build script as jemalloc-sys's configure and make: it runs cc-rs's compiler and flags itself (clang's
#: warnings go to its own stderr, which cargo -vv prints as ``[csys 0.1.0] warning: …``), archives the object it
#: links, and leaves another copy of the C unlinked (jemalloc's ``.sym.o``, compiled to list the symbols)
_SCRIPT_RUNS_CLANG = """
use std::{env, path::PathBuf, process::Command};

fn main() {
    assert_eq!(hostc::host_answer(), 42);
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let cc = cc::Build::new().get_compiler();
    for (object, extra) in [("hot.o", None), ("hot.sym.o", Some("-Dcsys_checksum=csys_listed_checksum"))] {
        let mut command = cc.to_command();
        command.args(["-c", "csrc/hot.c", "-o"]).arg(out.join(object)).args(extra);
        assert!(command.status().unwrap().success());
    }
    let archived = Command::new("ar").arg("crs").arg(out.join("libhot.a")).arg(out.join("hot.o")).status();
    assert!(archived.unwrap().success());
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=hot");
    cc::Build::new().cpp(true).file("csrc/mix.cpp").compile("mix");
    println!("cargo:rerun-if-changed=csrc/hot.c");
}
"""


@pytest.mark.refuses("c-function-build-script-stale-hash-mismatch")
def test_c_a_build_script_compiles_itself_is_counted_as_linked_and_refused_when_stale(
    trained: Trained, tmp_path: Path
) -> None:
    """A new user's fd-find: jemalloc-sys's make compiled each file three times and linked one copy, so 580 of
    the "606 C functions without profile data" were never in the binary; and clang's warnings, on the build
    script's stderr rather than cc-rs's ``cargo:warning``, went unread: a stale C function would not refuse."""
    pipeline = Pipeline(tmp_path, "csys")
    (pipeline.crate_dir / "build.rs").write_text(_SCRIPT_RUNS_CLANG)
    assert_ok(pipeline.nox("optimise", PGO_PROFDATA=str(trained.profile)))
    crate = _crate(written_records(pipeline.work)["optimise"])
    assert crate["objects"] == 2 and crate["profile_flags"] is True, crate  # hot.o and mix's, not hot.sym.o
    assert "csys_checksum" in crate["functions_with_profile"], crate
    assert "csys_listed_checksum" not in crate["functions_without_profile"], crate
    log = (pipeline.work / "logs" / "optimise-build.log").read_text()
    assert "[csys 0.1.0] warning: csrc/hot.c: no profile data available for function csys_listed_checksum" in log
    assert crate["missing"] == [], crate  # clang's word on the unlinked copy: not of the binary's C
    hot = pipeline.crate_dir / "csrc" / "hot.c"
    changed = "h = mix_step(h, i * 7u + 1u);\n            if (h == 7u) h = 1u;"  # the control flow changes
    hot.write_text(hot.read_text().replace("h = mix_step(h, i * 7u + 1u);", changed))
    line = assert_refused(pipeline.nox("optimise", PGO_PROFDATA=str(trained.profile)))
    assert "the C of crate csys has 1 stale-profile warnings (hash mismatch), first: csrc/hot.c: csys_checksum" in line


def test_user_cflags_are_carried_beside_the_profile_flag(trained: Trained, tmp_path: Path) -> None:
    pipeline, done = _again(trained, tmp_path, CFLAGS="-DCSYS_SALT=5u")
    assert_ok(done)
    log = (pipeline.work / "logs" / "optimise-build.log").read_text()
    command = next(line for line in log.splitlines() if "running:" in line and "csrc/hot.c" in line)
    assert '"-DCSYS_SALT=5u"' in command and '"-fprofile-use=' in command, command
    plain = subprocess.run(
        [pipeline.work / "optimised" / "csys", "checksum", "10"], check=True, capture_output=True, text=True
    )
    ours = subprocess.run(
        [trained.pipeline.work / "optimised" / "csys", "checksum", "10"], check=True, capture_output=True, text=True
    )
    assert plain.stdout != ours.stdout  # the salt reached the C


@pytest.mark.refuses("profile-flag-already-user-c-c-flags")
@pytest.mark.parametrize("name", ["CFLAGS", "CXXFLAGS", "CFLAGS_x86_64_unknown_linux_gnu", "HOST_CFLAGS"])
def test_a_profile_flag_in_the_users_c_flags_refused(hello: Pipeline, name: str) -> None:
    line = assert_refused(hello.nox("instrument", **{name: "-O2 -fprofile-generate=/tmp/elsewhere"}))
    assert f"{name} already holds profile flags (-fprofile-generate=/tmp/elsewhere)" in line


def _fake_clang(tmp_path: Path, version: str) -> Path:
    """A script that prints a clang version: no clang of another major than 22 is installed here."""
    path = tmp_path / "clang-other"
    path.write_text(f"#!/bin/sh\necho 'Debian clang version {version}'\necho 'Target: x86_64-pc-linux-gnu'\n")
    path.chmod(0o755)
    return path


@pytest.mark.refuses("clang-c-profile-another-llvm-major-not")
def test_a_clang_of_another_major_refused(hello: Pipeline, tmp_path: Path) -> None:
    line = assert_refused(hello.nox("instrument", PGO_CLANG=str(_fake_clang(tmp_path, "14.0.6"))))
    assert "clang-other is clang 14.0.6 but rustc" in line and "apt-get install clang-22" in line, line


@pytest.mark.refuses("pgo-clang-names-no-program")
def test_a_missing_clang_named_with_its_package(hello: Pipeline) -> None:
    line = assert_refused(hello.nox("instrument", PGO_CLANG="clang-99"))
    assert "PGO_CLANG=clang-99: no such program" in line and "apt-get install clang-22" in line, line


@pytest.mark.refuses("more-crates-whose-c-profile-flags-did")
def test_a_users_gcc_leaves_the_c_unprofiled_with_a_warning_and_the_ceiling_refuses_it(
    trained: Trained, tmp_path: Path
) -> None:
    gcc = shutil.which("gcc")
    assert gcc
    pipeline, done = _again(trained, tmp_path / "warned", CC=gcc)
    text = assert_ok(done)
    assert "warning: the profile flags did not reach the C of csys (" in text, text[-3000:]
    assert f"C: CC={gcc} (yours) is not clang, not clang 22" in text
    crate = _crate(as_json(report.require(pipeline.work, "optimise", "the test")))
    assert crate["profile_flags"] is False and any(c.startswith("GCC:") for c in crate["compilers"]), crate
    _, refused = _again(trained, tmp_path / "refused", CC=gcc, PGO_MAX_UNPROFILED_C="0")
    line = assert_refused(refused)
    assert "the profile flags did not reach the C of 1 crates (csys), more than PGO_MAX_UNPROFILED_C=0" in line


def test_pgo_c_off_leaves_the_c_as_the_plain_build_has_it(trained: Trained, tmp_path: Path) -> None:
    pipeline, done = _again(trained, tmp_path, PGO_C="0")
    text = assert_ok(done)
    record = report.require(pipeline.work, "optimise", "the test").c_code
    assert record is not None
    assert record["setting"] == "off" and record["languages"]["C"]["off"] == "PGO_C=0", record
    crate = _crate({"c_code": record})
    assert crate["profile_flags"] is False and all(c.startswith("GCC:") for c in crate["compilers"]), crate
    # gcc compiled the C without the profile: none of its functions is counted as with profile data, though the
    # profile has records of the same names; the line says which compiler built it and why it is unprofiled
    assert crate["functions_with_profile"] == [] and "csys_checksum" in crate["functions_without_profile"], crate
    (line,) = [x for x in text.splitlines() if "c code      csys:" in x]
    assert "csys: 0 C/C++ functions with profile data, " in line, line
    # cc-rs's commands are logged only when the pipeline wraps the compiler: the compilers of the objects, together
    assert "without (GCC: (Debian" in line, line
    assert line.endswith("; not profiled: PGO_C=0"), line


def _nothing_built(pipeline: Pipeline) -> None:
    """A refusal made before anything is built: no build log, no instrumented target dir."""
    assert not (pipeline.work / "logs" / "instrument-build.log").exists()
    assert not (pipeline.work / "generate-target").exists()


@pytest.mark.refuses("profile-flag-already-user-c-c-flags")
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CC", "clang-22 -fcs-profile-generate=/tmp/x"),
        ("CXX_x86_64_unknown_linux_gnu", "clang++-22 --coverage"),
        ("HOST_CC", "cc -fprofile-arcs"),
    ],
)
def test_a_profile_flag_in_the_users_compiler_refused_before_building(hello: Pipeline, name: str, value: str) -> None:
    """cc-rs runs ``CC`` as it is: a profile flag there instruments the shipped C as surely as one in CFLAGS."""
    line = assert_refused(hello.nox("instrument", **{name: value}))
    assert f"{name} already holds profile flags ({value.split()[1]})" in line, line
    _nothing_built(hello)


@pytest.mark.refuses("profile-flag-already-user-c-c-flags")
def test_a_profile_flag_in_a_cargo_configs_env_refused_before_building(hello: Pipeline) -> None:
    """cargo gives ``[env]`` to every build script, where cc-rs reads ``CC`` as from the environment."""
    config = hello.crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text('[env]\nCC = { value = "clang-22 -fprofile-generate=/tmp/x", force = true }\n')
    line = assert_refused(hello.nox("instrument"))
    assert f"CC in [env] of {config} already holds profile flags (-fprofile-generate=/tmp/x)" in line, line
    _nothing_built(hello)


@pytest.mark.refuses("profile-flag-already-user-c-c-flags", "response-file-c-flags-cannot-read")
def test_a_profile_flag_in_a_response_file_refused_and_an_unreadable_one_too(hello: Pipeline, tmp_path: Path) -> None:
    """``CFLAGS="-O2 @flags.rsp"``: clang reads the file (and the files it names, relative to it); so does the
    pipeline. A relative one is read from the crate's directory, where cargo runs the build script."""
    (hello.crate_dir / "flags.rsp").write_text("-O2 @nested/more.rsp\n")
    (hello.crate_dir / "nested").mkdir()
    (hello.crate_dir / "nested" / "more.rsp").write_text("-DX=1 '-fprofile-instr-generate=/tmp/p/%m.profraw'\n")
    line = assert_refused(hello.nox("instrument", CFLAGS="-O2 @flags.rsp"))
    more = hello.crate_dir / "nested" / "more.rsp"
    assert f"CFLAGS already holds profile flags (-fprofile-instr-generate=/tmp/p/%m.profraw in {more})" in line, line
    _nothing_built(hello)
    line = assert_refused(hello.nox("instrument", CXXFLAGS=f"@{tmp_path / 'missing.rsp'}"))
    assert f"CXXFLAGS names the response file {tmp_path / 'missing.rsp'}, which cannot be read" in line, line
    _nothing_built(hello)


def _lying_clang(tmp_path: Path) -> Path:
    """A script that prints clang 22's --version and compiles with gcc (g++ as its ``++``)."""
    for name, real in (("liar", "gcc"), ("liar++", "g++")):
        path = tmp_path / name
        path.write_text(
            "#!/bin/sh\n"
            'if [ "$1" = --version ]; then echo "Debian clang version 22.1.8 (1~deb12u1)"; exit 0; fi\n'
            f'exec {real} "$@"\n'
        )
        path.chmod(0o755)
    return tmp_path / "liar"


@pytest.mark.refuses("c-compiler-object-not-clang")
def test_a_pgo_clang_that_lies_about_its_version_refused_by_its_objects_comment(
    hello: Pipeline, tmp_path: Path
) -> None:
    liar = _lying_clang(tmp_path)
    line = assert_refused(hello.nox("instrument", PGO_CLANG=str(liar)))
    assert f"PGO_CLANG {liar} is not clang 22: the C object it compiled (pgo-probe.o) says 'GCC: (" in line, line
    _nothing_built(hello)
    line = assert_refused(hello.nox("instrument", CC=str(liar)))  # a user's CC that says clang 22: the same
    assert f"CC={liar} (yours) is not clang 22: the C object it compiled" in line, line


@pytest.mark.refuses("pgo-clang-no-clang-plus-plus-beside")
def test_a_pgo_clang_without_its_clang_plus_plus_named_up_front(hello: Pipeline, tmp_path: Path) -> None:
    clang = shutil.which("clang-22")
    assert clang
    (tmp_path / "myclang").symlink_to(clang)
    line = assert_refused(hello.nox("instrument", PGO_CLANG="myclang", PATH=f"{tmp_path}:{clean_env()['PATH']}"))
    assert f"PGO_CLANG=myclang: there is no myclang++ beside it ({tmp_path / 'myclang++'})" in line, line
    assert "CXX=<clang++ of LLVM 22>" in line and "command not found" not in line, line
    _nothing_built(hello)


@pytest.mark.refuses("c-object-of-clang-wrapper-not-clang")
def test_a_clang_that_lies_only_to_the_probe_refused_naming_the_object(trained: Trained, tmp_path: Path) -> None:
    """A PGO_CLANG that is clang for everything but csys's hot.c, which it gives to gcc: the probe passes, the
    object's .comment (read with cc-rs's command of it from the optimised build's log) refuses the build."""
    liar = tmp_path / "bin" / "halfclang"
    liar.parent.mkdir()
    liar.write_text(
        "#!/bin/sh\n"
        'case "$*" in *csrc/hot.c*) ;; *) exec clang-22 "$@" ;; esac\n'
        "for arg do\n"
        "  shift\n"
        '  case "$arg" in --target=*|-mllvm|-pgo-warn-missing-function|-fprofile-*|-Wprofile-instr-missing) ;;\n'
        '    *) set -- "$@" "$arg" ;;\n'
        "  esac\n"
        "done\n"
        'exec gcc "$@"\n'
    )
    liar.chmod(0o755)
    clangxx = shutil.which("clang++-22")
    assert clangxx
    (liar.parent / "halfclang++").symlink_to(clangxx)
    pipeline, done = _again(trained, tmp_path / "crate", PGO_CLANG=str(liar))
    line = assert_refused(done)
    assert re.search(r"the C object \S+/out/\w+-hot\.o of crate csys was compiled by 'GCC: \(", line), line
    assert "the compiler given as clang of rustc's LLVM is not clang" in line, line
    assert not (pipeline.work / "optimised" / "csys").exists()


def test_a_system_library_a_build_script_links_is_named_as_getting_no_profile(hello: Pipeline) -> None:
    """A build script that compiles no C but links the system's shared libssl (as openssl-sys and libz-sys do when
    they find the system's library): the optimised build says that C was built elsewhere and gets no profile; the
    C runtime's libm and a library of its own OUT_DIR are not named."""
    (hello.crate_dir / "build.rs").write_text(
        "use std::{env, fs, path::PathBuf};\n"
        "fn main() {\n"
        '    let out = PathBuf::from(env::var("OUT_DIR").unwrap());\n'
        '    fs::write(out.join("libown.so"), b"").unwrap();\n'
        '    println!("cargo:rustc-link-search=native={}", out.display());\n'
        '    println!("cargo:rustc-link-lib=dylib=ssl");\n'
        '    println!("cargo:rustc-link-lib=m");\n'
        '    println!("cargo::metadata=own=1");\n'
        "}\n"
    )
    output = assert_ok(hello.nox("pgo"))
    said = [line for line in output.splitlines() if "get no profile" in line]
    assert said == ["pgo: c code: the system's shared C libraries, built elsewhere, get no profile: hello-pgo links "
                    "libssl"], said  # fmt: skip
