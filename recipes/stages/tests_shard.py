"""The tests shard (``PGO_WORKLOAD=main,tests``): the crate's own test suite as one shard of the training.

The reserved shard name ``tests`` (:data:`recipes.config.TESTS_SHARD`) has no workload file. Its training builds
the crate's tests as pgo-test does (``cargo test`` of the instrumented build's command, target, features and per-target
rustflags, in its own target dir ``<work>/tests-shard-target``), with the instrumented build's environment
(:func:`recipes.stages.instrument.instrumented_env`: ``-Cprofile-generate``) in place of the profile, runs them with
``LLVM_PROFILE_FILE`` in the shard's own folder of raw profiles, and records them as any shard's. A test that fails
fails the shard, naming it.

Between the build (``cargo test --no-run``) and the run, the binary the test build made (what
``CARGO_BIN_EXE_<bin>`` names) is overwritten by the instrumented binary, its mtime kept so that cargo sees nothing
to rebuild: integration tests that run the binary then train the build that ships. Without it, a dev-dependency
that turns on a feature of a dependency (grex 1.4.6: aho-corasick) changes the crate identity of the test build's
binary, and none of its records would be the shipped binary's functions.

Code a test build compiles differently (``cfg(test)``, the test harness, the library compiled again as a test crate)
gives records under other names than the shipped binary's: the merge (recipes/stages/merge.py) counts how many of
the shard's records are the binary's functions (the records of the shards that ran the instrumented binary) and how
many are not, and counts the merged profile's executed functions among the binary's only.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from recipes import procs, report
from recipes.config import TESTS_SHARD
from recipes.errors import CheckFailed, TrainingFailed
from recipes.llvm import checks
from recipes.llvm.profdata import ProfileSummary, record_raw_profiles
from recipes.plan import BuildPlan, clean_package
from recipes.results import ShardRecord, ShardTrainRecord, TestCountsRecord
from recipes.runner import run as run_command
from recipes.runner import say
from recipes.stages import _observe
from recipes.stages.instrument import instrumented_env
from recipes.stages.test import suite_argv
from recipes.store import sha256_file
from recipes.toolchain import emulation
from recipes.toolchain.cargo.log import built_executable
from recipes.toolchain.cargo.testlog import CargoTestRun, failed_named, parse_cargo_test, summary_line
from recipes.train.trainer import profraw_pattern
from recipes.workload.registry import DEFAULT_PHASE_TIMEOUT

#: the RUSTC shim's records of the tests shard's build (``<work>/observed/tests-shard``)
OBSERVED = "tests-shard"


def check_instrumented_build(plan: BuildPlan) -> None:
    """The tests shard's records count only if its build compiles the crate as the instrumented build did: the
    same cargo command, target and rustflags (the variable and its value). Refused before anything is built."""
    built = report.require(plan.work, "instrument", "train")
    checks.refuse_other_build(
        built, cargo=plan.config.cargo, target=plan.target, earlier="the instrumented build", now="the tests shard"
    )
    var = plan.rustflags.var
    flags = instrumented_env(plan)[var]
    if var != built.rustflags_var or flags != built.rustflags:
        raise CheckFailed(
            f"the tests shard would build the crate's tests with {var}={flags!r}, and the instrumented build was made "
            f"with {built.rustflags_var}={built.rustflags!r}: its profile would not be of the instrumented build",
            "train with the settings of the instrumented build (RUSTFLAGS, PGO_TARGET, the cargo configs), "
            "or run `nox -s instrument` again",
        )


def train(plan: BuildPlan, binary: Path) -> ShardTrainRecord:
    """Build and run the crate's tests instrumented, their raw profiles into the shard's folder, with ``binary`` (the
    instrumented binary) in place of the test build's; a failing test, a crashed test binary or a suite that does
    not compile fails the shard, and leaves no merged profile behind."""
    try:
        return _train(plan, binary)
    except TrainingFailed:  # it leaves none of the last merge's profiles, the whole's nor each shard's
        plan.merged_profile.unlink(missing_ok=True)
        for shard in plan.shards:
            plan.workdir.shard_profdata(shard.name).unlink(missing_ok=True)
            plan.workdir.shard_rest(shard.name).unlink(missing_ok=True)
        raise


def _train(plan: BuildPlan, binary: Path) -> ShardTrainRecord:
    folder = plan.workdir.shard_profraw(TESTS_SHARD)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    target_dir = plan.workdir.tests_shard_target
    log = plan.logs / "train-tests.log"
    env = instrumented_env(plan)
    env["LLVM_PROFILE_FILE"] = profraw_pattern(folder, TESTS_SHARD)  # the test binaries and what they run
    env = _observe.observing(plan, env, OBSERVED)
    say(f"train: shard {TESTS_SHARD} (the test suite of {plan.crate.package}, instrumented, in {target_dir})")
    clean_package(plan, target_dir, plan.logs / "train-tests-clean.log")
    started = time.monotonic()
    argv = suite_argv(plan, target_dir)  # pgo-test's cargo test
    build_log = plan.logs / "train-tests-build.log"
    built = run_command([*argv, "--no-run"], env=env, log=build_log, cwd=plan.cwd, check=False, what="cargo test")
    refuse_unbuilt(parse_cargo_test(built.output()), built.returncode, str(build_log))
    replaced = run_the_instrumented_binary(plan, binary, built.output())
    limit = plan.config.phase_timeout or DEFAULT_PHASE_TIMEOUT * emulation.slowdown(plan.launcher)
    ran = procs.run_limited(argv, env=env, log=log, cwd=plan.cwd, limit=limit, label=f"the shard {TESTS_SHARD}")
    seconds = round(time.monotonic() - started, 3)
    tests = parse_cargo_test(log.read_text(encoding="utf-8", errors="replace"))
    say(f"train: shard {TESTS_SHARD}: {summary_line(tests)}")
    refuse_unruly(ran, limit, str(log))
    refuse_failed(tests, ran.returncode if ran.returncode is not None else 0, str(log))
    _observe.check_profile_flag(
        plan,
        OBSERVED,
        "the tests shard's build",
        option="profile-generate",
        value=str(plan.profraw_dir),
        harnesses=True,
    )
    counts: TestCountsRecord = {
        "passed": tests.passed,
        "failed": tests.failed,
        "ignored": tests.ignored,
        "log": str(log),
    }
    if replaced is not None and still_replaced(replaced, binary):
        counts["binary_replaced"] = str(replaced)
    return {
        "name": TESTS_SHARD,
        "workload": None,
        "seconds": seconds,
        "requests": tests.passed,
        "profraw": [raw.as_json() for raw in record_raw_profiles(folder)],
        "tests": counts,
    }


def refuse_unruly(ran: procs.Ran, limit: float, log: str) -> None:
    """The test run held to a training phase's rules: ``cargo test`` past the limit (a test that never returns) is
    killed with every process it started, and what the tests left running when it exited (a ``setsid`` daemon
    too) is killed; either fails the shard in one line. Before, such a test hung the session, and a daemon outlived
    it."""
    if ran.returncode is None:
        raise TrainingFailed(
            f"the tests shard: cargo test did not finish within {limit:g} s (killed, with every test and process it "
            "started)",
            f"see {log} (a test that never returns: skip it with #[cfg_attr(…, ignore)]); raise PGO_PHASE_TIMEOUT, "
            f"or drop {TESTS_SHARD} from PGO_WORKLOAD",
        )
    if ran.leftovers:
        raise TrainingFailed(
            f"the tests shard: the crate's tests {procs.leftovers_line(ran.leftovers)}",
            "a process still running after the tests ended could write a .profraw while the merge reads them, or be "
            "killed in the middle of writing one: make each test stop (and wait for) what it starts",
        )


def refuse_unbuilt(tests: CargoTestRun, returncode: int, log: str) -> None:
    """``cargo test --no-run``: a suite that did not compile, or cargo's failure."""
    refuse_uncompiled(tests, log)
    if returncode != 0:
        raise TrainingFailed(f"the tests shard: cargo test --no-run exited with code {returncode}", f"see {log}")


