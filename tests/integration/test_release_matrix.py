"""The release matrix on the hello fixture: ``nox -s release -- v1.0.0 --target <gnu> --target <musl>`` writes both
targets' files with one SHA256SUMS into one folder, ``verify`` passes on it, ``rebuild`` in another directory gives
both PGO binaries byte for byte; the folder split into one per target (as a CI matrix's legs upload them) is joined
again by ``--gather`` into the same files; and every refusal: a file of one target missing, a gather of two tags,
of two commits or of one file twice, a target given twice or unknown, a target that fails after another was
built (nothing is written). Then x86_64 and aarch64 (trained and checked under qemu-aarch64) in one release, the
aarch64 binary rebuilt alone by ``verify --rebuild --target``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.release.reproducible import parse_sha256sums, sha256sums_text
from recipes.store import sha256_file
from tests.conftest import assert_ok, assert_refused, run_nox
from tests.integration import test_aarch64
from tests.integration.test_musl import NEEDS_MUSL
from tests.integration.test_release import TAG, Release, make_repo

GNU = "x86_64-unknown-linux-gnu"
MUSL = "x86_64-unknown-linux-musl"
TARGETS = (GNU, MUSL)


def base(triple: str) -> str:
    return f"hello-pgo-{TAG}-{triple}"


pytestmark = [pytest.mark.slow, NEEDS_MUSL]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """One release of hello for both targets, in dist/v1.0.0/ of a tagged repository."""
    return Release.new(tmp_path_factory.mktemp("matrix")).made("--target", GNU, "--target", MUSL)


def _manifest(folder: Path, triple: str) -> dict[str, Any]:
    data = json.loads((folder / f"{base(triple)}-manifest.json").read_text())
    assert isinstance(data, dict)
    return data


def _resum(folder: Path) -> None:
    sums = {p.name: sha256_file(p) for p in folder.iterdir() if p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_text(sha256sums_text(sums))


def _legs(released: Release, root: Path) -> dict[str, Path]:
    """The release's folder split into one folder per target, each with its own SHA256SUMS: what each leg of the CI
    matrix uploads."""
    legs = {}
    for triple in TARGETS:
        leg = root / f"leg-{triple}"
        leg.mkdir(parents=True)
        for path in released.dist.iterdir():
            if path.name.startswith(base(triple)):
                shutil.copy(path, leg / path.name)
        _resum(leg)
        legs[triple] = leg
    return legs


def test_two_targets_in_one_folder_with_one_sha256sums(released: Release) -> None:
    dist = released.dist
    names = {p.name for p in dist.iterdir()}
    for triple in TARGETS:
        b = base(triple)
        artefacts = (f"{b}.tar.gz", f"{b}-pgo.tar.gz", f"{b}-pgo.profdata")
        assert {*artefacts, *(f"{a}.intoto.json" for a in artefacts), f"{b}-manifest.json"} <= names
    assert len(names) == 15 and "SHA256SUMS" in names
    sums = parse_sha256sums((dist / "SHA256SUMS").read_text())
    assert set(sums) == names - {"SHA256SUMS"}
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=dist, check=True, capture_output=True)
    gnu, musl = _manifest(dist, GNU), _manifest(dist, MUSL)
    assert (gnu["triple"], musl["triple"]) == TARGETS
    for key in ("tag", "commit", "commit_time", "source_date_epoch", "toolchain"):
        assert gnu[key] == musl[key], key
    assert gnu["profile_sha256"] != musl["profile_sha256"]  # each trained on its own binary
    assert gnu["libc"].startswith("glibc ") and musl["libc"] == "static, needs no glibc"
    assert gnu["cpu_baseline"]["cpu"] == musl["cpu_baseline"]["cpu"] and gnu["cpu_baseline"]["cpu"].startswith("qemu64")
    # each target its own pipeline in its own work dir under PGO_OUT
    for triple in TARGETS:
        report = json.loads((released.work / triple / "report.json").read_text())
        assert report["optimise"]["profile_sha256"] == _manifest(dist, triple)["profile_sha256"]
        assert f"--target {triple}" in (released.work / triple / "logs" / "optimise-build.log").read_text()
        assert (released.work / triple / "cpu-baseline" / "pgo").is_dir()
    assert not (released.work / "report.json").exists()
    assert f"release: 15 files in {dist}" in released.text
    assert f"nox >   {GNU}: both binaries glibc" in released.text
    assert f"nox >   {MUSL}: both binaries static, needs no glibc" in released.text
    verified = assert_ok(run_nox("verify", released.env(), [TAG]))
    assert f"verified {TAG}: 14 files, 6 provenance statements of 2 targets ({GNU}, {MUSL})" in verified
    assert "ok  hello/Cargo.lock is the tag's" in verified


@pytest.mark.refuses("rebuild-target-folder-holds-no-files", "verify-target-without-rebuild")
def test_both_targets_rebuilt_byte_for_byte_in_another_directory(released: Release, tmp_path: Path) -> None:
    download = tmp_path / "download"
    shutil.copytree(released.dist, download)
    shutil.rmtree(released.store, ignore_errors=True)  # the rebuild has only the published files
    work = tmp_path / "work"
    text = assert_ok(run_nox("rebuild", released.env(PGO_OUT=str(work)), [TAG, "--artefacts", str(download)]))
    for triple in TARGETS:
        pgo = _manifest(download, triple)["artefacts"]["pgo"]
        assert f"match     {pgo['file']}  rebuilt {pgo['sha256']}" in text
        assert f"match     {pgo['binary']}  rebuilt {pgo['binary_sha256']}" in text
        assert sha256_file(work / "rebuild" / TAG / triple / "stripped" / "hello-pgo") == pgo["binary_sha256"]
        log = (work / "rebuild" / TAG / triple / "logs" / "optimise-build.log").read_text()
        assert f"--target {triple}" in log
    assert "mismatch" not in text
    # --target picks the targets to rebuild: one the folder does not hold is refused before anything is built
    other = tmp_path / "other"
    line = assert_refused(
        run_nox(
            "rebuild",
            released.env(PGO_OUT=str(other)),
            [TAG, "--artefacts", str(download), "--target", "aarch64-unknown-linux-gnu"],
        ),
        f"--target aarch64-unknown-linux-gnu: the release {TAG} in {download} has no files of it",
    )
    assert f"it holds {GNU}, {MUSL}" in line
    line = assert_refused(
        run_nox("verify", released.env(PGO_OUT=str(other)), [TAG, "--artefacts", str(download), "--target", MUSL]),
        "verify checks every target's files: --target picks the targets verify --rebuild rebuilds",
    )
    assert not other.exists()


@pytest.mark.refuses("verify-rebuild-file-one-target-several-missing")
def test_a_file_of_one_target_missing_refused(released: Release, tmp_path: Path) -> None:
    download = tmp_path / "download"
    shutil.copytree(released.dist, download)
    (download / f"{base(MUSL)}-pgo.tar.gz").unlink()
    assert_refused(
        run_nox("verify", released.env(), [TAG, "--artefacts", str(download)]),
        f"{base(MUSL)}-pgo.tar.gz is in SHA256SUMS but not in {download}",
    )
    assert_refused(
        run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "w")), [TAG, "--artefacts", str(download)]),
        f"{base(MUSL)}-pgo.tar.gz is missing",
    )
    _resum(download)  # its line gone too: the one SHA256SUMS still has to list every file of every manifest
    assert_refused(
        run_nox("verify", released.env(), [TAG, "--artefacts", str(download)]),
        f"SHA256SUMS has no line for {base(MUSL)}-pgo.tar.gz",
    )
    assert not (tmp_path / "w").exists(), "refused before anything was built"


def test_the_legs_gathered_into_the_same_folder(released: Release, tmp_path: Path) -> None:
    legs = _legs(released, tmp_path)
    out = tmp_path / "gathered"
    text = assert_ok(
        run_nox("release", released.env(), [TAG, "--gather", *map(str, legs.values()), "--artefacts", str(out)])
    )
    assert f"gathered {TAG} (" in text and "15 files, one SHA256SUMS" in text
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {p.name: p.read_bytes() for p in released.dist.iterdir()}
    assert_ok(run_nox("verify", released.env(), [TAG, "--artefacts", str(out)]))


@pytest.mark.refuses(
    "gather-gather-target-config-option",
    "gather-folder-file-not-sha256sums-missing-not",
    "gather-folder-without-manifest-one-not-json",
    "gather-two-folders-different-commits",
    "release-gather-file-name-two-targets-folders",
)
def test_a_gather_of_two_tags_two_commits_or_a_file_twice_refused(released: Release, tmp_path: Path) -> None:
    legs = _legs(released, tmp_path)
    out = tmp_path / "gathered"

    def gather(*folders: Path) -> subprocess.CompletedProcess[str]:
        return run_nox("release", released.env(), [TAG, "--gather", *map(str, folders), "--artefacts", str(out)])

    twice = tmp_path / "twice"
    shutil.copytree(legs[GNU], twice)
    assert_refused(
        gather(legs[GNU], legs[MUSL], twice), f"{base(GNU)}-manifest.json is in both {legs[GNU]} and {twice}"
    )

    musl_manifest = legs[MUSL] / f"{base(MUSL)}-manifest.json"
    original = musl_manifest.read_bytes()
    data = json.loads(original)
    musl_manifest.write_text(json.dumps({**data, "commit": "0" * 40}))
    _resum(legs[MUSL])
    commit = _manifest(released.dist, GNU)["commit"]
    assert_refused(
        gather(legs[GNU], legs[MUSL]),
        f"{legs[MUSL]} is {TAG} of commit 000000000000, {legs[GNU]} of {commit[:12]}",
        "every leg builds the same commit",
    )
    musl_manifest.write_text(json.dumps({**data, "tag": "v1.0.1"}))
    _resum(legs[MUSL])
    assert_refused(gather(legs[GNU], legs[MUSL]), f"{musl_manifest.name} in {legs[MUSL]} is of 'v1.0.1', not {TAG}")
    musl_manifest.write_bytes(original)
    _resum(legs[MUSL])
    (legs[MUSL] / f"{base(MUSL)}.tar.gz").write_bytes(b"another tarball")  # its leg's own SHA256SUMS says otherwise
    assert_refused(gather(legs[GNU], legs[MUSL]), f"{base(MUSL)}.tar.gz in {legs[MUSL]} has sha256")
    assert not out.exists()
    for option in (["--target", GNU], ["--min-functions", "3"]):
        assert_refused(
            run_nox("release", released.env(), [TAG, "--gather", str(legs[GNU]), *option]),
            f"--gather joins folders: {option[0]} is not an option of it",
        )


@pytest.mark.refuses("pgo-target-target-release-several-not-target", "release-target-given-twice-without-glibc-suffix")
def test_a_target_twice_or_unknown_refused_before_anything_is_built(released: Release, tmp_path: Path) -> None:
    env = released.env(PGO_OUT=str(tmp_path / "work"))
    where = ["--artefacts", str(tmp_path / "dist")]
    assert_refused(
        run_nox("release", env, [TAG, "--target", GNU, "--target", MUSL, "--target", GNU, *where]),
        f"--target {GNU} is given twice",
        "give each target once",
    )
    assert_refused(
        run_nox("release", env, [TAG, "--target", GNU, "--target", f"{GNU}.2.28", *where]),
        f"--target {GNU} and --target {GNU}.2.28 are both {GNU}",
    )
    assert_refused(
        run_nox("release", env, [TAG, "--target", GNU, "--target", "x86_64-unknown-linux-gun", *where]),
        "--target=x86_64-unknown-linux-gun is not a target this rustc knows",
    )
    assert not (tmp_path / "work").exists() and not (tmp_path / "dist").exists()


@pytest.mark.refuses("release-several-targets-one-fails-after-another")
def test_a_target_that_fails_after_another_was_built_leaves_no_folder(tmp_path: Path) -> None:
    """The glibc target is released whole, then musl's instrumented build cannot link: the release stops and its
    folder is not there, not even with the glibc files."""
    repo = make_repo(tmp_path)
    release = Release(tmp_path, repo, repo / "dist" / TAG, tmp_path / "work", tmp_path / "store", "")
    env = release.env(CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER="false")
    proc = run_nox("release", env, [TAG, "--target", GNU, "--target", MUSL])
    assert_refused(proc, "the instrumented build failed", f"{tmp_path / 'work' / MUSL / 'logs'}/instrument-build.log")
    assert (tmp_path / "work" / GNU / "release" / TAG / "pgo" / "hello-pgo").is_file(), "the glibc target was built"
    assert not (repo / "dist").exists(), "nothing written, not even a staging folder"


@pytest.mark.skipif(
    not test_aarch64._target_installed()
    or shutil.which("aarch64-linux-gnu-gcc") is None
    or shutil.which("qemu-aarch64") is None,
    reason="needs `rustup target add aarch64-unknown-linux-gnu`, gcc-aarch64-linux-gnu and qemu-user",
)
def test_x86_64_and_aarch64_in_one_release_and_the_aarch64_binary_rebuilt_alone(tmp_path: Path) -> None:
    """Each target checked on its own baseline CPU (the manifest says which model); verify --rebuild --target
    rebuilds the aarch64 PGO binary only, byte for byte."""
    aarch64 = "aarch64-unknown-linux-gnu"
    repo = make_repo(tmp_path)
    release = Release(tmp_path, repo, repo / "dist" / TAG, tmp_path / "work", tmp_path / "store", "")
    assert_ok(run_nox("release", release.env(), [TAG, "--target", GNU, "--target", aarch64]))
    assert len(list(release.dist.iterdir())) == 15
    assert _manifest(release.dist, aarch64)["cpu_baseline"]["cpu"] == "cortex-a53"
    assert _manifest(release.dist, GNU)["cpu_baseline"]["cpu"].startswith("qemu64,")
    machine = subprocess.run(
        ["readelf", "-h", str(tmp_path / "work" / aarch64 / "release" / TAG / "pgo" / "hello-pgo")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "AArch64" in machine
    text = assert_ok(
        run_nox("verify", release.env(PGO_OUT=str(tmp_path / "w")), [TAG, "--rebuild", "--target", aarch64])
    )
    assert f"verified {TAG}: 14 files, 6 provenance statements of 2 targets ({aarch64}, {GNU})" in text
    pgo = _manifest(release.dist, aarch64)["artefacts"]["pgo"]
    assert f"match     {pgo['binary']}  rebuilt {pgo['binary_sha256']}" in text and "mismatch" not in text
    assert base(GNU) not in text.split("verified")[-1], "only the aarch64 target was rebuilt"
    assert not (tmp_path / "w" / "rebuild" / TAG / GNU).exists()
