"""What ``nox -s bench`` compares by default: the plain build and the PGO build of the same tree.

The PGO binary is the one the work dir's pipeline made (``report.json`` "optimise", checked against its
recorded sha256), or the pipeline is run. The plain one is built by the same cargo command, for the same
target, with the same features and the same base rustflags, without profile flags, in its own target
dir (``<work>/plain-target``). Both are copied to ``<work>/bench/bin/`` so that a later build in the
target dirs cannot change what is being measured.
"""

from __future__ import annotations

import os
from pathlib import Path

from recipes import report
from recipes.bench.settings import Build
from recipes.claim import check_own_optimised
from recipes.errors import BenchError, CheckFailed, MissingInput
from recipes.files import copy_atomically
from recipes.llvm import elf
from recipes.llvm.carry import VIEW_FLAG
from recipes.plan import BuildPlan
from recipes.results import CCodeRecord, CCrateRecord, OptimiseResult
from recipes.runner import say
from recipes.stages.pipeline import pgo
from recipes.stages.plain import link_flags
from recipes.store import sha256_file
from recipes.toolchain import cflags, emulation
from recipes.toolchain.rustflags import profile_flags_in
from recipes.workdir import WorkDir

#: flags of the optimised build that are its profile, not flags both builds share: LLVM's warnings, and its dumps of
#: the functions that read a carried profile (PGO_CARRY), which change no byte of the binary
PROFILE_ONLY_FLAGS = ("-Cllvm-args=-pgo-warn-missing-function", VIEW_FLAG)


def shared_flags(rustflags: str) -> list[str]:
    """The optimised build's rustflags without its profile flags: what the plain build must have too."""
    words = rustflags.split()
    profile = set(profile_flags_in(words))
    return [w for w in words if w not in profile and w not in PROFILE_ONLY_FLAGS]


def c_compilers_text(crates: list[CCrateRecord] | None) -> str:
    """What compiled a build's C and C++, for the bench table: each crate with C and its compilers (as they name
    themselves in the objects' ``.comment``; ``assembly`` for an assembled object, which names none); ``no C`` when
    no build script compiled any; ``""``: not known."""
    if crates is None:
        return ""
    if not crates:
        return "no C"
    return "; ".join(
        f"{c['crate']}: {', '.join('assembly' if name == cflags.ASSEMBLED else name for name in c['compilers'])}"
        for c in crates
    )


