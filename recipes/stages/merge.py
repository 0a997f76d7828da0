"""The merge: exactly this training's raw profiles, merged with rustc's own LLVM's llvm-profdata, and the floor of
executed functions the merged profile must reach."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes import report
from recipes.bench.coverage import demangle, demangler
from recipes.errors import CheckFailed, PgoError
from recipes.llvm import checks, elf, health, profdata
from recipes.plan import BuildPlan
from recipes.results import (
    HealthRecord,
    InstrumentResult,
    LostRecord,
    MergeResult,
    Report,
    ShardRecord,
    ShardTrainRecord,
    UnexecutedRecord,
    from_json,
)
from recipes.runner import say
from recipes.stages import tests_shard
from recipes.stages.frame import StageFrame, threshold
from recipes.store import sha256_file
from recipes.toolchain.rustc import ProfdataTool, find_profdata, rustc_sysroot
from recipes.workload import Workload
from recipes.workload.shards import (
    Shard,
    asked_shares,
    integer_weights,
    reached_shares,
    refuse_heavy,
    weighted_inputs,
)

#: how many of the main crate's unexecuted functions report.json and the summary name, the largest first
UNEXECUTED_LISTED = 20


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

    def as_json(self, total: int) -> dict[str, int | str | None]:
        """The floor's keys of the merge record (``total``: the build's functions, 0 while unknown)."""
        return {
            "min_functions": self.for_total(total) if total else self.value,
            "min_functions_set": self.value,
            "min_functions_source": self.source,
            "min_functions_total": self.set_against,
        }


def function_floor(plan: BuildPlan, workload: Workload | None) -> FunctionFloor:
    """The floor :func:`recipes.stages.frame.threshold` chooses (the workload's scales with its
    ``min_functions_total``), else 1."""
    chosen = threshold(plan, workload, "min_functions")
    if chosen is None:
        return FunctionFloor(1, "the default")
    return FunctionFloor(
        chosen.value, chosen.source, chosen.workload.min_functions_total if chosen.workload is not None else None
    )


def merge(plan: BuildPlan, *, handed: Report | None = None) -> MergeResult:
    """Merge exactly this training's raw profiles with rustc's own LLVM's llvm-profdata; count what ran."""
    with StageFrame(plan, "merge") as frame:
        trained = report.require(plan.work, "train", "merge", handed)
        refuse_other_rustc(plan, handed)
        if plan.shards:
            return _merge_shards(plan, frame, trained.shards)
        raws = profdata.check_raw_profiles(plan.profraw_dir, trained.profraw)
        tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
        say(f"merge: {len(raws)} raw profiles with {tool.path} (LLVM {tool.llvm_version})")
        plan.merged_profile.unlink(missing_ok=True)
        merged = _merge_raws(plan, tool, raws, plan.merged_profile, plan.logs / "merge.log")
        floor = function_floor(plan, plan.require_workload())
        #: the record so far, in report.json's words: what a failed record keeps, and the result when all is done
        known: dict[str, object] = {
            "profile": str(plan.merged_profile),
            "profraw_merged": len(merged.merged),
            "profraw_dropped": merged.dropped,
            **floor.as_json(0),
            "llvm_profdata": str(tool.path),
            "llvm_profdata_version": tool.llvm_version,
        }
        with frame.kept(lambda: known):  # a failure here records what the merge found, and the profile goes
            try:
                summary = profdata.check_usable(
                    tool, plan.merged_profile, env=plan.env, log=plan.logs / "merge-show.log", what="the merged profile"
                )
                _check_floor(plan, floor, summary, known)
                counts = record_counts(plan, tool, plan.merged_profile, "merge-counts")
                check_health(plan, tool, known, counts)
                known.update(unexecuted(plan, tool, counts))
            except PgoError:
                plan.merged_profile.unlink(missing_ok=True)
                raise
        return frame.done(from_json(MergeResult, {**known, "seconds": 0.0}))  # the frame's seconds


def _merge_raws(
    plan: BuildPlan, tool: ProfdataTool, raws: list[Path], profile: Path, log: Path
) -> profdata.MergeResult:
    """``raws`` merged into ``profile``; each raw profile PGO_DROP_BAD_PROFRAW=1 dropped said in a warning."""
    merged = profdata.merge(tool, raws, profile, env=plan.env, log=log, drop_bad=plan.config.drop_bad_profraw)
    for name, why in merged.dropped.items():
        say(f"warning: dropped {name}: {why} (PGO_DROP_BAD_PROFRAW=1)")
    return merged


