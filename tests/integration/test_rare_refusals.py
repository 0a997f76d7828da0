"""Refusals of the instrument, optimise, pgo-test and bolt stages that a normal run never meets, made to happen with
the real cargo, rustc, llvm-profdata and llvm-bolt on the hello and tested fixtures.

Where the real tools cannot be made to fail that way, ``cargo`` on ``PATH`` is a wrapper that runs the real
cargo and then does what a broken build, a stray tool or a racing process would do to its output (removes the
binary, builds the package once more so that the build seen by the pipeline is all Fresh, adds a ``--config``
with another ``-Cprofile-use``). For BOLT,
``PGO_LLVM_BOLT`` is a wrapper of the real llvm-bolt-22 with a wrapper of the real merge-fdata-22 beside it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Pipeline, assert_ok, assert_refused, written_records
from tests.integration.test_pgo_test import WORKLOAD as TESTED_WORKLOAD

pytestmark = pytest.mark.slow

TRIPLE = "x86_64-unknown-linux-gnu"
FLAGS_VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"

#: ``cargo`` for PATH: the real cargo; then, for a ``cargo $BREAK_COMMAND`` (default build) whose per-target
#: rustflags contain $BREAK_FLAG, what $BREAK says: ``remove`` the binary $BREAK_BINARY; ``fresh``: build
#: once quietly and then again as asked, so that the log the pipeline reads has no rustc line of the package;
#: ``config``: add ``--config`` with a ``[target.'cfg(unix)'] rustflags`` of ``-Cprofile-use=$BREAK_PROFILE``
#: (cargo joins it to the per-target variable's flags, so rustc takes that profile; the same table in a cargo
#: config file is refused before the build, by rustflags.plan_rustflags)
CARGO_WRAPPER = """#!/bin/sh
real={real}
case " $* " in *" ${{BREAK_COMMAND:-build}} "*) ;; *) exec "$real" "$@";; esac
case "${var}" in *"$BREAK_FLAG"*) ;; *) exec "$real" "$@";; esac
if [ "$BREAK" = config ]; then
  exec "$real" "$@" --config "target.'cfg(unix)'.rustflags=[\\"-Cprofile-use=$BREAK_PROFILE\\"]"