def run_the_instrumented_binary(plan: BuildPlan, binary: Path, build_log: str) -> Path | None:
    """Overwrite the test build's ``<bin>`` (where cargo put it, and the file in ``deps/`` it is a link or copy of,
    which cargo links it from again on the next run) with ``binary``, keeping each file's mtime, so that the tests
    that run ``CARGO_BIN_EXE_<bin>`` run the instrumented build. ``None`` when the test build made no such binary."""
    built = built_executable(build_log, plan.crate)
    if built is None or not built.is_file():
        return None
    own = sha256_file(built)
    size = built.stat().st_size
    deps = built.parent / "deps"
    copies = [built]
    if deps.is_dir():
        copies += [
            p for p in sorted(deps.iterdir()) if p.is_file() and p.stat().st_size == size and sha256_file(p) == own
        ]
    for path in copies:
        stat = path.stat()
        staged = path.with_name(f".{path.name}.pgo-instrumented")
        shutil.copyfile(binary, staged)
        staged.chmod(stat.st_mode & 0o7777)
        os.utime(staged, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        staged.replace(path)
    say(
        f"train: shard {TESTS_SHARD}: the test build's {built.name} replaced by the instrumented binary, so the tests "
        f"that run it (CARGO_BIN_EXE_{plan.crate.bin}) train the build that ships"
    )
    return built


def still_replaced(replaced: Path, binary: Path) -> bool:
    """Whether the tests ran the instrumented binary: not if cargo built or linked its own again between the two
    runs (a build script that reruns every time), which is said in a warning."""
    if replaced.is_file() and sha256_file(replaced) == sha256_file(binary):
        return True
    say(
        f"warning: train: shard {TESTS_SHARD}: cargo built {replaced} again for the test run, so the tests ran "
        "the test build's binary, not the instrumented one: the records of what they ran of it may match none of "
        "the binary's functions"
    )
    return False


def refuse_uncompiled(tests: CargoTestRun, log: str) -> None:
    if tests.compile_error is not None:
        raise TrainingFailed(
            f"the tests shard: the crate's tests did not compile instrumented: {tests.compile_error}", f"see {log}"
        )


def refuse_failed(tests: CargoTestRun, returncode: int, log: str) -> None:
    """A suite that did not compile, a failed test or a crashed test binary (named), or cargo's failure."""
    refuse_uncompiled(tests, log)
    if not tests.ok:
        raise TrainingFailed(
            f"the tests shard: {len(tests.failed_tests)} of the crate's tests failed under instrumentation "
            f"({summary_line(tests)}): {failed_named(tests) or 'no test ran'}",
            f"see {log}; a test that fails only instrumented (timing, a path) can be skipped with #[cfg_attr(…, "
            "ignore)], or drop tests from PGO_WORKLOAD",
        )
    if returncode != 0:
        raise TrainingFailed(
            f"the tests shard: cargo test exited with code {returncode} though every test passed "
            f"({summary_line(tests)})",
            f"see {log}",
        )


# -- the merge's side


def binary_records(workload_shards: Iterable[Mapping[str, int]]) -> set[str]:
    """The instrumented binary's functions: the records of the shards that ran it (each raw profile of a binary
    holds a record of every function it instruments, executed or not)."""
    return {name for counts in workload_shards for name in counts}


def binary_only(counts: Mapping[str, int], binary: set[str]) -> dict[str, int]:
    """The records of ``counts`` that are the binary's functions."""
    return {name: count for name, count in counts.items() if name in binary}


def binary_summary(summary: ProfileSummary, counts: Mapping[str, int]) -> ProfileSummary:
    """``summary`` with its functions and executed functions counted among ``counts`` (the binary's only)."""
    executed = sum(1 for count in counts.values() if count)
    return ProfileSummary(len(counts), executed, summary.total_count)


def refuse_unreaching(counts: Mapping[str, int], binary: set[str], crate_names: Iterable[str]) -> None:
    """A tests shard that executes none of the main crate's functions in the binary: all it adds is records of code
    the binary does not have (the binary's entry point ``main`` and some generic code may share a name with the
    harness's: they are not what the shard is for)."""
    crates = tuple(crate_names)
    own = {name for name in binary if checks.of_crate(name, crates)}
    if not any(count for name, count in counts.items() if name in own):
        matching = len(set(counts) & binary)
        raise CheckFailed(
            f"the shard {TESTS_SHARD} executed none of the main crate's {len(own)} functions in the binary: of its "
            f"{len(counts)} records, {matching} are named as the binary's functions and {len(counts) - matching} are "
            "the test build's own (cfg(test) code, the test harness)",
            "the crate's tests do not run the code the binary ships (integration tests that run the binary, or call "
            f"its library, do): drop {TESTS_SHARD} from PGO_WORKLOAD",
        )


def add_fields(
    record: ShardRecord,
    counts: Mapping[str, int],
    others_executed: set[str],
    binary: set[str],
    crate_names: Iterable[str],
) -> None:
    """The tests shard's own keys of its record in report.json: how many of its records are the binary's functions
    and how many are not, and how many of the main crate's functions it executed that no other shard did."""
    names = set(counts)
    matching = len(names & binary)
    reached = {name for name, count in counts.items() if count and name in binary and name not in others_executed}
    crates = tuple(crate_names)
    record["records_matching_binary"] = matching
    record["records_not_matching_binary"] = len(names) - matching
    record["main_crate_only_this_shard"] = sum(1 for name in reached if checks.of_crate(name, crates))
