"""``<work>/report.json``: one object per stage that ran, written atomically."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_type_hints, overload

from recipes.errors import MissingInput, WorkDirError
from recipes.files import write_atomically
from recipes.inputs import read_json
from recipes.results import (
    BoltResult,
    CpuBaselineResult,
    DeterminismResult,
    Failure,
    InstrumentResult,
    MergeResult,
    OptimiseResult,
    PipelineStage,
    PlainResult,
    RebuildResult,
    Report,
    StageName,
    TestResult,
    TrainResult,
    mismatch,
)
from recipes.workdir import WorkDir

#: the layout of report.json, written in it as "schema" and checked when it is read (a report without one is of
#: the first layout, written before the number was)
REPORT_SCHEMA = 1
STAGES: tuple[PipelineStage, ...] = ("instrument", "train", "merge", "optimise", "test", "bolt")
#: what a stage's new result makes stale: every later stage, but test and bolt both stand on optimise alone
LATER: dict[str, tuple[PipelineStage, ...]] = {stage: STAGES[i + 1 :] for i, stage in enumerate(STAGES)}
LATER["test"] = ()
#: the session that writes each record (the hint of a record that does not fit its type)
SESSION: dict[str, str] = {stage: stage for stage in STAGES} | {"test": "pgo-test", "cpu_baseline": "cpu-baseline"}
#: each record's type (results.Report's keys)
RECORD_TYPES: dict[str, Any] = get_type_hints(Report)


def report_path(work: Path) -> Path:
    return WorkDir(work).report


def load(work: Path) -> Report:
    """The records of report.json (none when there is no report), each of its stage's type: checked to be, a
    missing key or a value of another type is one line naming the stage and the key (:func:`check_record`)."""
    records = _load_records(work)
    for stage, record in records.items():
        check_record(report_path(work), stage, record)
    return _typed(records)


def check_record(path: Path, stage: str, record: dict[str, Any]) -> None:
    """Refuse a record that does not fit its stage's type (``results``): a key of another type, or, in the record of
    a stage that succeeded (no ``failed`` reason), a key the readers of that record need that is missing."""
    declared = RECORD_TYPES.get(stage)
    if declared is None:  # a record this pgo-recipes does not write: nobody reads it
        return
    reason = record.get("failed")
    problem = mismatch(record, declared, "", complete=not (isinstance(reason, str) and reason))
    if problem is not None:
        session = SESSION.get(stage, stage)
        raise WorkDirError(
            f"{path}: {stage}: {problem}",
            f"run `nox -s {session}` again with the same PGO_OUT, or remove {path.name} and run the stages again",
        )


def _typed(records: dict[str, Any]) -> Report:
    """The records as read from JSON, checked to be objects, seen as their types (the one place they are)."""
    return cast(Report, records)


def _load_records(work: Path) -> dict[str, Any]:
    """report.json's records, checked to be objects (their keys are :func:`load`'s to check: a stage that starts
    replaces a record that does not fit, without reading it)."""
    path = report_path(work)
    if not path.is_file():
        return {}
    data = read_json(path, "the report", WorkDirError, "remove it and run the stages again")
    if not isinstance(data, dict):
        raise WorkDirError(f"{path} is not a report (not a JSON object)", "remove it and run the stages again")
    schema = data.pop("schema", REPORT_SCHEMA)
    if schema != REPORT_SCHEMA:
        raise WorkDirError(
            f"{path} has schema {schema!r}; this pgo-recipes reads schema {REPORT_SCHEMA}",
            "another version of pgo-recipes wrote it: remove it (or use another PGO_OUT) and run the stages again",
        )
    odd = next((name for name, record in data.items() if not isinstance(record, dict)), None)
    if odd is not None:
        raise WorkDirError(
            f"{path}: {odd!r} is not a stage record (a JSON object)", "remove it and run the stages again"
        )
    return data


def running(work: Path, stage: StageName) -> bool:
    """Whether ``stage``'s record says it has not finished (read as :func:`record` does, without checking it)."""
    record = _load_records(work).get(stage)
    return isinstance(record, dict) and bool(record.get("running"))


def save(work: Path, report: Report) -> None:
    """Write the report atomically: a full disk leaves the old report whole and no temp file."""
    path = report_path(work)
    try:
        write_atomically(path, json.dumps({"schema": REPORT_SCHEMA, **report}, indent=2, sort_keys=False) + "\n")
    except OSError as exc:
        raise WorkDirError(f"cannot write {path}: {exc.strerror}", "free space in PGO_OUT or choose another") from exc


def start(work: Path, stage: StageName) -> None:
    """A stage begins: its earlier record and those of the stages after it go, replaced by a ``failed`` record
    that its success overwrites. An interrupted stage thus never leaves an older success behind."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record_failure(work, stage, {"failed": f"{stage} did not finish (started {started})", "running": True})


def failed(result: Mapping[str, object]) -> str | None:
    """Why a stage's record says it failed, or None for a success."""
    reason = result.get("failed")
    return str(reason) if reason else None


@overload
def record(work: Path, stage: Literal["instrument"], result: InstrumentResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["train"], result: TrainResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["merge"], result: MergeResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["optimise"], result: OptimiseResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["test"], result: TestResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["bolt"], result: BoltResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["plain"], result: PlainResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["rebuild"], result: RebuildResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["determinism"], result: DeterminismResult) -> Report: ...
@overload
def record(work: Path, stage: Literal["cpu_baseline"], result: CpuBaselineResult) -> Report: ...
def record(work: Path, stage: StageName, result: Mapping[str, object]) -> Report:
    """Set ``stage``'s result and drop the results of the stages after it, which it makes stale."""
    return _record(work, stage, result)


def record_failure(work: Path, stage: StageName, failure: Failure) -> Report:
    """:func:`record` of a failure, for a stage named by a variable (any stage's record may be one)."""
    return _record(work, stage, failure)


def _record(work: Path, stage: StageName, result: Mapping[str, object]) -> Report:
    report = _load_records(work)
    for later in LATER.get(stage, ()):
        report.pop(later, None)
    report[stage] = result
    typed = _typed(report)
    save(work, typed)
    return typed


@overload
def require(work: Path, stage: Literal["instrument"], needed_by: str) -> InstrumentResult: ...
@overload
def require(work: Path, stage: Literal["train"], needed_by: str) -> TrainResult: ...
@overload
def require(work: Path, stage: Literal["merge"], needed_by: str) -> MergeResult: ...
@overload
def require(work: Path, stage: Literal["optimise"], needed_by: str) -> OptimiseResult: ...
def require(work: Path, stage: StageName, needed_by: str) -> Mapping[str, object]:
    """``stage``'s record, refused when there is none, it says the stage failed, or a record does not fit."""
    result = load(work).get(stage)
    if not isinstance(result, dict):
        raise MissingInput(
            f"{needed_by} needs the result of {stage}, and {report_path(work)} has none",
            f"run `nox -s {stage}` first (or `nox -s pgo` for all stages), with the same PGO_OUT",
        )
    if reason := failed(result):
        raise MissingInput(
            f"{needed_by} needs the result of {stage}, and the last {stage} failed: {reason}",
            f"run `nox -s {stage}` again (or `nox -s pgo`) after fixing that",
        )
    return result
