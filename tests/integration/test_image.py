"""``nox -s image`` on a release of hello for x86_64 and aarch64 musl: the OCI image layout in the release's folder
(one image per platform, FROM scratch, the PGO binary alone in its layer, the labels), the same index digest from the
release copied to another path, the layout validated by skopeo, unpacked by umoci and its binaries run through the
workload's verify replay (x86_64 here, aarch64 under qemu-aarch64); and every refusal, none leaving a layout."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import PgoError
from recipes.release import manifest as release_manifest
from recipes.release.image import (
    annotations_of,
    build_layout,
    check_layout,
    choose_targets,
    index_annotations,
    labels_of,
    pgo_binary,
    read_manifests,
    rebuild_image,
    record_image,
)
from recipes.release.make import write_dir
from recipes.release.provenance import read_manifest
from recipes.release.reproducible import (
    Image,
    Platform,
    image_layout,
    parse_sha256sums,
    sha256_bytes,
    sha256sums_text,
    tar_bytes,
)
from recipes.release.reproducible.oci import Base, canonical_json
from recipes.toolchain import emulation
from recipes.workdir import WorkDir
from tests.conftest import REPO, assert_ok, assert_refused, clean_env, run_nox, train_workload
from tests.integration import test_aarch64
from tests.integration.test_musl import NEEDS_MUSL
from tests.integration.test_release import TAG, Release, git

X86 = "x86_64-unknown-linux-musl"
ARM = "aarch64-unknown-linux-musl"
SOURCE = "https://example.org/hello-pgo"
LAYOUT = f"hello-pgo-{TAG}-image"
INDEX = f"{LAYOUT}-index.json"


def _arm_musl_installed() -> bool:
    done = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=False)
    return ARM in done.stdout.split()


pytestmark = [
    pytest.mark.slow,
    NEEDS_MUSL,
    pytest.mark.skipif(
        not _arm_musl_installed() or shutil.which("qemu-aarch64") is None or not test_aarch64._target_installed(),
        reason=f"needs `rustup target add {ARM}` and qemu-user",
    ),
    pytest.mark.skipif(
        shutil.which("skopeo") is None or shutil.which("umoci") is None, reason="needs skopeo and umoci (apt)"
    ),
]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """One release of hello for both musl targets (about 30 s), left as written: each test copies its folder."""
    return Release.new(tmp_path_factory.mktemp("image")).made("--target", X86, "--target", ARM)


@dataclasses.dataclass(frozen=True)
class Imaged:
    dist: Path
    text: str

    @property
    def layout(self) -> Path:
        return self.dist / LAYOUT

    @property
    def index_digest(self) -> str:
        found = re.search(r"index (sha256:[0-9a-f]{64}) \(2 platforms\)", self.text)
        assert found, self.text[-3000:]
        return found.group(1)

    def blob(self, digest: str) -> bytes:
        return (self.layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()

    def json_blob(self, digest: str) -> dict[str, Any]:
        data = json.loads(self.blob(digest))
        assert isinstance(data, dict)
        return data


def _image(released: Release, dist: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return run_nox("image", released.env(), [TAG, "--artefacts", str(dist), "--source", SOURCE, *more])


@pytest.fixture(scope="module")
def imaged(released: Release, tmp_path_factory: pytest.TempPathFactory) -> Imaged:
    dist = released.download(tmp_path_factory.mktemp("imaged") / TAG)
    return Imaged(dist, assert_ok(_image(released, dist)))


def test_a_clone_at_another_path_releases_and_images_every_file_the_same(
    released: Release, imaged: Imaged, tmp_path: Path
) -> None:
    """The tag released for both targets again from a clone at another path, with its own work dir (the store is the
    machine's one): every file of the release is the same, the manifests, statements and SHA256SUMS included (the
    manifest named the checkout's and the work dir's paths before), and so is the image made from it."""
    clone = tmp_path / "elsewhere" / "deeper" / "repo"
    clone.parent.mkdir(parents=True)
    git(clone.parent, "clone", "-q", str(released.repo), str(clone))
    other = Release(tmp_path, clone, clone / "dist" / TAG, tmp_path / "work", released.store, "")
    other = other.made("--target", X86, "--target", ARM)
    files = sorted(p.name for p in released.dist.iterdir())
    assert sorted(p.name for p in other.dist.iterdir()) == files
    for name in files:
        assert (other.dist / name).read_bytes() == (released.dist / name).read_bytes(), name
    manifest = json.loads((other.dist / f"hello-pgo-{TAG}-{X86}-manifest.json").read_text())
    assert not [p for pair in manifest["remap_path_prefix"] for p in pair if str(tmp_path) in p or "/root" in p]
    image = Imaged(other.dist, assert_ok(_image(other, other.dist)))
    assert image.index_digest == imaged.index_digest
    files = sorted(str(p.relative_to(imaged.dist)) for p in imaged.dist.rglob("*") if p.is_file())
    assert sorted(str(p.relative_to(other.dist)) for p in other.dist.rglob("*") if p.is_file()) == files
    assert INDEX in files and "SHA256SUMS" in files
    for name in files:  # the image layout, its index and the SHA256SUMS that now lists it
        assert (other.dist / name).read_bytes() == (imaged.dist / name).read_bytes(), name


def _manifests(dist: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for triple in (X86, ARM):
        data = json.loads((dist / f"hello-pgo-{TAG}-{triple}-manifest.json").read_text())
        assert isinstance(data, dict)
        found[triple] = data
    return found


def _no_layout_left(dist: Path) -> None:
    assert not (dist / LAYOUT).exists()
    assert not [p.name for p in dist.iterdir() if p.name.startswith(f".{LAYOUT}")], "no staging folder left"


def test_one_image_per_platform_with_the_pgo_binary_alone_and_its_labels(imaged: Imaged, released: Release) -> None:
    manifests = _manifests(imaged.dist)
    top = json.loads((imaged.layout / "index.json").read_text())
    assert top["manifests"][0]["digest"] == imaged.index_digest
    assert top["manifests"][0]["annotations"] == {"org.opencontainers.image.ref.name": TAG}
    assert json.loads((imaged.layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = imaged.json_blob(imaged.index_digest)
    assert [m["platform"] for m in index["manifests"]] == [
        {"os": "linux", "architecture": "amd64"},
        {"os": "linux", "architecture": "arm64", "variant": "v8"},
    ]
    for descriptor, triple in zip(index["manifests"], (X86, ARM), strict=True):
        release = manifests[triple]
        image = imaged.json_blob(descriptor["digest"])
        config = imaged.json_blob(image["config"]["digest"])
        assert config["created"] == "2026-03-04T05:06:07Z"  # the commit's time, SOURCE_DATE_EPOCH
        assert config["config"]["Entrypoint"] == ["/hello-pgo"]
        assert config["config"]["Labels"] == {
            "org.opencontainers.image.source": SOURCE,
            "org.opencontainers.image.revision": release["commit"],
            "org.opencontainers.image.version": "1.0.0",
            "org.opencontainers.image.created": "2026-03-04T05:06:07Z",
            "org.opencontainers.image.title": "hello-pgo",
            "pgo-recipes.profile.sha256": release["profile_sha256"],
            "pgo-recipes.target": triple,
        }
        (layer,) = image["layers"]
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar"
        assert config["rootfs"]["diff_ids"] == [layer["digest"]]
        with tarfile.open(fileobj=io.BytesIO(imaged.blob(layer["digest"])), mode="r:") as tar:
            (member,) = tar.getmembers()  # the binary, nothing else
            assert (member.name, member.mode, member.uid, member.gid) == ("hello-pgo", 0o755, 0, 0)
            assert member.mtime == release["source_date_epoch"]
            stream = tar.extractfile(member)
            assert stream is not None
            assert sha256_bytes(stream.read()) == release["artefacts"]["pgo"]["binary_sha256"]
        assert f"  {descriptor['platform']['os']}/{descriptor['platform']['architecture']}" in imaged.text
    assert f"nox >   inspect: skopeo inspect oci:{imaged.layout}:{TAG}" in imaged.text
    # every blob named by its digest; the release's own files untouched, and verify still passes with the layout there
    for blob in (imaged.layout / "blobs" / "sha256").iterdir():
        assert sha256_bytes(blob.read_bytes()) == blob.name
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=imaged.dist, check=True, capture_output=True)
    assert set(parse_sha256sums((imaged.dist / "SHA256SUMS").read_text())) == {
        p.name for p in imaged.dist.iterdir() if p.name not in ("SHA256SUMS", LAYOUT)
    }
    # the image recorded in the release: SHA256SUMS' line of the index's copy is the index digest, and the
    # statement's subject that digest
    sums = parse_sha256sums((imaged.dist / "SHA256SUMS").read_text())
    assert f"sha256:{sums[INDEX]}" == imaged.index_digest
    assert (imaged.dist / INDEX).read_bytes() == imaged.blob(imaged.index_digest)
    stated = json.loads((imaged.dist / f"{INDEX}.intoto.json").read_text())
    assert stated["subject"] == [{"name": LAYOUT, "digest": {"sha256": sums[INDEX]}}]
    assert stated["predicate"]["buildDefinition"]["externalParameters"] == {
        "tag": TAG,
        "source": SOURCE,
        "platforms": ["linux/amd64", "linux/arm64/v8"],
    }
    assert [d["name"] for d in stated["predicate"]["buildDefinition"]["resolvedDependencies"]] == [
        f"hello-pgo-{TAG}-{X86}-pgo.tar.gz",
        f"hello-pgo-{TAG}-{ARM}-pgo.tar.gz",
    ]
    verified = assert_ok(run_nox("verify", released.env(), [TAG, "--artefacts", str(imaged.dist)]))
    assert f"ok  {INDEX}: the image index {imaged.index_digest}, SHA256SUMS and {INDEX}.intoto.json name it" in (
        verified
    )
    for platform, triple in (("linux/amd64", X86), ("linux/arm64/v8", ARM)):
        assert f"ok  {LAYOUT}: the {platform} image holds {triple}'s PGO binary alone" in verified
    assert f"ok  {LAYOUT}: index {imaged.index_digest}, as nox -s image writes it from this release" in verified


def test_the_same_release_at_another_path_gives_the_same_index_digest(
    imaged: Imaged, released: Release, tmp_path: Path
) -> None:
    other = released.download(tmp_path / "elsewhere" / "deeper" / TAG)
    again = Imaged(other, assert_ok(_image(released, other)))
    assert again.index_digest == imaged.index_digest
    files = {str(p.relative_to(imaged.layout)): p.read_bytes() for p in imaged.layout.rglob("*") if p.is_file()}
    assert files == {str(p.relative_to(again.layout)): p.read_bytes() for p in again.layout.rglob("*") if p.is_file()}


def _skopeo(*args: str) -> str:
    return subprocess.run(["skopeo", *args], capture_output=True, text=True, check=True).stdout


def test_the_layout_validated_unpacked_and_its_binaries_run(imaged: Imaged, tmp_path: Path) -> None:
    """skopeo reads the layout as a registry client would; umoci (which takes one image, not an index) unpacks each
    platform's image after skopeo copied it out; the unpacked binaries get through the workload's verify replay."""
    manifests = _manifests(imaged.dist)
    for arch, triple in (("amd64", X86), ("arm64", ARM)):
        seen = json.loads(_skopeo("inspect", "--override-arch", arch, f"oci:{imaged.layout}:{TAG}"))
        assert seen["Digest"] == imaged.index_digest
        assert (seen["Architecture"], seen["Os"]) == (arch, "linux")
        assert seen["Labels"]["pgo-recipes.target"] == triple
        one = tmp_path / f"oci-{arch}"
        _skopeo("copy", "--override-arch", arch, f"oci:{imaged.layout}:{TAG}", f"oci:{one}:{TAG}")
        bundle = tmp_path / f"bundle-{arch}"
        subprocess.run(
            ["umoci", "unpack", "--rootless", "--image", f"{one}:{TAG}", str(bundle)],
            capture_output=True,
            text=True,
            check=True,
        )
        runtime = json.loads((bundle / "config.json").read_text())
        assert runtime["process"]["args"] == ["/hello-pgo"]  # the entrypoint, as a runtime would start it
        binary = bundle / "rootfs" / "hello-pgo"
        assert sorted(p.name for p in (bundle / "rootfs").iterdir()) == ["hello-pgo"]
        assert sha256_bytes(binary.read_bytes()) == manifests[triple]["artefacts"]["pgo"]["binary_sha256"]
        launcher = emulation.launcher(triple, clean_env()) if triple == ARM else ()
        done = train_workload(tmp_path / arch, REPO / "profiles" / "hello.toml", binary, launcher=launcher)
        assert [phase["name"] for phase in done.phases] == ["collatz", "words", "primes", "checksum"], done
        assert done.profraw_files is None  # a verify replay: the PGO binary writes no profile


@pytest.mark.refuses("image-release-fails-verify", "image-layout-already-exists", "image-no-source-url")
def test_a_release_missing_changed_or_imaged_twice_refused_without_a_layout(
    imaged: Imaged, released: Release, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / TAG
    assert_refused(_image(released, missing), f"no artefacts of {TAG} at {missing}")
    pgo_tar = f"hello-pgo-{TAG}-{ARM}-pgo.tar.gz"
    gone = released.download(tmp_path / "gone" / TAG)
    (gone / pgo_tar).unlink()
    assert_refused(_image(released, gone), f"{pgo_tar} is in SHA256SUMS but not in {gone}")
    _no_layout_left(gone)
    changed = released.download(tmp_path / "changed" / TAG)
    data = bytearray((changed / pgo_tar).read_bytes())
    data[-20] ^= 1
    (changed / pgo_tar).write_bytes(bytes(data))
    assert_refused(_image(released, changed), f"{pgo_tar} has sha256 ", "SHA256SUMS says")
    _no_layout_left(changed)
    assert_refused(
        _image(released, imaged.dist), f"{imaged.layout} already exists", "an image is written once: remove it"
    )
    plain = released.download(tmp_path / "nosource" / TAG)
    assert_refused(
        run_nox("image", released.env(), [TAG, "--artefacts", str(plain)]),
        "the image's org.opencontainers.image.source label needs the repository's URL",
        "or give --source URL",
    )
    _no_layout_left(plain)


@pytest.mark.refuses("image-no-linux-target", "image-glibc-targets-only", "image-one-platform-twice")
def test_no_linux_target_glibc_only_or_one_platform_twice_refused(imaged: Imaged) -> None:
    """The choice of targets on the release's own manifests, their triple or libc changed (a release of another
    operating system or of glibc only is not made here for this)."""
    name = f"hello-pgo-{TAG}-{X86}-manifest.json"
    x86 = release_manifest.parse(read_manifest(imaged.dist / name), name)
    arm_name = name.replace(X86, ARM)
    arm = release_manifest.parse(read_manifest(imaged.dist / arm_name), arm_name)
    chosen = choose_targets({name: x86, arm_name: arm}, TAG, imaged.dist)
    assert [str(p) for _, p in chosen.images] == ["linux/amd64", "linux/arm64/v8"] and chosen.notes == ()

    windows = dataclasses.replace(x86, triple="x86_64-pc-windows-gnu")
    with pytest.raises(PgoError) as refused:
        choose_targets({name: windows}, TAG, imaged.dist)
    assert refused.value.line().startswith(f"the release {TAG} in {imaged.dist} has no Linux target")

    glibc = dataclasses.replace(x86, triple="x86_64-unknown-linux-gnu", libc="glibc 2.17")
    with pytest.raises(PgoError) as refused:
        choose_targets({name: glibc}, TAG, imaged.dist)
    assert refused.value.line().startswith(
        "x86_64-unknown-linux-gnu's binary is linked against glibc 2.17: the image is FROM scratch, which has no C "
        "library, so it would not start (release a static target for the image"
    )
    beside = choose_targets({name: glibc, arm_name: arm, "w": windows}, TAG, imaged.dist)
    assert [m.triple for m, _ in beside.images] == [ARM]
    assert beside.notes == (
        "note: x86_64-pc-windows-gnu is not in the image: an OCI image of this kind runs Linux binaries",
        "note: x86_64-unknown-linux-gnu is not in the image: its binary needs glibc 2.17, which a scratch image "
        "has not",
    )

    static_gnu = dataclasses.replace(x86, triple="x86_64-unknown-linux-gnu")
    with pytest.raises(PgoError) as refused:
        choose_targets({name: x86, "g": static_gnu}, TAG, imaged.dist)
    assert refused.value.line().startswith(
        f"{X86} and x86_64-unknown-linux-gnu are both linux/amd64: an image index holds one image per platform"
    )


# --- verify: the layout checked against the release ----------------------------------------------------------------

ANOTHER = b"\x7fELF another binary"


def _forge(imaged: Imaged, root: Path, files: dict[str, bytes]) -> Path:
    """A copy of the release whose layout is ``files`` (consistent: every blob named by its digest), recorded in
    its SHA256SUMS and statement as nox -s image records it (a forger who rewrote every file)."""
    dist = Path(shutil.copytree(imaged.dist, root / TAG, ignore=shutil.ignore_patterns(LAYOUT)))
    write_dir(dist / LAYOUT, files)
    manifests = read_manifests(TAG, dist)
    record_image(dist, TAG, "hello-pgo", files, choose_targets(manifests, TAG, dist), SOURCE)
    return dist


def _release_images(imaged: Imaged) -> list[Image]:
    """The release's two images, amd64 first."""
    manifests = read_manifests(TAG, imaged.dist)
    images = [
        Image(platform, m.bin, pgo_binary(imaged.dist, m), labels_of(m, SOURCE), m.source_date_epoch)
        for m, platform in choose_targets(manifests, TAG, imaged.dist).images
    ]
    return sorted(images, key=lambda image: image.platform.architecture)


