"""What rustc really received (the pipeline's RUSTC shim) and what the optimised binary really is (issue 34,
items 1 and 3): real wrappers on hello that drop the profile, swap it for instrumentation, or rebuild behind the
shim's back, each refused; the normal pipeline still passes. One training shared by the module; each test runs
``nox -s optimise`` (seconds) on it, in file order (the last one adds a plain record)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import CheckFailed
from recipes.llvm import elf
from recipes.release import make as release
from recipes.toolchain.cargo import observed
from recipes.toolchain.cargo.metadata import crate_info
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env, run_nox
from tests.integration.test_pgo_test import WORKLOAD as TESTED_WORKLOAD
from tests.integration.test_release import TAG, Release

pytestmark = pytest.mark.slow

#: drops -Cprofile-use from what it passes on (to $RUSTC, the pipeline's shim)
DROPPING = """#!/bin/sh
for a do shift; case $a in -Cprofile-use=*) ;; *) set -- "$@" "$a" ;; esac; done
exec "$@"
"""

#: compiles with -Cprofile-generate where -Cprofile-use was asked: the binary is instrumented
SWAPPING = """#!/bin/sh
for a do shift; case $a in -Cprofile-use=*) set -- "$@" "-Cprofile-generate=/tmp/pgo-swapped" ;;
  *) set -- "$@" "$a" ;; esac; done
exec "$@"
"""

#: compiles a binary as asked through $RUSTC (which records it), then again without the profile behind its back
BEHIND = """#!/bin/sh
case " $* " in *" --crate-name hello_pgo "*) ;; *) exec "$@" ;; esac
"$@" || exit $?
shift
for a do shift; case $a in -Cprofile-use=*) ;; *) set -- "$@" "$a" ;; esac; done
exec rustc "$@"
"""


#: appends LLVM's switch of its stale-profile warnings to every compile with the profile
SILENCING = """#!/bin/sh
case " $* " in *" -Cprofile-use="*) exec "$@" -Cllvm-args=-no-pgo-warn-mismatch ;; esac
exec "$@"
"""

#: compiles every crate with gprof's mcount calls (a nightly option, on stable rustc through RUSTC_BOOTSTRAP)
MCOUNT = """#!/bin/sh
case " $* " in *" --crate-name "*) RUSTC_BOOTSTRAP=1 exec "$@" -Zinstrument-mcount ;; esac
exec "$@"
"""

#: drops the profile flags from every compile but the main crate's (multi's path dependencies get none)
DROPPING_BUT_MAIN = """#!/bin/sh
case " $* " in *" --crate-name multi_pgo "*) exec "$@" ;; esac
for a do shift; case $a in -Cprofile-use=*|-Cprofile-generate=*) ;; *) set -- "$@" "$a" ;; esac; done
exec "$@"
"""


def _script(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    pipeline = Pipeline(tmp_path_factory.mktemp("observed"), "hello")
    for stage in ("instrument", "train", "merge"):
        assert_ok(pipeline.nox(stage))
    return pipeline


def _forgotten(p: Pipeline, build: str) -> int:
    """How many compiles for the target the records of ``build`` hold, each of whose outputs is gone."""
    calls = [c for c in observed.compiles(observed.read_records(p.work / "observed" / build)) if c.target]
    assert all(observed.outputs(call) == [] for call in calls), [observed.outputs(call) for call in calls]
    return len(calls)


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def test_the_pipeline_observes_what_rustc_received(trained: Pipeline) -> None:
    text = assert_ok(trained.nox("optimise"))
    record = _report(trained)["optimise"]
    assert record["crates_with_profile"] == record["crates_compiled"] == 1  # hello is one crate, std-only
    assert "rustc received -Cprofile-use in 1 of the build's 1 crate compiles" in text
    for build, flag in (("instrument", "-Cprofile-generate="), ("optimise", "-Cprofile-use=")):
        records = observed.read_records(trained.work / "observed" / build)
        calls = observed.bin_compiles(
            observed.compiles(records), crate_info(trained.manifest, None, None, dict(os.environ))
        )
        assert calls and all(any(a.startswith(flag) for a in c.argv) for c in calls)
        # what each wrote, found as a refusal removes it (observed.forget): the binary and its dep-info
        assert all(len(observed.outputs(c)) >= 2 for c in calls), [observed.outputs(c) for c in calls]
        assert all(Path(r.compiler).is_absolute() for r in records)


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_a_wrapper_that_drops_the_profile_is_refused(trained: Pipeline) -> None:
    wrapper = _script(trained.root, "drop.sh", DROPPING)
    line = assert_refused(
        trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "rustc compiled hello_pgo in the optimised build without -Cprofile-use=",
        f"dropped by RUSTC_WRAPPER={wrapper}",
    )
    assert "Traceback" not in line
    assert not (trained.work / "optimised" / "hello-pgo").exists()
    assert "failed" in _report(trained)["optimise"]


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_a_cargo_config_rustc_wrapper_that_drops_the_profile_is_refused(trained: Pipeline) -> None:
    wrapper = _script(trained.root, "drop-config.sh", DROPPING)
    config = trained.crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[build]\nrustc-wrapper = "{wrapper}"\n')
    try:
        assert_refused(
            trained.nox("optimise"), "without -Cprofile-use=", f"dropped by build.rustc-wrapper={wrapper} ({config})"
        )
    finally:
        config.unlink()


@pytest.mark.refuses("observed-no-compile-of-the-binary")
def test_a_wrapper_that_never_runs_rustc_for_the_binary_is_refused(trained: Pipeline) -> None:
    # compiles the binary with the real rustc itself, never through $RUSTC: nothing observed of it
    wrapper = _script(trained.root, "bypass.sh", '#!/bin/sh\nshift\nexec rustc "$@"\n')
    assert_refused(
        trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "rustc never compiled hello-pgo in the optimised build",
        f"made by RUSTC_WRAPPER={wrapper}, not by rustc",
    )


@pytest.mark.refuses("optimised-binary-instrumented")
def test_an_instrumented_optimised_binary_is_refused_naming_its_sections(trained: Pipeline) -> None:
    wrapper = _script(trained.root, "swap.sh", SWAPPING)
    assert_refused(
        trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "the optimised binary",
        "is instrumented: sections __llvm_prf_cnts",
        "__llvm_prf_data",
        "profiling runtime symbols __llvm_profile_",
    )
    assert not (trained.work / "optimised" / "hello-pgo").exists()


@pytest.mark.refuses("optimised-binary-instrumented")
def test_a_stripped_instrumented_binary_is_refused_as_the_release_ships_it(trained: Pipeline, tmp_path: Path) -> None:
    """The release checks its PGO binary again as shipped (release.check_binaries): stripped by the release's own
    strip, an instrumented build keeps its ``__llvm_prf_*`` sections (allocated: strip cannot drop them), though its
    symbol table is gone; the check reads them. No session can reach it past optimise's check: the functions the
    release runs, on the training's instrumented hello."""
    instrumented = Path(_report(trained)["instrument"]["binary"])
    stripped = release.strip_binary(instrumented, tmp_path / "pgo" / "hello-pgo", clean_env(), tmp_path / "strip.log")
    assert (
        subprocess.run(["nm", str(stripped)], capture_output=True, text=True, check=False)
        .stderr.strip()
        .endswith("no symbols")
    )
    with pytest.raises(CheckFailed) as caught:
        elf.check_no_instrumentation(stripped, "the release's PGO binary")
    line = caught.value.line()
    assert line.startswith(f"the release's PGO binary {stripped} is instrumented: sections __llvm_prf_cnts"), line
    assert "__llvm_prf_data" in line and "__llvm_prf_names" in line, line


