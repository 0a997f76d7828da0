"""llvm-profdata: merge raw profiles, count what the training executed."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CheckFailed, CommandFailed, MissingInput, ToolchainError, WorkDirError
from recipes.files import atomic_output
from recipes.llvm.carry import Record, rewrite
from recipes.results import RawProfileRecord
from recipes.runner import Completed, run
from recipes.store import sha256_file
from recipes.toolchain.rustc import ProfdataTool


def _profdata(tool: ProfdataTool, *args: str, env: Mapping[str, str], log: Path, check: bool = True) -> Completed:
    """``llvm-profdata <args>``, logged to ``log`` as ``llvm-profdata <its subcommand>``."""
    return run([str(tool.path), *args], env=env, log=log, what=f"llvm-profdata {args[0]}", check=check)


@dataclass(frozen=True)
class ProfileSummary:
    total_functions: int
    executed_functions: int
    total_count: int = 0  # the sum of every counter (``Total count``), 0 where llvm-profdata prints none


_TOTAL_COUNT = re.compile(r"^Total count:\s*(\d+)", re.MULTILINE)
_TOTAL = re.compile(r"^Total functions:\s*(\d+)", re.MULTILINE)
_EXECUTED = re.compile(r"^Number of functions with maximum count \(>= 1\):\s*(\d+)", re.MULTILINE)


def parse_show(text: str) -> ProfileSummary:
    """Parse ``llvm-profdata show --value-cutoff=1``: total functions and those executed at least once."""
    total = _TOTAL.search(text)
    executed = _EXECUTED.search(text)
    if not total:
        raise ToolchainError("llvm-profdata show printed no 'Total functions' line", "is the profile empty?")
    count = _TOTAL_COUNT.search(text)
    return ProfileSummary(
        int(total.group(1)), int(executed.group(1)) if executed else 0, int(count.group(1)) if count else 0
    )


_OVERLAP = re.compile(r"^\s*Edge profile overlap:\s*([\d.]+)%", re.MULTILINE)


def parse_overlap(text: str) -> float:
    """The edge-count overlap, in percent, of ``llvm-profdata overlap``."""
    match = _OVERLAP.search(text)
    if not match:
        raise ToolchainError("llvm-profdata overlap printed no 'Edge profile overlap' line", "see its log")
    return float(match.group(1))


@dataclass(frozen=True)
class RawProfile:
    """One ``.profraw`` the training wrote, as train recorded it."""

    name: str
    size: int
    sha256: str

    def as_json(self) -> RawProfileRecord:
        return {"name": self.name, "size": self.size, "sha256": self.sha256}


def record_raw_profiles(profraw_dir: Path) -> list[RawProfile]:
    """What the training left in ``profraw_dir``: every ``.profraw``'s name, size and sha256."""
    return [
        RawProfile(path.name, path.stat().st_size, sha256_file(path)) for path in sorted(profraw_dir.glob("*.profraw"))
    ]


def check_raw_profiles(profraw_dir: Path, recorded: Sequence[RawProfileRecord]) -> list[Path]:
    """The raw profiles to merge: exactly those train recorded, unchanged; anything else is refused by name."""
    expected = {str(entry["name"]): entry for entry in recorded}
    present = {path.name: path for path in profraw_dir.glob("*.profraw")} if profraw_dir.is_dir() else {}
    if not expected:
        raise MissingInput("the training recorded no .profraw files", "run `nox -s train` again")
    if extra := sorted(set(present) - set(expected)):
        raise CheckFailed(
            f"{profraw_dir / extra[0]} was not written by the last training"
            + (f" ({len(extra)} such files)" if len(extra) > 1 else ""),
            "only this training's raw profiles are merged: remove it, or run `nox -s train` again",
        )
    if missing := sorted(set(expected) - set(present)):
        raise MissingInput(
            f"{profraw_dir / missing[0]}, written by the last training, is gone"
            + (f" ({len(missing)} such files)" if len(missing) > 1 else ""),
            "run `nox -s train` again",
        )
    paths = []
    for name, entry in sorted(expected.items()):
        path = present[name]
        size = path.stat().st_size
        if size == 0:
            raise CheckFailed(
                f"{path} is empty: the process that wrote it did not finish writing its profile",
                "did it exit by a signal or abort? run `nox -s train` again",
            )
        if size != entry["size"] or sha256_file(path) != entry["sha256"]:
            raise CheckFailed(
                f"{path} changed since the training wrote it",
                "only this training's raw profiles are merged: run `nox -s train` again",
            )
        paths.append(path)
    return paths


