"""Inputs that were tracebacks, or refusals after four stages, now refused in one line by ``nox -s pgo`` before
anything is built: no target dir, no report, the line naming the real cause. Each run is seconds (nothing builds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Pipeline, assert_refused, output, run_nox
from tests.faults import small_tmpfs

pytestmark = [pytest.mark.slow]


def _nothing_built(pipeline: Pipeline) -> None:
    assert not (pipeline.work / "generate-target").exists()
    assert (
        not (pipeline.work / "report.json").exists()
        or '"instrument"' not in (pipeline.work / "report.json").read_text()
    )


@pytest.mark.refuses("workload-file-nul-character")
def test_a_nul_in_a_workload_argument_is_refused_before_the_instrumented_build(tmp_path: Path) -> None:
    workload = tmp_path / "nul.toml"
    workload.write_text(
        '[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\n\n[[instance.phase]]\nname = "words"\n'
        'kind = "command"\nargs = ["words", "a\\u0000b"]\n'
    )
    hello = Pipeline(tmp_path, "hello", workload=str(workload))
    line = assert_refused(hello.nox("pgo"), f"{workload}: instance[1].phase[1].args[2] holds a NUL character")
    assert "remove it" in line
    _nothing_built(hello)


_PHASE = '[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\n\n[[instance.phase]]\nname = "words"\n'
_DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.refuses("workload-file-nested-too-deeply", "expect-exit-not-exit-code", "phase-timeout-below-floor")
@pytest.mark.parametrize(
    ("workload", "env", "fragment"),
    [
        (f"x = {_DEEP}\n" + _PHASE, {}, ": nested too deeply to read (arrays or inline tables inside each other"),
        (_PHASE + "expect_exit = 300\n", {}, "expect_exit: 300 is not an exit code: a program exits with 0 to 255"),
        (_PHASE, {"PGO_PHASE_TIMEOUT": "1e-300"}, "PGO_PHASE_TIMEOUT: '1e-300' is below the floor of 0.1"),
    ],
    ids=["deep-workload", "expect-exit-300", "phase-timeout-1e-300"],
)
def test_a_workload_or_timeout_no_run_can_meet_is_refused_before_the_instrumented_build(
    tmp_path: Path, workload: str, env: dict[str, str], fragment: str
) -> None:
    """Issue 34 (items 9, 10): a RecursionError traceback, and two values accepted and never met; the unit tests
    (test_workload.py, test_config.py) read them, this is ``nox -s pgo`` as a user meets them."""
    path = tmp_path / "w.toml"
    path.write_text(workload + 'kind = "command"\nargs = ["words", "a b"]\n')
    hello = Pipeline(tmp_path, "hello", workload=str(path))
    proc = hello.nox("pgo", **env)
    assert_refused(proc, fragment)
    assert "Traceback" not in output(proc)
    _nothing_built(hello)


@pytest.mark.refuses("pgo-max-glibc-not-version")
def test_a_max_glibc_that_is_not_a_version_is_refused_before_the_instrumented_build(tmp_path: Path) -> None:
    hello = Pipeline(tmp_path, "hello")
    assert_refused(hello.nox("pgo", PGO_MAX_GLIBC="abc"), "PGO_MAX_GLIBC: 'abc' is not a glibc version")
    _nothing_built(hello)


@pytest.mark.refuses("per-target-variable-cargo-config-build-target")
def test_a_sample_profile_in_the_crates_rustflags_is_refused_as_a_profile_flag(tmp_path: Path) -> None:
    """``-Zprofile-sample-use`` (nightly's sample PGO) in the crate's cargo config: was "cargo clean failed"."""
    hello = Pipeline(tmp_path, "hello")
    config = hello.crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text('[build]\nrustflags = ["-Zprofile-sample-use=/tmp/perf.prof"]\n')
    line = assert_refused(hello.nox("pgo"), "already holds profile flags (-Zprofile-sample-use=/tmp/perf.prof)")
    assert "cargo clean" not in line
    _nothing_built(hello)


@pytest.mark.refuses("pgo-llvm-bolt-not-llvm-bolt")
def test_an_llvm_bolt_that_is_llvm_profdata_is_refused_before_the_instrumented_build(tmp_path: Path) -> None:
    """Was accepted until llvm-bolt failed after four stages: llvm-profdata-22 prints LLVM 22's version too."""
    hello = Pipeline(tmp_path, "hello")
    proc = hello.nox("pgo", PGO_BOLT="1", PGO_LLVM_BOLT="llvm-profdata-22")
    assert_refused(proc, "PGO_LLVM_BOLT=llvm-profdata-22: ", "is not llvm-bolt: its --version names no BOLT revision")
    _nothing_built(hello)


@pytest.mark.refuses("store-not-writable")
def test_a_read_only_store_is_refused_before_the_instrumented_build(tmp_path: Path) -> None:
    """Was refused only at optimise, after two builds and the training, with a hint naming PGO_OUT."""
    hello = Pipeline(tmp_path, "hello")
    with small_tmpfs(tmp_path / "ro-store", mode="0700", read_only=True) as store:
        line = assert_refused(
            hello.nox("pgo", PGO_PROFILE_STORE=str(store)), f"profile store {store} is on a read-only filesystem"
        )
    assert "PGO_PROFILE_STORE" in line and "PGO_OUT" not in line
    _nothing_built(hello)


@pytest.mark.refuses("cpu-baseline-qemu-cannot-be-run")
def test_cpu_baseline_with_a_qemu_that_cannot_be_run_names_it(tmp_path: Path) -> None:
    """Was "cannot write qemu-x86_64 … (free space there or choose another PGO_OUT)"."""
    fake = tmp_path / "bin" / "qemu-x86_64"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho qemu\n")
    fake.chmod(0o644)
    hello = Pipeline(tmp_path, "hello")
    env = hello.env()
    env["PATH"] = str(fake.parent)  # alone: a qemu-x86_64 further on would be run in its place
    proc = run_nox("cpu-baseline", env, ["--binary", "/bin/true"])
    line = assert_refused(proc, "qemu-x86_64 on PATH cannot be run: Permission denied")
    assert "free space" not in line
