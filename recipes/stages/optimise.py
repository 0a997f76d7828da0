"""The optimised build: the profile from the store, the build under a lock on the crate's target dir, every
check of the result, the training replayed (verify), then a checked copy in ``<work>/optimised/``; a binary that
fails a check goes to ``<work>/rejected/``."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any, NamedTuple

from filelock import FileLock, Timeout

from recipes import report
from recipes.errors import CheckFailed, CommandFailed, MissingInput, StoreError
from recipes.inputs import not_a_file
from recipes.llvm import boltlib, carry, checks, elf, profdata
from recipes.llvm.carry import Record
from recipes.plan import BuildPlan, clean_package
from recipes.results import (
    CarriedProfile,
    CCrateRecord,
    InstrumentResult,
    LostRecord,
    OptimiseResult,
    PlainResult,
    Report,
    json_of,
)
from recipes.runner import run, say
from recipes.stages import _observe
from recipes.stages.frame import StageFrame, run_on, threshold
from recipes.store import SUFFIX, sha256_file
from recipes.toolchain import cflags, zig
from recipes.toolchain.cargo import invocation as cargo_command
from recipes.toolchain.cargo import log as cargo_log
from recipes.toolchain.cargo import observed
from recipes.toolchain.rustc import ProfdataTool, find_profdata, rustc_sysroot
from recipes.toolchain.rustflags import env_with_rustflags, target_cpu_warning
from recipes.workload import Workload


def _profile_to_use(plan: BuildPlan, handed: Report | None) -> tuple[Path, bool, str | None]:
    """The profile of the optimised build, whether it came from this work dir's training, and its sha256 when the
    check of the training's profile computed it."""
    if plan.config.profdata is not None:
        if (what := not_a_file(plan.config.profdata)) is not None:
            said = what if what == "no such file" else f"{what}, not a regular file"
            raise MissingInput(f"PGO_PROFDATA={plan.config.profdata}: {said}", "give the path of a .profdata")
        return plan.config.profdata, False, None
    merged = report.require(plan.work, "merge", "optimise", handed)
    path = merged.profile
    if path != plan.merged_profile:  # report.json may be hand-edited: only this work dir's merge is used
        raise CheckFailed(
            f"report.json names {path} as the merged profile, not {plan.merged_profile} that merge writes",
            "optimise uses only the merge of this work dir: run `nox -s merge` again, or give PGO_PROFDATA",
        )
    if not path.is_file():
        raise MissingInput(f"the merged profile {path} is gone", "run `nox -s merge` again")
    if sha256_file(path) != merged.profile_sha256:
        raise StoreError(f"{path} changed since merge wrote it", "run `nox -s merge` again")
    return path, True, merged.profile_sha256


def optimise(plan: BuildPlan, *, verify: bool | None = None, handed: Report | None = None) -> OptimiseResult:
    """The optimised build from the store, then every check of the result, then a checked copy in the work dir.

    Clean, build, checks and copy hold a lock on the crate's target dir: several pipelines on one crate take
    turns, and the copy is the binary the checks saw."""
    with StageFrame(plan, "optimise") as frame:
        _observe.refuse_silencing_rustflags(plan)  # LLVM's warnings of a stale profile are what the checks read
        profile, trained_here, digest = _profile_to_use(plan, handed)
        tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
        if not trained_here:  # a given profile is checked before anything is built
            profdata.check_usable(
                tool, profile, env=plan.env, log=plan.logs / "optimise-profile-show.log", what="PGO_PROFDATA"
            )
        built = _prepared(plan, tool, profile, digest)
        with _target_dir_lock(plan):
            carried: CarriedProfile | None = None
            first: tuple[dict[str, str], str] | None = None
            if not trained_here and plan.config.carry:  # what fits this build of a profile of another version
                built, carried, first = _carry_forward(plan, frame, tool, built)
            return _build_and_check(
                plan, frame, built, trained_here=trained_here, verify=verify, handed=handed, carried=(carried, first)
            )