_BAD_INPUT = re.compile(r"^(?:warning|error): (?P<file>\S+\.profraw): (?P<why>.*)$", re.MULTILINE)


def bad_inputs(log_text: str) -> dict[str, str]:
    """The raw profiles llvm-profdata merge warned about (``file header is corrupt``, …), with the reason."""
    return {match.group("file"): match.group("why").strip() for match in _BAD_INPUT.finditer(log_text)}


@dataclass(frozen=True)
class MergeResult:
    merged: list[Path]
    dropped: dict[str, str]  # file -> llvm-profdata's reason


def merge_weighted(
    tool: ProfdataTool, inputs: Sequence[str], output: Path, *, env: Mapping[str, str], log: Path
) -> None:
    """Merge profiles given as ``--weighted-input=W,FILE`` arguments into ``output``, atomically."""
    try:
        with atomic_output(output) as tmp:
            done = _profdata(
                tool, "merge", "--failure-mode=all", "-o", str(tmp), *inputs, env=env, log=log, check=False
            )
            if done.returncode != 0:
                raise merge_failed(done, "llvm-profdata merge of the shards", log)
            drop_binary_ids(tool, tmp, env=env, log=log)
    except OSError as exc:
        raise WorkDirError(f"cannot write {output}: {exc.strerror}", "free space in PGO_OUT or choose another") from exc


#: a function record's name line of ``llvm-profdata show --all-functions`` (``--counts`` or not)
_FUNCTION = re.compile(r"^  (?P<name>\S.*):$")
_COUNTS_LINE = re.compile(r"^    (?:Function count: (?P<entry>\d+)|Block counts: \[(?P<blocks>[\d, ]*)\])$")


def parse_record_counts(text: str) -> dict[str, int]:
    """``llvm-profdata show --all-functions --counts``: each record's counters added up, by the record's name (a
    local function's is ``<cgu>;<symbol>``; records of one name added together)."""
    counts: dict[str, int] = {}
    name: str | None = None
    for line in text.splitlines():
        if record := _FUNCTION.match(line):
            name = record.group("name")
            counts.setdefault(name, 0)
        elif name is not None and (found := _COUNTS_LINE.match(line)):
            numbers = found.group("entry") or (found.group("blocks") or "").replace(",", " ")
            counts[name] += sum(int(c) for c in numbers.split())
    return counts


_HASH_LINE = re.compile(r"^    Hash: 0x(?P<hash>[0-9a-fA-F]+)$")


def parse_records(text: str) -> list[Record]:
    """``llvm-profdata show --all-functions --counts``: every record, its CFG hash and its counters added up (a name
    may hold records of several CFG hashes)."""
    counts: dict[tuple[str, int], int] = {}
    key: tuple[str, int] | None = None
    name: str | None = None
    for line in text.splitlines():
        if record := _FUNCTION.match(line):
            name, key = record.group("name"), None
        elif name is not None and (found := _HASH_LINE.match(line)):
            key = (name, int(found.group("hash"), 16))
            counts.setdefault(key, 0)
        elif key is not None and (found := _COUNTS_LINE.match(line)):
            numbers = found.group("entry") or (found.group("blocks") or "").replace(",", " ")
            counts[key] += sum(int(c) for c in numbers.split())
    return [Record(name, cfg_hash, count) for (name, cfg_hash), count in counts.items()]


def parse_never_run(text: str) -> dict[str, frozenset[int]]:
    """``llvm-profdata show --all-functions --counts``: the records whose counters are all zero (the functions the
    training never ran), each name with the CFG hashes of its records (a name may hold records of several)."""
    return never_run_of(parse_records(text))


