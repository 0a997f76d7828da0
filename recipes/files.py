"""Whole files or none: every file the pipeline writes goes to a temporary name beside it, then is renamed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from recipes.errors import WorkDirError


def _temp(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.{os.getpid()}.tmp")


def copy_atomically(source: Path, dest: Path) -> None:
    """``dest`` becomes a copy of ``source`` (mode kept) or stays as it was, on any filesystem; a write error
    (a full disk) is one line and leaves no temporary file."""
    tmp = _temp(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, tmp)
        os.replace(tmp, dest)
    except OSError as exc:
        raise WorkDirError(
            f"cannot copy {source} to {dest}: {exc.strerror}", "free space there or write elsewhere"
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)


def write_atomically(path: Path, data: bytes | str) -> None:
    """Write a whole file or nothing (text as UTF-8)."""
    tmp = _temp(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
