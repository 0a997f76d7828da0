"""The in-toto statements of a release (recipes/provenance.py) on a manifest shaped as ``nox -s release`` writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recipes import provenance
from recipes.errors import CheckFailed, PgoError
from recipes.reproducible import sha256_bytes
from tests.conftest import DATA

BASE = "hello-pgo-v1.0.0-x86_64-unknown-linux-gnu"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {
    f"{BASE}.tar.gz": b"plain tarball",
    f"{BASE}-pgo.tar.gz": b"pgo tarball",
    f"{BASE}-pgo.profdata": b"profile",
}
MACHINE_PATHS = ("/home/someone/src/hello-repo", "/home/someone/.cargo", "/home/someone/work-dir")


def manifest(**changes: Any) -> dict[str, Any]:
    """A release manifest with the keys and value shapes recipes/release.py writes."""
    sha = {name: sha256_bytes(data) for name, data in FILES.items()}
    data: dict[str, Any] = {
        "schema": 1,
        "tag": "v1.0.0",
        "commit": COMMIT,
        "commit_time": 1772600767,
        "source_date_epoch": 1772600767,
        "manifest_path": "hello/Cargo.toml",
        "package": "hello-pgo",
        "bin": "hello-pgo",
        "features": ["fast"],
        "locked": True,
        "workload": "profiles/hello.toml",
        "workload_sha256": "ab" * 32,
        "target": "x86_64-unknown-linux-gnu.2.28",
        "triple": "x86_64-unknown-linux-gnu",
        "toolchain": {
            "rustc_vV": (DATA / "rustc-vV.txt").read_text(),
            "rustc": "rustc 1.95.0 (commit 59807616e1fa, LLVM 22.1.2, host x86_64-unknown-linux-gnu)",
            "cargo": "cargo 1.95.0 (f2d3ce0bd 2026-03-21)",
            "llvm_profdata": "LLVM 22.1.8 (/usr/bin/llvm-profdata-22)",
            "strip": "GNU strip (GNU Binutils for Debian) 2.40",
        },
        "cargo_command": ["cargo", "zigbuild"],
        "cargo_argv": ["cargo", "zigbuild", "--release", "--manifest-path", "hello/Cargo.toml"],
        "rustflags_var": "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
        "rustflags": ["-Cforce-frame-pointers=yes"],
        "remap_path_prefix": [
            [MACHINE_PATHS[0], "/build/src"],
            [MACHINE_PATHS[1], "/cargo"],
            [MACHINE_PATHS[2], "/build/work"],
        ],
        "profile_store_path": f"/tmp/hello-pgo-pgo/{sha[f'{BASE}-pgo.profdata']}.profdata",
        "profile_sha256": sha[f"{BASE}-pgo.profdata"],
        "training": {"executed_functions": 120, "total_functions": 800},
        "artefacts": {
            "plain": {
                "file": f"{BASE}.tar.gz",
                "sha256": sha[f"{BASE}.tar.gz"],
                "binary": f"{BASE}/hello-pgo",
                "binary_sha256": "11" * 32,
            },
            "pgo": {
                "file": f"{BASE}-pgo.tar.gz",
                "sha256": sha[f"{BASE}-pgo.tar.gz"],
                "binary": f"{BASE}-pgo/hello-pgo",
                "binary_sha256": "22" * 32,
            },
            "profile": {"file": f"{BASE}-pgo.profdata", "sha256": sha[f"{BASE}-pgo.profdata"]},
        },
    }
    data.update(changes)
    return data


ZIGBUILD = {"cargo_zigbuild": "0.24.1", "zig": "0.17.1"}
LOCK = ("Cargo.lock", "cd" * 32)


def written(**kwargs: Any) -> dict[str, dict[str, Any]]:
    out = provenance.statements(manifest(), FILES, **kwargs)
    return {name: json.loads(data) for name, data in out.items()}


def by_name(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in resources}


def test_one_statement_per_artefact_named_after_it() -> None:
    assert set(written()) == {f"{name}.intoto.json" for name in FILES}


def test_statement_v1_with_slsa_provenance_v1() -> None:
    for data in written().values():
        assert data["_type"] == "https://in-toto.io/Statement/v1"
        assert data["predicateType"] == "https://slsa.dev/provenance/v1"
        assert set(data) == {"_type", "subject", "predicateType", "predicate"}
        assert data["predicate"]["buildDefinition"]["buildType"] == provenance.BUILD_TYPE
        assert data["predicate"]["runDetails"]["builder"]["id"] == provenance.BUILDER_ID


def test_subjects_are_the_artefact_and_the_binary_in_it_by_sha256() -> None:
    statements = written()
    pgo = statements[f"{BASE}-pgo.tar.gz.intoto.json"]["subject"]
    assert pgo == [
        {"name": f"{BASE}-pgo.tar.gz", "digest": {"sha256": sha256_bytes(FILES[f"{BASE}-pgo.tar.gz"])}},
        {"name": f"{BASE}-pgo/hello-pgo", "digest": {"sha256": "22" * 32}},
    ]
    profile = statements[f"{BASE}-pgo.profdata.intoto.json"]["subject"]
    assert profile == [{"name": f"{BASE}-pgo.profdata", "digest": {"sha256": sha256_bytes(b"profile")}}]


def test_parameters_come_from_the_manifest() -> None:
    definition = written()[f"{BASE}.tar.gz.intoto.json"]["predicate"]["buildDefinition"]
    external = definition["externalParameters"]
    assert (external["tag"], external["target"]) == ("v1.0.0", "x86_64-unknown-linux-gnu.2.28")
    assert (external["cargo_command"], external["features"]) == (["cargo", "zigbuild"], ["fast"])
    assert external["manifest_path"] == "hello/Cargo.toml"
    internal = definition["internalParameters"]
    assert internal["rustflags"] == ["-Cforce-frame-pointers=yes"]
    assert internal["rustflags_var"] == "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"
    assert internal["remap_path_prefix_to"] == ["/build/src", "/build/work", "/cargo"]
    assert internal["source_date_epoch"] == 1772600767


def test_resolved_dependencies_pin_source_toolchain_and_lock() -> None:
    deps = by_name(
        written(cargo_lock=LOCK, zigbuild=ZIGBUILD)[f"{BASE}-pgo.tar.gz.intoto.json"]["predicate"]["buildDefinition"][
            "resolvedDependencies"
        ]
    )
    assert deps["source"]["digest"] == {"gitCommit": COMMIT}
    assert deps["rustc"]["digest"] == {"gitCommit": "59807616e1fa2540724bfbac14d7976d7e4a3860"}  # rustc -vV's
    assert deps["rustc"]["uri"] == "pkg:generic/rustc@1.95.0"
    assert deps["rustc"]["annotations"]["llvm_version"] == "22.1.2"
    assert deps["llvm-profdata"]["uri"] == "pkg:generic/llvm-profdata@22.1.8"
    assert deps["cargo"]["uri"] == "pkg:generic/cargo@1.95.0"
    assert deps["zig"]["uri"] == "pkg:generic/zig@0.17.1"
    assert deps["cargo-zigbuild"]["uri"] == "pkg:generic/cargo-zigbuild@0.24.1"
    assert deps["Cargo.lock"]["digest"] == {"sha256": "cd" * 32}
    assert deps["profiles/hello.toml"]["digest"] == {"sha256": "ab" * 32}
    for dep in deps.values():  # a SLSA ResourceDescriptor names a uri or a digest
        assert "uri" in dep or "digest" in dep


def test_zig_and_lock_absent_when_not_used() -> None:
    deps = by_name(written()[f"{BASE}.tar.gz.intoto.json"]["predicate"]["buildDefinition"]["resolvedDependencies"])
    assert not {"zig", "cargo-zigbuild", "Cargo.lock"} & set(deps)


def test_byproducts_are_the_profile() -> None:
    (profile,) = written()[f"{BASE}.tar.gz.intoto.json"]["predicate"]["runDetails"]["byproducts"]
    assert profile["name"] == f"{BASE}-pgo.profdata"
    assert profile["digest"] == {"sha256": sha256_bytes(b"profile")}
    assert profile["annotations"]["executed_functions"] == 120


def test_every_statement_shares_one_predicate_and_no_machine_path() -> None:
    statements = provenance.statements(manifest(), FILES, cargo_lock=LOCK, zigbuild=ZIGBUILD)
    predicates = {json.dumps(json.loads(data)["predicate"], sort_keys=True) for data in statements.values()}
    assert len(predicates) == 1
    text = b"".join(statements.values()).decode()
    assert not [path for path in MACHINE_PATHS if path in text]
    assert statements == provenance.statements(manifest(), FILES, cargo_lock=LOCK, zigbuild=ZIGBUILD)


def test_an_artefact_that_is_not_the_manifest_s_refused() -> None:
    files = {**FILES, f"{BASE}-pgo.tar.gz": b"something else"}
    with pytest.raises(CheckFailed) as caught:
        provenance.statements(manifest(), files)
    assert isinstance(caught.value, PgoError) and "\n" not in caught.value.line()
    assert f"{BASE}-pgo.tar.gz has sha256" in caught.value.line()


def test_cargo_lock_is_the_workspace_s_inside_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "crates" / "hello").mkdir(parents=True)
    (tmp_path / "Cargo.lock").write_text("above the repository")
    assert provenance.find_cargo_lock(repo, "crates/hello/Cargo.toml") is None
    (repo / "Cargo.lock").write_text("workspace")
    assert provenance.find_cargo_lock(repo, "crates/hello/Cargo.toml") == ("Cargo.lock", sha256_bytes(b"workspace"))
    (repo / "crates" / "hello" / "Cargo.lock").write_text("own")
    assert provenance.find_cargo_lock(repo, "crates/hello/Cargo.toml") == (
        "crates/hello/Cargo.lock",
        sha256_bytes(b"own"),
    )
