"""The records of ``<work>/report.json``, as types: a frozen dataclass per pipeline stage's result, :class:`Failed`
for a record whose stage failed or has not finished, and :class:`Report` of them all.

A stage builds its result as its dataclass, and ``report.record`` writes it (:func:`as_json`: paths as strings, a
field that may be absent left out when None). ``report.load`` reads each record back checked (:func:`from_json`,
:func:`mismatch`): a record of a stage that succeeded has every field its dataclass has without a default, each of
its type (a Path is a string in the file), or the load refuses it in one line naming the key; a record whose
``failed`` is a reason is a :class:`Failed` with what it had by then (its values checked, none required). Readers
thus get the success type from ``report.require`` and read its attributes, no key missing and no default needed.
Nested objects whose keys are open (a crate's name, a section's, a statistic's) and the nested records read as
they are (a phase, a raw profile, C code, dyno-stats) stay TypedDicts and dicts. The records of the baseline-CPU
check and of the release's rebuild and determinism check are dataclasses as the stages' are.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from recipes.inputs import JSON_KEY, NOT_WRITTEN, TYPE_NAMES, kind, without_none

_Record = TypeVar("_Record", bound="StageResult | WorkloadRun | CarriedProfile")

#: the stages of the pipeline, in order (``report.STAGES``)
PipelineStage = Literal["instrument", "train", "merge", "optimise", "test", "bolt"]
#: every name a record of report.json is kept under
StageName = Literal[PipelineStage, "plain", "rebuild", "determinism", "cpu_baseline"]


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


class TestCountsRecord(TypedDict):
    """The tests shard's run of the crate's tests (recipes/stages/tests_shard.py)."""

    passed: int
    failed: int
    ignored: int
    log: str
    binary_replaced: NotRequired[str]  # the test build's binary, overwritten by the instrumented one before the run


class ShardTrainRecord(TypedDict):
    """One shard's training (recipes/workload/shards.py): its workload run and the raw profiles it wrote."""

    name: str
    workload: str | None  # the tests shard has none
    seconds: float
    requests: int
    profraw: list[RawProfileRecord]
    tests: NotRequired[TestCountsRecord]  # the tests shard's
    # a shard trained alone (``train -- --shard``), for the gather that merges it (recipes/stages/gather.py): the
    # sha256 of its workload file and of the instrumented binary, and the binary's GNU build id
    workload_sha256: NotRequired[str]
    binary_sha256: NotRequired[str]
    build_id: NotRequired[str]


class ShardRecord(TypedDict):
    """One shard of a merged profile: its own profile, what it executed, its share asked and reached."""

    name: str
    profile: str
    profile_sha256: str
    share_asked: float
    share_reached: float
    weight: int  # llvm-profdata merge --weighted-input's
    executed_functions: int
    total_functions: int
    only_this_shard: int  # functions no other shard executed
    total_count: int
    overlap_with_rest: float  # llvm-profdata overlap's edge profile overlap, in percent
    #: the tests shard's: how many of its records are functions of the binary (the other shards' records), how many
    #: are not (cfg(test) code, the harness), and the main crate's functions it executed that no other shard did
    records_matching_binary: NotRequired[int]
    records_not_matching_binary: NotRequired[int]
    main_crate_only_this_shard: NotRequired[int]


class UnexecutedRecord(TypedDict):
    """A function of the main crate the training never executed, with its code size in the instrumented binary."""

    name: str
    bytes: int


class CLanguageRecord(TypedDict):
    """C or C++ of build scripts (recipes.toolchain.cflags): the target's compiler when the profile reaches it, else
    why not."""

    compiler: list[str] | None
    version: str | None
    profiled: bool
    off: str | None
    crates: NotRequired[list[str]]  # the packages profiled (PGO_C=a,b / PGO_CXX=a); absent: every one


class CCrateRecord(TypedDict):
    """A package whose target build script compiled C or C++ (recipes.toolchain.cflags.c_crates)."""

    crate: str
    objects: int
    compilers: list[str]
    profile_flags: bool
    # the optimised build's only; each function as the profile names it: a static one `<source>;<name>`
    functions_with_profile: NotRequired[list[str]]
    functions_without_profile: NotRequired[list[str]]
    stale: NotRequired[list[str]]  # "file: function", as clang named them
    missing: NotRequired[list[str]]
    #: each language's compilers ("C", "C++", "assembly"), where cc-rs's commands are in the log (optimise)
    languages: NotRequired[dict[str, list[str]]]
    not_clang: NotRequired[list[str]]  # "object: .comment" of objects the pipeline's clang wrapper made
    chosen: NotRequired[bool]  # false: a PGO_C / PGO_CXX list leaves the package out (its C unprofiled by choice)


