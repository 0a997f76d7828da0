"""What every stage shares: its frame (:class:`StageFrame`: its record in report.json, kept true whatever happens,
its time, its checked copy and the rejection of what fails its checks), the workload run with the plan's settings,
and which of configuration and workload file sets a check's threshold."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast

from recipes import report
from recipes.errors import CheckFailed, PgoError, WorkDirError
from recipes.files import copy_atomically
from recipes.plan import BuildPlan
from recipes.procs import Interrupted
from recipes.results import Failed, StageName, StageResult, WorkloadRun, as_json
from recipes.runner import say
from recipes.store import sha256_file
from recipes.train.trainer import VERIFY, Collect, RunSettings, run_workload
from recipes.workdir import CHECKED_COPIES
from recipes.workload import Workload, check_environment, check_tools

#: what a full, read-only or forbidden disk raises: known failures, told in one line
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
#: a stage's result written to report.json (``report.record``, whose overloads tie each name to its type: the frame
#: writes the result its stage made under that stage's name)
_write_record = cast("Callable[[Path, StageName, StageResult], object]", report.record)

_Result = TypeVar("_Result", bound=StageResult)
#: what a stage has so far, for its failure record: its result (a dataclass), or the fields it has found (a dict)
Partial = StageResult | Mapping[str, Any]


@dataclass(frozen=True)
class _Kept:
    """What a failure records once a stage has a result of its own (:meth:`StageFrame.kept`)."""

    result: Callable[[], Partial]
    reason: str
    also: Mapping[str, object]
    reject: tuple[str, Path] | None


class StageFrame:
    """One stage's life in report.json, from start to record: ``with StageFrame(plan, "merge") as frame:``.

    When it starts, the stage's earlier record and those of the stages after it (and the binaries they had
    checked) make way for a ``running`` record that says it did not finish; only the stage's success
    (:meth:`done`) or failure replaces it, so an interrupted stage leaves that. A failure (a :class:`PgoError`,
    or a full disk or another write error of the work dir, then one line) records ``failed`` and why; inside
    :meth:`kept`, with the result the stage had so far, and the binary it built moved to ``rejected/``. The frame
    times the stage (``seconds``) and makes its checked copy (:meth:`copy_checked`).

    The records of report.json that no plan makes (the release's rebuild and determinism check, the baseline-CPU
    check of the work dir's binary) are kept the same way: ``StageFrame(work, "rebuild", timed=False)``."""

    def __init__(self, owner: BuildPlan | Path, name: StageName, *, timed: bool = True) -> None:
        """``owner``: the plan of the stage, or the work dir of a record no plan makes (then no checked copy nor
        rejection); ``timed``: the frame sets the record's ``seconds`` (not the train stage's, which are its
        workload's, nor a record that has none)."""
        self.plan = owner if isinstance(owner, BuildPlan) else None
        self.work = owner.work if isinstance(owner, BuildPlan) else owner
        self.name = name
        self.timed = timed
        self.started = time.monotonic()
        self._failed = False

    def __enter__(self) -> StageFrame:
        report.start(self.work, self.name)
        # the records of this stage and those after it are gone: so go the checked binaries they named, so that a
        # failed or interrupted stage leaves nothing that claims to be checked
        for stage in (self.name, *report.LATER.get(self.name, ())):
            if self.plan is not None and stage in CHECKED_COPIES:
                checked_copy(self.plan, stage).unlink(missing_ok=True)
        self.started = time.monotonic()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        error = None if self._failed or exc is None else known_failure(self.name, exc)
        if error is not None:
            self._fail(error, None)
            if error is not exc and not isinstance(exc, Interrupted):  # an interruption goes on to the session
                raise error from exc

    def seconds(self) -> float:
        return round(time.monotonic() - self.started, 3)

    @contextlib.contextmanager
    def kept(
        self,
        result: Callable[[], Partial],
        *,
        reason: str = "failed",
        only: type[PgoError] = PgoError,
        also: Mapping[str, object] | None = None,
        reject: tuple[str, Path] | None = None,
    ) -> Iterator[None]:
        """A failure (of type ``only``) inside records what ``result()`` gives then (the stage's result so far, a
        dataclass or the fields it has found: ``lambda: result`` sees the name rebound), with why under ``reason``
        and ``also``, there and then (under the lock the stage may hold). With ``reason="failed"`` that is a
        :class:`~recipes.results.Failed` record; another reason (the test stage's ``failed_check``) is a field of
        the stage's own result, which stays of its type. ``reject``: (what it is, where it was built): the binary
        such a failure moves to ``rejected/`` (:func:`reject`), its new place (or None) the record's ``binary``."""
        try:
            yield
        except BaseException as exc:
            error = None if self._failed else known_failure(self.name, exc)
            if error is None:
                raise
            keeps = isinstance(error, only)
            self._fail(error, _Kept(result, reason, also or {}, reject) if keeps else None)
            if error is exc or isinstance(exc, Interrupted):
                raise
            raise error from exc

    def _planned(self) -> BuildPlan:
        if self.plan is None:
            raise TypeError(f"{self.name}: a checked copy or a rejection needs the stage's plan")  # a bug
        return self.plan

    def copy_checked(self, binary: Path, sha: str, *, hint: str) -> Path:
        """Copy the binary the stage checked to its place in the work dir (:func:`checked_copy`); the copy must be
        the bytes that were checked (``sha``), or it goes and the check fails (``hint``: who else may be writing)."""
        copy = checked_copy(self._planned(), self.name)
        copy_atomically(binary, copy)
        if sha256_file(copy) != sha:
            copy.unlink(missing_ok=True)
            raise CheckFailed(f"{binary} changed while it was checked", hint)
        return copy

    def done(self, result: _Result) -> _Result:
        """The stage's success: its record (timed), in place of the running one."""
        record = cast(_Result, dataclasses.replace(cast(Any, result), seconds=self.seconds())) if self.timed else result
        _write_record(self.work, self.name, record)
        return record

    def _fail(self, error: PgoError, kept: _Kept | None) -> None:
        """The failure record, in place of the running one (once); a report that cannot be written: the first
        error tells."""
        self._failed = True
        with contextlib.suppress(PgoError):
            if kept is None:
                report.record_failure(self.work, self.name, Failed(error.line()))
                return
            fields: dict[str, Any] = {"seconds": self.seconds()} if self.timed else {}
            fields.update(kept.also)
            if kept.reject is not None:
                what, built = kept.reject
                fields["binary"] = reject(self._planned(), self.name, what, built)
            so_far = kept.result()
            if kept.reason != "failed" and not isinstance(so_far, Mapping):
                fields[kept.reason] = error.line()
                _write_record(self.work, self.name, dataclasses.replace(so_far, **fields))
                return
            known = dict(so_far) if isinstance(so_far, Mapping) else as_json(so_far)
            partial = known | {key: str(value) if isinstance(value, Path) else value for key, value in fields.items()}
            report.record_failure(self.work, self.name, Failed(error.line(), partial=partial))


def known_failure(name: StageName, exc: BaseException) -> PgoError | None:
    """The failure a stage records: a :class:`PgoError`, or a full disk or another write error of the work dir
    (:data:`WRITE_ERRORS`) in one line (:func:`write_error`), the session's interruption (SIGTERM, SIGHUP) in its
    words; None for anything else (a bug, a KeyboardInterrupt)."""
    if isinstance(exc, PgoError):
        return exc
    if isinstance(exc, Interrupted):
        return exc.error()
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRORS:
        return write_error(name, exc)
    return None


def write_error(name: StageName, exc: OSError) -> WorkDirError:
    """A full disk, or another error writing the work dir (:data:`WRITE_ERRORS`), in one line."""
    where = f" {exc.filename}" if exc.filename else ""
    return WorkDirError(f"{name}: cannot write{where}: {exc.strerror}", "free space there or choose another PGO_OUT")


def checked_copy(plan: BuildPlan, stage: str) -> Path:
    """Where ``stage`` (one of :data:`CHECKED_COPIES`) puts the binary it checked."""
    return plan.workdir.checked(stage, plan.crate.bin)


def reject(plan: BuildPlan, stage: str, what: str, built: Path) -> Path | None:
    """Move a binary that failed its checks (``stage``'s checked copy when there is one, else ``built``) to
    ``<work>/rejected/<name of built>``, and remove ``built`` and ``stage``'s checked copy, so that nobody ships it
    by mistake. Works across filesystems; when no copy can be kept in rejected/ (a full disk) the binary is deleted
    all the same, and None returned."""
    rejected = plan.workdir.rejected(built.name)
    checked = checked_copy(plan, stage)
    source = checked if checked.is_file() else built
    kept: Path | None = None
    try:
        if source.is_file():
            copy_atomically(source, rejected)
            kept = rejected
            say(f"{what} failed its checks: moved to {rejected}")
    except WorkDirError as error:
        say(f"{what} failed its checks and was deleted: no copy kept ({error.line()})")
    finally:
        for path in {built, checked}:
            path.unlink(missing_ok=True)
    return kept


def run_on(
    plan: BuildPlan,
    workload: Workload,
    binary: Path,
    *,
    logs: Path,
    scratch: str,
    collect: Collect = VERIFY,
) -> WorkloadRun:
    """``workload`` on ``binary`` with the plan's environment, project, crate, scale, phase timeout and launcher,
    its phases' folder ``<work>/<scratch>`` (train, verify, the BOLT training and the BOLTed binary's replay:
    :func:`recipes.train.trainer.run_workload`)."""
    settings = RunSettings(
        base_env=plan.env,
        scratch=plan.workdir.scratch(scratch),
        logs=logs,
        project_dir=plan.config.project_dir,
        crate_dir=plan.crate.package_dir,
        scale=plan.config.train_scale,
        timeout=plan.config.phase_timeout,
        launcher=plan.launcher,
    )
    return run_workload(workload, binary, settings, collect)


def check_runnable(plan: BuildPlan, workloads: Iterable[Workload]) -> None:
    """Each workload's tools on the plan's PATH and the variables it reads, refused before anything runs."""
    for workload in workloads:
        check_tools(workload, plan.env.get("PATH", os.defpath))
        check_environment(workload, plan.env)


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
