"""The tests shard on tests/fixtures/tested (``PGO_WORKLOAD=main,tests``): the crate's own test suite built as the
instrumented build and trained as a shard beside a workload of gcd and digit sums (the fixture's
profiles/main.toml); its records counted against the
binary's functions, the main crate's functions only the tests reached (fizzbuzz, run by the integration test), the
merged profile's executed functions counted among the binary's only; a failing test fails the shard by name and
leaves nothing merged; what is refused before anything is built.

One instrumented build, one training and one merge for the module (``trained``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, Pipeline, assert_ok, assert_refused

FAILING = """//! A test that fails only when the tests shard runs it (LLVM_PROFILE_FILE names the shard's folder).

#[test]
fn passes_unless_instrumented() {
    let file = std::env::var("LLVM_PROFILE_FILE").unwrap_or_default();
    assert!(!file.contains("shards/tests"), "instrumented: {file}");
}
"""


@dataclass(frozen=True)
class Trained:
    pipeline: Pipeline
    env: dict[str, str]
    train_output: str
    output: str  # merge's

    def report(self) -> dict[str, Any]:
        data = json.loads((self.pipeline.work / "report.json").read_text())
        assert isinstance(data, dict)
        return data


TALLY = """[package]
name = "tally"
version = "0.1.0"
edition = "2021"
publish = false

[features]
extra = []
"""

#: a normal dependency whose feature only the tests turn on (grex 1.4.6's aho-corasick): the test build's crates,
#: the binary among them, get other crate identities than the instrumented build's
DEPENDENCIES = """tally = { path = "../tally" }

