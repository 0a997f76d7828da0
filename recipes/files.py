"""Whole files or none: every file the pipeline writes goes to a temporary name beside it, then is renamed.

One helper, :func:`atomic_output`, gives the temporary name (for a tool's ``-o``, or for Python to write) and
does the rename; :func:`write_atomically` and :func:`copy_atomically` are it for bytes and for a copy.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from recipes.errors import WorkDirError

#: a temporary name of :func:`temporary_name`: the name it stands for, the writer's pid
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)\.tmp[^/]*")


def temporary_name(dest: Path, suffix: str = "") -> Path:
    """The temporary name beside ``dest`` that this process writes it under (``.<name>.<pid>.tmp<suffix>``): a file,
    or a folder written whole (recipes/release/make.py:write_dir)."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.tmp{suffix}")


def temporary_of(name: str) -> tuple[str, int] | None:
    """The name a :func:`temporary_name` stands for and the pid of the process that wrote it, or None."""
    found = _TEMPORARY.fullmatch(name)
    return (found["name"], int(found["pid"])) if found else None


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs now (signal 0; one of another user counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def atomic_output(dest: Path, suffix: str = "") -> Iterator[Path]:
    """A temporary name beside ``dest`` (:func:`temporary_name`) to write to; when the block ends without
    an error it is renamed to ``dest``, and in any case nothing is left under the temporary name."""
    tmp = temporary_name(dest, suffix)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, dest)
    finally:
        # best effort: on a read-only filesystem even a missing file's unlink fails (EROFS), and that must not
        # hide the error that ended the block
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


def copy_atomically(source: Path, dest: Path) -> None:
    """``dest`` becomes a copy of ``source`` (mode kept) or stays as it was, on any filesystem; a write error
    (a full disk) is one line and leaves no temporary file."""
    try:
        with atomic_output(dest) as tmp:
            shutil.copy2(source, tmp)
    except OSError as exc:
        raise WorkDirError(
            f"cannot copy {source} to {dest}: {exc.strerror}", "free space there or write elsewhere"
        ) from exc


def write_atomically(path: Path, data: bytes | str) -> None:
    """Write a whole file or nothing (text as UTF-8)."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
