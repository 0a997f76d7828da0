"""The log of ``cargo test -v``: which test binaries ran, how many tests each planned, passed, failed or
ignored, and which crashed; pure, tested on captured logs (``tests/unit/test_testsuite.py``).

Only test binaries count as suites: in ``cargo test -v`` a ``Running `…` `` command is also a rustc or rustdoc
line, a build script (``…/build/<pkg>-<hash>/build-script-build``) or anything else cargo runs; a test binary
is the one in a ``deps`` directory (``…/deps/<name>-<hash>``), possibly behind a runner (qemu).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from recipes.toolchain.cargo.log import Invocation, harness_executables, running_invocations


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


def binary_under_test(invocation: Invocation, harnesses: frozenset[str] = frozenset()) -> str | None:
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
    deps = (word for word in invocation.argv if Path(word).parent.name == "deps" and "=" not in word)
    return next((word for word in deps if _HASH_SUFFIX.search(Path(word).name)), None)


def parse_cargo_test(text: str) -> CargoTestRun:
    """Parse the log of ``cargo test --no-fail-fast`` (``-v`` or not): suites, counts, failed tests."""
    suites: list[Suite] = []
    current: Suite | None = None
    compile_error = None
    invocations = {inv.first_line: inv for inv in running_invocations(text)}
    harnesses = frozenset(str(path) for _, path in harness_executables(text))
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


#: how many failed tests a refusal names
NAMED = 5


def failed_named(tests: CargoTestRun) -> str:
    """The first :data:`NAMED` failed tests, ``; ``-separated (`` …`` when there are more)."""
    return "; ".join(tests.failed_tests[:NAMED]) + (" …" if len(tests.failed_tests) > NAMED else "")
