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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recipes.errors import CheckFailed
from recipes.reproducible import sha256_bytes
from recipes.store import sha256_file
from recipes.toolchain import parse_rustc_vv

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
#: what kind of build this is (it gives externalParameters and internalParameters their meaning): pgo-recipes'
#: ``nox -s release``, version 1 of its parameters
BUILD_TYPE = "urn:pgo-recipes:buildtype:release:v1"
BUILDER_ID = "urn:pgo-recipes:builder:nox-release"
SUFFIX = ".intoto.json"
#: the manifest's artefacts that get a statement, in this order
ARTEFACTS = ("plain", "pgo", "profile")


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


def external_parameters(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What the person releasing chose: the tag, the crate, the target, the cargo command, the features."""
    return {
        "tag": manifest["tag"],
        "manifest_path": manifest["manifest_path"],
        "package": manifest["package"],
        "bin": manifest["bin"],
        "target": manifest["target"],
        "cargo_command": list(manifest["cargo_command"]),
        "features": list(manifest["features"]),
        "locked": manifest["locked"],
        "workload": manifest["workload"],
    }


def internal_parameters(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What pgo-recipes set: the rustflags (without the profile), the path remapping, SOURCE_DATE_EPOCH."""
    return {
        "rustflags_var": manifest["rustflags_var"],
        "rustflags": list(manifest["rustflags"]),
        "remap_path_prefix_to": sorted({str(dest) for _, dest in manifest["remap_path_prefix"]}),
        "source_date_epoch": manifest["source_date_epoch"],
        "cargo_argv": list(manifest["cargo_argv"]),
    }


def resolved_dependencies(
    manifest: Mapping[str, Any], *, cargo_lock: tuple[str, str] | None, zigbuild: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """The source commit, the toolchain (rustc with its commit, cargo, llvm-profdata, strip, zig and
    cargo-zigbuild when they built it), the Cargo.lock and the workload, by digest where there is one."""
    toolchain = manifest["toolchain"]
    rustc = parse_rustc_vv(str(toolchain["rustc_vV"]))
    llvm_profdata = _first_version(str(toolchain["llvm_profdata"]), r"LLVM (\S+)")
    cargo_version = _first_version(str(toolchain["cargo"]))
    deps = [
        _resource(
            "source", digest={"gitCommit": manifest["commit"]}, tag=manifest["tag"], commit_time=manifest["commit_time"]
        ),
        _resource(
            "rustc",
            uri=f"pkg:generic/rustc@{rustc.release}",
            digest={"gitCommit": rustc.commit_hash},
            llvm_version=rustc.llvm_version,
            host=rustc.host,
        ),
        _resource("cargo", uri=f"pkg:generic/cargo@{cargo_version}", version=toolchain["cargo"]),
        _resource(
            "llvm-profdata", uri=f"pkg:generic/llvm-profdata@{llvm_profdata}", version=toolchain["llvm_profdata"]
        ),
        _resource(
            "strip", uri=f"pkg:generic/strip@{_first_version(str(toolchain['strip']))}", version=toolchain["strip"]
        ),
    ]
    if zigbuild:
        deps.append(_resource("zig", uri=f"pkg:generic/zig@{zigbuild['zig']}"))
        deps.append(_resource("cargo-zigbuild", uri=f"pkg:generic/cargo-zigbuild@{zigbuild['cargo_zigbuild']}"))
    if cargo_lock:
        deps.append(_resource(cargo_lock[0], digest={"sha256": cargo_lock[1]}))
    if manifest.get("workload"):
        deps.append(_resource(str(manifest["workload"]), digest={"sha256": manifest["workload_sha256"]}))
    return deps


def byproducts(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The profile(s) the PGO build was compiled with, with where the build read it and what the training covered."""
    profile = manifest["artefacts"]["profile"]
    training = manifest.get("training") or {}
    return [
        _resource(
            profile["file"],
            digest={"sha256": profile["sha256"]},
            store_path=manifest["profile_store_path"],
            executed_functions=training.get("executed_functions"),
            total_functions=training.get("total_functions"),
        )
    ]


def predicate(
    manifest: Mapping[str, Any],
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


def subjects(manifest: Mapping[str, Any], kind: str, file_sha256: str) -> list[dict[str, Any]]:
    """A tarball and the binary in it, or the profile: the files a statement is about, by name and sha256."""
    artefact = manifest["artefacts"][kind]
    out = [{"name": artefact["file"], "digest": {"sha256": file_sha256}}]
    if "binary" in artefact:
        out.append({"name": artefact["binary"], "digest": {"sha256": artefact["binary_sha256"]}})
    return out


def statement(subject: Sequence[Mapping[str, Any]], pred: Mapping[str, Any]) -> dict[str, Any]:
    return {"_type": STATEMENT_TYPE, "subject": list(subject), "predicateType": PREDICATE_TYPE, "predicate": dict(pred)}


def encode(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def statements(
    manifest: Mapping[str, Any],
    files: Mapping[str, bytes],
    *,
    cargo_lock: tuple[str, str] | None = None,
    zigbuild: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """``{<artefact>.intoto.json: statement}`` for each artefact of ``manifest``, its sha256 taken from ``files``."""
    pred = predicate(manifest, cargo_lock=cargo_lock, zigbuild=zigbuild)
    out: dict[str, bytes] = {}
    for kind in ARTEFACTS:
        name = manifest["artefacts"][kind]["file"]
        digest = sha256_bytes(files[name])
        if digest != manifest["artefacts"][kind]["sha256"]:
            raise CheckFailed(
                f"{name} has sha256 {digest}, the manifest records {manifest['artefacts'][kind]['sha256']}",
                "run the release again",
            )
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
    manifest: Mapping[str, Any], files: Mapping[str, bytes], repo: Path, zigbuild: Mapping[str, str] | None
) -> dict[str, bytes]:
    """The statements ``nox -s release`` writes beside its artefacts."""
    return statements(
        manifest, files, cargo_lock=find_cargo_lock(repo, str(manifest["manifest_path"])), zigbuild=zigbuild
    )
