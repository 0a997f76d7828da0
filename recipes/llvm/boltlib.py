"""BOLT, the post-link layout optimisation of the PGO binary: its tools, its input, its profile and its log.

llvm-bolt rewrites a linked binary from a profile of that very binary. It needs the binary's symbol table and the
relocations the linker keeps with ``--emit-relocs`` (then it may move every function: "relocation mode"). Its
profile here comes from BOLT's own instrumentation (``-instrument``): the training workload replayed on an
instrumented copy writes one ``.fdata`` per process, ``merge-fdata`` joins them. Both tools must be of rustc's LLVM
major, like llvm-profdata. Nothing here builds or trains; the stage is recipes/stages/bolt.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from recipes import runner
from recipes.errors import CheckFailed, ConfigError, ToolchainError
from recipes.files import atomic_output
from recipes.inputs import Fields, read_bytes, read_json
from recipes.llvm import checks
from recipes.llvm.elf import open_elf
from recipes.toolchain import rustc as toolchain
from recipes.toolchain.rustc import RustcInfo

#: the link argument that keeps the relocations in the binary, for llvm-bolt's relocation mode
EMIT_RELOCS = "-Clink-arg=-Wl,--emit-relocs"

#: the optimisation flags rustc's own release pipeline (src/tools/opt-dist) gives llvm-bolt; PGO_BOLT_ARGS replaces
#: them
OPT_DIST_ARGS = (
    "-reorder-blocks=ext-tsp",
    "-reorder-functions=cdsort",
    "-split-functions",
    "-split-strategy=cdsplit",
    "-split-all-cold",
    "-jump-tables=move",
    "-icf=all",
    "-update-debug-sections",
    "-dyno-stats",
)


def debian_package(major: int) -> str:
    """The Debian package of llvm-bolt and merge-fdata of an LLVM major."""
    return f"bolt-{major}"


@dataclass(frozen=True)
class BoltTools:
    """llvm-bolt and merge-fdata, both of one LLVM version."""

    llvm_bolt: Path
    merge_fdata: Path
    llvm_version: str

    @property
    def llvm_major(self) -> int:
        return int(self.llvm_version.split(".")[0])


def tool_version(path: Path, name: str, hint: str = "", *, env: Mapping[str, str]) -> str:
    """The LLVM version ``path --version`` prints, run with ``env``."""
    return toolchain.tool_version([str(path), "--version"], name, hint or f"give {name}", env)


def merge_fdata_beside(llvm_bolt: Path, major: int, search_path: str) -> Path | None:
    """The merge-fdata that goes with ``llvm_bolt``: its sibling (``merge-fdata-22`` beside ``llvm-bolt-22``,
    ``merge-fdata`` beside ``llvm-bolt``), else ``merge-fdata-<major>`` on PATH."""
    suffix = llvm_bolt.name.removeprefix("llvm-bolt")
    for name in dict.fromkeys((f"merge-fdata{suffix}", "merge-fdata", f"merge-fdata-{major}")):
        sibling = llvm_bolt.parent / name
        if sibling.is_file() and os.access(sibling, os.X_OK):
            return sibling
    found = shutil.which(f"merge-fdata-{major}", path=search_path)
    return Path(found) if found else None


#: what only llvm-bolt's ``--version`` prints of the LLVM tools (``BOLT revision <unknown>``)
BOLT_VERSION_MARK = "BOLT revision"


def check_is_llvm_bolt(path: Path, explicit: str | None, major: int, env: Mapping[str, str]) -> None:
    """Refuse an LLVM tool of the right major that is not llvm-bolt (``PGO_LLVM_BOLT=llvm-profdata-22``), before
    anything is built: its ``--version`` names no BOLT revision."""
    output = runner.query([str(path), "--version"], env=env, timeout=60)
    if BOLT_VERSION_MARK not in output.stdout + output.stderr:
        given = f"PGO_LLVM_BOLT={explicit}: " if explicit else ""
        raise ToolchainError(
            f"{given}{path} is not llvm-bolt: its --version names no {BOLT_VERSION_MARK}",
            f"give LLVM {major}'s llvm-bolt: Debian's is /usr/lib/llvm-{major}/bin/llvm-bolt, of the package "
            f"{debian_package(major)}",
        )


def find_bolt(
    info: RustcInfo, env: Mapping[str, str], explicit: str | None, llvm_root: Path = Path("/usr/lib")
) -> BoltTools:
    """llvm-bolt and merge-fdata of rustc's LLVM major: PGO_LLVM_BOLT if given, else found by the major. Another
    major is refused, naming both versions; none found names the Debian package."""
    major = info.llvm_major
    search_path = env.get("PATH", os.defpath)
    fix = f"install LLVM {major}'s BOLT (Debian: `apt-get install {debian_package(major)}`) or set PGO_LLVM_BOLT"
    if explicit:
        path = toolchain.explicit_program(explicit, "PGO_LLVM_BOLT", env, fix)
    else:
        # rustup's llvm-tools has no llvm-bolt (nor llvm-strip)
        candidates = toolchain.llvm_candidates("llvm-bolt", major, search_path, llvm_root)
        if not candidates:
            raise ToolchainError(f"no llvm-bolt of LLVM {major} (rustc {info.release}) found", fix)
        path = candidates[0]
    version = tool_version(path, "llvm-bolt", fix, env=env)
    if int(version.split(".")[0]) != major:
        raise ToolchainError(
            f"{path} is LLVM {version} but rustc {info.release} is LLVM {info.llvm_version}: BOLT must be of "
            "the LLVM that built the binary",
            fix,
        )
    check_is_llvm_bolt(path, explicit, major, env)
    merger = merge_fdata_beside(path, major, search_path)
    if merger is None:
        raise ToolchainError(f"no merge-fdata beside {path} nor merge-fdata-{major} on PATH", fix)
    merger_version = tool_version(merger, "merge-fdata", fix, env=env)
    if int(merger_version.split(".")[0]) != major:
        raise ToolchainError(
            f"{merger} is LLVM {merger_version} but rustc {info.release} is LLVM {info.llvm_version}", fix
        )
    return BoltTools(path, merger, version)


def bolt_args(configured: str | None) -> tuple[str, ...]:
    """The optimisation flags of llvm-bolt: PGO_BOLT_ARGS (split on white space) or opt-dist's."""
    if configured is None:
        return OPT_DIST_ARGS
    words = tuple(configured.split())
    for word in words:
        if word.split("=")[0].lstrip("-") in {"o", "data", "instrument", "instrumentation-file"}:
            raise ConfigError(
                f"PGO_BOLT_ARGS={configured!r} sets {word.split('=')[0]}, which the bolt stage sets itself",
                "give only optimisation flags (the default is rustc opt-dist's)",
            )
    return words


