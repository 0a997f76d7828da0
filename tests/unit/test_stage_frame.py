"""The frame every stage runs in (recipes.stages.frame.StageFrame), driven without cargo: a stage body that
succeeds, fails, fills a disk, is interrupted or keeps a partial record; the checked copy and the rejection; the
records and checked copies a stage's start makes stale."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any, cast

import pytest

from recipes.config import Config
from recipes.errors import CheckFailed, MissingInput, StoreError, WorkDirError
from recipes.plan import BuildPlan
from recipes.release import cpu
from recipes.results import PlainResult, TestResult, as_json
from recipes.stages.frame import StageFrame
from recipes.store import sha256_file
from recipes.toolchain.cargo.metadata import CrateInfo
from recipes.toolchain.cflags import CPlan
from recipes.toolchain.rustc import RustcInfo
from recipes.toolchain.rustflags import RustflagsPlan
from tests.conftest import copy_fixture

BIN = "hello-pgo"


@pytest.fixture
def plan(tmp_path: Path) -> BuildPlan:
    """A real plan of a crate that is never built: the frame reads its work dir and the binary's name alone."""
    config = Config(project_dir=tmp_path, manifest=tmp_path / "Cargo.toml", out=tmp_path / "work")
    crate = CrateInfo(
        manifest=tmp_path / "Cargo.toml",
        package="hello",
        package_dir=tmp_path,
        bin=BIN,
        crate_names=("hello_pgo",),
        target_directory=tmp_path / "target",
    )
    unused = cast(Any, None)
    return BuildPlan(config, {}, cast(RustcInfo, unused), "x86_64-unknown-linux-gnu", crate,
                     cast(RustflagsPlan, unused), cast(CPlan, unused), None)  # fmt: skip


def _report(plan: BuildPlan) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(plan.workdir.report.read_text())
    return data


def _plain(binary: str = "b", seconds: float = 0.0) -> PlainResult:
    """A stage's result: the plain stage's is the smallest (the frame does not look into its type)."""
    return PlainResult(
        binary=Path(binary), binary_sha256="0" * 64, target="t", cargo_command=["cargo"], rustflags="", seconds=seconds
    )


def _built(plan: BuildPlan, data: bytes = b"\x7fELF checked") -> Path:
    built = plan.crate.target_directory / "release" / BIN
    built.parent.mkdir(parents=True, exist_ok=True)
    built.write_bytes(data)
    return built


def test_a_stage_that_succeeds_is_recorded_with_its_time(plan: BuildPlan) -> None:
    with StageFrame(plan, "plain") as frame:
        assert _report(plan)["plain"]["running"] is True
        assert "plain did not finish (started " in _report(plan)["plain"]["failed"]
        record = frame.done(_plain(seconds=-1.0))
    assert record.seconds >= 0
    assert _report(plan)["plain"] == as_json(record)


def test_an_untimed_stage_keeps_its_own_seconds(plan: BuildPlan) -> None:
    with StageFrame(plan, "plain", timed=False) as frame:  # as the train stage's: its workload's
        frame.done(_plain(seconds=12.5))
    assert _report(plan)["plain"]["seconds"] == 12.5


def test_a_pgo_error_is_recorded_and_raised_as_it_is(plan: BuildPlan) -> None:
    refusal = MissingInput("the merged profile is gone", "run `nox -s merge` again")
    with pytest.raises(MissingInput) as caught, StageFrame(plan, "optimise"):
        raise refusal
    assert caught.value is refusal
    assert _report(plan)["optimise"] == {"failed": "the merged profile is gone (run `nox -s merge` again)"}


def test_a_full_disk_is_one_line_and_recorded(plan: BuildPlan) -> None:
    full = OSError(errno.ENOSPC, "No space left on device", str(plan.work / "x"))
    with pytest.raises(WorkDirError) as caught, StageFrame(plan, "instrument"):
        raise full
    line = f"instrument: cannot write {plan.work / 'x'}: No space left on device"
    line += " (free space there or choose another PGO_OUT)"
    assert caught.value.line() == line and caught.value.__cause__ is full
    assert _report(plan)["instrument"] == {"failed": line}


def test_another_os_error_is_a_bug_and_leaves_the_running_record(plan: BuildPlan) -> None:
    with pytest.raises(FileNotFoundError), StageFrame(plan, "instrument"):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "x")
    assert _report(plan)["instrument"]["running"] is True