def never_run_of(records: Sequence[Record]) -> dict[str, frozenset[int]]:
    """The records whose counters are all zero, each name with the CFG hashes of its records."""
    hashes: dict[str, set[int]] = {}
    for record in records:
        if record.count == 0:
            hashes.setdefault(record.name, set()).add(record.cfg_hash)
    return {record_name: frozenset(found) for record_name, found in hashes.items()}


def show_counts(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path) -> str:
    """``llvm-profdata show --all-functions --counts``: every record, its CFG hash and its counters, as text."""
    return _profdata(tool, "show", "--all-functions", "--counts", str(profile), env=env, log=log).output()


def never_run_records(
    tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path
) -> dict[str, frozenset[int]]:
    """The records of ``profile`` whose counters are all zero, with their CFG hashes (:func:`parse_never_run`)."""
    return parse_never_run(show_counts(tool, profile, env=env, log=log))


@dataclass(frozen=True)
class PartialProfile:
    """A profile rewritten for partial training: ``path`` holds the records of ``whole`` with a counter above zero;
    ``never_run`` the records left out (name: their CFG hashes), which the build then compiles as unprofiled;
    ``records`` the names of all of ``whole``'s, and ``counted`` each with its CFG hash and count, read in the same
    pass."""

    path: Path
    whole: Path
    never_run: dict[str, frozenset[int]]
    records: list[str]  # every record of ``whole``, by name
    counted: list[Record]


def partial(tool: ProfdataTool, whole: Path, output: Path, *, env: Mapping[str, str], log: Path) -> PartialProfile:
    """``whole`` without the records of the functions it never ran (``llvm-profdata merge --sparse``: LLVM gives a
    function with a record of zero counts the ``cold`` attribute and an entry count of 0, and compiles one with no
    record as without a profile), written atomically to ``output``."""
    shown = show_counts(tool, whole, env=env, log=log.with_suffix(".show.log"))
    counted = parse_records(shown)
    never_run, records = never_run_of(counted), parse_function_names(shown)
    try:
        with atomic_output(output) as tmp:
            done = _profdata(tool, "merge", "--sparse", "-o", str(tmp), str(whole), env=env, log=log, check=False)
            if done.returncode != 0:
                raise merge_failed(done, "llvm-profdata merge --sparse (the partial profile)", log)
    except OSError as exc:
        raise WorkDirError(f"cannot write {output}: {exc.strerror}", "free space in PGO_OUT or choose another") from exc
    return PartialProfile(output, whole, never_run, records, counted)


def record_counts(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path) -> dict[str, int]:
    """Each function record's counters added up (:func:`parse_record_counts`)."""
    return parse_record_counts(show_counts(tool, profile, env=env, log=log))


def drop_binary_ids(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path) -> None:
    """``profile``, just merged, written again without the build ids of the binaries whose raw profiles it merged
    (to text and back: every record, counter and value profile is kept, the ids are not). The instrumented binary's
    build id follows the paths it was built at, so a release's profile differed between two checkouts of one tag
    while its binaries did not; the ids of the raw profiles themselves are what gather checks."""
    _through_text(
        tool, profile, profile, None, "the build ids out", "the profile without build ids", env=env,
        log=log.with_name(log.stem + "-binary-ids.log"),
    )  # fmt: skip


def carried(
    tool: ProfdataTool,
    profile: Path,
    output: Path,
    renames: Mapping[str, str],
    drop: frozenset[tuple[str, int]],
    *,
    env: Mapping[str, str],
    log: Path,
) -> None:
    """``profile`` written to ``output`` (atomically) with its records renamed and the ``drop`` ones left out
    (:func:`recipes.llvm.carry.rewrite`, through the text form: counters and value profiles as they were)."""
    try:
        _through_text(
            tool, profile, output, lambda text: rewrite(text, renames, drop), "the profile to carry forward",
            "the profile carried forward", env=env, log=log,
        )  # fmt: skip
    except OSError as exc:
        raise WorkDirError(f"cannot write {output}: {exc.strerror}", "free space in PGO_OUT or choose another") from exc


