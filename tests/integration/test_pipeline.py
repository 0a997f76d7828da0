"""The core pipeline on the fixture crates, with real cargo, rustc and llvm-profdata: what works and
every refusal of the reference that needs no server."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes import report
from recipes.store import sha256_file
from tests.conftest import Pipeline, assert_ok, assert_refused, start_nox, written_records

pytestmark = pytest.mark.slow


def _report(p: Pipeline) -> dict[str, Any]:
    return written_records(p.work)


def _optimise_report(p: Pipeline) -> dict[str, Any]:
    result = _report(p)["optimise"]
    assert isinstance(result, dict)
    return result


def _merged(p: Pipeline) -> Path:
    for stage in ("instrument", "train", "merge"):
        assert_ok(p.nox(stage))
    return p.work / "hello-pgo.profdata"


def test_pgo_end_to_end(hello: Pipeline) -> None:
    text = assert_ok(hello.nox("pgo"))
    assert re.search(r"merge .* \d+ of \d+ functions executed", text)
    assert f"report      {hello.work / 'report.json'}\n" in text  # where every figure is, the summary's last line
    report = _report(hello)
    assert set(report) == {"instrument", "train", "merge", "optimise"}
    optimised = _optimise_report(hello)
    store_path = Path(optimised["store_path"])
    assert store_path.parent == hello.store
    assert store_path.name == sha256_file(store_path) + ".profdata"
    assert optimised["stale_profile_warnings"] == 0
    assert "verify" in optimised
    binary = Path(optimised["binary"])
    built = hello.crate_dir / "target" / "x86_64-unknown-linux-gnu" / "release" / "hello-pgo"
    assert Path(optimised["built_binary"]) == built
    # the report names the checked copy in the work dir, and its sha256 is that copy's
    assert binary == hello.work / "optimised" / "hello-pgo"
    assert optimised["binary_sha256"] == sha256_file(binary) == sha256_file(built)
    assert optimised["main_crate_functions_with_profile"] > 0
    assert optimised["main_crate_functions_without_profile"] == 0
    assert optimised["coverage_from_symbols"] is True
    ran = subprocess.run([binary, "primes", "100"], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "primes: 25"
    log = (hello.work / "logs" / "optimise-build.log").read_text()
    main_line = next(line for line in log.splitlines() if "--crate-name hello_pgo" in line)
    assert f"-Cprofile-use={store_path}" in main_line
    assert "--target x86_64-unknown-linux-gnu" in main_line
    # the instrumented build is in its own target dir and wrote one .profraw per run
    instrumented = report["instrument"]
    assert isinstance(instrumented, dict)
    assert str(hello.work / "generate-target") in instrumented["binary"]
    train = report["train"]
    assert isinstance(train, dict)
    assert train["profraw_files"] == train["requests"] == 11


@pytest.mark.refuses("rustflags-cargo-encoded-rustflags-set-even-empty")
@pytest.mark.parametrize("name", ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"])
def test_global_rustflags_refused(hello: Pipeline, name: str) -> None:
    assert_refused(hello.nox("pgo", **{name: "-Ctarget-cpu=native"}), f"{name} is set", "unset")
    assert not (hello.work / "logs").exists()


@pytest.mark.refuses("per-target-variable-cargo-config-build-target")
def test_profile_flags_already_in_the_target_variable_refused(hello: Pipeline) -> None:
    proc = hello.nox("instrument", CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-Cprofile-use=/tmp/old.profdata")
    assert_refused(proc, "already holds profile flags", "-Cprofile-use=/tmp/old.profdata")


@pytest.mark.refuses("stale-profile-warnings")
def test_stale_profile_refused(hello: Pipeline) -> None:
    _merged(hello)
    source = hello.crate_dir / "src" / "main.rs"
    text = source.read_text()
    changed = text.replace("steps += 1;", "steps += 1;\n        if steps > 100_000 { break; }")
    assert changed != text
    source.write_text(changed)
    line = assert_refused(hello.nox("optimise"), "stale-profile warnings", "train again")
    assert "hash mismatch" in line
    # the binary that failed is not left where a release would pick it up
    assert not (hello.crate_dir / "target" / "x86_64-unknown-linux-gnu" / "release" / "hello-pgo").exists()
    assert (hello.work / "rejected" / "hello-pgo").is_file()
    assert "stale-profile" in _optimise_report(hello)["failed"]


@pytest.mark.refuses("training-executed-fewer-functions-floor")
def test_too_few_executed_functions_refused(hello: Pipeline) -> None:
    assert_refused(hello.nox("pgo", PGO_MIN_FUNCTIONS="100000"), "fewer than PGO_MIN_FUNCTIONS=100000")
    assert not (hello.work / "hello-pgo.profdata").exists()
    # the floor from the workload file applies too, and posargs override it
    assert_ok(hello.nox("merge", "--min-functions", "3"))


@pytest.mark.refuses("more-functions-without-profile-data-pgo-max")
def test_too_many_missing_functions_refused(tmp_path: Path) -> None:
    other = Pipeline(tmp_path / "other", "multi")
    for stage in ("instrument", "train", "merge"):
        assert_ok(other.nox(stage))
    foreign = other.work / "multi-pgo.profdata"
    hello = Pipeline(tmp_path / "hello", "hello")
    proc = hello.nox("optimise", PGO_PROFDATA=str(foreign), PGO_MAX_MISSING="0")
    line = assert_refused(proc, "functions have no profile data, more than PGO_MAX_MISSING=0", "hello_pgo")
    assert "same cargo command" in line


@pytest.mark.refuses("crate-identity-differs-between-instrumented-optimised-build")
def test_crate_identity_mismatch_refused(hello: Pipeline) -> None:
    _merged(hello)
    # another version of the same crate (other features are another crate's work dir: recipes/claim.py)
    text = hello.manifest.read_text()
    hello.manifest.write_text(text.replace('version = "0.1.0"', 'version = "0.1.1"', 1))
    line = assert_refused(hello.nox("optimise"), "crate identity differs")
    assert "hello_pgo (bin)" in line


def _store_dir(p: Pipeline) -> None:
    p.store.mkdir(mode=0o700)


@pytest.mark.refuses("store-file-not-profile-name-says-before")
def test_store_file_tampered_before_the_build_refused(hello: Pipeline) -> None:
    profile = _merged(hello)
    _store_dir(hello)
    # the profile optimise puts in the store (by default the partial one: the merged one without never-run records)
    partial = hello.root / "partial.profdata"
    subprocess.run(["llvm-profdata-22", "merge", "--sparse", "-o", str(partial), str(profile)], check=True)
    planted = hello.store / f"{sha256_file(partial)}.profdata"
    planted.write_bytes(b"not this profile")
    assert_refused(hello.nox("optimise"), "is not the profile its name says before the build", "remove it")
    assert not (hello.work / "logs" / "optimise-build.log").exists()


@pytest.mark.refuses("store-file-not-profile-name-says-before")
def test_store_file_tampered_during_the_build_refused(hello: Pipeline, tmp_path: Path) -> None:
    _merged(hello)
    wrapper = tmp_path / "tamper-rustc"
    wrapper.write_text(
        "#!/bin/sh\n"
        '"$@"; rc=$?\n'
        'case "$*" in *"--crate-name hello_pgo"*) for f in "$STORE"/*.profdata; do echo x >> "$f"; done;; esac\n'
        "exit $rc\n"
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    proc = hello.nox("optimise", RUSTC_WRAPPER=str(wrapper), STORE=str(hello.store))
    assert_refused(proc, "is not the profile its name says after the build")
    assert (hello.work / "rejected" / "hello-pgo").is_file()


def _workload(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "custom.toml"
    path.write_text(text)
    return path


FAILING = """
[workload]
description = "a phase whose command fails"

