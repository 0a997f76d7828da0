"""A profile that is partial, foreign or ignored never passes (issue 9): each fault made to happen with real
cargo, rustc and llvm-profdata on the fixtures, and what is left behind checked."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from recipes.store import sha256_file
from tests.conftest import REPO, Pipeline, assert_ok, assert_refused, start_nox
from tests.faults import fill_up, small_tmpfs

pytestmark = pytest.mark.slow

TRIPLE = "x86_64-unknown-linux-gnu"


def _report(p: Pipeline) -> dict[str, Any]:
    data = json.loads((p.work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


def _trained(p: Pipeline) -> list[Path]:
    for stage in ("instrument", "train"):
        assert_ok(p.nox(stage))
    raws = sorted((p.work / "profraw").glob("*.profraw"))
    assert len(raws) == 11
    return raws


def _as_if_trained(p: Pipeline, raw: Path, data: bytes) -> None:
    """``raw`` becomes ``data`` and train's record says so: a training that itself wrote a bad file."""
    raw.write_bytes(data)
    full = _report(p)
    for entry in full["train"]["profraw"]:
        if entry["name"] == raw.name:
            entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    (p.work / "report.json").write_text(json.dumps(full))


def _built(p: Pipeline) -> Path:
    return p.crate_dir / "target" / TRIPLE / "release" / "hello-pgo"


def _no_temp_files(*roots: Path) -> None:
    left = [path for root in roots for path in root.rglob("*.tmp")]
    assert not left, left


@pytest.mark.refuses("llvm-profdata-cannot-read-profraw", "pgo-drop-bad-profraw-1-none-left")
def test_corrupt_raw_profile_refused_by_name_or_dropped_when_asked(hello: Pipeline) -> None:
    raws = _trained(hello)
    _as_if_trained(hello, raws[0], raws[1].read_bytes()[:300])
    line = assert_refused(hello.nox("merge"), f"cannot read {raws[0]}", "file header is corrupt")
    assert "PGO_DROP_BAD_PROFRAW=1" in line
    assert not (hello.work / "hello-pgo.profdata").exists()
    assert "failed" in _report(hello)["merge"]
    _no_temp_files(hello.work)

    text = assert_ok(hello.nox("merge", PGO_DROP_BAD_PROFRAW="1"))
    assert f"dropped {raws[0]}" in text
    merged = _report(hello)["merge"]
    assert merged["profraw_merged"] == 10
    assert list(merged["profraw_dropped"]) == [str(raws[0])]
    assert "file header is corrupt" in merged["profraw_dropped"][str(raws[0])]

    for raw in raws:
        _as_if_trained(hello, raw, raws[0].read_bytes()[:300] or b"x" * 300)
    assert_refused(hello.nox("merge", PGO_DROP_BAD_PROFRAW="1"), "could merge none of the 11 raw profiles")
    assert not (hello.work / "hello-pgo.profdata").exists()


@pytest.mark.refuses(
    "report-json-names-another-program-instrumented-build", "instrumented-binary-changed-since-instrument-built-sha256"
)
def test_train_runs_only_the_instrumented_build_it_recorded(hello: Pipeline) -> None:
    """train runs the binary instrument built, unchanged (its recorded sha256), at the instrumented build's path:
    (a) the binary overwritten by another executable, (b) report.json edited to name /bin/true (with its sha256)."""
    assert_ok(hello.nox("instrument"))
    instrumented = Path(_report(hello)["instrument"]["binary"])
    assert instrumented == hello.work / "generate-target" / TRIPLE / "release" / "hello-pgo"
    original = instrumented.read_bytes()

    shutil.copy("/bin/true", instrumented)  # another executable, in its place
    line = assert_refused(hello.nox("train"), f"the instrumented binary {instrumented} changed since instrument built")
    assert "run `nox -s instrument` again" in line
    assert not (hello.work / "profraw").exists() or not list((hello.work / "profraw").glob("*.profraw"))
    instrumented.write_bytes(original)

    full = _report(hello)
    full["instrument"].update(binary="/bin/true", binary_sha256=sha256_file(Path("/bin/true")))
    (hello.work / "report.json").write_text(json.dumps(full))
    line = assert_refused(
        hello.nox("train"), f"report.json names /bin/true as the instrumented binary, not {instrumented}"
    )
    assert "train runs only the instrumented build of this work dir" in line
    assert "failed" in _report(hello)["train"]
    assert not (hello.work / "profraw").exists() or not list((hello.work / "profraw").glob("*.profraw"))