def built_c_compilers(plan: BuildPlan, target_dir: Path, log: Path) -> str:
    """What compiled the C of a build the bench made (the plain build, a variant), from its target dir and log."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return c_compilers_text(cflags.c_crates(plan.c, plan.rustc, target_dir, log_text=text, flag="-fprofile-use"))


def plain_c_compilers(plan: BuildPlan) -> str:
    """What compiled the bench's plain build's C (:func:`plain`'s target dir and log)."""
    return built_c_compilers(plan, plan.workdir.plain_target, plan.logs / "bench-plain-build.log")


def pgo_c_compilers(work: Path) -> str:
    """What compiled the work dir's PGO build's C (its optimise record), ``""`` when it is not recorded."""
    optimised = report.load(work).optimise
    c_code = optimised.c_code if isinstance(optimised, OptimiseResult) else None
    return c_compilers_text(c_code["crates"] if c_code else None)


def c_compilers_differ(recorded: CCodeRecord | None, plan_c: cflags.CPlan) -> str | None:
    """How the plain build's target C and C++ compilers (``plan_c``, this run's PGO_C and CC) would differ from
    those of the PGO build (its ``c_code`` record), when a crate of it compiled C; None when they would not. A
    ``PGO_C=0`` PGO build has its C compiled by the system's compiler: a plain build by clang beside it would
    mix the compiler with the profile."""
    if not recorded or not recorded["crates"]:
        return None
    for lang in plan_c.languages:
        language = recorded["languages"].get(lang.name)
        then = language["compiler"] if language is not None else None
        now = list(lang.compiler) if lang.compiler is not None else None
        if then != now:
            what = " ".join(then) if then else f"the system's {lang.var} (PGO_C={recorded['setting']})"
            would = " ".join(now) if now else f"the system's {lang.var} ({lang.off})"
            return f"the PGO binary's {lang.name} was compiled by {what} and the plain build's would be by {would}"
        listed = language.get("crates") if language is not None else None
        if now is not None and listed != (list(lang.crates) if lang.crates is not None else None):
            said = ", ".join(listed) if listed else "every package"
            would = ", ".join(lang.crates) if lang.crates else "every package"
            return (
                f"the PGO binary's {lang.name} was compiled by {' '.join(now)} for {said} and the plain build's "
                f"would be for {would} ({lang.chosen_by or 'no list of packages'})"
            )
    return None


def check_same_build(plan: BuildPlan, optimised: OptimiseResult) -> None:
    """The plain build would differ from the PGO one in more than the profile: refuse."""
    differ = c_compilers_differ(optimised.c_code, plan.c)
    if differ is not None:
        raise CheckFailed(
            differ,
            "run the bench with the PGO build's PGO_C (and CC, CXX, PGO_CLANG), so that both builds' C has one "
            "compiler, or compare with --baseline/--candidate",
        )
    plain = [*plan.rustflags.base, *link_flags(plan)]
    pgo = shared_flags(optimised.rustflags)
    if plain != pgo:
        raise CheckFailed(
            f"the plain build would get the rustflags {' '.join(plain) or '(none)'!r} and the PGO binary was built "
            f"with {' '.join(pgo) or '(none)'!r} besides its profile",
            "build both now: run `nox -s pgo` again with this environment, or compare with --baseline/--candidate",
        )
    recorded: tuple[tuple[str, object, object], ...] = (
        ("cargo_command", optimised.cargo_command, list(plan.config.cargo)),
        ("target", optimised.target, plan.target),
    )
    for key, then, now in recorded:
        if then != now:
            raise CheckFailed(
                f"the PGO binary was built with {key} {then!r} and the plain build would use {now!r}",
                "run `nox -s pgo` again with this configuration, or compare with --baseline/--candidate",
            )


def usable_pgo_optimised(work: Path) -> OptimiseResult | None:
    """The work dir's optimise record, if its last optimise passed and its binary is still what it recorded; a
    record naming a binary that is not the work dir's checked copy is refused (report.json may be hand-edited)."""
    optimised = report.load(work).optimise
    if not isinstance(optimised, OptimiseResult):
        return None
    check_own_optimised(WorkDir(work), optimised)
    if not optimised.binary.is_file() or sha256_file(optimised.binary) != optimised.binary_sha256:
        return None
    return optimised


def build_pgo(plan: BuildPlan) -> Path:
    """The PGO binary of the work dir, after running the pipeline when there is none (or it changed)."""
    optimised = usable_pgo_optimised(plan.work)
    if optimised is not None:
        say(f"bench: the PGO binary of {plan.work}: {optimised.binary}")
    else:
        say(f"bench: no checked PGO binary in {plan.work}: running the pipeline")
        pgo(plan)
        optimised = usable_pgo_optimised(plan.work)
        if optimised is None:
            raise MissingInput(f"the pipeline left no checked optimised binary in {plan.work}", "see report.json")
    check_same_build(plan, optimised)
    return optimised.binary


def check_executable(binary: Path, label: str) -> None:
    if not binary.is_file():
        raise MissingInput(f"{label}: no such binary {binary}", "give the path of an executable file")
    if not os.access(binary, os.X_OK):
        raise MissingInput(f"{label}: {binary} is not executable", "chmod +x it, or give another path")


def frozen_copy(binary: Path, bin_dir: Path, label: str) -> Build:
    """Copy ``binary`` to ``bin_dir/<label>-<name>`` (atomically) and describe it."""
    check_executable(binary, label)
    dest = bin_dir / f"{label.lower().replace(' ', '-')}-{binary.name}"
    copy_atomically(binary, dest)
    return Build(label=label, binary=dest, sha256=sha256_file(dest), origin=str(binary))


def _refuse_foreign(arch: str | None, what: str, measure: str) -> None:
    """One refusal for a binary (``what``: how it is named) of an architecture ``arch`` that is not the machine's:
    under emulation its CPU time says nothing of the binary, and valgrind runs the machine's architecture only."""
    host = emulation.host_arch()
    if arch is None or arch == host:
        return
    why = (
        "valgrind runs binaries of the machine's architecture only"
        if measure == "counts"
        else "CPU time under emulation says nothing of the binary"
    )
    raise BenchError(f"{what} and this machine is {host}: {why}", f"bench it on an {arch} machine")


def check_native(binary: Path, label: str, measure: str) -> None:
    """A binary of another architecture than the machine's is refused. A file that is not ELF (a script) runs
    here."""
    arch = elf.elf_arch_or_none(binary)
    _refuse_foreign(arch, f"{label}: {binary} is an {arch} binary", measure)


def check_native_target(target: str | None, measure: str) -> None:
    """``PGO_TARGET`` of another architecture: refused (as :func:`check_native`) before anything is built."""
    if target is not None:
        arch = emulation.triple_arch(target)
        _refuse_foreign(arch, f"PGO_TARGET={target} builds {arch} binaries", measure)
