"""A profile carried forward to another build of its crate: each record matched to this build's function.

A Rust function's record is named by its symbol, and a legacy symbol ends in a hash (``17h<16 hex>E``) of cargo's
``-C metadata``, which takes in the package's version, the rustc version and every dependency's metadata; a local
function's record is also prefixed by its codegen unit, ``<crate>.<hex>-cgu.<n>;``. So a version bump renames
every function of the crate, and a toolchain bump every function. What stays is the symbol without its hashes and
the function's CFG hash, which LLVM computes from the function's code.

A build with the profile as given tells, by LLVM's warnings, each function without a record (its codegen unit,
symbol and CFG hash, ``-pgo-warn-missing-function``) and each whose record has another CFG hash (the hash-mismatch
warning). :func:`plan` matches the records to them: the same symbol without its hashes and the same CFG hash, one
record for one function, is re-keyed (first within the same codegen unit's number, then anywhere in the crate);
a function of the record's very name with another CFG hash was edited, and its record is left out; several records
for as many functions that the hashes alone cannot tell apart (generic instances whose type arguments only the
symbol hash holds, copies of a local function in renumbered units) are ambiguous, and not used; a function that
matches no record is new. :func:`rewrite` writes the profile with the re-keyed names (and the indirect-call targets
that name them), without the edited records. A second build from it, with ``-pgo-view-raw-counts=text``, dumps
each function that read its record, and :func:`settle` tells from that which records were kept, re-keyed, edited
or gone. A C function's record is named by its symbol, a static one's by its source path and
symbol (``<path>;<symbol>``): a path that moved with the version or the checkout leaves it gone.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from recipes.errors import CheckFailed
from recipes.llvm.checks import of_crate

#: the hash of a legacy symbol (``…17h0123456789abcdefE``), the crate hash of a codegen unit's name
#: (``hello_pgo.9e151ce622a56ce3-cgu.2``), a v0 symbol's crate disambiguator (``Cs1a2B3c_5alloc``)
_LEGACY_HASH = re.compile(r"17h[0-9a-f]{16}E$")
_CGU_HASH = re.compile(r"\.[0-9a-f]{1,16}-cgu\.")  # rustc writes it without its leading zeros
_V0_DISAMBIGUATOR = re.compile(r"C(s[0-9A-Za-z]*_)")

#: what one build with the profile said of its functions (``pgo-view-raw-counts=text`` and the profile warnings)
#: read anywhere in a line: LLVM writes its dumps to rustc's stderr from several codegen threads, a word at a time,
#: so a dump's words, other dumps' and a diagnostic (rendered by cargo, or a JSON line cargo could not read) mix
_WARNED = re.compile(
    r"(?P<cgu>[^\s:\"]+): (?P<what>no profile data available for function|function control flow change "
    r"detected \(hash mismatch\)) (?P<symbol>[^\s\"]+) Hash = (?P<hash>\d+)"
)
_MISSING_WHAT = "no profile data available for function"

#: the LLVM option that makes LLVM dump each function that read its record: the functions kept
VIEW_FLAG = "-Cllvm-args=-pgo-view-raw-counts=text"


@dataclass(frozen=True)
class Record:
    """A function record of a profile: its name (``<cgu>;<symbol>`` for a local function), CFG hash and counters
    added up."""

    name: str
    cfg_hash: int
    count: int


@dataclass(frozen=True)
class Function:
    """A function of the build LLVM found no record of (or a record of another CFG hash for): its codegen unit,
    symbol and CFG hash."""

    cgu: str
    symbol: str
    cfg_hash: int

    def record_name(self, *, local: bool) -> str:
        """Its record's name: a local function's is prefixed by its codegen unit."""
        return f"{self.cgu};{self.symbol}" if local else self.symbol


@dataclass(frozen=True)
class BuildFunctions:
    """What one build with a profile said of its functions."""

    read: frozenset[tuple[str, int]]  # (record name, CFG hash) of each function that read its record
    missing: tuple[Function, ...]  # no record of its name
    mismatched: tuple[Function, ...]  # a record of its name with another CFG hash


def parse_build(log_text: str, records: Iterable[tuple[str, int]] = ()) -> BuildFunctions:
    """The functions a build's log tells of: its warnings, and which of ``records`` (name, CFG hash) it read. A
    record is read when its symbol is in the log (LLVM's dump of the function, ``-pgo-view-raw-counts=text``) and
    no warning names it. The dump's words come one write at a time from several threads, so a symbol is looked for
    as a word's end or start, whatever another thread wrote before or after it, not as a line."""
    missing: dict[Function, None] = {}
    mismatched: dict[Function, None] = {}
    for m in _WARNED.finditer(log_text):
        function = Function(m.group("cgu"), m.group("symbol"), int(m.group("hash")))
        (missing if m.group("what") == _MISSING_WHAT else mismatched)[function] = None
    wanted: dict[str, list[tuple[str, int]]] = {}  # a local function's copies in several units: one symbol
    for name, cfg_hash in records:
        wanted.setdefault(name.rpartition(";")[2], []).append((name, cfg_hash))
    warned = set(_present((*missing, *mismatched)))  # the names of the records a warning says were not read
    found = _symbols_in(log_text, set(wanted)) if wanted else set()
    read = frozenset(record for symbol in found for record in wanted[symbol] if record[0] not in warned)
    return BuildFunctions(read, tuple(missing), tuple(mismatched))


_MANGLED = re.compile(r"_ZN|_R")


def _symbols_in(text: str, wanted: set[str]) -> set[str]:
    """The ``wanted`` symbols that are in ``text``: a word from where a mangled name starts in it (``_ZN``, ``_R``),
    the symbol itself or a symbol followed by what another thread wrote."""
    ordered = sorted(wanted)
    found: set[str] = set()
    for word in text.split():
        start = _MANGLED.search(word)
        if start is None:
            continue
        rest = word[start.start() :]
        if rest in wanted:
            found.add(rest)
            continue
        before = bisect.bisect_right(ordered, rest) - 1
        if before >= 0 and rest.startswith(ordered[before]):
            found.add(ordered[before])
    return found


def symbol_key(name: str) -> str:
    """A record's or symbol's name without the hashes cargo's metadata puts in it: the codegen unit's crate hash,
    the legacy symbol hash, a v0 symbol's crate disambiguators."""
    cgu, semicolon, symbol = name.rpartition(";")
    symbol = _LEGACY_HASH.sub("E", symbol)
    if symbol.startswith("_R"):
        symbol = _V0_DISAMBIGUATOR.sub("C", symbol)
    return _CGU_HASH.sub("-cgu.", cgu) + semicolon + symbol


@dataclass(frozen=True)
class CarryPlan:
    """The Rust records of a profile matched to a build's functions (:func:`plan`, :func:`settle`)."""

    renames: dict[str, str]  # record name: this build's name for it
    kept: tuple[Record, ...]  # read under their own name
    rekeyed: tuple[Record, ...]
    edited: tuple[Record, ...]  # the function is there with another CFG hash
    ambiguous: tuple[Record, ...]  # as many candidates as functions, not told apart by the hashes
    gone: tuple[Record, ...]
    new: tuple[Function, ...]  # this build's functions with no record
    #: records left out of the profile written again: a function of their very name has another CFG hash
    drop: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    #: records no warning named, in a build that did not say which records it read: kept, or gone
    unsettled: tuple[Record, ...] = ()
    #: records of C (clang's, judged by its own warnings) and of unmangled functions: used as they are
    other: tuple[Record, ...] = ()

    @property
    def changes(self) -> bool:
        """Whether the profile must be written again for this build (renamed records, edited ones dropped)."""
        return bool(self.renames or self.drop)


def is_rust(name: str) -> bool:
    """Whether a record is of a mangled Rust symbol (legacy ``_ZN…E`` or v0 ``_R…``), whose name cargo's hashes
    change; C functions and unmangled ones keep their names."""
    symbol = name.rpartition(";")[2]
    return symbol.startswith(("_ZN", "_R"))


def _present(functions: Iterable[Function]) -> dict[str, set[int]]:
    """The record names the build's functions would have (local and global forms), with their CFG hashes."""
    present: dict[str, set[int]] = {}
    for f in functions:
        for name in (f.record_name(local=True), f.symbol):
            present.setdefault(name, set()).add(f.cfg_hash)
    return present


def plan(records: Sequence[Record], build: BuildFunctions) -> CarryPlan:
    """Each Rust record matched to the build's functions (module docstring). The never-run records (count 0) are
    re-keyed as the others, so that partial training finds them; among them, records alike are interchangeable.
    Without the build's dumps (``build.read`` empty) a record no warning names is unsettled: kept or gone."""
    read = build.read
    rust = [r for r in records if is_rust(r.name)]
    present = _present((*build.missing, *build.mismatched))
    kept = [r for r in rust if (r.name, r.cfg_hash) in read]
    edited_by_name = [
        r for r in rust if (r.name, r.cfg_hash) not in read and present.get(r.name, {r.cfg_hash}) - {r.cfg_hash}
    ]
    settled = {id(r) for r in (*kept, *edited_by_name)}
    olds: dict[tuple[str, int], list[Record]] = {}
    for record in rust:
        if id(record) not in settled:
            olds.setdefault((symbol_key(record.name), record.cfg_hash), []).append(record)
    renames, rekeyed, ambiguous, unmatched, unplaced = _rekey(olds, build.missing, kept)
    # then a local function's record in another codegen unit of its crate (an edit renumbers the units)
    matched = {id(r) for r in (*kept, *rekeyed, *ambiguous)}
    again: dict[tuple[str, int], list[Record]] = {}
    for group in olds.values():
        for record in group:
            if id(record) not in matched and ";" in record.name:
                again.setdefault((_crate_key(record.name), record.cfg_hash), []).append(record)
    more = _rekey(again, unmatched, kept, _crate_key)
    renames.update(more[0])
    rekeyed += more[1]
    ambiguous += more[2]
    unmatched = [*more[3], *more[4], *unplaced]
    placed = {id(r) for r in (*kept, *edited_by_name, *rekeyed, *ambiguous)}
    rest = [r for r in rust if id(r) not in placed]
    edited: list[Record] = list(edited_by_name)
    gone: list[Record] = []
    unsettled: list[Record] = []
    if read:
        changed = {symbol_key(name) for name in present}
        for record in rest:
            (edited if symbol_key(record.name) in changed else gone).append(record)
    else:
        unsettled = rest
    return CarryPlan(
        renames=renames,
        kept=tuple(kept),
        rekeyed=tuple(rekeyed),
        edited=tuple(edited),
        ambiguous=tuple(ambiguous),
        gone=tuple(gone),
        new=tuple(unmatched),
        drop=frozenset((r.name, r.cfg_hash) for r in edited_by_name),
        unsettled=tuple(unsettled),
        other=tuple(r for r in records if not is_rust(r.name)),
    )


#: a codegen unit's number (``-cgu.15;``): an edit elsewhere in a crate renumbers its units
_CGU_NUMBER = re.compile(r"-cgu\.\d+;")


def _crate_key(name: str) -> str:
    """:func:`symbol_key` without the codegen unit's number: a local function matched within its crate."""
    return _CGU_NUMBER.sub("-cgu;", symbol_key(name))


def _rekey(
    olds: dict[tuple[str, int], list[Record]],
    missing: Sequence[Function],
    kept: list[Record],
    key_of: Callable[[str], str] = symbol_key,
) -> tuple[dict[str, str], list[Record], list[Record], list[Function], list[Function]]:
    """The records (grouped by ``key_of`` their name and their CFG hash) matched to the functions without a record:
    the renames, the records re-keyed, the ambiguous ones, the functions no record matches and those of ambiguous
    groups. A never-run record found under its own name is appended to ``kept``."""
    news: dict[tuple[str, int], list[tuple[Function, bool]]] = {}
    unmatched: list[Function] = []
    for function in missing:
        local = (key_of(function.record_name(local=True)), function.cfg_hash)
        plain = (key_of(function.symbol), function.cfg_hash)
        key, is_local = (local, True) if local in olds else (plain, False)
        if key in olds:
            news.setdefault(key, []).append((function, is_local))
        else:
            unmatched.append(function)
    renames: dict[str, str] = {}
    rekeyed: list[Record] = []
    ambiguous: list[Record] = []
    unplaced: list[Function] = []
    for key, candidates in olds.items():
        functions = news.get(key, [])
        if not functions:
            continue
        alike = len({r.count for r in candidates}) == 1 and candidates[0].count == 0
        if len(candidates) != len(functions) or (len(candidates) > 1 and not alike):
            ambiguous.extend(candidates)
            unplaced.extend(function for function, _ in functions)
            continue
        for record, name in _pairs(candidates, [f.record_name(local=local) for f, local in functions]):
            if name == record.name:  # a never-run record under its own name: partial training left it out
                kept.append(record)
            else:
                renames[record.name] = name
                rekeyed.append(record)
    return renames, rekeyed, ambiguous, unmatched, unplaced


def settle(first: CarryPlan, log_text: str) -> CarryPlan:
    """``first`` (the plan of the build with the profile as given) settled by the log of the build with the profile
    written again, in which LLVM dumped each function that read its record (``-pgo-view-raw-counts``): each record
    kept, re-keyed, edited, ambiguous or gone. A never-run record is not read under partial training: it keeps its
    first verdict."""
    expected = [
        (first.renames.get(r.name, r.name), r.cfg_hash)
        for r in (*first.kept, *first.rekeyed, *first.unsettled, *first.gone)
    ]
    build = parse_build(log_text, expected)
    read = build.read
    changed = {symbol_key(name) for name in _present((*build.missing, *build.mismatched))}
    fixed = {id(r) for r in (*first.edited, *first.ambiguous)}
    kept: list[Record] = []
    rekeyed: list[Record] = []
    edited: list[Record] = list(first.edited)
    gone: list[Record] = []
    for record in (*first.kept, *first.rekeyed, *first.unsettled, *first.gone):
        if id(record) in fixed:
            continue
        renamed = record.name in first.renames
        if (first.renames.get(record.name, record.name), record.cfg_hash) in read or record.count == 0:
            (rekeyed if renamed else kept).append(record)  # read, or never run: left out by partial training
        else:
            (edited if symbol_key(record.name) in changed else gone).append(record)
    return replace(
        first,
        kept=tuple(kept),
        rekeyed=tuple(rekeyed),
        edited=tuple(edited),
        gone=tuple(gone),
        unsettled=(),
    )


def _pairs(records: list[Record], names: list[str]) -> list[tuple[Record, str]]:
    """Records matched to as many names (interchangeable records, or one of each): each record whose own name is
    among the names keeps it, the others take the rest in order."""
    free = [n for n in names if n not in {r.name for r in records}]
    pairs = [(r, r.name) for r in records if r.name in names]
    return pairs + list(zip([r for r in records if r.name not in names], free, strict=True))


# --- the profile written again -----------------------------------------------------------------------------------

_TARGET = re.compile(r"^(?P<name>.+):(?P<count>\d+)$")


def rewrite(text: str, renames: Mapping[str, str], drop: Iterable[tuple[str, int]]) -> str:
    """A profile's text (``llvm-profdata merge --text``) with each record in ``renames`` under its new name, the
    indirect-call targets that name it too, and the records ``drop`` names (name, CFG hash) left out."""
    dropped = set(drop)
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines) and (lines[i].startswith(("#", ":")) or not lines[i]):  # the header: flags, comments
        out.append(lines[i])
        i += 1
    record: list[str] = []
    for line in [*lines[i:], ""]:
        if line:
            record.append(line)
            continue
        if record:
            name = record[0]
            cfg_hash = int(record[2]) if len(record) > 2 and record[1] == "# Func Hash:" else None
            if (name, cfg_hash) not in dropped:
                out.append(renames.get(name, name))
                for rest in record[1:]:
                    target = _TARGET.match(rest)
                    if target and target.group("name") in renames:
                        rest = f"{renames[target.group('name')]}:{target.group('count')}"
                    out.append(rest)
                out.append("")
        record = []
    return "\n".join(out).rstrip("\n") + "\n"


