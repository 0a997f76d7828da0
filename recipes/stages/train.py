"""The training: the instrumented binary runs the workload; each instance writes its ``.profraw``."""

from __future__ import annotations

import os
from pathlib import Path

from recipes import profdata, report
from recipes.errors import CheckFailed, MissingInput
from recipes.plan import BuildPlan
from recipes.results import TrainResult
from recipes.stages._record import StageFrame, run_on
from recipes.store import sha256_file
from recipes.training import Collect
from recipes.workload import check_environment, check_tools


def instrumented_binary(plan: BuildPlan) -> Path:
    """The binary the instrument stage built and recorded: at the instrumented build's path in this work dir, and
    unchanged since (its sha256). Anything else report.json may name is not run."""
    inst = report.require(plan.work, "instrument", "train")
    binary = inst.binary
    expected = plan.instrumented_binary
    if binary != expected:
        raise CheckFailed(
            f"report.json names {binary} as the instrumented binary, not {expected} that instrument builds",
            "train runs only the instrumented build of this work dir: run `nox -s instrument` again",
        )
    if not binary.is_file():
        raise MissingInput(f"the instrumented binary {binary} is gone", "run `nox -s instrument` again")
    if sha256_file(binary) != inst.binary_sha256:
        raise CheckFailed(
            f"the instrumented binary {binary} changed since instrument built it (its sha256 is not the recorded one)",
            "run `nox -s instrument` again",
        )
    return binary


def train(plan: BuildPlan) -> TrainResult:
    """Drive the instrumented binary through the workload; each instance writes its .profraw."""
    with StageFrame(plan, "train", timed=False) as frame:  # its seconds: the workload run's
        binary = instrumented_binary(plan)
        workload = plan.require_workload()
        check_tools(workload, plan.env.get("PATH", os.defpath))
        check_environment(workload, plan.env)
        run = run_on(plan, workload, binary, logs=plan.logs, scratch="train", collect=Collect.profraw(plan.profraw_dir))
        raws = [raw.as_json() for raw in profdata.record_raw_profiles(plan.profraw_dir)]
        return frame.done(TrainResult.of(run, raws))