NIGHTLY = Path.home() / ".rustup" / "toolchains" / "nightly-x86_64-unknown-linux-gnu" / "bin" / "rustc"
STABLE = Path.home() / ".rustup" / "toolchains" / "1.95.0-x86_64-unknown-linux-gnu" / "bin" / "rustc"


@pytest.mark.refuses("optimised-binary-of-another-rustc")
@pytest.mark.skipif(not NIGHTLY.is_file(), reason="needs a nightly toolchain: rustup toolchain install nightly")
def test_a_binary_another_rustc_compiled_is_refused_by_its_comment(trained: Pipeline) -> None:
    # the wrapper runs another rustc in place of $RUSTC: nothing observed, the binary's .comment says it
    wrapper = _script(trained.root, "nightly.sh", f'#!/bin/sh\nshift\nexec {NIGHTLY} "$@"\n')
    assert_refused(
        trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "was compiled by rustc 1.97.0-nightly (its .comment), not the plan's rustc 1.95.0",
    )


@pytest.mark.refuses("observed-other-compiler")
@pytest.mark.skipif(not (NIGHTLY.is_file() and STABLE.is_file()), reason="needs rustc 1.95.0 and a nightly")
def test_an_observed_compile_by_another_compiler_than_the_plans_rustc_is_refused(trained: Pipeline) -> None:
    # the plan's RUSTC is 1.95.0's own; the wrapper points the shim at another compiler
    wrapper = _script(trained.root, "other.sh", f'#!/bin/sh\nRECIPES_REAL_RUSTC={NIGHTLY} exec "$@"\n')
    assert_refused(
        trained.nox("optimise", RUSTC=str(STABLE), RUSTC_WRAPPER=str(wrapper)),
        f"the optimised build ran the compiler {NIGHTLY}, not the plan's RUSTC={STABLE}",
    )
    assert _forgotten(trained, "optimise") == 1  # what the other compiler wrote: the next build compiles it again


