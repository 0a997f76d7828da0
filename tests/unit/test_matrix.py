"""The release matrix's pure parts (recipes/release/matrix.py, and what verify and rebuild read of a folder of several
targets): the posargs, the targets checked before anything is built, the files of several targets joined, the gather
of per-target folders and each of its refusals, on small folders written here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused, MissingInput, PgoError
from recipes.release import matrix, provenance, rebuild
from recipes.release.make import join_files, refuse_release_folder_inside
from recipes.release.manifest import MANIFEST_SCHEMA
from recipes.release.reproducible import parse_sha256sums, sha256_bytes, sha256sums_text
from recipes.release.reproducible.tags import take_all, take_gather
from tests.conftest import clean_env
from tests.unit.test_provenance import BASE, load_published, publish

TAG = "v1.0.0"
COMMIT = "ab" * 20
GNU = "x86_64-unknown-linux-gnu"
MUSL = "x86_64-unknown-linux-musl"


@pytest.mark.refuses("release-rebuild-target-without-value")
def test_take_all_takes_every_value_of_a_repeated_option() -> None:
    argv = ["--target", GNU, "--min-functions", "3", f"--target={MUSL}", "--artefacts", "d"]
    assert take_all(argv, "--target") == ([GNU, MUSL], ["--min-functions", "3", "--artefacts", "d"])
    assert take_all(["--artefacts", "d"], "--target") == ([], ["--artefacts", "d"])
    for argv in (["--target"], ["--target", "--artefacts", "d"]):
        with pytest.raises(ConfigError, match="--target needs a value"):
            take_all(argv, "--target")


@pytest.mark.refuses("gather-gather-without-folder-given-twice")
def test_take_gather_takes_the_folders_up_to_the_next_option() -> None:
    assert take_gather(["--artefacts", "out"]) == (None, ["--artefacts", "out"])
    argv = ["--gather", "a", "b", "--artefacts", "out"]
    assert take_gather(argv) == (["a", "b"], ["--artefacts", "out"])
    assert take_gather(["--artefacts", "out", "--gather", "a"]) == (["a"], ["--artefacts", "out"])
    with pytest.raises(ConfigError, match=r"--gather needs at least one folder \(write --gather DIR"):
        take_gather(["--gather", "--artefacts", "out"])
    with pytest.raises(ConfigError, match="--gather is given twice"):
        take_gather(["--gather", "a", "--artefacts", "o", "--gather", "b"])


@pytest.mark.refuses("release-target-given-twice-without-glibc-suffix")
def test_a_target_twice_refused_with_or_without_its_glibc_suffix() -> None:
    assert matrix.refuse_twice([GNU, MUSL, "aarch64-unknown-linux-gnu.2.28"]) == [
        GNU,
        MUSL,
        "aarch64-unknown-linux-gnu",
    ]
    with pytest.raises(ConfigError, match=rf"--target {GNU} is given twice: a release has one set of files per"):
        matrix.refuse_twice([GNU, MUSL, GNU])
    with pytest.raises(ConfigError, match=rf"--target {GNU}.2.28 and --target {GNU} are both {GNU}"):
        matrix.refuse_twice([f"{GNU}.2.28", GNU])


@pytest.mark.refuses("pgo-target-target-release-several-not-target")
def test_target_configs_one_work_dir_per_target_of_several(tmp_path: Path) -> None:
    env = clean_env({"PGO_OUT": str(tmp_path / "work")})
    (plain,) = matrix.target_configs(tmp_path, env, [], [])
    assert (plain.target, plain.out) == (None, tmp_path / "work")
    (one,) = matrix.target_configs(tmp_path, env, ["--min-functions", "3"], [MUSL])
    assert (one.target, one.out, one.min_functions) == (MUSL, tmp_path / "work", 3)
    several = matrix.target_configs(tmp_path, env, [], [f"{GNU}.2.28", MUSL])
    assert [(c.target, c.out) for c in several] == [
        (f"{GNU}.2.28", tmp_path / "work" / GNU),
        (MUSL, tmp_path / "work" / MUSL),
    ]
    with pytest.raises(ConfigError, match="--target=x86_64-unknown-linux-gun is not a target this rustc knows"):
        matrix.target_configs(tmp_path, env, [], [GNU, "x86_64-unknown-linux-gun"])


@pytest.mark.refuses("target-standard-library-not-installed")
def test_a_target_of_several_without_its_std_refused_before_the_first_is_built(tmp_path: Path) -> None:
    env = clean_env({"PGO_OUT": str(tmp_path / "work")})
    riscv = "riscv64gc-unknown-linux-gnu"  # known to rustc, its std installed in no toolchain here
    with pytest.raises(ConfigError) as caught:
        matrix.target_configs(tmp_path, env, [], [GNU, riscv])
    assert caught.value.message.startswith(f"--target={riscv}: the standard library for {riscv} is not installed")
    assert caught.value.hint.startswith("install it: rustup target add --toolchain ")
    assert caught.value.hint.endswith(f"-{GNU} {riscv}")  # the toolchain rustup chose for the crate's folder


@pytest.mark.refuses("release-folder-inside-work-dir-or-store")
def test_a_release_folder_inside_the_work_dir_of_several_targets_refused(tmp_path: Path) -> None:
    """Several targets: PGO_OUT holds their work dirs; a release folder anywhere in it is refused, one beside it
    is not (tests/integration/test_workdir_claim.py: one target, by nox)."""
    env = clean_env({"PGO_OUT": str(tmp_path / "work"), "PGO_PROFILE_STORE": str(tmp_path / "store")})
    several = matrix.target_configs(tmp_path, env, [], [GNU, MUSL])
    for folder in (tmp_path / "work" / "dist", tmp_path / "work" / MUSL / "release" / TAG):
        with pytest.raises(EnvironmentRefused) as caught:
            refuse_release_folder_inside(several, folder)
        assert caught.value.message.startswith(f"the release folder {folder} is inside PGO_OUT={tmp_path / 'work'},")
    with pytest.raises(EnvironmentRefused, match=f"inside PGO_PROFILE_STORE={tmp_path / 'store'}, whose folders"):
        refuse_release_folder_inside(several, tmp_path / "store" / TAG)
    refuse_release_folder_inside(several, tmp_path / "dist" / TAG)
    refuse_release_folder_inside(several, tmp_path / "work-dist")  # a neighbour, not inside


@pytest.mark.refuses("release-gather-file-name-two-targets-folders")
def test_files_of_two_targets_joined_and_a_name_in_both_refused() -> None:
    assert join_files({"a": {"x": b"1"}, "b": {"y": b"2"}}) == {"x": b"1", "y": b"2"}
    with pytest.raises(CheckFailed, match="x is in both a and b"):
        join_files({"a": {"x": b"1"}, "b": {"x": b"1"}})


def leg(root: Path, triple: str, *, tag: str = TAG, commit: str = COMMIT) -> Path:
    """A folder as one leg of the matrix uploads it: its files, a manifest of its tag and commit, SHA256SUMS."""
    folder = root / f"leg-{triple}"
    folder.mkdir(parents=True)
    base = f"hello-pgo-{tag}-{triple}"
    (folder / f"{base}-pgo.tar.gz").write_bytes(f"tarball of {triple}".encode())
    manifest = {"schema": MANIFEST_SCHEMA, "tag": tag, "commit": commit, "triple": triple}
    (folder / f"{base}-manifest.json").write_text(json.dumps(manifest))
    resum(folder)
    return folder


@pytest.mark.refuses("gather-manifest-another-schema", "gather-two-manifests-one-target")
def test_a_gather_refuses_what_verify_of_the_gathered_folder_would(tmp_path: Path) -> None:
    """A manifest of another schema, and two manifests of one target in the legs: the gather wrote folders that
    verify then refused; now it refuses them and writes nothing."""
    gnu, musl = leg(tmp_path, GNU), leg(tmp_path, MUSL)
    out = tmp_path / "out"
    manifest = musl / f"hello-pgo-{TAG}-{MUSL}-manifest.json"
    manifest.write_text(json.dumps({"schema": 2, "tag": TAG, "commit": COMMIT, "triple": MUSL}))
    resum(musl)
    with pytest.raises(CheckFailed) as caught:
        matrix.gather(TAG, [gnu, musl], out)
    assert caught.value.line().startswith(
        f"{manifest.name} in {musl} has schema 2; this pgo-recipes reads manifests of schema {MANIFEST_SCHEMA}"
    )
    assert not out.exists()
    manifest.write_text(json.dumps({"schema": MANIFEST_SCHEMA, "tag": TAG, "commit": COMMIT, "triple": GNU}))
    resum(musl)
    with pytest.raises(ConfigError) as refused:
        matrix.gather(TAG, [gnu, musl], out)
    assert refused.value.line() == (
        f"2 manifests of {TAG} in the 2 folders gathered (gather one folder per target: hello-pgo-{TAG}-{GNU}-"
        f"manifest.json in {gnu} and {manifest.name} in {musl} are both of {GNU})"
    )
    assert not out.exists()


def resum(folder: Path) -> None:
    sums = {p.name: sha256_bytes(p.read_bytes()) for p in folder.iterdir() if p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_text(sha256sums_text(sums))


@pytest.mark.refuses("gather-folder-named-twice-gathered-folder-already")
def test_two_legs_gathered_into_one_folder_with_one_sha256sums(tmp_path: Path) -> None:
    gnu, musl = leg(tmp_path, GNU), leg(tmp_path, MUSL)
    out = tmp_path / "out" / TAG
    lines = matrix.gather(TAG, [gnu, musl], out)
    assert lines[0] == f"gathered {TAG} ({COMMIT[:12]}) in {out}: 5 files, one SHA256SUMS"
    assert lines[1:] == [f"  {gnu}: 2 files", f"  {musl}: 2 files"]
    names = {p.name for p in out.iterdir()}
    assert names == {p.name for p in (*gnu.iterdir(), *musl.iterdir())}
    sums = parse_sha256sums((out / "SHA256SUMS").read_text())
    assert set(sums) == names - {"SHA256SUMS"}
    assert all(sha256_bytes((out / name).read_bytes()) == digest for name, digest in sums.items())
    with pytest.raises(EnvironmentRefused, match=rf"{out} already exists"):
        matrix.gather(TAG, [gnu, musl], out)


@pytest.mark.refuses(
    "gather-folder-named-twice-gathered-folder-already",
    "gather-folder-file-not-sha256sums-missing-not",
    "gather-folder-without-manifest-one-not-json",
    "gather-two-folders-different-commits",
)
def test_a_gather_refused_for_each_inconsistency(tmp_path: Path) -> None:
    gnu, musl = leg(tmp_path, GNU), leg(tmp_path, MUSL)
    out = tmp_path / "out"

    def refused(folders: list[Path], words: str) -> None:
        with pytest.raises(PgoError, match=words):
            matrix.gather(TAG, folders, out)
        assert not out.exists()

    refused([gnu, gnu], "--gather names a folder twice")
    refused([gnu, tmp_path / "nowhere"], rf"no artefacts of {TAG} at {tmp_path / 'nowhere'}")
    other = leg(tmp_path / "other-commit", MUSL, commit="cd" * 20)
    refused([gnu, other], rf"{other} is {TAG} of commit cdcdcdcdcdcd, {gnu} of abababababab")
    other_tag = leg(tmp_path / "other-tag", MUSL, tag="v1.0.1")
    refused([gnu, other_tag], rf"hello-pgo-v1.0.1-{MUSL}-manifest.json in {other_tag} is of 'v1.0.1', not {TAG}")
    copy = tmp_path / "copy"
    shutil.copytree(gnu, copy)
    refused([gnu, musl, copy], rf"hello-pgo-{TAG}-{GNU}-manifest.json is in both {gnu} and {copy}")

    (musl / "notes.txt").write_text("not a release file\n")
    refused([gnu, musl], rf"notes.txt in {musl} is a file its SHA256SUMS does not list")
    (musl / "notes.txt").unlink()
    (musl / "sub").mkdir()
    refused([gnu, musl], rf"sub in {musl} is a directory its SHA256SUMS does not list")
    (musl / "sub").rmdir()
    tarball = musl / f"hello-pgo-{TAG}-{MUSL}-pgo.tar.gz"
    tarball.write_bytes(b"changed")
    refused([gnu, musl], rf"{tarball.name} in {musl} has sha256 {sha256_bytes(b'changed')}, its SHA256SUMS says")
    tarball.unlink()
    with pytest.raises(MissingInput, match=rf"{tarball.name} is in SHA256SUMS but not in {musl}"):
        matrix.gather(TAG, [gnu, musl], out)

    manifest = musl / f"hello-pgo-{TAG}-{MUSL}-manifest.json"
    tarball.write_bytes(f"tarball of {MUSL}".encode())
    manifest.write_text("[]")
    resum(musl)
    refused([gnu, musl], rf"{manifest.name} in {musl} is not a manifest \(not a JSON object\)")
    manifest.unlink()
    resum(musl)
    refused([gnu, musl], rf"{musl} holds no manifest \(gather the folders of {TAG}'s release\)")
    manifest.write_text(json.dumps({"tag": TAG, "triple": MUSL}))
    resum(musl)
    refused([gnu, musl], rf"{manifest.name} in {musl}: 'commit' is missing")
    manifest.write_text(json.dumps({"tag": TAG, "commit": 1}))
    resum(musl)
    refused([gnu, musl], rf"{manifest.name} in {musl}: 'commit' is the number 1, not a string")
    manifest.write_text(json.dumps({"tag": TAG, "commit": COMMIT}))
    (musl / f"hello-pgo-{TAG}-aarch64-unknown-linux-gnu-manifest.json").write_text(
        json.dumps({"tag": TAG, "commit": "cd" * 20})
    )
    resum(musl)
    refused([gnu, musl], rf"the manifests in {musl} are of 2 commits")


def two_targets(tmp_path: Path, *, commit: str | None = None) -> Path:
    """test_provenance's release with a second target's files beside it (every name and the manifest's triple
    changed, optionally its commit) and one SHA256SUMS over both."""
    published = publish(tmp_path)
    other = "aarch64-unknown-linux-gnu"
    for path in sorted(published.dist.iterdir()):
        if path.name.startswith(BASE):
            data = path.read_bytes()
            if path.name.endswith("-manifest.json"):
                manifest = json.loads(data.decode().replace(GNU, other))
                manifest["commit"] = commit or manifest["commit"]
                data = provenance.encode(manifest)
            (published.dist / path.name.replace(GNU, other)).write_bytes(data)
    published.resum()
    return published.dist


@pytest.mark.refuses(
    "verify-rebuild-manifests-folder-several-targets-different", "rebuild-target-folder-holds-no-files"
)
def test_a_folder_of_two_targets_read_by_rebuild_and_of_two_commits_refused(tmp_path: Path) -> None:
    dist = two_targets(tmp_path / "same")
    assert [p.names.triple for p in rebuild.load_release(dist, TAG)] == ["aarch64-unknown-linux-gnu", GNU]
    with pytest.raises(ValueError, match="holds 2 targets' releases: use load_release"):
        load_published(dist, TAG)
    published = rebuild.load_release(dist, TAG)
    assert rebuild.select_targets(published, [], TAG) == published
    assert rebuild.select_targets(published, [f"{GNU}.2.28"], TAG) == [published[1]]
    with pytest.raises(ConfigError, match=rf"--target {MUSL}: the release {TAG} in {dist} has no files of it"):
        rebuild.select_targets(published, [MUSL], TAG)

    dist = two_targets(tmp_path / "two-commits", commit="cd" * 20)
    words = rf"the manifests of {TAG} disagree on the commit: hello-pgo-{TAG}-aarch64-unknown-linux-gnu-manifest.json"
    with pytest.raises(CheckFailed, match=words):
        rebuild.load_release(dist, TAG)
    with pytest.raises(CheckFailed, match=words):
        provenance.verify(TAG, dist, None, clean_env())


@pytest.mark.refuses("verify-no-manifest-tag-manifest-another-tag")
def test_verify_of_no_manifest_of_the_tag_refused(tmp_path: Path) -> None:
    published = publish(tmp_path)
    (published.dist / f"{BASE}-manifest.json").unlink()
    published.resum()
    with pytest.raises(CheckFailed, match=rf"0 manifests of {TAG} in SHA256SUMS \(download every file"):
        provenance.verify(TAG, published.dist, None, clean_env())


def test_two_manifests_of_one_target_found_among_others_that_are_not_manifests(tmp_path: Path) -> None:
    """The one-target-twice check reads each manifest's triple before the manifests are checked: what is not a
    manifest is left to its own check, which then refuses it."""
    provenance.refuse_one_target_twice({"a": GNU, "b": None, "c": MUSL}, TAG, "here", "keep one")
    with pytest.raises(ConfigError, match=rf"3 manifests of {TAG} here \(keep one: a and c are both of {GNU}\)"):
        provenance.refuse_one_target_twice({"a": GNU, "b": None, "c": GNU}, TAG, "here", "keep one")
    dist = two_targets(tmp_path)
    (dist / f"hello-pgo-{TAG}-aarch64-unknown-linux-gnu-manifest.json").write_text("{not json")
    with pytest.raises(CheckFailed, match=r"aarch64-unknown-linux-gnu-manifest\.json has sha256"):
        rebuild.load_release(dist, TAG)