# --- what survived -----------------------------------------------------------------------------------------------

_LEGACY_PATH = re.compile(r"^_ZN(?P<length>\d+)")


def crate_of(name: str) -> str:
    """The crate a record is of, as far as its name tells: its codegen unit's crate, else the first path component
    of its symbol (``_ZN9hello_pgo…``, v0 ``…C…9hello_pgo``); ``?`` for an impl of another crate's trait."""
    cgu, _, symbol = name.rpartition(";")
    if cgu:
        return cgu.split(".", 1)[0]
    if found := _LEGACY_PATH.match(symbol):
        length = int(found.group("length"))
        start = found.end()
        first = symbol[start : start + length]
        return first if first and not first.startswith(("_$", "$")) else "?"
    if symbol.startswith("_R") and (crate := re.search(r"C(?:s[0-9A-Za-z]*_)?(\d+)([A-Za-z_][A-Za-z0-9_]*)", symbol)):
        return crate.group(2)[: int(crate.group(1))]
    return "?"


def readable(name: str) -> str:
    """A record's name as a line can show it: without the codegen unit and the symbol's hashes."""
    return symbol_key(name.rpartition(";")[2])


@dataclass(frozen=True)
class Survival:
    """How much of a carried profile this build uses, by records and by count (the executed records')."""

    records: int  # the profile's records the training executed
    kept: int
    rekeyed: int
    edited: int
    ambiguous: int
    gone: int
    new_functions: int
    never_run_rekeyed: int
    total_count: int
    survived_count: int
    kept_count: int  # of the survived, under their own names: what a build that re-keys nothing would use
    ambiguous_legacy: int  # the ambiguous executed records of legacy symbols (generic instances alike)
    by_crate: dict[str, float]  # crate: share of its count that survived, in %
    lost: tuple[tuple[str, str, float], ...]  # the largest lost: (function, why, share of the total count in %)

    @property
    def share(self) -> float:
        """The share of the profile's count that survived, in %."""
        return 100.0 * self.survived_count / self.total_count if self.total_count else 100.0

    @property
    def kept_share(self) -> float:
        """The share of the profile's count kept under its own names (survival without re-keying), in %."""
        return 100.0 * self.kept_count / self.total_count if self.total_count else 100.0