def _prepared(plan: BuildPlan, tool: ProfdataTool, profile: Path, digest: str | None) -> Profile:
    """The profile the build reads, put in the store: ``profile`` itself, or (partial training) ``profile`` without
    its never-run records, which stays where it is, checked unchanged. The checks judge the build against the whole
    profile: its records, and those a partial one left out."""
    store = plan.store
    if not plan.config.partial:
        store_path = store.put(profile, digest=digest)  # checked against its name, the copy or the one there
        sha = store_path.name.removesuffix(SUFFIX)
        log = plan.logs / "optimise-profile-functions.log"
        records = profdata.function_names(tool, store_path, env=plan.env, log=log)
        return Profile(store_path, sha, records, store_path, sha, None, None)
    whole_sha = digest or sha256_file(profile)
    rewritten = profdata.partial(
        tool,
        profile,
        plan.workdir.partial_profdata(plan.crate.bin),
        env=plan.env,
        log=plan.logs / "optimise-partial.log",
    )
    if sha256_file(profile) != whole_sha:
        raise StoreError(f"{profile} changed while its partial profile was written", "run optimise again")
    store_path = store.put(rewritten.path)
    say(partial_line(len(rewritten.records), len(rewritten.never_run)))
    sha = store_path.name.removesuffix(SUFFIX)
    return Profile(store_path, sha, rewritten.records, profile, whole_sha, rewritten.never_run, rewritten.counted)


def _carry_forward(
    plan: BuildPlan, frame: StageFrame, tool: ProfdataTool, profile: Profile
) -> tuple[Profile, CarriedProfile, tuple[dict[str, str], str]]:
    """A given profile matched to this build's functions (recipes/llvm/carry.py). The build with the profile as it is,
    whose warnings name each function without a record (with its CFG hash); when records must be re-keyed or left
    out, the profile written again and a second build, in which LLVM says each record it read. The profile, what
    survived of it, and the build to check (its environment and log)."""
    env = _optimised_env(plan, profile.store_path, trained_here=False)
    log_text = _run_build(plan, env)
    records = profile.counted  # read already when partial training rewrote the profile
    if records is None:
        shown = profdata.show_counts(tool, profile.whole, env=plan.env, log=plan.logs / "optimise-carry-show.log")
        records = profdata.parse_records(shown)
    first = carry.plan(records, carry.parse_build(log_text))
    floor = plan.config.min_survival
    if not first.changes or not carry.ours(first, plan.crate.crate_names):  # it fits as it is, or is another crate's
        return profile, _survived(plan, carry.survival(first), builds=1, profile=None), (env, log_text)
    out = plan.workdir.carried_profdata(plan.crate.bin)
    ran = sum(1 for r in first.rekeyed if r.count > 0)
    say(
        f"optimise: carry: the given profile is of another version of the crate: {len(first.renames)} records "
        f"renamed to this build's names ({ran} of functions the training ran), {len(first.drop)} of functions "
        f"edited under their own name left out, written to {out}; building again to see which it reads "
        "(PGO_CARRY=0: use it as it is)"
    )
    profdata.carried(
        tool, profile.whole, out, first.renames, first.drop, env=plan.env, log=plan.logs / "optimise-carry.log"
    )
    (plan.logs / "optimise-build.log").replace(plan.logs / "optimise-carry-build.log")  # the first build's, kept
    carried = _prepared(plan, tool, out, None)
    env = _optimised_env(plan, carried.store_path, trained_here=False, extra=(carry.VIEW_FLAG,))
    log_text = cargo_log.unmixed(_run_build(plan, env))
    survived = carry.survival(carry.settle(first, log_text))
    record = _survived(plan, survived, builds=2, profile=out)
    # a refusal keeps what survived in report.json's failed record; the binary built from it is not kept
    with frame.kept(lambda: {"carried": json_of(record)}, reject=("the optimised binary", plan.optimised_binary)):
        carry.refuse_below_floor(survived, floor, plan.config.source("min_survival"))
    return carried, record, (env, log_text)


