"""The records of ``<work>/report.json``, as types: one TypedDict per stage, and :class:`Report` of them all.

A stage builds its result as its record type (a misspelt key is a mypy error) and the stages after it read
the keys the type declares. Every key of a record is optional (``total=False``): a stage that failed or did
not finish records only what it had by then, with ``failed`` (why) and, while it runs, ``running``; a reader
checks ``report.failed`` or goes through ``report.require`` before it relies on the rest. Nested objects whose
keys are open (a crate's name, a section's, a statistic's) stay plain dicts.

The JSON is what the stages always wrote: these types describe it. ``report.load`` checks what it reads against
them (:func:`mismatch`): every declared key present has its declared type, and a record of a stage that succeeded
has the keys of :data:`REQUIRED`, those the stages after it, the summary and the release read without a default.
"""

from __future__ import annotations

import functools
import types
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from recipes.inputs import _kind

#: the stages of the pipeline, in order (``report.STAGES``)
PipelineStage = Literal["instrument", "train", "merge", "optimise", "test", "bolt"]
#: every name a record of report.json is kept under
StageName = Literal[
    "instrument",
    "train",
    "merge",
    "optimise",
    "test",
    "bolt",
    "plain",
    "rebuild",
    "determinism",
    "cpu_baseline",
]


class StageRecord(TypedDict, total=False):
    """What any record may say besides its result: why the stage failed, and that it has not finished."""

    failed: str
    running: bool


class Failure(TypedDict):
    """The record of a stage that failed before it had a result of its own (or has just started)."""

    failed: str
    running: NotRequired[bool]


class PhaseRecord(TypedDict):
    """One phase of a workload run (``recipes.workload.registry.PhaseResult``)."""

    name: str
    kind: str
    requests: int
    done: int
    status: dict[str, int]  # "2xx": count, ...
    seconds: float
    detail: NotRequired[str]


class RawProfileRecord(TypedDict):
    """One ``.profraw`` file the training wrote."""

    name: str
    size: int
    sha256: str


class WorkloadRun(TypedDict, total=False):
    """A run of the training workload: optimise's and bolt's ``verify``, bolt's ``train``."""

    seconds: float
    requests: int
    phases: list[PhaseRecord]
    scale: float
    workload: str
    profraw_files: int  # a training run (-Cprofile-generate)
    fdata_files: int  # a BOLT-instrumented run


class CLanguageRecord(TypedDict):
    """C or C++ of build scripts (recipes.cflags): the target's compiler when the profile reaches it, else why not."""

    compiler: list[str] | None
    version: str | None
    profiled: bool
    off: str | None


class CCrateRecord(TypedDict):
    """A package whose target build script compiled C or C++ (recipes.cflags.c_crates)."""

    crate: str
    objects: int
    compilers: list[str]
    profile_flags: bool
    functions_with_profile: NotRequired[list[str]]  # the optimised build's only
    functions_without_profile: NotRequired[list[str]]
    stale: NotRequired[list[str]]  # "file: function", as clang named them
    missing: NotRequired[list[str]]


class CCodeRecord(TypedDict):
    """The C and C++ of build scripts in a build: PGO_C's decision, each language, each crate that compiles C."""

    setting: str  # "auto", "on", "off"
    languages: dict[str, CLanguageRecord]
    crates: list[CCrateRecord]


class InstrumentResult(StageRecord, total=False):
    seconds: float
    binary: str
    binary_sha256: str
    crate_metadata: dict[str, str]  # "<crate> (<type>)": its -C metadata
    cargo_command: list[str]
    target: str
    rustflags_var: str
    rustflags: str
    carried_rustflags_from: list[str]
    rustc: str
    zigbuild: dict[str, str]  # cargo_zigbuild, zig: their versions
    c_code: CCodeRecord


class TrainResult(WorkloadRun, StageRecord, total=False):
    """The training run (``run_workload`` returns one; the train stage adds ``profraw``)."""

    profraw: list[RawProfileRecord]


class MergeResult(StageRecord, total=False):
    profile: str
    profraw_merged: int
    profraw_dropped: dict[str, str]  # file: llvm-profdata's reason
    min_functions: int
    min_functions_set: int
    min_functions_source: str
    min_functions_total: int | None
    llvm_profdata: str
    llvm_profdata_version: str
    profile_sha256: str
    executed_functions: int
    total_functions: int
    seconds: float


class OptimiseResult(StageRecord, total=False):
    store_path: str
    profile_sha256: str
    profile_functions: int
    missing_profile_functions: int
    missing_by_crate: dict[str, int]
    stale_profile_warnings: int
    main_crate_functions_with_profile: int
    main_crate_functions_without_profile: int
    functions_with_profile_in_binary: int
    coverage_from_symbols: bool
    crate_metadata: dict[str, str]
    cargo_command: list[str]
    target: str
    rustflags: str
    built_binary: str
    binary: str | None  # None: it failed its checks and no copy could be kept in rejected/
    binary_sha256: str
    max_glibc: str | None
    libc: str
    emit_relocs: bool
    target_cpu: str | None
    zigbuild: dict[str, str]
    c_code: CCodeRecord
    verify: WorkloadRun
    seconds: float


