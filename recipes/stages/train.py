"""The training: the instrumented binary runs the workload; each instance writes its ``.profraw``."""

from __future__ import annotations

from pathlib import Path

from recipes import report
from recipes.errors import CheckFailed, MissingInput
from recipes.llvm import profdata
from recipes.plan import BuildPlan
from recipes.results import PhaseRecord, Report, ShardTrainRecord, TrainResult, WorkloadRun
from recipes.runner import say
from recipes.stages import tests_shard
from recipes.stages.frame import StageFrame, check_runnable, run_on
from recipes.store import sha256_file
from recipes.train.trainer import Collect
from recipes.workload import Workload
from recipes.workload.shards import workload_shards


def instrumented_binary(plan: BuildPlan, handed: Report | None = None) -> Path:
    """The binary the instrument stage built and recorded: at the instrumented build's path in this work dir, and
    unchanged since (its sha256). Anything else report.json may name is not run."""
    inst = report.require(plan.work, "instrument", "train", handed)
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


def train(plan: BuildPlan, *, handed: Report | None = None) -> TrainResult:
    """Drive the instrumented binary through the workload; each instance writes its .profraw."""
    with StageFrame(plan, "train", timed=False) as frame:  # its seconds: the workload run's
        binary = instrumented_binary(plan, handed)
        if plan.shards:
            return frame.done(train_shards(plan, binary))
        workload = plan.require_workload()
        check_runnable(plan, [workload])
        run = run_on(plan, workload, binary, logs=plan.logs, scratch="train", collect=Collect.profraw(plan.profraw_dir))
        raws = [raw.as_json() for raw in profdata.record_raw_profiles(plan.profraw_dir)]
        return frame.done(TrainResult.of(run, raws))


def train_shards(plan: BuildPlan, binary: Path) -> TrainResult:
    """Each shard's workload on ``binary``, one after another, each into its own folder of raw profiles; the
    record adds their runs up and keeps each shard's (``shards``), its phases named ``<shard>/<phase>``."""
    check_runnable(plan, [w for _, w in workload_shards(plan.shards)])  # every shard's, before any runs
    if any(shard.is_tests for shard in plan.shards):
        tests_shard.check_instrumented_build(plan)
    runs: list[tuple[str, WorkloadRun]] = []
    records: list[ShardTrainRecord] = []
    for shard in plan.shards:
        if shard.workload is None:  # the crate's own tests (recipes/stages/tests_shard.py)
            records.append(tests_shard.train(plan, binary))
            continue
        say(f"train: shard {shard.name} ({shard.workload.path})")
        folder = plan.workdir.shard_profraw(shard.name)
        run = run_on(plan, shard.workload, binary, logs=plan.logs, scratch="train", collect=Collect.profraw(folder))
        runs.append((shard.name, run))
        records.append(shard_record(shard.name, shard.workload, run, folder))
    phases: list[PhaseRecord] = [{**p, "name": f"{name}/{p['name']}"} for name, run in runs for p in run.phases]
    return TrainResult(
        seconds=round(sum(r["seconds"] for r in records), 3),
        requests=sum(r["requests"] for r in records),
        phases=phases,
        scale=runs[0][1].scale,
        workload=runs[0][1].workload,
        profraw_files=sum(len(r["profraw"]) for r in records),
        profraw=[],
        shards=records,
    )


def shard_record(name: str, workload: Workload, run: WorkloadRun, folder: Path) -> ShardTrainRecord:
    """A workload shard's record in the train record: its run, and the raw profiles it wrote into ``folder``."""
    return {
        "name": name,
        "workload": str(workload.path),
        "seconds": run.seconds,
        "requests": run.requests,
        "profraw": [raw.as_json() for raw in profdata.record_raw_profiles(folder)],
    }
