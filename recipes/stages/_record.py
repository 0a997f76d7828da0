"""What every stage shares: its record in report.json, kept true whatever happens, its time, the workload run
with the plan's settings, and which of configuration and workload file sets a check's threshold."""

from __future__ import annotations

import contextlib
import errno
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from recipes import report
from recipes.errors import CheckFailed, PgoError, WorkDirError
from recipes.files import copy_atomically
from recipes.plan import BuildPlan
from recipes.results import StageName, TrainResult
from recipes.runner import say
from recipes.store import sha256_file
from recipes.training import run_workload
from recipes.workdir import CHECKED_COPIES
from recipes.workload import Workload

_Result = TypeVar("_Result")
#: a stage: called with the plan (and maybe options), it returns its record
StageFunction = Callable[..., _Result]
#: what a full, read-only or forbidden disk raises: known failures, told in one line
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def recorded(name: StageName) -> Callable[[StageFunction[_Result]], StageFunction[_Result]]:
    """A stage that keeps report.json true: when it starts, its earlier record and those of the stages after it
    make way for a ``failed`` record that only its success replaces; a full disk or another write error of the
    work dir is one line, not a traceback."""

    def wrap(stage: StageFunction[_Result]) -> StageFunction[_Result]:
        @functools.wraps(stage)
        def run_stage(plan: BuildPlan, *args: Any, **kwargs: Any) -> _Result:
            report.start(plan.work, name)
            drop_checked_copies(plan, name)
            try:
                try:
                    return stage(plan, *args, **kwargs)
                except OSError as exc:
                    if exc.errno not in WRITE_ERRORS:
                        raise
                    where = f" {exc.filename}" if exc.filename else ""
                    raise WorkDirError(
                        f"{name}: cannot write{where}: {exc.strerror}", "free space there or choose another PGO_OUT"
                    ) from exc
            except PgoError as error:
                with contextlib.suppress(PgoError):  # a report that cannot be written: the first error tells
                    if report.running(plan.work, name):
                        report.record_failure(plan.work, name, {"failed": error.line()})
                raise

        return run_stage

    return wrap


def drop_checked_copies(plan: BuildPlan, name: StageName) -> None:
    """A stage has begun and its record (and those of the stages after it) are gone: so go the checked binaries
    those records named, so that a failed or interrupted stage leaves nothing that claims to be checked."""
    for stage in (name, *report.LATER.get(name, ())):
        if stage in CHECKED_COPIES:
            checked_copy(plan, stage).unlink(missing_ok=True)


def checked_copy(plan: BuildPlan, stage: str) -> Path:
    """Where ``stage`` (one of :data:`CHECKED_COPIES`) puts the binary it checked."""
    return plan.workdir.checked(stage, plan.crate.bin)


def copy_checked(plan: BuildPlan, stage: str, binary: Path, sha: str, *, hint: str) -> Path:
    """Copy the binary ``stage`` checked to its place in the work dir (:func:`checked_copy`); the copy must be the
    bytes that were checked (``sha``), or it goes and the check fails (``hint``: who else may be writing)."""
    copy = checked_copy(plan, stage)
    copy_atomically(binary, copy)
    if sha256_file(copy) != sha:
        copy.unlink(missing_ok=True)
        raise CheckFailed(f"{binary} changed while it was checked", hint)
    return copy


def reject(plan: BuildPlan, stage: str, what: str, built: Path, checked: Path | None = None) -> Path | None:
    """Move a binary that failed its checks (its checked copy when there is one, else ``built``) to
    ``<work>/rejected/<name of built>``, and remove ``built`` and ``stage``'s checked copy, so that nobody ships it
    by mistake. Works across filesystems; when no copy can be kept in rejected/ (a full disk) the binary is deleted
    all the same, and None returned."""
    rejected = plan.workdir.rejected(built.name)
    source = checked if checked is not None and checked.is_file() else built
    kept: Path | None = None
    try:
        if source.is_file():
            copy_atomically(source, rejected)
            kept = rejected
            say(f"{what} failed its checks: moved to {rejected}")
    except WorkDirError as error:
        say(f"{what} failed its checks and was deleted: no copy kept ({error.line()})")
    finally:
        for path in {built, checked_copy(plan, stage)}:
            path.unlink(missing_ok=True)
    return kept


def timed(start: float) -> float:
    return round(time.monotonic() - start, 3)


def run_on(
    plan: BuildPlan,
    workload: Workload,
    binary: Path,
    *,
    logs: Path,
    profraw_dir: Path | None = None,
    fdata_dir: Path | None = None,
    scratch_name: str | None = None,
) -> TrainResult:
    """``workload`` on ``binary`` with the plan's environment, work dir, project, crate, scale and phase timeout
    (train, verify, the BOLT training and the BOLTed binary's replay: :func:`recipes.training.run_workload`)."""
    return run_workload(
        workload,
        binary=binary,
        base_env=plan.env,
        work=plan.work,
        logs=logs,
        project_dir=plan.config.project_dir,
        scale=plan.config.train_scale,
        timeout=plan.config.phase_timeout,
        profraw_dir=profraw_dir,
        crate_dir=plan.crate.package_dir,
        fdata_dir=fdata_dir,
        scratch_name=scratch_name,
        launcher=plan.launcher,
    )


#: the thresholds both the configuration and the workload file may set
Threshold = Literal["min_functions", "max_missing"]


@dataclass(frozen=True)
class Chosen:
    """A threshold's value, where it was set (``PGO_MIN_FUNCTIONS``, ``<file> max_missing``), and the workload
    whose file set it (None: the configuration did)."""

    value: int
    source: str
    workload: Workload | None = None


def threshold(plan: BuildPlan, workload: Workload | None, key: Threshold) -> Chosen | None:
    """The one rule of precedence for ``key``: the configuration (``PGO_*``, ``[tool.pgo]``, the session's
    arguments), else the workload file, else None (the check's own default)."""
    configured = {"min_functions": plan.config.min_functions, "max_missing": plan.config.max_missing}[key]
    if configured is not None:
        return Chosen(configured, plan.config.source(key))
    if workload is not None:
        in_file = {"min_functions": workload.min_functions, "max_missing": workload.max_missing}[key]
        if in_file is not None:
            return Chosen(in_file, f"{workload.path} {key}", workload)
    return None
