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
from recipes.release.reproducible import Names, sum_name_problem
from recipes.results import JSON_KEY, NOT_WRITTEN, json_of
from recipes.schema import Fields

#: the release manifest's layout (its "schema"): rebuild and verify read only this one
MANIFEST_SCHEMA = 1
#: the manifest's artefacts that get a statement, in this order (the last two only in a release with PGO_BOLT=1)
ARTEFACTS = ("plain", "pgo", "profile", "pgo_bolt", "bolt_profile")
HINT = "it is not a manifest nox -s release writes: download it again"
#: keys a release of before may not have written (read as None, left out when written again)
LATER_KEYS = ("workload", "workload_sha256", "c_code", "training", "pgo_build", "max_glibc", "libc", "cpu_baseline")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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
    profile_sha256: str
    llvm_bolt: str
    llvm_strip: str
    bolt_args: tuple[str, ...]
    emit_relocs: bool
    profile: BoltProfile


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
    workload_sha256: str | None
    target: str
    triple: str
    toolchain: Toolchain
    c_code: CCode | None
    cargo_command: tuple[str, ...]
    cargo_argv: tuple[str, ...]
    rustflags_var: str
    rustflags: tuple[str, ...]
    remap_path_prefix: tuple[tuple[str, str], ...]
    profile_store_path: str
    profile_sha256: str
    training: Training | None
    pgo_build: PgoBuild | None
    max_glibc: str | None
    libc: str | None
    cpu_baseline: CpuBaseline | None
    artefacts: Artefacts
    bolt: BoltInfo | None = None
    #: the keys of :data:`LATER_KEYS` the file did not have (a release of before): left out when written
    unrecorded: frozenset[str] = field(default=frozenset(), repr=False, metadata={NOT_WRITTEN: True})

    @property
    def names(self) -> Names:
        return Names(self.bin, self.tag, self.triple)


# --- the parser ------------------------------------------------------------------------------------------------


def _sha256(fields: Fields, key: str) -> str:
    value = fields.string(key)
    if not _SHA256.match(value):
        raise CheckFailed(f"{fields.where}: {key!r} is {value[:80]!r}, not a sha256 (64 hex digits)", fields.hint)
    return value


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
    fields = Fields(data, name, CheckFailed, HINT)
    return Identity(fields.string("tag"), fields.string("commit"))


def parse(data: Any, name: str) -> Manifest:
    """The manifest of the JSON ``data`` of the file ``name``, every key checked (its schema, then each key in the
    order a reader meets it); a missing key or a value of another type is one line naming ``name`` and the key."""
    fields = Fields(data, name, CheckFailed, HINT)
    check_schema(fields.data, name)
    for key in ("tag", "commit", "manifest_path", "package", "bin", "target", "triple", "rustflags_var"):
        fields.string(key)
    remap = _checked_scalars(fields)
    workload = fields.opt_string("workload")
    toolchain = fields.object("toolchain")
    tools = {key: toolchain.string(key) for key in ("rustc_vV", "cargo", "llvm_profdata", "strip")}
    c_code = _c_code(fields.opt_object("c_code"))
    training = fields.opt_object("training")
    names = Names(fields.string("bin"), fields.string("tag"), fields.string("triple"))
    problem = sum_name_problem(names.base)
    if problem or not names.base:
        raise CheckFailed(f"{name}: 'bin', 'tag' and 'triple' make {names.base!r}, {problem}", HINT)
    artefacts = _artefacts(fields.object("artefacts"), names, name)
    return Manifest(
        schema=fields.integer("schema"),
        tag=names.tag,
        commit=fields.string("commit"),
        commit_time=fields.integer("commit_time"),
        source_date_epoch=fields.integer("source_date_epoch"),
        manifest_path=fields.string("manifest_path"),
        package=fields.string("package"),
        bin=names.bin,
        features=tuple(fields.strings("features")),
        locked=fields.boolean("locked"),
        workload=workload,
        workload_sha256=_sha256(fields, "workload_sha256") if workload else fields.opt_string("workload_sha256"),
        target=fields.string("target"),
        triple=names.triple,
        toolchain=Toolchain(
            rustc_vv=tools["rustc_vV"],
            rustc=toolchain.string("rustc"),
            cargo=tools["cargo"],
            llvm_profdata=tools["llvm_profdata"],
            strip=tools["strip"],
        ),
        c_code=c_code,
        cargo_command=tuple(fields.strings("cargo_command")),
        cargo_argv=tuple(fields.strings("cargo_argv")),
        rustflags_var=fields.string("rustflags_var"),
        rustflags=tuple(fields.strings("rustflags")),
        remap_path_prefix=remap,
        profile_store_path=fields.string("profile_store_path"),
        profile_sha256=_sha256(fields, "profile_sha256"),
        training=None
        if training is None
        else Training(training.opt_integer("executed_functions"), training.opt_integer("total_functions")),
        pgo_build=_pgo_build(fields.opt_object("pgo_build")),
        max_glibc=fields.opt_string("max_glibc"),
        libc=fields.opt_string("libc"),
        cpu_baseline=_cpu_baseline(fields.opt_object("cpu_baseline")),
        artefacts=artefacts,
        bolt=_bolt(fields, name, bolted=artefacts.pgo_bolt is not None),
        unrecorded=frozenset(key for key in LATER_KEYS if not fields.has(key)),
    )