class SuiteRecord(TypedDict):
    """One test binary of the test stage."""

    name: str
    passed: int
    failed: int
    ignored: int
    finished: bool


class TestResult(TypedDict, total=False):
    """The test stage's record. Its ``failed`` is the number of failed tests, or (a string) why the stage
    failed before the suite ran; so it does not extend :class:`StageRecord`."""

    failed: int | str
    running: bool
    seconds: float
    store_path: str
    profile_sha256: str
    target_dir: str
    cargo_command: list[str]
    target: str
    rustflags: str
    exit_code: int
    passed: int
    ignored: int
    failed_tests: list[str]
    suites: list[SuiteRecord]
    missing_profile_functions: int
    stale_profile_warnings: int
    log: str
    failed_check: str
    optimised_binary_kept: str | None


class DynoStats(TypedDict):
    before: dict[str, int]  # llvm-bolt's -dyno-stats: name: value
    after: dict[str, int]


class BoltResult(StageRecord, total=False):
    input: str
    input_sha256: str
    relocations: dict[str, int]  # section: relocations
    llvm_bolt: str
    merge_fdata: str
    llvm_bolt_version: str
    bolt_args: list[str]
    trained_here: bool
    train: WorkloadRun
    longest_function_name: int  # characters, as BOLT writes it (a local symbol with its /N)
    instrumentation_skipped_functions: int  # left out of BOLT's instrumentation: names its runtime cannot write
    instrumentation_skipped: list[str]  # their symbols (the first 50, each cut at 120 characters)
    bolt_instrumented_sha256: str  # the BOLT-instrumented binary that wrote the profile (trained here)
    profile_trained_on: str  # the sha256 of the binary the profile was recorded on (input_sha256), or who vouched
    profile_branches: int
    profile_executed_branches: int
    profile_functions: int
    profile_main_crate_functions: int
    store_path: str
    profile_sha256: str
    functions_with_profile: int
    total_functions: int
    stale_profile_functions: int
    profile_ignored_objects: int
    profiled_functions_not_optimized: int
    dyno_stats: DynoStats
    binary_sha256: str
    max_glibc: str | None
    libc: str
    input_bytes: int
    binary_bytes: int
    binary: str | None  # None: it failed its checks and no copy could be kept in rejected/
    verify: WorkloadRun
    seconds: float


class PlainResult(StageRecord, total=False):
    binary: str
    binary_sha256: str
    target: str
    cargo_command: list[str]
    rustflags: str
    seconds: float


class DiffoscopeRecord(TypedDict):
    report: str | None
    summary: list[str]


class RebuildResult(StageRecord, total=False):
    tag: str
    commit: str
    binary: str
    binary_sha256: str
    store_path: str
    lines: list[str]
    match: bool
    bolted_binary: str
    bolted_binary_sha256: str | None
    diff: str
    diffoscope: DiffoscopeRecord


class DeterminismResult(StageRecord, total=False):
    commit: str
    profile_sha256: str
    binaries: list[str]
    binary_sha256: list[str]
    identical: bool
    diff: str
    diffoscope: DiffoscopeRecord


class BuildInfoRecord(TypedDict):
    target: str
    target_features: list[str]


class CommandCheck(TypedDict):
    args: list[str]
    exit: str


class ServerCheck(TypedDict):
    requests: list[str]
    sigterm: str
    config: str


class CpuBaselineResult(StageRecord, total=False):
    binary: str
    qemu: str  # qemu-user's version line
    cpu: str  # the baseline model: qemu64,-pni,… or cortex-a53
    arch: str  # the binary's architecture (x86_64, aarch64): which baseline
    qemu_program: str  # qemu-x86_64, qemu-aarch64
    controls: dict[str, dict[str, str]]  # program: {"baseline": ..., "max": ...}
    command: CommandCheck
    build_info: BuildInfoRecord
    rustc_default_features: list[str]
    server: ServerCheck
    binary_sha256: str


class Report(TypedDict, total=False):
    """report.json, its ``schema`` aside: the record of each stage that ran."""

    instrument: InstrumentResult
    train: TrainResult
    merge: MergeResult
    optimise: OptimiseResult
    test: TestResult
    bolt: BoltResult
    plain: PlainResult
    rebuild: RebuildResult
    determinism: DeterminismResult
    cpu_baseline: CpuBaselineResult


