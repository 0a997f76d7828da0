"""The four stages and the whole pipeline. Each stage reads what the previous one left in the work dir."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock, Timeout

from recipes import bolt as boltlib
from recipes import checks, elf, profdata, report, testsuite, zig
from recipes.cargo import command as cargo_command
from recipes.cargo import log as cargo_log
from recipes.errors import (
    CheckFailed,
    CommandFailed,
    MissingInput,
    PgoError,
    StoreError,
    TrainingFailed,
    WorkDirError,
)
from recipes.files import atomic_output, copy_atomically
from recipes.plan import BuildPlan, clean_package
from recipes.results import (
    BoltResult,
    InstrumentResult,
    MergeResult,
    OptimiseResult,
    Report,
    StageName,
    TestResult,
    TrainResult,
    WorkloadRun,
)
from recipes.runner import run, say
from recipes.rustflags import (
    env_with_rustflags,
    target_cpu_warning,
)
from recipes.store import sha256_file
from recipes.toolchain import find_profdata, rustc_sysroot
from recipes.train.runner import run_workload
from recipes.workload import Workload, check_environment, check_tools

_Result = TypeVar("_Result")
#: a stage: called with the plan (and maybe options), it returns its record
StageFunction = Callable[..., _Result]
#: what a full, read-only or forbidden disk raises: known failures, told in one line
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _recorded(name: StageName) -> Callable[[StageFunction[_Result]], StageFunction[_Result]]:
    """A stage that keeps report.json true: when it starts, its earlier record and those of the stages after it
    make way for a ``failed`` record that only its success replaces; a full disk or another write error of the
    work dir is one line, not a traceback."""

    def wrap(stage: StageFunction[_Result]) -> StageFunction[_Result]:
        @functools.wraps(stage)
        def run_stage(plan: BuildPlan, *args: Any, **kwargs: Any) -> _Result:
            report.start(plan.work, name)
            try:
                try:
                    return stage(plan, *args, **kwargs)
                except OSError as exc:
                    if exc.errno not in _WRITE_ERRORS:
                        raise
                    where = f" {exc.filename}" if exc.filename else ""
                    raise WorkDirError(
                        f"{name}: cannot write{where}: {exc.strerror}", "free space there or choose another PGO_OUT"
                    ) from exc
            except PgoError as error:
                with contextlib.suppress(PgoError):  # a report that cannot be written: the first error tells
                    if report.load(plan.work).get(name, {}).get("running"):
                        report.record_failure(plan.work, name, {"failed": error.line()})
                raise

        return run_stage

    return wrap


def _timed(start: float) -> float:
    return round(time.monotonic() - start, 3)


@_recorded("instrument")
def instrument(plan: BuildPlan) -> InstrumentResult:
    """The instrumented build: -Cprofile-generate, its own target dir, the same cargo command."""
    start = time.monotonic()
    say(f"instrument: {plan.crate.package} ({plan.crate.bin}) for {plan.target}")
    zig.check_generate_linker(plan.config.cargo, plan.config.generate_linker)
    flags = [f"-Cprofile-generate={plan.profraw_dir}"]
    if plan.config.generate_linker:
        flags.append(f"-Clinker={plan.config.generate_linker}")
    env = env_with_rustflags(plan.env, plan.rustflags, flags)
    clean_package(plan, plan.generate_dir, plan.logs / "instrument-clean.log")
    argv = plan.build_argv(plan.generate_dir)
    done = run(argv, env=env, log=plan.logs / "instrument-build.log", cwd=plan.cwd, what="the instrumented build")
    identities = cargo_log.crate_identities(done.output(), plan.crate)
    binary = plan.instrumented_binary
    if not binary.is_file():
        raise MissingInput(f"the instrumented build left no binary at {binary}", f"see {done.log}")
    result: InstrumentResult = {
        "seconds": _timed(start),
        "binary": str(binary),
        "binary_sha256": sha256_file(binary),
        "crate_metadata": identities,
        "cargo_command": list(plan.config.cargo),
        "target": plan.target,
        "rustflags_var": plan.rustflags.var,
        "rustflags": env[plan.rustflags.var],
        "carried_rustflags_from": list(plan.rustflags.carried_from),
        "rustc": plan.rustc.release,
    }
    if zig.uses_zigbuild(plan.config.cargo):
        result["zigbuild"] = zig.versions(plan.env)
    report.record(plan.work, "instrument", result)
    return result


@_recorded("train")
def train(plan: BuildPlan) -> TrainResult:
    """Drive the instrumented binary through the workload; each instance writes its .profraw."""
    inst = report.require(plan.work, "instrument", "train")
    binary = Path(inst["binary"])
    if not binary.is_file():
        raise MissingInput(f"the instrumented binary {binary} is gone", "run `nox -s instrument` again")
    workload = plan.workload()
    check_tools(workload, plan.env.get("PATH", os.defpath))
    check_environment(workload, plan.env)
    result = run_workload(
        workload,
        binary=binary,
        base_env=plan.env,
        work=plan.work,
        logs=plan.logs,
        project_dir=plan.config.project_dir,
        scale=plan.config.train_scale,
        timeout=plan.config.phase_timeout,
        profraw_dir=plan.profraw_dir,
        crate_dir=plan.crate.package_dir,
    )
    result["profraw"] = [raw.as_json() for raw in profdata.record_raw_profiles(plan.profraw_dir)]
    report.record(plan.work, "train", result)
    return result


@dataclass(frozen=True)
class FunctionFloor:
    """The fewest functions the training must execute, where it was set, and the total of the build it was
    measured on (a workload's ``min_functions_total``): then it scales with this build's total, since another
    build profile (fat LTO, one codegen unit) instruments another number of functions."""

    value: int
    source: str
    set_against: int | None = None

    def for_total(self, total: int) -> int:
        if self.set_against is None or self.set_against == total:
            return self.value
        return self.value * total // self.set_against

    def refusal(self, executed: int, total: int) -> CheckFailed:
        floor = self.for_total(total)
        if self.set_against is None:
            set_to = f"{self.source}={floor}"
            measured = f"set against a build whose total of functions is not recorded; this build has {total}"
            fix = (
                "the workload does not reach the code: extend it, or lower the floor if the code shrank; a floor "
                "measured under another cargo profile (lto, codegen-units) does not carry: add min_functions_total "
                "(the total it was measured on) to the workload and the floor scales with the build"
            )
        else:
            set_to = f"the floor {floor}"
            measured = f"{self.value} of {self.set_against} functions in {self.source}, scaled to this build's {total}"
            fix = "the workload does not reach the code: extend it, or measure the floor again"
        return CheckFailed(
            f"the training executed {executed} of {total} functions, fewer than {set_to} ({measured})", fix
        )

    def as_json(self, total: int) -> MergeResult:
        """The floor's keys of the merge record."""
        return {
            "min_functions": self.for_total(total) if total else self.value,
            "min_functions_set": self.value,
            "min_functions_source": self.source,
            "min_functions_total": self.set_against,
        }


def function_floor(plan: BuildPlan, workload: Workload | None) -> FunctionFloor:
    if plan.config.min_functions is not None:
        return FunctionFloor(plan.config.min_functions, plan.config.source("min_functions"))
    if workload is not None and workload.min_functions is not None:
        return FunctionFloor(workload.min_functions, f"{workload.path} min_functions", workload.min_functions_total)
    return FunctionFloor(1, "the default")


def max_missing(plan: BuildPlan, workload: Workload | None) -> int | None:
    if plan.config.max_missing is not None:
        return plan.config.max_missing
    return workload.max_missing if workload is not None else None


@_recorded("merge")
def merge(plan: BuildPlan) -> MergeResult:
    """Merge exactly this training's raw profiles with rustc's own LLVM's llvm-profdata; count what ran."""
    start = time.monotonic()
    trained = report.require(plan.work, "train", "merge")
    raws = profdata.check_raw_profiles(plan.profraw_dir, trained.get("profraw", []))
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    say(f"merge: {len(raws)} raw profiles with {tool.path} (LLVM {tool.llvm_version})")
    plan.merged_profile.unlink(missing_ok=True)
    merged = profdata.merge(
        tool,
        raws,
        plan.merged_profile,
        env=plan.env,
        log=plan.logs / "merge.log",
        drop_bad=plan.config.drop_bad_profraw,
    )
    for name, why in merged.dropped.items():
        say(f"warning: dropped {name}: {why} (PGO_DROP_BAD_PROFRAW=1)")
    floor = function_floor(plan, plan.workload())
    result: MergeResult = {
        "profile": str(plan.merged_profile),
        "profraw_merged": len(merged.merged),
        "profraw_dropped": merged.dropped,
    }
    result.update(floor.as_json(0))
    result.update({"llvm_profdata": str(tool.path), "llvm_profdata_version": tool.llvm_version})
    try:
        summary = profdata.check_usable(
            tool, plan.merged_profile, env=plan.env, log=plan.logs / "merge-show.log", what="the merged profile"
        )
        result.update(
            {
                "profile_sha256": sha256_file(plan.merged_profile),
                "executed_functions": summary.executed_functions,
                "total_functions": summary.total_functions,
            }
        )
        result.update(floor.as_json(summary.total_functions))
        if summary.executed_functions < floor.for_total(summary.total_functions):
            raise floor.refusal(summary.executed_functions, summary.total_functions)
    except PgoError as error:
        plan.merged_profile.unlink(missing_ok=True)
        failure = result.copy()
        failure.update({"failed": error.line(), "seconds": _timed(start)})
        report.record(plan.work, "merge", failure)
        raise
    result["seconds"] = _timed(start)
    report.record(plan.work, "merge", result)
    return result


def _profile_to_use(plan: BuildPlan) -> tuple[Path, bool]:
    """The profile of the optimised build, and whether it came from this work dir's training."""
    if plan.config.profdata is not None:
        if not plan.config.profdata.is_file():
            raise MissingInput(f"PGO_PROFDATA={plan.config.profdata}: no such file", "give the path of a .profdata")
        return plan.config.profdata, False
    merged = report.require(plan.work, "merge", "optimise")
    path = Path(merged["profile"])
    if not path.is_file():
        raise MissingInput(f"the merged profile {path} is gone", "run `nox -s merge` again")
    if sha256_file(path) != merged["profile_sha256"]:
        raise StoreError(f"{path} changed since merge wrote it", "run `nox -s merge` again")
    return path, True


@_recorded("optimise")
def optimise(plan: BuildPlan, *, verify: bool | None = None) -> OptimiseResult:
    """The optimised build from the store, then every check of the result, then a checked copy in the work dir.

    Clean, build, checks and copy hold a lock on the crate's target dir: several pipelines on one crate take
    turns, and the copy is the binary the checks saw."""
    start = time.monotonic()
    profile, trained_here = _profile_to_use(plan)
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    if not trained_here:  # a given profile is checked before anything is built
        profdata.check_usable(
            tool, profile, env=plan.env, log=plan.logs / "optimise-profile-show.log", what="PGO_PROFDATA"
        )
    store = plan.store
    store_path = store.put(profile)
    sha = store.verify(store_path, "before the build")
    records = profdata.function_names(tool, store_path, env=plan.env, log=plan.logs / "optimise-profile-functions.log")
    with _target_dir_lock(plan):
        return _build_and_check(plan, store_path, sha, records, trained_here, verify, start)


def _target_dir_lock(plan: BuildPlan) -> FileLock:
    """The lock that serialises optimised builds of one crate (its target dir), announced when it waits."""
    target_dir = plan.crate.target_directory
    target_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(target_dir / ".pgo-optimise.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        say(f"optimise: waiting for another pipeline's optimised build in {target_dir}")
        lock.acquire()
    return lock


def _build_and_check(
    plan: BuildPlan,
    store_path: Path,
    sha: str,
    records: list[str],
    trained_here: bool,
    verify: bool | None,
    start: float,
) -> OptimiseResult:
    say(f"optimise: profile {store_path}")
    flags = [f"-Cprofile-use={store_path}", "-Cllvm-args=-pgo-warn-missing-function"]
    if plan.config.bolt:  # the PGO binary is BOLT's input: one build, linked with the relocations BOLT needs
        flags.append(boltlib.EMIT_RELOCS)
    env = env_with_rustflags(plan.env, plan.rustflags, flags)
    clean_package(plan, None, plan.logs / "optimise-clean.log")
    built = plan.optimised_binary
    built.unlink(missing_ok=True)
    try:
        done = run(
            plan.build_argv(None, verbose="-vv"),
            env=cargo_command.with_lint_wrapper(env, plan.work / "bin"),
            log=plan.logs / "optimise-build.log",
            cwd=plan.cwd,
            what="the optimised build",
        )
    except CommandFailed:
        if plan.config.bolt:
            boltlib.refuse_stripping_link(plan.logs / "optimise-build.log")
        raise
    log_text = done.output()
    if not built.is_file():
        raise MissingInput(f"the optimised build left no binary at {built}", f"see {done.log}")
    warnings = cargo_log.profile_warnings(log_text)
    found = checks.coverage(records, plan.crate.crate_names, elf.function_symbols(built), warnings.missing_by_crate)
    result: OptimiseResult = {
        "store_path": str(store_path),
        "profile_sha256": sha,
        "profile_functions": len(records),
        "missing_profile_functions": warnings.missing,
        "missing_by_crate": dict(sorted(warnings.missing_by_crate.items(), key=lambda kv: -kv[1])),
        "stale_profile_warnings": warnings.stale,
    }
    result.update(found.as_json())
    result.update(
        {
            "crate_metadata": cargo_log.crate_identities(log_text, plan.crate),
            "cargo_command": list(plan.config.cargo),
            "target": plan.target,
            "rustflags": env[plan.rustflags.var],
            "built_binary": str(built),
            "binary": str(built),
            "binary_sha256": sha256_file(built),
            "max_glibc": elf.max_glibc(built),
            "libc": elf.libc_needs(built),
            "emit_relocs": plan.config.bolt,
            "target_cpu": target_cpu_warning(plan.rustflags),
        }
    )
    if zig.uses_zigbuild(plan.config.cargo):
        result["zigbuild"] = zig.versions(plan.env)
    try:
        plan.store.verify(store_path, "after the build")
        workload = plan.workload_if_any()
        _check_optimised(plan, result, log_text, store_path, warnings, found, workload, trained_here)
        copy = _checked_copy(plan, built, result["binary_sha256"])
        result["binary"] = str(copy)
        if verify if verify is not None else bool(plan.config.verify):
            workload = workload or plan.workload()
            say(f"verify: the optimised binary runs the workload {workload.path.name}")
            result["verify"] = run_workload(
                workload,
                binary=copy,
                base_env=plan.env,
                work=plan.work,
                logs=plan.logs / "verify",
                project_dir=plan.config.project_dir,
                scale=plan.config.train_scale,
                timeout=plan.config.phase_timeout,
                profraw_dir=None,
                crate_dir=plan.crate.package_dir,
            )
    except PgoError as error:
        result["failed"] = error.line()
        result["seconds"] = _timed(start)
        kept = _reject(plan, built, Path(result["binary"] or built))  # the checked copy, or the build
        result["binary"] = str(kept) if kept else None
        report.record(plan.work, "optimise", result)
        raise
    result["seconds"] = _timed(start)
    report.record(plan.work, "optimise", result)
    return result


def optimised_copy(plan: BuildPlan) -> Path:
    """Where optimise puts the binary it checked (report.json's ``optimise.binary``)."""
    return plan.work / "optimised" / plan.crate.bin


def _checked_copy(plan: BuildPlan, built: Path, sha: str) -> Path:
    """Copy the checked binary into the work dir; the copy must be the bytes that were checked."""
    copy = optimised_copy(plan)
    copy_atomically(built, copy)
    if sha256_file(copy) != sha:
        copy.unlink(missing_ok=True)
        raise CheckFailed(f"{built} changed while it was checked", "is another build writing to this target dir?")
    return copy


def _reject(plan: BuildPlan, built: Path, checked: Path | None = None) -> Path | None:
    """Move a binary that failed its checks out of the target dir (and its checked copy out of the work dir), so
    that nobody ships it by mistake. Works across filesystems; when no copy can be kept in rejected/ (a full disk)
    the binary is deleted all the same, and None returned."""
    rejected = plan.work / "rejected" / built.name
    source = checked if checked is not None and checked.is_file() else built
    kept: Path | None = None
    try:
        if source.is_file():
            copy_atomically(source, rejected)
            kept = rejected
            say(f"the optimised binary failed its checks: moved to {rejected}")
    except WorkDirError as error:
        say(f"the optimised binary failed its checks and was deleted: no copy kept ({error.line()})")
    finally:
        for path in {built, optimised_copy(plan)}:
            path.unlink(missing_ok=True)
    return kept


def check_same_build(recorded: Mapping[str, Any], plan: BuildPlan, *, earlier: str, now: str) -> None:
    """Refuse to go on from ``recorded`` (a stage's report) with another cargo command or target."""
    checks.refuse_other_build(recorded, cargo=plan.config.cargo, target=plan.target, earlier=earlier, now=now)


def _check_optimised(
    plan: BuildPlan,
    result: OptimiseResult,
    log_text: str,
    store_path: Path,
    warnings: cargo_log.ProfileWarnings,
    found: checks.Coverage,
    workload: Workload | None,
    trained_here: bool,
) -> None:
    checks.refuse_profile_file_warnings(log_text, store_path, plan.logs / "optimise-build.log")
    if warnings.stale:
        raise CheckFailed(
            f"the optimised build reports {warnings.stale} stale-profile warnings (hash mismatch), first: "
            f"{warnings.stale_examples[0]}",
            "the profile is of another source or compiler: train again on this tree",
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
            "this is a bug: the package is cleaned before the build",
        )
    if trained_here:
        inst = report.load(plan.work).get("instrument", {})
        check_same_build(inst, plan, earlier="the instrumented build", now="this one")
        if inst.get("crate_metadata") != result["crate_metadata"]:
            raise CheckFailed(
                f"the crate identity differs between the builds: instrumented {inst.get('crate_metadata')} "
                f"optimised {result['crate_metadata']}",
                "the profile's function names will not match: build both with the same cargo command and config",
            )
    ceiling = max_missing(plan, workload)
    if ceiling is not None and warnings.missing > ceiling:
        top = ", ".join(f"{crate} {count}" for crate, count in list(result["missing_by_crate"].items())[:3])
        raise CheckFailed(
            f"{warnings.missing} functions have no profile data, more than PGO_MAX_MISSING={ceiling} (most in: {top})",
            "the profile matches little of this build: same cargo command, features and target as the training?",
        )
    checks.refuse_uncovered_main_crate(found, plan.crate.package)
    if ceiling is None:
        checks.refuse_mostly_missing(warnings.missing, found)
    if plan.config.max_glibc:
        elf.check_glibc(Path(result["binary"] or ""), plan.config.max_glibc)


def pgo(plan: BuildPlan) -> Report:
    """All four stages in order, every check on (the optimised binary replays the training)."""
    if plan.config.bolt:  # llvm-bolt of rustc's LLVM, or refused before anything is built
        boltlib.find_bolt(plan.rustc, plan.env, plan.config.llvm_bolt)
        boltlib.bolt_args(plan.config.bolt_args)
    if plan.config.profdata is None:
        workload = plan.workload()  # what it needs is refused before anything is built
        check_tools(workload, plan.env.get("PATH", os.defpath))
        check_environment(workload, plan.env)
        instrument(plan)
        train(plan)
        merge(plan)
        verify = plan.config.verify if plan.config.verify is not None else True
    else:
        verify = bool(plan.config.verify)
    optimise(plan, verify=verify)
    if plan.config.test:
        test(plan)
    if plan.config.bolt:
        bolt(plan)
    return report.load(plan.work)


@_recorded("test")
def test(plan: BuildPlan) -> TestResult:
    """The crate's test suite compiled with the optimised build's profile and flags (PGO_TEST=1)."""
    return testsuite.run_test_stage(plan, clean=clean_package)


def summary_lines(full: Report) -> list[str]:
    """The short summary printed at the end of a session."""
    lines = []
    for stage in report.STAGES:
        if stage in full and (reason := report.failed(full[stage])) and stage != "test":
            lines.append(f"{stage:<11} failed: {reason}")
            full = full.copy()
            full.pop(stage)
    if "instrument" in full:
        lines.append(f"instrument  {full['instrument']['seconds']:8.1f} s  {full['instrument']['binary']}")
    if "train" in full:
        t = full["train"]
        lines.append(
            f"train       {t['seconds']:8.1f} s  {t['requests']} requests/runs in {len(t['phases'])} phases, "
            f"{t.get('profraw_files', 0)} .profraw files"
        )
    if "merge" in full:
        m = full["merge"]
        lines.append(
            f"merge       {m['seconds']:8.1f} s  {m['executed_functions']} of {m['total_functions']} "
            f"functions executed (floor {m['min_functions']}), {m['profraw_merged']} raw profiles merged"
            + (f", {len(m['profraw_dropped'])} dropped" if m.get("profraw_dropped") else "")
        )
    if "optimise" in full:
        o = full["optimise"]
        lines.append(
            f"optimise    {o.get('seconds', 0):8.1f} s  {o['missing_profile_functions']} functions without "
            f"profile, {o['stale_profile_warnings']} stale; " + (o.get("libc") or f"glibc {o['max_glibc'] or 'none'}")
        )
        lines.append(
            f"coverage    {o['main_crate_functions_with_profile']} functions of the main crate with profile data, "
            f"{o['main_crate_functions_without_profile']} without"
        )
        lines.append(f"binary      {o['binary']}")
        lines.append(f"            sha256 {o['binary_sha256']}")
        lines.append(f"profile     {o['store_path']}")
        if "verify" in o:
            lines.append(
                f"verify      {o['verify']['seconds']:8.1f} s  the optimised binary ran the workload "
                f"({o['verify']['requests']} requests/runs)"
            )
        if o.get("target_cpu"):
            lines.append(f"warning     the flags set target-cpu={o['target_cpu']}: not a baseline release build")
    if "test" in full:
        tested = full["test"]
        counts = f"{tested['passed']} passed, {tested['failed']} failed, {tested['ignored']} ignored"
        lines.append(f"test        {tested['seconds']:8.1f} s  {counts} (the suite built with the profile)")
    if "bolt" in full:
        lines += bolt_summary_lines(full["bolt"])
    return lines


def bolt_summary_lines(b: BoltResult) -> list[str]:
    before, after = b["dyno_stats"]["before"], b["dyno_stats"]["after"]
    lines = [
        f"bolt        {b['seconds']:8.1f} s  profile of {b['functions_with_profile']} of {b['total_functions']} "
        f"functions ({b['profile_main_crate_functions']} of the main crate), {b['profile_branches']} branches; "
        f"{b['input_bytes']} -> {b['binary_bytes']} bytes",
    ]
    for name in ("executed instructions", "taken branches"):
        if name in before and name in after and before[name]:
            change = 100.0 * (after[name] - before[name]) / before[name]
            lines.append(f"            {name}: {before[name]} -> {after[name]} ({change:+.1f} %) (dyno-stats)")
    lines.append(f"binary      {b['binary']}")
    lines.append(f"            sha256 {b['binary_sha256']}")
    lines.append(f"profile     {b['store_path']}")
    if "verify" in b:
        lines.append(f"verify      {b['verify']['seconds']:8.1f} s  the BOLTed binary ran the workload")
    return lines


# ---------------------------------------------------------------------------------------------------------------
# bolt: the post-link layout optimisation of the optimised binary


@dataclass(frozen=True)
class BoltPaths:
    """Where the bolt stage works: ``<work>/bolt/`` (input copy, instrumented copy, raw and merged profile, the
    output before its checks) and the checked copy ``<work>/bolted/<bin>``."""

    plan: BuildPlan

    @property
    def dir(self) -> Path:
        return self.plan.work / "bolt"

    @property
    def input(self) -> Path:
        return self.dir / self.plan.crate.bin

    @property
    def instrumented(self) -> Path:
        return self.dir / f"{self.plan.crate.bin}.inst"

    @property
    def raw(self) -> Path:
        return self.dir / "fdata"

    @property
    def merged(self) -> Path:
        return self.dir / f"{self.plan.crate.bin}.fdata"

    @property
    def output(self) -> Path:
        return self.dir / f"{self.plan.crate.bin}.bolt"


def bolted_copy(plan: BuildPlan) -> Path:
    """Where the bolt stage puts the binary it checked (report.json's ``bolt.binary``)."""
    return plan.work / "bolted" / plan.crate.bin


def _bolt_input(plan: BuildPlan) -> tuple[Path, str, dict[str, int]]:
    """The optimise stage's checked binary, unchanged since, and fit for llvm-bolt."""
    optimised = report.require(plan.work, "optimise", "bolt")
    binary = Path(optimised["binary"] or "")
    if not binary.is_file():
        raise MissingInput(f"the optimised binary {binary} is gone", "run `nox -s optimise` again")
    sha = sha256_file(binary)
    if sha != optimised["binary_sha256"]:
        raise CheckFailed(f"{binary} changed since optimise checked it", "run `nox -s optimise` again")
    return binary, sha, boltlib.check_input(binary)


def _bolt_train(plan: BuildPlan, tools: boltlib.BoltTools, paths: BoltPaths) -> tuple[Path, WorkloadRun]:
    """BOLT-instrument the input, replay the training workload on it (every phase check), merge its profiles."""
    instrument_log = plan.logs / "bolt-instrument.log"
    run(
        [
            str(tools.llvm_bolt),
            paths.input.name,
            "-instrument",
            f"-instrumentation-file={paths.raw / 'prof'}",
            "-instrumentation-file-append-pid",
            "-o",
            paths.instrumented.name,
        ],
        env=plan.env,
        log=instrument_log,
        cwd=paths.dir,
        what="llvm-bolt -instrument",
    )
    workload = plan.workload()
    say(f"bolt: the BOLT-instrumented binary runs the workload {workload.path.name}")
    trained = run_workload(
        workload,
        binary=paths.instrumented,
        base_env=plan.env,
        work=plan.work,
        logs=plan.logs / "bolt-train",
        project_dir=plan.config.project_dir,
        scale=plan.config.train_scale,
        timeout=plan.config.phase_timeout,
        profraw_dir=None,
        crate_dir=plan.crate.package_dir,
        fdata_dir=paths.raw,
        scratch_name="bolt-train",
    )
    raws = sorted(paths.raw.glob("*.fdata"))  # merge-fdata's output depends on the order of its inputs
    with atomic_output(paths.merged) as tmp:
        run(
            [str(tools.merge_fdata), *map(str, raws), "-o", str(tmp)],
            env=plan.env,
            log=plan.logs / "bolt-merge.log",
            cwd=paths.dir,
            what="merge-fdata",
        )
        if not tmp.is_file():
            raise MissingInput(f"merge-fdata wrote no {tmp}", f"see {plan.logs / 'bolt-merge.log'}")
    return paths.merged, trained


@_recorded("bolt")
def bolt(plan: BuildPlan) -> BoltResult:
    """llvm-bolt on the optimised binary: its own instrumentation and training (or PGO_BOLT_PROFILE), the profile
    from the store, opt-dist's flags (or PGO_BOLT_ARGS), every check, then a checked copy in <work>/bolted/."""
    start = time.monotonic()
    paths = BoltPaths(plan)
    binary, input_sha, relocations = _bolt_input(plan)
    tools = boltlib.find_bolt(plan.rustc, plan.env, plan.config.llvm_bolt)
    args = boltlib.bolt_args(plan.config.bolt_args)
    say(f"bolt: {binary} with {tools.llvm_bolt} (LLVM {tools.llvm_version})")
    shutil.rmtree(paths.raw, ignore_errors=True)  # what an earlier run left (a given profile may be its merged one)
    for old in (paths.instrumented, paths.output, paths.input, bolted_copy(plan)):
        old.unlink(missing_ok=True)
    paths.raw.mkdir(parents=True)
    copy_atomically(binary, paths.input)
    result: BoltResult = {
        "input": str(binary),
        "input_sha256": input_sha,
        "relocations": relocations,
        "llvm_bolt": str(tools.llvm_bolt),
        "merge_fdata": str(tools.merge_fdata),
        "llvm_bolt_version": tools.llvm_version,
        "bolt_args": list(args),
    }
    try:
        if plan.config.bolt_profile is not None:
            if not plan.config.bolt_profile.is_file():
                raise MissingInput(
                    f"PGO_BOLT_PROFILE={plan.config.bolt_profile}: no such file", "give the path of a .fdata"
                )
            profile = plan.config.bolt_profile
            result["trained_here"] = False
        else:
            profile, result["train"] = _bolt_train(plan, tools, paths)
            result["trained_here"] = True
        fdata = boltlib.parse_fdata(profile.read_text(encoding="utf-8", errors="replace"))
        result.update(fdata.as_json())
        result["profile_main_crate_functions"] = fdata.main_crate_functions(plan.crate.crate_names)
        boltlib.check_profile(fdata, profile, plan.crate.crate_names, plan.crate.package)
        store_path = plan.store.put(profile, suffix=".fdata")
        result["store_path"] = str(store_path)
        result["profile_sha256"] = plan.store.verify(store_path, "before llvm-bolt")
        log = plan.logs / "bolt-optimise.log"
        paths.output.unlink(missing_ok=True)
        # relative names in <work>/bolt: llvm-bolt writes its command line into the binary (.note.bolt_info)
        run(
            [str(tools.llvm_bolt), paths.input.name, "-o", paths.output.name, f"-data={store_path}", *args],
            env=plan.env,
            log=log,
            cwd=paths.dir,
            what="llvm-bolt",
        )
        plan.store.verify(store_path, "after llvm-bolt")
        if not paths.output.is_file():
            raise MissingInput(f"llvm-bolt left no binary at {paths.output}", f"see {log}")
        summary = boltlib.parse_bolt_log(log.read_text(encoding="utf-8", errors="replace"))
        result.update(summary.as_json())
        boltlib.check_bolt_log(summary, store_path, log)
        result["binary_sha256"] = sha256_file(paths.output)
        result["max_glibc"] = elf.max_glibc(paths.output)
        result["libc"] = elf.libc_needs(paths.output)
        result["input_bytes"] = binary.stat().st_size
        result["binary_bytes"] = paths.output.stat().st_size
        if plan.config.max_glibc:
            elf.check_glibc(paths.output, plan.config.max_glibc)
        copy = bolted_copy(plan)
        copy_atomically(paths.output, copy)
        if sha256_file(copy) != result["binary_sha256"]:
            raise CheckFailed(f"{paths.output} changed while it was checked", "is another bolt stage writing here?")
        result["binary"] = str(copy)
        workload = plan.workload()
        say(f"verify: the BOLTed binary runs the workload {workload.path.name}")
        result["verify"] = _replay_bolted(plan, workload, copy)
    except PgoError as error:
        result["failed"] = error.line()
        result["seconds"] = _timed(start)
        kept = _reject_bolted(plan, paths) if paths.output.is_file() else None
        result["binary"] = str(kept) if kept is not None else None
        report.record(plan.work, "bolt", result)
        raise
    paths.output.unlink(missing_ok=True)
    result["seconds"] = _timed(start)
    report.record(plan.work, "bolt", result)
    return result


def _replay_bolted(plan: BuildPlan, workload: Workload, binary: Path) -> WorkloadRun:
    """The training workload on the BOLTed binary, every phase check on; a failure says it was the BOLTed one."""
    try:
        return run_workload(
            workload,
            binary=binary,
            base_env=plan.env,
            work=plan.work,
            logs=plan.logs / "bolt-verify",
            project_dir=plan.config.project_dir,
            scale=plan.config.train_scale,
            timeout=plan.config.phase_timeout,
            profraw_dir=None,
            crate_dir=plan.crate.package_dir,
            scratch_name="bolt-verify",
        )
    except TrainingFailed as error:
        raise CheckFailed(
            f"the BOLTed binary fails the workload: {error.message}",
            f"{error.hint}; the PGO binary ran it: a BOLT miscompile or a PGO_BOLT_ARGS flag",
        ) from error


def _reject_bolted(plan: BuildPlan, paths: BoltPaths) -> Path | None:
    """Move a BOLTed binary that failed its checks to <work>/rejected/<bin>.bolt; no copy stays in bolted/."""
    rejected = plan.work / "rejected" / paths.output.name
    kept: Path | None = None
    try:
        copy_atomically(paths.output, rejected)
        kept = rejected
        say(f"the BOLTed binary failed its checks: moved to {rejected}")
    except WorkDirError as error:
        say(f"the BOLTed binary failed its checks and was deleted: no copy kept ({error.line()})")
    finally:
        paths.output.unlink(missing_ok=True)
        bolted_copy(plan).unlink(missing_ok=True)
    return kept
