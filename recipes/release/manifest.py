"""A release's manifest (``<bin>-<tag>-<triple>-manifest.json``) as typed records: one parser, one writer.

:func:`parse` checks every key ``nox -s rebuild``, ``nox -s verify`` and the statements read, with its type: a
missing key or a value of another type is one line naming the file and the key (:class:`CheckFailed`, as for any
bad file of a published release). :func:`encode` writes the JSON ``nox -s release`` has always written (its keys
sorted, indented by two): a release rebuilt from the same inputs writes the same bytes, and a manifest read and
written again is the same file. A key that a release of before did not write yet (``c_code``, ``pgo_build``,
``max_glibc``, ``libc``, ``cpu_baseline``, ``training``, ``workload``) reads as None and stays left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from recipes.errors import CheckFailed
from recipes.inputs import JSON_KEY, NOT_WRITTEN, READ, Fields
from recipes.release.reproducible import Names, sum_name_problem
from recipes.results import json_of

#: the release manifest's layout (its "schema"): rebuild and verify read only this one
MANIFEST_SCHEMA = 1
#: the manifest's artefacts that get a statement, in this order (the last two only in a release with PGO_BOLT=1)
ARTEFACTS = ("plain", "pgo", "profile", "pgo_bolt", "bolt_profile")
HINT = "it is not a manifest nox -s release writes: download it again"
#: keys a release of before may not have written (read as None, left out when written again)
LATER_KEYS = (
    "workload",
    "workload_sha256",
    "c_code",
    "training",
    "pgo_build",
    "max_glibc",
    "libc",
    "cpu_baseline",
    "partial",
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _sha256(fields: Fields, key: str) -> str:
    value = fields.string(key)
    if not _SHA256.fullmatch(value):  # match: $ also matches before a final newline
        raise CheckFailed(f"{fields.where}: {key!r} is {value[:80]!r}, not a sha256 (64 hex digits)", fields.hint)
    return value


@dataclass(frozen=True)
class Toolchain:
    """What built the release: ``rustc -vV`` whole (the key ``rustc_vV``), its one-line description, ``cargo
    --version``, llvm-profdata's LLVM and path, ``strip --version``'s first line."""

    rustc_vv: str = field(metadata={JSON_KEY: "rustc_vV"})
    rustc: str
    cargo: str
    llvm_profdata: str
    strip: str


@dataclass(frozen=True)
class Artefact:
    """One file of the release by name and sha256; a tarball with the path and sha256 of the binary in it."""

    file: str
    sha256: str
    binary: str | None = None
    binary_sha256: str | None = None

    @property
    def top(self) -> str:
        """The one directory of a tarball (``<base>-pgo``)."""
        return (self.binary or "").split("/")[0]


@dataclass(frozen=True)
class Artefacts:
    plain: Artefact
    pgo: Artefact
    profile: Artefact
    pgo_bolt: Artefact | None = None
    bolt_profile: Artefact | None = None

    def kinds(self) -> list[str]:
        """The artefacts of :data:`ARTEFACTS` this release has, in that order."""
        return [kind for kind in ARTEFACTS if self.get(kind) is not None]

    def get(self, kind: str) -> Artefact | None:
        found: Artefact | None = getattr(self, kind)
        return found


@dataclass(frozen=True)
class CCrate:
    crate: str
    compilers: tuple[str, ...]


@dataclass(frozen=True)
class CCode:
    """What the rebuild must do with the target's C: ``profiled`` (by ``clang``, its ``--version`` line), and the
    crates that compiled C with their compilers."""

    profiled: bool
    clang: str | None
    crates: tuple[CCrate, ...]


@dataclass(frozen=True)
class Training:
    executed_functions: int | None
    total_functions: int | None


@dataclass(frozen=True)
class PgoBuild:
    """The optimised build's record: the functions without a profile, the stale-profile warnings, the crate
    identities and its glibc ceiling."""

    missing_profile_functions: int
    stale_profile_warnings: int
    crate_metadata: dict[str, str]
    max_glibc: str | None


@dataclass(frozen=True)
class Partial:
    """Partial training (PGO_PARTIAL): the published profile is the one the build read, the training's whole profile
    (``whole_profile_sha256``) without the records of what it never ran; the functions the build compiled without
    profile data for that. A release without it (of before, or of ``PGO_PARTIAL=0``) read the whole profile."""

    whole_profile_sha256: str = field(metadata={READ: _sha256})
    never_run_records: int
    never_run_functions: int


@dataclass(frozen=True)
class CpuBaseline:
    cpu: str
    run: tuple[str, ...] | None  # the arguments of a command-line tool; None: a server, asked over HTTP
    plain: str
    pgo: str


@dataclass(frozen=True)
class BoltProfile:
    functions_with_profile: int
    total_functions: int
    profile_branches: int
    profile_functions: int


@dataclass(frozen=True)
class BoltInfo:
    """What a release with PGO_BOLT=1 records of its PGO+BOLT binary: the BOLT profile, the tools, llvm-bolt's
    arguments."""

    profile_store_path: str
    profile_sha256: str = field(metadata={READ: _sha256})
    llvm_bolt: str
    llvm_strip: str
    bolt_args: tuple[str, ...]
    emit_relocs: bool
    profile: BoltProfile


# --- the keys whose type is not all they must be ------------------------------------------------------------


def _workload_sha256(fields: Fields, key: str) -> str | None:
    """The workload's sha256, there when the manifest names a workload."""
    return _sha256(fields, key) if fields.opt_string("workload") else fields.opt_string(key)


