"""``pgo``: the whole pipeline, every stage in order, with what it needs refused before anything is built."""

from __future__ import annotations

import os

from recipes import report
from recipes.plan import BuildPlan
from recipes.results import Report
from recipes.shards import workload_shards
from recipes.stages.bolt import bolt
from recipes.stages.instrument import instrument
from recipes.stages.merge import merge
from recipes.stages.optimise import optimise
from recipes.stages.test import test
from recipes.stages.train import train
from recipes.workload import check_environment, check_tools


def pgo(plan: BuildPlan) -> Report:
    """All four stages in order, every check on (the optimised binary replays the training)."""
    # llvm-profdata, llvm-bolt and merge-fdata (PGO_BOLT=1) were checked when the plan was made (plan.make_plan)
    if plan.config.profdata is None:
        # what it needs (each shard's) is refused before anything is built
        for workload in [w for _, w in workload_shards(plan.shards)] or [plan.require_workload()]:
            check_tools(workload, plan.env.get("PATH", os.defpath))
            check_environment(workload, plan.env)
        instrument(plan)
        train(plan)
        merge(plan)
    optimise(plan, verify=plan.config.verify_wanted(trained=plan.config.profdata is None))
    if plan.config.test:
        test(plan)
    if plan.config.bolt:
        bolt(plan)
    return report.load(plan.work)