def _through_text(
    tool: ProfdataTool,
    profile: Path,
    output: Path,
    edit: Callable[[str], str] | None,
    out_what: str,
    back_what: str,
    *,
    env: Mapping[str, str],
    log: Path,
) -> None:
    """``profile`` to text (``llvm-profdata merge --text``), ``edit``-ed, and back into ``output``, atomically (it may
    be ``profile`` itself); a failed merge is one line naming ``out_what`` or ``back_what``, and the text is not
    left. An OSError is the caller's to say (it knows which file it writes)."""
    text = output.with_name(output.name + ".proftext")
    try:
        done = _profdata(tool, "merge", "--text", "-o", str(text), str(profile), env=env, log=log, check=False)
        if done.returncode != 0:
            raise merge_failed(done, f"llvm-profdata merge --text ({out_what})", log)
        if edit is not None:
            text.write_text(edit(text.read_text(encoding="utf-8")), encoding="utf-8")
        with atomic_output(output) as tmp:
            done = _profdata(tool, "merge", "-o", str(tmp), str(text), env=env, log=log, check=False)
            if done.returncode != 0:
                raise merge_failed(done, f"llvm-profdata merge ({back_what})", log)
    finally:
        text.unlink(missing_ok=True)


def merge_failed(done: Completed, what: str, log: Path) -> CommandFailed:
    """A failed ``llvm-profdata merge`` (``what``) in one line: its exit code and its last ``error:`` line."""
    errors = [line for line in done.output().splitlines() if line.startswith("error:")]
    return CommandFailed(
        f"{what} failed with exit code {done.returncode}"
        + (f": {errors[-1].removeprefix('error: ')}" if errors else ""),
        f"nothing was written; see {log}",
    )


def merge(
    tool: ProfdataTool, raws: list[Path], output: Path, *, env: Mapping[str, str], log: Path, drop_bad: bool = False
) -> MergeResult:
    """Merge exactly ``raws`` into ``output``, atomically. llvm-profdata's ``--failure-mode=all`` only fails
    when every input is bad, so its warnings are read: a corrupt input is refused by name, or with ``drop_bad``
    left out with its reason (and refused when none is left)."""
    if not raws:
        raise MissingInput("no .profraw files to merge", "run `nox -s train` first")
    inputs = log.with_name(log.stem + "-inputs.txt")  # one per line: the command line stays short
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        inputs.write_text("".join(f"{path}\n" for path in raws), encoding="utf-8")
        with atomic_output(output) as tmp:
            args = ("merge", "--failure-mode=all", "-o", str(tmp), f"--input-files={inputs}")
            done = _profdata(tool, *args, env=env, log=log, check=False)
            bad = bad_inputs(done.output())
            if bad and not drop_bad:
                first, why = next(iter(bad.items()))
                raise CheckFailed(
                    f"llvm-profdata cannot read {first}: {why}" + (f" ({len(bad)} such files)" if len(bad) > 1 else ""),
                    "train again; or set PGO_DROP_BAD_PROFRAW=1 to merge the others without it",
                )
            if len(bad) >= len(raws):
                raise CheckFailed(f"llvm-profdata merge could merge none of the {len(raws)} raw profiles", f"see {log}")
            if done.returncode != 0:
                raise merge_failed(done, "llvm-profdata merge", log)
            drop_binary_ids(tool, tmp, env=env, log=log)
    except OSError as exc:
        raise WorkDirError(f"cannot write {output}: {exc.strerror}", "free space in PGO_OUT or choose another") from exc
    dropped = {str(Path(name)): why for name, why in bad.items()}
    return MergeResult([p for p in raws if str(p) not in dropped], dropped)


_LEVEL = re.compile(r"^Instrumentation level:\s*(?P<level>\S+)", re.MULTILINE)