[[instance]]
name = "cli"

[[instance.phase]]
name = "fails"
kind = "command"
args = ["fail"]
runs = 2
"""


@pytest.mark.refuses("command-run-exits-another-code-expect-exit")
def test_training_phase_exit_code_refused(hello: Pipeline, tmp_path: Path) -> None:
    proc = hello.nox("pgo", PGO_WORKLOAD=str(_workload(tmp_path, FAILING)))
    assert_refused(proc, "phase cli/fails: run 1 of 2 exited with exit code 3, expected 0")


@pytest.mark.refuses("training-command-run-leaves-processes-running-killed")
def test_a_training_run_that_leaves_daemons_refused_and_nothing_left(hello: Pipeline, tmp_path: Path) -> None:
    """``nox -s train`` on a binary that daemonizes: a shell script put in the instrumented binary's place and
    recorded as it (it stands in for a program that starts a worker in its group and a daemon that calls setsid):
    refused in one line naming both, and neither runs afterwards."""
    assert_ok(hello.nox("instrument"))
    record = _report(hello)["instrument"]
    assert isinstance(record, dict)
    a, b = tmp_path / "a.pid", tmp_path / "b.pid"
    Path(record["binary"]).write_text(
        f"#!/bin/sh\nsleep 300 & echo $! > {a}\n(setsid sleep 301 & echo $! > {b}) &\n"
        f"until grep -q . {b}; do :; done\nsleep 0.5\n"
    )
    # train runs only the instrumented build it recorded: the stand-in is recorded as that build
    records = _report(hello)
    records["instrument"]["binary_sha256"] = sha256_file(Path(record["binary"]))
    report.save(hello.work, records)
    proc = hello.nox("train", PGO_WORKLOAD=str(_workload(tmp_path, FAILING)))
    pids = sorted(int(f.read_text()) for f in (a, b))
    named = ", ".join(f"pid {pid}: sleep" for pid in pids)
    assert_refused(proc, f"phase cli/fails: run 1 of 2 left 2 processes running ({named}); killed them")
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"{pid} is still there"


@pytest.mark.refuses(
    "unknown-key-nearest-known-one",
    "value-wrong-type-boolean-where-number-expected",
    "unknown-value-kind-mode-output-phases-from",
)
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("runs = 2", "rnus = 2", "rnus: unknown key"),
        ("runs = 2", 'runs = "2"', "runs: expected an integer, got str"),
        ('kind = "command"', 'kind = "teleport"', "kind: unknown value 'teleport'"),
    ],
)
def test_bad_workload_refused_before_anything_is_built(
    hello: Pipeline, tmp_path: Path, old: str, new: str, message: str
) -> None:
    proc = hello.nox("pgo", PGO_WORKLOAD=str(_workload(tmp_path, FAILING.replace(old, new))))
    assert_refused(proc, message, "custom.toml")
    assert not (hello.work / "logs" / "instrument-build.log").exists()


@pytest.mark.refuses("stage-run-without-result-stage-before")
@pytest.mark.parametrize(("stage", "needs"), [("train", "instrument"), ("merge", "train"), ("optimise", "merge")])
def test_stage_without_its_input_refused(hello: Pipeline, stage: str, needs: str) -> None:
    assert_refused(hello.nox(stage), f"{stage} needs the result of {needs}", f"run `nox -s {needs}` first")


CONFIG_PHASE = """
[workload]
description = "exits 4 when the build lost --cfg hello_config"