def _layout_of(imaged: Imaged, images: list[Image]) -> dict[str, bytes]:
    first = next(iter(read_manifests(TAG, imaged.dist).values()))
    return image_layout(images, TAG, annotations_of(first, SOURCE)).files


def _check(dist: Path) -> list[str]:
    return check_layout(TAG, dist, read_manifests(TAG, dist))


def _refused(dist: Path, *words: str) -> str:
    with pytest.raises(PgoError) as refused:
        _check(dist)
    line = refused.value.line()
    assert all(w in line for w in words), line
    assert line.endswith("(remove the layout and make it again: nox -s image)"), line
    return line


@pytest.mark.refuses(
    "verify-image-blob-not-its-digest",
    "verify-image-layer-not-the-release-binary",
    "verify-image-index-not-the-release-targets",
    "verify-image-layout-not-what-image-writes",
)
def test_verify_refuses_a_layout_that_is_not_the_release_s(imaged: Imaged, tmp_path: Path) -> None:
    """check_layout, which ``nox -s verify`` runs after its checks (its nox run is the first test's), on copies of the
    release whose layout was changed, each consistently (every blob named by its digest) but for the tampered one."""
    assert _check(imaged.dist)[-1] == (
        f"ok  {LAYOUT}: index {imaged.index_digest}, as nox -s image writes it from this release"
    )
    amd64, arm64 = _release_images(imaged)
    same = _forge(imaged, tmp_path / "same", _layout_of(imaged, [amd64, arm64]))
    assert _check(same) == _check(imaged.dist)  # the forger's tools make the release's layout from its images

    tampered = _forge(imaged, tmp_path / "tampered", _layout_of(imaged, [amd64, arm64]))
    blob = sorted((tampered / LAYOUT / "blobs" / "sha256").iterdir())[0]
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1  # its size kept: a blob of another size than its descriptor's is refused by its size, unread
    blob.write_bytes(bytes(data))
    _refused(tampered, f"the image layout's blob {blob.name[:12]} has sha256 ", "it is not the blob its name says")

    other = _forge(imaged, tmp_path / "other", _layout_of(imaged, [dataclasses.replace(amd64, binary=ANOTHER), arm64]))
    _refused(
        other,
        f"the linux/amd64 image's layer in {LAYOUT} holds a /hello-pgo of sha256 {sha256_bytes(ANOTHER)}",
        "not the release's PGO binary",
    )
    riscv = dataclasses.replace(amd64, platform=Platform("linux", "riscv64"))
    extra = _forge(imaged, tmp_path / "extra", _layout_of(imaged, [amd64, arm64, riscv]))
    _refused(extra, f"{LAYOUT}'s image index lists an image of linux/riscv64, which the release {TAG} has no static")
    fewer = _forge(imaged, tmp_path / "fewer", _layout_of(imaged, [amd64]))
    _refused(fewer, f"{LAYOUT}'s image index has no image of linux/arm64/v8 ({ARM})")
    relabelled = dataclasses.replace(arm64, labels={**arm64.labels, "pgo-recipes.profile.sha256": "0" * 64})
    labels = _forge(imaged, tmp_path / "labels", _layout_of(imaged, [amd64, relabelled]))
    # named by index.json, which names the image index whose digest the label changed (a blob named first would be
    # whichever digest sorts first: the release's digests change from run to run)
    _refused(labels, f"{LAYOUT}/index.json is not what nox -s image writes from this release (index sha256:")

    # a second file in the amd64 layer, beside the binary, and every document made again around that layer
    passwd = (b"root:x:0:0::/:/bin/sh\n", 0o644)
    two = tar_bytes({"hello-pgo": (amd64.binary, 0o755), "etc/passwd": passwd}, amd64.created)
    bigger = _forge(imaged, tmp_path / "bigger", _with_layer(_layout_of(imaged, [amd64, arm64]), "amd64", two))
    _refused(bigger, f"the linux/amd64 image's layer in {LAYOUT} holds 'etc', not only /hello-pgo")