#: the keys a record has when its stage succeeded (a failed or running record has ``failed`` and what it had by
#: then): what the stages after it (``report.require``), the summary and the release read without a default
REQUIRED: dict[type, tuple[str, ...]] = {
    WorkloadRun: ("seconds", "requests", "phases"),
    InstrumentResult: ("seconds", "binary"),
    TrainResult: ("seconds", "requests", "phases", "profraw"),
    MergeResult: ("seconds", "profile", "executed_functions", "total_functions", "min_functions", "profraw_merged"),
    OptimiseResult: (
        "store_path",
        "binary",
        "binary_sha256",
        "rustflags",
        "crate_metadata",
        "missing_profile_functions",
        "stale_profile_warnings",
        "main_crate_functions_with_profile",
        "main_crate_functions_without_profile",
        "max_glibc",
    ),
    TestResult: ("seconds", "passed", "failed", "ignored"),
    BoltResult: (
        "seconds",
        "store_path",
        "bolt_args",
        "dyno_stats",
        "functions_with_profile",
        "total_functions",
        "profile_main_crate_functions",
        "profile_branches",
        "input_bytes",
        "binary_bytes",
        "binary",
        "binary_sha256",
    ),
}

_NAMES: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _name(declared: Any) -> str:
    """What a value of type ``declared`` is, for a message: ``a string or null``."""
    origin = get_origin(declared)
    if origin in (Union, types.UnionType):
        return " or ".join(_name(option) for option in get_args(declared))
    if origin is list:
        return "a list"
    if origin is dict or is_typeddict(declared):
        return "an object"
    if origin is Literal:
        return " or ".join(repr(option) for option in get_args(declared))
    return _NAMES[declared]


def mismatch(value: object, declared: Any, where: str, *, complete: bool) -> str | None:
    """Where and how ``value`` (as read from JSON) does not fit the type ``declared``, or None when it does:
    ``'verify.seconds' is missing``, ``'binary' is the number 3, not a string or null``. Keys a record type does
    not declare are left alone; ``complete`` asks for the :data:`REQUIRED` keys (a record of a stage that
    succeeded)."""
    if declared in _SCALARS:
        fits = isinstance(value, _SCALARS[declared]) and (declared is bool or not isinstance(value, bool))
        return None if fits else _problem(value, declared, where)
    origin = get_origin(declared)
    if is_typeddict(declared):
        if not isinstance(value, dict):
            return _problem(value, declared, where)
        needed = _required_keys(declared) | (set(REQUIRED.get(declared, ())) if complete else set())
        missing = sorted(needed - set(value))
        if missing:
            return f"{_at(where, missing[0])!r} is missing"
        hints = _hints(declared)
        for key, item in value.items():
            if key in hints and (found := mismatch(item, hints[key], _at(where, key), complete=complete)):
                return found
        return None
    if origin in (Union, types.UnionType):
        options = get_args(declared)
        if any(mismatch(value, option, where, complete=complete) is None for option in options):
            return None
        inner = [option for option in options if option is not type(None)]
        if len(inner) == 1 and _fits_shape(value, inner[0]):  # a list or object of the right shape: what is inside
            return mismatch(value, inner[0], where, complete=complete)
        return _problem(value, declared, where)
    if origin is list:
        if not isinstance(value, list):
            return _problem(value, declared, where)
        (item_type,) = get_args(declared)
        for i, item in enumerate(value):
            if found := mismatch(item, item_type, f"{where}[{i}]", complete=complete):
                return found
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return _problem(value, declared, where)
        _, item_type = get_args(declared)
        for key, item in value.items():
            if found := mismatch(item, item_type, _at(where, key), complete=complete):
                return found
        return None
    if origin is Literal:
        return None if value in get_args(declared) else _problem(value, declared, where)
    raise TypeError(f"{where}: no check of the type {declared}")  # a type results.py does not use


#: the scalar types of the records, and what a value of each may be (JSON writes a whole float as it likes)
_SCALARS: dict[Any, type | tuple[type, ...]] = {
    str: str,
    int: int,
    float: (int, float),
    bool: bool,
    type(None): type(None),
}


def _problem(value: object, declared: Any, where: str) -> str:
    return f"{where!r} is {_kind(value)}, not {_name(declared)}"


@functools.cache
def _hints(declared: Any) -> dict[str, Any]:
    """The keys a record type declares, with their types (evaluated once: the annotations are strings)."""
    return get_type_hints(declared)


@functools.cache
def _required_keys(declared: Any) -> frozenset[str]:
    """The keys a record type requires. Not ``__required_keys__``: with string annotations (``from __future__
    import annotations``) Python 3.11 counts a ``NotRequired[...]`` key as required there."""
    hints = get_type_hints(declared, include_extras=True)
    if declared.__total__:
        return frozenset(key for key, hint in hints.items() if get_origin(hint) is not NotRequired)
    return frozenset(key for key, hint in hints.items() if get_origin(hint) is Required)


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _fits_shape(value: object, declared: Any) -> bool:
    origin = get_origin(declared)
    if origin is list:
        return isinstance(value, list)
    return isinstance(value, dict) and (origin is dict or is_typeddict(declared))