fi
if [ "$BREAK" = fresh ]; then "$real" "$@" >/dev/null 2>&1 || exit $?; exec "$real" "$@"; fi
"$real" "$@"; rc=$?
[ "$BREAK" = remove ] && rm -f "$BREAK_BINARY"
exit $rc
"""


def _cargo_wrapper(directory: Path) -> Path:
    real = shutil.which("cargo")
    assert real is not None
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "cargo"
    wrapper.write_text(CARGO_WRAPPER.format(real=real, var="{" + FLAGS_VAR + "}"))
    wrapper.chmod(0o755)
    return directory


def _path_with(directory: Path, p: Pipeline) -> str:
    return f"{directory}:{p.env()['PATH']}"


def _report(p: Pipeline) -> dict[str, Any]:
    return written_records(p.work)


def _built(p: Pipeline) -> Path:
    return p.crate_dir / "target" / TRIPLE / "release" / "hello-pgo"


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """hello trained and merged once for the module; each test runs the optimise stage on it (a failed
    optimise leaves the merged profile as it was)."""
    p = Pipeline(tmp_path_factory.mktemp("rare"), "hello")
    for stage in ("instrument", "train", "merge"):
        assert_ok(p.nox(stage))
    return p


@pytest.fixture
def wrappers(tmp_path: Path) -> Path:
    return _cargo_wrapper(tmp_path / "wrapped")


def _assert_nothing_optimised(p: Pipeline) -> None:
    """The failed optimise stage left no binary where one would be picked up, and says it failed."""
    assert not _built(p).exists()
    assert not (p.work / "optimised" / "hello-pgo").exists()
    assert "failed" in _report(p)["optimise"]


@pytest.fixture
def cfg_profile_use(merged: Pipeline, wrappers: Path) -> dict[str, str]:
    """The optimise stage's environment with a cargo that adds its own ``-Cprofile-use`` (``BREAK=config``):
    the work dir's merged profile, a real profile of this very crate at another path than the store's."""
    other = merged.work / "hello-pgo.profdata"
    return {
        "PATH": _path_with(wrappers, merged),
        "BREAK": "config",
        "BREAK_FLAG": "profile-use",
        "BREAK_PROFILE": str(other),
    }


@pytest.mark.refuses("main-crate-compiled-another-profile-use")
def test_main_crate_compiled_with_another_profile_use_refused(
    merged: Pipeline, cfg_profile_use: dict[str, str]
) -> None:
    line = assert_refused(
        merged.nox("optimise", **cfg_profile_use), "crate hello_pgo was compiled with profile-use=", "not "
    )
    assert f"profile-use={cfg_profile_use['BREAK_PROFILE']!r}, not {merged.store}/" in line
    assert "the main crate must be compiled with the profile" in line
    _assert_nothing_optimised(merged)
    assert (merged.work / "rejected" / "hello-pgo").is_file()


@pytest.mark.refuses("build-log-has-no-rustc-line-package")
def test_optimised_build_log_without_a_rustc_line_of_the_package_refused(merged: Pipeline, wrappers: Path) -> None:
    proc = merged.nox("optimise", PATH=_path_with(wrappers, merged), BREAK="fresh", BREAK_FLAG="profile-use")
    line = assert_refused(proc, "the optimised build's log has no rustc line of hello-pgo")
    assert "not compiled with the profile" in line
    log = (merged.work / "logs" / "optimise-build.log").read_text()
    assert "Fresh hello-pgo" in log and "--crate-name hello_pgo" not in log  # the build was all Fresh
    _assert_nothing_optimised(merged)


@pytest.mark.refuses("optimised-build-left-no-binary")
def test_optimised_build_that_leaves_no_binary_refused(merged: Pipeline, wrappers: Path) -> None:
    built = _built(merged)
    proc = merged.nox(
        "optimise",
        PATH=_path_with(wrappers, merged),
        BREAK="remove",
        BREAK_FLAG="profile-use",
        BREAK_BINARY=str(built),
    )
    assert_refused(proc, f"the optimised build left no binary at {built}", "optimise-build.log")
    assert not (merged.work / "optimised" / "hello-pgo").exists()
    assert "optimise" not in _report(merged) or "failed" in _report(merged)["optimise"]


@pytest.mark.refuses("instrumented-build-left-no-binary")
def test_instrumented_build_that_leaves_no_binary_refused(hello: Pipeline, wrappers: Path) -> None:
    binary = hello.work / "generate-target" / TRIPLE / "release" / "hello-pgo"
    proc = hello.nox(
        "instrument",
        PATH=_path_with(wrappers, hello),
        BREAK="remove",
        BREAK_FLAG="profile-generate",
        BREAK_BINARY=str(binary),
    )
    assert_refused(proc, f"the instrumented build left no binary at {binary}", "instrument-build.log")
    recorded = _report(hello)["instrument"]
    assert "failed" in recorded and "binary" not in recorded
    assert_refused(hello.nox("train"), "instrument")  # nothing to train


@pytest.fixture(scope="module")
def tested(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """tests/fixtures/tested through the whole pipeline once (its optimised build checked); each test runs the
    pgo-test stage on it."""
    root = tmp_path_factory.mktemp("rare-tested")
    workload = root / "tested.toml"
    workload.write_text(TESTED_WORKLOAD)
    p = Pipeline(root, "tested", workload=str(workload))
    assert_ok(p.nox("pgo"))
    return p


def _assert_test_stage_failed(p: Pipeline, line: str) -> None:
    """The test stage's record is the failure (the optimised binary, which passed its own checks, stays)."""
    recorded = _report(p)
    assert recorded["test"]["failed_check"] in line
    assert Path(recorded["optimise"]["binary"]).is_file()


@pytest.mark.refuses("cargo-test-exits-non-zero-though-every")
def test_cargo_test_exiting_non_zero_though_every_test_passed_refused(tested: Pipeline) -> None:
    # a test binary whose tests all pass and which then exits 3: a test registers an atexit handler
    exits = tested.crate_dir / "tests" / "exits.rs"
    exits.write_text(
        'extern "C" {\n    fn atexit(f: extern "C" fn()) -> i32;\n    fn _exit(code: i32) -> !;\n}\n\n'
        'extern "C" fn leave() {\n    unsafe { _exit(3) }\n}\n\n'
        "#[test]\nfn registers_an_exit_code() {\n    assert_eq!(unsafe { atexit(leave) }, 0);\n}\n"
    )
    try:
        line = assert_refused(tested.nox("pgo-test"), "cargo test exited with code 101 though every test passed")
    finally:
        exits.unlink()
    assert "(10 passed, 0 failed, 1 ignored)" in line
    _assert_test_stage_failed(tested, line)
    assert _report(tested)["test"]["exit_code"] == 101


