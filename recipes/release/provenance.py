"""Build provenance of a release without GitHub: an in-toto Statement v1 with a SLSA v1 provenance predicate per
artefact, written beside it as ``<artefact>.intoto.json`` and listed in SHA256SUMS.

Every statement of a release describes the same run (``nox -s release``), so they share one predicate and differ in
their subjects: a tarball and the binary in it, or the profile. The predicate is made from the release's manifest
(and the Cargo.lock and cargo-zigbuild versions, which the manifest does not record); it holds no time and no path of
the build machine, so a release rebuilt from the same inputs writes the same statements.

https://in-toto.io/Statement/v1 and https://slsa.dev/provenance/v1 define the fields.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, MissingInput, PgoError
from recipes.files import process_alive, temporary_of
from recipes.inputs import read_json, read_text
from recipes.release import manifest as release_manifest
from recipes.release.manifest import Artefact, CCode, Manifest
from recipes.release.reproducible import (
    SUMS,
    git,
    parse_sha256sums,
    release_binary,
    repo_root,
    sha256_bytes,
    tag_commit,
)
from recipes.store import sha256_file
from recipes.toolchain.rustc import parse_rustc_vv

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
#: what kind of build this is (it gives externalParameters and internalParameters their meaning): pgo-recipes'
#: ``nox -s release``, version 1 of its parameters
BUILD_TYPE = "urn:pgo-recipes:buildtype:release:v1"
BUILDER_ID = "urn:pgo-recipes:builder:nox-release"
SUFFIX = ".intoto.json"


def statement_name(artefact: str) -> str:
    return f"{artefact}{SUFFIX}"


def _resource(
    name: str, *, uri: str | None = None, digest: Mapping[str, str] | None = None, **notes: Any
) -> dict[str, Any]:
    """A SLSA ResourceDescriptor (a name with a uri or a digest, and annotations when there are any)."""
    out: dict[str, Any] = {"name": name}
    if uri:
        out["uri"] = uri
    if digest:
        out["digest"] = dict(digest)
    annotations = {k: v for k, v in notes.items() if v is not None}
    if annotations:
        out["annotations"] = annotations
    return out


def _first_version(text: str, pattern: str = r"(\d+\.\d+(?:\.\d+)?\S*)") -> str:
    match = re.search(pattern, text)
    return match[1] if match else "unknown"


def external_parameters(manifest: Manifest) -> dict[str, Any]:
    """What the person releasing chose: the tag, the crate, the target, the cargo command, the features."""
    m = manifest
    return {
        "tag": m.tag,
        "manifest_path": m.manifest_path,
        "package": m.package,
        "bin": m.bin,
        "target": m.target,
        "cargo_command": list(m.cargo_command),
        "features": list(m.features),
        "locked": m.locked,
        "workload": m.workload,
    }


def internal_parameters(manifest: Manifest) -> dict[str, Any]:
    """What pgo-recipes set: the rustflags (without the profile), the path remapping, SOURCE_DATE_EPOCH."""
    m = manifest
    return {
        "rustflags_var": m.rustflags_var,
        "rustflags": list(m.rustflags),
        "remap_path_prefix_to": sorted({dest for _, dest in m.remap_path_prefix}),
        "source_date_epoch": m.source_date_epoch,
        "cargo_argv": list(m.cargo_argv),
        **({"bolt_args": list(m.bolt.bolt_args)} if m.bolt is not None else {}),
        **({"c_code": _c_code_parameters(m.c_code)} if m.c_code is not None else {}),
    }


def _c_code_parameters(c_code: CCode) -> dict[str, Any]:
    """Whether the target's C was profiled, and which crates compiled C (their paths remapped as the Rust's)."""
    return {"profiled": c_code.profiled, "crates": sorted(c.crate for c in c_code.crates)}


def resolved_dependencies(
    manifest: Manifest, *, cargo_lock: tuple[str, str] | None, zigbuild: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """The source commit, the toolchain (rustc with its commit, cargo, llvm-profdata, strip, zig and
    cargo-zigbuild when they built it), the Cargo.lock and the workload, by digest where there is one."""
    m, toolchain = manifest, manifest.toolchain
    rustc = parse_rustc_vv(toolchain.rustc_vv)
    llvm_profdata = _first_version(toolchain.llvm_profdata, r"LLVM (\S+)")
    deps = [
        _resource("source", digest={"gitCommit": m.commit}, tag=m.tag, commit_time=m.commit_time),
        _resource(
            "rustc",
            uri=f"pkg:generic/rustc@{rustc.release}",
            digest={"gitCommit": rustc.commit_hash},
            llvm_version=rustc.llvm_version,
            host=rustc.host,
        ),
        _resource("cargo", uri=f"pkg:generic/cargo@{_first_version(toolchain.cargo)}", version=toolchain.cargo),
        _resource("llvm-profdata", uri=f"pkg:generic/llvm-profdata@{llvm_profdata}", version=toolchain.llvm_profdata),
        _resource("strip", uri=f"pkg:generic/strip@{_first_version(toolchain.strip)}", version=toolchain.strip),
    ]
    if m.bolt is not None:  # a release with its PGO+BOLT artefact
        for name, line in (("llvm-bolt", m.bolt.llvm_bolt), ("llvm-strip", m.bolt.llvm_strip)):
            version = _first_version(line, r"LLVM (\S+)")
            deps.append(_resource(name, uri=f"pkg:generic/{name}@{version}"))
    clang = m.c_code.clang if m.c_code is not None else None
    if clang:  # the clang that compiled the profiled C
        deps.append(_resource("clang", uri=f"pkg:generic/clang@{_first_version(clang)}", version=clang))
    if zigbuild:
        deps.append(_resource("zig", uri=f"pkg:generic/zig@{zigbuild['zig']}"))
        deps.append(_resource("cargo-zigbuild", uri=f"pkg:generic/cargo-zigbuild@{zigbuild['cargo_zigbuild']}"))
    if cargo_lock:
        deps.append(_resource(cargo_lock[0], digest={"sha256": cargo_lock[1]}))
    if m.workload and m.workload_sha256:  # the parser has checked the sha256 of a workload it names
        deps.append(_resource(m.workload, digest={"sha256": m.workload_sha256}))
    return deps


def byproducts(manifest: Manifest) -> list[dict[str, Any]]:
    """The profile(s) the PGO build was compiled with, with where the build read it and what the training covered."""
    m = manifest
    profile = m.artefacts.profile
    out = [
        _resource(
            profile.file,
            digest={"sha256": profile.sha256},
            store_path=m.profile_store_path,
            executed_functions=m.training.executed_functions if m.training else None,
            total_functions=m.training.total_functions if m.training else None,
        )
    ]
    bolt_profile = m.artefacts.bolt_profile
    if bolt_profile is not None and m.bolt is not None:  # the BOLT profile llvm-bolt optimised PGO+BOLT with
        out.append(
            _resource(
                bolt_profile.file,
                digest={"sha256": bolt_profile.sha256},
                store_path=m.bolt.profile_store_path,
                functions_with_profile=m.bolt.profile.functions_with_profile,
                total_functions=m.bolt.profile.total_functions,
            )
        )
    return out


def predicate(
    manifest: Manifest,
    *,
    cargo_lock: tuple[str, str] | None = None,
    zigbuild: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The SLSA v1 provenance predicate of a release, from its manifest."""
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external_parameters(manifest),
            "internalParameters": internal_parameters(manifest),
            "resolvedDependencies": resolved_dependencies(manifest, cargo_lock=cargo_lock, zigbuild=zigbuild),
        },
        "runDetails": {
            "builder": {"id": BUILDER_ID},
            "byproducts": byproducts(manifest),
        },
    }


