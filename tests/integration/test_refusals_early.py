"""Refusals made when the plan is made, before anything is built (issue 9): an unsafe profile store, a target
rustc does not know, a carried rustflag that would not survive the per-target variable; and a full disk under
the store, which leaves nothing partial. Real nox, cargo and rustc on copies of the ``hello`` fixture."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.toolchain.rustc import find_profdata, rustc_info, rustc_sysroot
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env
from tests.faults import fill_up, small_tmpfs

pytestmark = pytest.mark.slow

HOST = "x86_64-unknown-linux-gnu"
VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"


def _nothing_built(p: Pipeline) -> None:
    """No build ran: no target dir of the crate, no instrumented build, no cargo log, no profile in the store."""
    assert not (p.crate_dir / "target").exists()
    assert not (p.work / "generate-target").exists()
    logs = p.work / "logs"
    assert not logs.exists() or not [log.name for log in logs.iterdir() if "clean" in log.name or "build" in log.name]
    assert not p.store.exists() or not list(p.store.glob("*.profdata"))


def _report(p: Pipeline) -> dict[str, Any]:
    path = p.work / "report.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


# --- the profile store ---------------------------------------------------------------------------------------


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
@pytest.mark.parametrize("session", ["instrument", "pgo"])
def test_store_in_a_parent_others_may_write_refused_before_the_build(hello: Pipeline, session: str) -> None:
    shared = hello.root / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    hello.store = shared / "store"
    line = assert_refused(hello.nox(session), f"profile store {hello.store} is inside {shared}", "no sticky bit")
    assert f"chmod go-w {shared}" in line
    assert "PGO_PROFILE_STORE" in line
    assert not hello.store.exists()
    _nothing_built(hello)


def test_store_in_a_sticky_parent_is_accepted_at_plan_time(hello: Pipeline) -> None:
    # like /tmp: others may write it, but only the owner may rename or remove what is in it
    sticky = hello.root / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    hello.store = sticky / "store"
    # a rustflag with a space on purpose: the plan gets past the store's check, then stops before any build
    _cargo_config(hello, '[build]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    assert_refused(hello.nox("instrument"), "[build] rustflags has the entry")
    _nothing_built(hello)


@pytest.mark.refuses("directory-symlink-way-store-written-resolved-neither")
@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the directory away")
@pytest.mark.parametrize("session", ["instrument", "pgo"])
def test_store_under_a_directory_of_another_user_refused_before_the_build(hello: Pipeline, session: str) -> None:
    """Issue 19: its owner could swap the store during the compile and back before the re-hash."""
    theirs = hello.root / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4242, 4242)
    hello.store = theirs / "store"
    line = assert_refused(
        hello.nox(session),
        f"profile store {hello.store} is inside {theirs} (mode 0755), owned by uid 4242 (no user of that uid), "
        "not by you (uid 0) or root: that user could replace the store and its profiles",
    )
    assert line.endswith(
        f"(chown root {theirs} (as root), or choose a PGO_PROFILE_STORE whose parent directories are all yours or "
        "root's)."
    ), line
    assert not hello.store.exists()
    _nothing_built(hello)


def _work_in_store(p: Pipeline) -> str:
    p.work = p.store / "work"
    return f"the work dir PGO_OUT={p.work} is inside the profile store {p.store}"


def _store_in_work(p: Pipeline) -> str:
    p.store = p.work / "store"
    return f"the profile store {p.store} is inside the work dir PGO_OUT={p.work}"


@pytest.mark.refuses("work-dir-store-inside-one-another-one")
@pytest.mark.parametrize("make", [_work_in_store, _store_in_work], ids=["work-in-store", "store-in-work"])
def test_work_dir_and_store_inside_one_another_refused_before_the_build(hello: Pipeline, make: Any) -> None:
    # it failed only after the training, with a hint that blamed the user
    said = make(hello)
    line = assert_refused(hello.nox("pgo"), said)
    assert line.endswith(f"{said} (give PGO_OUT and PGO_PROFILE_STORE paths outside one another)."), line
    _nothing_built(hello)
    assert not hello.store.exists()


def _open_store(p: Pipeline) -> str:
    p.store.mkdir(mode=0o700)
    p.store.chmod(0o755)
    return "has mode 0755"


def _symlinked_store(p: Pipeline) -> str:
    real = p.root / "real-store"
    real.mkdir(mode=0o700)
    p.store.symlink_to(real)
    return "is a symlink"


@pytest.mark.refuses("store-symlink", "others-may-write-read-store-not-mode")
@pytest.mark.parametrize("make", [_open_store, _symlinked_store], ids=["mode-0755", "symlink"])
def test_unsafe_store_refused_before_instrument(hello: Pipeline, make: Any) -> None:
    # these were found only by optimise, after instrument, train and merge had run
    fragment = make(hello)
    assert_refused(hello.nox("instrument"), f"profile store {hello.store} {fragment}")
    _nothing_built(hello)


# --- the target -------------------------------------------------------------------------------------------


@pytest.mark.refuses("pgo-target-target-release-several-not-target")
@pytest.mark.parametrize(
    ("target", "suggestion"),
    [
        ("not-a-triple", "did you mean "),
        ("x86_64-unknown-linux-gun", f"did you mean {HOST}?"),
    ],
)
def test_unknown_target_refused_before_cargo(hello: Pipeline, target: str, suggestion: str) -> None:
    # it used to say only "cargo clean failed"
    line = assert_refused(
        hello.nox("instrument", PGO_TARGET=target), f"PGO_TARGET={target} is not a target this rustc knows"
    )
    assert suggestion in line
    assert "rustc --print target-list" in line
    assert "cargo clean" not in line
    _nothing_built(hello)


@pytest.mark.refuses("target-standard-library-not-installed")
def test_a_target_without_its_std_refused_before_cargo(hello: Pipeline) -> None:
    # it used to be "instrumented build failed (see log)", after cargo clean: can't find crate for `core`
    target = "riscv64gc-unknown-linux-gnu"  # known to rustc, its std installed in no toolchain here
    line = assert_refused(
        hello.nox("instrument", PGO_TARGET=target),
        f"PGO_TARGET={target}: the standard library for {target} is not installed in the toolchain ",
        "(install it: rustup target add --toolchain ",
    )
    assert line.endswith(f"-{HOST} {target}).")  # the toolchain rustup chose for the crate, by its full name
    assert "failed (see log)" not in line
    _nothing_built(hello)


@pytest.mark.refuses("rustflags-rustc-refuses")
def test_an_llvm_option_llvm_does_not_have_refused_before_cargo(hello: Pipeline) -> None:
    # it used to be "cargo clean failed (see log)": cargo's first question to rustc failed
    line = assert_refused(
        hello.nox("instrument", **{VAR: "-Cllvm-args=-inline-thresold=225"}),
        f"{VAR}: LLVM has no option -inline-thresold=225",
        "did you mean --inline-threshold=225?",
    )
    assert "cargo clean" not in line
    _nothing_built(hello)


# --- carried rustflags ------------------------------------------------------------------------------------


def _cargo_config(p: Pipeline, text: str) -> Path:
    config = p.crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text(text)
    return config


@pytest.mark.refuses("carried-build-rustflags-entry-contains-white-space")
def test_carried_build_rustflag_with_a_space_refused_when_planned(hello: Pipeline) -> None:
    # it used to reach rustc as `--cfg x="a` and `b"`: "multiple input filenames provided"
    config = _cargo_config(hello, '[build]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    line = assert_refused(hello.nox("pgo"), f"{config} [build] rustflags has the entry", "contains white space")
    assert f"{VAR}, which cargo splits on white space" in line
    assert f"move the rustflags to [target.{HOST}] rustflags" in line
    _nothing_built(hello)


def test_the_hint_works_target_rustflags_with_a_space_and_an_existing_variable(hello: Pipeline) -> None:
    # what the refusal suggests builds, and a CARGO_TARGET_<TRIPLE>_RUSTFLAGS of the user's is kept as it is
    _cargo_config(hello, f'[target.{HOST}]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    assert_ok(hello.nox("instrument", **{VAR: "--cfg  hello_config"}))
    log = (hello.work / "logs" / "instrument-build.log").read_text()
    main_line = next(line for line in log.splitlines() if "--crate-name hello_pgo" in line)
    assert "--cfg hello_config" in main_line
    assert "'x=\"a b\"'" in main_line
    assert f"-Cprofile-generate={hello.work / 'profraw'}" in main_line


# --- the LLVM tools ----------------------------------------------------------------------------------------


def _not_a_tool(tmp_path: Path, name: str, prints: str) -> Path:
    """A program that is not the LLVM tool it is given as: it prints ``prints`` (another LLVM's version, or
    something else) whatever it is asked, and exits 0."""
    fake = tmp_path / name
    fake.write_text(f"#!/bin/sh\necho '{prints}'\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.refuses("llvm-profdata-another-llvm-major-rustc-before")
@pytest.mark.parametrize("session", ["pgo", "instrument", "merge", "optimise"])
def test_llvm_profdata_of_another_major_refused_before_anything_is_built(hello: Pipeline, session: str) -> None:
    """llvm-14 is installed here (and on CI): its llvm-profdata cannot read rustc 22's raw profiles."""
    proc = hello.nox(session, PGO_LLVM_PROFDATA="/usr/bin/llvm-profdata-14")
    assert_refused(proc, "/usr/bin/llvm-profdata-14 is LLVM 14.0.6 but rustc", "is LLVM 22.", "apt-get install llvm-22")
    assert "Compiling" not in proc.stdout + proc.stderr
    _nothing_built(hello)
    assert _report(hello) == {}  # refused before any stage began