@pytest.mark.refuses("test-build-compiled-crate-another-profile-use")
def test_test_build_compiled_with_another_profile_use_refused(tested: Pipeline, wrappers: Path) -> None:
    other = tested.work / "tested-pgo.profdata"  # the merged profile of this crate, not the store's copy
    proc = tested.nox(
        "pgo-test",
        PATH=_path_with(wrappers, tested),
        BREAK="config",
        BREAK_COMMAND="test",
        BREAK_FLAG="profile-use",
        BREAK_PROFILE=str(other),
    )
    line = assert_refused(proc, "the test build compiled tested_pgo with profile-use=")
    assert f"profile-use={str(other)!r}, not {tested.store}/" in line
    _assert_test_stage_failed(tested, line)


@pytest.mark.refuses("test-log-has-no-rustc-line-package")
def test_test_log_without_a_rustc_line_of_the_package_refused(tested: Pipeline, wrappers: Path) -> None:
    proc = tested.nox(
        "pgo-test", PATH=_path_with(wrappers, tested), BREAK="fresh", BREAK_COMMAND="test", BREAK_FLAG="profile-use"
    )
    line = assert_refused(proc, "the test log has no rustc line of tested-pgo", "test.log")
    assert "rustc --crate-name tested_pgo" not in (tested.work / "logs" / "test.log").read_text()
    _assert_test_stage_failed(tested, line)


#: llvm-bolt or merge-fdata: the real one ({real}); then, when its arguments contain $BREAK_ARG, its ``-o``
#: output removed
BOLT_TOOL_WRAPPER = """#!/bin/sh
case " $* " in *"$BREAK_ARG"*) ;; *) exec {real} "$@";; esac
{real} "$@"; rc=$?
out=; previous=
for arg in "$@"; do [ "$previous" = -o ] && out=$arg; previous=$arg; done
rm -f "$out"
exit $rc
"""


@pytest.fixture(scope="module")
def bolt_ready(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """hello optimised with the relocations BOLT needs (PGO_BOLT=1), without the bolt stage; each test runs it."""
    p = Pipeline(tmp_path_factory.mktemp("rare-bolt"), "hello")
    for stage in ("instrument", "train", "merge", "optimise"):
        assert_ok(p.nox(stage, PGO_BOLT="1"))
    return p


@pytest.fixture
def bolt_wrappers(tmp_path: Path) -> Path:
    directory = tmp_path / "bolt-tools"
    directory.mkdir()
    for name, real in (("llvm-bolt", "llvm-bolt-22"), ("merge-fdata", "merge-fdata-22")):
        found = shutil.which(real)
        assert found is not None, f"{real} is not installed"
        wrapper = directory / name
        wrapper.write_text(BOLT_TOOL_WRAPPER.format(real=found))
        wrapper.chmod(0o755)
    return directory / "llvm-bolt"


def _assert_nothing_bolted(p: Pipeline) -> None:
    assert not (p.work / "bolted" / "hello-pgo").exists()
    assert "failed" in _report(p)["bolt"]
    # no partial store file (the BOLT profile's training record, <sha>.fdata.trained-on, is whole: the profile
    # was stored before llvm-bolt ran)
    assert not [f for f in p.store.glob("*.fdata.*") if not f.name.endswith(".fdata.trained-on")]
    assert not list(p.store.glob(".*.tmp"))


@pytest.mark.refuses("merge-fdata-wrote-no-profile")
def test_merge_fdata_that_writes_no_profile_refused(bolt_ready: Pipeline, bolt_wrappers: Path) -> None:
    proc = bolt_ready.nox("bolt", PGO_BOLT="1", PGO_LLVM_BOLT=str(bolt_wrappers), BREAK_ARG=".fdata")
    line = assert_refused(proc, "merge-fdata wrote no ", "bolt-merge.log")
    assert f"{bolt_ready.work}/bolt/" in line
    assert not (bolt_ready.work / "bolt" / "hello-pgo.fdata").exists()
    assert not list((bolt_ready.work / "bolt").glob("*.fdata*"))  # nor its temporary file
    assert not bolt_ready.store.exists() or not list(bolt_ready.store.glob("*.fdata"))
    _assert_nothing_bolted(bolt_ready)


@pytest.mark.refuses("llvm-bolt-left-no-binary")
def test_llvm_bolt_that_leaves_no_binary_refused(bolt_ready: Pipeline, bolt_wrappers: Path) -> None:
    proc = bolt_ready.nox("bolt", PGO_BOLT="1", PGO_LLVM_BOLT=str(bolt_wrappers), BREAK_ARG="-data=")
    output = bolt_ready.work / "bolt" / "hello-pgo.bolt"
    assert_refused(proc, f"llvm-bolt left no binary at {output}", "bolt-optimise.log")
    assert not output.exists()
    _assert_nothing_bolted(bolt_ready)
