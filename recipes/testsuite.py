"""The crate's test suite compiled with the profile (``PGO_TEST=1``, ``nox -s pgo-test``).

The suite is built exactly as the optimised binary was: the same cargo command (``cargo test``, or
``cargo-zigbuild test`` for ``cargo zigbuild``), the same target, the same per-target rustflags string with
``-Cprofile-use=<store path>``, in its own target dir (``<work>/test-target``), with ``--no-fail-fast``.
A failing test, a crashed test binary or a suite that does not compile fails the stage and names what
failed. The optimised binary, already checked by ``optimise``, stays where ``report.json`` says it is: the
stage's failure is recorded under ``test`` for whoever ships it to see.

Only test binaries count as suites: in ``cargo test -v`` a ``Running `…` `` command is also a rustc or rustdoc
line, a build script (``…/build/<pkg>-<hash>/build-script-build``) or anything else cargo runs; a test binary
is the one in a ``deps`` directory (``…/deps/<name>-<hash>``), possibly behind a runner (qemu).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from recipes import cargo, checks, report, zig
from recipes.errors import CheckFailed, MissingInput
from recipes.results import OptimiseResult, TestResult
from recipes.runner import run, say

if TYPE_CHECKING:
    from recipes.stages import BuildPlan


@dataclass
class Suite:
    """One test binary (or the doc-tests) of a ``cargo test`` run."""

    name: str
    planned: int = 0
    passed: int = 0
    failed: int = 0
    ignored: int = 0
    finished: bool = False  # its "test result:" line was seen
    failed_tests: list[str] = field(default_factory=list)
    rerun: str | None = None  # cargo's "to rerun pass `--lib`"
    crash: str | None = None  # cargo's "process didn't exit successfully: … (signal: …)"

    def label(self) -> str:
        return self.rerun or self.name


@dataclass
class CargoTestRun:
    """What a ``cargo test`` log says: every suite, and whether the suite compiled at all."""

    suites: list[Suite]
    compile_error: str | None

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.suites)

    @property
    def failed(self) -> int:
        return sum(s.failed for s in self.suites)

    @property
    def ignored(self) -> int:
        return sum(s.ignored for s in self.suites)

    @property
    def crashed(self) -> list[Suite]:
        return [s for s in self.suites if not s.finished]

    @property
    def failed_tests(self) -> list[str]:
        """``name (suite)`` of every failed test, then every crashed suite."""
        names = [f"{test} ({suite.label()})" for suite in self.suites for test in suite.failed_tests]
        names += [f"{suite.label()} crashed: {suite.crash or 'no test result'}" for suite in self.crashed]
        return names

    @property
    def ok(self) -> bool:
        return self.compile_error is None and self.failed == 0 and not self.crashed and bool(self.suites)


# the test binaries of `cargo test` without -v: "Running unittests src/lib.rs (target/…/deps/name-hash)"
_RUNNING_SOURCE = re.compile(r"^\s+Running (?P<source>[^`].*?) \((?P<path>[^)]+)\)\s*$")
_DOC_TESTS = re.compile(r"^\s+Doc-tests (?P<crate>\S+)\s*$")
_PLANNED = re.compile(r"^running (?P<count>\d+) tests?$")
_TEST_LINE = re.compile(r"^test (?P<name>.+?) \.\.\. (?P<outcome>ok|FAILED|ignored)\b")
_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (?P<passed>\d+) passed; (?P<failed>\d+) failed; (?P<ignored>\d+) ignored;"
)
_RERUN = re.compile(r"^error: test failed, to rerun pass `(?P<spec>[^`]+)`")
_CRASH = re.compile(r"^\s+process didn't exit successfully: `(?P<path>[^`]+)` \((?P<why>.+)\)\s*$")
_COMPILE_ERROR = re.compile(r"^error: (?:could not compile|failed to run custom build command for) .*$")
_HASH_SUFFIX = re.compile(r"-[0-9a-f]{16}$")


def _suite_name(path: str) -> str:
    """``…/deps/cli-a712c6cdef17884d`` -> ``cli``."""
    return _HASH_SUFFIX.sub("", Path(path.split(maxsplit=1)[0]).name)


def binary_under_test(invocation: cargo.Invocation, harnesses: frozenset[str] = frozenset()) -> str | None:
    """The path of the test binary ``invocation`` runs, or ``None`` for a compiler, a build script or other.

    ``harnesses``: the test executables cargo's JSON messages named (``--message-format=json…``); with them a
    test binary is one of those. Without them: a test harness is built into ``deps/`` as
    ``<name>-<16 hex digits>``; cargo runs it directly, or with the target's runner first
    (``qemu-x86_64 …/deps/cli-…``). rustc and rustdoc lines name ``deps`` paths too, only as values of their
    options.
    """
    if "--crate-name" in invocation.argv or any(
        Path(word).name in ("rustc", "rustdoc") for word in invocation.argv[:2]
    ):
        return None
    if harnesses:
        return next((word for word in invocation.argv if word in harnesses), None)
    for word in invocation.argv:
        path = Path(word)
        if path.parent.name == "deps" and _HASH_SUFFIX.search(path.name) and "=" not in word:
            return word
    return None


def parse_cargo_test(text: str) -> CargoTestRun:
    """Parse the log of ``cargo test --no-fail-fast`` (``-v`` or not): suites, counts, failed tests."""
    suites: list[Suite] = []
    current: Suite | None = None
    compile_error = None
    invocations = {inv.first_line: inv for inv in cargo.running_invocations(text)}
    harnesses = frozenset(str(path) for _, path in cargo.harness_executables(text))
    inside = 0  # the last line of the command being skipped
    for number, line in enumerate(text.split("\n")):
        if number < inside:
            continue  # a further line of a command that covers several (a quoted newline)
        if (invocation := invocations.get(number)) is not None:
            inside = invocation.last_line + 1
            if (binary := binary_under_test(invocation, harnesses)) is not None:
                current = Suite(_suite_name(binary))
                suites.append(current)
            continue  # rustc, rustdoc, a build script: not a suite
        if match := _RUNNING_SOURCE.match(line):
            current = Suite(_suite_name(match.group("path")))
            suites.append(current)
        elif match := _DOC_TESTS.match(line):
            current = Suite(f"doc-tests {match.group('crate')}")
            suites.append(current)
        elif current is not None and (match := _PLANNED.match(line)):
            current.planned = int(match.group("count"))
        elif current is not None and (match := _TEST_LINE.match(line)):
            if match.group("outcome") == "FAILED":
                current.failed_tests.append(match.group("name").removesuffix(" - should panic"))
        elif current is not None and (match := _RESULT.match(line)):
            current.passed = int(match.group("passed"))
            current.failed = int(match.group("failed"))
            current.ignored = int(match.group("ignored"))
            current.finished = True
        elif match := _RERUN.match(line):
            # cargo names the target that failed right after its suite's output (or its crash)
            if suites:
                suites[-1].rerun = match.group("spec")
        elif match := _CRASH.match(line):
            crashed = [s for s in suites if not s.finished and s.name == _suite_name(match.group("path"))]
            if crashed:
                crashed[-1].crash = match.group("why")
        elif compile_error is None and (match := _COMPILE_ERROR.match(line)):
            compile_error = match.group(0)
    return CargoTestRun(suites, compile_error)


def summary_line(tests: CargoTestRun) -> str:
    """``9 passed, 1 failed, 1 ignored`` (and the crashed suites)."""
    line = f"{tests.passed} passed, {tests.failed} failed, {tests.ignored} ignored"
    if tests.crashed:
        line += f", {len(tests.crashed)} test binaries crashed"
    return line


def _optimised(plan: BuildPlan) -> OptimiseResult:
    optimised = report.require(plan.work, "optimise", "test")
    if "failed" in optimised:
        raise MissingInput(
            "the last optimised build failed its checks: there is no profile build to test",
            "run `nox -s optimise` (or `nox -s pgo`) again first",
        )
    checks.refuse_other_build(
        optimised,
        cargo=plan.config.cargo,
        target=plan.target,
        earlier="the optimised build",
        now="the test suite would be",
    )
    return optimised


def run_test_stage(
    plan: BuildPlan,
    *,
    clean: Callable[[BuildPlan, Path | None, Path], None],
    reject: Callable[..., Path] | None = None,
) -> TestResult:
    """Build and run the test suite with the optimised build's profile and flags; fail on any failure.

    ``reject`` is accepted and not used: a failing suite never moves the optimised binary, which passed its
    own checks; the failure is in ``report.json``'s ``test`` and in the stage's error.
    """
    del reject
    start = time.monotonic()
    optimised = _optimised(plan)
    store_path = Path(optimised["store_path"])
    sha = plan.store.verify(store_path, "before the test build")
    test_dir = plan.work / "test-target"
    log = plan.logs / "test.log"
    env = dict(plan.env)
    env[plan.rustflags.var] = optimised["rustflags"]  # the very flags of the optimised build
    say(f"test: the test suite of {plan.crate.package} with profile {store_path}, in {test_dir}")
    clean(plan, test_dir, plan.logs / "test-clean.log")
    argv = cargo.build_argv(
        zig.cargo_test_argv(plan.config.cargo),
        crate=plan.crate,
        target=plan.target,
        features=plan.config.features,
        locked=plan.config.locked,
        target_dir=test_dir,
        subcommand="test",
        message_format=cargo.MESSAGE_FORMAT,  # the test harnesses, named by cargo (the text stays as it was)
    )
    done = run([*argv, "--no-fail-fast"], env=env, log=log, cwd=plan.cwd, check=False, what="cargo test")
    text = done.output()
    tests = parse_cargo_test(text)
    warnings = cargo.profile_warnings(text)
    result: TestResult = {
        "seconds": 0.0,
        "store_path": str(store_path),
        "profile_sha256": sha,
        "target_dir": str(test_dir),
        "cargo_command": list(plan.config.cargo),
        "target": plan.target,
        "rustflags": env[plan.rustflags.var],
        "exit_code": done.returncode,
        "passed": tests.passed,
        "failed": tests.failed,
        "ignored": tests.ignored,
        "failed_tests": tests.failed_tests,
        "suites": [
            {"name": s.label(), "passed": s.passed, "failed": s.failed, "ignored": s.ignored, "finished": s.finished}
            for s in tests.suites
        ],
        "missing_profile_functions": warnings.missing,
        "stale_profile_warnings": warnings.stale,
        "log": str(log),
    }
    say(f"test: {summary_line(tests)}")
    for name in tests.failed_tests:
        say(f"  FAILED {name}")
    try:
        plan.store.verify(store_path, "after the test build")
        _check(plan, tests, text, done.returncode, store_path, log)
    except CheckFailed as error:
        result["seconds"] = round(time.monotonic() - start, 3)
        result["failed_check"] = error.line()
        result["optimised_binary_kept"] = optimised["binary"]
        report.record(plan.work, "test", result)
        raise
    result["seconds"] = round(time.monotonic() - start, 3)
    report.record(plan.work, "test", result)
    return result


def compiled_crates(text: str, crate: cargo.CrateInfo) -> list[cargo.RustcCall]:
    """The rustc lines of the package's own crates for the target: lib, bin and their test harnesses.

    rustdoc's doc-test lines are left out: rustdoc does not take the target's rustflags.
    """
    return [
        call
        for call in cargo.rustc_calls(text)
        if call.target is not None and call.compiler != "rustdoc" and cargo.is_own_crate(call, crate)
    ]


def _check(plan: BuildPlan, tests: CargoTestRun, text: str, returncode: int, store_path: Path, log: Path) -> None:
    if tests.compile_error is not None:
        raise CheckFailed(f"the test suite did not compile with the profile: {tests.compile_error}", f"see {log}")
    if not tests.ok:
        total = tests.passed + tests.failed
        shown = "; ".join(tests.failed_tests[:5]) + (" …" if len(tests.failed_tests) > 5 else "")
        raise CheckFailed(
            f"the test suite compiled with the profile failed: {len(tests.failed_tests)} of {total} failed "
            f"({summary_line(tests)}): {shown}",
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