class CCodeRecord(TypedDict):
    """The C and C++ of build scripts in a build: PGO_C's decision, each language, each crate that compiles C."""

    setting: str  # "auto", "on", "off"
    languages: dict[str, CLanguageRecord]
    crates: list[CCrateRecord]


@dataclass(frozen=True)
class Json:
    """How a field's value is written in report.json when that is not its type's own (``Annotated[Path,
    Json(str | None)]``: a path that a failed record may have as null)."""

    declared: Any


@dataclass(frozen=True, kw_only=True)
class WorkloadRun:
    """A run of the training workload: optimise's and bolt's ``verify``, bolt's ``train``."""

    seconds: float
    requests: int
    phases: list[PhaseRecord]
    scale: float
    workload: Path
    profraw_files: int | None = None  # a training run (-Cprofile-generate)
    fdata_files: int | None = None  # a BOLT-instrumented run


@dataclass(frozen=True, kw_only=True)
class InstrumentResult:
    """The instrumented build."""

    seconds: float
    binary: Path
    binary_sha256: str
    crate_metadata: dict[str, str]  # "<crate> (<type>)": its -C metadata
    cargo_command: list[str]
    target: str
    rustflags_var: str
    rustflags: str
    carried_rustflags_from: list[str]
    rustc: str
    zigbuild: dict[str, str] | None = None  # cargo_zigbuild, zig: their versions
    c_code: CCodeRecord | None = None
    rustc_llvm: str | None = None  # the LLVM version of rustc -vV
    rustc_path: str | None = None  # the compiler cargo was given (RUSTC), resolved in the crate's directory
    rustc_source: str | None = None  # how it was chosen: "+1.94.0 in PGO_CARGO", "rust-toolchain.toml at …"


@dataclass(frozen=True, kw_only=True)
class TrainResult(WorkloadRun):
    """The training run (``run_workload``'s run, with the raw profiles it wrote)."""

    profraw: list[RawProfileRecord]
    shards: list[ShardTrainRecord] | None = None  # a sharded training's, each shard's (profraw is then empty)
    shard: str | None = None  # ``train -- --shard NAME``: the one shard this training ran
    gathered: list[str] | None = None  # ``merge -- --gather DIR…``: the work dirs its shards were trained in

    @classmethod
    def of(cls, run: WorkloadRun, profraw: list[RawProfileRecord]) -> TrainResult:
        """The train stage's record of ``run`` and the raw profiles it wrote."""
        return cls(**{spec.name: getattr(run, spec.name) for spec in dataclasses.fields(WorkloadRun)}, profraw=profraw)


class LostRecord(TypedDict):
    """A function of a carried profile this build does not use: its name without hashes, why, its share of the
    profile's count (in %)."""

    function: str
    why: str  # "edited", "ambiguous", "gone"
    share: float


class HealthRecord(TypedDict):
    """The merged profile against PGO_REFERENCE (recipes/llvm/health.py): the functions each executed, the total
    counts' ratio, and the share of the reference's count in functions this training did not run."""

    reference: str
    executed: int
    reference_executed: int
    total_count_ratio: float
    lost_functions: int
    lost_share: float
    max_lost: float
    only_reference: list[LostRecord]


@dataclass(frozen=True, kw_only=True)
class MergeResult:
    """The merged profile and the floor of executed functions it reached."""

    profile: Path
    profraw_merged: int
    profraw_dropped: dict[str, str]  # file: llvm-profdata's reason
    min_functions: int
    min_functions_set: int
    min_functions_source: str
    min_functions_total: int | None
    llvm_profdata: Path
    llvm_profdata_version: str
    profile_sha256: str
    executed_functions: int
    total_functions: int
    shards: list[ShardRecord] | None = None  # a sharded training's
    #: the main crate's functions with a record no training executed, and the largest of them by code size
    unexecuted_main_crate: int | None = None
    unexecuted_largest: list[UnexecutedRecord] | None = None
    health: HealthRecord | None = None  # with PGO_REFERENCE
    seconds: float