def _survived(plan: BuildPlan, survived: carry.Survival, *, builds: int, profile: Path | None) -> CarriedProfile:
    """What survived of a carried profile, said (two lines, when it was carried) and as report.json records it."""
    if builds > 1:
        say(carry.survival_line(survived))
        if line := carry.lost_line(survived):
            say(line)
    own: dict[str, Any] = {
        "builds": builds,
        "survived_share": round(survived.share, 2),
        "kept_share": round(survived.kept_share, 2),
        "min_survival": plan.config.min_survival,
        "lost": [LostRecord(function=f, why=why, share=share) for f, why, share in survived.lost],
        "profile": profile,
    }
    # the counts as the survival has them: records, kept, rekeyed, edited, ambiguous, gone, new_functions, ...
    same = {spec.name: getattr(survived, spec.name) for spec in fields(CarriedProfile) if spec.name not in own}
    return CarriedProfile(**same, **own)


def never_run_c(crates: list[CCrateRecord], never_run: dict[str, frozenset[int]] | None) -> list[CCrateRecord]:
    """The C crates' records without, among the functions clang said it found no profile data for, those a partial
    profile left out as never run (by their name: clang's warning gives no CFG hash, so a never-run C function edited
    since the training is not told from an unedited one)."""
    if not never_run:
        return crates
    names = {name.rsplit(";", 1)[-1] for name in never_run}
    for crate in crates:
        if "missing" in crate:
            crate["missing"] = [m for m in crate["missing"] if m.rpartition(": ")[2] not in names]
    return crates


def partial_line(records: int, never_run: int) -> str:
    """What partial training left out of the profile the build reads, in a user's words."""
    return (
        f"optimise: partial training: the build reads the profile without its {never_run} records of functions the "
        f"training never ran ({records - never_run} of {records} kept); those are compiled as with no profile, not "
        "as cold (PGO_PARTIAL=0: the whole profile)"
    )


def target_dir_lock(target_dir: Path) -> FileLock:
    """The lock of optimised builds in the crate's target dir, not taken yet; a directory (or a link, a fifo) at its
    name is refused: filelock failed to open a directory (IsADirectoryError, a traceback) before."""
    path = target_dir / ".pgo-optimise.lock"
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise CommandFailed(
            f"{path} is not a file, and optimise locks the crate's target dir with it",
            f"remove it (rm -r {path}): optimise makes it again",
        )
    return FileLock(str(path))


def _target_dir_lock(plan: BuildPlan) -> FileLock:
    """The lock that serialises optimised builds of one crate (its target dir), announced when it waits."""
    target_dir = plan.crate.target_directory
    target_dir.mkdir(parents=True, exist_ok=True)
    lock = target_dir_lock(target_dir)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        say(f"optimise: waiting for another pipeline's optimised build in {target_dir}")
        lock.acquire()
    return lock


class Profile(NamedTuple):
    """The profile the optimised build uses: its store path, sha256 and function names (llvm-profdata's)."""

    store_path: Path
    sha: str
    records: list[str]  # the whole profile's
    whole: Path  # the whole profile: ``store_path`` itself, or the merged (given) one a partial profile came from
    whole_sha: str
    never_run: dict[str, frozenset[int]] | None  # the records a partial profile left out (name: CFG hashes)
    counted: list[Record] | None  # the whole profile's records with their counts, when partial training read them