#: the first bytes of an indexed profile, what llvm-profdata merge writes and the only one -Cprofile-use reads
#: (LLVM's IndexedInstrProf::Magic, little-endian); of the others llvm-profdata show also reads, a raw profile's
INDEXED_MAGIC = b"\xfflprofi\x81"
_RAW = "a raw profile (.profraw)"
_OTHER_FORMATS = {b"\x81rforpl\xff": _RAW, b"\x81Rforpl\xff": _RAW}  # a 64-bit and a 32-bit program's


def _format_of(profile: Path) -> str | None:
    """What ``profile`` is when it is not an indexed profile (None: it is one, or it cannot be read here)."""
    try:
        with profile.open("rb") as stream:
            head = stream.read(len(INDEXED_MAGIC))
    except OSError:
        return None  # llvm-profdata show has said why
    if head == INDEXED_MAGIC:
        return None
    return _OTHER_FORMATS.get(head, "a text profile" if head.isascii() else "of another format")


def check_usable(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path, what: str) -> ProfileSummary:
    """Refuse a profile this LLVM cannot use: unreadable, not indexed (a .profraw or a text profile, which show reads
    and rustc does not), not an IR-level profile (rustc's), or without functions."""
    done = _profdata(tool, "show", "--value-cutoff=1", str(profile), env=env, log=log, check=False)
    text = done.output()
    if done.returncode != 0:
        reason = next((ln.split(": ", 2)[-1] for ln in text.splitlines() if ln.startswith(("error:", "warning:"))), "")
        raise CheckFailed(
            f"{what} {profile} is not a profile LLVM {tool.llvm_version} can read: {reason or 'see ' + str(log)}",
            "give the .profdata that llvm-profdata merge of rustc's LLVM wrote",
        )
    if (other := _format_of(profile)) is not None:
        # before: put in the store and built with, and refused after the build (rustc: "bad magic")
        raise CheckFailed(
            f"{what} {profile} is {other}, not an indexed profile: -Cprofile-use reads only what llvm-profdata "
            "merge writes",
            f"merge it first: llvm-profdata merge -o merged.profdata {profile}",
        )
    level = _LEVEL.search(text)
    if not level or level.group("level") != "IR":
        raise CheckFailed(
            f"{what} {profile} is not an IR-level instrumentation profile "
            f"(level {level.group('level') if level else 'unknown'}): rustc would ignore it",
            "empty raw profiles merge into such a file: check the training wrote whole .profraw files",
        )
    summary = parse_show(text)
    if summary.total_functions == 0:
        raise CheckFailed(f"{what} {profile} has no functions", "train again: the profile is empty")
    return summary


def function_names(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path) -> list[str]:
    """The names of the profile's function records (``cgu;symbol`` for local ones, as LLVM keeps them)."""
    return parse_function_names(_profdata(tool, "show", "--all-functions", str(profile), env=env, log=log).output())


def parse_function_names(text: str) -> list[str]:
    return [match.group("name") for match in map(_FUNCTION.match, text.splitlines()) if match]


def summarise(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path) -> ProfileSummary:
    return parse_show(_profdata(tool, "show", "--value-cutoff=1", str(profile), env=env, log=log).output())


def overlap(tool: ProfdataTool, first: Path, second: Path, *, env: Mapping[str, str], log: Path) -> float:
    return parse_overlap(_profdata(tool, "overlap", str(first), str(second), env=env, log=log).output())


def parse_binary_ids(text: str) -> list[str]:
    """The build ids under ``Binary IDs:`` in ``llvm-profdata show --binary-ids``'s output, lowercase hex."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Binary IDs:"), None)
    if start is None:
        return []
    words = (line.strip() for line in lines[start + 1 :])
    return [word.lower() for word in itertools.takewhile(lambda word: re.fullmatch(r"[0-9a-fA-F]+", word), words)]


def binary_ids(tool: ProfdataTool, raw: Path, *, env: Mapping[str, str], log: Path) -> list[str]:
    """The build ids LLVM wrote into the raw profile ``raw``: those of the binary (and shared objects) that wrote it."""
    return parse_binary_ids(_profdata(tool, "show", "--binary-ids", str(raw), env=env, log=log).output())