def artefact(manifest: Manifest, kind: str) -> Artefact:
    """The artefact ``kind`` of the release (one of ``manifest.artefacts.kinds()``: another is a bug)."""
    found = manifest.artefacts.get(kind)
    if found is None:
        raise ValueError(f"the release {manifest.names.base} has no {kind} artefact")
    return found


def subjects(manifest: Manifest, kind: str, file_sha256: str) -> list[dict[str, Any]]:
    """A tarball and the binary in it, or the profile: the files a statement is about, by name and sha256."""
    one = artefact(manifest, kind)
    out = [{"name": one.file, "digest": {"sha256": file_sha256}}]
    if one.binary is not None:
        out.append({"name": one.binary, "digest": {"sha256": one.binary_sha256}})
    return out


def statement(subject: Sequence[Mapping[str, Any]], pred: Mapping[str, Any]) -> dict[str, Any]:
    return {"_type": STATEMENT_TYPE, "subject": list(subject), "predicateType": PREDICATE_TYPE, "predicate": dict(pred)}


def encode(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def statements(
    manifest: Manifest,
    files: Mapping[str, bytes],
    *,
    cargo_lock: tuple[str, str] | None = None,
    zigbuild: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """``{<artefact>.intoto.json: statement}`` for each artefact of ``manifest``, its sha256 taken from ``files``."""
    pred = predicate(manifest, cargo_lock=cargo_lock, zigbuild=zigbuild)
    out: dict[str, bytes] = {}
    for kind in manifest.artefacts.kinds():
        name, recorded = artefact(manifest, kind).file, artefact(manifest, kind).sha256
        digest = sha256_bytes(files[name])
        if digest != recorded:
            raise CheckFailed(f"{name} has sha256 {digest}, the manifest records {recorded}", "run the release again")
        out[statement_name(name)] = encode(statement(subjects(manifest, kind, digest), pred))
    return out


def find_cargo_lock(repo: Path, manifest_path: str) -> tuple[str, str] | None:
    """The Cargo.lock the build used (beside the manifest or in a directory above it, up to the repository's root):
    its path in the repository and its sha256; None when there is none."""
    start = (repo / manifest_path).parent
    for directory in (start, *start.parents):
        lock = directory / "Cargo.lock"
        if lock.is_file():
            return str(lock.relative_to(repo)), sha256_file(lock)
        if directory == repo:
            break
    return None


def release_statements(
    manifest: Manifest, files: Mapping[str, bytes], repo: Path, zigbuild: Mapping[str, str] | None
) -> dict[str, bytes]:
    """The statements ``nox -s release`` writes beside its artefacts."""
    return statements(manifest, files, cargo_lock=find_cargo_lock(repo, manifest.manifest_path), zigbuild=zigbuild)


# --- nox -s verify -------------------------------------------------------------------------------


def _first_difference(found: Any, expected: Any, where: str) -> tuple[str, Any, Any] | None:
    """The first place (``a.b[2]``) where two JSON values differ: the path, the value found, the value expected."""
    if isinstance(found, dict) and isinstance(expected, dict):
        for key in sorted(set(found) | set(expected)):
            diff = _first_difference(found.get(key), expected.get(key), f"{where}.{key}")
            if diff:
                return diff
        return None
    if isinstance(found, list) and isinstance(expected, list) and len(found) == len(expected):
        for index, (a, b) in enumerate(zip(found, expected, strict=True)):
            diff = _first_difference(a, b, f"{where}[{index}]")
            if diff:
                return diff
        return None
    return None if found == expected else (where, found, expected)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _recorded_extras(pred: Mapping[str, Any]) -> tuple[tuple[str, str] | None, dict[str, str] | None]:
    """What a statement records beyond the manifest: the Cargo.lock (path, sha256) and the zig versions (None for
    what it does not record, or records in another shape: the predicate's comparison then names the difference)."""
    definition = pred.get("buildDefinition")
    deps = definition.get("resolvedDependencies") if isinstance(definition, dict) else None
    if not isinstance(deps, list):
        return None, None
    named = {d["name"]: d for d in deps if isinstance(d, dict) and isinstance(d.get("name"), str)}
    lock = next(
        (
            (n, d["digest"]["sha256"])
            for n, d in named.items()
            if n.endswith("Cargo.lock")
            and isinstance(d.get("digest"), dict)
            and isinstance(d["digest"].get("sha256"), str)
        ),
        None,
    )
    zig = {
        key: named[name]["uri"].rpartition("@")[2]
        for key, name in (("zig", "zig"), ("cargo_zigbuild", "cargo-zigbuild"))
        if name in named and isinstance(named[name].get("uri"), str)
    }
    return lock, (zig or None)


def release_files(manifest: Manifest) -> dict[str, str]:
    """``{file name: what it is}`` of every file a release of ``manifest`` makes and lists in SHA256SUMS: its
    artefacts, a statement of each, and the manifest."""
    names = manifest.names
    files = {names.manifest: "the manifest"}
    for kind in manifest.artefacts.kinds():
        file = names.artefact(kind)[0]
        files[file] = f"the {kind} artefact"
        files[statement_name(file)] = f"the provenance statement of {file}"
    return files


def image_index_name(bin_name: str, tag: str) -> str:
    """The copy of the image index beside the release's files: its sha256 is the digest the image is pulled by."""
    return f"{image_folder(bin_name, tag)}-index.json"


def check_listing(sums: Mapping[str, str], releases: Sequence[Manifest], tag: str) -> None:
    """SHA256SUMS lists exactly the files the release makes (of every target's manifest in ``releases``), and
    those of its image when ``nox -s image`` added them (both or neither): a line for anything else is refused
    (before anything is hashed), and the line of each artefact and statement is there."""
    made = {name: what for manifest in releases for name, what in release_files(manifest).items()}
    # the files nox -s image adds: the image index (the blob whose sha256 is the index digest) and its statement
    index = image_index_name(releases[0].bin, tag) if releases else ""
    image = {index: "the image index", statement_name(index): f"the provenance statement of {index}"} if index else {}
    listed = [name for name in image if name in sums]
    if listed:
        made.update(image)
        unlisted = [name for name in image if name not in sums]
        if unlisted:
            raise CheckFailed(
                f"SHA256SUMS lists {listed[0]} but not {unlisted[0]}: nox -s image adds both",
                "download SHA256SUMS and the image's files again",
            )
    extra = sorted(set(sums) - set(made))
    if extra:
        what = (
            "the artefacts of its manifest, their statements and the manifest"
            if len(releases) == 1
            else f"the artefacts of its {len(releases)} manifests, their statements and the manifests"
        )
        raise CheckFailed(
            f"SHA256SUMS lists {extra[0]}, a file the release {tag} does not make (it makes {len(made)}: {what})",
            "remove the line and the file, or download the release again",
        )
    for manifest in releases:
        names = manifest.names
        for kind in manifest.artefacts.kinds():
            file = names.artefact(kind)[0]
            if file not in sums:
                raise CheckFailed(f"SHA256SUMS has no line for {file}", "download SHA256SUMS again")
            if statement_name(file) not in sums:
                raise MissingInput(
                    f"the provenance statement {statement_name(file)} is missing", "download every file of the release"
                )
        if names.manifest not in sums:  # not reached: the manifest was found among SHA256SUMS' names
            raise CheckFailed(f"SHA256SUMS has no line for {names.manifest}", "download SHA256SUMS again")


def refuse_one_target_twice(triples: Mapping[str, Any], tag: str, where: str, hint: str) -> None:
    """Refuse two manifests (``{file name: its triple}``) of one target: a folder holds one release per target.
    The message says how many manifests of ``tag`` are ``where``; the hint names the two and their target."""
    seen: dict[str, str] = {}
    for name, triple in sorted(triples.items()):
        if not isinstance(triple, str):
            continue  # not a manifest: its own checks say so
        if triple in seen:
            raise ConfigError(
                f"{len(triples)} manifests of {tag} {where}",
                f"{hint}: {seen[triple]} and {name} are both of {triple}",
            )
        seen[triple] = name


def check_one_commit(manifests: Mapping[str, Manifest], tag: str) -> None:
    """The manifests of one folder (``{file name: manifest}``) are of one release: one commit (and its time)."""
    first_name, first = next(iter(manifests.items()))
    for name, manifest in manifests.items():
        for key, value, first_value in (
            ("commit", manifest.commit, first.commit),
            ("source_date_epoch", manifest.source_date_epoch, first.source_date_epoch),
        ):
            if value != first_value:
                raise CheckFailed(
                    f"the manifests of {tag} disagree on the {key}: {first_name} says {str(first_value)[:12]}, "
                    f"{name} {str(value)[:12]}",
                    "the targets of a release are built from one commit: keep the files of one release per folder",
                )


def release_file(directory: Path, name: str) -> Path:
    """``directory/name``, a regular file (not a symbolic link, a directory or a device), or a refusal."""
    path = directory / name
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError as exc:
        raise MissingInput(
            f"{name} is in SHA256SUMS but not in {directory}", "download every file of the release"
        ) from exc
    except OSError as exc:
        raise CheckFailed(f"{name} in {directory} cannot be read: {exc.strerror}", "download it again") from exc
    if stat.S_ISLNK(mode):
        raise CheckFailed(
            f"{name} in {directory} is a symbolic link (to {path.readlink()}), not a file of the release",
            "put the release's own files in the folder, not links",
        )
    if not stat.S_ISREG(mode):
        raise CheckFailed(f"{name} in {directory} is not a regular file", "download every file of the release")
    return path


def check_artefacts_folder(directory: Path, tag: str) -> None:
    """The folder a release's files are read from: a directory, or one line (a dangling link, a file)."""
    if directory.is_dir():
        return
    if directory.is_symlink():
        problem = f": it is a dangling symbolic link (to {directory.readlink()})" if not directory.exists() else ""
    else:
        problem = ": it is not a directory" if directory.exists() else ""
    raise MissingInput(
        f"no artefacts of {tag} at {directory}{problem}", "download the release's files there, or give --artefacts DIR"
    )


def read_sums(directory: Path) -> dict[str, str]:
    """The SHA256SUMS of a release's folder (a regular file, UTF-8, every line a sha256 and a plain file name)."""
    path = directory / SUMS
    if not path.is_file() and not path.is_symlink():
        raise MissingInput(f"SHA256SUMS is missing from {directory}", "download every file of the release")
    release_file(directory, SUMS)
    return parse_sha256sums(read_text(path, "the checksum file", CheckFailed, "download SHA256SUMS again"))


def read_manifest(path: Path) -> Any:
    return read_json(path, "the manifest", CheckFailed, "download it again")


def read_statement(path: Path, what: str, hint: str) -> dict[str, Any]:
    """An in-toto statement with a SLSA v1 provenance predicate (its ``_type`` and ``predicateType``), or one line."""
    data = read_json(path, what, CheckFailed, hint)
    if not isinstance(data, dict):
        raise CheckFailed(f"{path.name} is not an in-toto statement", hint)
    for key, want in (("_type", STATEMENT_TYPE), ("predicateType", PREDICATE_TYPE)):
        if data.get(key) != want:
            raise CheckFailed(f"{path.name}: {key} is {data.get(key)!r}, not {want}", hint)
    return data


def check_statement(path: Path, manifest: Manifest, kind: str, file_sha256: str) -> dict[str, Any]:
    """One statement against the manifest and its artefact's sha256; returns the predicate."""
    data = read_statement(path, "the provenance statement", "download it again")
    diff = _first_difference(data.get("subject"), subjects(manifest, kind, file_sha256), "subject")
    if diff:
        raise CheckFailed(
            f"{path.name}: {diff[0]} is {_short(diff[1])}, the artefact and the manifest say {_short(diff[2])}",
            "the statement is not about this release's file: download both again",
        )
    found = data.get("predicate")
    if not isinstance(found, dict):
        raise CheckFailed(f"{path.name} has no predicate", "download it again")
    cargo_lock, zigbuild = _recorded_extras(found)
    if zigbuild is None and manifest.cargo_command[1:2] == ("zigbuild",):
        raise CheckFailed(
            f"{path.name} records no zig and cargo-zigbuild, and the release was built with cargo zigbuild",
            "download it again",
        )
    diff = _first_difference(found, predicate(manifest, cargo_lock=cargo_lock, zigbuild=zigbuild), "predicate")
    if diff:
        raise CheckFailed(
            f"{path.name}: {diff[0]} is {_short(diff[1])}, the manifest says {_short(diff[2])}",
            "the statement and the manifest disagree: download both again",
        )
    return found


def tarball_binary(directory: Path, manifest: Manifest, one: Artefact) -> bytes:
    """The binary in the tarball ``one`` of ``manifest`` (in ``directory``), read with every member checked, its
    sha256 the manifest's."""
    data = release_binary(directory / one.file, str(one.binary), manifest.source_date_epoch)
    if sha256_bytes(data) != one.binary_sha256:
        raise CheckFailed(
            f"{one.binary} in {one.file} has sha256 {sha256_bytes(data)}, the manifest records {one.binary_sha256}",
            "download it again",
        )
    return data


def check_listed(path: Path, sums: Mapping[str, str]) -> None:
    """A file of a release's folder has the sha256 its SHA256SUMS lists."""
    digest = sha256_file(path)
    if digest != sums[path.name]:
        raise CheckFailed(f"{path.name} has sha256 {digest}, {SUMS} says {sums[path.name]}", "download it again")


def refuse_unlisted(directory: Path, name: str) -> None:
    """The refusal of a file of the release's folder that SHA256SUMS does not list: a temporary file of a release or
    image run (``.<name>.<pid>.tmp``) named as one, killed or still running, with the way to remove it."""
    temporary = temporary_of(name)
    if temporary is None:
        raise CheckFailed(f"{name} is in {directory} but not in SHA256SUMS", "remove it, or download again")
    made, pid = temporary
    if process_alive(pid):
        raise CheckFailed(
            f"{name} in {directory} is the temporary file of {made}, which process {pid} is writing now",
            "wait for that run (release or image) to end, then verify again",
        )
    raise CheckFailed(
        f"{name} in {directory} is a killed run's temporary file of {made} (its process {pid} is gone), not a file "
        "of the release",
        f"remove it: rm -r {shlex.quote(str(directory / name))}",
    )


def check_named(name: str, manifest: Manifest) -> None:
    """The manifest's file ``name`` is the name its release (bin, tag, triple) gives it."""
    names = manifest.names
    if names.manifest != name:
        raise CheckFailed(
            f"the manifest {name} names the release {names.base}, whose manifest is {names.manifest}",
            "download the release again",
        )


def check_tag_commit(tag: str, commit: str, manifest: Manifest) -> None:
    """The tag is here the commit the release was built from."""
    if commit != manifest.commit:
        raise CheckFailed(
            f"tag {tag} is commit {commit[:12]} here, the release was built from {manifest.commit[:12]}",
            "the tag was moved: fetch the release's tag (git fetch --tags --force)",
        )


#: what verify says of the facts it cannot check: a manifest and statements forged consistently pass it
CANNOT_TELL = (
    "note: verify checks the files against each other and the tag; it cannot tell whether the binaries were built "
    "as the manifests and statements say (features, rustflags, toolchain, cargo's command, profile, workload): "
    "nox -s rebuild (or verify --rebuild) builds them again and compares"
)


def verify(tag: str, directory: Path, repo: Path | None, environ: Mapping[str, str]) -> list[str]:
    """Check a release's files: SHA256SUMS, the manifest's artefacts, each statement's subjects and parameters,
    and, when the repository is here, the tag's commit and Cargo.lock. Every inconsistency is a one-line refusal;
    the result is one line per check."""
    check_artefacts_folder(directory, tag)
    sums = read_sums(directory)
    found = sorted(name for name in sums if name.endswith("-manifest.json") and f"-{tag}-" in name)
    if not found:
        raise CheckFailed(f"0 manifests of {tag} in SHA256SUMS", "download every file of the release")
    manifests: dict[str, Manifest] = {}
    for name in found:
        check_listed(release_file(directory, name), sums)
        data = read_manifest(directory / name)
        if release_manifest.peek(data, "tag") != tag:
            raise CheckFailed(f"{name} is not the manifest of {tag}", "check the files")
        manifests[name] = release_manifest.parse(data, name)
    triples = {name: manifest.triple for name, manifest in manifests.items()}
    refuse_one_target_twice(triples, tag, "in SHA256SUMS", "keep one release of one target per directory")
    for name, manifest in manifests.items():
        check_named(name, manifest)
    check_one_commit(manifests, tag)
    check_listing(sums, list(manifests.values()), tag)

    for name in sorted(sums):
        check_listed(release_file(directory, name), sums)
    layouts = {image_folder(m.bin, tag) for m in manifests.values()}  # checked by recipes/release/image.py:check_layout
    unlisted = sorted(
        p.name
        for p in directory.iterdir()
        if p.name != SUMS and p.name not in sums and not (p.name in layouts and is_image_layout(p))
    )
    if unlisted:
        refuse_unlisted(directory, unlisted[0])
    lines = [f"ok  SHA256SUMS: {len(sums)} files, every one there and as listed"]

    predicates = []
    for manifest in manifests.values():
        for kind in manifest.artefacts.kinds():
            one = artefact(manifest, kind)
            name = one.file
            if sums[name] != one.sha256:
                raise CheckFailed(
                    f"{name} has sha256 {sums[name]}, the manifest records {one.sha256}", "download both again"
                )
            if one.binary is not None:
                tarball_binary(directory, manifest, one)
            predicates.append(check_statement(directory / statement_name(name), manifest, kind, sums[name]))
            lines.append(f"ok  {name}: {statement_name(name)} names it and the manifest's parameters")

    if repo is not None:
        commit = tag_commit(repo, tag, environ)
        check_tag_commit(tag, commit, manifests[found[0]])
        lines.append(f"ok  {tag} is commit {commit[:12]}, the one the release was built from")
        locks = {lock for lock, _ in map(_recorded_extras, predicates) if lock is not None}
        for lock in sorted(locks):
            try:
                text = git(repo, "show", f"{commit}:{lock[0]}", env=environ, strip=False)
            except PgoError:
                lines.append(f"note: {lock[0]} is not in {tag}'s tree (cargo wrote it), its sha256 is not checked")
            else:
                digest = sha256_bytes(text.encode())
                if digest != lock[1]:
                    raise CheckFailed(
                        f"{lock[0]} of {tag} has sha256 {digest}, the statements record {lock[1]}",
                        "the release was built with another Cargo.lock than the tag's",
                    )
                lines.append(f"ok  {lock[0]} is the tag's")
    lines.append(CANNOT_TELL)
    targets = "" if len(found) == 1 else f" of {len(found)} targets ({', '.join(m.triple for m in manifests.values())})"
    lines.append(f"verified {tag}: {len(sums)} files, {len(predicates)} provenance statements{targets}")
    return lines


def verify_release(tag: str, config: Config, environ: Mapping[str, str], artefacts: Path | None = None) -> list[str]:
    """``nox -s verify -- vX.Y.Z [--artefacts DIR]``: :func:`verify` on ``dist/<tag>/`` of the crate's repository
    (or DIR); outside a git repository, with DIR, the tag's commit and Cargo.lock are not checked."""
    start, repo, directory = release_location(tag, config, environ, artefacts)
    lines = verify(tag, directory, repo, environ)
    if repo is None:
        lines.insert(-1, f"note: {start} is not in a git repository: the tag's commit and Cargo.lock are not checked")
    return lines


def release_location(
    tag: str, config: Config, environ: Mapping[str, str], artefacts: Path | None
) -> tuple[Path, Path | None, Path]:
    """Where a release is read from: the crate's folder, its git repository (None outside one, allowed with
    ``--artefacts DIR``) and the release's folder (DIR, or ``dist/<tag>/`` of the repository)."""
    start = config.manifest.parent if config.manifest.parent.is_dir() else config.project_dir
    try:
        repo: Path | None = repo_root(start, environ)
    except PgoError:
        if artefacts is None:
            raise
        repo = None
    return start, repo, (artefacts or (repo or start) / "dist" / tag).absolute()


def image_folder(bin_name: str, tag: str) -> str:
    """The name of the image layout ``nox -s image`` writes into a release's folder."""
    return f"{bin_name}-{tag}-image"


def is_image_layout(path: Path) -> bool:
    """``path`` is a directory (not a link) holding an ``oci-layout`` file."""
    return path.is_dir() and not path.is_symlink() and (path / "oci-layout").is_file()
