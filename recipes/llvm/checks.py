"""The pure checks of an optimised build: facts in (its log, its profile's function names, its symbols),
a refusal out. Nothing here runs a tool, so each check is tested without cargo."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CheckFailed
from recipes.results import InstrumentResult, OptimiseResult

#: what LLVM and rustc say when they cannot use the profile file itself (it is then ignored, silently but for this)
PROFILE_FILE_TEXTS = (
    "bad magic",
    "not an ir level instrumentation profile",
    "unsupported instrumentation profile format version",
    "unsupported version",
    "malformed instrumentation profile",
    "invalid instrumentation profile",
    "profile data is corrupt",
    "file header is corrupt",
    "could not read profile",
    "error in reading profile",
    "truncated profile",
)


def profile_file_warnings(log_text: str, profile: Path) -> list[str]:
    """The build log's warnings and errors about the profile file itself: lines naming it, or giving a reason
    above (``warning: <path>: invalid instrumentation profile data (bad magic)``)."""
    said = [text for line in log_text.splitlines() if (text := line.strip()).startswith(("warning:", "error:"))]
    return [
        text
        for text in said
        if str(profile) in text
        or ("profile" in text.lower() and any(reason in text.lower() for reason in PROFILE_FILE_TEXTS))
    ]


def refuse_profile_file_warnings(log_text: str, profile: Path, log: Path) -> None:
    if warnings := profile_file_warnings(log_text, profile):
        raise CheckFailed(
            f"the compiler could not use the profile: {warnings[0]}"
            + (f" ({len(warnings)} such warnings)" if len(warnings) > 1 else ""),
            f"the binary was built without it; use a .profdata that rustc's llvm-profdata merged (see {log})",
        )


def of_crate(record: str, crate_names: Iterable[str]) -> bool:
    """Whether a symbol or a profile record is a function of one of ``crate_names``: compiled in one of its
    codegen units (``hello_pgo.9e15…-cgu.2;…``) or a path of that crate (legacy ``_ZN9hello_pgo…``, v0
    ``…C…_9hello_pgo…``)."""
    cgu, _, symbol = record.rpartition(";")
    for name in crate_names:
        if cgu and cgu.split(".")[0] == name:
            return True
        if symbol.startswith(f"_ZN{len(name)}{name}"):
            return True
        if symbol.startswith("_R") and re.search(rf"C(?:s[0-9A-Za-z]*_)?{len(name)}{re.escape(name)}", symbol):
            return True
    return False


@dataclass(frozen=True)
class Coverage:
    """How much of the build the profile covers, positively: its records found among the binary's symbols."""

    main_crate_with_profile: int
    main_crate_without_profile: int
    functions_with_profile: int  # records (any crate) whose symbol is in the binary
    symbols_known: bool  # False: the binary has no symbol table, records counted without matching


def coverage(
    records: Iterable[str],
    crate_names: Iterable[str],
    symbols: set[str] | None,
    missing_by_crate: Mapping[str, int],
) -> Coverage:
    names = tuple(crate_names)
    # a record's symbol: local functions are kept as ``<cgu>;<symbol>``
    matched = [r for r in records if symbols is None or r.rsplit(";", 1)[-1] in symbols]
    return Coverage(
        main_crate_with_profile=sum(1 for r in matched if of_crate(r, names)),
        main_crate_without_profile=sum(missing_by_crate.get(name, 0) for name in names),
        functions_with_profile=len(matched),
        symbols_known=symbols is not None,
    )


def refuse_uncovered_main_crate(found: Coverage, package: str) -> None:
    if found.main_crate_with_profile == 0:
        raise CheckFailed(
            f"the profile covers none of {package}'s functions ({found.main_crate_without_profile} compiled "
            "without profile data): it is a profile of another crate, target, feature set or cargo command",
            "train on this crate with the same PGO_TARGET, PGO_FEATURES and PGO_CARGO as this build",
        )


#: with no max_missing anywhere: at most this share of the build's functions may have no profile data
DEFAULT_MISSING_SHARE = 0.5


def refuse_mostly_missing(missing: int, found: Coverage) -> None:
    """The built-in ceiling when no PGO_MAX_MISSING is set: most functions without profile data is refused."""
    total = missing + found.functions_with_profile
    if total and missing > DEFAULT_MISSING_SHARE * total:
        raise CheckFailed(
            f"{missing} of the build's {total} functions have no profile data, more than half (the ceiling when "
            "no max_missing is set): the profile matches little of this build",
            "same cargo command, features and target as the training? to accept it, set PGO_MAX_MISSING",
        )


def refuse_other_build(
    recorded: InstrumentResult | OptimiseResult, *, cargo: Sequence[str], target: str, earlier: str, now: str
) -> None:
    """Refuse to go on from ``recorded`` (a stage's result) with another cargo command or target."""
    if recorded.cargo_command != list(cargo):
        raise CheckFailed(
            f"{earlier} was made by {' '.join(recorded.cargo_command)!r} and {now} by {' '.join(cargo)!r}",
            "both must use the same PGO_CARGO: run every stage with one",
        )
    if recorded.target != target:
        raise CheckFailed(
            f"{earlier} was for {recorded.target} and {now} for {target}",
            "use the same PGO_TARGET for every stage",
        )


def check_not_plain(pgo: Path, pgo_sha256: str, plain: Path, plain_sha256: str, records: Path) -> None:
    """Refuse a PGO binary identical to the plain build of the same command: the profile changed nothing
    (``records``: what rustc received in the PGO build, the RUSTC shim's folder)."""
    if pgo_sha256 == plain_sha256:
        raise CheckFailed(
            f"the PGO binary {pgo} is byte for byte the plain build {plain} (sha256 {pgo_sha256[:16]}…): "
            "the profile changed nothing, so the compiler did not use it",
            f"something between cargo and rustc dropped the profile (a RUSTC_WRAPPER?); what rustc received: {records}",
        )
