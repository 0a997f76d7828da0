"""recipes.llvm.boltlib: llvm-bolt's log and profile parsed from real captures (tests/data/bolt/, llvm-bolt-22 on the
hello
fixture), the input checks on binaries gcc links here (readelf's view of them as the witness), the tools found or
refused, and PGO_BOLT_ARGS."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, ConfigError, ToolchainError
from recipes.llvm import boltlib as bolt
from recipes.toolchain.rustc import RustcInfo
from tests.hostile import garbage

DATA = Path(__file__).resolve().parent.parent / "data" / "bolt"
RUSTC = RustcInfo(release="1.95.0", host="x86_64-unknown-linux-gnu", commit_hash="x", llvm_version="22.1.2")


def test_log_of_a_run_with_opt_dist_flags() -> None:
    summary = bolt.parse_bolt_log((DATA / "llvm-bolt-22-hello.log").read_text())
    assert (summary.functions_with_profile, summary.total_functions) == (56, 559)
    assert (summary.stale_functions, summary.ignored_objects, summary.not_optimized) == (0, 1, 3)
    assert summary.dyno_before["executed forward branches"] == 26494
    assert summary.dyno_after["executed forward branches"] == 24300
    assert summary.dyno_before["taken forward branches"] == 2575
    assert summary.dyno_after["taken forward branches"] == 68
    assert summary.dyno_after["all function calls"] == 3547  # "(=)": unchanged
    assert len(summary.dyno_before) == len(summary.dyno_after) == 18
    bolt.check_bolt_log(summary, Path("p.fdata"), Path("log"))


@pytest.mark.refuses("llvm-bolt-reports-stale-profiles")
def test_log_of_a_profile_of_another_build_is_refused_as_stale() -> None:
    summary = bolt.parse_bolt_log((DATA / "llvm-bolt-22-stale.log").read_text())
    assert summary.stale_functions == 4
    assert summary.dyno_before["taken forward branches"] == 2521
    assert summary.dyno_after["taken forward branches"] == 2518
    assert bolt.parse_dyno_stats("BOLT-INFO: 1 out of 2 functions\n") == ({}, {})  # run without -dyno-stats
    with pytest.raises(CheckFailed, match=r"4 functions with an invalid \(possibly stale\) profile"):
        bolt.check_bolt_log(summary, Path("p.fdata"), Path("log"))


@pytest.mark.refuses("llvm-bolt-log-does-not-say-how")
def test_log_without_the_profile_line_is_refused() -> None:
    with pytest.raises(CheckFailed, match="did not say how many functions"):
        bolt.parse_bolt_log("BOLT-INFO: Target architecture: x86_64\n")


@pytest.mark.refuses("llvm-bolt-found-profile-data-for-none")
def test_profile_matching_no_function_is_refused() -> None:
    text = (DATA / "llvm-bolt-22-hello.log").read_text().replace("56 out of 559", "0 out of 559")
    with pytest.raises(CheckFailed, match="profile data for none of the binary's 559 functions"):
        bolt.check_bolt_log(bolt.parse_bolt_log(text), Path("p.fdata"), Path("log"))


def test_fdata_of_the_hello_training() -> None:
    summary = bolt.parse_fdata((DATA / "hello-pgo.fdata").read_text())
    assert summary.branches == 71
    assert summary.main_crate_functions(["hello_pgo"]) == 5
    assert "_ZN9hello_pgo13collatz_steps17h22b3bd146362375bE" in summary.functions  # BOLT's "/1" removed
    bolt.check_profile(summary, Path("p.fdata"), ["hello_pgo"], "hello-pgo")


@pytest.mark.refuses("bolt-profile-records-no-executed-branch")
@pytest.mark.parametrize("text", ["", "no_lbr\n", "1 main 0 1 main 4 0 0\n"])
def test_empty_fdata_is_refused(text: str) -> None:
    summary = bolt.parse_fdata(text)
    assert summary.branches == 0
    with pytest.raises(CheckFailed, match="is empty: it records no executed branch"):
        bolt.check_profile(summary, Path("p.fdata"), ["hello_pgo"], "hello-pgo")


def test_any_bytes_as_fdata_are_a_summary_or_a_refusal() -> None:
    """Garbage, truncations and changed bytes of a real .fdata, decoded as the bolt stage does: a summary, and
    check_profile refuses it in one line or passes it; a count in digits int() does not take is no record."""
    real = (DATA / "hello-pgo.fdata").read_bytes()
    for data in garbage(real, random.Random(19), 300):
        summary = bolt.parse_fdata(data.decode("utf-8", errors="replace"))
        with contextlib.suppress(CheckFailed):
            bolt.check_profile(summary, Path("p.fdata"), ["hello_pgo"], "hello-pgo")
    assert bolt.parse_fdata("1 main 0 1 main 4 0 \u00b2\n1 main 0 1 main 4 0 3\n").branches == 1


@pytest.mark.refuses("bolt-profile-names-none-main-crate-functions")
def test_fdata_of_another_crate_is_refused() -> None:
    summary = bolt.parse_fdata((DATA / "hello-pgo.fdata").read_text())
    with pytest.raises(CheckFailed, match="names none of other-crate's functions"):
        bolt.check_profile(summary, Path("p.fdata"), ["other_crate"], "other-crate")


def test_bolt_args_default_to_opt_dist_and_are_replaced_whole() -> None:
    assert bolt.bolt_args(None) == bolt.OPT_DIST_ARGS
    assert "-reorder-functions=cdsort" in bolt.OPT_DIST_ARGS
    assert bolt.bolt_args("-reorder-blocks=ext-tsp  -dyno-stats") == ("-reorder-blocks=ext-tsp", "-dyno-stats")


@pytest.mark.refuses("pgo-bolt-args-sets-what-stage-sets")
@pytest.mark.parametrize("arg", ["-o x", "-data=p.fdata", "--instrument", "-instrumentation-file=/tmp/p"])
def test_bolt_args_may_not_set_what_the_stage_sets(arg: str) -> None:
    with pytest.raises(ConfigError, match="which the bolt stage sets itself"):
        bolt.bolt_args(f"-dyno-stats {arg}")


# ---------------------------------------------------------------------------------------------------------------
# the input binary: gcc links with and without --emit-relocs; strip removes the symbol table

C_PROGRAM = '#include <stdio.h>\nint twice(int x) { return 2 * x; }\nint main(void) { printf("%d\\n", twice(2)); }\n'


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("bolt-elf")
    source = out / "p.c"
    source.write_text(C_PROGRAM)
    built = {}
    for name, flags in {"relocs": ["-Wl,--emit-relocs"], "plain": []}.items():
        subprocess.run(["gcc", "-O2", *flags, "-o", str(out / name), str(source)], check=True)
        built[name] = out / name
    subprocess.run(["strip", "-o", str(out / "stripped"), str(built["relocs"])], check=True)
    built["stripped"] = out / "stripped"
    return built


def _readelf_sections(path: Path) -> str:
    return subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True).stdout


def test_relocations_kept_by_emit_relocs_are_found(linked: dict[str, Path]) -> None:
    found = bolt.check_input(linked["relocs"])
    assert found[".rela.text"] > 0
    assert ".rela.text" in _readelf_sections(linked["relocs"])
    assert ".rela.dyn" not in found  # the dynamic relocations every PIE has do not count


@pytest.mark.refuses("bolt-input-has-no-rela-text")
def test_binary_linked_without_emit_relocs_is_refused(linked: dict[str, Path]) -> None:
    assert ".rela.text" not in _readelf_sections(linked["plain"])
    with pytest.raises(CheckFailed, match=r"has no relocations of its code \(\.rela\.text\).*PGO_BOLT=1"):
        bolt.check_input(linked["plain"])


@pytest.mark.refuses("bolt-input-stripped")
def test_stripped_binary_is_refused(linked: dict[str, Path]) -> None:
    with pytest.raises(CheckFailed, match=r"is stripped \(no \.symtab\)"):
        bolt.check_input(linked["stripped"])


@pytest.mark.refuses("bolt-input-bolted-already")
def test_a_binary_bolted_already_is_refused(linked: dict[str, Path], tmp_path: Path) -> None:
    """llvm-bolt's own output of the relocations build: it keeps the symbol table but writes no .rela.text, so the
    note BOLT leaves is what says it."""
    llvm_bolt = shutil.which("llvm-bolt-22")
    if llvm_bolt is None:
        pytest.skip("bolt-22 not installed (the integration tests need it)")
    bolted = tmp_path / "bolted"
    subprocess.run([llvm_bolt, str(linked["relocs"]), "-o", str(bolted)], check=True, capture_output=True)
    assert subprocess.run([bolted], capture_output=True, text=True, check=True).stdout == "4\n"
    assert ".rela.text" not in _readelf_sections(bolted) and bolt.has_symbol_table(bolted)
    with pytest.raises(CheckFailed, match=r"was optimised by BOLT already \(give BOLT the optimised build, not its"):
        bolt.check_input(bolted)


@pytest.mark.refuses("bolt-input-not-elf-file")
def test_not_an_elf_file_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "script"
    text.write_text("#!/bin/sh\n")
    with pytest.raises(CheckFailed, match="is not an ELF binary"):
        bolt.check_input(text)


def _symtab_past_the_end(binary: Path, out: Path) -> Path:
    """A copy of ``binary`` whose .symtab header points past the file's end: its headers read, its symbols not."""
    data = bytearray(binary.read_bytes())
    shoff, shentsize = int.from_bytes(data[0x28:0x30], "little"), int.from_bytes(data[0x3A:0x3C], "little")
    (index,) = [
        i
        for i in range(int.from_bytes(data[0x3C:0x3E], "little"))
        if int.from_bytes(data[shoff + i * shentsize + 4 : shoff + i * shentsize + 8], "little") == 2  # SHT_SYMTAB
    ]
    field = shoff + index * shentsize + 24  # Elf64_Shdr.sh_offset
    data[field : field + 8] = (len(data) + 4096).to_bytes(8, "little")
    out.write_bytes(bytes(data))
    return out