@pytest.mark.refuses(
    "verify-image-index-not-the-recorded-one",
    "verify-image-statement-subject-not-the-index",
    "verify-image-recorded-half",
)
def test_verify_refuses_an_image_that_is_not_the_one_the_release_records(
    imaged: Imaged, released: Release, tmp_path: Path
) -> None:
    """The layout changed after the fact (made again with another label) but SHA256SUMS left as it was; the image's
    statement naming another digest; SHA256SUMS listing the index but not its statement. The first and last through
    nox -s verify, as a user runs it."""
    amd64, arm64 = _release_images(imaged)
    relabelled = dataclasses.replace(arm64, labels={**arm64.labels, "pgo-recipes.target": "elsewhere"})
    other = Path(shutil.copytree(imaged.dist, tmp_path / "changed" / TAG, ignore=shutil.ignore_patterns(LAYOUT)))
    files = _layout_of(imaged, [amd64, relabelled])
    write_dir(other / LAYOUT, files)
    new_digest = json.loads(files["index.json"])["manifests"][0]["digest"]
    assert_refused(
        run_nox("verify", released.env(), [TAG, "--artefacts", str(other)]),
        f"{LAYOUT}/index.json names the image index {new_digest}, SHA256SUMS records {imaged.index_digest}",
    )

    subject = Path(shutil.copytree(imaged.dist, tmp_path / "subject" / TAG))
    stated_path = subject / f"{INDEX}.intoto.json"
    stated = json.loads(stated_path.read_text())
    stated["subject"][0]["digest"]["sha256"] = new_digest.removeprefix("sha256:")
    stated_path.write_text(json.dumps(stated))
    sums = parse_sha256sums((subject / "SHA256SUMS").read_text())
    sums[stated_path.name] = sha256_bytes(stated_path.read_bytes())
    (subject / "SHA256SUMS").write_text(sha256sums_text(sums))
    line = _refused_recorded(subject)
    assert line.startswith(f"{INDEX}.intoto.json's subject is ") and new_digest.removeprefix("sha256:") in line, line
    assert f"not the image index SHA256SUMS records ({imaged.index_digest})" in line, line

    half = Path(shutil.copytree(imaged.dist, tmp_path / "half" / TAG))
    (half / f"{INDEX}.intoto.json").unlink()
    sums = parse_sha256sums((half / "SHA256SUMS").read_text())
    del sums[f"{INDEX}.intoto.json"]
    (half / "SHA256SUMS").write_text(sha256sums_text(sums))
    assert_refused(
        run_nox("verify", released.env(), [TAG, "--artefacts", str(half)]),
        f"SHA256SUMS lists {INDEX} but not {INDEX}.intoto.json: nox -s image adds both",
    )