def _optimised_env(
    plan: BuildPlan, store_path: Path, *, trained_here: bool, extra: tuple[str, ...] = ()
) -> dict[str, str]:
    """The optimised build's environment: the profile in the Rust flags (and BOLT's link), in the C compilers'
    flags, and the RUSTC shim that records what rustc received."""
    say(f"optimise: profile {store_path}")
    flags = [f"-Cprofile-use={store_path}", "-Cllvm-args=-pgo-warn-missing-function", *extra]
    if plan.config.bolt:  # the PGO binary is BOLT's input: one build, linked with the relocations BOLT needs
        flags.append(boltlib.EMIT_RELOCS)
    env = env_with_rustflags(plan.env, plan.rustflags, flags)
    env = cflags.c_env(plan.c, env, [_c_flag(store_path)], plan.workdir.bin, optimise=True)
    if not trained_here and (line := cflags.choice_line(plan.c)):
        say(line)  # the instrumented build of this run said it already
    return _observe.observing(plan, env, "optimise")


def _c_flag(store_path: Path) -> str:
    return f"-fprofile-use={store_path}"


def _run_build(plan: BuildPlan, env: dict[str, str]) -> str:
    """The package cleaned, then the optimised build; its log's text (a known failure of the link or of clang
    refused in one line)."""
    clean_package(plan, None, plan.logs / "optimise-clean.log")
    built = plan.optimised_binary
    built.unlink(missing_ok=True)
    try:
        done = run(
            plan.build_argv(None, verbose="-vv"),
            env=cargo_command.with_lint_wrapper(_observe.with_configured_wrapper(plan, env), plan.workdir.bin),
            log=plan.logs / "optimise-build.log",
            cwd=plan.cwd,
            what="the optimised build",
        )
    except CommandFailed:
        if plan.config.bolt:
            boltlib.refuse_stripping_link(plan.logs / "optimise-build.log")
        cflags.refuse_clang_cannot_build(plan.c, plan.logs / "optimise-build.log")
        raise
    if not built.is_file():
        raise MissingInput(f"the optimised build left no binary at {built}", f"see {done.log}")
    return done.output()


def _build_and_check(
    plan: BuildPlan,
    frame: StageFrame,
    profile: Profile,
    *,
    trained_here: bool,
    verify: bool | None,
    handed: Report | None,
    carried: tuple[CarriedProfile | None, tuple[dict[str, str], str] | None] = (None, None),
) -> OptimiseResult:
    """The build (``carried``'s first build when that was the build), its checks, its copy and its verify."""
    store_path, records = profile.store_path, profile.records
    survival, first = carried
    if first is None:
        env = _optimised_env(plan, store_path, trained_here=trained_here)
        log_text = _run_build(plan, env)
    else:
        env, log_text = first
    built = plan.optimised_binary
    compiled = observed.compiles(observed.read_records(plan.workdir.observed("optimise")))
    warnings = cargo_log.profile_warnings(log_text, profile.never_run)
    found = checks.coverage(records, plan.crate.crate_names, elf.function_symbols(built), warnings.missing_by_crate)
    target_dir, flag = plan.crate.target_directory, _c_flag(store_path)
    found_c = cflags.c_crates(plan.c, plan.rustc, target_dir, log_text=log_text, flag=flag, records=records)
    crates = never_run_c(found_c, profile.never_run)
    if line := cflags.unprofiled_warning(crates, plan.c):
        say(line)
    libraries = cflags.system_libraries(
        plan.crate.target_directory, plan.triple, log_text, [c["crate"] for c in crates]
    )
    if line := cflags.system_libraries_line(libraries):
        say(line)
    result = replace(_result(plan, profile, log_text, env, warnings, found, crates, compiled), carried=survival)
    # a failure: recorded with what the stage found, the binary rejected, under the lock
    with frame.kept(lambda: result, reject=("the optimised binary", built)):
        plan.store.verify(store_path, "after the build")
        _check_optimised(plan, result, log_text, store_path, warnings, found, trained_here=trained_here, handed=handed)
        copy = frame.copy_checked(built, result.binary_sha256, hint="is another build writing to this target dir?")
        result = replace(result, binary=copy)
        if verify if verify is not None else plan.config.verify_wanted(trained=False):
            workload = plan.require_workload()
            say(f"verify: the optimised binary runs the workload {workload.path.name}")
            result = replace(result, verify=run_on(plan, workload, copy, logs=plan.logs / "verify", scratch="verify"))
    return frame.done(result)


