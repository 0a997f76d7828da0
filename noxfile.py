# /// script
# dependencies = ["nox>=2025.2.9", "filelock>=3.12", "packaging>=23", "pyelftools>=0.31"]
# ///
"""pgo-recipes: profile-guided optimised builds of a Rust crate, as Nox sessions.

    nox -s instrument | train | merge | optimise     the stages, each runnable alone
    nox -s pgo                                       all four, every check on
    nox -s pgo-test                                  the test suite built with the profile
    nox -s cpu-baseline -- [--binary P] [--run A…]   the binary under an emulated SSE2-only CPU
    nox -s bench -- [--scenarios a,b] [--trials N]   CPU time per request: plain vs PGO (or any two)
    nox -s release -- vX.Y.Z | rebuild -- vX.Y.Z     reproducible release artefacts; rebuild the PGO one
    nox -s determinism                               two builds from the profile alone must be identical
    nox -s tests | lint                              this project's own checks

Configuration: [tool.pgo] in pyproject.toml, then PGO_* variables, then posargs (--min-functions 10).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nox

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # nox does not put the noxfile's folder on sys.path

from recipes import cpu, report, stages  # noqa: E402
from recipes.config import load_config  # noqa: E402
from recipes.errors import PgoError  # noqa: E402

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]


def _stage(session: nox.Session, action: Callable[[stages.BuildPlan], Any]) -> None:
    """Run one recipe with the session's configuration; a known failure is one line, not a traceback."""
    try:
        config = load_config(HERE, os.environ, session.posargs)
        plan = stages.make_plan(config, os.environ)
        action(plan)
        for line in stages.summary_lines(report.load(plan.work)):
            session.log(line)
    except PgoError as error:
        session.error(error.line())


@nox.session(venv_backend="none")
def instrument(session: nox.Session) -> None:
    """Build the instrumented binary (-Cprofile-generate) in its own target dir."""
    _stage(session, stages.instrument)


@nox.session(venv_backend="none")
def train(session: nox.Session) -> None:
    """Run the training workload (profiles/<workload>.toml) on the instrumented binary."""
    _stage(session, stages.train)


@nox.session(venv_backend="none")
def merge(session: nox.Session) -> None:
    """Merge the raw profiles with rustc's own LLVM's llvm-profdata; check the executed-function floor."""
    _stage(session, stages.merge)


@nox.session(venv_backend="none")
def optimise(session: nox.Session) -> None:
    """Build with -Cprofile-use from the profile store, and check the result."""
    _stage(session, stages.optimise)


@nox.session(venv_backend="none")
def pgo(session: nox.Session) -> None:
    """All four stages in order, every check on."""
    _stage(session, stages.pgo)


@nox.session(name="pgo-test", venv_backend="none")
def pgo_test(session: nox.Session) -> None:
    """The test suite compiled with the optimised build's profile, flags and target (<work>/test-target)."""
    _stage(session, stages.test)


@nox.session(name="cpu-baseline", venv_backend="none")
def cpu_baseline(session: nox.Session) -> None:
    """The binary under an emulated SSE2-only CPU (qemu-user); posargs: [--binary PATH] [--run ARG...]."""
    try:
        result = cpu.cpu_baseline(HERE, os.environ, session.posargs)
    except PgoError as error:
        session.error(error.line())
    for line in cpu.summary_lines(result):
        session.log(line)


#: what the test suite runs, and the Debian package of each (.ci/run installs them)
TEST_PROGRAMS = {
    "cargo": "rustup (https://rustup.rs)",
    "llvm-profdata-22": "llvm-22",
    "llvm-profdata-14": "llvm-14",
    "h2load": "nghttp2-client",
    "qemu-x86_64": "qemu-user",
    "strip": "binutils",
    "openssl": "openssl",
    "curl": "curl",
    "ss": "iproute2",
    "gcc": "gcc",
}


@nox.session
def tests(session: nox.Session) -> None:
    """This project's test suite (real cargo, rustc and llvm-profdata); posargs go to pytest."""
    missing = {program: package for program, package in TEST_PROGRAMS.items() if not shutil.which(program)}
    if missing:
        packages = " ".join(sorted(p for p in set(missing.values()) if " " not in p))
        session.error(
            f"the tests need {', '.join(missing)}: apt-get update && apt-get install -y {packages}"
            + (" (and cargo: https://rustup.rs)" if "cargo" in missing else "")
        )
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy (strict) over recipes, the noxfile and the tests."""
    session.install("-e", ".[test]")
    session.run("ruff", "check", ".")
    session.run("mypy")


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """CPU time per request of the plain and the PGO build (or --baseline/--candidate PATH), trials interleaved.

    Posargs: --scenarios a,b --trials N --scale F --server-core N --load-core N (see recipes/bench/cli.py).
    """
    from recipes.bench import cli as bench_cli  # noqa: PLC0415  (imported here: the other sessions need none of it)

    try:
        bench_cli.parse_args(session.posargs)  # a bad argument is refused before anything is installed or built
        session.install("-e", ".[bench]")
        outcome = bench_cli.run(HERE, os.environ, session.posargs)
        session.run("python", "-m", "recipes.bench.report", "chart", str(outcome.json), str(outcome.chart))
        for line in outcome.summary_lines():
            session.log(line)
        outcome.check()
    except PgoError as error:
        session.error(error.line())


def _release_session(session: nox.Session, name: str, *, needs_tag: bool = True) -> None:
    """The release sessions: a positional tag first (``-- v1.2.3``), then --artefacts DIR and config options."""
    from recipes import rebuild as rebuild_recipe  # noqa: PLC0415
    from recipes import release as release_recipe  # noqa: PLC0415
    from recipes.reproducible import split_tag, take_option  # noqa: PLC0415

    try:
        tag, rest = split_tag(session.posargs, name) if needs_tag else ("", list(session.posargs))
        artefacts, rest = take_option(rest, "--artefacts") if needs_tag else (None, rest)
        config = load_config(HERE, os.environ, rest)
        where = Path(artefacts).absolute() if artefacts else None
        if name == "release":
            manifest = release_recipe.release(tag, config, os.environ, where)
            out_dir = where or Path(manifest["artefacts_dir"])
            for line in release_recipe.summary_lines(manifest, out_dir):
                session.log(line)
        elif name == "rebuild":
            for line in rebuild_recipe.rebuild(tag, config, os.environ, where)["lines"]:
                session.log(line)
        else:
            result = rebuild_recipe.determinism(config, os.environ)
            session.log(f"identical: {result['binary_sha256'][0]} ({' and '.join(result['binaries'])})")
    except PgoError as error:
        session.error(error.line())


@nox.session(venv_backend="none", default=False)
def release(session: nox.Session) -> None:
    """-- vX.Y.Z: on a clean checkout of the tag, the plain and the PGO build, stripped, in dist/vX.Y.Z/.

    Tarballs, the profile, a manifest and SHA256SUMS, all reproducible (SOURCE_DATE_EPOCH, remapped paths).
    """
    _release_session(session, "release")


@nox.session(venv_backend="none", default=False)
def rebuild(session: nox.Session) -> None:
    """-- vX.Y.Z [--artefacts DIR]: rebuild a release's PGO binary from its profile and compare with SHA256SUMS."""
    _release_session(session, "rebuild")


@nox.session(venv_backend="none", default=False)
def determinism(session: nox.Session) -> None:
    """Build HEAD twice from the profile alone (PGO_PROFDATA or the last merge) in two work dirs; compare."""
    _release_session(session, "determinism", needs_tag=False)
