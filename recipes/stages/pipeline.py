"""``pgo``: the whole pipeline, every stage in order, with what it needs refused before anything is built."""

from __future__ import annotations

from dataclasses import replace

from recipes import report
from recipes.plan import BuildPlan
from recipes.results import Report
from recipes.stages._observe import refuse_silencing_rustflags
from recipes.stages.bolt import bolt
from recipes.stages.frame import check_runnable
from recipes.stages.instrument import instrument
from recipes.stages.merge import merge
from recipes.stages.optimise import optimise
from recipes.stages.test import test
from recipes.stages.train import train
from recipes.workload.shards import workload_shards


def pgo(plan: BuildPlan) -> Report:
    """All four stages in order, every check on (the optimised binary replays the training)."""
    # llvm-profdata, llvm-bolt and merge-fdata (PGO_BOLT=1) were checked when the plan was made (plan.make_plan)
    handed = Report()
    refuse_silencing_rustflags(plan)  # before the training, not at the optimised build
    if plan.config.profdata is None:
        # what it needs (each shard's) is refused before anything is built
        check_runnable(plan, [w for _, w in workload_shards(plan.shards)] or [plan.require_workload()])
        # each stage hands its result to the next in memory; report.json records them (and is what a stage run
        # alone reads)
        handed = replace(handed, instrument=instrument(plan))
        handed = replace(handed, train=train(plan, handed=handed))
        handed = replace(handed, merge=merge(plan, handed=handed))
    verify = plan.config.verify_wanted(trained=plan.config.profdata is None)
    handed = replace(handed, optimise=optimise(plan, verify=verify, handed=handed))
    if plan.config.test:
        test(plan, handed=handed)
    if plan.config.bolt:
        bolt(plan, handed=handed)
    return report.load(plan.work)
