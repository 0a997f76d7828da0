"""``<work>/report.json``: one object per stage that ran, written atomically.

:func:`load` returns a :class:`recipes.results.Report`: each pipeline stage's record checked and made its dataclass
(or a :class:`recipes.results.Failed`), a record that does not fit refused in one line naming the file, the stage
and the key; :func:`require` returns the success type of the stage a later one stands on; :func:`record` writes a
stage's dataclass as the JSON the stages always wrote (the layout, ``schema`` 1, is unchanged)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from recipes.errors import MissingInput, WorkDirError
from recipes.files import write_atomically
from recipes.inputs import read_json
from recipes.results import (
    STAGE_TYPES,
    BoltResult,
    CpuBaselineResult,
    DeterminismResult,
    Failed,
    InstrumentResult,
    MergeResult,
    OptimiseResult,
    PipelineStage,
    PlainResult,
    RebuildResult,
    Report,
    StageName,
    StageResult,
    TestResult,
    TrainResult,
    Unfit,
    as_json,
    failed_from_json,
    from_json,
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


def report_path(work: Path) -> Path:
    return WorkDir(work).report


def load(work: Path) -> Report:
    """The records of report.json (none when there is no report), each checked and made its stage's type
    (:func:`parse`)."""
    return parse(report_path(work), _load_records(work))


def parse(path: Path, records: Mapping[str, Any]) -> Report:
    """``records`` (report.json's, read from ``path``) as a :class:`Report`: a record of a stage that succeeded as
    its dataclass, one whose ``failed`` is a reason as a :class:`Failed`; a record that does not fit (a missing key,
    a value of another type) is one line naming the file, the stage and the key (:func:`check_record`). A record of
    a name this pgo-recipes does not write is left be."""
    typed = {stage: check_record(path, stage, record) for stage, record in records.items()}
    return Report(**{stage: record for stage, record in typed.items() if record is not None})


def check_record(path: Path, stage: str, record: dict[str, Any]) -> Any:
    """``stage``'s record as its type (``results``), or None for a name this pgo-recipes does not write; refused
    when it does not fit: a key of another type, or, in the record of a stage that succeeded (no ``failed``
    reason), a key its type requires that is missing."""
    if stage not in STAGE_TYPES:
        return None  # a record this pgo-recipes does not write: nobody reads it
    reason = record.get("failed")
    try:
        if isinstance(reason, str) and reason:
            return failed_from_json(STAGE_TYPES[stage], record)
        return from_json(STAGE_TYPES[stage], record)
    except Unfit as unfit:
        session = SESSION.get(stage, stage)
        raise WorkDirError(
            f"{path}: {stage}: {unfit}",
            f"run `nox -s {session}` again with the same PGO_OUT, or remove {path.name} and run the stages again",
        ) from None


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


def save(work: Path, records: Mapping[str, object]) -> None:
    """Write the records (as JSON) atomically: a full disk leaves the old report whole and no temp file."""
    path = report_path(work)
    try:
        write_atomically(path, json.dumps({"schema": REPORT_SCHEMA, **records}, indent=2, sort_keys=False) + "\n")
    except OSError as exc:
        raise WorkDirError(f"cannot write {path}: {exc.strerror}", "free space in PGO_OUT or choose another") from exc


#: report.json's key of the crate identity the work dir's records are of (recipes/claim.py), beside the records
CRATE = "crate"


def crate_identity(work: Path) -> dict[str, Any] | None:
    """The crate identity report.json records, as written (None: none yet, or no report)."""
    identity = _load_records(work).get(CRATE)
    return identity if isinstance(identity, dict) else None


def record_crate_identity(work: Path, identity: Mapping[str, object]) -> None:
    """Record the crate identity of the work dir's records (its first use, or a report written before it was)."""
    records = _load_records(work)
    records[CRATE] = dict(identity)
    save(work, records)


def start(work: Path, stage: StageName) -> None:
    """A stage begins: its earlier record and those of the stages after it go, replaced by a ``failed`` record
    that its success overwrites. An interrupted stage thus never leaves an older success behind."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record_failure(work, stage, Failed(f"{stage} did not finish (started {started})", running=True))


_Result = TypeVar("_Result", bound=StageResult)


@overload
def record(work: Path, stage: Literal["instrument"], result: InstrumentResult) -> InstrumentResult: ...
@overload
def record(work: Path, stage: Literal["train"], result: TrainResult) -> TrainResult: ...
@overload
def record(work: Path, stage: Literal["merge"], result: MergeResult) -> MergeResult: ...
@overload
def record(work: Path, stage: Literal["optimise"], result: OptimiseResult) -> OptimiseResult: ...
@overload
def record(work: Path, stage: Literal["test"], result: TestResult) -> TestResult: ...
@overload
def record(work: Path, stage: Literal["bolt"], result: BoltResult) -> BoltResult: ...
@overload
def record(work: Path, stage: Literal["plain"], result: PlainResult) -> PlainResult: ...
@overload
def record(work: Path, stage: Literal["rebuild"], result: RebuildResult) -> RebuildResult: ...
@overload
def record(work: Path, stage: Literal["determinism"], result: DeterminismResult) -> DeterminismResult: ...
@overload
def record(work: Path, stage: Literal["cpu_baseline"], result: CpuBaselineResult) -> CpuBaselineResult: ...
def record(work: Path, stage: StageName, result: _Result) -> _Result:
    """Set ``stage``'s result and drop the results of the stages after it, which it makes stale; ``result`` back,
    for the stage to return, written as :func:`recipes.results.as_json`."""
    _record(work, stage, as_json(result))
    return result


def record_failure(work: Path, stage: StageName, failure: Failed) -> None:
    """:func:`record` of a failure (any stage's record may be one)."""
    _record(work, stage, failure.as_json())


def _record(work: Path, stage: StageName, result: Mapping[str, object]) -> None:
    records = _load_records(work)
    for later in LATER.get(stage, ()):
        records.pop(later, None)
    records[stage] = result
    save(work, records)


@overload
def require(
    work: Path, stage: Literal["instrument"], needed_by: str, handed: Report | None = None
) -> InstrumentResult: ...
@overload
def require(work: Path, stage: Literal["train"], needed_by: str, handed: Report | None = None) -> TrainResult: ...
@overload
def require(work: Path, stage: Literal["merge"], needed_by: str, handed: Report | None = None) -> MergeResult: ...
@overload
def require(work: Path, stage: Literal["optimise"], needed_by: str, handed: Report | None = None) -> OptimiseResult: ...
@overload
def require(work: Path, stage: Literal["test"], needed_by: str, handed: Report | None = None) -> TestResult: ...
@overload
def require(work: Path, stage: Literal["bolt"], needed_by: str, handed: Report | None = None) -> BoltResult: ...
def require(work: Path, stage: PipelineStage, needed_by: str, handed: Report | None = None) -> StageResult:
    """``stage``'s result, of its success type: refused when there is none, it says the stage failed, or a record
    does not fit. ``handed``: the results of the stages this process ran before (``nox -s pgo`` chains them), whose
    success is taken as it is, not read back from report.json (which recorded it)."""
    given = handed.stage(stage) if handed is not None else None
    if given is not None and not isinstance(given, Failed):
        return given
    result = load(work).stage(stage)
    if result is None:
        raise MissingInput(
            f"{needed_by} needs the result of {stage}, and {report_path(work)} has none",
            f"run `nox -s {stage}` first (or `nox -s pgo` for all stages), with the same PGO_OUT",
        )
    if isinstance(result, Failed):
        raise MissingInput(
            f"{needed_by} needs the result of {stage}, and the last {stage} failed: {result.reason}",
            f"run `nox -s {stage}` again (or `nox -s pgo`) after fixing that",
        )
    return result
