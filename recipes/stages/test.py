"""The pgo-test stage: the crate's test suite compiled with the profile (``PGO_TEST=1``, ``nox -s pgo-test``).

The suite is built exactly as the optimised binary was: the same cargo command (``cargo test``, or
``cargo-zigbuild test`` for ``cargo zigbuild``), the same target, the same per-target rustflags string with
``-Cprofile-use=<store path>``, in its own target dir (``<work>/test-target``), with ``--no-fail-fast``.
A failing test, a crashed test binary or a suite that does not compile fails the stage and names what
failed. The optimised binary, already checked by ``optimise``, stays where ``report.json`` says it is: the
stage's failure is recorded under ``test`` for whoever ships it to see.

Its log is read by ``recipes/toolchain/cargo/testlog.py``.
"""

from __future__ import annotations

from pathlib import Path

from recipes import report
from recipes.errors import CheckFailed
from recipes.llvm import checks, profdata
from recipes.plan import BuildPlan, clean_package
from recipes.results import OptimiseResult, Report, TestResult
from recipes.runner import run, say
from recipes.stages import _observe
from recipes.stages.frame import StageFrame
from recipes.toolchain import zig
from recipes.toolchain.cargo import invocation as cargo_command
from recipes.toolchain.cargo import log as cargo_log
from recipes.toolchain.cargo.metadata import CrateInfo
from recipes.toolchain.cargo.testlog import CargoTestRun, failed_named, parse_cargo_test, summary_line
from recipes.toolchain.rustc import find_profdata, rustc_sysroot


def test(plan: BuildPlan, *, handed: Report | None = None) -> TestResult:
    """Build and run the test suite with the optimised build's profile and flags; fail on any failure.

    A failing suite never moves the optimised binary, which passed its own checks: the failure is in
    ``report.json``'s ``test`` and in the stage's error.
    """
    with StageFrame(plan, "test") as frame:
        return _test(plan, frame, handed)


def _test(plan: BuildPlan, frame: StageFrame, handed: Report | None) -> TestResult:
    optimised = report.require(plan.work, "optimise", "test", handed)  # refuses a failed optimise record too
    checks.refuse_other_build(
        optimised,
        cargo=plan.config.cargo,
        target=plan.target,
        earlier="the optimised build",
        now="the test suite would be",
    )
    _observe.refuse_silencing_rustflags(plan)
    checks.refuse_silencing_flags(optimised.rustflags.split(), f"the optimised build's {plan.rustflags.var}")
    store_path = optimised.store_path
    sha = plan.store.verify(store_path, "before the test build")
    test_dir = plan.workdir.test_target
    log = plan.logs / "test.log"
    env = dict(plan.env)
    env[plan.rustflags.var] = optimised.rustflags  # the very flags of the optimised build
    env = _observe.observing(plan, env, "test")
    say(f"test: the test suite of {plan.crate.package} with profile {store_path}, in {test_dir}")
    clean_package(plan, test_dir, plan.logs / "test-clean.log")
    done = run(suite_argv(plan, test_dir), env=env, log=log, cwd=plan.cwd, check=False, what="cargo test")
    text = done.output()
    tests = parse_cargo_test(text)
    warnings = cargo_log.profile_warnings(text, _left_out(plan, optimised))
    result = TestResult(
        seconds=0.0,  # the frame's
        store_path=store_path,
        profile_sha256=sha,
        target_dir=test_dir,
        cargo_command=list(plan.config.cargo),
        target=plan.target,
        rustflags=env[plan.rustflags.var],
        exit_code=done.returncode,
        passed=tests.passed,
        failed=tests.failed,
        ignored=tests.ignored,
        failed_tests=tests.failed_tests,
        suites=[
            {"name": s.label(), "passed": s.passed, "failed": s.failed, "ignored": s.ignored, "finished": s.finished}
            for s in tests.suites
        ],
        missing_profile_functions=warnings.missing,
        stale_profile_warnings=warnings.stale,
        log=log,
    )
    say(f"test: {summary_line(tests)}")
    for name in tests.failed_tests:
        say(f"  FAILED {name}")
    # a failed check records the suite's results (its "failed" is their count) and that optimise's binary stays
    kept = {"optimised_binary_kept": optimised.binary}
    with frame.kept(lambda: result, reason="failed_check", only=CheckFailed, also=kept):
        plan.store.verify(store_path, "after the test build")
        _check(plan, tests, text, done.returncode, store_path, log)
    return frame.done(result)


def _left_out(plan: BuildPlan, optimised: OptimiseResult) -> dict[str, frozenset[int]] | None:
    """The records the optimised build's partial profile left out (its whole profile's never-run ones), so that the
    suite's functions without profile data are counted as the optimised build's are; None: it read the whole one."""
    if not optimised.partial or optimised.whole_profile is None or not optimised.whole_profile.is_file():
        return None
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    return profdata.never_run_records(tool, optimised.whole_profile, env=plan.env, log=plan.logs / "test-whole.log")


def suite_argv(plan: BuildPlan, test_dir: Path) -> list[str]:
    """``cargo test`` of the build's cargo command (``cargo-zigbuild test``), target, features, ``--locked``, in
    ``test_dir``, ``--no-fail-fast``: pgo-test's, and the tests shard's (recipes/stages/tests_shard.py)."""
    argv = cargo_command.build_argv(
        zig.cargo_test_argv(plan.config.cargo),
        crate=plan.crate,
        target=plan.target,
        features=plan.config.features,
        locked=plan.config.locked,
        target_dir=test_dir,
        subcommand="test",
        message_format=cargo_command.MESSAGE_FORMAT,  # the test harnesses, named by cargo (the text stays as it was)
    )
    return [*argv, "--no-fail-fast"]


def compiled_crates(text: str, crate: CrateInfo) -> list[cargo_log.RustcCall]:
    """The rustc lines of the package's own crates for the target: lib, bin and their test harnesses.

    rustdoc's doc-test lines are left out: rustdoc does not take the target's rustflags.
    """
    return [
        call
        for call in cargo_log.rustc_calls(text)
        if call.target is not None and call.compiler != "rustdoc" and cargo_log.is_own_crate(call, crate)
    ]


def _check(plan: BuildPlan, tests: CargoTestRun, text: str, returncode: int, store_path: Path, log: Path) -> None:
    if tests.compile_error is not None:
        raise CheckFailed(f"the test suite did not compile with the profile: {tests.compile_error}", f"see {log}")
    if not tests.ok:
        total = tests.passed + tests.failed
        raise CheckFailed(
            f"the test suite compiled with the profile failed: {len(tests.failed_tests)} of {total} failed "
            f"({summary_line(tests)}): {failed_named(tests)}",
            f"see {log}; run `cargo test` without the profile to tell a broken test from a profile-related one",
        )
    if returncode != 0:
        raise CheckFailed(
            f"cargo test exited with code {returncode} though every test passed ({summary_line(tests)})",
            f"see {log}",
        )
    calls = compiled_crates(text, plan.crate)
    if not calls:
        raise CheckFailed(f"the test log has no rustc line of {plan.crate.package}", f"see {log}")
    for call in calls:
        used = call.codegen("profile-use")
        if used != str(store_path):
            raise CheckFailed(
                f"the test build compiled {call.crate_name} with profile-use={used!r}, not {store_path}",
                f"see {log}",
            )
    # what cargo asked for (its log), then what rustc received (the RUSTC shim's records): a wrapper between them
    _observe.check_profile_flag(
        plan, "test", "the test build", option="profile-use", value=str(store_path), harnesses=True
    )
    _observe.check_profile_use(plan, "test", "the test build", cargo_log=text, ships=False)