def test_a_binary_whose_symbols_or_relocations_cannot_be_read_is_refused(
    linked: dict[str, Path], tmp_path: Path
) -> None:
    """The instrumentation's name budget reads every symbol and relocation: a binary damaged there is refused in
    one line, not a pyelftools traceback."""
    damaged = _symtab_past_the_end(linked["relocs"], tmp_path / "damaged")
    assert bolt.has_symbol_table(damaged)  # its section headers are whole
    with pytest.raises(CheckFailed, match=r"damaged is not an ELF binary: "):
        bolt.name_budget(damaged, "")
    truncated = tmp_path / "truncated"
    truncated.write_bytes(linked["relocs"].read_bytes()[:4096])
    with pytest.raises(CheckFailed, match=r"truncated is not an ELF binary"):
        bolt._data_references(truncated, set())


# ---------------------------------------------------------------------------------------------------------------
# the tools


def _fake_tool(directory: Path, name: str, version: str) -> Path:
    """A script that prints an LLVM version: no llvm-bolt of another major than 22 is installable on this Debian,
    so the refusal of another major is tested with one (and only that refusal)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    bolt_line = "\necho '  BOLT revision <unknown>'" if name.startswith("llvm-bolt") else ""  # as llvm-bolt's
    path.write_text(f"#!/bin/sh\necho 'Debian LLVM version {version}'{bolt_line}\n")
    path.chmod(0o755)
    return path


@pytest.mark.refuses("no-llvm-bolt-rustc-llvm-major")
def test_no_llvm_bolt_names_the_debian_package(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"no llvm-bolt of LLVM 22 .*apt-get install bolt-22"):
        bolt.find_bolt(RUSTC, {"PATH": str(tmp_path)}, None, llvm_root=tmp_path)


@pytest.mark.refuses("pgo-llvm-bolt-no-such-program")
def test_llvm_bolt_given_that_is_no_such_program_is_refused(tmp_path: Path) -> None:
    for given in ("llvm-bolt-99", str(tmp_path / "llvm-bolt")):
        with pytest.raises(ToolchainError, match=rf"PGO_LLVM_BOLT={given}: no such program \(install LLVM 22's BOLT"):
            bolt.find_bolt(RUSTC, {"PATH": str(tmp_path)}, given)


@pytest.mark.refuses("no-merge-fdata-beside-llvm-bolt-nor")
def test_llvm_bolt_without_merge_fdata_is_refused(tmp_path: Path) -> None:
    """The real llvm-bolt-22, alone in a directory, with no merge-fdata-22 on PATH."""
    real = shutil.which("llvm-bolt-22")
    if real is None:
        pytest.skip("bolt-22 not installed (the integration tests need it)")
    alone = tmp_path / "bin" / "llvm-bolt-22"
    alone.parent.mkdir()
    alone.symlink_to(real)
    with pytest.raises(ToolchainError, match=rf"no merge-fdata beside {alone} nor merge-fdata-22 on PATH"):
        bolt.find_bolt(RUSTC, {"PATH": str(tmp_path / "bin")}, str(alone))


@pytest.mark.refuses("no-llvm-strip-rustc-llvm-major-strip")
def test_no_llvm_strip_of_the_major_is_refused(tmp_path: Path) -> None:
    """Neither llvm-strip-22 on PATH nor llvm-22's own: an llvm-strip of another major does not count."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for other in ("llvm-strip-14", "strip"):
        found = shutil.which(other)
        if found:
            (bin_dir / other).symlink_to(found)
    with pytest.raises(ToolchainError, match=r"no llvm-strip of LLVM 22 to strip the BOLTed binary with \(GNU strip"):
        bolt.find_llvm_strip(RUSTC, {"PATH": str(bin_dir)}, llvm_root=tmp_path)