def survival(carry: CarryPlan, *, largest: int = 3) -> Survival:
    """What :func:`plan` kept of the profile, by the executed records (a never-run record carries no count)."""

    def executed(records: Iterable[Record]) -> list[Record]:
        return [r for r in records if r.count > 0]

    kept, rekeyed = executed((*carry.kept, *carry.unsettled)), executed(carry.rekeyed)
    lost = [(r, "edited") for r in executed(carry.edited)]
    lost += [(r, "ambiguous") for r in executed(carry.ambiguous)] + [(r, "gone") for r in executed(carry.gone)]
    total = sum(r.count for r in (*kept, *rekeyed)) + sum(r.count for r, _ in lost)
    by_crate_total: dict[str, int] = {}
    by_crate_kept: dict[str, int] = {}
    for record in (*kept, *rekeyed, *(r for r, _ in lost)):
        crate = crate_of(record.name)
        by_crate_total[crate] = by_crate_total.get(crate, 0) + record.count
    for record in (*kept, *rekeyed):
        crate = crate_of(record.name)
        by_crate_kept[crate] = by_crate_kept.get(crate, 0) + record.count
    lost.sort(key=lambda pair: -pair[0].count)
    return Survival(
        records=len(kept) + len(rekeyed) + len(lost),
        kept=len(kept),
        rekeyed=len(rekeyed),
        edited=len(executed(carry.edited)),
        ambiguous=len(executed(carry.ambiguous)),
        gone=len(executed(carry.gone)),
        new_functions=len(carry.new),
        never_run_rekeyed=len(carry.rekeyed) - len(rekeyed),
        total_count=total,
        survived_count=sum(r.count for r in (*kept, *rekeyed)),
        kept_count=sum(r.count for r in kept),
        ambiguous_legacy=sum(1 for r in executed(carry.ambiguous) if r.name.rpartition(";")[2].startswith("_ZN")),
        by_crate={
            crate: round(100.0 * by_crate_kept.get(crate, 0) / count, 2)
            for crate, count in sorted(by_crate_total.items(), key=lambda kv: -kv[1])
            if count
        },
        lost=tuple((readable(r.name), why, round(100.0 * r.count / total, 2)) for r, why in lost[:largest] if total),
    )