@dataclass(frozen=True, kw_only=True)
class CarriedProfile:
    """A given profile carried forward to this build (PGO_CARRY, recipes/llvm/carry.py): what it kept of the records
    the training executed, by count; ``profile`` is the profile written again for this build (null: used as given)."""

    builds: int  # 1: the profile fitted as it was; 2: written again, then built again
    records: int
    kept: int
    rekeyed: int
    edited: int
    ambiguous: int
    gone: int
    new_functions: int
    never_run_rekeyed: int
    survived_share: float  # of the executed records' count, in %
    kept_share: float  # of it under the records' own names: what survives without re-keying
    min_survival: float
    by_crate: dict[str, float]
    lost: list[LostRecord]
    profile: Path | None


@dataclass(frozen=True, kw_only=True)
class OptimiseResult:
    """The optimised build, checked; ``binary`` is its checked copy (in a failed record: the rejected copy, or
    null when none could be kept)."""

    store_path: Path
    profile_sha256: str
    profile_functions: int
    missing_profile_functions: int
    #: partial training (PGO_PARTIAL): the build read ``store_path``, the whole profile without its never-run
    #: records; ``whole_profile`` (in the store) is what the checks judged by. A record of before: the whole one.
    partial: bool | None = None
    whole_profile: Path | None = None
    whole_profile_sha256: str | None = None
    #: records the partial profile left out, and the build's functions compiled without profile data for that
    never_run_records: int | None = None
    never_run_functions: int | None = None
    #: a given profile carried forward (PGO_CARRY): what survived; None when the profile was trained here
    carried: CarriedProfile | None = None
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
    built_binary: Path
    binary: Annotated[Path, Json(str | None)]
    binary_sha256: str
    max_glibc: str | None
    libc: str
    emit_relocs: bool
    target_cpu: str | None
    zigbuild: dict[str, str] | None = None
    c_code: CCodeRecord | None = None
    verify: WorkloadRun | None = None
    #: the crate compiles rustc received (the RUSTC shim's records), and how many of them got the profile
    crates_compiled: int | None = None
    crates_with_profile: int | None = None
    rustc: str | None = None  # the release of rustc -vV, as the instrumented build's record has it
    rustc_llvm: str | None = None
    rustc_path: str | None = None
    rustc_source: str | None = None
    seconds: float


@dataclass(frozen=True, kw_only=True)
class TestResult:
    """The test stage's record: the suite ran (``failed`` is its count of failed tests; ``failed_check`` why the
    stage failed after it ran). A stage that failed before the suite ran has a :class:`Failed` record."""

    __test__ = False  # not a test class of pytest's

    seconds: float
    store_path: Path | None = None
    profile_sha256: str | None = None
    target_dir: Path | None = None
    cargo_command: list[str] | None = None
    target: str | None = None
    rustflags: str | None = None
    exit_code: int | None = None
    passed: int
    failed: Annotated[int, Json(int | str)]
    ignored: int
    failed_tests: list[str] | None = None
    suites: list[SuiteRecord] | None = None
    missing_profile_functions: int | None = None
    stale_profile_warnings: int | None = None
    log: Path | None = None
    failed_check: str | None = None
    optimised_binary_kept: Path | None = None


@dataclass(frozen=True, kw_only=True)
class BoltResult:
    """The BOLTed binary, checked; ``binary`` is its checked copy (as :class:`OptimiseResult`'s)."""

    input: Path
    input_sha256: str
    relocations: dict[str, int]  # section: relocations
    llvm_bolt: Path
    merge_fdata: Path
    llvm_bolt_version: str
    bolt_args: list[str]
    longest_function_name: int | None = None  # characters, as BOLT writes it (a local symbol with its /N)
    instrumentation_skipped_functions: int | None = None  # left out of BOLT's instrumentation: names too long
    instrumentation_skipped: list[str] | None = None  # their symbols (the first 50, each cut at 120 characters)
    train: WorkloadRun | None = None  # trained here: the BOLT-instrumented binary's run
    trained_here: bool
    profile_branches: int
    profile_executed_branches: int
    profile_functions: int
    profile_main_crate_functions: int
    bolt_instrumented_sha256: str | None = None  # the BOLT-instrumented binary that wrote the profile (trained here)
    profile_trained_on: str | None = None  # the sha256 of the binary the profile was recorded on, or who vouched
    store_path: Path
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
    binary: Annotated[Path, Json(str | None)]
    verify: WorkloadRun
    seconds: float


