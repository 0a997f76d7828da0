"""What an ELF binary is and needs of the system: its architecture, the highest GLIBC_x.y of its version-needs."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import NoteSection, SymbolTableSection
from packaging.version import Version

from recipes.errors import CheckFailed, ConfigError

_GLIBC = re.compile(r"^GLIBC_(\d+(?:\.\d+)+)$")
#: e_machine of the architectures the machine may be
ELF_MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}
_NOT_ELF_HINT = "is this the binary cargo built?"


@contextlib.contextmanager
def open_elf(
    path: Path, errors: tuple[type[Exception], ...] = (ELFError,), hint: str = _NOT_ELF_HINT
) -> Iterator[ELFFile]:
    """The binary at ``path`` read as ELF: ``errors`` raised while it is open refused as not an ELF binary."""
    try:
        with path.open("rb") as stream:
            yield ELFFile(stream)
    except errors as exc:
        raise CheckFailed(f"{path} is not an ELF binary: {exc}", hint) from exc


def elf_arch(path: Path) -> str:
    """The architecture of an ELF binary (``x86_64``, ``aarch64``, else pyelftools' e_machine)."""
    with open_elf(path, (ELFError, OSError), "give the binary cargo built") as elf:
        machine = str(elf.header["e_machine"])
    return ELF_MACHINES.get(machine, machine)


def elf_arch_or_none(path: Path) -> str | None:
    """:func:`elf_arch`, or None for a file that is not ELF or whose header pyelftools cannot read."""
    try:
        return elf_arch(path)
    except CheckFailed:
        return None


def needed_versions(path: Path) -> dict[str, list[str]]:
    """``{"libc.so.6": ["GLIBC_2.2.5", …], …}`` from the binary's ``.gnu.version_r``."""
    with open_elf(path) as elf:
        needs: dict[str, list[str]] = {}
        for section in elf.iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for verneed, auxiliaries in section.iter_versions():
                needs.setdefault(str(verneed.name), []).extend(aux.name for aux in auxiliaries)
        return needs


#: version-needs that are not GLIBC_x.y but exist only from a glibc release on
_GLIBC_ABI = {"GLIBC_ABI_DT_RELR": "2.36"}


def glibc_of(name: str) -> Version | None:
    """The glibc release a version-need requires: ``GLIBC_2.3.4`` -> 2.3.4; ``GLIBC_PRIVATE`` -> None."""
    found = match.group(1) if (match := _GLIBC.match(name)) else _GLIBC_ABI.get(name)
    return Version(found) if found is not None else None


def max_glibc(path: Path) -> str | None:
    """The highest glibc release the binary requires, or None (static, or not linked against glibc).

    Versions compare as numbers (2.3.4 < 2.14 < 2.28), and ``GLIBC_ABI_DT_RELR`` (packed relative
    relocations) counts as the 2.36 that introduced it.
    """
    versions = [
        version for names in needed_versions(path).values() for name in names if (version := glibc_of(name)) is not None
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


_LTO_SUFFIX = re.compile(r"\.llvm\.\d+$")


def _function_sizes(path: Path) -> dict[str, int] | None:
    """The code size in bytes of each of the binary's function symbols (``.symtab``'s ``st_size``, LTO's
    ``.llvm.N`` suffixes removed; the largest where a name repeats); None when it has no symbol table."""
    sizes: dict[str, int] = {}
    with open_elf(path) as elf:
        table = elf.get_section_by_name(".symtab")
        if not isinstance(table, SymbolTableSection):
            return None
        for symbol in table.iter_symbols():
            if symbol["st_info"]["type"] == "STT_FUNC" and symbol.name:
                name = _LTO_SUFFIX.sub("", symbol.name)
                sizes[name] = max(sizes.get(name, 0), int(symbol["st_size"]))
    return sizes


def function_symbols(path: Path) -> set[str] | None:
    """The names of the binary's function symbols; None when the binary has no symbol table (stripped)."""
    sizes = _function_sizes(path)
    return None if sizes is None else set(sizes)


def function_sizes(path: Path) -> dict[str, int]:
    """:func:`_function_sizes`, empty when the binary has no symbol table."""
    return _function_sizes(path) or {}


def build_id(path: Path) -> str | None:
    """The binary's GNU build id (its ``NT_GNU_BUILD_ID`` note), in hex: what LLVM writes into every raw profile
    the binary writes (``llvm-profdata show --binary-ids``); None when the binary has none."""
    with open_elf(path, (ELFError, OSError)) as elf:
        for section in elf.iter_sections():
            if not isinstance(section, NoteSection):
                continue
            for note in section.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                    return str(note["n_desc"])
    return None


def is_static(path: Path) -> bool:
    """Whether the binary loads no shared library: no program interpreter and no ``DT_NEEDED`` entry.

    A musl binary of rustc is a static PIE: it has a ``.dynamic`` section (for its own relocations) but
    neither an interpreter nor a needed library, so it needs no glibc at all.
    """
    with open_elf(path) as elf:
        if any(segment["p_type"] == "PT_INTERP" for segment in elf.iter_segments()):
            return False
        dynamic = elf.get_section_by_name(".dynamic")
        if isinstance(dynamic, DynamicSection):
            return not any(tag.entry.d_tag == "DT_NEEDED" for tag in dynamic.iter_tags())
        return True


STATIC = "static, needs no glibc"


def libc_needs(path: Path) -> str:
    """What the binary needs of the C library, in words: ``static, needs no glibc``, ``glibc 2.28`` or
    ``dynamic, no GLIBC version-need`` (linked against another libc, or against none by version)."""
    if is_static(path):
        return STATIC
    needed = max_glibc(path)
    return f"glibc {needed}" if needed is not None else "dynamic, no GLIBC version-need"


def check_same_libc(plain: Path, pgo: Path) -> str:
    """The plain and the PGO artefact must need the same C library: both static, or the same glibc.

    Returns what both need, in the words of :func:`libc_needs`.
    """
    plain_needs, pgo_needs = libc_needs(plain), libc_needs(pgo)
    if plain_needs != pgo_needs:
        raise CheckFailed(
            f"the PGO {pgo.name} is {pgo_needs} and the plain {plain.name} is {plain_needs}: "
            "the PGO artefact would not start everywhere the plain one does",
            "link both the same way (the same PGO_CARGO and target, e.g. cargo zigbuild with a .2.28 suffix)",
        )
    return pgo_needs


#: the profiling runtime's symbols start so (``__llvm_profile_runtime``, ``__llvm_profile_write_file``, …)
PROFILE_RUNTIME_PREFIX = "__llvm_profile_"
#: the instrumentation's sections (``__llvm_prf_cnts``, ``__llvm_prf_data``, ``__llvm_prf_names``, …)
PROFILE_SECTION_PREFIX = "__llvm_prf_"


def instrumentation(path: Path) -> tuple[list[str], list[str]]:
    """The instrumentation a binary carries: its ``__llvm_prf_*`` sections, and the profiling runtime's symbols
    in its symbol tables (``.symtab`` and ``.dynsym``)."""
    with open_elf(path) as elf:
        sections = sorted({s.name for s in elf.iter_sections() if s.name.startswith(PROFILE_SECTION_PREFIX)})
        symbols: set[str] = set()
        for section in elf.iter_sections():
            if isinstance(section, SymbolTableSection):
                symbols.update(
                    sym.name
                    for sym in section.iter_symbols()
                    if sym.name.startswith((PROFILE_RUNTIME_PREFIX, PROFILE_SECTION_PREFIX))
                )
    return sections, sorted(symbols)


def check_no_instrumentation(path: Path, what: str) -> None:
    """Refuse a binary to ship (``what``) that carries instrumentation sections or the profiling runtime."""
    sections, symbols = instrumentation(path)
    if sections or symbols:
        shown = symbols[:4] + ([f"… {len(symbols) - 4} more"] if len(symbols) > 4 else [])
        raise CheckFailed(
            f"{what} {path} is instrumented: sections {', '.join(sections) or 'none'}; "
            f"profiling runtime symbols {', '.join(shown) or 'none'}",
            "something compiled it with -Cprofile-generate or -fprofile-generate (a wrapper, CC, a flag): "
            "build it with the profile only",
        )


_RUSTC_COMMENT = re.compile(r"rustc version (\S+)")


def check_comment_rustc(path: Path, release: str, what: str) -> None:
    """Refuse a binary (``what``) whose ``.comment`` names another rustc release (``rustc version 1.95.0 (…)``)
    than ``release`` (the plan's)."""
    with open_elf(path) as elf:
        section = elf.get_section_by_name(".comment")
        data = section.data() if section is not None else b""
    others = sorted({m.group(1) for m in _RUSTC_COMMENT.finditer(data.decode("utf-8", errors="replace"))} - {release})
    if others:
        raise CheckFailed(
            f"{what} {path} was compiled by rustc {', '.join(others)} (its .comment), not the plan's rustc {release}",
            "build every stage with the rustc the plan found: RUSTC, RUSTUP_TOOLCHAIN and PGO_CARGO as it had them",
        )
