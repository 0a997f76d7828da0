"""Real faults for the tests: a small filesystem of its own (full disk, another filesystem for a rename).

    with small_tmpfs(tmp_path / "small") as mnt:      # 64 KiB tmpfs, mode 0700, unmounted afterwards
        fill_up(mnt)                                   # now every write of a byte fails with ENOSPC
    with small_tmpfs(tmp_path / "ro", read_only=True) as mnt:   # an empty read-only one: EROFS

Mounting needs root (or CAP_SYS_ADMIN); where the machine cannot mount, the test is skipped and says why.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount_error(directory: Path, size: str, mode: str, *, read_only: bool = False) -> str | None:
    """Mount a tmpfs at ``directory``; the reason it cannot be done, or None when it is mounted."""
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount/umount are not installed"
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}{',ro' if read_only else ''}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        why = (proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}").splitlines()[-1]
        return f"cannot mount a tmpfs here ({why}; needs root or CAP_SYS_ADMIN)"
    return None


@contextmanager
def small_tmpfs(directory: Path, size: str = "64k", mode: str = "0700", *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``directory`` (created if needed) for the ``with`` block.

    It is a filesystem of its own: fill it with :func:`fill_up` for ENOSPC, or rename across it for EXDEV.
    ``mode`` is its root directory's mode (tmpfs's own default, 1777, would be world-writable). ``read_only`` mounts
    it read-only: nothing can be created in it, not even by root (EROFS).
    The test is skipped, with the reason, when the machine cannot mount one.
    """
    directory.mkdir(parents=True, exist_ok=True)
    reason = _mount_error(directory, size, mode, read_only=read_only)
    if reason is not None:
        pytest.skip(reason)
    try:
        yield directory
    finally:
        done = subprocess.run(["umount", str(directory)], capture_output=True, check=False)
        if done.returncode != 0:  # something still has a file open in it: detach it now, free it later
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def fill_up(directory: Path, leave: int = 0, name: str = ".filler") -> Path:
    """Write ``directory/name`` until the filesystem is full (or has about ``leave`` bytes left); returns it."""
    filler = directory / name
    block = b"\0" * 4096
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                info = os.statvfs(directory)
                if leave and info.f_bavail * info.f_frsize <= leave:
                    break
                out.write(block)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


def free_bytes(directory: Path) -> int:
    info = os.statvfs(directory)
    return info.f_bavail * info.f_frsize