def _refused_recorded(dist: Path) -> str:
    with pytest.raises(PgoError) as refused:
        _check(dist)
    return refused.value.line()


def _with_layer(files: dict[str, bytes], architecture: str, layer: bytes) -> dict[str, bytes]:
    """The layout ``files`` with the layer of ``architecture``'s image replaced, and every document that names it
    (config, manifest, image index, index.json) made again around it."""

    def load(digest: str) -> dict[str, Any]:
        data = json.loads(files[f"blobs/sha256/{digest.removeprefix('sha256:')}"])
        assert isinstance(data, dict)
        return data

    out = {k: v for k, v in files.items() if not k.startswith("blobs/")}

    def put(data: bytes, descriptor: dict[str, Any]) -> None:
        out[f"blobs/sha256/{sha256_bytes(data)}"] = data
        descriptor.update(digest=f"sha256:{sha256_bytes(data)}", size=len(data))

    top = json.loads(files["index.json"])
    index = load(top["manifests"][0]["digest"])
    for descriptor in index["manifests"]:
        manifest = load(descriptor["digest"])
        config = load(manifest["config"]["digest"])
        old = files[f"blobs/sha256/{manifest['layers'][0]['digest'].removeprefix('sha256:')}"]
        new = layer if descriptor["platform"]["architecture"] == architecture else old
        put(new, manifest["layers"][0])
        config["rootfs"]["diff_ids"] = [f"sha256:{sha256_bytes(new)}"]
        put(canonical_json(config), manifest["config"])
        put(canonical_json(manifest), descriptor)
    put(canonical_json(index), top["manifests"][0])
    out["index.json"] = canonical_json(top)
    return out