@pytest.mark.refuses(
    "profraw-last-training-did-not-write", "profraw-training-wrote-gone", "profraw-changed-since-training-wrote"
)
def test_raw_profile_of_another_binary_refused(hello: Pipeline, tmp_path: Path) -> None:
    raws = _trained(hello)
    other = Pipeline(tmp_path / "other", "withdep")
    for stage in ("instrument", "train"):
        assert_ok(other.nox(stage))
    foreign = next((other.work / "profraw").glob("*.profraw"))
    planted = hello.work / "profraw" / foreign.name
    planted.write_bytes(foreign.read_bytes())
    assert_refused(hello.nox("merge"), f"{planted} was not written by the last training", "remove it")
    # nor may it stand in for one of the training's own files
    planted.unlink()
    raws[3].write_bytes(foreign.read_bytes())
    assert_refused(hello.nox("merge"), f"{raws[3]} changed since the training wrote it")
    raws[4].unlink()
    assert_refused(hello.nox("merge"), f"{raws[4]}, written by the last training, is gone")


@pytest.mark.refuses("profraw-empty", "merged-profile-pgo-profdata-not-ir-level")
def test_empty_raw_profiles_refused_even_with_no_floor(hello: Pipeline) -> None:
    raws = _trained(hello)
    for raw in raws:
        _as_if_trained(hello, raw, b"")
    assert_refused(hello.nox("merge", PGO_MIN_FUNCTIONS="0"), "is empty", "run `nox -s train` again")
    # merged anyway by hand, they give a profile LLVM would ignore: refused before the build
    empty = hello.root / "empty.profdata"
    subprocess.run(["llvm-profdata-22", "merge", "-o", empty, *raws], check=True, capture_output=True)
    line = assert_refused(
        hello.nox("optimise", PGO_PROFDATA=str(empty), PGO_MIN_FUNCTIONS="0"), "is not an IR-level instrumentation"
    )
    assert f"PGO_PROFDATA {empty}" in line
    assert not (hello.work / "logs" / "optimise-build.log").exists()
    assert not list(hello.store.glob("*.profdata")) if hello.store.exists() else True


@pytest.mark.refuses("merged-profile-pgo-profdata-not-one-llvm")
def test_a_text_file_as_profile_refused_before_the_build(hello: Pipeline) -> None:
    text = hello.root / "notes.profdata"
    text.write_text("this is not a profile\n")
    assert_refused(hello.nox("optimise", PGO_PROFDATA=str(text)), f"PGO_PROFDATA {text} is not a profile LLVM 22")
    assert not (hello.work / "logs" / "optimise-build.log").exists()
    assert not _built(hello).exists()
    assert "failed" in _report(hello)["optimise"]


@pytest.mark.refuses("profile-covers-none-main-crate-functions")
def test_a_profile_of_another_crate_refused(hello: Pipeline, tmp_path: Path) -> None:
    other = Pipeline(tmp_path / "other", "withdep")
    for stage in ("instrument", "train", "merge"):
        assert_ok(other.nox(stage))
    foreign = str(other.work / "withdep-pgo.profdata")
    for extra in ({}, {"PGO_MAX_MISSING": "100000"}):
        assert_refused(hello.nox("optimise", PGO_PROFDATA=foreign, **extra), "covers none of hello-pgo's functions")
        optimised = _report(hello)["optimise"]
        assert optimised["main_crate_functions_with_profile"] == 0
        assert optimised["main_crate_functions_without_profile"] > 10
        assert not _built(hello).exists()
        assert not (hello.work / "optimised" / "hello-pgo").exists()
        assert (hello.work / "rejected" / "hello-pgo").is_file()


def _musl_installed() -> bool:
    done = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=False)
    return "x86_64-unknown-linux-musl" in done.stdout


