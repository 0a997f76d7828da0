from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, CommandFailed, MissingInput, PgoError, ToolchainError, WorkDirError
from recipes.llvm import profdata
from recipes.llvm.profdata import bad_inputs, check_raw_profiles, check_usable, merge, parse_overlap, parse_show
from recipes.results import RawProfileRecord
from recipes.toolchain.rustc import ProfdataTool
from tests.conftest import DATA
from tests.faults import small_tmpfs


def test_parse_show_real_output() -> None:
    summary = parse_show((DATA / "profdata-show.txt").read_text())
    assert summary.total_functions == 56
    assert summary.executed_functions == 49


def test_parse_show_without_executed_line_counts_zero() -> None:
    assert parse_show("Total functions: 3\n").executed_functions == 0


@pytest.mark.refuses("llvm-profdata-show-prints-no-total-functions")
def test_parse_show_refuses_empty() -> None:
    with pytest.raises(ToolchainError, match=r"llvm-profdata show printed no 'Total functions' line"):
        parse_show("")


@pytest.mark.refuses("llvm-profdata-show-prints-no-total-functions")
def test_parse_show_refuses_the_output_of_another_command() -> None:
    with pytest.raises(ToolchainError, match=r"printed no 'Total functions' line \(is the profile empty\?\)"):
        parse_show((DATA / "profdata-overlap.txt").read_text())


def test_parse_overlap_real_output() -> None:
    assert parse_overlap((DATA / "profdata-overlap.txt").read_text()) == 100.0


@pytest.mark.refuses("llvm-profdata-overlap-prints-no-edge-profile")
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


@pytest.mark.refuses("training-recorded-no-profraw")
def test_check_raw_profiles_refuses_a_training_that_recorded_none(tmp_path: Path) -> None:
    _raw(tmp_path, "a.profraw", b"aa")  # on disk, but not the training's record
    with pytest.raises(PgoError, match=r"the training recorded no .profraw files \(run `nox -s train` again\)"):
        check_raw_profiles(tmp_path, [])


def test_check_raw_profiles_takes_exactly_the_recorded_files(tmp_path: Path) -> None:
    recorded = [_raw(tmp_path, "a.profraw", b"aa"), _raw(tmp_path, "b.profraw", b"bb")]
    assert [p.name for p in check_raw_profiles(tmp_path, recorded)] == ["a.profraw", "b.profraw"]


@pytest.mark.refuses(
    "profraw-last-training-did-not-write",
    "profraw-training-wrote-gone",
    "profraw-empty",
    "profraw-changed-since-training-wrote",
)
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


# --- llvm-profdata itself: merge and check_usable with the real tool ----------------------------------------


@pytest.fixture
def tool() -> ProfdataTool:
    found = shutil.which("llvm-profdata-22")
    if found is None:
        pytest.skip("llvm-22 not installed (the integration tests need it)")
    return ProfdataTool(Path(found), "22.1.0")


def _text_profile(tmp_path: Path) -> Path:
    """An IR-level text profile without records: llvm-profdata reads it as it reads a .profraw."""
    path = tmp_path / "empty.proftext"
    path.write_text(":ir\n")
    return path


@pytest.mark.refuses("no-profraw-merge")
def test_merge_of_nothing_refused(tool: ProfdataTool, tmp_path: Path) -> None:
    with pytest.raises(MissingInput, match=r"no .profraw files to merge \(run `nox -s train` first\)"):
        merge(tool, [], tmp_path / "out.profdata", env=os.environ, log=tmp_path / "logs" / "merge.log")
    assert not (tmp_path / "logs").exists()


