"""Where two binaries differ: how many bytes, and in which ELF sections."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from recipes.errors import CheckFailed


def differing_bytes(first: bytes, second: bytes) -> int:
    """How many byte positions differ, the length difference counted as differing bytes."""
    common = min(len(first), len(second))
    same = sum(1 for a, b in zip(first[:common], second[:common], strict=True) if a == b)
    return common - same + abs(len(first) - len(second))


def _sections(path: Path) -> dict[str, bytes]:
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            return {
                str(section.name): (b"" if section["sh_type"] == "SHT_NOBITS" else bytes(section.data()))
                + section["sh_size"].to_bytes(8, "little")
                for section in elf.iter_sections()
                if section.name
            }
    except ELFError as exc:
        raise CheckFailed(f"{path} is not an ELF binary: {exc}", "compare the files by hand") from exc


def differing_sections(first: Path, second: Path) -> list[str]:
    """The ELF sections (by name) whose content or size differs, or that only one binary has."""
    a, b = _sections(first), _sections(second)
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


@dataclass(frozen=True)
class BinaryDiff:
    differing_bytes: int
    sizes: tuple[int, int]
    sections: tuple[str, ...]

    def line(self) -> str:
        where = ", ".join(self.sections) if self.sections else "no section (headers only)"
        return f"{self.differing_bytes} bytes differ (sizes {self.sizes[0]} and {self.sizes[1]}), in {where}"


def binary_diff(first: Path, second: Path) -> BinaryDiff:
    a, b = first.read_bytes(), second.read_bytes()
    return BinaryDiff(differing_bytes(a, b), (len(a), len(b)), tuple(differing_sections(first, second)))