def _result(
    plan: BuildPlan,
    profile: Profile,
    log_text: str,
    env: dict[str, str],
    warnings: cargo_log.ProfileWarnings,
    found: checks.Coverage,
    crates: list[CCrateRecord],
    compiled: list[cargo_log.RustcCall],
) -> OptimiseResult:
    """The stage's record of the build (what it left and what was read from it), its binary not yet copied
    (``binary`` is the built one until the checks pass)."""
    built, store_path = plan.optimised_binary, profile.store_path
    return OptimiseResult(
        store_path=store_path,
        profile_sha256=profile.sha,
        profile_functions=len(profile.records),
        missing_profile_functions=warnings.missing,
        partial=profile.never_run is not None,
        whole_profile=profile.whole,
        whole_profile_sha256=profile.whole_sha,
        never_run_records=len(profile.never_run or ()),
        never_run_functions=warnings.never_run,
        missing_by_crate=dict(sorted(warnings.missing_by_crate.items(), key=lambda kv: -kv[1])),
        stale_profile_warnings=warnings.stale,
        main_crate_functions_with_profile=found.main_crate_with_profile,
        main_crate_functions_without_profile=found.main_crate_without_profile,
        functions_with_profile_in_binary=found.functions_with_profile,
        coverage_from_symbols=found.symbols_known,
        crate_metadata=cargo_log.crate_identities(log_text, plan.crate),
        cargo_command=list(plan.config.cargo),
        target=plan.target,
        rustflags=env[plan.rustflags.var],
        built_binary=built,
        binary=built,  # the checked copy once the checks pass
        binary_sha256=sha256_file(built),
        max_glibc=elf.max_glibc(built),
        libc=elf.libc_needs(built),
        emit_relocs=plan.config.bolt,
        target_cpu=target_cpu_warning(plan.rustflags),
        zigbuild=zig.versions(plan.env) if zig.uses_zigbuild(plan.config.cargo) else None,
        c_code=plan.c.record(crates),
        crates_compiled=len(compiled),
        crates_with_profile=observed.with_flag(compiled, "profile-use", str(store_path)),
        rustc=plan.rustc.release,
        rustc_llvm=plan.rustc.llvm_version,
        rustc_path=str(plan.rustc_path),
        rustc_source=plan.rustc_source,
        seconds=0.0,  # the frame's
    )


def check_same_build(recorded: InstrumentResult, plan: BuildPlan, *, earlier: str, now: str) -> None:
    """Refuse to go on from ``recorded`` (a stage's report) with another cargo command or target."""
    checks.refuse_other_build(recorded, cargo=plan.config.cargo, target=plan.target, earlier=earlier, now=now)


def max_missing(plan: BuildPlan, workload: Workload | None) -> int | None:
    """The ceiling of functions without profile :func:`recipes.stages.frame.threshold` chooses, else None."""
    chosen = threshold(plan, workload, "max_missing")
    return chosen.value if chosen is not None else None