@pytest.mark.refuses("llvm-bolt-another-llvm-major-pgo-bolt")
def test_llvm_bolt_of_another_major_is_refused_naming_both(tmp_path: Path) -> None:
    fake = _fake_tool(tmp_path / "bin", "llvm-bolt-21", "21.1.8")
    _fake_tool(tmp_path / "bin", "merge-fdata-21", "21.1.8")
    with pytest.raises(ToolchainError, match=r"is LLVM 21\.1\.8 but rustc 1\.95\.0 is LLVM 22\.1\.2.*bolt-22"):
        bolt.find_bolt(RUSTC, {"PATH": str(tmp_path / "bin")}, str(fake))


@pytest.mark.refuses("merge-fdata-another-llvm-major")
def test_merge_fdata_of_another_major_is_refused(tmp_path: Path) -> None:
    fake = _fake_tool(tmp_path / "bin", "llvm-bolt", "22.1.8")
    _fake_tool(tmp_path / "bin", "merge-fdata", "21.1.8")
    with pytest.raises(ToolchainError, match=r"merge-fdata is LLVM 21\.1\.8"):
        bolt.find_bolt(RUSTC, {"PATH": str(tmp_path / "bin")}, str(fake))


def test_found_by_major_with_its_merge_fdata(tmp_path: Path) -> None:
    bin_dir = tmp_path / "llvm-22" / "bin"
    _fake_tool(bin_dir, "llvm-bolt", "22.1.8")
    _fake_tool(bin_dir, "merge-fdata", "22.1.8")
    tools = bolt.find_bolt(RUSTC, {"PATH": str(tmp_path / "empty")}, None, llvm_root=tmp_path)
    assert (tools.llvm_bolt, tools.merge_fdata, tools.llvm_major) == (
        bin_dir / "llvm-bolt",
        bin_dir / "merge-fdata",
        22,
    )