def _check_floor(
    plan: BuildPlan, floor: FunctionFloor, summary: profdata.ProfileSummary, known: dict[str, object]
) -> None:
    """The merged profile's figures into ``known`` (the record so far), then its executed functions against the
    floor."""
    known.update(
        {
            "profile_sha256": sha256_file(plan.merged_profile),
            "executed_functions": summary.executed_functions,
            "total_functions": summary.total_functions,
            **floor.as_json(summary.total_functions),
        }
    )
    if summary.executed_functions < floor.for_total(summary.total_functions):
        raise floor.refusal(summary.executed_functions, summary.total_functions)


def check_health(plan: BuildPlan, tool: ProfdataTool, known: dict[str, object], counts: Mapping[str, int]) -> None:
    """The health gate (PGO_REFERENCE, recipes/llvm/health.py): the merged profile's ``counts`` (by record name)
    against the reference, said, recorded in ``known``, and refused when it lost more of the reference's count than
    PGO_MAX_LOST."""
    reference = plan.config.reference
    if reference is None:
        return
    log = plan.logs / "merge-reference.log"
    profdata.check_usable(tool, reference, env=plan.env, log=log, what="PGO_REFERENCE")
    found = health.compare(counts, profdata.record_counts(tool, reference, env=plan.env, log=log))
    say(health.health_line(found, str(reference)))
    known["health"] = HealthRecord(
        reference=str(reference),
        executed=found.executed,
        reference_executed=found.reference_executed,
        total_count_ratio=round(found.total_ratio, 4),
        lost_functions=found.lost_functions,
        lost_share=found.lost_share,
        max_lost=plan.config.max_lost,
        only_reference=[LostRecord(function=f, why="not run", share=share) for f, share in found.only_reference],
    )
    health.refuse_lost(found, plan.config.max_lost, plan.config.source("max_lost"), str(reference))


def refuse_other_rustc(plan: BuildPlan, handed: Report | None = None) -> None:
    """The raw profiles are in the format of the instrumented build's rustc: a merge that resolves another rustc
    (another toolchain chosen since) would merge them with another LLVM's llvm-profdata."""
    built = (handed.instrument if handed is not None else None) or report.load(plan.work).instrument
    if not isinstance(built, InstrumentResult):
        return
    here = (plan.rustc.release, plan.rustc.llvm_version)
    if built.rustc != here[0] or (built.rustc_llvm is not None and built.rustc_llvm != here[1]):
        how = f" (LLVM {built.rustc_llvm}, {built.rustc_source})" if built.rustc_llvm else ""
        then = f"rustc {built.rustc}{how}"
        raise CheckFailed(
            f"the instrumented build was made by {then} and merge resolves rustc {here[0]} (LLVM {here[1]}, "
            f"{plan.rustc_source}) in {plan.cwd}",
            "run every stage with the same toolchain (PGO_CARGO's +toolchain, RUSTUP_TOOLCHAIN, rust-toolchain.toml), "
            "or instrument again",
        )


def record_counts(plan: BuildPlan, tool: ProfdataTool, profile: Path, log: str) -> dict[str, int]:
    return profdata.record_counts(tool, profile, env=plan.env, log=plan.logs / f"{log}.log")


def unexecuted(plan: BuildPlan, tool: ProfdataTool, counts: Mapping[str, int]) -> dict[str, object]:
    """The merge record's coverage the user can act on: how many of the main crate's functions (its records in
    the profile) no training executed, and the :data:`UNEXECUTED_LISTED` largest by their code size in the
    instrumented binary (``.symtab``'s sizes; 0 where the binary has no such symbol), demangled."""
    names = [r for r, count in counts.items() if count == 0 and checks.of_crate(r, plan.crate.crate_names)]
    binary = plan.instrumented_binary
    sizes = elf.function_sizes(binary) if binary.is_file() else {}
    symbols = sorted({r.rsplit(";", 1)[-1] for r in names}, key=lambda n: (-sizes.get(n, 0), n))[:UNEXECUTED_LISTED]
    shown = demangle(symbols, demangler(tool, plan.env), plan.env)
    largest: list[UnexecutedRecord] = [
        {"name": shown_as, "bytes": sizes.get(name, 0)} for name, shown_as in zip(symbols, shown, strict=True)
    ]
    return {"unexecuted_main_crate": len(names), "unexecuted_largest": largest}


