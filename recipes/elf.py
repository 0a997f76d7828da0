"""What an ELF binary needs of the system: the highest GLIBC_x.y of its version-needs."""

from __future__ import annotations

import re
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from packaging.version import Version

from recipes.errors import CheckFailed, ConfigError

_GLIBC = re.compile(r"^GLIBC_(\d+(?:\.\d+)+)$")


def needed_versions(path: Path) -> dict[str, list[str]]:
    """``{"libc.so.6": ["GLIBC_2.2.5", …], …}`` from the binary's ``.gnu.version_r``."""
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            needs: dict[str, list[str]] = {}
            for section in elf.iter_sections():
                if not isinstance(section, GNUVerNeedSection):
                    continue
                for verneed, auxiliaries in section.iter_versions():
                    needs.setdefault(str(verneed.name), []).extend(aux.name for aux in auxiliaries)
            return needs
    except ELFError as exc:
        raise CheckFailed(f"{path} is not an ELF binary: {exc}", "is this the binary cargo built?") from exc


def max_glibc(path: Path) -> str | None:
    """The highest GLIBC_x.y the binary requires, or None (static or not glibc)."""
    versions = [
        Version(match.group(1))
        for names in needed_versions(path).values()
        for name in names
        if (match := _GLIBC.match(name))
    ]
    return str(max(versions)) if versions else None


def check_glibc(path: Path, ceiling: str) -> str | None:
    """Refuse a binary that needs a glibc newer than ``ceiling`` (PGO_MAX_GLIBC)."""
    try:
        limit = Version(ceiling)
    except ValueError as exc:
        raise ConfigError(f"PGO_MAX_GLIBC={ceiling!r} is not a version", "write it as 2.28") from exc
    needed = max_glibc(path)
    if needed is not None and Version(needed) > limit:
        raise CheckFailed(
            f"{path.name} needs GLIBC_{needed}, newer than PGO_MAX_GLIBC={ceiling}: it will not start on older systems",
            "link against an older glibc (PGO_CARGO='cargo zigbuild' with a target like x86_64-unknown-linux-gnu.2.28)",
        )
    return needed
