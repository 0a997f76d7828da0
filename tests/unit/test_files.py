"""Whole files or none (recipes/files.py): the one helper every atomic write of the pipeline goes through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recipes.errors import WorkDirError
from recipes.files import atomic_output, copy_atomically, write_atomically
from tests.faults import small_tmpfs


def test_a_tool_writes_the_temporary_name_and_it_becomes_the_file(tmp_path: Path) -> None:
    dest = tmp_path / "sub" / "out.txt"
    with atomic_output(dest) as tmp:
        assert tmp.parent == dest.parent and tmp.name.startswith(".out.txt.") and tmp.name.endswith(".tmp")
        subprocess.run(["sh", "-c", f"printf made > {tmp}"], check=True)  # a real tool's -o
        assert not dest.exists()  # nothing under the real name before the block ends
    assert dest.read_text() == "made"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["out.txt"]


def test_an_error_in_the_block_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    dest = tmp_path / "out.txt"
    dest.write_text("old")
    with pytest.raises(RuntimeError, match="the tool failed"), atomic_output(dest) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the tool failed")
    assert dest.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_suffix_for_tools_that_take_the_format_from_it(tmp_path: Path) -> None:
    with atomic_output(tmp_path / "chart.png", suffix=".png") as tmp:
        assert tmp.suffix == ".png"
        tmp.write_bytes(b"\x89PNG")
    assert (tmp_path / "chart.png").read_bytes() == b"\x89PNG"


def test_write_and_copy(tmp_path: Path) -> None:
    write_atomically(tmp_path / "a", "text é")
    assert (tmp_path / "a").read_bytes() == "text é".encode()
    (tmp_path / "a").chmod(0o750)
    copy_atomically(tmp_path / "a", tmp_path / "b" / "c")
    assert (tmp_path / "b" / "c").read_bytes() == "text é".encode()
    assert (tmp_path / "b" / "c").stat().st_mode & 0o777 == 0o750


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 * 1024 * 1024))
    with small_tmpfs(tmp_path / "small", "1m") as small:
        with pytest.raises(WorkDirError, match=r"cannot copy .* No space left on device"):
            copy_atomically(big, small / "copy")
        assert list(small.iterdir()) == []