def test_real_tools_when_installed() -> None:
    if not shutil.which("llvm-bolt-22"):
        pytest.skip("bolt-22 not installed (the integration tests need it)")
    tools = bolt.find_bolt(RUSTC, {"PATH": os.environ["PATH"]}, None)
    assert tools.llvm_bolt.name == "llvm-bolt-22" and tools.merge_fdata.name == "merge-fdata-22"


# ---------------------------------------------------------------------------------------------------------------
# the record of a BOLT training (<profile>.trained-on)

PROFILE_SHA, INPUT_SHA = "a" * 64, "b" * 64


@pytest.mark.refuses("given-bolt-profile-has-no-record-profile")
def test_a_training_record_beside_the_profile_or_in_the_store_names_the_binary(tmp_path: Path) -> None:
    profile, store_copy = tmp_path / "given.fdata", tmp_path / "store" / f"{PROFILE_SHA}.fdata"
    store_copy.parent.mkdir()
    bolt.write_trained_on(store_copy, bolt.trained_on_record(PROFILE_SHA, INPUT_SHA, "c" * 64))
    record = bolt.trained_on_path(store_copy)
    assert record.name == f"{PROFILE_SHA}.fdata.trained-on" and record.stat().st_mode & 0o777 == 0o600
    bolt.check_trained_on(profile, PROFILE_SHA, tmp_path / "bin", INPUT_SHA, record)  # the store's record
    with pytest.raises(CheckFailed, match=r"was recorded on another binary \(sha256 b{16}\), not on .*/bin \(sha256 d"):
        bolt.check_trained_on(profile, PROFILE_SHA, tmp_path / "bin", "d" * 64, record)
    with pytest.raises(CheckFailed, match=r"has no record of the binary it was trained on \(no given.fdata.trained-on"):
        bolt.check_trained_on(profile, "e" * 64, tmp_path / "bin", INPUT_SHA, record)  # a record of other content