@pytest.mark.refuses("profile-covers-none-main-crate-functions")
@pytest.mark.skipif(not _musl_installed(), reason="needs `rustup target add x86_64-unknown-linux-musl` (.ci/run)")
def test_a_profile_of_another_target_refused(hello: Pipeline, tmp_path: Path) -> None:
    """A musl profile for the gnu build: every name differs by the crate's metadata hash. Used as it is
    (PGO_CARRY=0) it covers none of the crate; carried forward, the same code's records are re-keyed."""
    musl = Pipeline(tmp_path / "musl", "hello")
    for stage in ("instrument", "train", "merge"):
        assert_ok(musl.nox(stage, PGO_TARGET="x86_64-unknown-linux-musl"))
    profile = str(musl.work / "hello-pgo.profdata")
    assert_refused(
        hello.nox("optimise", PGO_PROFDATA=profile, PGO_MAX_MISSING="100000", PGO_CARRY="0"),
        "covers none of hello-pgo's functions",
    )
    # the same crate's code, another target's metadata hash in every name: carried forward (PGO_CARRY), and said
    text = assert_ok(hello.nox("optimise", PGO_PROFDATA=profile))
    assert "optimise: carry: the given profile is of another version of the crate" in text
    assert "carried     96.99 % of the given profile's count survived" in text


#: STRESS_ROUNDS=10 runs the four pipelines ten times over (CONTRIBUTING: the stress run)
ROUNDS = int(os.environ.get("STRESS_ROUNDS", "1"))


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_four_pipelines_on_one_crate_each_report_their_own_checked_binary(tmp_path: Path, round_: int) -> None:  # noqa: ARG001  (a repetition)
    """Separate work dirs, other profiles (other training scales), one crate and one store, all at once."""
    first = Pipeline(tmp_path, "hello")
    scales = ("1", "2", "3", "5")
    env = [{**first.env(PGO_TRAIN_SCALE=scale), "PGO_OUT": str(tmp_path / f"work-{scale}")} for scale in scales]
    procs = [start_nox("pgo", e) for e in env]
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    profiles = set()
    for proc, text, scale in zip(procs, outputs, scales, strict=True):
        assert proc.returncode == 0, text[-3000:]
        optimised = json.loads((tmp_path / f"work-{scale}" / "report.json").read_text())["optimise"]
        binary = Path(optimised["binary"])
        assert binary == tmp_path / f"work-{scale}" / "optimised" / "hello-pgo"
        assert sha256_file(binary) == optimised["binary_sha256"]
        profiles.add(optimised["profile_sha256"])
        assert (
            f"-Cprofile-use={optimised['store_path']}"
            in (binary.parent.parent / "logs" / "optimise-build.log").read_text()
        )
    assert len(profiles) == len(scales)


@pytest.mark.refuses("stale-profile-warnings")
def test_work_dir_on_another_filesystem(hello: Pipeline, tmp_path: Path) -> None:
    """PGO_OUT on its own filesystem: the checked copy is made there, and a rejected binary moves there
    (a rename would fail with EXDEV) and leaves the target dir."""
    with small_tmpfs(tmp_path / "other-fs", size="64m") as mnt:
        work = mnt / "work"
        assert_ok(hello.nox("pgo", PGO_OUT=str(work)))
        assert sha256_file(work / "optimised" / "hello-pgo") == sha256_file(_built(hello))
        source = hello.crate_dir / "src" / "main.rs"
        source.write_text(source.read_text().replace("steps += 1;", "steps += 1;\n        if steps > 9 { break; }"))
        assert_refused(hello.nox("optimise", PGO_OUT=str(work)), "stale-profile warnings")
        assert (work / "rejected" / "hello-pgo").is_file()
        assert not _built(hello).exists()
        assert not (work / "optimised" / "hello-pgo").exists()
        _no_temp_files(work)


@pytest.mark.refuses("stage-cannot-write-work-dir-full-disk")
def test_full_work_dir_is_one_line_and_leaves_nothing_half_written(hello: Pipeline, tmp_path: Path) -> None:
    for stage in ("instrument", "train", "merge"):
        assert_ok(hello.nox(stage))
    with small_tmpfs(tmp_path / "full", size="1m") as mnt:
        work = mnt / "work"
        work.mkdir()
        # the records and the merged profile of hello's work dir, as this work dir's own (optimise uses only the
        # merged profile of its own work dir)
        records = json.loads((hello.work / "report.json").read_text())
        profile = work / Path(records["merge"]["profile"]).name
        shutil.copy(records["merge"]["profile"], profile)
        records["merge"]["profile"] = str(profile)
        (work / "report.json").write_text(json.dumps(records))
        fill_up(mnt, leave=64 * 1024)
        line = assert_refused(hello.nox("optimise", PGO_OUT=str(work)), "No space left on device")
        assert "free space" in line
        _no_temp_files(work)
        assert not (work / "optimised" / "hello-pgo").exists()
        assert not _built(hello).exists(), "a binary that could not be checked and copied stays in the target dir"
        assert "failed" in json.loads((work / "report.json").read_text())["optimise"]


