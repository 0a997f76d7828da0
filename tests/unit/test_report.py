"""report.json tells the truth: a started stage replaces its record and the later ones with a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes import report
from recipes.errors import MissingInput, WorkDirError
from recipes.files import copy_atomically
from tests.faults import small_tmpfs


def test_a_started_stage_drops_its_old_success_and_the_later_stages(tmp_path: Path) -> None:
    report.record(tmp_path, "instrument", {"seconds": 1})
    report.record(tmp_path, "train", {"seconds": 1})
    report.record(tmp_path, "merge", {"seconds": 1})
    report.record(tmp_path, "optimise", {"seconds": 1})
    report.start(tmp_path, "train")
    full = report.load(tmp_path)
    assert set(full) == {"instrument", "train"}
    assert full["instrument"] == {"seconds": 1}
    assert report.failed(full["train"]) is not None
    assert "did not finish" in str(report.failed(full["train"]))


def test_require_refuses_a_failed_stage(tmp_path: Path) -> None:
    report.record(tmp_path, "merge", {"failed": "the training executed 0 of 56 functions"})
    with pytest.raises(MissingInput, match="the last merge failed: the training executed 0 of 56"):
        report.require(tmp_path, "merge", "optimise")


def test_a_corrupt_report_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text('{"instrument": ')
    with pytest.raises(WorkDirError, match=r"report\.json is not valid JSON"):
        report.load(tmp_path)


def test_the_report_carries_its_schema_and_another_is_refused(tmp_path: Path) -> None:
    report.record(tmp_path, "instrument", {"seconds": 1})
    text = (tmp_path / "report.json").read_text()
    assert text.startswith('{\n  "schema": 1,\n  "instrument"')
    assert report.load(tmp_path) == {"instrument": {"seconds": 1}}  # the schema is not a stage
    (tmp_path / "report.json").write_text('{"instrument": {"seconds": 1}}')  # written before the schema was
    assert report.load(tmp_path) == {"instrument": {"seconds": 1}}
    (tmp_path / "report.json").write_text('{"schema": 2, "instrument": {}}')
    with pytest.raises(WorkDirError, match=r"report\.json has schema 2; this pgo-recipes reads schema 1"):
        report.load(tmp_path)
    (tmp_path / "report.json").write_text('{"instrument": [1]}')
    with pytest.raises(WorkDirError, match="'instrument' is not a stage record"):
        report.load(tmp_path)
    (tmp_path / "report.json").write_text("[]")
    with pytest.raises(WorkDirError, match="is not a report"):
        report.load(tmp_path)


def test_a_report_that_cannot_be_written_refused(tmp_path: Path) -> None:
    """The work dir on a read-only filesystem: the report is not written, and nothing half-written is left."""
    with small_tmpfs(tmp_path / "ro", read_only=True) as work:
        with pytest.raises(WorkDirError, match=rf"cannot write {work / 'report.json'}: Read-only file system \(free"):
            report.record(work, "instrument", {"seconds": 1})
        assert list(work.iterdir()) == []


def test_a_checked_copy_that_cannot_be_written_refused(tmp_path: Path) -> None:
    """optimise's copy of the checked binary into a work dir on a read-only filesystem: one line, nothing left."""
    binary = tmp_path / "hello-pgo"
    binary.write_bytes(b"\x7fELF the checked binary")
    with small_tmpfs(tmp_path / "ro", read_only=True) as work:
        dest = work / "optimised" / "hello-pgo"
        with pytest.raises(WorkDirError, match=rf"cannot copy {binary} to {dest}: Read-only file system \(free space"):
            copy_atomically(binary, dest)
        assert list(work.iterdir()) == []