def test_an_interrupted_stage_leaves_its_running_record(plan: BuildPlan) -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        StageFrame(plan, "optimise") as frame,
        frame.kept(lambda: {"store_path": "s"}, reject=("the optimised binary", _built(plan))),
    ):
        raise KeyboardInterrupt
    record = _report(plan)["optimise"]
    assert record["running"] is True and "optimise did not finish" in record["failed"]
    assert (plan.crate.target_directory / "release" / BIN).is_file()  # nothing rejected: it was not checked


def test_a_failure_records_the_fields_the_stage_had(plan: BuildPlan) -> None:
    result: dict[str, object] = {"profile": "p", "profraw_merged": 2, "profraw_dropped": {"a.profraw": "bad"}}
    with pytest.raises(CheckFailed), StageFrame(plan, "merge") as frame, frame.kept(lambda: result):
        result["executed_functions"] = 3  # filled inside: recorded too
        raise CheckFailed("the training executed 3 of 9 functions", "extend it")
    record = _report(plan)["merge"]
    assert list(record) == ["profile", "profraw_merged", "profraw_dropped", "executed_functions", "seconds", "failed"]
    assert record["failed"] == "the training executed 3 of 9 functions (extend it)"
    assert record["profraw_dropped"] == {"a.profraw": "bad"} and record["seconds"] >= 0
    assert "failed" not in result  # the stage's own result is not changed


def test_a_kept_record_for_one_kind_of_failure_only(plan: BuildPlan) -> None:
    """The test stage's: a failed check records the suite's counts, with why under failed_check; a changed store
    does not."""
    result = TestResult(seconds=0.0, passed=1, failed=1, ignored=0)
    with (
        pytest.raises(CheckFailed),
        StageFrame(plan, "test") as frame,
        frame.kept(lambda: result, reason="failed_check", only=CheckFailed, also={"optimised_binary_kept": Path("/o")}),
    ):
        raise CheckFailed("1 of 2 failed", "see test.log")
    record = _report(plan)["test"]
    assert list(record) == ["seconds", "passed", "failed", "ignored", "failed_check", "optimised_binary_kept"]
    assert (record["failed"], record["failed_check"]) == (1, "1 of 2 failed (see test.log)")
    assert record["optimised_binary_kept"] == "/o" and result.failed_check is None  # the stage's own is not changed
    with (
        pytest.raises(StoreError),
        StageFrame(plan, "test") as frame,
        frame.kept(lambda: result, reason="failed_check", only=CheckFailed),
    ):
        raise StoreError("the store changed", "run again")
    assert _report(plan)["test"] == {"failed": "the store changed (run again)"}


def test_the_checked_copy_then_its_rejection(plan: BuildPlan) -> None:
    built = _built(plan)
    result: dict[str, object] = {"binary": str(built)}
    with (
        pytest.raises(CheckFailed),
        StageFrame(plan, "optimise") as frame,
        frame.kept(lambda: result, reject=("the optimised binary", built)),
    ):
        copy = frame.copy_checked(built, sha256_file(built), hint="who writes?")
        assert copy == plan.workdir.checked("optimise", BIN) and copy.read_bytes() == built.read_bytes()
        result["binary"] = str(copy)
        built.write_bytes(b"overwritten by another build")  # the checked copy is what goes to rejected/
        raise CheckFailed("stale-profile warnings", "train again")
    rejected = plan.workdir.rejected(BIN)
    assert rejected.read_bytes() == b"\x7fELF checked"
    assert not built.exists() and not copy.exists()
    assert _report(plan)["optimise"]["binary"] == str(rejected)
    assert list(_report(plan)["optimise"]) == ["binary", "seconds", "failed"]


def test_a_failure_before_anything_was_built_rejects_nothing(plan: BuildPlan) -> None:
    missing = plan.workdir.bolt / f"{BIN}.bolt"
    with (
        pytest.raises(MissingInput),
        StageFrame(plan, "bolt") as frame,
        frame.kept(lambda: {"input": "i"}, reject=("the BOLTed binary", missing)),
    ):
        raise MissingInput("llvm-bolt left no binary", "see its log")
    assert _report(plan)["bolt"]["binary"] is None
    assert not plan.workdir.rejected(missing.name).exists()


def test_a_copy_that_is_not_what_was_checked_is_refused(plan: BuildPlan) -> None:
    built = _built(plan)
    with pytest.raises(CheckFailed) as caught, StageFrame(plan, "optimise") as frame:
        frame.copy_checked(built, "0" * 64, hint="is another build writing to this target dir?")
    assert caught.value.line() == f"{built} changed while it was checked (is another build writing to this target dir?)"
    assert not plan.workdir.checked("optimise", BIN).exists()