[[instance]]
name = "cli"

[[instance.phase]]
name = "config"
kind = "command"
args = ["config"]
"""


def test_build_rustflags_of_cargo_config_reach_both_builds(hello: Pipeline, tmp_path: Path) -> None:
    (hello.crate_dir / ".cargo").mkdir()
    (hello.crate_dir / ".cargo" / "config.toml").write_text('[build]\nrustflags = ["--cfg", "hello_config"]\n')
    assert_ok(hello.nox("pgo", PGO_WORKLOAD=str(_workload(tmp_path, CONFIG_PHASE)), PGO_MIN_FUNCTIONS="1"))
    report = _report(hello)
    for stage in ("instrument", "optimise"):
        section = report[stage]
        assert isinstance(section, dict)
        assert section["rustflags"].startswith("--cfg hello_config -Cprofile-")
    instrumented = report["instrument"]
    assert isinstance(instrumented, dict)
    assert instrumented["carried_rustflags_from"] == [f"{hello.crate_dir}/.cargo/config.toml [build] rustflags"]
    # the control: a build without the carried flags takes the other branch
    plain = subprocess.run(
        [
            "cargo",
            "build",
            "--release",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--target-dir",
            str(tmp_path / "control"),
            "--manifest-path",
            str(hello.manifest),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS": "-Copt-level=3"},
    )
    assert plain.returncode == 0
    control = tmp_path / "control" / "x86_64-unknown-linux-gnu" / "release" / "hello-pgo"
    assert subprocess.run([control, "config"], capture_output=True, check=False).returncode == 4


def test_same_profile_from_two_work_dirs_gives_identical_binaries(hello: Pipeline, tmp_path: Path) -> None:
    profile = _merged(hello)
    shas = []
    for name in ("first", "second"):
        copy = tmp_path / name / "copied.profdata"
        copy.parent.mkdir()
        copy.write_bytes(profile.read_bytes())
        assert_ok(hello.nox("optimise", PGO_PROFDATA=str(copy), PGO_OUT=str(tmp_path / name / "work")))
        shas.append(sha256_file(hello.crate_dir / "target" / "x86_64-unknown-linux-gnu" / "release" / "hello-pgo"))
    assert shas[0] == shas[1]


def test_second_optimise_recompiles_only_the_main_package(tmp_path: Path) -> None:
    multi = Pipeline(tmp_path, "multi")
    assert_ok(multi.nox("pgo"))
    first = _optimise_report(multi)["binary_sha256"]
    assert_ok(multi.nox("optimise"))
    log = (multi.work / "logs" / "optimise-build.log").read_text()
    compiled = re.findall(r"^\s+Compiling (\S+)", log, re.MULTILINE)
    fresh = re.findall(r"^\s+Fresh (\S+)", log, re.MULTILINE)
    assert compiled == ["multi-pgo"]
    assert sorted(fresh) == ["numkit", "textkit"]
    assert _optimise_report(multi)["binary_sha256"] == first


def test_two_pipelines_share_one_store_at_the_same_moment(tmp_path: Path) -> None:
    """Two optimised builds at once, one store: same profile and different profiles; both succeed."""
    first = Pipeline(tmp_path / "a", "hello")
    profile = _merged(first)
    other = tmp_path / "other.profdata"  # the same functions, every count doubled: another profile
    subprocess.run(["llvm-profdata-22", "merge", f"--weighted-input=2,{profile}", "-o", str(other)], check=True)
    assert sha256_file(other) != sha256_file(profile)
    store = tmp_path / "shared-store"
    runs = []
    for name, given in (("b", profile), ("c", profile), ("d", other)):
        pipeline = Pipeline(tmp_path / name, "hello")
        env = pipeline.env(PGO_PROFDATA=str(given), PGO_PROFILE_STORE=str(store))
        runs.append(start_nox("optimise", env))
    for proc in runs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
    names = sorted(p.name for p in store.iterdir())
    # what each build read (by default, its profile without the never-run records): b's and c's the same file
    read = [Path(written_records(tmp_path / name / "work")["optimise"]["store_path"]) for name in ("b", "c", "d")]
    assert read[0] == read[1] != read[2]
    assert names == sorted([".lock", read[0].name, read[2].name])
    assert all(path.name == f"{sha256_file(path)}.profdata" for path in read)


@pytest.mark.refuses("profile-covers-none-main-crate-functions")
def test_missing_functions_of_registry_dependencies_are_counted(tmp_path: Path) -> None:
    """cargo gives registry crates --cap-lints allow, which also silences LLVM's profile warnings: the
    pipeline's rustc wrapper lifts the cap, and -vv replays them when the crate is Fresh. (A foreign profile
    makes every function missing; the build is then refused, and its report still counts them.)"""
    other = Pipeline(tmp_path / "other", "hello")
    foreign = _merged(other)
    withdep = Pipeline(tmp_path / "withdep", "withdep")
    for _ in range(2):
        assert_refused(withdep.nox("optimise", PGO_PROFDATA=str(foreign)), "covers none of withdep-pgo's functions")
        missing = _optimise_report(withdep)["missing_by_crate"]
        assert missing.get("adler2", 0) > 0, missing
        assert missing.get("withdep_pgo", 0) > 0, missing
    log = (withdep.work / "logs" / "optimise-build.log").read_text()
    assert "Fresh adler2" in log
    # the wrapper changes no code: the same build without it gives the same binary
    binary = withdep.work / "rejected" / "withdep-pgo"
    flags = _optimise_report(withdep)["rustflags"]
    subprocess.run(
        [
            "cargo",
            "build",
            "--release",
            "--locked",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--target-dir",
            str(tmp_path / "control"),
            "--manifest-path",
            str(withdep.manifest),
        ],
        cwd=withdep.crate_dir,
        capture_output=True,
        check=True,
        env={**os.environ, "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS": flags},
    )
    control = tmp_path / "control" / "x86_64-unknown-linux-gnu" / "release" / "withdep-pgo"
    assert sha256_file(control) == sha256_file(binary)


@pytest.mark.refuses("phase-runs-program-not-installed-h2load")
def test_missing_load_generator_refused_before_anything_is_built(hello: Pipeline) -> None:
    """The demo server's workload runs h2load: without it on PATH, nothing is built."""
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "h2load").exists())
    proc = hello.nox("pgo", PGO_WORKLOAD="demo-server", PATH=path)
    assert_refused(proc, "h2load not found: phase log-ecdsa/", "apt-get install nghttp2-client")
    assert not (hello.work / "logs").exists()