@pytest.mark.refuses("pgo-llvm-profdata-pgo-llvm-bolt-merge")
@pytest.mark.parametrize(
    ("program", "says"),
    [
        ("/bin/true", "`/bin/true merge --version` prints no LLVM version"),
        ("/bin/false", "`/bin/false merge --version` failed with exit code 1: (no output)"),
    ],
)
def test_a_program_that_is_no_llvm_profdata_refused_before_anything_is_built(
    hello: Pipeline, program: str, says: str
) -> None:
    proc = hello.nox("pgo", PGO_LLVM_PROFDATA=program)
    assert_refused(proc, f"{program} is not llvm-profdata: {says}", "LLVM 22")
    assert "Compiling" not in proc.stdout + proc.stderr
    _nothing_built(hello)


@pytest.mark.refuses("llvm-profdata-another-llvm-major-rustc-before")
def test_a_script_printing_another_version_as_llvm_profdata_refused(hello: Pipeline, tmp_path: Path) -> None:
    fake = _not_a_tool(tmp_path, "llvm-profdata", "Ubuntu LLVM version 18.1.3")
    assert_refused(hello.nox("instrument", PGO_LLVM_PROFDATA=str(fake)), f"{fake} is LLVM 18.1.3 but rustc")
    _nothing_built(hello)