@dataclass(frozen=True, kw_only=True)
class PlainResult:
    """The plain build (no profile) ``nox -s plain`` and bench record."""

    binary: Path
    binary_sha256: str
    target: str
    cargo_command: list[str]
    rustflags: str
    seconds: float
    c_code: CCodeRecord | None = None  # the C and C++ of its build scripts: each crate's compilers


@dataclass(frozen=True)
class Failed:
    """The record of a stage that failed (``failed``: why) or has not finished (``running``); ``partial``: what it
    had by then, as written (its values checked to be of their declared types, none required)."""

    reason: str
    running: bool = False
    partial: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {**self.partial, "failed": self.reason} | ({"running": True} if self.running else {})


class SuiteRecord(TypedDict):
    """One test binary of the test stage."""

    name: str
    passed: int
    failed: int
    ignored: int
    finished: bool


class DynoStats(TypedDict):
    before: dict[str, int]  # llvm-bolt's -dyno-stats: name: value
    after: dict[str, int]


class DiffoscopeRecord(TypedDict):
    report: str | None
    summary: list[str]


@dataclass(frozen=True, kw_only=True)
class RebuildResult:
    """A rebuild of one target of a release (``nox -s rebuild``): a line per file, whether all match; where the
    first differing binary differs (``diff``, diffoscope's summary) when one does."""

    tag: str
    commit: str
    binary: Path
    binary_sha256: str
    store_path: Path
    lines: list[str]
    match: bool
    bolted_binary: Path | None = None
    bolted_binary_sha256: str | None = None
    diff: str | None = None
    diffoscope: DiffoscopeRecord | None = None


@dataclass(frozen=True, kw_only=True)
class DeterminismResult:
    """Two builds of HEAD from one profile in two work dirs (``nox -s determinism``): identical, or where they
    differ."""

    commit: str
    profile_sha256: str
    binaries: list[str]
    binary_sha256: list[str]
    identical: bool
    diff: str | None = None
    diffoscope: DiffoscopeRecord | None = None


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


@dataclass(frozen=True, kw_only=True)
class CpuBaselineResult:
    """The baseline-CPU check of one binary (``nox -s cpu-baseline`` records it; the release checks its two
    binaries so): a server's check, or a run with the arguments given (``command``)."""

    binary: Path
    qemu: str  # qemu-user's version line
    cpu: str  # the baseline model: qemu64,-pni,… or cortex-a53
    arch: str | None = None  # the binary's architecture (x86_64, aarch64): which baseline (not in older records)
    qemu_program: str | None = None  # qemu-x86_64, qemu-aarch64 (not in older records)
    controls: dict[str, dict[str, str]]  # program: {"baseline": ..., "max": ...}
    command: CommandCheck | None = None
    build_info: BuildInfoRecord | None = None
    rustc_default_features: list[str] | None = None
    server: ServerCheck | None = None
    binary_sha256: str | None = None  # the session's record (the binary it checked, as it was)


#: the record of a stage that succeeded (a dataclass)
StageResult = (
    InstrumentResult
    | TrainResult
    | MergeResult
    | OptimiseResult
    | TestResult
    | BoltResult
    | PlainResult
    | CpuBaselineResult
    | RebuildResult
    | DeterminismResult
)


@dataclass(frozen=True)
class Report:
    """report.json, its ``schema`` aside: the record of each stage that ran (None: no record)."""

    instrument: InstrumentResult | Failed | None = None
    train: TrainResult | Failed | None = None
    merge: MergeResult | Failed | None = None
    optimise: OptimiseResult | Failed | None = None
    test: TestResult | Failed | None = None
    bolt: BoltResult | Failed | None = None
    plain: PlainResult | Failed | None = None
    rebuild: RebuildResult | Failed | None = None
    determinism: DeterminismResult | Failed | None = None
    cpu_baseline: CpuBaselineResult | Failed | None = None

    def stage(self, name: PipelineStage | Literal["plain"]) -> StageResult | Failed | None:
        """The record of the pipeline stage (or plain build) ``name``."""
        record: StageResult | Failed | None = getattr(self, name)
        return record