# --- rebuild: the image made again from the rebuilt binaries -------------------------------------------------------


@pytest.mark.refuses("rebuild-image-not-the-recorded-one")
def test_rebuild_makes_the_image_again_and_names_the_blob_that_differs(
    imaged: Imaged, released: Release, tmp_path: Path
) -> None:
    """One real ``nox -s rebuild`` of both targets (about 40 s) of a copy whose recorded image was made from another
    amd64 binary: the binaries match, the image does not, and the layer is named with diffoscope's report of the two
    layer tars. Then, with those rebuilt binaries, the function the session calls matches the release's own image and
    names the config of an image whose label was changed."""
    amd64, arm64 = _release_images(imaged)
    forged = _forge(
        imaged, tmp_path / "forged", _layout_of(imaged, [dataclasses.replace(amd64, binary=ANOTHER), arm64])
    )
    work = tmp_path / "work"
    proc = run_nox("rebuild", released.env(PGO_OUT=str(work)), [TAG, "--artefacts", str(forged)])
    line = assert_refused(proc, f"the image of {TAG} made again from the rebuilt binaries has index ")
    assert "the linux/amd64 layer differs (sha256:" in line and "diffoscope's report: " in line, line
    for triple in (X86, ARM):
        assert f"match     hello-pgo-{TAG}-{triple}-pgo.tar.gz" in proc.stdout + proc.stderr
    report = (work / "rebuild" / TAG / "image" / "diffoscope.txt").read_text()
    assert "image-layer-amd64-published.tar" in report and "hello-pgo" in report, report[:2000]

    rebuilt = {t: work / "rebuild" / TAG / t / "stripped" / "hello-pgo" for t in (X86, ARM)}
    assert rebuild_image(TAG, imaged.dist, rebuilt, WorkDir(tmp_path / "w1"), clean_env()) == [
        f"match     image index {imaged.index_digest}, made again from the rebuilt binaries"
    ]
    relabelled = dataclasses.replace(arm64, labels={**arm64.labels, "pgo-recipes.target": "elsewhere"})
    labels = _forge(imaged, tmp_path / "labels", _layout_of(imaged, [amd64, relabelled]))
    with pytest.raises(PgoError) as refused:
        rebuild_image(TAG, labels, rebuilt, WorkDir(tmp_path / "w2"), clean_env())
    assert "the linux/arm64/v8 config differs (sha256:" in refused.value.line(), refused.value.line()
    empty = tmp_path / "no-tools"  # no diffoscope on PATH: the hint names the package that writes the report
    empty.mkdir()
    with pytest.raises(PgoError) as refused:
        rebuild_image(TAG, forged, rebuilt, WorkDir(tmp_path / "w3"), {**clean_env(), "PATH": str(empty)})
    line = refused.value.line()
    assert "the linux/amd64 layer differs (sha256:" in line and "install diffoscope-minimal for diffoscope's" in line