@pytest.mark.refuses("llvm-profdata-merge-fails-otherwise")
def test_merge_that_llvm_profdata_fails_refused(tool: ProfdataTool, tmp_path: Path) -> None:
    """Its output on a read-only filesystem: llvm-profdata exits 1 without a bad input to blame."""
    log = tmp_path / "logs" / "merge.log"
    raw = _text_profile(tmp_path)
    with small_tmpfs(tmp_path / "ro", read_only=True) as mnt:
        with pytest.raises(CommandFailed, match=r"llvm-profdata merge failed with exit code 1: .*Read-only file sys"):
            merge(tool, [raw], mnt / "out.profdata", env=os.environ, log=log)
        assert list(mnt.iterdir()) == []


@pytest.mark.refuses("merged-profile-cannot-written")
def test_merged_profile_that_cannot_be_written_refused(tool: ProfdataTool, tmp_path: Path) -> None:
    output = tmp_path / "out.profdata"
    output.mkdir()  # a directory where the profile goes
    with pytest.raises(WorkDirError, match=rf"cannot write {output}: Is a directory \(free space in PGO_OUT"):
        merge(tool, [_text_profile(tmp_path)], output, env=os.environ, log=tmp_path / "logs" / "merge.log")
    assert [p.name for p in tmp_path.glob(".out.profdata.*")] == []


@pytest.mark.refuses("merged-profile-pgo-profdata-has-no-functions")
def test_a_profile_without_functions_is_not_usable(tool: ProfdataTool, tmp_path: Path) -> None:
    """A valid, IR-level indexed profile of no function (merged from the empty text profile)."""
    empty = tmp_path / "empty.profdata"
    merge(tool, [_text_profile(tmp_path)], empty, env=os.environ, log=tmp_path / "logs" / "merge.log")
    with pytest.raises(
        CheckFailed, match=rf"PGO_PROFDATA {empty} has no functions \(train again: the profile is empty"
    ):
        check_usable(tool, empty, env=os.environ, log=tmp_path / "logs" / "show.log", what="PGO_PROFDATA")


#: a text profile of one function: llvm-profdata show reads it, rustc's -Cprofile-use does not
ONE_FUNCTION = ":ir\nmain\n# Func Hash:\n12345\n# Num Counters:\n1\n# Counter Values:\n100\n"


@pytest.mark.refuses("pgo-profdata-not-indexed-profile")
def test_a_profile_that_is_not_indexed_is_not_usable(tool: ProfdataTool, tmp_path: Path) -> None:
    """Before, show read it, the store took it and the build used it: rustc's "invalid instrumentation profile data
    (bad magic)" refused it after the build (a .profraw, met with PGO_PROFDATA=<work>/profraw/….profraw)."""
    text = tmp_path / "one.proftext"
    text.write_text(ONE_FUNCTION)
    with pytest.raises(
        CheckFailed,
        match=rf"PGO_PROFDATA {text} is a text profile, not an indexed profile: -Cprofile-use reads only what "
        rf"llvm-profdata merge writes \(merge it first: llvm-profdata merge -o merged.profdata {text}\)",
    ):
        check_usable(tool, text, env=os.environ, log=tmp_path / "logs" / "show.log", what="PGO_PROFDATA")
    indexed = tmp_path / "one.profdata"
    merge(tool, [text], indexed, env=os.environ, log=tmp_path / "logs" / "merge.log")
    assert check_usable(tool, indexed, env=os.environ, log=tmp_path / "logs" / "show.log", what="x").total_functions


def test_never_run_records_with_their_cfg_hashes() -> None:
    # LLVM 22's show --all-functions --counts of hello (block counts only): a record of zero counters never ran
    never_run = profdata.parse_never_run((DATA / "profdata-show-counts.txt").read_text())
    counts = profdata.parse_record_counts((DATA / "profdata-show-counts.txt").read_text())
    assert set(never_run) == {name for name, count in counts.items() if count == 0}
    assert never_run["_ZN5alloc5boxed16Box$LT$T$C$A$GT$13new_uninit_in17h6de384a55917245fE"] == {0x0AE15A442A4D8805}
    assert (
        "hello_pgo.9e151ce622a56ce3-cgu.3;_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h693b42edc21d2aecE"
        not in never_run
    )
