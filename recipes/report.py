"""``<work>/report.json``: one object per stage that ran, written atomically."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast, overload

from recipes.errors import MissingInput, WorkDirError
from recipes.files import write_atomically
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
)

#: the layout of report.json, written in it as "schema" and checked when it is read (a report without one is of
#: the first layout, written before the number was)
REPORT_SCHEMA = 1
STAGES: tuple[PipelineStage, ...] = ("instrument", "train", "merge", "optimise", "test", "bolt")
#: what a stage's new result makes stale: every later stage, but test and bolt both stand on optimise alone
LATER: dict[str, tuple[PipelineStage, ...]] = {stage: STAGES[i + 1 :] for i, stage in enumerate(STAGES)}
LATER["test"] = ()


def report_path(work: Path) -> Path:
    return work / "report.json"


def load(work: Path) -> Report:
    """The records of report.json (none when there is no report), each of its stage's type."""
    return _typed(_load_records(work))


def _typed(records: dict[str, Any]) -> Report:
    """The records as read from JSON, checked to be objects, seen as their types (the one place they are)."""
    return cast(Report, records)


def _load_records(work: Path) -> dict[str, Any]:
    path = report_path(work)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise WorkDirError(f"{path} is not valid JSON: {exc}", "remove it and run the stages again") from exc
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
    """``stage``'s record, refused when there is none or it says the stage failed."""
    result = _load_records(work).get(stage)
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
