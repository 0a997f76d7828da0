"""The pure checks of an optimised build: facts in (its log, its profile's function names, its symbols),
a refusal out. Nothing here runs a tool, so each check is tested without cargo."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CheckFailed
from recipes.results import InstrumentResult, OptimiseResult
from recipes.toolchain.rustflags import codegen_values

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


#: LLVM's options (PGOInstrumentation.cpp) that silence the warnings of a profile-use build the checks read (a
#: stale function, "hash mismatch"; a function without profile data), each with the value that silences them
SILENCING_LLVM_OPTIONS = {
    "no-pgo-warn-mismatch": True,
    "no-pgo-warn-mismatch-comdat-weak": True,
    "pgo-warn-missing-function": False,
}
_LLVM_BOOLS = {"": True, "true": True, "1": True, "false": False, "0": False}


def _silencing_llvm_args(argv: Sequence[str]) -> list[str]:
    """The LLVM options of ``-C llvm-args`` (rustc splits each value on white space and passes LLVM them all, in
    order; LLVM takes an option's last value) left set to a value of :data:`SILENCING_LLVM_OPTIONS`."""
    last: dict[str, tuple[bool | None, str]] = {}
    for value in codegen_values(argv, "llvm-args"):
        for word in value.split():
            name, _, setting = word.lstrip("-").partition("=")
            if word.startswith("-") and name in SILENCING_LLVM_OPTIONS:
                last[name] = (_LLVM_BOOLS.get(setting.lower()), word)
    return [f"-Cllvm-args={word}" for name, (on, word) in last.items() if on is SILENCING_LLVM_OPTIONS[name]]


_LINT_LEVELS = {"-A": "allow", "--allow": "allow", "-W": "warn", "--warn": "warn", "-D": "deny", "--deny": "deny"}
_LINT_LEVELS |= {"-F": "forbid", "--forbid": "forbid", "--force-warn": "force-warn"}


def _lint_settings(argv: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(flag, value, word)`` of rustc's lint flags and ``--cap-lints`` in ``argv`` (``-A x``, ``-Ax``,
    ``--allow x``, ``--allow=x``)."""
    found = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if (arg in _LINT_LEVELS or arg == "--cap-lints") and index + 1 < len(argv):
            found.append((arg, argv[index + 1], f"{arg} {argv[index + 1]}"))
            index += 2
            continue
        if arg[:2] in ("-A", "-W", "-D", "-F") and len(arg) > 2:
            found.append((arg[:2], arg[2:], arg))
        elif (flag := arg.split("=", 1)[0]) != arg and (flag in _LINT_LEVELS or flag == "--cap-lints"):
            found.append((flag, arg.split("=", 1)[1], arg))
        index += 1
    return found


def _silencing_lint_flags(argv: Sequence[str]) -> list[str]:
    """rustc's flags that keep LLVM's warnings from the log: ``warnings`` allowed (the last level given it wins),
    or ``--cap-lints allow`` (the first ``--cap-lints`` wins; tried with rustc 1.95)."""
    settings = _lint_settings(argv)
    levels = [
        (_LINT_LEVELS[flag], word) for flag, value, word in settings if flag in _LINT_LEVELS and value == "warnings"
    ]
    caps = [(value, word) for flag, value, word in settings if flag == "--cap-lints"]
    found = [levels[-1][1]] if levels and levels[-1][0] == "allow" else []
    return found + ([caps[0][1]] if caps and caps[0][0] == "allow" else [])


def silencing_flags(argv: Sequence[str]) -> list[str]:
    """The flags among rustc's arguments ``argv`` that silence LLVM's warnings of stale functions and of functions
    without profile data, which the checks of a profile-use build read: ``-Cllvm-args=-no-pgo-warn-mismatch``,
    ``-pgo-warn-missing-function=false`` and the like, ``-A warnings``, ``--cap-lints allow``."""
    return _silencing_llvm_args(argv) + _silencing_lint_flags(argv)


def refuse_silencing_flags(flags: Sequence[str], where: str) -> None:
    """Refuse flags (``where``: the rustflags they come from, in words) that silence the profile's warnings."""
    if found := silencing_flags(flags):
        raise CheckFailed(
            f"{where} holds {' '.join(found)}, which silences LLVM's warnings of stale and unprofiled functions "
            "that the pipeline checks: a stale profile would pass unseen",
            "remove it from the rustflags for the PGO builds",
        )


def _options(argv: Sequence[str], short: str, long: str | None = None) -> list[tuple[str, str | None, str]]:
    """``(name, value or None, word)`` of rustc's ``-C``/``-Z`` options in ``argv`` (``-Cx``, ``-C x``, ``--codegen
    x``, ``--codegen=x``, each ``x`` or ``x=value``; ``_`` read as ``-`` in the name, as rustc does)."""
    found = []
    previous = ""
    for arg in argv:
        if arg.startswith(short) and len(arg) > 2:
            text = arg[2:]
        elif long is not None and arg.startswith(f"{long}="):
            text = arg.removeprefix(f"{long}=")
        elif previous in (short, long):
            text, arg = arg, f"{previous} {arg}"
        else:
            previous = arg
            continue
        name, eq, value = text.partition("=")
        found.append((name.replace("_", "-"), value if eq else None, arg))
        previous = ""
    return found


_RUSTC_OFF = {"n", "no", "off", "false"}
#: rustc's options that instrument the code they compile (a binary that ships must have none): ``-C``'s and ``-Z``'s
INSTRUMENTING_OPTIONS = {
    "-C": ("profile-generate", "instrument-coverage"),
    "-Z": ("instrument-mcount", "instrument-xray", "instrument-coverage", "profile"),
}


def instrumenting_flags(argv: Sequence[str]) -> list[str]:
    """The options among rustc's arguments ``argv`` that instrument the code (``-Zinstrument-mcount``,
    ``-Cinstrument-coverage``, ``-Cprofile-generate``, …), each as written, unless its last value turns it off."""
    last: dict[str, tuple[str | None, str]] = {}
    for short, long in (("-C", "--codegen"), ("-Z", None)):
        for name, value, word in _options(argv, short, long):
            if name in INSTRUMENTING_OPTIONS[short]:
                last[f"{short}{name}"] = (value, word)
    return [word for value, word in last.values() if value is None or value.lower() not in _RUSTC_OFF]