[dev-dependencies]
tally = { path = "../tally", features = ["extra"] }
"""


def with_a_test_only_feature(pipeline: Pipeline) -> None:
    tally = pipeline.root / "tally"
    (tally / "src").mkdir(parents=True)
    (tally / "Cargo.toml").write_text(TALLY)
    (tally / "src" / "lib.rs").write_text('pub fn extra() -> bool {\n    cfg!(feature = "extra")\n}\n')
    manifest = pipeline.manifest.read_text()
    pipeline.manifest.write_text(manifest.replace("[dependencies]\n", f"[dependencies]\n{DEPENDENCIES}"))
    lock = ["cargo", "generate-lockfile", "--offline", "--manifest-path", str(pipeline.manifest)]
    subprocess.run(lock, check=True, capture_output=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    root = tmp_path_factory.mktemp("tests-shard")
    pipeline = Pipeline(root, "tested")
    with_a_test_only_feature(pipeline)
    main = pipeline.crate_dir / "profiles" / "main.toml"  # gcd and digit sums, never fizzbuzz
    env = {"PGO_WORKLOAD": f"{main},tests", "PGO_WEIGHTS": "main=3,tests=1"}
    assert_ok(pipeline.nox("instrument", **env))
    trained = assert_ok(pipeline.nox("train", **env))
    return Trained(pipeline, env, trained, assert_ok(pipeline.nox("merge", **env)))


def test_the_tests_shard_is_merged_as_a_shard_and_its_records_counted(trained: Trained) -> None:
    report = trained.report()
    work = trained.pipeline.work
    train = {s["name"]: s for s in report["train"]["shards"]}
    assert list(train) == ["main", "tests"]
    tests = train["tests"]
    assert tests["workload"] is None
    assert (tests["tests"]["passed"], tests["tests"]["failed"], tests["tests"]["ignored"]) == (9, 0, 1)
    # the unit tests' harness, the integration test's, the binary it runs, the doc-test: each its own .profraw
    assert len(tests["profraw"]) >= 3
    assert {p.name for p in (work / "shards" / "tests" / "profraw").iterdir()} == {p["name"] for p in tests["profraw"]}
    # built as the instrumented build: its flags, its own target dir, the raw profiles into the shard's folder
    log = (work / "logs" / "train-tests-build.log").read_text()  # cargo test --no-run; then the run, nothing built
    assert f"-Cprofile-generate={work / 'profraw'}" in log
    assert "Compiling" in log and "Compiling" not in (work / "logs" / "train-tests.log").read_text()
    assert str(work / "tests-shard-target") in log
    assert not list((work / "profraw").glob("tests-*"))

    merge = report["merge"]
    shards = {s["name"]: s for s in merge["shards"]}
    main, shard = shards["main"], shards["tests"]
    assert shard["share_asked"] == pytest.approx(0.25)
    assert abs(shard["share_reached"] - 0.25) <= 0.0005
    # its records: the binary's functions (the main shard's records), and the test build's own
    matching, other = shard["records_matching_binary"], shard["records_not_matching_binary"]
    assert matching + other == shard["total_functions"]
    assert 0 < matching <= main["total_functions"]
    assert other > 0  # cfg(test) code and the harness: the library compiled again as a test crate
    assert "records_matching_binary" not in main
    # the workload never runs fizzbuzz; the integration test runs the binary's: the instrumented binary put in the
    # place of the test build's, whose crate identity the dev-dependency's feature changed
    assert shard["main_crate_only_this_shard"] >= 1
    replaced = Path(tests["tests"]["binary_replaced"])
    assert replaced.parent.parent.parent == work / "tests-shard-target" and replaced.name == "tested-pgo"
    assert replaced.read_bytes() == Path(report["instrument"]["binary"]).read_bytes()
    assert "the test build's tested-pgo replaced by the instrumented binary" in trained.train_output
    # the merged profile's functions are the binary's: the test build's own records are not counted
    assert merge["total_functions"] == main["total_functions"]
    assert merge["executed_functions"] >= main["executed_functions"]
    line = next(ln for ln in trained.output.splitlines() if "shard       tests:" in ln)
    assert f"({shard['main_crate_only_this_shard']} of the main crate's)" in line
    assert f"{matching} of its {matching + other} records match the binary's functions, {other} do not" in line
    assert "the binary's functions only" in trained.output


def test_the_profile_with_the_tests_shard_builds_the_binary(trained: Trained) -> None:
    """optimise takes the merged profile (the test build's own records are unused, not stale); pgo-test too."""
    text = assert_ok(trained.pipeline.nox("optimise", **trained.env))
    assert "binary " in text


@pytest.mark.refuses("tests-shard-test-failed")
def test_a_test_failing_under_instrumentation_fails_the_shard(trained: Trained) -> None:
    pipeline = trained.pipeline
    failing = pipeline.crate_dir / "tests" / "instrumented.rs"
    failing.write_text(FAILING)
    try:
        proc = pipeline.nox("train", **trained.env)
    finally:
        failing.unlink()
    line = assert_refused(proc, "the tests shard: 1 of the crate's tests failed under instrumentation")
    assert "passes_unless_instrumented" in line
    # nothing merged is left: the work dir's merged profile and the shards' are gone, the store has none
    assert not (pipeline.work / "tested-pgo.profdata").exists()
    assert not list((pipeline.work / "shards").glob("*/*.profdata"))
    assert "failed" in trained.report()["train"]


@pytest.mark.refuses("tests-shard-not-the-instrumented-build")
def test_a_tests_shard_built_otherwise_than_the_instrumented_build_is_refused(trained: Trained) -> None:
    pipeline = trained.pipeline
    flags = {"CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS": "-Cdebug-assertions"}
    log = pipeline.work / "logs" / "train-tests.log"
    before = log.stat().st_mtime_ns
    line = assert_refused(pipeline.nox("train", **trained.env, **flags), "the tests shard would build")
    assert "its profile would not be of the instrumented build" in line
    assert log.stat().st_mtime_ns == before  # refused before the tests were built


@pytest.mark.refuses("tests-shard-alone", "tests-shard-workload-file")
@pytest.mark.parametrize(
    ("workload", "words"),
    [
        ("tests", "the shard tests (the crate's own test suite) alone"),
        ("hello,{root}/w/tests.toml", "is named like the reserved shard tests"),
    ],
)
def test_the_tests_shard_is_refused_before_anything_is_built(hello: Pipeline, workload: str, words: str) -> None:
    (hello.root / "w").mkdir()
    (hello.root / "w" / "tests.toml").write_text((FIXTURES / "tested" / "profiles" / "main.toml").read_text())
    assert_refused(hello.nox("pgo", PGO_WORKLOAD=workload.format(root=hello.root)), words)
    assert not hello.work.exists()
    assert not (hello.crate_dir / "target").exists()


@pytest.mark.refuses("tests-shard-no-test-can-run-the-binary")
def test_a_tests_shard_of_unit_tests_alone_is_refused_before_anything_is_built(hello: Pipeline) -> None:
    """hello is a binary alone, without integration tests: `cargo test` would compile it again as a test harness,
    whose functions are named apart from the binary's; cargo metadata says so before the instrumented build (the
    merge used to refuse it after the build and the training: "executed none of the main crate's … functions")."""
    line = assert_refused(
        hello.nox("instrument", PGO_WORKLOAD="hello,tests"),
        "the shard tests cannot train the binary: hello-pgo has no integration test (tests/*.rs)",
        "add an integration test that runs the binary (CARGO_BIN_EXE_hello-pgo)",
    )
    assert "failed (see" not in line
    assert not hello.work.exists() or not (hello.work / "generate-target").exists()
    assert not (hello.crate_dir / "target").exists()


#: an integration test that neither runs the binary nor can call it (hello has no library)
UNREACHING = "#[test]\nfn arithmetic() {\n    assert_eq!(2 + 2, 4);\n}\n"


@pytest.mark.refuses("tests-shard-reaches-no-binary-function")
def test_a_tests_shard_of_only_the_binarys_own_harness_is_refused(tmp_path: Path) -> None:
    """hello, with an integration test that does not run it: `cargo test` compiles the binary again as a test
    harness, whose functions are named apart from the binary's (but its entry point, main); the shard runs (its
    harnesses execute), and none of the crate's code in the binary."""
    hello = Pipeline(tmp_path, "hello")
    (hello.crate_dir / "tests").mkdir()
    (hello.crate_dir / "tests" / "arithmetic.rs").write_text(UNREACHING)
    env = {"PGO_WORKLOAD": "hello,tests"}
    assert_ok(hello.nox("instrument", **env))
    assert_ok(hello.nox("train", **env))
    line = assert_refused(hello.nox("merge", **env), "the shard tests executed none of the main crate's")
    # the harness's entry point is named main as the binary's is
    assert "of its 12 records, 1 are named as the binary's functions and 11 are the test build's own" in line
    assert not (hello.work / "hello-pgo.profdata").exists()
    assert not list((hello.work / "shards").glob("*/*.profdata"))


def test_the_tests_shard_trained_alone_is_gathered(trained: Trained) -> None:
    """`train -- --shard tests` in the work dir, moved aside as a leg, gathered with the main shard's leg: its raw
    profiles are the test binaries' (no build id of the instrumented binary's), its record has the binary's."""
    pipeline, root = trained.pipeline, trained.pipeline.root
    assert_ok(pipeline.nox("train", **trained.env))  # the work dir as trained, after the tests above
    legs = {}
    for name in ("main", "tests"):
        text = assert_ok(pipeline.nox("train", "--shard", name, **trained.env))
        assert f"; shard {name} alone, for merge -- --gather" in text
        legs[name] = root / "legs" / name
        shutil.copytree(pipeline.work, legs[name], symlinks=True)
    record = trained.report()["train"]["shards"][0]
    assert record["name"] == "tests" and "workload_sha256" not in record and record["binary_sha256"]
    text = assert_ok(pipeline.nox("merge", "--gather", str(legs["main"]), str(legs["tests"]), **trained.env))
    assert "records match the binary's functions" in text
    shard = {s["name"]: s for s in trained.report()["merge"]["shards"]}["tests"]
    assert shard["records_matching_binary"] > 0


#: a test that starts a daemon (setsid, its streams closed) and returns; the daemon's pid in {pidfile}
DAEMON = """//! A test that leaves a daemon running.

#[test]
fn starts_a_daemon() {
    let script = "setsid sh -c 'echo $$ > {pidfile}; exec sleep 1234' < /dev/null > /dev/null 2>&1 & sleep 0.5";
    assert!(std::process::Command::new("sh").args(["-c", script]).status().expect("sh").success());
}
"""

#: a test that never returns (its pid in {pidfile})
NEVER = """//! A test that never returns.

#[test]
fn never_returns() {
    std::fs::write("{pidfile}", std::process::id().to_string()).expect("pid file");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
"""


def _ended(pidfile: Path) -> bool:
    """Whether the process whose pid ``pidfile`` holds has ended (a zombie counts as ended)."""
    try:
        stat = Path(f"/proc/{int(pidfile.read_text())}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


@pytest.mark.refuses("tests-shard-leaves-processes", "tests-shard-out-of-time")
@pytest.mark.parametrize(
    ("source", "timeout", "words"),
    [
        (DAEMON, "", "the tests shard: the crate's tests left 1 process running (pid "),
        (NEVER, "5", "the tests shard: cargo test did not finish within 5 s (killed, with every test and process"),
    ],
)
def test_the_tests_shard_is_held_to_the_trainings_rules(
    trained: Trained, source: str, timeout: str, words: str
) -> None:
    """Before, a test's setsid daemon was left running after "Session pgo was successful", and a test that never
    returns hung the session (PGO_PHASE_TIMEOUT was not applied)."""
    pipeline = trained.pipeline
    pidfile = pipeline.root / "test.pid"
    pidfile.unlink(missing_ok=True)
    unruly = pipeline.crate_dir / "tests" / "unruly.rs"
    unruly.write_text(source.replace("{pidfile}", str(pidfile)))
    try:
        proc = pipeline.nox("train", **trained.env, **({"PGO_PHASE_TIMEOUT": timeout} if timeout else {}))
    finally:
        unruly.unlink()
    line = assert_refused(proc, words)
    assert _ended(pidfile)
    assert not list((pipeline.work / "shards").glob("*/*.profdata"))
    if timeout:
        assert "raise PGO_PHASE_TIMEOUT" in line
    else:
        assert ": sleep); killed them" in line
