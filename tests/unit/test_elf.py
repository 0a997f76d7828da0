"""recipes.llvm.elf on real binaries compiled here by gcc, with readelf as the independent witness."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from recipes.errors import CheckFailed, ConfigError
from recipes.llvm import elf

PLAIN = '#include <stdio.h>\nint main(int c, char **v) { printf("%d %s\\n", c, v[0]); return 0; }\n'
# arc4random is new in glibc 2.36, timespec_get in 2.16, __printf_chk (fortified printf) in 2.3.4
NEWER = (
    "#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n"
    "int main(void) { struct timespec t; timespec_get(&t, TIME_UTC);\n"
    '  printf("%u %ld\\n", arc4random() % 2u, (long)t.tv_sec); return 0; }\n'
)
#: name -> (source, gcc flags, the highest glibc it needs on this Debian 12 / glibc 2.36 machine)
PROGRAMS = {
    "plain": (PLAIN, ["-O2"], "2.34"),
    "fortified": (NEWER, ["-O2", "-D_FORTIFY_SOURCE=2"], "2.36"),
    "relr": (PLAIN, ["-O2", "-Wl,-z,pack-relative-relocs"], "2.36"),
    "static": (PLAIN, ["-O2", "-static"], None),
}


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("elf")
    built = {}
    for name, (source, flags, _) in PROGRAMS.items():
        c_file = out / f"{name}.c"
        c_file.write_text(source)
        subprocess.run(["gcc", *flags, "-o", str(out / name), str(c_file)], check=True)
        built[name] = out / name
    return built


def _readelf_needs(path: Path) -> dict[str, list[str]]:
    """``readelf -V``'s version-needs section: the witness pyelftools is checked against."""
    text = subprocess.run(["readelf", "-V", "--wide", str(path)], capture_output=True, text=True, check=True).stdout
    needs: dict[str, list[str]] = {}
    section = text.split(".gnu.version_r", 1)[1] if ".gnu.version_r" in text else ""
    current = ""
    for line in section.splitlines():
        if match := re.search(r"File: (\S+)", line):
            current = match.group(1)
            needs[current] = []
        elif (match := re.search(r"Name: (\S+)", line)) and current:
            needs[current].append(match.group(1))
    return needs


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_max_glibc_of_real_binaries(binaries: dict[str, Path], name: str) -> None:
    assert elf.max_glibc(binaries[name]) == PROGRAMS[name][2]


@pytest.mark.parametrize("name", ["plain", "fortified", "relr"])
def test_needed_versions_agree_with_readelf(binaries: dict[str, Path], name: str) -> None:
    ours = {lib: sorted(names) for lib, names in elf.needed_versions(binaries[name]).items()}
    witness = {lib: sorted(names) for lib, names in _readelf_needs(binaries[name]).items()}
    assert ours == witness
    assert ours  # a dynamic binary has version-needs


def test_versions_compare_as_numbers(binaries: dict[str, Path]) -> None:
    names = elf.needed_versions(binaries["fortified"])["libc.so.6"]
    assert {"GLIBC_2.2.5", "GLIBC_2.3.4", "GLIBC_2.16", "GLIBC_2.34", "GLIBC_2.36"} <= set(names)
    assert elf.max_glibc(binaries["fortified"]) == "2.36"


@pytest.mark.parametrize(
    ("need", "version"),
    [("GLIBC_2.2.5", "2.2.5"), ("GLIBC_2.3.4", "2.3.4"), ("GLIBC_2.14", "2.14"), ("GLIBC_ABI_DT_RELR", "2.36")],
)
def test_glibc_of(need: str, version: str) -> None:
    assert elf.glibc_of(need) == Version(version)


def test_glibc_order_is_numeric() -> None:
    # a zig-linked 2.28 binary needs GLIBC_2.3.4 too: as strings, that one would be the highest
    needs = ["GLIBC_2.2.5", "GLIBC_2.3.4", "GLIBC_2.14", "GLIBC_2.28"]
    assert max(needs) == "GLIBC_2.3.4"
    assert max(v for n in needs if (v := elf.glibc_of(n)) is not None) == Version("2.28")


@pytest.mark.parametrize("need", ["GLIBC_PRIVATE", "GCC_3.0", "CXXABI_1.3"])
def test_glibc_of_other_needs(need: str) -> None:
    assert elf.glibc_of(need) is None


@pytest.mark.refuses("binary-needs-newer-glibc-pgo-max-glibc")
def test_check_glibc_refuses_a_newer_need(binaries: dict[str, Path]) -> None:
    with pytest.raises(CheckFailed) as caught:
        elf.check_glibc(binaries["fortified"], "2.28")
    assert "fortified needs GLIBC_2.36, newer than PGO_MAX_GLIBC=2.28" in caught.value.line()
    assert "cargo zigbuild" in caught.value.line()


def test_check_glibc_accepts_up_to_the_ceiling(binaries: dict[str, Path]) -> None:
    assert elf.check_glibc(binaries["fortified"], "2.36") == "2.36"
    assert elf.check_glibc(binaries["plain"], "2.34") == "2.34"
    assert elf.check_glibc(binaries["static"], "2.17") is None


@pytest.mark.refuses("pgo-max-glibc-not-version")
def test_check_glibc_bad_ceiling(binaries: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="PGO_MAX_GLIBC='two' is not a version"):
        elf.check_glibc(binaries["plain"], "two")


@pytest.mark.refuses("binary-not-elf-file-glibc-versions")
def test_not_an_elf_file(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(CheckFailed, match="is not an ELF binary"):
        elf.max_glibc(script)


@pytest.mark.refuses("binary-not-elf-file-symbols-static-check")
def test_not_an_elf_file_has_no_symbols_and_is_not_static(tmp_path: Path) -> None:
    """What optimise reads of the binary cargo left: a script in its place is refused, not taken as stripped."""
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(CheckFailed, match=rf"{script} is not an ELF binary: .*is this the binary cargo built"):
        elf.function_symbols(script)
    with pytest.raises(CheckFailed, match=rf"{script} is not an ELF binary"):
        elf.is_static(script)


@pytest.mark.refuses("plain-pgo-artefact-need-different-glibc-versions")
def test_plain_and_pgo_artefacts_need_the_same_glibc(binaries: dict[str, Path], tmp_path: Path) -> None:
    twin = tmp_path / "plain-twin"
    shutil.copy(binaries["plain"], twin)
    assert elf.check_same_libc(binaries["plain"], twin) == "glibc 2.34"
    with pytest.raises(CheckFailed) as caught:
        elf.check_same_libc(binaries["plain"], binaries["fortified"])
    assert "the PGO fortified is glibc 2.36 and the plain plain is glibc 2.34" in caught.value.line()