@pytest.mark.refuses("pgo-binary-identical-to-plain")
def test_a_pgo_binary_identical_to_the_plain_build_is_refused(trained: Pipeline) -> None:
    assert_ok(trained.nox("plain"))
    wrapper = _script(trained.root, "behind.sh", BEHIND)
    assert_refused(
        trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "the PGO binary",
        "is byte for byte the plain build",
        "the profile changed nothing",
    )
    assert_ok(trained.nox("optimise"))  # the honest build differs from the plain one


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_a_release_with_a_dropping_wrapper_is_refused(tmp_path: Path) -> None:
    release = Release.new(tmp_path)
    wrapper = _script(tmp_path, "drop.sh", DROPPING)
    proc = run_nox("release", release.env(RUSTC_WRAPPER=str(wrapper)), [TAG])
    assert_refused(proc, "without -Cprofile-use=", f"dropped by RUSTC_WRAPPER={wrapper}")
    assert not release.dist.exists()


@pytest.mark.refuses("pgo-binary-identical-to-plain")
def test_a_release_whose_pgo_binary_is_its_plain_one_is_refused(tmp_path: Path) -> None:
    # the wrapper fools the shim (it compiles again behind it): optimise passes, the release's plain build tells
    release = Release.new(tmp_path)
    wrapper = _script(tmp_path, "behind.sh", BEHIND)
    proc = run_nox("release", release.env(RUSTC_WRAPPER=str(wrapper)), [TAG])
    assert_refused(proc, "the PGO binary", "is byte for byte the plain build", "the profile changed nothing")
    assert not release.dist.exists()


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_an_instrumented_build_whose_wrapper_drops_profile_generate_is_refused(tmp_path: Path) -> None:
    hello = Pipeline(tmp_path, "hello")
    wrapper = _script(tmp_path, "drop-generate.sh", DROPPING.replace("-Cprofile-use=", "-Cprofile-generate="))
    assert_refused(
        hello.nox("instrument", RUSTC_WRAPPER=str(wrapper)),
        "rustc compiled hello_pgo in the instrumented build without -Cprofile-generate=",
        f"dropped by RUSTC_WRAPPER={wrapper}",
    )


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_a_test_build_whose_wrapper_drops_the_profile_is_refused(tmp_path: Path) -> None:
    workload = tmp_path / "tested.toml"
    workload.write_text(TESTED_WORKLOAD)
    tested = Pipeline(tmp_path, "tested", workload=str(workload))
    assert_ok(tested.nox("pgo"))
    # bash: dash would drop CARGO_BIN_EXE_tested-pgo, which the harness needs, from the environment
    wrapper = _script(tmp_path, "drop.sh", DROPPING.replace("#!/bin/sh", "#!/bin/bash"))
    assert_refused(
        tested.nox("pgo-test", RUSTC_WRAPPER=str(wrapper)),
        "in the test build without -Cprofile-use=",
        f"dropped by RUSTC_WRAPPER={wrapper}",
    )
    records = observed.read_records(tested.work / "observed" / "test")
    assert any(call.codegen("profile-use") is None for call in observed.compiles(records))


def _stale(crate_dir: Path) -> tuple[Path, str]:
    """hello's collatz_steps edited after the training (its control flow: the profile's record of it is stale);
    the source file and its text before."""
    source = crate_dir / "src" / "main.rs"
    text = source.read_text()
    source.write_text(
        text.replace(
            "        steps += 1;\n",
            "        steps += 1;\n        if steps > 100_000 {\n            break;\n        }\n",
            1,
        )
    )
    assert source.read_text() != text
    return source, text


@pytest.mark.refuses("observed-profile-warnings-silenced")
def test_a_wrapper_that_silences_the_stale_profile_warnings_is_refused(trained: Pipeline) -> None:
    """Issue 48: a function edited after the training, and a wrapper that switches LLVM's warning of it off: the
    build said "0 stale" and passed. Without the wrapper the same tree is refused naming the function."""
    source, text = _stale(trained.crate_dir)
    try:
        assert_refused(trained.nox("optimise"), "stale-profile warnings (hash mismatch), first:", "collatz_steps")
        wrapper = _script(trained.root, "silence.sh", SILENCING)
        assert_refused(
            trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
            "rustc compiled hello_pgo in the optimised build with -Cllvm-args=-no-pgo-warn-mismatch, which silences "
            "LLVM's warnings of stale and unprofiled functions that the pipeline checks",
            f"RUSTC_WRAPPER={wrapper}",
        )
    finally:
        source.write_text(text)