def test_train_does_not_look_for_llvm_profdata(hello: Pipeline) -> None:
    """A session that runs no llvm-profdata does not look for one: train gets as far as its missing input."""
    assert_refused(hello.nox("train", PGO_LLVM_PROFDATA="/bin/true"), "train needs the result of instrument")


@pytest.mark.refuses("llvm-bolt-another-llvm-major-pgo-bolt")
@pytest.mark.parametrize("session", ["pgo", "optimise", "bolt"])
def test_llvm_bolt_of_another_major_refused_before_anything_is_built(
    hello: Pipeline, tmp_path: Path, session: str
) -> None:
    """No llvm-bolt of another major than 22 is installable here: a script printing LLVM 21's version stands in
    for one (it is never run as llvm-bolt). ``optimise`` with PGO_BOLT=1 links for BOLT: refused before it too."""
    fake = _not_a_tool(tmp_path, "llvm-bolt-21", "Debian LLVM version 21.1.8")
    proc = hello.nox(session, PGO_BOLT="1", PGO_LLVM_BOLT=str(fake))
    assert_refused(proc, f"{fake} is LLVM 21.1.8 but rustc", "apt-get install bolt-22")
    assert "Compiling" not in proc.stdout + proc.stderr
    _nothing_built(hello)
    assert _report(hello) == {}