# --- the record, the lines and the floor -------------------------------------------------------------------------


def ours(carry: CarryPlan, crate_names: Iterable[str]) -> bool:
    """Whether any record the training executed of the crate's own (``crate_names``) was re-keyed or found edited:
    a profile of another crate has none, and is judged as it is (the missing ceiling, the crate's coverage)."""
    names = tuple(crate_names)
    return any(of_crate(r.name, names) for r in (*carry.rekeyed, *carry.edited) if r.count > 0)


def survival_line(s: Survival) -> str:
    """What the build uses of a carried profile, by records and by count, in one line."""
    crates = ", ".join(f"{crate} {share:g} %" for crate, share in list(s.by_crate.items())[:4])
    return (
        f"optimise: carried forward: {s.kept + s.rekeyed} of the profile's {s.records} executed records used "
        f"({s.kept} as they are, {s.rekeyed} re-keyed), {s.edited} edited since, {s.ambiguous} ambiguous, "
        f"{s.gone} gone; {s.new_functions} functions of this build have no record; {s.share:.1f} % of the "
        f"profile's count survived ({crates}; {s.kept_share:.1f} % without re-keying)"
    )


def lost_line(s: Survival) -> str | None:
    """The largest functions a carried profile lost, or None."""
    if not s.lost:
        return None
    line = "optimise: carried forward, lost most: " + ", ".join(
        f"{name} {share:g} % ({why})" for name, why, share in s.lost
    )
    if s.ambiguous_legacy:
        line += f" ({AMBIGUOUS_HINT})"
    return line


#: why legacy records are ambiguous, and the way out (a local function copied into several codegen units that were
#: renumbered is ambiguous whatever the mangling)
AMBIGUOUS_HINT = (
    "legacy symbol names keep a generic instance's type arguments only in their hash; with "
    "-Csymbol-mangling-version=v0 in the rustflags of the training and of this build, such instances are told apart"
)


def refuse_below_floor(s: Survival, floor: float, source: str) -> None:
    """Refuse a carried profile of which less than ``floor`` % of the count survived, naming what it lost most."""
    if s.share >= floor:
        return
    lost = "; ".join(f"{name} {share:g} % ({why})" for name, why, share in s.lost) or "nothing named"
    raise CheckFailed(
        f"the carried profile keeps {s.share:.1f} % of its count, below PGO_MIN_SURVIVAL={floor:g} % ({source}); "
        f"lost most: {lost}",
        "train again on this tree (nox -s pgo) and keep that profile, or lower PGO_MIN_SURVIVAL",
    )
