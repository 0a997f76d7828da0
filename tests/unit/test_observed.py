"""The RUSTC shim's records (recipes/toolchain/cargo/observed.py), parsed from real captures in tests/data/observed/:
the
shim's records of a ``nox -s pgo`` of hello (cargo's two queries, the instrumented and the optimised compile of its
binary) and of that compile with its arguments in an ``@file``; the shim itself run on a stand-in compiler."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from recipes.errors import CheckFailed
from recipes.toolchain.cargo import observed
from recipes.toolchain.cargo.log import RustcCall
from recipes.toolchain.cargo.metadata import CrateInfo
from tests.conftest import DATA

CAPTURES = DATA / "observed"
#: where the captures were made: the hello fixture's copy, its store
ROOT = Path("/tmp/wt-observed-pt/observed0")
STORE = ROOT / "store" / "7a7fa90ad63c6b612a4cb4158c66d2840f192b36d382dbe8bfa715efb6560ba8.profdata"
HELLO = CrateInfo(
    manifest=ROOT / "hello" / "Cargo.toml",
    package="hello-pgo",
    package_dir=ROOT / "hello",
    bin="hello-pgo",
    crate_names=("hello_pgo",),
    target_directory=ROOT / "hello" / "target",
    sources=(ROOT / "hello" / "src" / "main.rs",),
    workspace_root=ROOT / "hello",
)


def _read(name: str) -> observed.Observed:
    path = CAPTURES / name
    return observed.parse_record(path.read_bytes(), path)


def test_cargos_queries_are_not_compiles() -> None:
    version, target = _read("version-query.rec"), _read("target-query.rec")
    assert version.compiler == "/root/.cargo/bin/rustc"
    assert version.args == ("-vV",)
    assert "--crate-name" in target.args
    assert version.call() is None
    assert target.call() is None  # --crate-name ___: cargo asking about the target


def test_the_optimised_compile_of_the_binary_carries_the_store_path() -> None:
    call = _read("optimise-hello-bin.rec").call()
    assert call is not None
    assert (call.crate_name, call.crate_types, call.target) == ("hello_pgo", ("bin",), "x86_64-unknown-linux-gnu")
    assert call.argv[0] == "/root/.cargo/bin/rustc"
    assert call.codegen("profile-use") == str(STORE)
    assert observed.bin_compiles([call], HELLO) == [call]
    assert observed.with_flag([call], "profile-use", str(STORE)) == 1


@pytest.mark.refuses("observed-profile-flag-dropped")
@pytest.mark.parametrize(
    "added",
    [
        ("--codegen", "profile-use=/old.profdata"),
        ("--codegen=profile-use=/old.profdata",),
        ("-Cprofile_use=/old.profdata",),
        ("-C", "profile_use=/old.profdata"),
    ],
)
def test_another_profile_given_after_the_store_path_in_another_spelling_is_refused(added: tuple[str, ...]) -> None:
    """A wrapper that appends ``--codegen profile-use=<another profile>`` (or ``-Cprofile_use=``): rustc takes the
    last -C value, in any of its spellings (tried with rustc 1.95), so the store path cargo gave is not what the
    compiler reads."""
    call = _read("optimise-hello-bin.rec").call()
    assert call is not None
    swapped = replace(call, argv=(*call.argv, *added))
    assert swapped.codegen("profile-use") == "/old.profdata"
    with pytest.raises(CheckFailed) as caught:
        observed.check_profile_flag(
            [swapped], HELLO, option="profile-use", value=str(STORE), build="the optimised build", found=[]
        )
    assert caught.value.message.startswith(
        f"rustc compiled hello_pgo in the optimised build without -Cprofile-use={STORE} (it got "
        "-Cprofile-use=/old.profdata)"
    )


def test_an_argfile_is_read_as_rustc_reads_it() -> None:
    record = _read("argfile-hello-bin.rec")
    lines = (CAPTURES / "argfile-hello-bin.args").read_text().splitlines()
    assert record.args == tuple(lines)
    call = record.call()
    assert call is not None
    assert call.crate_name == "hello_pgo"
    assert call.codegen("profile-use") == str(STORE)


def test_every_capture_read_from_a_folder_in_name_order(tmp_path: Path) -> None:
    for index, name in enumerate(("version-query.rec", "target-query.rec", "optimise-hello-bin.rec")):
        (tmp_path / f"rec.{index}").write_bytes((CAPTURES / name).read_bytes())
    (tmp_path / ".rec.half-written").write_bytes(b"pgo-rustc-shim-1\0comp")
    records = observed.read_records(tmp_path)
    assert [r.record.name for r in records] == ["rec.0", "rec.1", "rec.2"]
    assert len(observed.compiles(records)) == 1
    assert observed.read_records(tmp_path / "missing") == []


@pytest.mark.refuses("observed-record-foreign")
@pytest.mark.parametrize(
    "data",
    [b"", b"something else\0", b"pgo-rustc-shim-1\0compiler\0/x\0arg\0-vV", b"pgo-rustc-shim-1\0compiler\0/x\0arg\0"],
)
def test_a_record_that_is_not_the_shims_is_refused(data: bytes, tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match=r"record of the rustc shim|not a record of the pipeline's rustc shim"):
        observed.parse_record(data, tmp_path / "rec.x")


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_an_own_crate_without_the_profile_flag_is_refused_naming_the_wrappers() -> None:
    calls = observed.compiles([_read("instrument-hello-bin.rec")])
    with pytest.raises(CheckFailed) as raised:
        observed.check_profile_flag(
            calls,
            HELLO,
            option="profile-use",
            value=str(STORE),
            build="the optimised build",
            found=["RUSTC_WRAPPER=/x/drop.sh"],
        )
    assert str(raised.value).startswith(
        f"rustc compiled hello_pgo in the optimised build without -Cprofile-use={STORE}: the flag was dropped by "
        "RUSTC_WRAPPER=/x/drop.sh"
    )
    assert (
        observed.check_profile_flag(
            calls, HELLO, option="profile-generate", value=None, build="the instrumented build", found=[]
        )
        == calls
    )


def test_another_profile_than_the_store_path_is_refused() -> None:
    calls = observed.compiles([_read("optimise-hello-bin.rec")])
    with pytest.raises(CheckFailed, match=r"without -Cprofile-use=/elsewhere.profdata \(it got -Cprofile-use=/tmp/"):
        observed.check_profile_flag(
            calls, HELLO, option="profile-use", value="/elsewhere.profdata", build="the optimised build", found=[]
        )


@pytest.mark.refuses("observed-no-compile-of-the-binary")
def test_no_observed_compile_of_the_binary_is_refused() -> None:
    calls = observed.compiles([_read("version-query.rec"), _read("target-query.rec")])
    with pytest.raises(CheckFailed, match=r"rustc never compiled hello-pgo in the optimised build \(0 crate compiles"):
        observed.check_profile_flag(
            calls, HELLO, option="profile-use", value=str(STORE), build="the optimised build", found=[]
        )


@pytest.mark.refuses("observed-other-compiler")
def test_a_record_of_another_compiler_than_the_plans_is_refused() -> None:
    records = [_read("optimise-hello-bin.rec")]
    observed.check_compiler(records, None, "the optimised build")  # no RUSTC in the plan: nothing to compare
    observed.check_compiler(records, "/root/.cargo/bin/rustc", "the optimised build")
    words = "ran the compiler /root/.cargo/bin/rustc, not the plan's RUSTC=/opt/rustc"
    with pytest.raises(CheckFailed, match=re.escape(words)):
        observed.check_compiler(records, "/opt/rustc", "the optimised build")


def test_the_wrappers_named_come_from_the_variables_and_the_cargo_configs() -> None:
    configs: list[tuple[Path, Mapping[str, object]]] = [
        (Path("/c/.cargo/config.toml"), {"build": {"rustc-wrapper": "sccache"}}),
        (Path("/d"), {"x": 1}),
    ]
    env = {"RUSTC_WRAPPER": "/w", "RUSTC_WORKSPACE_WRAPPER": ""}
    assert observed.wrappers(env, configs) == [
        "RUSTC_WRAPPER=/w",
        "build.rustc-wrapper=sccache (/c/.cargo/config.toml)",
    ]


def test_the_shim_records_and_runs_the_real_compiler(tmp_path: Path) -> None:
    shim = observed.install_shim(tmp_path / "bin")
    assert observed.install_shim(tmp_path / "bin") == shim
    records = observed.fresh_records(tmp_path / "observed" / "optimise")
    argfile = tmp_path / "args"
    argfile.write_text("--crate-name\nhello_pgo\n--crate-type\nbin\n")
    env = observed.env_with_shim({"PATH": "/usr/bin:/bin", "RUSTC": "/bin/echo"}, shim, records)
    assert env["RUSTC"] == str(shim)
    done = subprocess.run(
        [env["RUSTC"], "-C", "opt-level=3", "a b", f"@{argfile}"], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout == f"-C opt-level=3 a b @{argfile}\n"  # the real compiler got the arguments as they were
    (record,) = observed.read_records(records)
    assert record.compiler == "/bin/echo"
    assert record.args == ("-C", "opt-level=3", "a b", "--crate-name", "hello_pgo", "--crate-type", "bin")
    assert [p.name for p in records.iterdir()] == [record.record.name]  # no temporary file left
    # without a RUSTC, the shim runs `rustc` of the PATH and records where it was
    bare = observed.env_with_shim({"PATH": f"{tmp_path / 'path'}:/usr/bin:/bin"}, shim, observed.fresh_records(records))
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "rustc").symlink_to("/bin/true")
    subprocess.run([bare["RUSTC"], "-vV"], env=bare, check=True)
    (record,) = observed.read_records(records)
    assert record.compiler == str(tmp_path / "path" / "rustc")


def _dependency(call: RustcCall, name: str, *, drop: str | None = None, add: tuple[str, ...] = ()) -> RustcCall:
    """``call`` (a compile of hello's binary) as the compile of another crate for the target, a library of the
    workspace's: its name and source, without the arguments starting with ``drop``, with ``add``."""
    argv = [name if a == "hello_pgo" else f"{name}/src/lib.rs" if a == "src/main.rs" else a for a in call.argv]
    argv = [a for a in argv if drop is None or not a.startswith(drop)]
    return replace(call, crate_name=name, crate_types=("lib",), argv=(*argv, *add))


def _optimised() -> RustcCall:
    call = _read("optimise-hello-bin.rec").call()
    assert call is not None and "src/main.rs" in call.argv
    return call


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_a_dependency_without_the_profile_flag_is_refused_naming_it() -> None:
    """A wrapper that drops the profile for every crate but the main one: the workspace's libraries and the
    dependencies get the target's rustflags from cargo as the main crate does, so each must have the flag."""
    main = _optimised()
    numkit = _dependency(main, "numkit", drop="-Cprofile-use=")
    script = _dependency(main, "build_script_build", drop="-Cprofile-use=")
    build_script = replace(script, argv=tuple(a for a in script.argv if not a.startswith("--target")))
    assert numkit.target is not None and build_script.target is None
    with pytest.raises(CheckFailed) as caught:
        observed.check_profile_flag(
            [numkit, main],
            HELLO,
            option="profile-use",
            value=str(STORE),
            build="the optimised build",
            found=["RUSTC_WRAPPER=/w"],
        )
    assert caught.value.message.startswith(
        f"rustc compiled numkit in the optimised build without -Cprofile-use={STORE}: the flag was dropped by "
        "RUSTC_WRAPPER=/w"
    )
    with_it = _dependency(main, "numkit")
    # a build script (compiled for the host: no --target) takes no rustflags of the target
    assert observed.check_profile_flag(
        [with_it, build_script, main], HELLO, option="profile-use", value=str(STORE), build="b", found=[]
    ) == [main]


@pytest.mark.refuses("observed-profile-warnings-silenced")
@pytest.mark.parametrize("added", [("-Cllvm-args=-no-pgo-warn-mismatch",), ("-A", "warnings"), ("--cap-lints=allow",)])
def test_a_compile_with_the_profile_that_silences_llvms_warnings_is_refused(added: tuple[str, ...]) -> None:
    main = _optimised()
    numkit = _dependency(main, "numkit", add=added)
    found = ["RUSTC_WRAPPER=/w"]
    observed.refuse_silenced([main], build="the optimised build", found=found)
    with pytest.raises(CheckFailed) as caught:
        observed.refuse_silenced([main, numkit], build="the optimised build", found=found)
    assert caught.value.message == (
        f"rustc compiled numkit in the optimised build with {' '.join(added)}, which silences LLVM's warnings of stale "
        "and unprofiled functions that the pipeline checks"
    )
    assert caught.value.hint.startswith("remove it from the rustflags and from the rustc wrappers (RUSTC_WRAPPER=/w)")
    # a compile without the profile (a build script's) has no warning of it to silence
    observed.refuse_silenced([_dependency(main, "numkit", drop="-Cprofile-use=", add=added)], build="b", found=[])


def test_cargos_own_cap_of_a_registry_crate_is_not_a_wrappers() -> None:
    """cargo gives the registry's crates ``--cap-lints allow`` (pgo-test's build keeps it; optimise's lint wrapper
    turns it into warn): read from cargo's own command in its log, it is not refused; a wrapper's is."""
    main = _optimised()
    registry = _dependency(main, "memchr", add=("--cap-lints", "allow"))
    asked = _dependency(main, "memchr", add=("--cap-lints", "allow"))
    capped = observed.cargo_capped([asked, main])
    assert capped == {("memchr", registry.metadata)}
    observed.refuse_silenced([registry], build="the test build", found=[], capped=capped)
    allowed = replace(registry, argv=(*registry.argv, "-Awarnings"))
    with pytest.raises(CheckFailed, match=r"memchr in the test build with -Awarnings, which"):
        observed.refuse_silenced([allowed], build="the test build", found=[], capped=capped)
    with pytest.raises(CheckFailed, match=r"memchr in the test build with --cap-lints allow, which"):
        observed.refuse_silenced([registry], build="the test build", found=[], capped=set())


@pytest.mark.refuses("observed-instrumentation-shipped")
def test_a_compile_for_the_target_with_mcount_is_refused() -> None:
    main = _optimised()
    observed.refuse_instrumented([main], build="the optimised build", found=[])
    textkit = _dependency(main, "textkit", add=("-Zinstrument-mcount",))
    with pytest.raises(CheckFailed) as caught:
        observed.refuse_instrumented([main, textkit], build="the optimised build", found=[])
    assert caught.value.line().startswith(
        "rustc compiled textkit in the optimised build with -Zinstrument-mcount: the binary would ship instrumented "
        "(remove it from the rustflags and from the rustc wrappers (none set)"
    )


def test_a_refused_builds_compiles_are_forgotten_so_that_none_is_fresh_next_time(tmp_path: Path) -> None:
    """What a refused build's compiles wrote is removed: cargo would find a library built without the profile
    Fresh in the next build, which cleans the package alone, and the shim would never see it compiled."""
    main = _optimised()
    argv = [a for a in _dependency(main, "numkit").argv if not a.startswith(("--out-dir", "-Cextra-filename"))]
    numkit = replace(main, crate_name="numkit", argv=(*argv, "--out-dir", str(tmp_path), "-C", "extra-filename=-ab12"))
    host = replace(numkit, argv=tuple(a for a in numkit.argv if not a.startswith("--target")))
    written = [tmp_path / name for name in ("libnumkit-ab12.rlib", "libnumkit-ab12.rmeta", "numkit-ab12.d")]
    others = [tmp_path / name for name in ("libnumkit-cd34.rlib", "libnumkit_extra-ab12.rlib", "textkit-ab12.d")]
    for path in (*written, *others):
        path.write_text("")
    assert observed.outputs(numkit) == sorted(written)
    observed.forget([host])  # compiled for the host (a build script): nothing of the target's
    assert all(path.exists() for path in written)
    observed.forget([numkit])
    assert [path.exists() for path in (*written, *others)] == [False] * 3 + [True] * 3
