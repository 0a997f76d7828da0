from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from recipes.errors import PgoError, ToolchainError
from recipes.profdata import bad_inputs, check_raw_profiles, parse_overlap, parse_show
from recipes.results import RawProfileRecord
from tests.conftest import DATA


def test_parse_show_real_output() -> None:
    summary = parse_show((DATA / "profdata-show.txt").read_text())
    assert summary.total_functions == 56
    assert summary.executed_functions == 49


def test_parse_show_without_executed_line_counts_zero() -> None:
    assert parse_show("Total functions: 3\n").executed_functions == 0


def test_parse_show_refuses_empty() -> None:
    with pytest.raises(ToolchainError, match=r"llvm-profdata show printed no 'Total functions' line"):
        parse_show("")


def test_parse_show_refuses_the_output_of_another_command() -> None:
    with pytest.raises(ToolchainError, match=r"printed no 'Total functions' line \(is the profile empty\?\)"):
        parse_show((DATA / "profdata-overlap.txt").read_text())


def test_parse_overlap_real_output() -> None:
    assert parse_overlap((DATA / "profdata-overlap.txt").read_text()) == 100.0


def test_parse_overlap_refuses_the_output_of_another_command() -> None:
    with pytest.raises(ToolchainError, match=r"llvm-profdata overlap printed no 'Edge profile overlap' line"):
        parse_overlap((DATA / "profdata-show.txt").read_text())


def test_bad_inputs_of_a_real_merge_log() -> None:
    bad = bad_inputs((DATA / "profdata-merge-corrupt.log").read_text())
    assert bad == {
        "/tmp/pgo-test/work/profraw/cli-2431932507131355269_0-4660.profraw": (
            "invalid instrumentation profile data (file header is corrupt)"
        )
    }


def _raw(directory: Path, name: str, data: bytes) -> RawProfileRecord:
    directory.mkdir(exist_ok=True)
    (directory / name).write_bytes(data)
    return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_check_raw_profiles_refuses_a_training_that_recorded_none(tmp_path: Path) -> None:
    _raw(tmp_path, "a.profraw", b"aa")  # on disk, but not the training's record
    with pytest.raises(PgoError, match=r"the training recorded no .profraw files \(run `nox -s train` again\)"):
        check_raw_profiles(tmp_path, [])


def test_check_raw_profiles_takes_exactly_the_recorded_files(tmp_path: Path) -> None:
    recorded = [_raw(tmp_path, "a.profraw", b"aa"), _raw(tmp_path, "b.profraw", b"bb")]
    assert [p.name for p in check_raw_profiles(tmp_path, recorded)] == ["a.profraw", "b.profraw"]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("extra", "c.profraw was not written by the last training"),
        ("missing", "b.profraw, written by the last training, is gone"),
        ("changed", "b.profraw changed since the training wrote it"),
        ("empty", "b.profraw is empty"),
    ],
)
def test_check_raw_profiles_refuses_by_name(tmp_path: Path, fault: str, message: str) -> None:
    recorded = [_raw(tmp_path, "a.profraw", b"aa"), _raw(tmp_path, "b.profraw", b"bb")]
    if fault == "extra":
        _raw(tmp_path, "c.profraw", b"cc")
    elif fault == "missing":
        (tmp_path / "b.profraw").unlink()
    elif fault == "changed":
        (tmp_path / "b.profraw").write_bytes(b"bx")
    else:
        recorded[1] = _raw(tmp_path, "b.profraw", b"")
    with pytest.raises(PgoError, match=re.escape(message)):
        check_raw_profiles(tmp_path, recorded)
