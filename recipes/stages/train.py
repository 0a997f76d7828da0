"""The training: the instrumented binary runs the workload; each instance writes its ``.profraw``."""

from __future__ import annotations

import os
from pathlib import Path

from recipes import profdata, report
from recipes.errors import MissingInput
from recipes.plan import BuildPlan
from recipes.results import TrainResult
from recipes.stages._record import recorded, run_on
from recipes.workload import check_environment, check_tools


@recorded("train")
def train(plan: BuildPlan) -> TrainResult:
    """Drive the instrumented binary through the workload; each instance writes its .profraw."""
    inst = report.require(plan.work, "instrument", "train")
    binary = Path(inst["binary"])
    if not binary.is_file():
        raise MissingInput(f"the instrumented binary {binary} is gone", "run `nox -s instrument` again")
    workload = plan.workload()
    check_tools(workload, plan.env.get("PATH", os.defpath))
    check_environment(workload, plan.env)
    result = run_on(plan, workload, binary, logs=plan.logs, profraw_dir=plan.profraw_dir)
    result["profraw"] = [raw.as_json() for raw in profdata.record_raw_profiles(plan.profraw_dir)]
    report.record(plan.work, "train", result)
    return result