def test_a_success_that_cannot_be_recorded_rejects_nothing(plan: BuildPlan) -> None:
    built = _built(plan)
    with pytest.raises(WorkDirError), StageFrame(plan, "optimise") as frame:
        with frame.kept(lambda: {}, reject=("the optimised binary", built)):
            copy = frame.copy_checked(built, sha256_file(built), hint="h")
        plan.workdir.report.unlink()
        plan.workdir.report.mkdir()  # report.json cannot be written
        frame.done(_plain(str(copy)))
    assert built.is_file() and copy.is_file()
    assert not plan.workdir.rejected(BIN).exists()


def test_a_start_drops_the_later_records_and_their_checked_copies(plan: BuildPlan) -> None:
    records = {stage: {"seconds": 1.0} for stage in ("instrument", "train", "merge", "optimise", "test", "bolt")}
    plan.work.mkdir(parents=True)
    plan.workdir.report.write_text(json.dumps({"schema": 1, **records}))
    for stage in ("optimise", "bolt"):
        plan.workdir.checked(stage, BIN).parent.mkdir(parents=True)
        plan.workdir.checked(stage, BIN).write_bytes(b"checked")
    with pytest.raises(KeyboardInterrupt), StageFrame(plan, "test"):  # test stands on optimise: nothing goes
        raise KeyboardInterrupt
    assert list(_report(plan)) == ["schema", *records]
    assert plan.workdir.checked("optimise", BIN).is_file() and plan.workdir.checked("bolt", BIN).is_file()
    with pytest.raises(KeyboardInterrupt), StageFrame(plan, "merge"):
        raise KeyboardInterrupt
    assert list(_report(plan)) == ["schema", "instrument", "train", "merge"]
    assert _report(plan)["merge"]["running"] is True
    assert not plan.workdir.checked("optimise", BIN).exists() and not plan.workdir.checked("bolt", BIN).exists()


def test_a_failure_inside_kept_is_recorded_and_rejected_there_and_then(plan: BuildPlan) -> None:
    """Before the stage's lock on the target dir is released: after it another pipeline may build there."""
    built = _built(plan)
    with pytest.raises(CheckFailed), StageFrame(plan, "optimise") as frame:
        with (
            pytest.raises(CheckFailed) as inside,
            frame.kept(lambda: {"store_path": "s"}, reject=("the optimised binary", built)),
        ):
            raise CheckFailed("too many functions without profile", "same cargo command?")
        assert not built.exists() and plan.workdir.rejected(BIN).is_file()
        assert _report(plan)["optimise"]["failed"] == "too many functions without profile (same cargo command?)"
        built.write_bytes(b"another pipeline's build")  # recorded once: the frame's end neither records nor rejects
        raise inside.value
    assert built.read_bytes() == b"another pipeline's build"
    assert _report(plan)["optimise"]["binary"] == str(plan.workdir.rejected(BIN))


def test_a_full_disk_inside_kept_records_the_kept_fields(plan: BuildPlan) -> None:
    full = OSError(errno.ENOSPC, "No space left on device", "f")
    with (
        pytest.raises(WorkDirError) as caught,
        StageFrame(plan, "merge") as frame,
        frame.kept(lambda: {"profile": "p"}),
    ):
        raise full
    assert caught.value.__cause__ is full
    record = _report(plan)["merge"]
    assert record["failed"] == caught.value.line() and record["profile"] == "p"


def test_a_record_no_plan_makes_is_kept_by_the_frame_too(tmp_path: Path) -> None:
    """The baseline-CPU check of the work dir's binary (as rebuild and determinism): a check that fails replaces
    the record of an older one that passed, which would otherwise stand as if it were of this binary."""
    work = tmp_path / "work"
    work.mkdir()
    passed = {"binary": "/old/hello-pgo", "qemu": "qemu-x86_64 version 7.2", "cpu": "qemu64", "controls": {}}
    (work / "report.json").write_text(json.dumps({"schema": 1, "cpu_baseline": passed}))
    with pytest.raises(MissingInput) as caught:
        # of a crate (the work dir's records are of one: recipes/claim.py reads its identity with cargo metadata)
        manifest = copy_fixture("hello", tmp_path)
        cpu.cpu_baseline(
            tmp_path, {**os.environ, "PGO_OUT": str(work), "PGO_MANIFEST": str(manifest)}, cpu.parse_cpu_args([])
        )
    assert "names no optimised binary" in caught.value.line()
    assert json.loads((work / "report.json").read_text())["cpu_baseline"] == {"failed": caught.value.line()}