# ---------------------------------------------------------------------------------------------------------------
# the input binary

#: relocation sections the linker keeps with --emit-relocs, of code BOLT moves
CODE_RELOCATIONS = ".rela.text"


def relocation_sections(path: Path) -> dict[str, int]:
    """The binary's static relocation sections (``.rela.text``, ``.rela.data``…: not allocated, so kept only by
    ``--emit-relocs``) and their entry counts. The dynamic ones (``.rela.dyn``, ``.rela.plt``) are not counted."""
    with open_elf(path) as elf:
        return {
            section.name: section["sh_size"] // (section["sh_entsize"] or 1)
            for section in elf.iter_sections()
            if section["sh_type"] in ("SHT_RELA", "SHT_REL") and not section["sh_flags"] & 0x2  # SHF_ALLOC
        }


def has_symbol_table(path: Path) -> bool:
    with open_elf(path) as elf:
        return isinstance(elf.get_section_by_name(".symtab"), SymbolTableSection)


#: what the linkers say when the release profile strips the binary (``strip = true``) and BOLT's relocations are asked
_STRIP_AND_RELOCS = ("--strip-all and --emit-relocs may not be used together", "-r and -s may not be used together")


def refuse_stripping_link(log: Path) -> None:
    """After a failed optimised build with BOLT on: refuse in one line when it failed because the cargo profile
    strips the binary, which leaves llvm-bolt nothing to work on (and the linker refuses the pair)."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    if any(phrase in text for phrase in _STRIP_AND_RELOCS):
        raise CheckFailed(
            "the release profile strips the binary (strip = true or symbols), and a stripped binary cannot be "
            "BOLTed: the linker refuses --strip-all with the --emit-relocs BOLT needs",
            "build it unstripped for BOLT (CARGO_PROFILE_RELEASE_STRIP=false, or strip = false in the profile): "
            f"nox -s release strips the artefacts itself (see {log})",
        )


def is_bolted(path: Path) -> bool:
    """Whether llvm-bolt already rewrote the binary (it leaves a ``.note.bolt_info``)."""
    with open_elf(path) as elf:
        return elf.get_section_by_name(".note.bolt_info") is not None


def check_input(path: Path) -> dict[str, int]:
    """Refuse a binary llvm-bolt cannot optimise in relocation mode: stripped, linked without ``--emit-relocs``,
    or BOLTed already. Returns its relocation sections."""
    if not has_symbol_table(path):
        raise CheckFailed(
            f"{path} is stripped (no .symtab): llvm-bolt needs the symbol table to find the functions",
            "give BOLT the optimised build before strip (the bolt stage takes optimise's binary)",
        )
    # before the relocations: llvm-bolt writes no .rela.text, so its output would be taken for a binary linked
    # without --emit-relocs
    if is_bolted(path):
        raise CheckFailed(f"{path} was optimised by BOLT already", "give BOLT the optimised build, not its output")
    relocations = relocation_sections(path)
    if relocations.get(CODE_RELOCATIONS, 0) == 0:
        raise CheckFailed(
            f"{path} has no relocations of its code ({CODE_RELOCATIONS}): it was linked without --emit-relocs, "
            "and BOLT could not move its functions",
            "build it with PGO_BOLT=1 (optimise then adds -Clink-arg=-Wl,--emit-relocs), or run PGO_BOLT=1 nox -s pgo",
        )
    return relocations


# ---------------------------------------------------------------------------------------------------------------
# the profile (.fdata)

_LOCAL_SUFFIX = re.compile(r"/\d+$")


@dataclass(frozen=True)
class FdataSummary:
    """What a BOLT profile (merge-fdata's branch format) holds."""

    branches: int  # records with a count above 0
    executed_branches: int  # the sum of their counts
    functions: frozenset[str]  # symbols named by the records, BOLT's ``/N`` of local symbols removed

    def main_crate_functions(self, crate_names: Iterable[str]) -> int:
        names = tuple(crate_names)
        return sum(1 for function in self.functions if checks.of_crate(function, names))

    def as_json(self) -> dict[str, object]:
        """The profile's keys of the bolt record (as a failed record keeps them)."""
        return {
            "profile_branches": self.branches,
            "profile_executed_branches": self.executed_branches,
            "profile_functions": len(self.functions),
        }


def parse_fdata(text: str) -> FdataSummary:
    """Summarise branch records ``<is-sym> <name> <offset> <is-sym> <name> <offset> <mispredicts> <count>``."""
    branches = executed = 0
    functions: set[str] = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 8 or not (fields[7].isascii() and fields[7].isdigit()):  # "²" is a digit int() refuses
            continue
        count = int(fields[7])
        if count == 0:
            continue
        branches += 1
        executed += count
        for flag, name in ((fields[0], fields[1]), (fields[3], fields[4])):
            if flag == "1":
                functions.add(_LOCAL_SUFFIX.sub("", name))
    return FdataSummary(branches, executed, frozenset(functions))


#: a line of the .fdata BOLT's instrumentation runtime writes: ``<is-sym> <name> <offset>`` of the source and of the
#: destination, then mispredictions and count (``0 [unknown] 0`` for a call from code it did not instrument)
_RAW_RECORD = re.compile(r"^[0-2] \S+ [0-9a-f]+ [0-2] \S+ [0-9a-f]+ [0-9]+ [0-9]+$")
_RAW_NAME = re.compile(r"\.(\d+)\.fdata$")
#: the hint of a BOLT training whose profile is missing or cut short
RAW_FDATA_HINT = (
    "BOLT's runtime writes a process's profile when it exits normally; one killed or aborted while writing it "
    "leaves it partial: see the bolt-train logs and run nox -s bolt again"
)


def check_raw_fdata(directory: Path, raws: Sequence[Path]) -> None:
    """Refuse a BOLT training that left no ``.fdata`` in ``directory``, or one (of ``raws``) empty or partial: a
    line cut short or one that is not a record. merge-fdata would merge what is there without a word."""
    if not raws:
        raise CheckFailed(f"the BOLT training wrote no .fdata into {directory}", RAW_FDATA_HINT)
    for path in raws:
        pid = _RAW_NAME.search(path.name)
        process = f"process {pid[1]}" if pid else "a process"
        data = read_bytes(path, "a BOLT profile of the training", CheckFailed, RAW_FDATA_HINT)
        if not data:
            raise CheckFailed(f"{process} of the BOLT training wrote an empty profile {path}", RAW_FDATA_HINT)
        if not data.endswith(b"\n"):
            raise CheckFailed(
                f"{process} of the BOLT training wrote a partial profile {path}: its last line is cut short",
                RAW_FDATA_HINT,
            )
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not _RAW_RECORD.match(line):
                raise CheckFailed(
                    f"{process} of the BOLT training wrote a partial profile {path}: line {number} is not a "
                    f"record ({line[:60]!r})",
                    RAW_FDATA_HINT,
                )


def check_profile(summary: FdataSummary, profile: Path, crate_names: Sequence[str], package: str) -> None:
    """Refuse an empty BOLT profile, or one that names none of the main crate's functions."""
    if summary.branches == 0:
        raise CheckFailed(
            f"the BOLT profile {profile} is empty: it records no executed branch",
            "did the workload run the BOLT-instrumented binary? train again (nox -s bolt), or give a .fdata "
            "merge-fdata wrote for this binary as PGO_BOLT_PROFILE",
        )
    if summary.main_crate_functions(crate_names) == 0:
        raise CheckFailed(
            f"the BOLT profile {profile} names none of {package}'s functions ({len(summary.functions)} functions "
            "of other crates): it is a profile of another binary",
            "train the BOLT profile on this build (nox -s bolt without PGO_BOLT_PROFILE)",
        )


#: what is written beside a .fdata the bolt stage trained (``<name>.fdata.trained-on``): the sha256 of the binary
#: it was recorded on. merge-fdata's format has no place for it (llvm-bolt refuses any line that is not a record).
TRAINED_ON_SUFFIX = ".trained-on"


def trained_on_path(profile: Path) -> Path:
    return profile.with_name(profile.name + TRAINED_ON_SUFFIX)


def trained_on_record(profile_sha256: str, input_sha256: str, instrumented_sha256: str | None) -> str:
    """The record of a BOLT training: the profile, the binary it is for (the PGO binary llvm-bolt instrumented)
    and the BOLT-instrumented binary that wrote it."""
    record = {
        "profile_sha256": profile_sha256,
        "input_sha256": input_sha256,
        "instrumented_sha256": instrumented_sha256,
    }
    return json.dumps(record, indent=2) + "\n"


def write_trained_on(profile: Path, text: str) -> None:
    """The record beside ``profile``, whole or not at all, readable by its owner only (as the store's files)."""
    dest = trained_on_path(profile)
    with atomic_output(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o600)


def recorded_inputs(profile_sha256: str, records: Iterable[Path]) -> list[str]:
    """The binaries (sha256) the records that exist among ``records`` say the profile of ``profile_sha256`` was
    trained on; a record of other content (the .fdata edited since) names none."""
    found = []
    for path in records:
        if not path.is_file():
            continue
        hint = f"remove {path} and train the BOLT profile again (nox -s bolt without PGO_BOLT_PROFILE)"
        fields = Fields(read_json(path, "BOLT training record", CheckFailed, hint), str(path), CheckFailed, hint)
        if fields.string("profile_sha256") == profile_sha256:
            found.append(fields.string("input_sha256"))
    return found


def check_trained_on(profile: Path, profile_sha256: str, binary: Path, binary_sha256: str, store_record: Path) -> None:
    """Refuse a given BOLT profile that no record says was trained on ``binary`` (its sha256): a record beside it
    or beside its copy in the store, written when the bolt stage trained it. A .fdata of another build of the same
    crate names the same functions, and llvm-bolt may apply it without a word."""
    beside = trained_on_path(profile)
    inputs = recorded_inputs(profile_sha256, dict.fromkeys((beside, store_record)))
    if binary_sha256 in inputs:
        return
    fix = "train the BOLT profile on this build (nox -s bolt without PGO_BOLT_PROFILE)"
    if inputs:
        raise CheckFailed(
            f"the BOLT profile {profile} was recorded on another binary (sha256 {inputs[0][:16]}), not on "
            f"{binary} (sha256 {binary_sha256[:16]}): it is a profile of another build of this crate",
            fix,
        )
    raise CheckFailed(
        f"the BOLT profile {profile} has no record of the binary it was trained on (no {beside.name} beside it "
        "of this content, none in the store)",
        f"give a .fdata the bolt stage trained on this binary, with its {TRAINED_ON_SUFFIX} record beside it, or {fix}",
    )


# ---------------------------------------------------------------------------------------------------------------
# llvm-bolt's log

_PROFILED = re.compile(
    r"BOLT-INFO: (\d+) out of (\d+) functions in the binary \([\d.]+%\) have non-empty execution profile"
)
_STALE = re.compile(r"BOLT-WARNING: (\d+) \([\d.]+% of all profiled\) functions have invalid \(possibly stale\)")
_IGNORED = re.compile(r"BOLT-INFO: profile for (\d+) objects was ignored")
_NOT_OPTIMIZED = re.compile(r"BOLT-INFO: (\d+) functions with profile could not be optimized")
_DYNO_LINE = re.compile(r"^\s*(\d+) : (.+?)(?: \((?:[-+][\d.]+%|=|[^)]*)\))?\s*$")


@dataclass(frozen=True)
class BoltLog:
    """What llvm-bolt said of the profile it applied and of the program before and after (``-dyno-stats``)."""

    functions_with_profile: int
    total_functions: int
    stale_functions: int
    ignored_objects: int
    not_optimized: int
    dyno_before: dict[str, int]
    dyno_after: dict[str, int]

    def as_json(self) -> dict[str, object]:
        """The log's keys of the bolt record (as a failed record keeps them)."""
        return {
            "functions_with_profile": self.functions_with_profile,
            "total_functions": self.total_functions,
            "stale_profile_functions": self.stale_functions,
            "profile_ignored_objects": self.ignored_objects,
            "profiled_functions_not_optimized": self.not_optimized,
            "dyno_stats": {"before": self.dyno_before, "after": self.dyno_after},
        }


def parse_dyno_stats(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """The two blocks ``-dyno-stats`` prints under its ``dynostats`` heading: the program before the
    optimisations, then after them (its lines with the change in brackets): ``{name: value}`` each. Empty when
    llvm-bolt printed none (the flag not given)."""
    blocks: list[dict[str, int]] = []
    current: dict[str, int] | None = None
    in_stats = False
    for line in text.splitlines():
        if "dynostats" in line:
            in_stats, current, blocks = True, None, []
            continue
        if not in_stats:
            continue
        match = _DYNO_LINE.match(line)
        if match:
            if current is None:
                current = {}
                blocks.append(current)
            current[match.group(2).strip()] = int(match.group(1))
        elif not line.strip():
            current = None
        else:
            in_stats = False
    blocks += [{}, {}]  # none printed: both empty
    return blocks[0], blocks[1]


def parse_bolt_log(text: str) -> BoltLog:
    profiled = _PROFILED.search(text)
    if not profiled:
        raise CheckFailed(
            "llvm-bolt did not say how many functions the profile covers (no 'functions in the binary … have "
            "non-empty execution profile' line)",
            "was it given the profile (-data)? see the bolt log",
        )
    before, after = parse_dyno_stats(text)

    def count(pattern: re.Pattern[str]) -> int:
        found = pattern.search(text)
        return int(found.group(1)) if found else 0

    return BoltLog(
        functions_with_profile=int(profiled.group(1)),
        total_functions=int(profiled.group(2)),
        stale_functions=count(_STALE),
        ignored_objects=count(_IGNORED),
        not_optimized=count(_NOT_OPTIMIZED),
        dyno_before=before,
        dyno_after=after,
    )


def check_bolt_log(summary: BoltLog, profile: Path, log: Path) -> None:
    """Refuse a BOLT run whose profile matched none of the binary's functions, or matched some stale."""
    if summary.functions_with_profile == 0:
        raise CheckFailed(
            f"llvm-bolt found profile data for none of the binary's {summary.total_functions} functions in "
            f"{profile}: it is a profile of another binary",
            f"train the BOLT profile on this build (see {log})",
        )
    if summary.stale_functions:
        raise CheckFailed(
            f"llvm-bolt reports {summary.stale_functions} functions with an invalid (possibly stale) profile in "
            f"{profile}: the profile is of another build of this crate",
            f"train the BOLT profile on this very binary (see {log})",
        )


# ---------------------------------------------------------------------------------------------------------------
# the release's strip

#: GNU strip of binutils 2.40 rewrites a BOLTed binary into one that dies at start (SIGSEGV): it cannot keep BOLT's
#: new segment layout (it warns "section `.eh_frame' can't be allocated in segment 4"). llvm-strip can.
STRIP_NOTE = "GNU strip breaks a BOLTed binary (it crashes at start); llvm-strip keeps BOLT's segments"


def find_llvm_strip(info: RustcInfo, env: Mapping[str, str], llvm_root: Path = Path("/usr/lib")) -> Path:
    """llvm-strip of rustc's LLVM major (``llvm-strip-<major>`` on PATH, then Debian's ``/usr/lib/llvm-<major>``),
    the strip of a BOLTed release artefact."""
    major = info.llvm_major
    if found := toolchain.llvm_candidates("llvm-strip", major, env.get("PATH", os.defpath), llvm_root):
        return found[0]
    raise ToolchainError(
        f"no llvm-strip of LLVM {major} to strip the BOLTed binary with ({STRIP_NOTE})",
        f"Debian: apt-get install llvm-{major}",
    )


# ---------------------------------------------------------------------------------------------------------------
# names too long for BOLT's instrumentation runtime (LLVM issue 169899)

#: the stack buffer (``BufSize`` of bolt/runtime/common.h) in which BOLT's instrumentation runtime formats each line
#: of the .fdata it writes at exit; a line names two functions (the branch's or call's source and destination), and
#: a name that does not fit ends the process with ``Assertion failed: buffer overflow, function name too large``
RUNTIME_LINE_BYTES = 10240
#: what a line holds besides its two names: the runtime's reserve of 25 bytes per name, the flags, offsets, the
#: count and their spaces, with room to spare
LINE_OVERHEAD = 96
#: what BOLT adds to a local symbol's name (``name/1``)
LOCAL_SUFFIX = 4
#: the runtime's assertion, as the instrumented process prints it on stderr before it exits 1
OVERFLOW_ASSERTION = "buffer overflow, function name too large"

_CALL = re.compile(r"^\s*([0-9a-f]+):\s+(call|jmp)\S*\s+([0-9a-f]+) <([^>+]+)(?:\+0x[0-9a-f]+)?>")
_INDIRECT = re.compile(r"^\s*[0-9a-f]+:\s+(?:call|jmp)\S*\s+\*")
_REFERENCE = re.compile(r"#\s+([0-9a-f]+) <([^>+]+)>\s*$")
_FUNCTION = re.compile(r"^([0-9a-f]+) <(.+)>:$")
#: allocated sections whose relocations are not function pointers a call may go through
_NOT_POINTERS = frozenset({".eh_frame", ".eh_frame_hdr", ".gcc_except_table"})


@dataclass(frozen=True)
class NameBudget:
    """Which functions BOLT's instrumentation must leave out for each line of the .fdata to fit its runtime's
    buffer: every function a line of whose (its own branches, its direct calls, its indirect calls to a function
    whose address is taken) would name two functions longer together than the buffer. A left-out function still
    runs, and still appears as the destination of its callers' calls; it gets no BOLT profile of its own."""

    skipped: dict[int, tuple[str, ...]]  # address: the function's symbols
    longest: int  # the longest name (as BOLT writes it) in the binary
    functions: int

    def skip_file_text(self) -> str:
        """``-skip-funcs-file``'s lines: llvm-bolt reads each as a regular expression matched whole against a
        function's names (a local one's with BOLT's ``/N``), so the mangled name is escaped."""
        names = (name for names in self.skipped.values() for name in names)
        lines = sorted(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", name) + "(/[0-9]+)?" for name in names)
        return "".join(line + "\n" for line in lines)


def _symbols(path: Path) -> dict[int, tuple[list[str], bool]]:
    """The binary's functions: address -> (its symbols, whether one is local)."""
    found: dict[int, tuple[list[str], bool]] = {}
    with open_elf(path) as elf:  # a symbol it cannot read is the binary's fault too, not a traceback
        symtab = elf.get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            return found
        for symbol in symtab.iter_symbols():
            if symbol["st_info"]["type"] != "STT_FUNC" or symbol["st_shndx"] == "SHN_UNDEF" or not symbol.name:
                continue
            names, local = found.setdefault(symbol["st_value"], ([], False))
            names.append(symbol.name)
            found[symbol["st_value"]] = (names, local or symbol["st_info"]["bind"] == "STB_LOCAL")
    return found


def _data_references(path: Path, starts: set[int]) -> set[int]:
    """Functions whose address a relocation outside the code holds (vtables, function pointers): indirect calls
    may reach them."""
    found: set[int] = set()
    with open_elf(path) as elf:
        symtab = elf.get_section_by_name(".symtab")
        for section in elf.iter_sections():
            # not the dynamic ones (SHF_ALLOC)
            if not isinstance(section, RelocationSection) or section["sh_flags"] & 0x2:
                continue
            target = elf.get_section(section["sh_info"])
            # the data the program reads (not code, unwind tables or debug information)
            if not target["sh_flags"] & 0x2 or target["sh_flags"] & 0x4 or target.name in _NOT_POINTERS:
                continue
            for relocation in section.iter_relocations():
                value = relocation["r_addend"] if relocation.is_RELA() else 0
                if relocation["r_info_sym"] and isinstance(symtab, SymbolTableSection):
                    value += symtab.get_symbol(relocation["r_info_sym"])["st_value"]
                if value in starts:
                    found.add(value)
    return found


def name_budget(path: Path, disassembly: str) -> NameBudget:
    """The functions of the binary at ``path`` (``disassembly``: ``objdump -d --no-show-raw-insn -w`` of it) that
    BOLT must not instrument (see :class:`NameBudget`)."""
    symbols = _symbols(path)
    width = {addr: max(map(len, names)) + (LOCAL_SUFFIX if local else 0) for addr, (names, local) in symbols.items()}
    budget = RUNTIME_LINE_BYTES - LINE_OVERHEAD
    calls: dict[int, set[int]] = {}
    indirect: set[int] = set()
    taken = _data_references(path, set(symbols))
    current: int | None = None
    for line in disassembly.splitlines():
        header = _FUNCTION.match(line)
        if header:
            current = int(header[1], 16)
            continue
        if current is None:
            continue
        call = _CALL.match(line)
        if call:
            calls.setdefault(current, set()).add(int(call[3], 16))
            continue
        if _INDIRECT.match(line):
            indirect.add(current)
        reference = _REFERENCE.search(line)
        if reference:
            taken.add(int(reference[1], 16))
    longest_taken = max((width[addr] for addr in taken if addr in width), default=0)
    skipped: dict[int, tuple[str, ...]] = {}
    for addr, size in width.items():
        callees = [width[t] for t in calls.get(addr, ()) if t in width and t != addr]
        if (
            2 * size > budget
            or any(size + callee > budget for callee in callees)
            or (addr in indirect and size + longest_taken > budget)
        ):
            skipped[addr] = tuple(symbols[addr][0])
    return NameBudget(skipped, max(width.values(), default=0), len(width))
