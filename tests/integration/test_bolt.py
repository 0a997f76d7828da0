"""The bolt stage on the hello fixture with real cargo, llvm-bolt-22 and merge-fdata-22: the whole stage, the same
binary again from the same profile, and every refusal made to happen.

One ``PGO_BOLT=1 nox -s pgo`` is shared by the module (``bolted``); a test that runs the bolt stage again gets a
work dir of its own holding only that run's report.json (the stage reads the optimised binary it names, never
writes it) and a profile store of its own."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import CheckFailed, TrainingFailed
from recipes.llvm import boltlib as bolt
from recipes.release.reproducible import sha256_bytes, tar_member
from recipes.store import sha256_file
from tests.conftest import REPO, Pipeline, assert_ok, assert_refused, run_nox, train_workload, written_records
from tests.integration.test_release import BASE, TAG, Release, make_repo

pytestmark = pytest.mark.slow


def _report(work: Path) -> Mapping[str, Any]:
    return written_records(work)


@dataclass(frozen=True)
class Bolted:
    pipeline: Pipeline
    output: str
    report: Mapping[str, Any]

    def again(self, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        """``nox -s bolt`` in a new work dir and store that start from this run's optimise stage."""
        work = tmp_path / "again"
        work.mkdir(exist_ok=True)
        shutil.copy(self.pipeline.work / "report.json", work / "report.json")
        env = self.pipeline.env(PGO_OUT=str(work), PGO_PROFILE_STORE=str(tmp_path / "store-again"), **extra)
        return run_nox("bolt", env)


@pytest.fixture(scope="module")
def bolted(tmp_path_factory: pytest.TempPathFactory) -> Bolted:
    pipeline = Pipeline(tmp_path_factory.mktemp("bolt"), "hello")
    text = assert_ok(pipeline.nox("pgo", PGO_BOLT="1"))
    return Bolted(pipeline, text, _report(pipeline.work))


def _given(bolted: Bolted, dest: Path, *, record: bool = True) -> Path:
    """The shared run's BOLT profile copied to ``dest`` (with the record of its training beside it, as the stage
    wrote it beside the store's copy), to be given as PGO_BOLT_PROFILE."""
    stored = Path(bolted.report["bolt"]["store_path"])
    shutil.copy(stored, dest)
    if record:
        shutil.copy(bolt.trained_on_path(stored), bolt.trained_on_path(dest))
    return dest