@pytest.mark.refuses("bolt-training-record-not-readable-json-lacks")
@pytest.mark.parametrize("text", ["not json", '{"profile_sha256": "' + PROFILE_SHA + '"}', "[]"])
def test_a_training_record_that_is_no_record_refused(tmp_path: Path, text: str) -> None:
    profile = tmp_path / "given.fdata"
    bolt.trained_on_path(profile).write_text(text)
    with pytest.raises(CheckFailed) as caught:
        bolt.check_trained_on(profile, PROFILE_SHA, tmp_path / "bin", INPUT_SHA, tmp_path / "none")
    line = caught.value.line()
    assert "given.fdata.trained-on" in line and "train the BOLT profile again" in line and "\n" not in line


def test_the_skip_list_is_of_escaped_whole_names_with_bolts_local_suffix() -> None:
    """llvm-bolt matches each line of -skip-funcs-file as a regular expression against a whole name: the `$` and
    `.` of a legacy Rust name escaped, BOLT's `/N` of a local symbol allowed."""
    name = "_ZN61_$LT$longnames..Node$LT$T$GT$$u20$as$u20$longnames..Stage$GT$3run17hfe8731f6847bd974E"
    budget = bolt.NameBudget({0x1000: (name,), 0x2000: ("plain",)}, len(name), 2)
    lines = budget.skip_file_text().splitlines()
    assert lines == [
        r"_ZN61_\$LT\$longnames\.\.Node\$LT\$T\$GT\$\$u20\$as\$u20\$longnames\.\.Stage\$GT\$3run17hfe8731f6847bd974E"
        "(/[0-9]+)?",
        "plain(/[0-9]+)?",
    ]
    assert all(re.fullmatch(line, text) for line, text in zip(lines, (name + "/1", "plain"), strict=True))


@pytest.mark.refuses("pgo-llvm-bolt-not-llvm-bolt")
def test_an_llvm_tool_of_the_major_that_is_not_llvm_bolt_is_refused() -> None:
    """llvm-profdata-22 prints LLVM 22's version as llvm-bolt-22 does: it is refused for what it is."""
    profdata = shutil.which("llvm-profdata-22")
    if profdata is None:
        pytest.skip("llvm-22 not installed")
    with pytest.raises(ToolchainError) as caught:
        bolt.find_bolt(RUSTC, {"PATH": os.environ["PATH"]}, "llvm-profdata-22")
    assert caught.value.line() == (
        f"PGO_LLVM_BOLT=llvm-profdata-22: {profdata} is not llvm-bolt: its --version names no BOLT revision "
        "(give LLVM 22's llvm-bolt: Debian's is /usr/lib/llvm-22/bin/llvm-bolt, of the package bolt-22)"
    )