def _checked_scalars(fields: Fields) -> tuple[tuple[str, str], ...]:
    """The top level's profile, times, lists and workload checked (in the order of the checks before the types);
    the remap pairs."""
    fields.string("profile_store_path")
    _sha256(fields, "profile_sha256")
    for key in ("commit_time", "source_date_epoch"):
        fields.integer(key)
    fields.boolean("locked")
    for key in ("features", "cargo_command", "cargo_argv", "rustflags"):
        fields.strings(key)
    if fields.opt_string("workload"):
        _sha256(fields, "workload_sha256")
    pairs = []
    for index, pair in enumerate(fields.array("remap_path_prefix")):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise CheckFailed(f"{fields.where}: 'remap_path_prefix'[{index}] is not a pair of paths", HINT)
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _c_code(c_code: Fields | None) -> CCode | None:
    if c_code is None:
        return None
    profiled = c_code.boolean("profiled")
    clang = c_code.opt_string("clang")
    crates = []
    for index, crate in enumerate(c_code.array("crates")):
        crate_fields = Fields(crate, f"{c_code.where}: crates[{index}]", CheckFailed, HINT)
        crates.append(CCrate(crate_fields.string("crate"), tuple(crate_fields.strings("compilers"))))
    return CCode(profiled, clang, tuple(crates))


def _artefacts(artefacts: Fields, names: Names, name: str) -> Artefacts:
    unknown = sorted(set(artefacts.data) - set(ARTEFACTS))
    if unknown:
        raise CheckFailed(f"{name}: artefacts: {unknown[0]!r} is not an artefact a release makes", HINT)
    bolt = "pgo_bolt" in artefacts.data
    found: dict[str, Artefact] = {}
    for kind in ("plain", "pgo", "profile", *(("pgo_bolt", "bolt_profile") if bolt else ())):
        found[kind] = _artefact(artefacts.object(kind), kind, names, name)
    if "bolt_profile" in artefacts.data and not bolt:
        raise CheckFailed(f"{name}: artefacts: 'bolt_profile' without 'pgo_bolt'", HINT)
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


def _bolt(fields: Fields, name: str, *, bolted: bool) -> BoltInfo | None:
    if not bolted and not fields.has("bolt"):
        return None
    record = fields.object("bolt")
    if not bolted:
        raise CheckFailed(f"{name}: 'bolt' without the artefact 'pgo_bolt'", HINT)
    bolt_args = tuple(record.strings("bolt_args"))
    tools = {key: record.string(key) for key in ("llvm_bolt", "llvm_strip", "profile_store_path")}
    sha256 = _sha256(record, "profile_sha256")
    profile = record.object("profile")
    with_profile, total = profile.integer("functions_with_profile"), profile.integer("total_functions")
    return BoltInfo(
        profile_store_path=tools["profile_store_path"],
        profile_sha256=sha256,
        llvm_bolt=tools["llvm_bolt"],
        llvm_strip=tools["llvm_strip"],
        bolt_args=bolt_args,
        emit_relocs=record.boolean("emit_relocs"),
        profile=BoltProfile(
            with_profile, total, profile.integer("profile_branches"), profile.integer("profile_functions")
        ),
    )


def _pgo_build(record: Fields | None) -> PgoBuild | None:
    if record is None:
        return None
    identities = record.object("crate_metadata")
    return PgoBuild(
        missing_profile_functions=record.integer("missing_profile_functions"),
        stale_profile_warnings=record.integer("stale_profile_warnings"),
        crate_metadata={key: identities.string(key) for key in identities.data},
        max_glibc=record.opt_string("max_glibc"),
    )


def _cpu_baseline(record: Fields | None) -> CpuBaseline | None:
    if record is None:
        return None
    run = record.strings("run") if record.data.get("run") is not None else None
    return CpuBaseline(
        record.string("cpu"), None if run is None else tuple(run), record.string("plain"), record.string("pgo")
    )


# --- the writer ------------------------------------------------------------------------------------------------


def to_json(manifest: Manifest) -> dict[str, Any]:
    """The manifest's JSON object, as ``nox -s release`` writes it (:func:`recipes.results.json_of`, the one
    writer; a key of :data:`LATER_KEYS` the manifest did not have is left out)."""
    data: dict[str, Any] = json_of(manifest)
    return {key: value for key, value in data.items() if key not in manifest.unrecorded}


def encode(manifest: Manifest) -> bytes:
    """The manifest's file: its JSON, keys sorted, indented by two, a newline at the end."""
    return (json.dumps(to_json(manifest), indent=2, sort_keys=True) + "\n").encode()