#: the type of the record of each stage that succeeded (its field's in :class:`Report`); a record whose ``failed``
#: is a reason is a :class:`Failed`
STAGE_TYPES: dict[str, type[StageResult]] = {
    name: next(option for option in get_args(hint) if option not in (Failed, type(None)))
    for name, hint in get_type_hints(Report).items()
}
#: what any record may say besides its result: why the stage failed, and that it has not finished
STATUS: dict[str, Any] = {"failed": str, "running": bool}


class Unfit(ValueError):
    """A record that does not fit its type: its one line (``'binary' is missing``) is the message."""


def _name(declared: Any) -> str:
    """What a value of type ``declared`` is, for a message: ``a string or null``."""
    origin = get_origin(declared)
    if origin in (Union, types.UnionType):
        return " or ".join(_name(option) for option in get_args(declared))
    if (container := _container(declared)) is not None:
        return "a list" if container is list else "an object"
    if origin is Literal:
        return " or ".join(repr(option) for option in get_args(declared))
    return TYPE_NAMES[declared]


def mismatch(value: Any, declared: Any, where: str, *, complete: bool) -> str | None:
    """Where and how ``value`` (as read from JSON) does not fit the type ``declared``, or None when it does:
    ``'verify.seconds' is missing``, ``'binary' is the number 3, not a string or null``. Keys a record type does
    not declare are left alone; ``complete`` asks for the required keys (a record of a stage that succeeded: the
    fields of its dataclass without a default)."""
    if declared in _SCALARS:
        fits = isinstance(value, _SCALARS[declared]) and (declared is bool or not isinstance(value, bool))
        return None if fits else _problem(value, declared, where)
    origin = get_origin(declared)
    if origin in (Union, types.UnionType):
        options = get_args(declared)
        if any(mismatch(value, option, where, complete=complete) is None for option in options):
            return None
        inner = without_none(declared)
        if inner is not declared and isinstance(value, _container(inner) or ()):  # a list or object: what is inside
            return mismatch(value, inner, where, complete=complete)
        return _problem(value, declared, where)
    if origin is Literal:
        return None if value in get_args(declared) else _problem(value, declared, where)
    container = _container(declared)
    if container is None:
        raise TypeError(f"{where}: no check of the type {declared}")  # a type results.py does not use
    if not isinstance(value, container):
        return _problem(value, declared, where)
    keyed = value.items() if isinstance(value, dict) else ((f"[{i}]", item) for i, item in enumerate(value))
    if origin in (list, dict):  # each of a list's items, a dict's values: of its last type argument
        items = [
            (get_args(declared)[-1], item, _at(where, key) if origin is dict else where + key) for key, item in keyed
        ]
    else:  # a record: a TypedDict, or a dataclass
        needed = _required_keys(declared) if is_typeddict(declared) or complete else frozenset()
        missing = sorted(needed - set(value))
        if missing:
            return f"{_at(where, missing[0])!r} is missing"
        hints = _hints(declared)
        items = [(hints[key], item, _at(where, key)) for key, item in keyed if key in hints]
    return next(filter(None, (mismatch(item, hint, at, complete=complete) for hint, item, at in items)), None)


def from_json(declared: type[_Record], value: dict[str, Any], where: str = "") -> _Record:
    """The record of a stage that succeeded (a dataclass of this module), from its JSON object: checked whole
    (:func:`mismatch`, its required keys asked for), its paths made Paths. Raises :class:`Unfit` with the one line
    of what does not fit: a missing key, a value of another type, a null where the stage always has a value."""
    problem = mismatch(value, declared, where, complete=True)
    if problem is not None:
        raise Unfit(problem)
    return _build(declared, value, where)


def failed_from_json(declared: type[StageResult], value: dict[str, Any], where: str = "") -> Failed:
    """A record whose ``failed`` is a reason: the values it has checked to be of their stage's types, none
    required (:class:`Unfit` when one is not)."""
    problem = mismatch(value, declared, where, complete=False)
    if problem is not None:
        raise Unfit(problem)
    partial = {key: item for key, item in value.items() if key not in STATUS}
    return Failed(str(value["failed"]), bool(value.get("running")), partial)