# --- a glibc release on a base image (--base DIR@sha256:D) ---------------------------------------------------------

GNU = "x86_64-unknown-linux-gnu"
#: the glibc files of this machine the hello binary needs, as the base's one layer holds them
GLIBC = ("libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2")


@dataclasses.dataclass(frozen=True)
class MadeBase:
    folder: Path
    index: str  #: the digest of its image index (amd64 only)
    arm64: str  #: the digest of an arm64 manifest in the same layout, named by no index
    layer: str  #: the digest of its one layer (gzip)


def _put(folder: Path, data: bytes) -> str:
    path = folder / "blobs" / "sha256" / sha256_bytes(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"sha256:{sha256_bytes(data)}"


def _make_base(folder: Path) -> MadeBase:
    """A tiny glibc base made here from this machine's files, as skopeo copy would leave one: an OCI layout whose
    index lists one linux/amd64 image of one gzip layer (glibc and its loader), with an Env, a Cmd and a label."""
    lib = Path("/lib/x86_64-linux-gnu")
    files = {f"lib/x86_64-linux-gnu/{name}": ((lib / name).read_bytes(), 0o755) for name in GLIBC}
    files["lib64/ld-linux-x86-64.so.2"] = files["lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"]
    tar = tar_bytes(files, 1_700_000_000)
    layer = gzip.compress(tar, mtime=0)
    layer_digest = _put(folder, layer)
    (folder / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    manifests = {}
    for arch in ("amd64", "arm64"):
        config = {
            "architecture": arch,
            "os": "linux",
            "created": "2023-11-14T22:13:20Z",
            "config": {"Env": ["PATH=/bin", "LANG=C.UTF-8"], "Cmd": ["/bin/sh"], "Labels": {"base.label": "kept"}},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{sha256_bytes(tar)}"]},
            "history": [{"created": "2023-11-14T22:13:20Z", "created_by": "ADD glibc /"}],
        }
        config_data = json.dumps(config).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _put(folder, config_data),
                "size": len(config_data),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": len(layer)}
            ],
        }
        data = json.dumps(manifest, indent=2).encode()  # another tool's spacing: copied as it is, by digest
        manifests[arch] = (_put(folder, data), len(data))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifests["amd64"][0],
                "size": manifests["amd64"][1],
                "platform": {"architecture": "amd64", "os": "linux"},
            }
        ],
    }
    data = json.dumps(index).encode()
    index_digest = _put(folder, data)
    listed: dict[str, Any] = {**index["manifests"][0], "digest": index_digest, "size": len(data)}  # type: ignore[index]
    top = {"schemaVersion": 2, "manifests": [listed]}
    (folder / "index.json").write_text(json.dumps(top))
    return MadeBase(folder, index_digest, manifests["arm64"][0], layer_digest)