@dataclass(frozen=True)
class MergedShard:
    """A shard merged alone and checked: its profile, its figures, its records' counts."""

    shard: Shard
    profile: Path
    summary: profdata.ProfileSummary
    counts: dict[str, int]
    merged: int
    dropped: dict[str, str]

    @property
    def executed(self) -> set[str]:
        return {name for name, count in self.counts.items() if count}


def refuse_empty_shard(name: str, workload: Path | str, summary: profdata.ProfileSummary) -> None:
    """A shard whose profile counts nothing: merged with any weight, it would add nothing to the profile."""
    if summary.executed_functions == 0 or summary.total_count == 0:
        raise CheckFailed(
            f"the shard {name} executed none of its {summary.total_functions} functions ({workload}): nothing of "
            "it would reach the profile",
            "its workload does not run the binary's code: fix its phases, or drop the shard from PGO_WORKLOAD",
        )


def _merge_one(plan: BuildPlan, tool: ProfdataTool, shard: Shard, recorded: ShardTrainRecord) -> MergedShard:
    """One shard's raw profiles, exactly those its training recorded, merged alone into its own profile, checked
    as a whole training's is: readable, some function executed, and its workload's floor where it declares one."""
    raws = profdata.check_raw_profiles(plan.workdir.shard_profraw(shard.name), recorded["profraw"])
    profile = plan.workdir.shard_profdata(shard.name)
    log = plan.logs / f"merge-{shard.name}.log"
    merged = _merge_raws(plan, tool, raws, profile, log)
    what = f"the profile of shard {shard.name}"
    summary = profdata.check_usable(tool, profile, env=plan.env, log=log.with_suffix(".show.log"), what=what)
    refuse_empty_shard(shard.name, shard.source, summary)
    if shard.workload is not None and shard.workload.min_functions is not None:
        floor = FunctionFloor(
            shard.workload.min_functions, f"{shard.workload.path} min_functions", shard.workload.min_functions_total
        )
        if summary.executed_functions < floor.for_total(summary.total_functions):
            refusal = floor.refusal(summary.executed_functions, summary.total_functions)
            raise CheckFailed(f"shard {shard.name}: {refusal.message}", refusal.hint)
    counts = record_counts(plan, tool, profile, f"merge-{shard.name}-counts")
    return MergedShard(shard, profile, summary, counts, len(merged.merged), merged.dropped)


def _merge_shards(plan: BuildPlan, frame: StageFrame, recorded: list[ShardTrainRecord] | None) -> MergeResult:
    """Each shard merged alone and checked, then all merged with the integer weights that give each its share of
    the total count (recipes/workload/shards.py); a failure leaves no merged profile, the shards' nor the whole's."""
    by_name = {r["name"]: r for r in recorded or []}
    names = [shard.name for shard in plan.shards]
    if list(by_name) != names:
        raise CheckFailed(
            f"the last training's shards ({', '.join(by_name) or 'none'}) are not these ({', '.join(names)})",
            "run `nox -s train` again with the same PGO_WORKLOAD",
        )
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    say(f"merge: {len(names)} shards ({', '.join(names)}) with {tool.path} (LLVM {tool.llvm_version})")
    profiles = [plan.merged_profile, *(plan.workdir.shard_profdata(n) for n in names)]
    profiles += [plan.workdir.shard_rest(n) for n in names]
    for path in profiles:
        path.unlink(missing_ok=True)
    floor = function_floor(plan, plan.require_workload())
    known: dict[str, object] = {"profile": str(plan.merged_profile), **floor.as_json(0)}
    with frame.kept(lambda: known):
        try:
            found = _combine(plan, tool, floor, known, by_name)
            return frame.done(from_json(MergeResult, {**found, "seconds": 0.0}))
        except PgoError:
            for path in profiles:
                path.unlink(missing_ok=True)
            raise