def test_pgo_with_bolt(bolted: Bolted) -> None:
    report, work = bolted.report, bolted.pipeline.work
    assert set(report) == {"instrument", "train", "merge", "optimise", "bolt"}
    optimised = report["optimise"]
    assert optimised["emit_relocs"] is True
    log = (work / "logs" / "optimise-build.log").read_text()
    main_line = next(line for line in log.splitlines() if "--crate-name hello_pgo" in line)
    assert "-Cprofile-use=" in main_line and main_line.endswith("-Clink-arg=-Wl,--emit-relocs`")
    result = report["bolt"]
    # BOLT's input is the PGO binary itself, with its relocations
    assert result["input"] == optimised["binary"] and result["input_sha256"] == optimised["binary_sha256"]
    assert result["relocations"][".rela.text"] > 1000
    # the BOLT profile: one .fdata per process of the training (11 runs), merged, content-addressed in the store
    assert result["train"]["fdata_files"] == 11 == len(list((work / "bolt" / "fdata").glob("prof.*.fdata")))
    store_path = Path(result["store_path"])
    assert store_path.parent == bolted.pipeline.store
    assert store_path.name == sha256_file(store_path) + ".fdata" == result["profile_sha256"] + ".fdata"
    assert result["profile_branches"] > 100 and result["profile_main_crate_functions"] >= 4
    assert 0 < result["functions_with_profile"] < result["total_functions"]
    assert result["stale_profile_functions"] == 0
    # the record of the training: the profile, the binary it was recorded on, the BOLT-instrumented binary
    assert result["profile_trained_on"] == result["input_sha256"]
    for profile in (store_path, work / "bolt" / "hello-pgo.fdata"):
        recorded = json.loads(bolt.trained_on_path(profile).read_text())
        assert recorded == {
            "profile_sha256": result["profile_sha256"],
            "input_sha256": result["input_sha256"],
            "instrumented_sha256": result["bolt_instrumented_sha256"],
        }
    assert result["bolt_instrumented_sha256"] == sha256_file(work / "bolt" / "hello-pgo.inst")
    before, after = result["dyno_stats"]["before"], result["dyno_stats"]["after"]
    assert before["executed instructions"] > 0 and after["executed instructions"] > 0
    assert result["bolt_args"] == list(bolt.OPT_DIST_ARGS)
    assert result["llvm_bolt_version"].startswith("22.")
    # the checked copy, what llvm-bolt wrote, replayed the workload
    binary = Path(result["binary"])
    assert binary == work / "bolted" / "hello-pgo"
    assert sha256_file(binary) == result["binary_sha256"]
    assert result["verify"]["requests"] == report["train"]["requests"] == 11
    assert bolt.is_bolted(binary) and not bolt.is_bolted(Path(optimised["binary"]))
    ran = subprocess.run([binary, "primes", "100"], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "primes: 25"
    assert not (work / "bolt" / "hello-pgo.bolt").exists()  # nothing but the checked copy stays
    assert "bolt " in bolted.output and "dyno-stats" in bolted.output


def test_same_profile_gives_the_same_binary(bolted: Bolted, tmp_path: Path) -> None:
    """llvm-bolt writes its command line into the binary; the stage gives it the same one for the same profile."""
    profile = _given(bolted, tmp_path / "given.fdata")
    assert_ok(bolted.again(tmp_path, PGO_BOLT_PROFILE=str(profile)))
    again = _report(tmp_path / "again")["bolt"]
    assert again["trained_here"] is False
    assert again["profile_sha256"] == bolted.report["bolt"]["profile_sha256"]
    assert again["store_path"] != bolted.report["bolt"]["store_path"]  # another store: another path on the note
    note = subprocess.run(["readelf", "-n", again["binary"]], capture_output=True, text=True, check=True).stdout
    assert f"-data={again['store_path']}" in note and "hello-pgo -o hello-pgo.bolt" in note
    third = tmp_path / "third"
    third.mkdir()
    shutil.copy(tmp_path / "again" / "report.json", third / "report.json")
    shutil.copy(bolted.pipeline.work / "report.json", third / "report.json")
    env = bolted.pipeline.env(
        PGO_OUT=str(third), PGO_PROFILE_STORE=str(tmp_path / "store-again"), PGO_BOLT_PROFILE=str(profile)
    )
    assert_ok(run_nox("bolt", env))
    assert _report(third)["bolt"]["binary_sha256"] == again["binary_sha256"]


def test_the_merged_profile_of_an_earlier_run_given_again(bolted: Bolted, tmp_path: Path) -> None:
    """PGO_BOLT_PROFILE may name the .fdata the stage merged in this work dir: it is not cleared before use."""
    merged = tmp_path / "again" / "bolt" / "hello-pgo.fdata"
    merged.parent.mkdir(parents=True)
    earlier = bolted.pipeline.work / "bolt" / "hello-pgo.fdata"  # with the record of its training beside it
    for path in (earlier, bolt.trained_on_path(earlier)):
        shutil.copy(path, merged.parent / path.name)
    assert_ok(bolted.again(tmp_path, PGO_BOLT_PROFILE=str(merged)))
    assert _report(tmp_path / "again")["bolt"]["profile_sha256"] == bolted.report["bolt"]["profile_sha256"]


@pytest.mark.refuses(
    "bolt-input-has-no-rela-text", "optimised-binary-gone", "optimised-binary-changed-since-optimise-checked"
)
def test_build_without_relocations_refused(hello: Pipeline) -> None:
    assert_ok(hello.nox("pgo"))
    assert _report(hello.work)["optimise"]["emit_relocs"] is False
    assert_refused(hello.nox("bolt"), "has no relocations of its code (.rela.text)", "PGO_BOLT=1")
    assert _report(hello.work)["bolt"]["failed"]
    # the checked copy optimise left, changed and then gone: refused before llvm-bolt looks at it
    optimised = Path(_report(hello.work)["optimise"]["binary"])
    optimised.write_bytes(optimised.read_bytes() + b"\0")
    assert_refused(hello.nox("bolt"), f"{optimised} changed since optimise checked it", "run `nox -s optimise` again")
    optimised.unlink()
    assert_refused(hello.nox("bolt"), f"the optimised binary {optimised} is gone", "run `nox -s optimise` again")


@pytest.mark.refuses("cargo-profile-strips-binary")
def test_release_profile_that_strips_refused(hello: Pipeline) -> None:
    """A stripped input: a cargo profile with strip = true cannot be linked with --emit-relocs (rust-lld refuses)."""
    proc = hello.nox("pgo", PGO_BOLT="1", CARGO_PROFILE_RELEASE_STRIP="symbols")
    assert_refused(proc, "the release profile strips the binary", "CARGO_PROFILE_RELEASE_STRIP=false")


@pytest.mark.refuses("llvm-bolt-another-llvm-major-pgo-bolt")
def test_llvm_bolt_of_another_major_refused_before_anything_is_built(hello: Pipeline, tmp_path: Path) -> None:
    """No llvm-bolt of another major than 22 is installable here: a script that prints LLVM 21's version stands in
    for one, for this refusal only (it is never run as llvm-bolt)."""
    fake = tmp_path / "llvm-bolt-21"
    fake.write_text("#!/bin/sh\necho 'Debian LLVM version 21.1.8'\n")
    fake.chmod(0o755)
    assert_refused(hello.nox("pgo", PGO_BOLT="1", PGO_LLVM_BOLT=str(fake)), "is LLVM 21.1.8 but rustc", "bolt-22")
    assert not (hello.work / "generate-target").exists()


@pytest.mark.refuses("pgo-bolt-profile-no-such-file")
def test_a_bolt_profile_that_is_no_file_refused(bolted: Bolted, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.fdata"
    assert_refused(bolted.again(tmp_path, PGO_BOLT_PROFILE=str(missing)), f"PGO_BOLT_PROFILE={missing}: no such file")
    assert not (tmp_path / "again" / "bolted" / "hello-pgo").exists()


@pytest.mark.refuses("bolt-profile-records-no-executed-branch")
def test_empty_bolt_profile_refused(bolted: Bolted, tmp_path: Path) -> None:
    empty = tmp_path / "empty.fdata"
    empty.write_text("")
    assert_refused(bolted.again(tmp_path, PGO_BOLT_PROFILE=str(empty)), "is empty: it records no executed branch")
    assert not (tmp_path / "again" / "bolted" / "hello-pgo").exists()


@pytest.mark.refuses("bolt-profile-names-none-main-crate-functions")
def test_bolt_profile_of_another_binary_refused(bolted: Bolted, tmp_path: Path) -> None:
    """A profile whose functions are all another crate's (here: the standard library's only)."""
    profile = Path(bolted.report["bolt"]["store_path"]).read_text().splitlines()
    foreign = tmp_path / "foreign.fdata"
    foreign.write_text("\n".join(line for line in profile if "hello_pgo" not in line) + "\n")
    assert_refused(bolted.again(tmp_path, PGO_BOLT_PROFILE=str(foreign)), "names none of hello-pgo's functions")


@pytest.mark.refuses("given-bolt-profile-has-no-record-profile")
def test_bolt_profile_without_a_record_of_its_training_refused(bolted: Bolted, tmp_path: Path) -> None:
    """The very profile of this binary, but alone: nothing says which binary it was recorded on."""
    profile = _given(bolted, tmp_path / "given.fdata", record=False)
    proc = bolted.again(tmp_path, PGO_BOLT_PROFILE=str(profile))
    line = assert_refused(proc, f"the BOLT profile {profile} has no record of the binary it was trained on")
    assert "given.fdata.trained-on" in line and "nox -s bolt without PGO_BOLT_PROFILE" in line
    assert not (tmp_path / "again" / "bolted" / "hello-pgo").exists()
    # a record of other content (the .fdata edited after its training) is no record of it
    shutil.copy(bolt.trained_on_path(Path(bolted.report["bolt"]["store_path"])), bolt.trained_on_path(profile))
    profile.write_text(profile.read_text() + profile.read_text().splitlines()[0] + "\n")
    proc = bolted.again(tmp_path, PGO_BOLT_PROFILE=str(profile))
    assert_refused(proc, f"the BOLT profile {profile} has no record of the binary it was trained on")


@pytest.mark.refuses("given-bolt-profile-recorded-another-binary-another")
def test_bolt_profile_of_another_build_of_the_same_crate_refused(bolted: Bolted, tmp_path: Path) -> None:
    """Another build of hello (a source changed: a static added) from the same PGO profile, linked for BOLT: the
    shared run's BOLT profile names the same functions, and llvm-bolt applies it without a stale function; its
    record says it was recorded on the shared run's binary, so it is refused."""
    other = Pipeline(tmp_path / "other", "hello")
    main = other.crate_dir / "src" / "main.rs"
    main.write_text(main.read_text() + "\n#[used]\nstatic LAYOUT: [u8; 4096] = [1; 4096];\n")
    merged = bolted.report["merge"]["profile"]
    assert_ok(other.nox("optimise", PGO_BOLT="1", PGO_PROFDATA=merged))
    optimised = _report(other.work)["optimise"]
    assert optimised["binary_sha256"] != bolted.report["optimise"]["binary_sha256"]
    given = Path(bolted.report["bolt"]["store_path"])  # its record beside it, in the shared run's store
    # what the check is for: llvm-bolt itself takes this profile for the other build, finding nothing stale
    log = tmp_path / "direct.log"
    direct = subprocess.run(
        ["llvm-bolt-22", optimised["binary"], "-o", str(tmp_path / "direct.bolt"), f"-data={given}"],
        capture_output=True,
        text=True,
        check=True,
    )
    log.write_text(direct.stdout + direct.stderr)
    summary = bolt.parse_bolt_log(log.read_text())
    assert summary.functions_with_profile > 0 and summary.stale_functions == 0
    proc = other.nox("bolt", PGO_BOLT_PROFILE=str(given))
    line = assert_refused(proc, f"the BOLT profile {given} was recorded on another binary")
    assert f"(sha256 {bolted.report['optimise']['binary_sha256'][:16]}), not on {optimised['binary']}" in line
    assert "it is a profile of another build of this crate" in line
    assert not (other.work / "bolted" / "hello-pgo").exists()
    assert not (other.store / given.name).exists()  # refused before it went into the store


@pytest.mark.refuses("store-file-not-profile-name-says-before")
def test_tampered_stored_bolt_profile_refused(bolted: Bolted, tmp_path: Path) -> None:
    profile = _given(bolted, tmp_path / "given.fdata")
    store = tmp_path / "store-again"
    store.mkdir(mode=0o700)
    stored = store / f"{sha256_file(profile)}.fdata"
    lines = profile.read_text().splitlines(keepends=True)
    stored.write_text("".join(lines[:-1]) + lines[-1].rsplit(" ", 1)[0] + " 1000000\n")  # one count changed
    stored.chmod(0o600)
    proc = bolted.again(tmp_path, PGO_BOLT_PROFILE=str(profile))
    assert_refused(proc, f"store file {stored} is not the profile its name says")
    assert not (tmp_path / "again" / "bolted" / "hello-pgo").exists()


@pytest.mark.refuses("bolted-binary-fails-workload")
def test_bolted_binary_failing_the_replay_refused(bolted: Bolted, tmp_path: Path) -> None:
    """llvm-bolt's own -break-funcs puts a trap at the entry of collatz_steps: the BOLTed binary dies in the
    workload's first phase, and is moved out of the way."""
    profile = Path(bolted.report["bolt"]["store_path"])
    records = [line.split() for line in profile.read_text().splitlines()]
    names = {name for record in records for name in (record[1], record[4]) if "collatz_steps" in name}
    assert len(names) == 1, names  # BOLT's name of the local symbol, with its /N
    args = f"-reorder-blocks=ext-tsp -dyno-stats -break-funcs={names.pop()}"
    proc = bolted.again(tmp_path, PGO_BOLT_PROFILE=str(profile), PGO_BOLT_ARGS=args)
    assert_refused(proc, "the BOLTed binary fails the workload: phase cli/collatz", "signal 4")
    work = tmp_path / "again"
    assert not (work / "bolted" / "hello-pgo").exists()
    assert (work / "rejected" / "hello-pgo.bolt").is_file()
    assert "collatz" in _report(work)["bolt"]["failed"]


@pytest.mark.refuses("bolt-input-bolted-already")
def test_the_bolted_binary_is_refused_as_input(bolted: Bolted) -> None:
    """The stage's own output given back to BOLT: llvm-bolt left no .rela.text in it, and its note says what it is."""
    output = Path(bolted.report["bolt"]["binary"])
    with pytest.raises(CheckFailed, match=rf"{output} was optimised by BOLT already \(give BOLT the optimised build"):
        bolt.check_input(output)


@pytest.mark.refuses("instance-bolt-instrumented-binary-writes-no-fdata")
def test_an_instance_that_writes_no_fdata_is_refused(bolted: Bolted, tmp_path: Path) -> None:
    """The workload run as the bolt stage trains, but on the binary before llvm-bolt -instrument (optimise's own):
    every run exits normally, and no .fdata appears."""
    fdata = tmp_path / "fdata"
    fdata.mkdir()
    with pytest.raises(
        TrainingFailed, match=rf"instance cli of the BOLT-instrumented binary wrote no .fdata into {fdata}"
    ):
        train_workload(
            tmp_path, REPO / "profiles" / "hello.toml", Path(bolted.report["optimise"]["binary"]), fdata_dir=fdata
        )


def _raw_profiles(bolted: Bolted) -> list[Path]:
    return sorted((bolted.pipeline.work / "bolt" / "fdata").glob("prof.*.fdata"))


@pytest.mark.refuses("bolt-training-wrote-no-fdata-process-empty")
@pytest.mark.parametrize(
    ("cut", "says"),
    [
        (lambda _: b"", "wrote an empty profile"),
        (lambda data: data[: data.index(b"\n", len(data) // 2) - 3], "its last line is cut short"),
        (lambda data: data.replace(b"\n", b"\n1 half a line\n", 1), "line 2 is not a record ('1 half a line')"),
    ],
    ids=["empty", "cut-short", "a-line-that-is-no-record"],
)
def test_a_partial_fdata_of_the_bolt_training_is_refused(
    bolted: Bolted, tmp_path: Path, cut: Callable[[bytes], bytes], says: str
) -> None:
    """A real .fdata of the shared training, emptied, cut in the middle of a line, or with a line that does not
    parse: the stage's check (before merge-fdata, which would merge it without a word) names the process."""
    raws = _raw_profiles(bolted)
    copies = []
    for raw in raws:
        shutil.copy(raw, tmp_path / raw.name)
        copies.append(tmp_path / raw.name)
    bolt.check_raw_fdata(tmp_path, copies)  # whole, they pass
    victim = copies[len(copies) // 2]
    victim.write_bytes(cut(victim.read_bytes()))
    pid = victim.name.split(".")[1]
    with pytest.raises(CheckFailed) as caught:
        bolt.check_raw_fdata(tmp_path, copies)
    assert caught.value.message.startswith(f"process {pid} of the BOLT training wrote ")
    assert str(victim) in caught.value.message and says in caught.value.message
    assert caught.value.hint == bolt.RAW_FDATA_HINT


@pytest.mark.refuses("bolt-training-wrote-no-fdata-process-empty")
def test_a_bolt_training_that_wrote_no_fdata_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match=rf"^the BOLT training wrote no .fdata into {tmp_path} \(BOLT's runtime"):
        bolt.check_raw_fdata(tmp_path, [])


# ---------------------------------------------------------------------------------------------------------------
# names longer than BOLT's instrumentation runtime can write (LLVM issue 169899): tests/fixtures/longnames

#: the prefixes of the fixture's three names that cannot be written: Huge (10,343 characters), Big1 and Big2
#: (5,222 and 5,242: each fits, the line of the call from one to the other does not)
LONG = ("_ZN10311_$LT$longnames..S$LT$", "_ZN5191_$LT$longnames..S$LT$", "_ZN5211_$LT$longnames..S$LT$")


@pytest.fixture(scope="module")
def long_bolted(tmp_path_factory: pytest.TempPathFactory) -> Bolted:
    pipeline = Pipeline(tmp_path_factory.mktemp("longnames"), "longnames")
    text = assert_ok(pipeline.nox("pgo", PGO_BOLT="1"))
    return Bolted(pipeline, text, _report(pipeline.work))


def test_names_too_long_for_bolts_runtime_are_left_out_of_its_instrumentation(long_bolted: Bolted) -> None:
    result, work = long_bolted.report["bolt"], long_bolted.pipeline.work
    assert result["instrumentation_skipped_functions"] == 3
    skipped = sorted(result["instrumentation_skipped"])
    assert [prefix for prefix in sorted(LONG) if any(name.startswith(prefix) for name in skipped)] == sorted(LONG)
    assert result["longest_function_name"] > bolt.RUNTIME_LINE_BYTES
    skip = (work / "bolt" / "skip-funcs.txt").read_text().splitlines()
    assert len(skip) == 3 and all(line.endswith("(/[0-9]+)?") and "\\$LT\\$" in line for line in skip)
    assert "-skip-funcs-file=skip-funcs.txt" in (work / "logs" / "bolt-instrument.log").read_text()
    # both phases ran on the BOLT-instrumented binary and wrote their profiles whole; the deep chain's functions
    # have none of their own, the short chain's (up to 2,662 characters) have theirs
    assert result["train"]["fdata_files"] == 4
    profile = (work / "bolt" / "longnames.fdata").read_text()
    sources = {line.split()[1] for line in profile.splitlines()}
    assert not any(name.startswith(LONG) for name in sources)
    assert any(name.startswith("_ZN2631_$LT$longnames..S$LT$") for name in sources)
    assert result["verify"]["requests"] == 4 and Path(result["binary"]).is_file()
    assert "3 functions left out of BOLT's instrumentation, without BOLT profile" in long_bolted.output


@pytest.mark.refuses("command-run-exits-another-code-expect-exit")
def test_without_leaving_them_out_the_runtime_asserts_and_the_refusal_says_so(
    long_bolted: Bolted, tmp_path: Path
) -> None:
    """The same PGO binary instrumented by llvm-bolt without the skip list: the deep phase (output discarded, as
    jaq's workload did) dies at exit in BOLT's runtime, and the refusal quotes the runtime's assertion."""
    result = long_bolted.report["bolt"]
    instrumented = tmp_path / "longnames.inst"
    subprocess.run(
        [
            result["llvm_bolt"],
            result["input"],
            "-instrument",
            f"-instrumentation-file={tmp_path / 'fdata' / 'prof'}",
            "-instrumentation-file-append-pid",
            "-o",
            str(instrumented),
        ],
        check=True,
        capture_output=True,
    )
    (tmp_path / "fdata").mkdir()
    with pytest.raises(TrainingFailed) as caught:
        train_workload(tmp_path, REPO / "profiles" / "longnames.toml", instrumented, fdata_dir=tmp_path / "fdata")
    assert caught.value.message == (
        "phase cli/deep: run 1 of 2 exited with exit code 1, expected 0; its stderr ends: Assertion failed: "
        f"{bolt.OVERFLOW_ASSERTION}"
    )


# ---------------------------------------------------------------------------------------------------------------
# release and rebuild with the PGO+BOLT artefact


def test_release_ships_pgo_bolt_and_rebuild_reproduces_it(tmp_path: Path) -> None:
    """A release with PGO_BOLT=1: the -pgo-bolt artefact (stripped by llvm-strip: GNU strip's output of a BOLTed
    binary dies at start) and its .fdata beside the .profdata, with statements, verified, then rebuilt from the two
    published profiles alone in another directory, byte for byte."""
    repo = make_repo(tmp_path)
    released = Release(tmp_path, repo, repo / "dist" / TAG, tmp_path / "work", tmp_path / "store", "")
    text = assert_ok(run_nox("release", released.env(PGO_BOLT="1"), [TAG]))
    dist = released.dist
    names = {p.name for p in dist.iterdir()}
    bolt_files = {f"{BASE}-pgo-bolt.tar.gz", f"{BASE}-pgo-bolt.fdata"}
    assert bolt_files <= names and {f"{name}.intoto.json" for name in bolt_files} <= names
    assert f"{BASE}-pgo-bolt.tar.gz" in text
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=dist, check=True, capture_output=True)
    manifest = released.manifest()
    artefact = manifest["artefacts"]["pgo_bolt"]
    binary = tar_member(dist / artefact["file"], artefact["binary"])
    assert sha256_bytes(binary) == artefact["binary_sha256"] != manifest["artefacts"]["pgo"]["binary_sha256"]
    assert manifest["artefacts"]["bolt_profile"]["sha256"] == sha256_file(dist / f"{BASE}-pgo-bolt.fdata")
    assert manifest["bolt"]["bolt_args"] == list(bolt.OPT_DIST_ARGS)
    assert manifest["bolt"]["llvm_strip"].startswith("LLVM 22.")
    unpacked = tmp_path / "hello-pgo-bolt"
    unpacked.write_bytes(binary)
    unpacked.chmod(0o755)
    ran = subprocess.run([unpacked, "primes", "100"], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "primes: 25"
    assert not bolt.has_symbol_table(unpacked) and not bolt.is_bolted(unpacked)  # the note went with the strip
    assert "verified" in assert_ok(run_nox("verify", released.env(), [TAG]))

    download = released.download(tmp_path / "download")
    shutil.rmtree(released.store)  # the rebuild has only the published files
    proc = run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "again")), [TAG, "--artefacts", str(download)])
    rebuilt = assert_ok(proc)
    for name in (f"{BASE}-pgo-bolt.tar.gz", f"{artefact['binary']}"):
        assert f"match     {name}" in rebuilt
    assert "mismatch" not in rebuilt
