"""The plain build: the release build without a profile, by the same cargo command, for the same target, with the
same features and base rustflags as the PGO build, in a target dir of its own. ``nox -s bench`` / ``nox -s plain``
(:func:`compared`) and ``nox -s release`` (in its reproducible plan) run it as a stage (:func:`plain`, in
its frame: recorded in report.json as ``plain``); :func:`build` is the build itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes import report
from recipes.errors import CommandFailed, MissingInput
from recipes.llvm import boltlib
from recipes.plan import BuildPlan, clean_package
from recipes.results import CCrateRecord, OptimiseResult, PlainResult
from recipes.runner import run, say
from recipes.stages import _observe
from recipes.stages.frame import StageFrame
from recipes.store import sha256_file
from recipes.toolchain import cflags
from recipes.toolchain.cargo import log as cargo_log
from recipes.toolchain.rustflags import env_with_rustflags, plain_env


@dataclass(frozen=True)
class PlainBuild:
    """The binary the plain build left, and the crate identities (``-C metadata``) of its rustc lines."""

    binary: Path
    crate_metadata: dict[str, str]
    c_crates: list[CCrateRecord]  # each crate whose build script compiled C for the target, and its compilers


def build(
    plan: BuildPlan,
    target_dir: Path,
    *,
    log: Path,
    announce: str,
    link: Sequence[str] = (),
    clean_log: Path | None = None,
) -> PlainBuild:
    """The plain build in ``target_dir``, announced by the progress line ``announce``, its output in ``log``;
    ``link``: flags it adds to the base ones (the link for BOLT); ``clean_log``: the package is cleaned first.

    Its target C and C++ are compiled as the PGO build's are but for the profile: by the same clang when the C is
    profiled (the ``CC_<triple>`` wrapper, without ``-fprofile-use``), with the plan's C flags."""
    env = env_with_rustflags(plan.env, plan.rustflags, link) if link else plain_env(plan.env, plan.rustflags)
    env = cflags.c_env(plan.c, env, [], plan.workdir.bin, optimise=False)
    env = _observe.observing(plan, env, log.stem)
    say(announce)
    if clean_log is not None:
        clean_package(plan, target_dir, clean_log)
    try:
        done = run(plan.build_argv(target_dir), env=env, log=log, cwd=plan.cwd, what="the plain build")
    except CommandFailed:
        cflags.refuse_clang_cannot_build(plan.c, log)
        raise
    _observe.refuse_instrumented(plan, log.stem, "the plain build")  # run by the plan's compiler, not instrumented
    binary = plan.binary(target_dir)
    if not binary.is_file():
        raise MissingInput(f"the plain build left no binary at {binary}", f"see {done.log}")
    crates = cflags.c_crates(plan.c, plan.rustc, target_dir, log_text=done.output(), flag="-fprofile-use")
    return PlainBuild(binary, cargo_log.crate_identities(done.output(), plan.crate), crates)


def plain(
    plan: BuildPlan, *, log: Path, announce: str, link: Sequence[str] = (), clean_log: Path | None = None
) -> tuple[PlainResult, PlainBuild]:
    """The plain stage: :func:`build` in ``<work>/plain-target``, in its frame, recorded as ``plain`` (its binary,
    target, cargo command and rustflags: the base ones and ``link``); the record and the build."""
    with StageFrame(plan, "plain") as frame:
        built = build(plan, plan.workdir.plain_target, log=log, announce=announce, link=link, clean_log=clean_log)
        result = PlainResult(
            binary=built.binary,
            binary_sha256=sha256_file(built.binary),
            target=plan.target,
            cargo_command=list(plan.config.cargo),
            rustflags=" ".join([*plan.rustflags.base, *link]),
            seconds=0.0,  # the frame's
            c_code=plan.c.record(built.c_crates),
        )
        return frame.done(result), built


def link_flags(plan: BuildPlan) -> list[str]:
    """What the plain build adds to the base flags the PGO build shares: its link for BOLT (``--emit-relocs``)
    when the work dir's PGO binary was linked so, or PGO_BOLT=1 asks for it, so that the two binaries differ
    in the profile alone."""
    optimised = report.load(plan.work).optimise
    relocs = plan.config.bolt or (isinstance(optimised, OptimiseResult) and optimised.emit_relocs)
    return [boltlib.EMIT_RELOCS] if relocs else []


def compared(plan: BuildPlan, prefix: str = "bench: ") -> PlainResult:
    """``nox -s plain`` and the bench's baseline: the plain stage recorded in report.json as ``plain`` (what bench
    compares the PGO binary with by default, and a binary to ship or compare), with the link of :func:`link_flags`;
    ``prefix``: the session's, on its progress line (``""`` in ``nox -s plain``)."""
    result, _ = plain(
        plan,
        log=plan.logs / "bench-plain-build.log",
        announce=f"{prefix}the plain build of {plan.crate.package} in {plan.workdir.plain_target}",
        link=link_flags(plan),
    )
    return result