def _combine(
    plan: BuildPlan,
    tool: ProfdataTool,
    floor: FunctionFloor,
    known: dict[str, object],
    trained: Mapping[str, ShardTrainRecord],
) -> dict[str, object]:
    """The shards merged alone, then together with their weights; the merge record's fields (``known``, updated
    as they are found, for a failed record)."""
    shards = [_merge_one(plan, tool, shard, trained[shard.name]) for shard in plan.shards]
    shares = asked_shares([m.shard.weight for m in shards])
    totals = [m.summary.total_count for m in shards]
    weights = integer_weights(shares, totals)
    refuse_heavy([m.shard.name for m in shards], weights, shares)
    inputs = weighted_inputs(weights, [m.profile for m in shards])
    profdata.merge_weighted(tool, inputs, plan.merged_profile, env=plan.env, log=plan.logs / "merge.log")
    summary = profdata.check_usable(
        tool, plan.merged_profile, env=plan.env, log=plan.logs / "merge-show.log", what="the merged profile"
    )
    merged_counts = record_counts(plan, tool, plan.merged_profile, "merge-counts")
    all_counts = merged_counts  # the health gate's: the whole profile, the tests shard's records too
    binary: set[str] | None = None
    if any(m.shard.is_tests for m in shards):  # the executed functions counted among the binary's only
        binary = tests_shard.binary_records(m.counts for m in shards if not m.shard.is_tests)
        for m in (m for m in shards if m.shard.is_tests):
            tests_shard.refuse_unreaching(m.counts, binary, plan.crate.crate_names)
        merged_counts = tests_shard.binary_only(merged_counts, binary)
        summary = tests_shard.binary_summary(summary, merged_counts)
    known.update(
        {
            "profraw_merged": sum(m.merged for m in shards),
            "profraw_dropped": {k: v for m in shards for k, v in m.dropped.items()},
            "llvm_profdata": str(tool.path),
            "llvm_profdata_version": tool.llvm_version,
        }
    )
    _check_floor(plan, floor, summary, known)
    check_health(plan, tool, known, all_counts)
    known["shards"] = _shard_records(plan, tool, shards, shares, weights, binary)
    known.update(unexecuted(plan, tool, merged_counts))
    return known


def _shard_records(
    plan: BuildPlan,
    tool: ProfdataTool,
    shards: list[MergedShard],
    shares: list[float],
    weights: list[int],
    binary: set[str] | None,
) -> list[ShardRecord]:
    """Each shard's part of the merge record: its profile, the share asked and reached, what only it executed,
    its overlap with the rest (and, for the tests shard, what of it the binary has)."""
    reached = reached_shares(weights, [m.summary.total_count for m in shards])
    records: list[ShardRecord] = []
    for i, m in enumerate(shards):
        others = set().union(*(o.executed for o in shards if o is not m))
        records.append(
            {
                "name": m.shard.name,
                "profile": str(m.profile),
                "profile_sha256": sha256_file(m.profile),
                "share_asked": shares[i],
                "share_reached": reached[i],
                "weight": weights[i],
                "executed_functions": m.summary.executed_functions,
                "total_functions": m.summary.total_functions,
                "only_this_shard": len(m.executed - others),
                "total_count": m.summary.total_count,
                "overlap_with_rest": _overlap_with_rest(plan, tool, shards, weights, i),
            }
        )
        if binary is not None and m.shard.is_tests:
            tests_shard.add_fields(records[-1], m.counts, others, binary, plan.crate.crate_names)
    return records


def _overlap_with_rest(
    plan: BuildPlan, tool: ProfdataTool, shards: list[MergedShard], weights: list[int], index: int
) -> float:
    """``llvm-profdata overlap`` of shard ``index`` with the others merged as they are weighted in the profile (the
    other shard itself when there are two)."""
    name = shards[index].shard.name
    others = [(w, m.profile) for i, (w, m) in enumerate(zip(weights, shards, strict=True)) if i != index]
    rest = others[0][1]
    if len(others) > 1:
        rest = plan.workdir.shard_rest(name)
        inputs = weighted_inputs([w for w, _ in others], [p for _, p in others])
        profdata.merge_weighted(tool, inputs, rest, env=plan.env, log=plan.logs / f"merge-{name}-rest.log")
    log = plan.logs / f"merge-{name}-overlap.log"
    return profdata.overlap(tool, shards[index].profile, rest, env=plan.env, log=log)