@pytest.fixture(scope="module")
def based(tmp_path_factory: pytest.TempPathFactory) -> tuple[Release, MadeBase]:
    """A release of hello for x86_64 glibc alone (about 20 s) and a base made here."""
    root = tmp_path_factory.mktemp("based")
    return Release.new(root / "release").made("--target", GNU), _make_base(root / "base")


@pytest.mark.refuses(
    "image-base-not-a-digest",
    "image-base-not-a-layout",
    "image-base-digest-not-in-layout",
    "image-base-lacks-platform",
    "rebuild-image-base-missing-or-other",
)
def test_a_glibc_target_on_a_base_image_run_verified_and_rebuilt(
    based: tuple[Release, MadeBase], tmp_path: Path
) -> None:
    """The glibc release imaged on the base: the base's layer first (its blob unchanged), then the binary's; the
    config the base's with the entrypoint and labels; unpacked by umoci and run with the base's loader and glibc;
    verify accepts it; the same index digest from another copy of release and base; rebuild refuses without the
    base, and its image function matches with it. Every refusal of the base before anything is written."""
    release, base = based
    gnu_manifest = json.loads((release.dist / f"hello-pgo-{TAG}-{GNU}-manifest.json").read_text())
    assert gnu_manifest["libc"].startswith("glibc"), gnu_manifest["libc"]
    dist = release.download(tmp_path / "a" / TAG)
    arg = f"{base.folder}@{base.index}"
    # refusals first, none leaving a layout
    for given, words in (
        (f"{base.folder}@sha256:abc", ("is not DIR@sha256:<64 hex digits>",)),
        (f"{tmp_path / 'nowhere'}@{base.index}", (f"{tmp_path / 'nowhere'} is not an OCI image layout",)),
        (f"{base.folder}@sha256:{'0' * 64}", (f"the base image layout {base.folder} has no blob sha256:{'0' * 64}",)),
        (f"{base.folder}@{base.arm64}", (f"the base {base.arm64[:19]} is an image of linux/arm64, not linux/amd64",)),
    ):
        assert_refused(_image(release, dist, "--base", given), *words)
        _no_layout_left(dist)
    tampered = Path(shutil.copytree(base.folder, tmp_path / "tampered"))
    layer_path = tampered / "blobs" / "sha256" / base.layer.removeprefix("sha256:")
    changed = bytearray(layer_path.read_bytes())
    changed[100] ^= 1
    layer_path.write_bytes(bytes(changed))
    assert_refused(
        _image(release, dist, "--base", f"{tampered}@{base.index}"),
        f"the blob {base.layer[:19]} of the base image layout {tampered} has sha256 ",
        "it is not the blob its name says",
    )
    _no_layout_left(dist)
    assert sorted(p.name for p in dist.iterdir()) == sorted(p.name for p in release.dist.iterdir())

    text = assert_ok(_image(release, dist, "--base", arg))
    found = re.search(r"index (sha256:[0-9a-f]{64}) \(1 platforms\)", text)
    assert found, text[-3000:]
    digest = found.group(1)
    assert f"linux/amd64  {GNU}  manifest sha256:" in text and f"on the base {base.index}" in text
    layout = dist / LAYOUT

    def blob(d: str) -> bytes:
        return (layout / "blobs" / "sha256" / d.removeprefix("sha256:")).read_bytes()

    index = json.loads(blob(digest))
    assert index["annotations"]["pgo-recipes.base"] == base.index
    (descriptor,) = index["manifests"]
    image = json.loads(blob(descriptor["digest"]))
    base_manifest = json.loads((base.folder / "blobs" / "sha256" / _amd64(base).removeprefix("sha256:")).read_text())
    assert image["layers"][0] == base_manifest["layers"][0]  # the base's layer first, its descriptor as it was
    assert blob(base.layer) == (base.folder / "blobs" / "sha256" / base.layer.removeprefix("sha256:")).read_bytes()
    assert len(image["layers"]) == 2 and image["annotations"] == {"org.opencontainers.image.base.digest": _amd64(base)}
    config = json.loads(blob(image["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/hello-pgo"] and "Cmd" not in config["config"]
    assert config["config"]["Env"] == ["PATH=/bin", "LANG=C.UTF-8"]
    assert config["config"]["Labels"]["base.label"] == "kept"
    assert config["config"]["Labels"]["pgo-recipes.base"] == base.index
    assert config["rootfs"]["diff_ids"][1:] == [image["layers"][1]["digest"]] and len(config["rootfs"]["diff_ids"]) == 2
    stated = json.loads((dist / f"{INDEX}.intoto.json").read_text())
    assert stated["predicate"]["buildDefinition"]["externalParameters"]["base"] == base.index
    assert stated["predicate"]["buildDefinition"]["resolvedDependencies"][-1] == {
        "name": "base",
        "digest": {"sha256": base.index.removeprefix("sha256:")},
        "annotations": {"platforms": ["linux/amd64"]},
    }

    # unpacked and run with the base's own loader and glibc
    one = tmp_path / "oci-one"
    _skopeo("copy", f"oci:{layout}:{TAG}", f"oci:{one}:{TAG}")
    bundle = tmp_path / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--rootless", "--image", f"{one}:{TAG}", str(bundle)], capture_output=True, check=True
    )
    runtime = json.loads((bundle / "config.json").read_text())
    assert runtime["process"]["args"] == ["/hello-pgo"] and "LANG=C.UTF-8" in runtime["process"]["env"]
    rootfs = bundle / "rootfs"
    assert sorted(p.name for p in rootfs.iterdir()) == ["hello-pgo", "lib", "lib64"]
    libs = rootfs / "lib" / "x86_64-linux-gnu"
    launcher = (str(rootfs / "lib64" / "ld-linux-x86-64.so.2"), "--library-path", str(libs))
    done = train_workload(tmp_path / "run", REPO / "profiles" / "hello.toml", rootfs / "hello-pgo", launcher=launcher)
    assert [phase["name"] for phase in done.phases] == ["collatz", "words", "primes", "checksum"], done

    verified = assert_ok(run_nox("verify", release.env(), [TAG, "--artefacts", str(dist)]))
    assert f"ok  {LAYOUT}: the linux/amd64 image holds {GNU}'s PGO binary on the base {base.index}'s 1 layers" in (
        verified
    )
    assert f"ok  {LAYOUT}: index {digest}, as nox -s image writes it from this release" in verified

    # the same release and base elsewhere: the same index digest
    other_base = Base(Path(shutil.copytree(base.folder, tmp_path / "b2" / "deeper")), base.index)
    other = release.download(tmp_path / "b" / TAG)
    manifests = read_manifests(TAG, other)
    made, _ = build_layout(TAG, other, manifests, SOURCE, other_base)
    assert made.index_digest == digest

    # verify refuses a layout whose image lacks the base's layer (every other blob made consistent around it)
    chosen = choose_targets(manifests, TAG, other, base.index)
    (gnu,) = [m for m, _ in chosen.images]
    below = other_base.image(Platform("linux", "amd64"))
    bare = dataclasses.replace(below, layers=())
    images = [
        Image(
            Platform("linux", "amd64"),
            "hello-pgo",
            pgo_binary(other, gnu),
            labels_of(gnu, SOURCE, base.index),
            gnu.source_date_epoch,
            bare,
        )
    ]
    files = image_layout(images, TAG, index_annotations(gnu, SOURCE, base.index)).files
    write_dir(other / LAYOUT, files)
    record_image(other, TAG, "hello-pgo", files, chosen, SOURCE, base.index)
    with pytest.raises(PgoError) as refused:
        check_layout(TAG, other, manifests)
    assert f"the linux/amd64 image of {LAYOUT} has not the layers of its base {base.index} (1)" in (
        refused.value.line()
    )

    # rebuild: without the base refused before anything is built; with it, the image made again matches
    work = tmp_path / "work"
    assert_refused(
        run_nox("rebuild", release.env(PGO_OUT=str(work)), [TAG, "--artefacts", str(dist)]),
        f"the image of {TAG} was made on the base {base.index}: rebuilding it needs that base",
        f"--base DIR@{base.index}",
    )
    assert not work.exists()
    binary = tmp_path / "rebuilt" / "hello-pgo"
    binary.parent.mkdir()
    binary.write_bytes(pgo_binary(dist, gnu))
    assert rebuild_image(TAG, dist, {GNU: binary}, WorkDir(tmp_path / "w"), clean_env(), other_base) == [
        f"match     image index {digest}, made again from the rebuilt binaries"
    ]
    with pytest.raises(PgoError) as refused:
        rebuild_image(TAG, dist, {GNU: binary}, WorkDir(tmp_path / "w"), clean_env(), Base(base.folder, base.arm64))
    assert refused.value.line().startswith(f"the image of {TAG} was made on the base {base.index}, --base names")


def _amd64(base: MadeBase) -> str:
    index = json.loads((base.folder / "blobs" / "sha256" / base.index.removeprefix("sha256:")).read_text())
    return str(index["manifests"][0]["digest"])