@pytest.mark.refuses("pgo-llvm-profdata-pgo-llvm-bolt-merge")
def test_a_program_that_is_no_llvm_bolt_refused_before_anything_is_built(hello: Pipeline) -> None:
    proc = hello.nox("pgo", PGO_BOLT="1", PGO_LLVM_BOLT="/bin/true")
    assert_refused(proc, "/bin/true is not llvm-bolt: `/bin/true --version` prints no LLVM version", "bolt-22")
    _nothing_built(hello)


@pytest.mark.refuses("merge-fdata-another-llvm-major")
def test_merge_fdata_of_another_major_refused_before_anything_is_built(hello: Pipeline, tmp_path: Path) -> None:
    """The real llvm-bolt-22, a merge-fdata beside it printing LLVM 21's version."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "llvm-bolt").symlink_to("/usr/bin/llvm-bolt-22")
    fake = _not_a_tool(tools, "merge-fdata", "Debian LLVM version 21.1.8")
    proc = hello.nox("pgo", PGO_BOLT="1", PGO_LLVM_BOLT=str(tools / "llvm-bolt"))
    assert_refused(proc, f"{fake} is LLVM 21.1.8 but rustc", "bolt-22")
    _nothing_built(hello)


# --- a full disk under the store ----------------------------------------------------------------------------


def _valid_profile(tmp_path: Path) -> Path:
    """An indexed IR-level profile made by the llvm-profdata of this rustc's LLVM, from a text profile."""
    env = clean_env()
    tool = find_profdata(rustc_info(env), rustc_sysroot(env), env, None)
    text = tmp_path / "p.proftext"
    functions = "".join(
        f"f{i}\n# Func Hash:\n{1000 + i}\n# Num Counters:\n1\n# Counter Values:\n{i + 1}\n\n" for i in range(50)
    )
    text.write_text(f"# IR level Instrumentation Flag\n:ir\n{functions}")
    profile = tmp_path / "given.profdata"
    subprocess.run([str(tool.path), "merge", "-o", str(profile), str(text)], check=True, capture_output=True)
    return profile


@pytest.mark.refuses("no-space-left-write-profile-into-store")
def test_full_disk_under_the_store_is_one_line_and_leaves_nothing(hello: Pipeline) -> None:
    profile = _valid_profile(hello.root)
    with small_tmpfs(hello.root / "small", size="64k") as small:
        hello.store = small / "store"
        hello.store.mkdir(mode=0o700)
        fill_up(small)
        proc = hello.nox("optimise", PGO_PROFDATA=str(profile))
        # the profile the build reads, put in the store: by default the given one without its never-run records
        read = hello.work / "hello-pgo.partial.profdata"
        line = assert_refused(proc, f"no space left to write the profile {read}", f"profile store {hello.store}")
        assert "free space or choose another PGO_PROFILE_STORE" in line
        # no temp file, no half profile, no build, no report entry that claims success
        assert sorted(p.name for p in hello.store.iterdir()) == [".lock"]
        _nothing_built(hello)
        optimise = _report(hello).get("optimise")
        assert optimise is None or "failed" in optimise