@pytest.mark.refuses("rustflags-silence-profile-warnings")
@pytest.mark.parametrize(
    "where", ["CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "config"]
)
def test_rustflags_that_silence_the_profile_warnings_are_refused_before_building(trained: Pipeline, where: str) -> None:
    """Where docs/configuration.md tells users to put their flags, the cargo config's [build] rustflags, and
    CARGO_BUILD_RUSTFLAGS (both carried into the per-target variable): refused as the plan reads them, before the
    optimised build, and in pgo before the instrumented build."""
    config = trained.crate_dir / ".cargo" / "config.toml"
    flag = "-Cllvm-args=-no-pgo-warn-mismatch"
    extra = {} if where == "config" else {where: f"-Copt-level=3 {flag}"}
    if where == "config":
        config.parent.mkdir(exist_ok=True)  # an earlier test's
        config.write_text(f'[build]\nrustflags = ["{flag}"]\n')
    build_log = trained.work / "logs" / "optimise-build.log"
    before = build_log.stat().st_mtime_ns
    try:
        named = f"{config} [build] rustflags" if where == "config" else where
        words = f"{named} holds {flag}, which silences LLVM's warnings of stale and unprofiled functions"
        assert_refused(trained.nox("optimise", **extra), words)
        assert build_log.stat().st_mtime_ns == before
        other = trained.root / f"pgo-{where}"
        assert_refused(trained.nox("pgo", PGO_OUT=str(other), **extra), words)
        assert not (other / "logs" / "instrument-build.log").exists()
    finally:
        config.unlink(missing_ok=True)


@pytest.mark.refuses("observed-instrumentation-shipped")
def test_a_wrapper_that_adds_mcount_is_refused(trained: Pipeline) -> None:
    wrapper = _script(trained.root, "mcount.sh", MCOUNT)
    assert_refused(
        trained.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "rustc compiled hello_pgo in the optimised build with -Zinstrument-mcount: the binary would ship instrumented",
    )
    rejected = Path(_report(trained)["optimise"]["binary"])  # the failed build's binary, moved to rejected/
    assert rejected.parent.name == "rejected"
    assert "mcount" in subprocess.run(["nm", "-u", str(rejected)], capture_output=True, text=True, check=True).stdout
    assert not (trained.work / "optimised" / "hello-pgo").exists()


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    pipeline = Pipeline(tmp_path_factory.mktemp("observed-multi"), "multi")
    for stage in ("instrument", "train", "merge"):
        assert_ok(pipeline.nox(stage))
    return pipeline


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_a_wrapper_that_gives_the_profile_to_the_main_crate_alone_is_refused(multi: Pipeline) -> None:
    """Issue 48: the workspace's libraries, whose functions the profile holds records of, built without it passed
    ("rustc received -Cprofile-use in 1 of the build's 3 crate compiles")."""
    wrapper = _script(multi.root, "drop-but-main.sh", DROPPING_BUT_MAIN)
    line = assert_refused(
        multi.nox("optimise", RUSTC_WRAPPER=str(wrapper)),
        "in the optimised build without -Cprofile-use=",
        f"dropped by RUSTC_WRAPPER={wrapper}",
    )
    assert re.search(r"rustc compiled (numkit|textkit) in the optimised build", line), line
    assert _forgotten(multi, "optimise") == 3
    text = assert_ok(multi.nox("optimise"))
    assert "rustc received -Cprofile-use in 3 of the build's 3 crate compiles" in text


@pytest.mark.refuses("observed-profile-flag-dropped")
def test_an_instrumented_build_whose_libraries_get_no_profile_generate_is_refused(multi: Pipeline) -> None:
    """With -Cprofile-generate dropped for the libraries, the training never profiled their code, and pgo passed."""
    wrapper = _script(multi.root, "drop-generate-but-main.sh", DROPPING_BUT_MAIN)
    line = assert_refused(
        multi.nox("pgo", PGO_OUT=str(multi.root / "pgo-dropped"), RUSTC_WRAPPER=str(wrapper)),
        "in the instrumented build without -Cprofile-generate=",
        f"dropped by RUSTC_WRAPPER={wrapper}",
    )
    assert re.search(r"rustc compiled (numkit|textkit) in the instrumented build", line), line