def json_of(value: Any) -> Any:
    """The one writer of the project's JSON records (report.json's stage records, a release's manifest): a
    dataclass is an object of its fields in order, each under its :data:`JSON_KEY` or its name, a None of a field
    whose default is None left out (a None of a field without default is null), a :data:`NOT_WRITTEN` field
    never; a mapping an object, a tuple or a list an array, a path its string; anything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for spec in dataclasses.fields(value):
            item = getattr(value, spec.name)
            if spec.metadata.get(NOT_WRITTEN) or (item is None and spec.default is None):
                continue
            out[spec.metadata.get(JSON_KEY, spec.name)] = json_of(item)
        return out
    if isinstance(value, Mapping):
        return {key: json_of(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [json_of(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def as_json(record: StageResult | WorkloadRun) -> dict[str, Any]:
    """A record as report.json has it (:func:`json_of`): its fields in order, paths as strings, a None of a field
    that may be absent left out (a None of a field without default is null)."""
    return dict(json_of(record))


#: the nested records that are dataclasses (a stage's record holds them), read as their dataclass
_NESTED: tuple[type, ...] = (WorkloadRun, CarriedProfile)


def _build(declared: type[_Record], value: dict[str, Any], where: str) -> _Record:
    """The dataclass ``declared`` of ``value``, which fits it (:func:`mismatch`)."""
    hints = get_type_hints(declared).items()
    return declared(**{name: _field(value[name], hint, _at(where, name)) for name, hint in hints if name in value})


def _field(item: Any, hint: Any, where: str) -> Any:
    """A field's value as written, made its type ``hint``: a path a Path, the nested record its dataclass."""
    target = without_none(hint)
    if item is None and target is hint:
        raise Unfit(_problem(item, _as_written(target), where))  # a null only a failed record may have
    if item is None or target not in (Path, *_NESTED):
        return item
    return Path(item) if target is Path else _build(target, item, where)


#: the scalar types of the records, and what a value of each may be (JSON writes a whole float as it likes)
_SCALARS: dict[Any, type | tuple[type, ...]] = {
    scalar: (int, float) if scalar is float else scalar for scalar in TYPE_NAMES
}


def _problem(value: object, declared: Any, where: str) -> str:
    return f"{where!r} is {kind(value)}, not {_name(declared)}"


@functools.cache
def _hints(declared: Any) -> dict[str, Any]:
    """The keys a record type declares, with the type of each as JSON has it (evaluated once: the annotations are
    strings): a dataclass's Path is a string, its ``Annotated[..., Json(t)]`` is ``t``, and a stage's record may
    say why it failed and that it is running (:data:`STATUS`)."""
    if is_typeddict(declared):
        return get_type_hints(declared)
    hints = {key: _as_written(hint) for key, hint in get_type_hints(declared, include_extras=True).items()}
    return (STATUS | hints) if declared in STAGE_TYPES.values() else hints


def _as_written(hint: Any) -> Any:
    """A dataclass field's type as report.json has it."""
    if get_origin(hint) is Annotated:
        return next(extra.declared for extra in hint.__metadata__ if isinstance(extra, Json))
    if hint is Path:
        return str
    if get_origin(hint) in (Union, types.UnionType):
        return functools.reduce(operator.or_, [_as_written(option) for option in get_args(hint)])
    return hint


@functools.cache
def _required_keys(declared: Any) -> frozenset[str]:
    """The keys a record type requires: a dataclass's fields without default; a TypedDict's required keys. Not
    ``__required_keys__``: with string annotations (``from __future__ import annotations``) Python 3.11 counts a
    ``NotRequired[...]`` key as required there."""
    if dataclasses.is_dataclass(declared):
        return frozenset(
            spec.name
            for spec in dataclasses.fields(declared)
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
        )
    hints = get_type_hints(declared, include_extras=True)
    if declared.__total__:
        return frozenset(key for key, hint in hints.items() if get_origin(hint) is not NotRequired)
    return frozenset(key for key, hint in hints.items() if get_origin(hint) is Required)


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _container(declared: Any) -> type[list[Any] | dict[str, Any]] | None:
    """The JSON container a value of type ``declared`` is (list, or dict: an object), None for a scalar."""
    origin = get_origin(declared)
    if origin is list:
        return list
    return dict if origin is dict or is_typeddict(declared) or dataclasses.is_dataclass(declared) else None