def _remap(fields: Fields, key: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for index, pair in enumerate(fields.array(key)):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise CheckFailed(f"{fields.where}: {key!r}[{index}] is not a pair of paths", HINT)
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _names(fields: Fields) -> Names:
    """The release's names (its files'), of the top level's ``bin``, ``tag`` and ``triple``."""
    names = Names(fields.string("bin"), fields.string("tag"), fields.string("triple"))
    problem = sum_name_problem(names.base)
    if problem or not names.base:
        raise CheckFailed(f"{fields.where}: 'bin', 'tag' and 'triple' make {names.base!r}, {problem}", HINT)
    return names


def _artefacts(fields: Fields, key: str) -> Artefacts:
    names = _names(fields)
    artefacts = fields.object(key)
    unknown = sorted(set(artefacts.data) - set(ARTEFACTS))
    if unknown:
        raise CheckFailed(f"{fields.where}: artefacts: {unknown[0]!r} is not an artefact a release makes", HINT)
    bolt = "pgo_bolt" in artefacts.data
    found: dict[str, Artefact] = {}
    for kind in ("plain", "pgo", "profile", *(("pgo_bolt", "bolt_profile") if bolt else ())):
        found[kind] = _artefact(artefacts.object(kind), kind, names, fields.where)
    if "bolt_profile" in artefacts.data and not bolt:
        raise CheckFailed(f"{fields.where}: artefacts: 'bolt_profile' without 'pgo_bolt'", HINT)
    return Artefacts(**found)


def _artefact(artefact: Fields, kind: str, names: Names, name: str) -> Artefact:
    file, top = names.artefact(kind)
    if artefact.string("file") != file:
        raise CheckFailed(
            f"{name}: artefacts: {kind}: 'file' is {artefact.data['file'][:80]!r}, the release names it {file!r}", HINT
        )
    sha256 = _sha256(artefact, "sha256")
    if top is None:
        return Artefact(file, sha256)
    if artefact.string("binary") != f"{top}/{names.bin}":
        raise CheckFailed(
            f"{name}: artefacts: {kind}: 'binary' is {artefact.data['binary'][:80]!r}, the release packs "
            f"{top}/{names.bin}",
            HINT,
        )
    return Artefact(file, sha256, f"{top}/{names.bin}", _sha256(artefact, "binary_sha256"))


def _bolt(fields: Fields, key: str) -> BoltInfo | None:
    """The BOLT record, which a release has when it has the artefact ``pgo_bolt`` (read before it)."""
    bolted = "pgo_bolt" in fields.object("artefacts").data
    if not bolted and not fields.has(key):
        return None
    record = fields.object(key)
    if not bolted:
        raise CheckFailed(f"{fields.where}: 'bolt' without the artefact 'pgo_bolt'", HINT)
    return record.record(BoltInfo)


def _unrecorded(fields: Fields, key: str) -> frozenset[str]:  # noqa: ARG001  (a READ function: it has no key)
    return frozenset(later for later in LATER_KEYS if not fields.has(later))


@dataclass(frozen=True)
class Manifest:
    """Everything a rebuild of one target's release must match, and what the statements are made from."""

    schema: int
    tag: str
    commit: str
    commit_time: int
    source_date_epoch: int
    manifest_path: str
    package: str
    bin: str
    features: tuple[str, ...]
    locked: bool
    workload: str | None
    workload_sha256: str | None = field(metadata={READ: _workload_sha256})
    target: str
    triple: str
    toolchain: Toolchain
    c_code: CCode | None
    cargo_command: tuple[str, ...]
    cargo_argv: tuple[str, ...]
    rustflags_var: str
    rustflags: tuple[str, ...]
    remap_path_prefix: tuple[tuple[str, str], ...] = field(metadata={READ: _remap})
    profile_store_path: str
    profile_sha256: str = field(metadata={READ: _sha256})
    training: Training | None
    pgo_build: PgoBuild | None
    max_glibc: str | None
    libc: str | None
    cpu_baseline: CpuBaseline | None
    artefacts: Artefacts = field(metadata={READ: _artefacts})
    bolt: BoltInfo | None = field(default=None, metadata={READ: _bolt})
    partial: Partial | None = None
    #: the keys of :data:`LATER_KEYS` the file did not have (a release of before): left out when written
    unrecorded: frozenset[str] = field(default=frozenset(), repr=False, metadata={NOT_WRITTEN: True, READ: _unrecorded})

    @property
    def names(self) -> Names:
        return Names(self.bin, self.tag, self.triple)


# --- the parser ------------------------------------------------------------------------------------------------


def check_schema(data: dict[str, Any], name: str) -> None:
    """Refuse a release manifest of another layout than this pgo-recipes writes and reads."""
    schema = data.get("schema")
    if schema != MANIFEST_SCHEMA:
        raise CheckFailed(
            f"{name} has schema {schema!r}; this pgo-recipes reads manifests of schema {MANIFEST_SCHEMA}",
            "use the pgo-recipes version that made the release (its commit is the release's buildType's)",
        )


def peek(data: Any, key: str) -> object:
    """One top-level value of a manifest's JSON read before it is parsed, to refuse a file of another release (or a
    second of one target) before its own checks: None when ``data`` is not a JSON object or has no ``key``."""
    return data.get(key) if isinstance(data, dict) else None


@dataclass(frozen=True)
class Identity:
    """The release a manifest is of, all a gather reads of it (the verify that follows reads the rest)."""

    tag: str
    commit: str


def identity(data: Any, name: str) -> Identity:
    """The tag and commit of the manifest JSON ``data`` of the file ``name``: not a JSON object, or either key missing
    or not a string, is one line naming ``name`` (and the key)."""
    if not isinstance(data, dict):
        raise CheckFailed(f"{name} is not a manifest (not a JSON object)", "download it again")
    return Fields(data, name, CheckFailed, HINT).record(Identity)


def parse(data: Any, name: str) -> Manifest:
    """The manifest of the JSON ``data`` of the file ``name``: its schema, then each key as its field in
    :class:`Manifest` declares it (:meth:`recipes.inputs.Fields.record`); a missing key or a value of another type
    is one line naming ``name`` and the key."""
    fields = Fields(data, name, CheckFailed, HINT)
    check_schema(fields.data, name)
    return fields.record(Manifest)


# --- the writer ------------------------------------------------------------------------------------------------


def to_json(manifest: Manifest) -> dict[str, Any]:
    """The manifest's JSON object, as ``nox -s release`` writes it (:func:`recipes.results.json_of`, the one
    writer; a key of :data:`LATER_KEYS` the manifest did not have is left out)."""
    data: dict[str, Any] = json_of(manifest)
    return {key: value for key, value in data.items() if key not in manifest.unrecorded}


def encode(manifest: Manifest) -> bytes:
    """The manifest's file: its JSON, keys sorted, indented by two, a newline at the end."""
    return (json.dumps(to_json(manifest), indent=2, sort_keys=True) + "\n").encode()