@pytest.mark.refuses("stage-before-failed")
def test_a_failed_stage_leaves_no_older_success(hello: Pipeline) -> None:
    assert_ok(hello.nox("pgo"))
    extra = hello.work / "profraw" / "extra.profraw"
    extra.write_bytes(b"x")
    assert_refused(hello.nox("merge"), "was not written by the last training")
    full = _report(hello)
    assert "failed" in full["merge"]
    assert "optimise" not in full
    assert not (hello.work / "optimised" / "hello-pgo").exists()  # nor its checked binary, which no record names
    assert_refused(hello.nox("optimise"), "the last merge failed")


def test_an_interrupted_stage_leaves_a_failed_record(hello: Pipeline, tmp_path: Path) -> None:
    """The optimised build is killed with the whole session while rustc compiles the crate."""
    assert_ok(hello.nox("pgo"))
    wrapper = tmp_path / "slow-rustc"
    wrapper.write_text('#!/bin/sh\ncase "$*" in *"--crate-name hello_pgo"*) sleep 60;; esac\nexec "$@"\n')
    wrapper.chmod(0o755)
    proc = start_nox(
        "optimise",
        hello.env(RUSTC_WRAPPER=str(wrapper)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (hello.work / "logs" / "optimise-build.log").is_file() and "running" in _report(hello).get(
                "optimise", {}
            ):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the optimised build did not start")
        time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    optimised = _report(hello)["optimise"]
    assert "did not finish" in optimised["failed"]
    assert "binary" not in optimised
    assert_refused(hello.nox("pgo-test"), "the last optimise failed")


def test_a_failed_or_interrupted_optimise_leaves_no_checked_copy_behind(hello: Pipeline, tmp_path: Path) -> None:
    """Optimise's record makes way for a failed one when it starts: the checked copy in <work>/optimised/ goes
    with it, whether the stage then fails before its build (a PGO_PROFDATA that is no file) or is killed in it."""
    assert_ok(hello.nox("pgo"))
    copy = hello.work / "optimised" / "hello-pgo"
    assert copy.is_file()
    build_log = (hello.work / "logs" / "optimise-build.log").read_text()
    missing = hello.root / "nowhere.profdata"
    line = assert_refused(hello.nox("optimise", PGO_PROFDATA=str(missing)), f"PGO_PROFDATA={missing}: no such file")
    # nox adds "(took N seconds)" to a session that took a second or more (a loaded machine)
    assert re.sub(r" \(took [^)]*\)\.$", ".", line).endswith("(give the path of a .profdata)."), line
    assert not copy.exists()
    assert (hello.work / "logs" / "optimise-build.log").read_text() == build_log  # it failed before its build
    assert (
        _report(hello)["optimise"]["failed"] == f"PGO_PROFDATA={missing}: no such file (give the path of a .profdata)"
    )

    assert_ok(hello.nox("optimise"))
    assert copy.is_file()
    wrapper = tmp_path / "slow-rustc"
    compiling = tmp_path / "compiling"  # the wrapper's mark: rustc is on the main crate
    wrapper.write_text(
        f'#!/bin/sh\ncase "$*" in *"--crate-name hello_pgo"*) touch {compiling}; sleep 60;; esac\nexec "$@"\n'
    )
    wrapper.chmod(0o755)
    proc = start_nox(
        "optimise",
        hello.env(RUSTC_WRAPPER=str(wrapper)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if "running" in _report(hello).get("optimise", {}) and compiling.exists():
                break
            time.sleep(0.2)
        else:
            pytest.fail("the optimised build did not start")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "did not finish" in _report(hello)["optimise"]["failed"]
    assert not copy.exists()


@pytest.mark.refuses("merged-profile-pgo-profdata-has-no-functions")
def test_a_profile_without_functions_refused_before_the_build(hello: Pipeline) -> None:
    """A valid IR-level profile of no function: what llvm-profdata merges from a text profile with no records."""
    text = hello.root / "empty.proftext"
    text.write_text(":ir\n")
    empty = hello.root / "nothing.profdata"
    subprocess.run(["llvm-profdata-22", "merge", "-o", empty, text], check=True, capture_output=True)
    line = assert_refused(hello.nox("optimise", PGO_PROFDATA=str(empty)), f"PGO_PROFDATA {empty} has no functions")
    assert "train again" in line
    assert not (hello.work / "logs" / "optimise-build.log").exists()
    assert "failed" in _report(hello)["optimise"]
    # nor is there a profile build for the test suite to be compiled like, and pgo-test says why
    line = assert_refused(hello.nox("pgo-test"), "test needs the result of optimise, and the last optimise failed")
    assert f"PGO_PROFDATA {empty} has no functions" in line
    assert not (hello.work / "test-target").exists()


@pytest.mark.refuses("pgo-profdata-no-such-file")
def test_a_given_profile_that_is_no_file_refused(hello: Pipeline) -> None:
    missing = hello.root / "nowhere.profdata"
    assert_refused(hello.nox("optimise", PGO_PROFDATA=str(missing)), f"PGO_PROFDATA={missing}: no such file")
    assert not (hello.work / "logs" / "optimise-build.log").exists()


@pytest.mark.refuses(
    "instrumented-binary-gone",
    "merged-profile-gone",
    "merged-profile-changed-since-merge-wrote",
    "optimised-binary-does-not-get-through-training",
)
def test_merged_profile_changed_or_gone_then_a_workload_the_optimised_binary_fails(tmp_path: Path) -> None:
    """One training of hello: the merged profile changed, then gone, is refused before the build; restored, the
    build is made and verified (PGO_VERIFY=1) against the workload file, which gained a phase after the training
    (its file edited): the optimised binary fails it, and is moved out of the way. Last, the instrumented binary
    gone: train is refused."""
    workload = tmp_path / "hello.toml"
    shutil.copy(REPO / "profiles" / "hello.toml", workload)
    p = Pipeline(tmp_path, "hello", workload=str(workload))
    _trained(p)
    assert_ok(p.nox("merge"))
    merged = Path(_report(p)["merge"]["profile"])
    data = merged.read_bytes()
    merged.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    assert_refused(p.nox("optimise"), f"{merged} changed since merge wrote it", "run `nox -s merge` again")
    merged.unlink()
    assert_refused(p.nox("optimise"), f"the merged profile {merged} is gone", "run `nox -s merge` again")
    assert not (p.work / "logs" / "optimise-build.log").exists()
    merged.write_bytes(data)

    text = workload.read_text()
    failing = '[[instance.phase]]\nname = "fail"\nkind = "command"\nargs = ["fail"]\nruns = 1\n\n'
    workload.write_text(text.replace("# Bench scenarios", failing + "# Bench scenarios", 1))
    assert_refused(p.nox("optimise", PGO_VERIFY="1"), "cli/fail", "exited with exit code 3, expected 0")
    assert (p.work / "logs" / "optimise-build.log").is_file()  # built and checked, then verified
    assert not _built(p).exists()
    assert not (p.work / "optimised" / "hello-pgo").exists()
    assert (p.work / "rejected" / "hello-pgo").is_file()
    assert "cli/fail" in _report(p)["optimise"]["failed"]

    instrumented = Path(_report(p)["instrument"]["binary"])
    instrumented.unlink()
    assert_refused(p.nox("train"), f"the instrumented binary {instrumented} is gone", "run `nox -s instrument` again")


#: llvm-profdata that, for a merge, writes half its output and waits to be killed (the version query passes on)
HALF_WRITING = """#!/bin/sh
out=""; prev=""
for arg; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done
if [ -n "$out" ]; then echo half > "$out"; sleep 120; fi
exec llvm-profdata-22 "$@"
"""


def test_a_killed_merges_half_written_profile_is_removed_by_the_next_session(hello: Pipeline, tmp_path: Path) -> None:
    """merge SIGKILLed while llvm-profdata writes: its .<bin>.profdata.<pid>.tmp stayed in the work dir for good."""
    assert_ok(hello.nox("instrument"))
    assert_ok(hello.nox("train"))
    tool = tmp_path / "llvm-profdata"
    tool.write_text(HALF_WRITING)
    tool.chmod(0o755)
    proc = start_nox(
        "merge",
        hello.env(PGO_LLVM_PROFDATA=str(tool)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (half := sorted(hello.work.rglob(".*.tmp"))) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert half, "the merge wrote nothing"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert all(path.exists() for path in half)
    text = assert_ok(hello.nox("merge"))
    assert "work dir: removed what a killed run left half-written: " in text
    assert str(half[0].relative_to(hello.work)) in text
    assert not any(path.exists() for path in half)
