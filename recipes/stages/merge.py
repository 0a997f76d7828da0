"""The merge: exactly this training's raw profiles, merged with rustc's own LLVM's llvm-profdata, and the floor of
executed functions the merged profile must reach."""

from __future__ import annotations

from dataclasses import dataclass

from recipes import profdata, report
from recipes.errors import CheckFailed, PgoError
from recipes.plan import BuildPlan
from recipes.results import InstrumentResult, MergeResult, from_json
from recipes.runner import say
from recipes.stages._record import StageFrame, threshold
from recipes.store import sha256_file
from recipes.toolchain import find_profdata, rustc_sysroot
from recipes.workload import Workload


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
    """The floor :func:`recipes.stages._record.threshold` chooses (the workload's scales with its
    ``min_functions_total``), else 1."""
    chosen = threshold(plan, workload, "min_functions")
    if chosen is None:
        return FunctionFloor(1, "the default")
    return FunctionFloor(
        chosen.value, chosen.source, chosen.workload.min_functions_total if chosen.workload is not None else None
    )


def merge(plan: BuildPlan) -> MergeResult:
    """Merge exactly this training's raw profiles with rustc's own LLVM's llvm-profdata; count what ran."""
    with StageFrame(plan, "merge") as frame:
        return _merge(plan, frame)


def refuse_other_rustc(plan: BuildPlan) -> None:
    """The raw profiles are in the format of the instrumented build's rustc: a merge that resolves another rustc
    (another toolchain chosen since) would merge them with another LLVM's llvm-profdata."""
    built = report.load(plan.work).instrument
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


def _merge(plan: BuildPlan, frame: StageFrame) -> MergeResult:
    trained = report.require(plan.work, "train", "merge")
    refuse_other_rustc(plan)
    raws = profdata.check_raw_profiles(plan.profraw_dir, trained.profraw)
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
        except PgoError:
            plan.merged_profile.unlink(missing_ok=True)
            raise
    return frame.done(from_json(MergeResult, {**known, "seconds": 0.0}))  # the frame's seconds