def _check_optimised(
    plan: BuildPlan,
    result: OptimiseResult,
    log_text: str,
    store_path: Path,
    warnings: cargo_log.ProfileWarnings,
    found: checks.Coverage,
    *,
    trained_here: bool,
    handed: Report | None,
) -> None:
    checks.refuse_profile_file_warnings(log_text, store_path, plan.logs / "optimise-build.log")
    if warnings.stale:
        raise CheckFailed(
            f"the optimised build reports {warnings.stale} stale-profile warnings (hash mismatch), first: "
            f"{warnings.stale_examples[0]}",
            "the profile is of another source or compiler: train again on this tree",
        )
    cflags.check_c(
        result.c_code["crates"] if result.c_code else [], plan.config.max_unprofiled_c, plan.logs / "optimise-build.log"
    )
    for call in cargo_log.main_crate_calls(log_text, plan.crate):
        used = call.codegen("profile-use")
        if used != str(store_path):
            raise CheckFailed(
                f"crate {call.crate_name} was compiled with profile-use={used!r}, not {store_path}",
                f"the main crate must be compiled with the profile; see {plan.logs / 'optimise-build.log'}",
            )
    if not cargo_log.main_crate_calls(log_text, plan.crate):
        raise CheckFailed(
            f"the optimised build's log has no rustc line of {plan.crate.package}: not compiled with the profile",
            "cargo found it Fresh though the pipeline cleans the package before the build: something built it in "
            f"{plan.crate.target_directory} in between (a cargo wrapper, another build); run again with nothing "
            "else building there",
        )
    # what cargo asked for (its log, above), then what rustc received (the RUSTC shim's records)
    _check_observed(plan, result, store_path)
    if trained_here:
        inst = report.require(plan.work, "instrument", "optimise", handed)
        check_same_build(inst, plan, earlier="the instrumented build", now="this one")
        if inst.crate_metadata != result.crate_metadata:
            raise CheckFailed(
                f"the crate identity differs between the builds: instrumented {inst.crate_metadata} "
                f"optimised {result.crate_metadata}",
                "the profile's function names will not match: build both with the same cargo command and config",
            )
    _check_missing(plan, result, warnings, found)
    if plan.config.max_glibc:
        elf.check_glibc(result.binary, plan.config.max_glibc)


def _check_missing(
    plan: BuildPlan, result: OptimiseResult, warnings: cargo_log.ProfileWarnings, found: checks.Coverage
) -> None:
    """The functions without profile data against the ceiling (PGO_MAX_MISSING, else half the build), and the main
    crate's coverage. A profile carried forward and written again is judged by what survived of it instead
    (PGO_MIN_SURVIVAL): its functions without a record are the new ones, not a profile that matches little."""
    carried = result.carried is not None and result.carried.builds > 1
    ceiling = None if carried else max_missing(plan, plan.workload)
    if ceiling is not None and warnings.missing > ceiling:
        top = ", ".join(f"{crate} {count}" for crate, count in list(result.missing_by_crate.items())[:3])
        raise CheckFailed(
            f"{warnings.missing} functions have no profile data, more than PGO_MAX_MISSING={ceiling} (most in: {top})",
            "the profile matches little of this build: same cargo command, features and target as the training?",
        )
    checks.refuse_uncovered_main_crate(found, plan.crate.package)
    if ceiling is None and not carried:
        checks.refuse_mostly_missing(warnings.missing, found)


def _check_observed(plan: BuildPlan, result: OptimiseResult, store_path: Path) -> None:
    """What rustc received (the shim's records) and what the binary is: the profile reached every own crate,
    the plan's compiler ran, no instrumentation shipped, and the binary is not the plain build's."""
    _observe.compiles(plan, "optimise", "the optimised build")  # each run by the plan's compiler
    # a binary to ship: no instrumentation in it, and compiled by the plan's rustc (its .comment)
    elf.check_no_instrumentation(result.built_binary, "the optimised binary")
    elf.check_comment_rustc(result.built_binary, plan.rustc.release, "the optimised binary")
    _observe.check_profile_flag(plan, "optimise", "the optimised build", option="profile-use", value=str(store_path))
    _observe.check_profile_use(plan, "optimise", "the optimised build")  # LLVM's warnings not silenced; no mcount
    plain = report.load(plan.work).plain
    if isinstance(plain, PlainResult) and plain.cargo_command == result.cargo_command and plain.target == result.target:
        checks.check_not_plain(
            result.built_binary,
            result.binary_sha256,
            plain.binary,
            plain.binary_sha256,
            plan.workdir.observed("optimise"),
        )
